"""Static figures for chapter 7 (inference): attention intensity in prefill and decode, the critical batch per
precision, 1D vs 2D weight-stationary communication (Appendix B), latency-bound AllGathers (Appendix C) and
speculative decoding (Appendix D). Each `render_*` returns a matplotlib Figure, or a message figure for bad
input; the interactive views are in `inference_views`.

Book ch. 7 "All About Transformer Inference".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.units import format_bytes, require_number, require_positive
from scalebook_utils.views._kit import INPUT_ERRORS, error_text, log_axes, message_figure
from scalebook_utils.views.ch07_common import COLORS, format_value

__all__ = [
    "render_intensity",
    "render_critical_batch",
    "render_weight_stationary",
    "render_allgather_latency",
    "render_speculative",
]


def render_intensity(chip="tpu-v5e", Gs: Sequence[int] = (1, 8), *, T_max: float = 65536) -> Figure:
    """Attention arithmetic intensity (FLOPs/byte, bf16) against the sequence length: prefill (S = T) grows like
    T·G/(G + 1), decode (T = 1) stays below G, against the chip's critical intensity (240 on v5e). Book ch. 7
    "What about attention?": ST/(S + T) for MHA, T/2 in prefill, ≈ 1 in decode."""
    try:
        spec = get_chip(chip)
        a = spec.critical_intensity("bf16")
        Gs = [int(g) for g in Gs]
        require_number("T_max", T_max, minimum=2)
        if not Gs or min(Gs) < 1:
            raise ValueError(f"G must be positive integers, got {Gs}")
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    x = np.geomspace(1, T_max, 200)
    for g, col in zip(Gs, ("#1f4e9c", "#e6550d", "#31a354", "#7b3294")):
        name = "MHA" if g == 1 else f"GQA G={g}"
        ax.plot(x, [tf.attention_intensity(t, t, g) for t in x], color=col, lw=2.2, label=f"prefill (S = T), {name}")
        ax.plot(
            x, [tf.attention_intensity(1, s, g) for s in x], color=col, lw=2.2, ls="--", label=f"decode (T = 1), {name}"
        )
    ax.axhline(a, color="#d62728", lw=1.5, label=f"{spec.name} critical intensity {a:.0f} FLOPs/byte (bf16 math)")
    t0 = 2 * a
    ax.plot([t0], [a], "o", color="#1f4e9c", ms=7, zorder=5)
    ax.annotate(
        f"MHA prefill compute-bound\nfor T > {t0:.0f}",
        (t0, a),
        xytext=(12, -38),
        textcoords="offset points",
        fontsize=8.5,
        arrowprops=dict(arrowstyle="-", color="0.4"),
    )
    log_axes(ax)
    ax.set_xlim(1, T_max)
    ax.set_ylim(0.4, T_max)
    ax.set_xlabel("length: T = S in prefill, S cached keys in decode (tokens)")
    ax.set_ylabel("arithmetic intensity (FLOPs / byte)")
    ax.set_title(
        "Attention intensity (bf16 Q, K, V): prefill grows with T, decode stays below G — always memory-bound",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def render_critical_batch(
    chips: Sequence[str] = ("tpu-v5e", "tpu-v5p", "tpu-v6e", "h100", "h200"),
    precisions: Sequence[str] = ("bf16", "int8-weights", "int8", "int4-weights"),
) -> Figure:
    """Grouped bars of B_crit = C_math·w/(2·W_hbm) (tokens; C_math the peak of the compute dtype, w bytes per weight) per chip and precision mode; a mode whose compute dtype a chip
    lacks is left out. Book ch. 7 "Linear operations: what bottlenecks us?" (v5e: 240, 120, 240, 60)."""
    try:
        specs = [get_chip(c) for c in chips]
        modes = [inf.get_precision(p) for p in precisions]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(10, 4.4), layout="constrained")
    ax = fig.add_subplot()
    width, seen = 0.8 / len(modes), set()
    for j, (p, col) in enumerate(zip(modes, ("#1f4e9c", "#e6550d", "#31a354", "#7b3294", "#8c6d31"))):
        for i, c in enumerate(specs):
            if p.compute_dtype not in c.peak_flops_per_s:
                continue
            v = inf.critical_batch(c, p)
            xi = i + (j - (len(modes) - 1) / 2) * width
            ax.bar(xi, v, width * 0.95, color=col, label=None if p.name in seen else p.label)
            ax.text(xi, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7.5)
            seen.add(p.name)
    ax.set_xticks(range(len(specs)), [c.name for c in specs])
    ax.set_xlabel("chip")
    ax.set_ylabel("critical batch B_crit (tokens)")
    ax.set_title("Decode matmuls turn compute-bound above B_crit = (C/W_hbm)·(weight bytes)/2", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, title="precision (what is stored, what the MXU runs)", title_fontsize=8)
    return fig


def render_weight_stationary(
    B: float = 1024, D: float = 8192, F_over_D: float = 4, chip="tpu-v5e", *, N_range=(8, 4096)
) -> Figure:
    """FFW block time against the chip count N: FLOPs 4BDF/(N·C), 1D weight-stationary comms (flat, N-independent;
    `inference.ws_1d_comms`) and 2D weight-stationary comms at the optimal X (∝ 1/√N), with the crossover
    N = 32·(F/D)/c² marked. Book ch. 7 Appendix B and Question 7 (F = 4D: N ≈ 72)."""
    try:
        require_positive(B=B, D=D, F_over_D=F_over_D)
        F = F_over_D * D
        N = np.geomspace(*N_range, 160)
        ws = [inf.weight_stationary_2d(B, D, F, n, chip) for n in N]
        one_d = inf.ws_1d_comms(B, D, chip)
        cross = inf.ws_2d_crossover_chips(D, F)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    us = 1e6
    ax.plot(N, [w.t_math * us for w in ws], color="black", lw=2, ls="--", label="FLOPs 4BDF/(N·C)")
    ax.plot(N, [one_d * us] * len(N), color="#1f4e9c", lw=2.2, label="1D weight-stationary comms (flat in N)")
    ax.plot(
        N,
        [w.t_comms * us for w in ws],
        color="#e6550d",
        lw=2.2,
        label="2D weight-stationary comms, X = √(DN/2F): 4·√(2F/(DN))·BD/W",
    )
    if N_range[0] < cross < N_range[1]:
        ax.axvline(cross, color="#d62728", lw=1.2, ls=":", label=f"crossover N = {cross:.0f}: 2D wins above")
    log_axes(ax)
    ax.set_xlim(*N_range)
    ax.set_xlabel("number of chips N sharing the FFW weights")
    ax.set_ylabel("time per FFW block (µs)")
    ax.set_title(
        f"B = {format_value(B)}, D = {format_value(D)}, F = {format_value(F_over_D)}·D on "
        f"{get_chip(chip).name}: 1D vs 2D weight-stationary",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def render_allgather_latency(chip="tpu-v5e", shards: Sequence[int] = (4, 8, 16), *, bytes_range=(1e3, 1e9)) -> Figure:
    """AllGather time against the array size on one ring: max(T_hop·n/2, bytes/W_ici) for several shard counts,
    each knee (`inference.latency_bound_bytes`) marked, and the book's decode activation (B = 16, D = 8192, int8:
    131 kB) placed. Book ch. 7 Appendix C (8-way: latency-bound below 360 kB)."""
    try:
        nb = np.geomspace(*bytes_range, 200)
        curves = {n: [inf.collective_time(b, n, chip) for b in nb] for n in shards}
        knees = {n: inf.latency_bound_bytes(n, chip) for n in shards}
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for n, col in zip(shards, ("#1f4e9c", "#e6550d", "#31a354", "#7b3294")):
        ax.plot(nb, np.array(curves[n]) * 1e6, color=col, lw=2, label=f"{n} shards: knee {format_bytes(knees[n])}")
        ax.plot([knees[n]], [inf.collective_time(knees[n], n, chip) * 1e6], "o", color=col, ms=6)
    act = 16 * 8192
    ax.axvline(act, color="0.3", lw=1.2, ls="--", label=f"decode activation B=16, D=8192, int8: {format_bytes(act)}")
    ax.axvspan(
        bytes_range[0],
        max(knees.values()),
        color=COLORS["mem"],
        lw=0,
        alpha=0.6,
        label="latency-bound for some shard count",
    )
    log_axes(ax)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_bytes(v) if v > 0 else ""))
    ax.set_xlim(*bytes_range)
    ax.set_xlabel("array size gathered (bytes, whole array)")
    ax.set_ylabel("AllGather time (µs)")
    ax.set_title(f"{get_chip(chip).name}: flat while latency-bound (≈1 µs per hop), then bytes/W_ici", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def render_speculative(draft_lens: Sequence[int] = (1, 2, 3, 4, 8), *, mark: float = 0.8) -> Figure:
    """Expected tokens per target-model step against the acceptance probability α for k drafted tokens:
    (1 − α^(k+1))/(1 − α) (`inference.speculative_tokens_per_step`). The formula is NOT in the book (ch. 7
    Appendix D describes the scheme); it is Leviathan et al. 2023, arXiv 2211.17192."""
    try:
        alphas = np.linspace(0, 0.99, 100)
        curves = {k: [inf.speculative_tokens_per_step(float(a), k) for a in alphas] for k in draft_lens}
        marks = {k: inf.speculative_tokens_per_step(mark, k) for k in draft_lens}
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["viridis"]
    for i, k in enumerate(draft_lens):
        col = cmap(0.85 * i / max(len(draft_lens) - 1, 1))
        ax.plot(alphas, curves[k], color=col, lw=2, label=f"k = {k} drafted: ≤ {k + 1} tokens")
        ax.plot([mark], [marks[k]], "o", color=col, ms=6)
    ax.axvline(mark, color="0.5", lw=1, ls=":", label=f"α = {mark:g}")
    ax.set_xlim(0, 1)
    ax.set_ylim(1, max(draft_lens) + 1.2)
    ax.set_xlabel("acceptance probability α of each drafted token")
    ax.set_ylabel("expected tokens per target-model step (tokens)")
    ax.set_title(
        "Speculative decoding: (1 − α^(k+1))/(1 − α) — external formula (Leviathan et al. 2023), not in the book",
        fontsize=9.5,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
