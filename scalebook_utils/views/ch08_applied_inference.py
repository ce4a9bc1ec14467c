"""Views for chapter 8 (serving LLaMA 3-70B on TPUs): the smallest slice per precision, latency and throughput
per configuration, the comm-bound check for model parallelism, prefill, disaggregation and the book's roofline
generator — readouts, figures and widgets over `inference` and `serving`.

The same three layers as `applied_training_views` (DESIGN §3): a pure *readout* returning one deterministic
line with a fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets
controls to both. Bad input gives a readable line and a message figure, never an exception. The chapter's
latency–throughput widgets (step time, context pareto, frontier) live in `inference_views`.

Every number comes from the cost model: `inference` (decode step, prefill, TP limits, disaggregation, KV
evictions) and `serving` (plans per slice, the book's roofline generator). Ch. 8 rounds LLaMA 3-70B to 70e9
parameters; `BOOK_70B` is that model (the preset counts 70.55e9, 0.8% more).

Book ch. 8 "Serving LLaMA 3-70B on TPUs".

This module holds sections 4–6 (prefill, disaggregation, the book's roofline); the others live beside it and are
re-exported here, so `applied_inference_views` keeps every chapter-facing name (the shared part's helpers stay in
it): `ch08_common` (prefixes, `BOOK_70B`, labels), `ch08_configs` (1, 2), `ch08_tp` (3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as SV
from scalebook_utils.core.inference.applied import DISAGG_PROMPTS, Disaggregation, disaggregation, disaggregation_curve
from scalebook_utils.core.units import format_bytes, format_time
from scalebook_utils.views._kit import (
    INPUT_ERRORS,
    PALETTE,
    attach,
    emit,
    error_text,
    format_number,
    message_figure,
    new_figure,
)
from scalebook_utils.views.ch08_common import (
    BOOK_70B,
    BOOK_CURVE_PREFIX,
    BOOK_PRECISIONS,
    CONFIG_PREFIX,
    DISAGG_PREFIX,
    PREFILL_PREFIX,
    SLICE_PREFIX,
    SLICES,
    TP_PREFIX,
    precision_label,
)
from scalebook_utils.views.ch08_common import fail_text as _fail
from scalebook_utils.views.ch08_common import model_label as _label
from scalebook_utils.views.ch08_common import plain_log_axes as _log_axes
from scalebook_utils.views.ch08_common import precision_meaning as _meaning
from scalebook_utils.views.ch08_common import safe_num as _safe_num
from scalebook_utils.views.ch08_configs import (
    BOOK_CONFIGS,
    config_readout,
    config_rows,
    config_text,
    render_configs,
    render_memory_per_slice,
    smallest_slice_readout,
    smallest_slice_rows,
    smallest_slice_text,
)
from scalebook_utils.views.ch08_tp import render_tp_check, tp_check, tp_check_readout, tp_check_widget

__all__ = [
    "SLICE_PREFIX",
    "CONFIG_PREFIX",
    "TP_PREFIX",
    "PREFILL_PREFIX",
    "DISAGG_PREFIX",
    "BOOK_CURVE_PREFIX",
    "BOOK_70B",
    "BOOK_PRECISIONS",
    "BOOK_CONFIGS",
    "SLICES",
    "precision_label",
    "smallest_slice_rows",
    "smallest_slice_text",
    "smallest_slice_readout",
    "render_memory_per_slice",
    "config_rows",
    "config_text",
    "config_readout",
    "render_configs",
    "tp_check",
    "tp_check_readout",
    "render_tp_check",
    "tp_check_widget",
    "prefill_readout",
    "render_prefill",
    "Disaggregation",
    "disaggregation",
    "disaggregation_readout",
    "render_disaggregation",
    "disaggregation_widget",
    "book_roofline_readout",
    "render_book_roofline",
]


# --- 4. prefill ----------------------------------------------------------------------------------------------


def prefill_readout(
    T: float = 8192, n_chips: int = 16, mfu: float = 0.4, model=BOOK_70B, chip="tpu-v5e", precision="bf16"
) -> str:
    """``prefill: T=8192 on 16 × tpu-v5e at MFU 40% → 910 ms (2·P·T = 1.15e+15 FLOPs) | with causal attention
    FLOPs 979 ms | weight loads 10.7 ms: compute-bound`` (book ch. 8 in-text question 10; the book's
    conventions, `inference.prefill_time(..., conventions="book")`: no communication term)."""
    head = f"{PREFILL_PREFIX}T={_safe_num(T)} on {n_chips} × {chip} at MFU {_pct(mfu)}"
    try:
        pf = inf.prefill_time(model, T, chip, n_chips, precision, mfu=mfu, conventions="book")
        att = inf.prefill_time(model, T, chip, n_chips, precision, mfu=mfu, include_attention=True, conventions="book")
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    bound = "compute-bound" if pf.t_math >= pf.t_hbm_weights else "weight-load-bound"
    return (
        f"{head} → {format_time(pf.time)} (2·P·T = {pf.flops:.3g} FLOPs) | with causal attention FLOPs "
        f"{format_time(att.time)} | weight loads {format_time(pf.t_hbm_weights)}: {bound}"
    )


def _pct(x) -> str:
    try:
        return f"{float(x):.0%}"
    except INPUT_ERRORS:
        return repr(x)


def render_prefill(
    model=BOOK_70B,
    chip="tpu-v5e",
    precision="bf16",
    mfu: float = 0.4,
    chips: Sequence[int] = (4, 8, 16, 32),
    *,
    T: float = 8192,
    T_range: tuple[float, float] = (128, 131072),
) -> Figure:
    """Prefill time against prompt length (log-log) for several slice sizes: 2·P·T/(N·C·MFU) (solid) and with the
    causal attention FLOPs (dashed); the weight-loading floor shows where short prompts stop being compute-bound."""
    try:
        Ts = np.geomspace(T_range[0], T_range[1], 120)
        book = dict(mfu=mfu, conventions="book")  # ch. 8's 2·P·T/(N·C·MFU): no communication term
        curves = {
            n: (
                [inf.prefill_time(model, t, chip, n, precision, **book).time for t in Ts],
                [inf.prefill_time(model, t, chip, n, precision, include_attention=True, **book).time for t in Ts],
            )
            for n in chips
        }
        here = {n: inf.prefill_time(model, T, chip, n, precision, mfu=mfu, conventions="book").time for n in chips}
        name, meaning = _label(model), _meaning(precision)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((8.5, 4.8))
    for i, (n, (plain, att)) in enumerate(curves.items()):
        color = PALETTE[i % len(PALETTE)]
        ax.plot(Ts, plain, color=color, lw=2, label=f"{n} chips")
        ax.plot(Ts, att, color=color, lw=1.2, ls="--")
        ax.plot([T], [here[n]], "o", color=color, ms=5)
        ax.text(T * 1.12, here[n], f"{format_time(here[n])}", fontsize=7.5, va="center", color=color)
    ax.plot([], [], color="0.3", ls="--", lw=1.2, label="with causal attention FLOPs")
    ax.axvline(T, color="0.5", lw=0.8)
    for s, txt in ((1, "1 s"), (0.1, "100 ms")):
        ax.axhline(s, color="0.7", lw=0.8, ls=":")
        ax.text(Ts[0] * 1.05, s * 1.06, txt, fontsize=7, color="0.4")
    _log_axes(ax)
    ax.set_xlabel("prompt length T (tokens)")
    ax.set_ylabel("prefill time (s)")
    ax.set_title(
        f"{name} {meaning} prefill on {get_chip(chip).name} at {_pct(mfu)} MFU\n"
        "T_prefill = 2·P·T / (N·C·MFU) on N chips",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


# --- 5. disaggregated serving ---------------------------------------------------------------------------------


def disaggregation_readout(
    prompt: int = 8192,
    decode: int = 512,
    B: int = 32,
    prefill_slice="4x4",
    generate_slice="4x4",
    precision="bf16",
    mfu: float = 0.4,
    model=BOOK_70B,
    chip="tpu-v5e",
) -> str:
    """``disaggregation: prompt=8192, decode=512, B=32, bf16 → prefill 4x4 at MFU 40%: 910 ms/prompt | generate
    4x4: 17.6 ms/step at 8448 tokens of context | 3.23 prefill servers per generate server (3.23 chips per
    generate chip) | evict 544 KV tokens/step; new prompts' KV in: 9.5 GB/s``."""
    head = f"{DISAGG_PREFIX}prompt={_safe_num(prompt)}, decode={_safe_num(decode)}, B={_safe_num(B)}, {precision}"
    try:
        d = disaggregation(prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    head = f"{DISAGG_PREFIX}prompt={prompt}, decode={decode}, B={B}, {_meaning(precision)}"
    return (
        f"{head} → prefill {prefill_slice} at MFU {_pct(mfu)}: {format_time(d.prefill.time)}/prompt | generate "
        f"{generate_slice}: {format_time(d.point.latency)}/step at {format_number(d.context)} tokens of context | "
        f"{d.ratio:.3g} prefill servers per generate server ({d.chip_ratio:.3g} chips per generate chip) | "
        f"evict {d.eviction.tokens_per_step:.4g} KV tokens/step; new prompts' KV in: "
        f"{format_bytes(d.kv_in_bytes_per_s)}/s"
    )


def _nice_log_limits(values) -> tuple[float, float]:
    """The finite positive `values`' range widened to the nearest 1, 2 or 5 × 10^k below and above: a log axis
    whose limits change only when the data crosses one of those steps (a slider moves the curves, not the axes)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return 0.1, 10.0
    steps = np.array([1.0, 2.0, 5.0, 10.0])

    def snap(x, down):
        k = math.floor(math.log10(x))
        m = x / 10.0**k
        m = steps[steps <= m * (1 + 1e-9)].max() if down else steps[steps >= m * (1 - 1e-9)].min()
        return float(m * 10.0**k)

    lo, hi = snap(v.min() / 1.15, True), snap(v.max() * 1.15, False)
    return lo, hi


def render_disaggregation(
    prompt: int = 8192,
    decode: int = 512,
    B: int = 32,
    prefill_slice="4x4",
    generate_slice="4x4",
    precision="bf16",
    mfu: float = 0.4,
    model=BOOK_70B,
    chip="tpu-v5e",
    *,
    decodes: Sequence[int] = (128, 512, 2048),
    decode_span: tuple[int, int] | None = None,
) -> Figure:
    """Left: prefill servers per generate server against prompt length for several decode lengths (curves stop
    where B sequences no longer fit the generate slice) and, in black, the current decode length, the current
    setting marked. Right: what one server of each pool finishes per second — their quotient is the ratio.

    The left y axis spans the curves drawn and, given `decode_span` = (shortest, longest decode), the curves of
    those lengths too (the ratio falls as decode grows), widened to 1-2-5 steps: the decode slider's widget passes
    its ends, so moving it moves the black curve and not the axes."""
    try:
        d = disaggregation(prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1.7, 1])
    curve = lambda g: disaggregation_curve(g, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    shown = []
    for i, g in enumerate(decodes):
        ys = curve(g)
        shown.append(ys)
        ax.plot(DISAGG_PROMPTS, ys, lw=1.5, color=PALETTE[i % len(PALETTE)], label=f"decode {g} tokens")
    ys = curve(decode)
    shown.append(ys)
    ax.plot(DISAGG_PROMPTS, ys, lw=2.6, color="k", label="current decode length")
    ax.plot([prompt], [d.ratio], "o", color="k", ms=7, zorder=5)
    ax.annotate(
        f"{d.ratio:.3g} : 1 at decode {decode}",
        (prompt, d.ratio),
        xytext=(8, -4),
        textcoords="offset points",
        fontsize=9,
    )
    ax.axhline(1, color="0.6", lw=0.8, ls=":")
    _log_axes(ax)
    span = [curve(g) for g in (decode_span or ())]
    ax.set_ylim(*_nice_log_limits([y for c in shown + span for y in c] + [d.ratio]))
    ax.set_xticks([256, 512, 1024, 2048, 4096, 8192, 16384, 32768])
    ax.set_xlabel("prompt length (tokens); a curve ends where B sequences no longer fit the generate slice")
    ax.set_ylabel("prefill servers per generate server")
    ax.set_title(
        f"{_label(model)} {_meaning(precision)}, B = {B}: prefill {prefill_slice} at {_pct(mfu)} MFU, "
        f"generate {generate_slice}",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    vals = [d.prefill_per_s, d.finished_per_s]
    bars = ax2.bar([0, 1], vals, color=[PALETTE[1], PALETTE[0]], width=0.6)
    for b, v in zip(bars, vals):
        ax2.text(b.get_x() + b.get_width() / 2, v, f"{v:.3g}/s", ha="center", va="bottom", fontsize=9)
    ax2.set_xticks(
        [0, 1],
        [
            f"prefill server ({prefill_slice}):\nprompts prefilled",
            f"generate server ({generate_slice}):\nsequences finished",
        ],
        fontsize=8.5,
    )
    ax2.set_ylim(0, max(vals) * 1.2)
    ax2.set_xlabel("one server of each pool")
    ax2.set_ylabel("sequences per second")
    ax2.set_title(f"ratio = {vals[1]:.3g} / {vals[0]:.3g} = {d.ratio:.3g}", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    return fig


def disaggregation_widget(
    prompt: int = 8192,
    decode: int = 512,
    B: int = 32,
    prefill_slice: str = "4x4",
    generate_slice: str = "4x4",
    precision: str = "bf16",
    mfu: float = 0.4,
    model=BOOK_70B,
    chip: str = "tpu-v5e",
) -> widgets.VBox:
    """Sliders for prompt length, decode length, batch "B" and MFU; precision and the two slices; prints
    `disaggregation_readout`."""
    pr_sl = widgets.IntSlider(value=prompt, min=512, max=16384, step=512, description="prompt", continuous_update=False)
    de_sl = widgets.IntSlider(value=decode, min=64, max=4096, step=64, description="decode", continuous_update=False)
    span = (de_sl.min, de_sl.max)  # the figure's y axis holds every decode length the slider reaches
    b_sl = widgets.IntSlider(value=B, min=1, max=128, description="B", continuous_update=False)
    mfu_sl = widgets.FloatSlider(
        value=mfu, min=0.1, max=1.0, step=0.05, description="MFU", readout_format=".0%", continuous_update=False
    )
    prec_dd = widgets.Dropdown(options=list(BOOK_PRECISIONS), value=precision, description="precision")
    opts = lambda s: list(SLICES) if s in SLICES else [s, *SLICES]
    pre_dd = widgets.Dropdown(options=opts(prefill_slice), value=prefill_slice, description="prefill on")
    gen_dd = widgets.Dropdown(options=opts(generate_slice), value=generate_slice, description="generate on")
    box = widgets.VBox()

    def view(prompt, decode, B, prefill_slice, generate_slice, precision, mfu):
        emit(
            box,
            disaggregation_readout(prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip),
            lambda: render_disaggregation(
                prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip, decode_span=span
            ),
            key=(prefill_slice, generate_slice, precision),
        )

    controls = {
        "prompt": pr_sl,
        "decode": de_sl,
        "B": b_sl,
        "prefill_slice": pre_dd,
        "generate_slice": gen_dd,
        "precision": prec_dd,
        "mfu": mfu_sl,
    }
    out = widgets.interactive_output(view, controls)
    box.children = [
        widgets.HBox([pr_sl, de_sl]),
        widgets.HBox([b_sl, mfu_sl]),
        widgets.HBox([prec_dd, pre_dd, gen_dd]),
        out,
    ]
    values = lambda: tuple(c.value for c in controls.values())
    named = {k: v for k, v in controls.items() if k != "mfu"} | {"MFU": mfu_sl}
    return attach(
        box,
        named,
        out,
        lambda: disaggregation_readout(*values(), model, chip),
        lambda: render_disaggregation(*values(), model, chip, decode_span=span),
    )


# --- 6. the book's roofline generator --------------------------------------------------------------------------


def book_roofline_readout(
    S: float = 8192, n_chips: int = 16, params: float = 70e9, bytes_per_param: float = 1, chip="tpu-v5e"
) -> str:
    """``book roofline: S=8192, 16 chips, 1 byte/param → largest batch 138 (the book's code: 34, 4.06× fewer) |
    B=1: 5.44 ms, 11.49 tokens/s/chip | B=138: 20.2 ms, 426 tokens/s/chip | book's last point B=34: …``
    (`serving.book_roofline_curve` with and without `book_compat`)."""
    head = f"{BOOK_CURVE_PREFIX}S={_safe_num(S)}, {n_chips} chips, {_safe_num(bytes_per_param)} byte/param"
    try:
        fixed = SV.book_roofline_curve(S, n_chips, params, bytes_per_param, chip=chip)
        book = SV.book_roofline_curve(S, n_chips, params, bytes_per_param, chip=chip, book_compat=True)
    except INPUT_ERRORS as exc:
        return _fail(head, exc)

    def pt(c, i):
        return f"B={c.batches[i]}: {format_time(c.latency[i])}, {c.tokens_per_s_per_chip[i]:.4g} tokens/s/chip"

    return (
        f"{head} → largest batch {fixed.max_batch} (the book's code: {book.max_batch}, "
        f"{fixed.max_batch / book.max_batch:.3g}× fewer) | {pt(fixed, 0)} | {pt(fixed, -1)} | "
        f"book's last point {pt(book, -1)}"
    )


def render_book_roofline(
    S_values: Sequence[float] = (2048, 8192, 32768),
    n_chips: int = 16,
    params: float = 70e9,
    bytes_per_param: float = 1,
    chip="tpu-v5e",
    *,
    model=BOOK_70B,
    precision="int8-weights",
) -> Figure:
    """Left: the book's generator, throughput against latency per context length: the fixed curve (to the true
    largest batch) and where the book's code stops (×, its max-batch bug). Right: at the middle context, the book's
    generator against our planner (`serving.plan_serving` on the same slice, which adds attention FLOPs and ICI)."""
    try:
        pairs = {
            S: (
                SV.book_roofline_curve(S, n_chips, params, bytes_per_param, chip=chip),
                SV.book_roofline_curve(S, n_chips, params, bytes_per_param, chip=chip, book_compat=True),
            )
            for S in S_values
        }
        S_mid = list(S_values)[len(S_values) // 2]
        plan = SV.plan_serving(model, chip, n_chips, precision, S_mid, batches=range(1, pairs[S_mid][0].max_batch + 1))
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.8), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    for i, (S, (fixed, book)) in enumerate(pairs.items()):
        color = PALETTE[i % len(PALETTE)]
        lat = np.array(fixed.latency) * 1e3
        ax.plot(
            lat, fixed.tokens_per_s_per_chip, color=color, lw=2, label=f"S = {format_number(S)}: B ≤ {fixed.max_batch}"
        )
        ax.plot(np.array(book.latency) * 1e3, book.tokens_per_s_per_chip, color=color, lw=5, alpha=0.35)
        ax.plot([book.latency[-1] * 1e3], [book.tokens_per_s_per_chip[-1]], "x", color=color, ms=10, mew=2.5)
    ax.plot([], [], color="0.4", lw=5, alpha=0.35, label="the book's code (stops at ×)")
    _log_axes(ax, y=False)
    lo = min(min(f.latency) for f, _b in pairs.values()) * 1e3
    hi = max(max(f.latency) for f, _b in pairs.values()) * 1e3
    ax.set_xticks([t for t in (4, 5, 6, 8, 10, 15, 20, 30, 40, 60, 80, 100, 150, 200) if lo * 0.9 <= t <= hi * 1.1])
    ax.set_xlabel("latency per decode step (ms, log scale)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    fig.suptitle(
        f"the book's roofline generator and our planner, {n_chips} × {get_chip(chip).name}: {_meaning(precision)}",
        fontsize=10,
    )
    ax.set_title(
        f"the book's generator: {format_number(params / 1e9)}B params, {format_number(bytes_per_param)} byte each",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", bbox_to_anchor=(1, 0.2), fontsize=8)  # raised off the long-context curve's end
    fixed = pairs[S_mid][0]
    ax2.plot(
        np.array(fixed.latency) * 1e3,
        fixed.tokens_per_s_per_chip,
        color=PALETTE[0],
        lw=2,
        label="book's generator (fixed): KV + max(FLOPs, weights)",
    )
    ours = np.array([p.tokens_per_s_per_chip for p in plan.points])
    gap = np.max(np.abs(ours / np.array(fixed.tokens_per_s_per_chip) - 1))
    ax2.plot(
        [p.latency * 1e3 for p in plan.points],
        ours,
        color=PALETTE[1],
        lw=2,
        ls="--",
        label="serving.plan_serving (adds attention FLOPs and ICI): "
        + ("identical here" if gap < 1e-9 else f"at most {gap:.2%} apart"),
    )
    for b in (1, 32, 120):
        if b <= fixed.max_batch:
            ax2.plot([fixed.latency[b - 1] * 1e3], [fixed.tokens_per_s_per_chip[b - 1]], "o", color=PALETTE[0], ms=4)
            ax2.annotate(
                f"B={b}",
                (fixed.latency[b - 1] * 1e3, fixed.tokens_per_s_per_chip[b - 1]),
                xytext=(5, -10),
                textcoords="offset points",
                fontsize=8,
            )
    ax2.set_xlabel("latency per decode step (ms)")
    ax2.set_ylabel("throughput (tokens/s per chip)")
    ax2.set_title(f"S = {format_number(S_mid)}: the book's curve against our planner", fontsize=10)
    ax2.grid(True, alpha=0.3)
    ax2.legend(loc="lower right", fontsize=8)
    return fig
