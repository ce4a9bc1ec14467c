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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from . import inference as I
from . import serving as SV
from . import transformer as tf
from .hardware import get_chip
from .inference_views import _log_axes as _log_scale
from .training_views import format_rows
from .transformer_views import PALETTE, new_figure
from .units import format_bytes, format_time
from .widgets import INPUT_ERRORS, _attach, _emit, _message_figure, error_text, format_number

__all__ = [
    "SLICE_PREFIX", "CONFIG_PREFIX", "TP_PREFIX", "PREFILL_PREFIX", "DISAGG_PREFIX", "BOOK_CURVE_PREFIX",
    "BOOK_70B", "BOOK_PRECISIONS", "BOOK_CONFIGS", "SLICES", "precision_label",
    "smallest_slice_rows", "smallest_slice_text", "smallest_slice_readout", "render_memory_per_slice",
    "config_rows", "config_text", "config_readout", "render_configs",
    "tp_check", "tp_check_readout", "render_tp_check", "tp_check_widget",
    "prefill_readout", "render_prefill",
    "Disaggregation", "disaggregation", "disaggregation_readout", "render_disaggregation", "disaggregation_widget",
    "book_roofline_readout", "render_book_roofline",
]

#: Readout prefixes (browser tests wait for them; do not change).
SLICE_PREFIX = "smallest slice: "
CONFIG_PREFIX = "serving config: "
TP_PREFIX = "tp check: "
PREFILL_PREFIX = "prefill: "
DISAGG_PREFIX = "disaggregation: "
BOOK_CURVE_PREFIX = "book roofline: "

#: LLaMA 3-70B as ch. 8 counts it: 70e9 parameters (the preset's architecture and KV size).
BOOK_70B = I.served_model("llama3-70b", params=70e9)
#: The chapter's three modes: bf16 everything; int8 / int4 weights and KV cache with bf16 FLOPs.
BOOK_PRECISIONS = ("bf16", "int8-weights", "int4-weights")
#: TPU v5e slices the chapter uses (power-of-two chip counts, the book's shapes).
SLICES = ("2x2", "4x2", "4x4", "4x8", "8x8", "8x16", "16x16")

def precision_label(precision) -> str:
    """The project's name of a precision mode, the same in every chapter: 'int8-weights' (int8 params and KV,
    bf16 FLOPs — what book ch. 8 calls "int8") stays 'int8-weights', never shortened to 'int8', which is the
    mode with int8 FLOPs too. For tick labels; readout heads and titles print `_meaning(...)` as well."""
    return I.get_precision(precision).name


def _meaning(precision) -> str:
    """'int8-weights (int8 weights + KV, bf16 math)' (`inference.Precision.label`)."""
    return I.get_precision(precision).label


def _label(model) -> str:
    """'llama3-70b (70B params)' — the parameter count shows which rounding a number uses."""
    m = I.served_model(model)
    return f"{m.name} ({m.params / 1e9:.4g}B params)"


def _shape(chip, slice_) -> tuple[int, tuple[int, ...]]:
    """(chips, shape) of a slice given as "4x4", (4, 4) or a chip count; ValueError beyond one pod."""
    return SV._slice(get_chip(chip), slice_)


def _shape_text(shape) -> str:
    return "x".join(map(str, shape))


def _gb(x: float) -> str:
    return format_bytes(x)


def _log_axes(ax, *, x: bool = True, y: bool = True) -> None:
    """`inference_views`' log axes (plain labels), without minor ticks: they make constrained layout ~2× slower."""
    _log_scale(ax, x=x, y=y)
    for on, axis in ((x, ax.xaxis), (y, ax.yaxis)):
        if on:
            axis.set_minor_locator(NullLocator())


def _fail(prefix_head: str, exc: BaseException) -> str:
    return f"{prefix_head} → cannot evaluate: {error_text(exc)}"


# --- 1. what serving needs in memory: the smallest slice per precision --------------------------------------


def smallest_slice_rows(model=BOOK_70B, chip="tpu-v5e", S: float = 8192, precisions: Sequence = BOOK_PRECISIONS,
                        *, doubled: bool = False) -> list[dict]:
    """Per precision (book ch. 8 in-text questions 5–8): weight bytes, KV bytes per token, weights ÷ HBM per chip,
    the smallest power-of-two slice that holds the weights (`inference.min_chips`, KV ignored), doubled when
    `doubled`, the HBM left for KV caches (`free_hbm`) and how many S-token caches fit (`max_batch`).
    Numbers are floats/ints in SI units; keys: precision, weights, kv_per_token, weight_chips, chips, slice,
    free, B_max, memory (weights + B_max caches), hbm (the slice's HBM)."""
    c, m = get_chip(chip), I.served_model(model)
    rows = []
    for p in precisions:
        n = I.min_chips(m, c, p) * (2 if doubled else 1)
        _n, shape = _shape(c, n)
        b = I.max_batch(m, S, c, n, p)
        rows.append({"precision": I.get_precision(p).name, "weights": m.weight_bytes(p),
                     "kv_per_token": m.kv_bytes_per_token(p), "weight_chips": m.weight_bytes(p) / c.hbm_bytes,
                     "chips": n, "slice": _shape_text(shape), "free": I.free_hbm(m, c, n, p), "B_max": b,
                     "memory": I.inference_memory(m, b, S, p), "hbm": n * c.hbm_bytes})
    return rows


def smallest_slice_text(model=BOOK_70B, chip="tpu-v5e", S: float = 8192, precisions: Sequence = BOOK_PRECISIONS,
                        *, doubled: bool = False) -> str:
    """`smallest_slice_rows` as the book's table (rounded text, deterministic)."""
    cells = [{"precision": precision_label(r["precision"]), "params": _gb(r["weights"]),
              "KV/token": format_bytes(r["kv_per_token"]), "params ÷ HBM/chip": f"{r['weight_chips']:.3g}",
              "chips": str(r["chips"]), "slice": r["slice"], "HBM free for KV": _gb(r["free"]),
              f"{format_number(S)}-token caches": str(r["B_max"])} for r in
             smallest_slice_rows(model, chip, S, precisions, doubled=doubled)]
    return format_rows(cells)


def smallest_slice_readout(precision="bf16", model=BOOK_70B, chip="tpu-v5e", S: float = 8192, *,
                           doubled: bool = False) -> str:
    """``smallest slice: llama3-70b (70B params) in bf16, S=8192 → weights 140 GB = 8.75 chips → 16 chips (4x4) |
    116 GB free → 43 caches of 8192 tokens (2.68 GB each)``."""
    head = f"{SLICE_PREFIX}{_safe_label(model)} in {precision}, S={_safe_num(S)}"
    try:
        head = f"{SLICE_PREFIX}{_label(model)} in {_meaning(precision)}, S={format_number(S)}"
        r = smallest_slice_rows(model, chip, S, (precision,), doubled=doubled)[0]
        per_seq = I.kv_cache_bytes(model, 1, S, precision)
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    how = "doubled: " if doubled else ""
    return (f"{head} → weights {_gb(r['weights'])} = {r['weight_chips']:.3g} chips → {how}{r['chips']} chips "
            f"({r['slice']}) | {_gb(r['free'])} free → {r['B_max']} caches of {format_number(S)} tokens "
            f"({_gb(per_seq)} each)")


def _safe_label(model) -> str:
    try:
        return _label(model)
    except INPUT_ERRORS:
        return str(model)


def _safe_num(x) -> str:
    try:
        return format_number(x)
    except INPUT_ERRORS:
        return repr(x)


def render_memory_per_slice(model=BOOK_70B, chip="tpu-v5e", S: float = 8192,
                            precisions: Sequence = BOOK_PRECISIONS) -> Figure:
    """Stacked bars per precision, for the smallest slice and the doubled one: weights + the largest batch of
    S-token KV caches, against the slice's HBM (red tick). Book ch. 8 in-text questions 5 and 8."""
    try:
        small = smallest_slice_rows(model, chip, S, precisions)
        big = smallest_slice_rows(model, chip, S, precisions, doubled=True)
        name = _label(model)
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(9.0, 4.6), layout="constrained")
    ax = fig.add_subplot()
    rows = [r for pair in zip(small, big) for r in pair]
    x = np.arange(len(rows)) + np.repeat(np.arange(len(small)) * 0.6, 2)
    w = np.array([r["weights"] for r in rows]) / 1e9
    kv = np.array([r["memory"] - r["weights"] for r in rows]) / 1e9
    ax.bar(x, w, width=0.8, color=PALETTE[0], label="weights")
    ax.bar(x, kv, width=0.8, bottom=w, color=PALETTE[1], alpha=0.85,
           label=f"KV caches at the largest batch ({format_number(S)} tokens each)")
    for i, r in enumerate(rows):
        hbm = r["hbm"] / 1e9
        ax.hlines(hbm, x[i] - 0.45, x[i] + 0.45, color=PALETTE[4], lw=2.2, label="HBM of the slice" if i == 0 else None)
        ax.text(x[i], hbm * 1.02, f"B={r['B_max']}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [f"{precision_label(r['precision'])}\n{r['slice']} ({r['chips']})" for r in rows], fontsize=8.5)
    ax.set_ylim(0, max(r["hbm"] for r in rows) / 1e9 * 1.12)
    ax.set_xlabel("precision, slice (chips): smallest slice, then doubled")
    ax.set_ylabel("memory (GB)")
    ax.set_title(f"{name} on {get_chip(chip).name}: weights + KV caches fill the slice's HBM", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return fig


# --- 2. latency and throughput per configuration ------------------------------------------------------------

#: (precision, slice) pairs of ch. 8 "Thinking about throughput": each precision on its smallest slice and doubled.
BOOK_CONFIGS = (("bf16", "4x4"), ("int8-weights", "4x2"), ("int4-weights", "2x2"),
                ("bf16", "4x8"), ("int8-weights", "4x4"), ("int4-weights", "4x2"))


def _point(model, chip, slice_, precision, S, B):
    """(plan, the ServingPoint at batch B — the largest that fits, HBM full, when B is None)."""
    if B is None:
        plan = SV.plan_serving(model, chip, slice_, precision, S)
        return plan, plan.points[-1]  # the batch grid ends at B_max
    plan = SV.plan_serving(model, chip, slice_, precision, S, batches=[B])
    return plan, plan.points[0]


def config_rows(model=BOOK_70B, chip="tpu-v5e", S: float = 8192, configs: Sequence = BOOK_CONFIGS, *,
                B: int | None = None, decode_len: float = 512) -> list[dict]:
    """One row per (precision, slice) from `serving.plan_serving`: feasible batches, the lowest latency (B = 1),
    and at batch B (default: the largest that fits) the step time, tokens/s/chip, queries/s/chip for
    `decode_len`-token answers and $ per million tokens. Keys: precision, slice, chips, B_max, B, min_latency,
    latency, tokens_per_s_per_chip, queries_per_s_per_chip, cost, bound, step (the `DecodeStep`)."""
    rows = []
    for precision, slice_ in configs:
        plan, pt = _point(model, chip, slice_, precision, S, B)
        rows.append({"precision": plan.precision, "slice": _shape_text(plan.shape), "chips": plan.n_chips,
                     "B_max": plan.B_max, "B": pt.B, "min_latency": plan.min_latency.latency,
                     "latency": pt.latency, "tokens_per_s_per_chip": pt.tokens_per_s_per_chip,
                     "queries_per_s_per_chip": pt.step.queries_per_s_per_chip(decode_len),
                     "cost": pt.cost_per_million_tokens, "bound": pt.bottleneck, "step": pt.step})
    return rows


def config_text(model=BOOK_70B, chip="tpu-v5e", S: float = 8192, configs: Sequence = BOOK_CONFIGS, *,
                B: int | None = None, decode_len: float = 512) -> str:
    """`config_rows` as a table (rounded text)."""
    cells = [{"precision": precision_label(r["precision"]), "slice": f"{r['slice']} ({r['chips']})",
              "B": format_number(r["B"]),
              "ms/step at B=1": f"{r['min_latency'] * 1e3:.3g}", "ms/step at B": f"{r['latency'] * 1e3:.3g}",
              "tokens/s/chip": f"{r['tokens_per_s_per_chip']:.4g}",
              f"queries/s/chip ({format_number(decode_len)} tokens)": f"{r['queries_per_s_per_chip']:.3g}",
              "$/1M tokens": "-" if r["cost"] is None else f"{r['cost']:.3g}", "bound by": r["bound"]}
             for r in config_rows(model, chip, S, configs, B=B, decode_len=decode_len)]
    return format_rows(cells)


def config_readout(precision="int8-weights", slice_="4x2", model=BOOK_70B, chip="tpu-v5e", S: float = 8192,
                   B: int | None = None, decode_len: float = 512) -> str:
    """``serving config: llama3-70b (70B params) int8 on tpu-v5e 4x2, S=8192 → batch 1 … 43 fits | B=43:
    19.5 ms/step, 276.1 tokens/s/chip, 0.539 queries/s/chip (512-token answers), $1.21/1M tokens (weights-bound)``."""
    head = f"{CONFIG_PREFIX}{_safe_label(model)} {precision} on {chip} {slice_}, S={_safe_num(S)}"
    try:
        head = (f"{CONFIG_PREFIX}{_label(model)} {_meaning(precision)} on {get_chip(chip).name} {slice_}, "
                f"S={format_number(S)}")
        r = config_rows(model, chip, S, ((precision, slice_),), B=B, decode_len=decode_len)[0]
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    cost = "" if r["cost"] is None else f", ${r['cost']:.3g}/1M tokens"
    return (f"{head} → batch 1 … {r['B_max']} fits | B={format_number(r['B'])}: {format_time(r['latency'])}/step, "
            f"{r['tokens_per_s_per_chip']:.4g} tokens/s/chip, {r['queries_per_s_per_chip']:.3g} queries/s/chip "
            f"({format_number(decode_len)}-token answers){cost} ({r['bound']}-bound)")


_TERMS = (("t_hbm_weights", "load weights (HBM)", PALETTE[0]), ("t_hbm_kv", "load KV caches (HBM)", PALETTE[1]),
          ("t_math", "matmul FLOPs (MLP, projections)", PALETTE[2]), ("t_math_attention", "attention FLOPs", PALETTE[3]),
          ("t_ici", "TP collectives (ICI)", "0.55"))


def render_configs(model=BOOK_70B, chip="tpu-v5e", S: float = 8192, configs: Sequence = BOOK_CONFIGS, *,
                   B: int | None = None) -> Figure:
    """Left: each term of the decode step (milliseconds) and the step itself (black tick) per configuration at batch
    B (default: the largest that fits). Right: tokens/s per chip, labelled with $/1M tokens."""
    try:
        rows = config_rows(model, chip, S, configs, B=B)
        name = _label(model)
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1.8, 1])
    y = np.arange(len(rows))[::-1]
    h = 0.8 / len(_TERMS)
    for k, (attr, label, color) in enumerate(_TERMS):
        vals = np.array([getattr(r["step"], attr) for r in rows]) * 1e3
        ax.barh(y + 0.4 - h * (k + 0.5), vals, height=h, color=color, label=label)
    steps = np.array([r["latency"] for r in rows]) * 1e3
    ax.vlines(steps, y - 0.45, y + 0.45, color="k", lw=2, label="step time (KV + max(FLOPs, weights); ICI overlapped)")
    for yi, s in zip(y, steps):
        ax.text(s * 1.02, yi + 0.3, f"{s:.3g} ms", fontsize=8, va="center")
    labels = [f"{precision_label(r['precision'])} {r['slice']}\nB={format_number(r['B'])}" for r in rows]
    ax.set_yticks(y, labels, fontsize=8.5)
    ax.set_xlim(0, steps.max() * 1.25)
    ax.set_xlabel("time per decode step (ms)")
    ax.set_ylabel("configuration (precision, slice, batch)")
    ax.set_title(f"{name}, {format_number(S)}-token context: what each decode step spends its time on", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8)
    tput = np.array([r["tokens_per_s_per_chip"] for r in rows])
    ax2.barh(y, tput, height=0.6, color=PALETTE[0])
    for yi, r in zip(y, rows):
        money = "" if r["cost"] is None else f"  ${r['cost']:.3g}/1M"
        ax2.text(r["tokens_per_s_per_chip"] * 1.02, yi, f"{r['tokens_per_s_per_chip']:.0f}{money}", va="center", fontsize=8)
    ax2.set_yticks(y, labels, fontsize=8.5)
    ax2.set_xlim(0, tput.max() * 1.45)
    ax2.set_xlabel("throughput (tokens/s per chip)")
    ax2.set_ylabel("configuration")
    ax2.set_title("throughput and cost per million tokens", fontsize=10)
    ax2.grid(True, axis="x", alpha=0.3)
    return fig


# --- 3. which sharding: the comm-bound check for model parallelism ---------------------------------------------


def tp_check(model="llama3-70b", chip="tpu-v5e", slice_="4x8", precision="bf16", B: float = 64, *,
             beta: float | None = None) -> dict:
    """Ch. 8 in-text question 9 on a slice used as one model-parallel axis of Y = all its chips, spanning M_Y
    torus axes (the dims longer than 1):

    - large batch (compute-bound matmuls): comm-bound when Y > F·M_Y/α_ici (`tp_limit_large_batch`);
    - small batch (memory-bound): comm-bound when Y > F/(B·β) (`tp_limit_small_batch`; β the chip's W_hbm/W_ici
      unless `beta`, the book uses 8);
    - one [B, D]·[D, F] matmul with F sharded Y ways: T_math, T_hbm, T_ici (`tp_matmul_times`, one ICI axis
      as the book writes it) and which one bounds it.

    Returns a dict: model, chip, precision, slice, Y, M_Y, B, B_crit, large_limit, small_limit, times, bound,
    comm_bound_large, comm_bound_small, comm_bound_at_B (T_ici above both other terms)."""
    cfg, c, p = tf.get_model(model), get_chip(chip), I.get_precision(precision)
    Y, shape = _shape(c, slice_)
    M_Y = max(1, sum(1 for d in shape if d > 1))
    large = I.tp_limit_large_batch(cfg.F, c, p, M_Y=M_Y)
    small = I.tp_limit_small_batch(cfg.F, B, c, p, beta=beta)
    t = I.tp_matmul_times(B, cfg.D, cfg.F, Y, c, p)
    return {"model": cfg.name, "chip": c.name, "precision": p.name, "slice": _shape_text(shape), "Y": Y, "M_Y": M_Y,
            "B": B, "B_crit": I.critical_batch(c, p), "large_limit": large, "small_limit": small, "times": t,
            "bound": t.bottleneck, "comm_bound_large": Y > large, "comm_bound_small": Y > small,
            "comm_bound_at_B": t.bottleneck == "ICI"}


def _verdict(bound: bool) -> str:
    return "comm-bound" if bound else "OK"


def tp_check_readout(slice_="4x8", precision="bf16", B: float = 64, model="llama3-70b", chip="tpu-v5e", *,
                     beta: float | None = None) -> str:
    """``tp check: llama3-70b bf16 on tpu-v5e 4x8 (Y=32, M_Y=2), B=64 → large batch: Y ≤ F·M_Y/α_ici = 26.2 →
    comm-bound | small batch: Y ≤ F/(B·β) = 49.2 → OK | one matmul: T_math 4.77 us, T_hbm 17.9 us,
    T_ici 11.7 us → HBM bandwidth-bound``."""
    head = f"{TP_PREFIX}{model} {precision} on {chip} {slice_}"
    try:
        r = tp_check(model, chip, slice_, precision, B, beta=beta)
    except INPUT_ERRORS as exc:
        return f"{head}, B={_safe_num(B)} → cannot evaluate: {error_text(exc)}"
    t = r["times"]
    b = "β" if beta is None else f"β={format_number(beta)}"
    return (f"{TP_PREFIX}{r['model']} {_meaning(r['precision'])} on {r['chip']} {r['slice']} "
            f"(Y={r['Y']}, M_Y={r['M_Y']}), "
            f"B={format_number(B)} → large batch: Y ≤ F·M_Y/α_ici = {r['large_limit']:.3g} → "
            f"{_verdict(r['comm_bound_large'])} | small batch: Y ≤ F/(B·{b}) = {r['small_limit']:.3g} → "
            f"{_verdict(r['comm_bound_small'])} | one matmul: T_math {format_time(t.t_math)}, "
            f"T_hbm {format_time(t.t_hbm)}, T_ici {format_time(t.t_ici)} → {r['bound']}-bound")


def render_tp_check(slice_="4x8", precision="bf16", B: float = 64, model="llama3-70b", chip="tpu-v5e", *,
                    beta: float | None = None, B_range: tuple[float, float] = (1, 2048)) -> Figure:
    """Left: the largest TP degree that is not communication-bound against the batch — F/(B·β) for memory-bound
    matmuls, F·M_Y/α_ici for compute-bound ones; the region above both is ICI-bound — with the slice's Y and the
    current B marked. Right: T_math, T_hbm and T_ici of one matmul against B at the slice's Y (microseconds)."""
    try:
        r = tp_check(model, chip, slice_, precision, B, beta=beta)
        Bs = np.geomspace(B_range[0], B_range[1], 200)
        small = np.array([I.tp_limit_small_batch(tf.get_model(model).F, b, chip, precision, beta=beta) for b in Bs])
        cfg = tf.get_model(model)
        times = [I.tp_matmul_times(b, cfg.D, cfg.F, r["Y"], chip, precision) for b in Bs]
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    large = r["large_limit"]
    env = np.maximum(small, large)
    top = max(env.max(), r["Y"]) * 4
    ax.fill_between(Bs, env, top, color=PALETTE[4], alpha=0.12, label="ICI-bound (T_ici above T_math and T_hbm)")
    b = beta if beta else round(I.hbm_ici_beta(chip), 2)
    ax.plot(Bs, small, color=PALETTE[1], lw=2, label=f"memory-bound limit F/(B·β), β = {format_number(b)}")
    ax.axhline(large, color=PALETTE[2], lw=2,
               label=f"compute-bound limit F·M_Y/α_ici = {large:.3g} (M_Y = {r['M_Y']})")
    ax.axhline(r["Y"], color="k", lw=1.2, ls="--", label=f"this slice: Y = {r['Y']} ({r['slice']})")
    ax.axvline(B, color="0.4", lw=1)
    ax.plot([B], [r["Y"]], "o", color=PALETTE[4] if r["comm_bound_at_B"] else PALETTE[0], ms=8, zorder=5)
    _log_axes(ax)
    ax.set_xlim(*B_range)
    ax.set_ylim(1, top)
    ax.set_xlabel("batch B (sequences per decode step)")
    ax.set_ylabel("TP degree Y (chips)")
    ax.set_title(f"{r['model']} {_meaning(r['precision'])} on {r['chip']}: largest TP degree before ICI dominates",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right", fontsize=7.5)
    for attr, label, color in (("t_math", "T_math = 2BDF/(Y·C)", PALETTE[2]),
                               ("t_hbm", "T_hbm = w·DF/(Y·W_hbm)", PALETTE[0]),
                               ("t_ici", "T_ici = a·BD/W_ici", PALETTE[4])):
        ax2.plot(Bs, [getattr(t, attr) * 1e6 for t in times], color=color, lw=2, label=label)
    ax2.axvline(B, color="0.4", lw=1)
    _log_axes(ax2)
    ax2.set_xlim(*B_range)
    ax2.set_xlabel("batch B (sequences per decode step)")
    ax2.set_ylabel("time per matmul (µs)")
    # the verdict goes in the title: a text box beside the B line would sit on the curves
    ax2.set_title(f"one [B, D]·[D, F] matmul, F over Y = {r['Y']}: {r['bound']}-bound at B = {format_number(B)}",
                  fontsize=10)
    ax2.grid(True, which="major", alpha=0.3)
    ax2.legend(loc="upper left", fontsize=8)
    return fig


def tp_check_widget(slice_: str = "4x8", precision: str = "bf16", B: int = 64, model: str = "llama3-70b",
                    chip: str = "tpu-v5e") -> W.VBox:
    """Slice and precision dropdowns and a batch slider "B"; prints `tp_check_readout`."""
    slice_dd = W.Dropdown(options=list(SLICES) if slice_ in SLICES else [slice_, *SLICES], value=slice_,
                          description="slice")
    prec_dd = W.Dropdown(options=list(BOOK_PRECISIONS), value=precision, description="precision")
    b_sl = W.IntSlider(value=B, min=1, max=1024, description="B", continuous_update=False,
                       layout=W.Layout(width="60%"))
    box = W.VBox()

    def view(slice_, precision, B):
        _emit(box, tp_check_readout(slice_, precision, B, model, chip),
              lambda: render_tp_check(slice_, precision, B, model, chip), key=(slice_, precision))

    controls = {"slice_": slice_dd, "precision": prec_dd, "B": b_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([slice_dd, prec_dd]), b_sl, out]
    values = lambda: (slice_dd.value, prec_dd.value, b_sl.value)  # noqa: E731
    return _attach(box, {"slice": slice_dd, "precision": prec_dd, "B": b_sl}, out,
                   lambda: tp_check_readout(*values(), model, chip), lambda: render_tp_check(*values(), model, chip))


# --- 4. prefill ----------------------------------------------------------------------------------------------


def prefill_readout(T: float = 8192, n_chips: int = 16, mfu: float = 0.4, model=BOOK_70B, chip="tpu-v5e",
                    precision="bf16") -> str:
    """``prefill: T=8192 on 16 × tpu-v5e at MFU 40% → 910 ms (2·P·T = 1.15e+15 FLOPs) | with causal attention
    FLOPs 979 ms | weight loads 10.7 ms: compute-bound`` (book ch. 8 in-text question 10)."""
    head = f"{PREFILL_PREFIX}T={_safe_num(T)} on {n_chips} × {chip} at MFU {_pct(mfu)}"
    try:
        pf = I.prefill_time(model, T, chip, n_chips, precision, mfu=mfu)
        att = I.prefill_time(model, T, chip, n_chips, precision, mfu=mfu, include_attention=True)
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    bound = "compute-bound" if pf.t_math >= pf.t_hbm_weights else "weight-load-bound"
    return (f"{head} → {format_time(pf.time)} (2·P·T = {pf.flops:.3g} FLOPs) | with causal attention FLOPs "
            f"{format_time(att.time)} | weight loads {format_time(pf.t_hbm_weights)}: {bound}")


def _pct(x) -> str:
    try:
        return f"{float(x):.0%}"
    except INPUT_ERRORS:
        return repr(x)


def render_prefill(model=BOOK_70B, chip="tpu-v5e", precision="bf16", mfu: float = 0.4,
                   chips: Sequence[int] = (4, 8, 16, 32), *, T: float = 8192,
                   T_range: tuple[float, float] = (128, 131072)) -> Figure:
    """Prefill time against prompt length (log-log) for several slice sizes: 2·P·T/(N·C·MFU) (solid) and with the
    causal attention FLOPs (dashed); the weight-loading floor shows where short prompts stop being compute-bound."""
    try:
        Ts = np.geomspace(T_range[0], T_range[1], 120)
        curves = {n: ([I.prefill_time(model, t, chip, n, precision, mfu=mfu).time for t in Ts],
                      [I.prefill_time(model, t, chip, n, precision, mfu=mfu, include_attention=True).time for t in Ts])
                  for n in chips}
        here = {n: I.prefill_time(model, T, chip, n, precision, mfu=mfu).time for n in chips}
        name = _label(model)
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
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
    ax.set_title(f"{name} prefill on {get_chip(chip).name} at {_pct(mfu)} MFU: 2·P·T / (N·C·MFU)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


# --- 5. disaggregated serving ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Disaggregation:
    """Prefill servers against generate servers (book ch. 8 "What about prefill?", in-text questions 11–12).

    prefill: `inference.Prefill` of one prompt on the prefill slice; point: the `serving.ServingPoint` of the
    generate slice at batch B with `context` tokens of KV per sequence (prompt + decode/2, the mean context while
    answering); ratio: prefill servers per generate server (`prefill_servers_per_generate_server`); eviction:
    `kv_eviction_rate` (KV tokens freed per step, bytes/s); kv_in_bytes_per_s: the new prompts' KV a generate
    server takes in from prefill servers (eviction.sequences_per_step · prompt tokens · KV bytes per token /
    step time)."""

    prompt: int
    decode: int
    B: int
    context: float
    prefill_chips: int
    generate_chips: int
    prefill: I.Prefill
    point: SV.ServingPoint
    ratio: float
    eviction: I.KVEviction
    kv_in_bytes_per_s: float

    @property
    def prefill_per_s(self) -> float:
        """Prompts one prefill server finishes per second."""
        return 1 / self.prefill.time

    @property
    def finished_per_s(self) -> float:
        """Sequences one generate server finishes per second: B / (step time · decode steps)."""
        return self.B / (self.point.latency * self.decode)

    @property
    def chip_ratio(self) -> float:
        """Prefill chips per generate chip."""
        return self.ratio * self.prefill_chips / self.generate_chips


def disaggregation(prompt: int = 8192, decode: int = 512, B: int = 32, prefill_slice="4x4", generate_slice="4x4",
                   precision="bf16", mfu: float = 0.4, model=BOOK_70B, chip="tpu-v5e") -> Disaggregation:
    """Evaluate disaggregated serving: one prompt's prefill on `prefill_slice` (`inference.prefill_time`), the
    generate step of B sequences on `generate_slice` (`serving.plan_serving`, context prompt + decode/2), the
    balance of the two pools and the KV traffic. Raises ValueError when the batch does not fit."""
    for name, v in (("prompt", prompt), ("decode", decode), ("B", B)):
        I._count(name, v)
    c = get_chip(chip)
    n_pre, _ = _shape(c, prefill_slice)
    ctx = prompt + decode / 2
    plan = SV.plan_serving(model, c, generate_slice, precision, ctx, batches=[B])
    pt = plan.points[0]
    pf = I.prefill_time(model, prompt, c, n_pre, precision, mfu=mfu)
    kv_tok = I.served_model(model).kv_bytes_per_token(precision)
    ev = I.kv_eviction_rate(B, prompt, decode, kv_bytes_per_token=kv_tok, step_time=pt.latency)
    return Disaggregation(prompt=prompt, decode=decode, B=B, context=ctx, prefill_chips=n_pre,
                          generate_chips=plan.n_chips, prefill=pf, point=pt,
                          ratio=I.prefill_servers_per_generate_server(pf.time, pt.latency, B, decode),
                          eviction=ev, kv_in_bytes_per_s=ev.sequences_per_step * prompt * kv_tok / pt.latency)


def disaggregation_readout(prompt: int = 8192, decode: int = 512, B: int = 32, prefill_slice="4x4",
                           generate_slice="4x4", precision="bf16", mfu: float = 0.4, model=BOOK_70B,
                           chip="tpu-v5e") -> str:
    """``disaggregation: prompt=8192, decode=512, B=32, bf16 → prefill 4x4 at MFU 40%: 910 ms/prompt | generate
    4x4: 17.6 ms/step at 8448 tokens of context | 3.23 prefill servers per generate server (3.23 chips per
    generate chip) | evict 544 KV tokens/step; new prompts' KV in: 9.5 GB/s``."""
    head = (f"{DISAGG_PREFIX}prompt={_safe_num(prompt)}, decode={_safe_num(decode)}, B={_safe_num(B)}, "
            f"{precision}")
    try:
        d = disaggregation(prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    head = f"{DISAGG_PREFIX}prompt={prompt}, decode={decode}, B={B}, {_meaning(precision)}"
    return (f"{head} → prefill {prefill_slice} at MFU {_pct(mfu)}: {format_time(d.prefill.time)}/prompt | generate "
            f"{generate_slice}: {format_time(d.point.latency)}/step at {format_number(d.context)} tokens of context | "
            f"{d.ratio:.3g} prefill servers per generate server ({d.chip_ratio:.3g} chips per generate chip) | "
            f"evict {d.eviction.tokens_per_step:.4g} KV tokens/step; new prompts' KV in: "
            f"{format_bytes(d.kv_in_bytes_per_s)}/s")


#: prompt lengths (tokens) the disaggregation figure's curves are drawn at
_DISAGG_PROMPTS = tuple(int(t) for t in np.unique(np.geomspace(256, 32768, 36).round().astype(int)))


def _disagg_curve(decode, B, prefill_slice, generate_slice, precision, mfu, model, chip) -> tuple:
    """Prefill servers per generate server at each of `_DISAGG_PROMPTS` (NaN where B sequences do not fit)."""
    try:
        return _disagg_curve_cached(decode, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    except TypeError:  # an unhashable argument (a ChipSpec, a dict model): computed each time
        return _disagg_curve_cached.__wrapped__(decode, B, prefill_slice, generate_slice, precision, mfu, model,
                                                chip)


@functools.lru_cache(maxsize=256)
def _disagg_curve_cached(decode, B, prefill_slice, generate_slice, precision, mfu, model, chip) -> tuple:
    """`_disagg_curve`, cached on its (frozen) arguments: a slider step redraws up to six such curves."""
    ys = []
    for t in _DISAGG_PROMPTS:
        try:
            ys.append(disaggregation(t, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip).ratio)
        except INPUT_ERRORS:
            ys.append(np.nan)
    return tuple(ys)


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
        m = x / 10.0 ** k
        m = steps[steps <= m * (1 + 1e-9)].max() if down else steps[steps >= m * (1 - 1e-9)].min()
        return float(m * 10.0 ** k)

    lo, hi = snap(v.min() / 1.15, True), snap(v.max() * 1.15, False)
    return lo, hi


def render_disaggregation(prompt: int = 8192, decode: int = 512, B: int = 32, prefill_slice="4x4",
                          generate_slice="4x4", precision="bf16", mfu: float = 0.4, model=BOOK_70B, chip="tpu-v5e",
                          *, decodes: Sequence[int] = (128, 512, 2048),
                          decode_span: tuple[int, int] | None = None) -> Figure:
    """Left: prefill servers per generate server against prompt length for several decode lengths (curves stop
    where B sequences no longer fit the generate slice) and, in black, the current decode length, the current
    setting marked. Right: what one server of each pool finishes per second — their quotient is the ratio.

    The left y axis spans the curves drawn and, given `decode_span` = (shortest, longest decode), the curves of
    those lengths too (the ratio falls as decode grows), widened to 1-2-5 steps: the decode slider's widget passes
    its ends, so moving it moves the black curve and not the axes."""
    try:
        d = disaggregation(prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1.7, 1])
    curve = lambda g: _disagg_curve(g, B, prefill_slice, generate_slice, precision, mfu, model, chip)  # noqa: E731
    shown = []
    for i, g in enumerate(decodes):
        ys = curve(g)
        shown.append(ys)
        ax.plot(_DISAGG_PROMPTS, ys, lw=1.5, color=PALETTE[i % len(PALETTE)], label=f"decode {g} tokens")
    ys = curve(decode)
    shown.append(ys)
    ax.plot(_DISAGG_PROMPTS, ys, lw=2.6, color="k", label="current decode length")
    ax.plot([prompt], [d.ratio], "o", color="k", ms=7, zorder=5)
    ax.annotate(f"{d.ratio:.3g} : 1 at decode {decode}", (prompt, d.ratio), xytext=(8, -4),
                textcoords="offset points", fontsize=9)
    ax.axhline(1, color="0.6", lw=0.8, ls=":")
    _log_axes(ax)
    span = [curve(g) for g in (decode_span or ())]
    ax.set_ylim(*_nice_log_limits([y for c in shown + span for y in c] + [d.ratio]))
    ax.set_xticks([256, 512, 1024, 2048, 4096, 8192, 16384, 32768])
    ax.set_xlabel("prompt length (tokens); a curve ends where B sequences no longer fit the generate slice")
    ax.set_ylabel("prefill servers per generate server")
    ax.set_title(f"{_label(model)} {_meaning(precision)}, B = {B}: prefill {prefill_slice} at {_pct(mfu)} MFU, "
                 f"generate {generate_slice}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    vals = [d.prefill_per_s, d.finished_per_s]
    bars = ax2.bar([0, 1], vals, color=[PALETTE[1], PALETTE[0]], width=0.6)
    for b, v in zip(bars, vals):
        ax2.text(b.get_x() + b.get_width() / 2, v, f"{v:.3g}/s", ha="center", va="bottom", fontsize=9)
    ax2.set_xticks([0, 1], [f"prefill server ({prefill_slice}):\nprompts prefilled",
                            f"generate server ({generate_slice}):\nsequences finished"], fontsize=8.5)
    ax2.set_ylim(0, max(vals) * 1.2)
    ax2.set_xlabel("one server of each pool")
    ax2.set_ylabel("sequences per second")
    ax2.set_title(f"ratio = {vals[1]:.3g} / {vals[0]:.3g} = {d.ratio:.3g}", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    return fig


def disaggregation_widget(prompt: int = 8192, decode: int = 512, B: int = 32, prefill_slice: str = "4x4",
                          generate_slice: str = "4x4", precision: str = "bf16", mfu: float = 0.4, model=BOOK_70B,
                          chip: str = "tpu-v5e") -> W.VBox:
    """Sliders for prompt length, decode length, batch "B" and MFU; precision and the two slices; prints
    `disaggregation_readout`."""
    pr_sl = W.IntSlider(value=prompt, min=512, max=16384, step=512, description="prompt", continuous_update=False)
    de_sl = W.IntSlider(value=decode, min=64, max=4096, step=64, description="decode", continuous_update=False)
    span = (de_sl.min, de_sl.max)  # the figure's y axis holds every decode length the slider reaches
    b_sl = W.IntSlider(value=B, min=1, max=128, description="B", continuous_update=False)
    mfu_sl = W.FloatSlider(value=mfu, min=0.1, max=1.0, step=0.05, description="MFU", readout_format=".0%",
                           continuous_update=False)
    prec_dd = W.Dropdown(options=list(BOOK_PRECISIONS), value=precision, description="precision")
    opts = lambda s: list(SLICES) if s in SLICES else [s, *SLICES]  # noqa: E731
    pre_dd = W.Dropdown(options=opts(prefill_slice), value=prefill_slice, description="prefill on")
    gen_dd = W.Dropdown(options=opts(generate_slice), value=generate_slice, description="generate on")
    box = W.VBox()

    def view(prompt, decode, B, prefill_slice, generate_slice, precision, mfu):
        _emit(box, disaggregation_readout(prompt, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip),
              lambda: render_disaggregation(prompt, decode, B, prefill_slice, generate_slice, precision, mfu,
                                            model, chip, decode_span=span),
              key=(prefill_slice, generate_slice, precision))

    controls = {"prompt": pr_sl, "decode": de_sl, "B": b_sl, "prefill_slice": pre_dd, "generate_slice": gen_dd,
                "precision": prec_dd, "mfu": mfu_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([pr_sl, de_sl]), W.HBox([b_sl, mfu_sl]), W.HBox([prec_dd, pre_dd, gen_dd]), out]
    values = lambda: tuple(c.value for c in controls.values())  # noqa: E731
    named = {k: v for k, v in controls.items() if k != "mfu"} | {"MFU": mfu_sl}
    return _attach(box, named, out,
                   lambda: disaggregation_readout(*values(), model, chip),
                   lambda: render_disaggregation(*values(), model, chip, decode_span=span))


# --- 6. the book's roofline generator --------------------------------------------------------------------------


def book_roofline_readout(S: float = 8192, n_chips: int = 16, params: float = 70e9, bytes_per_param: float = 1,
                          chip="tpu-v5e") -> str:
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
        return (f"B={c.batches[i]}: {format_time(c.latency[i])}, {c.tokens_per_s_per_chip[i]:.4g} tokens/s/chip")

    return (f"{head} → largest batch {fixed.max_batch} (the book's code: {book.max_batch}, "
            f"{fixed.max_batch / book.max_batch:.3g}× fewer) | {pt(fixed, 0)} | {pt(fixed, -1)} | "
            f"book's last point {pt(book, -1)}")


def render_book_roofline(S_values: Sequence[float] = (2048, 8192, 32768), n_chips: int = 16, params: float = 70e9,
                         bytes_per_param: float = 1, chip="tpu-v5e", *, model=BOOK_70B,
                         precision="int8-weights") -> Figure:
    """Left: the book's generator, throughput against latency per context length: the fixed curve (to the true
    largest batch) and where the book's code stops (×, its max-batch bug). Right: at the middle context, the book's
    generator against our planner (`serving.plan_serving` on the same slice, which adds attention FLOPs and ICI)."""
    try:
        pairs = {S: (SV.book_roofline_curve(S, n_chips, params, bytes_per_param, chip=chip),
                     SV.book_roofline_curve(S, n_chips, params, bytes_per_param, chip=chip, book_compat=True))
                 for S in S_values}
        S_mid = list(S_values)[len(S_values) // 2]
        plan = SV.plan_serving(model, chip, n_chips, precision, S_mid, batches=range(1, pairs[S_mid][0].max_batch + 1))
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.8), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    for i, (S, (fixed, book)) in enumerate(pairs.items()):
        color = PALETTE[i % len(PALETTE)]
        lat = np.array(fixed.latency) * 1e3
        ax.plot(lat, fixed.tokens_per_s_per_chip, color=color, lw=2,
                label=f"S = {format_number(S)}: B ≤ {fixed.max_batch}")
        ax.plot(np.array(book.latency) * 1e3, book.tokens_per_s_per_chip, color=color, lw=5, alpha=0.35)
        ax.plot([book.latency[-1] * 1e3], [book.tokens_per_s_per_chip[-1]], "x", color=color, ms=10, mew=2.5)
    ax.plot([], [], color="0.4", lw=5, alpha=0.35, label="the book's code (stops at ×)")
    _log_axes(ax, y=False)
    lo = min(min(f.latency) for f, _b in pairs.values()) * 1e3
    hi = max(max(f.latency) for f, _b in pairs.values()) * 1e3
    ax.set_xticks([t for t in (4, 5, 6, 8, 10, 15, 20, 30, 40, 60, 80, 100, 150, 200) if lo * 0.9 <= t <= hi * 1.1])
    ax.set_xlabel("latency per decode step (ms, log scale)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    ax.set_title(f"the book's roofline generator: {n_chips} × {get_chip(chip).name}, "
                 f"{format_number(params / 1e9)}B params, {format_number(bytes_per_param)} byte each", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", bbox_to_anchor=(1, 0.2), fontsize=8)  # raised off the long-context curve's end
    fixed = pairs[S_mid][0]
    ax2.plot(np.array(fixed.latency) * 1e3, fixed.tokens_per_s_per_chip, color=PALETTE[0], lw=2,
             label="book's generator (fixed): KV + max(FLOPs, weights)")
    ours = np.array([p.tokens_per_s_per_chip for p in plan.points])
    gap = np.max(np.abs(ours / np.array(fixed.tokens_per_s_per_chip) - 1))
    ax2.plot([p.latency * 1e3 for p in plan.points], ours, color=PALETTE[1], lw=2, ls="--",
             label="serving.plan_serving (adds attention FLOPs and ICI): "
                   + ("identical here" if gap < 1e-9 else f"at most {gap:.2%} apart"))
    for b in (1, 32, 120):
        if b <= fixed.max_batch:
            ax2.plot([fixed.latency[b - 1] * 1e3], [fixed.tokens_per_s_per_chip[b - 1]], "o", color=PALETTE[0], ms=4)
            ax2.annotate(f"B={b}", (fixed.latency[b - 1] * 1e3, fixed.tokens_per_s_per_chip[b - 1]),
                         xytext=(5, -10), textcoords="offset points", fontsize=8)
    ax2.set_xlabel("latency per decode step (ms)")
    ax2.set_ylabel("throughput (tokens/s per chip)")
    ax2.set_title(f"S = {format_number(S_mid)}: the book's curve against our planner ({_meaning(precision)})",
                  fontsize=10)
    ax2.grid(True, alpha=0.3)
    ax2.legend(loc="lower right", fontsize=8)
    return fig
