"""Views for chapter 5 (training): readouts, figures and widgets over `training` and `transformer`.

The same three layers as `widgets` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix (tests and the browser test wait for it), a *render* function returning a matplotlib Figure,
and a *builder* wiring ipywidgets controls to both (``.controls``, ``.readout()``, ``.last_readout``,
``.snapshot()``, as `_kit.attach` gives them). Bad input (an unknown model, a slice shape that is not a
shape) gives a readable line and a message figure, never an exception.

This module draws the chapter's central picture (T_math / T_comms of DP, FSDP, TP and FSDP+TP against the
batch per chip), step time against the batch, the planner, the threshold table and the pipeline schedule.
The numbers it shows (`slice_info`, `picture_ratios`, `picture_thresholds`, `step_time_curves`,
`threshold_rows`, the cached `get_plan`) are computed in `core.training.pictures` and re-exported here;
`format_rows` comes from the views' kit. Chapter 6's views (parameters, days to train, memory, the budget
widget, the decision path) are in `applied_training_views`, which uses the same core module and kit.

Book ch. 5 "How to Parallelize a Transformer for Training".
"""

from __future__ import annotations

import math

import ipywidgets as W
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as T

# the numbers these views show (pure, in core; re-exported here: training_views.slice_info, … as before)
from scalebook_utils.core.training.pictures import (
    SCHEMES,
    get_plan,
    model_name,
    picture_ratios,
    picture_thresholds,
    rank_schemes,
    slice_info,
    step_time_curves,
    threshold_rows,
)
from scalebook_utils.core.units import format_bytes, format_si, format_time
from scalebook_utils.views._kit import (
    INPUT_ERRORS,
    attach,
    emit,
    error_text,
    format_number,
    format_rows,
    format_shape,
    message_figure,
    new_figure,
    plain_formatter,  # noqa: F401  (format_rows re-exported: `training_views.format_rows` stays)
    tpu_names,
)

__all__ = [
    "PICTURE_PREFIX",
    "STEP_PREFIX",
    "PLANNER_PREFIX",
    "SCHEMES",
    "slice_info",
    "picture_ratios",
    "picture_thresholds",
    "picture_readout",
    "render_picture",
    "training_picture",
    "step_time_curves",
    "step_time_readout",
    "render_step_time",
    "get_plan",
    "planner_readout",
    "planner_rows",
    "planner_text",
    "render_planner",
    "planner_widget",
    "threshold_rows",
    "format_rows",
    "render_pipeline_schedule",
]

#: The browser tests wait for these prefixes; do not change them.
PICTURE_PREFIX = "training picture: "
STEP_PREFIX = "step time: "
PLANNER_PREFIX = "planner: "

#: one colour per scheme of SCHEMES (core.training.pictures: the chapter's four schemes → the book's spelling)
_COLORS = {"dp": "#e6550d", "fsdp": "#1f4e9c", "tp": "#31a354", "fsdp+tp": "#d62728"}


# --- small helpers ----------------------------------------------------------------------------------------


def _ratio(r: float) -> str:
    if math.isinf(r):
        return "∞"
    return f"{r:.0f}" if r >= 100 else f"{r:.1f}" if r >= 1 else f"{r:.2g}"


def _si_formatter(unit: str = "") -> FuncFormatter:
    return FuncFormatter(lambda v, _p: "" if v <= 0 else format_si(v, unit, digits=3).replace(" u", " µ"))


# --- (1) the chapter's central picture: T_math / T_comms against the batch per chip ---------------------


def picture_readout(chip="tpu-v5p", shape="4x4x4", F: float = 30_000, batch_per_chip: float = 850) -> str:
    """``training picture: B/N=850 on tpu-v5p 4x4x4 (N=64, 3 axes), F=30000 → FSDP+TP compute-bound (ratio 2.8) | …``.

    The best scheme first (its ratio T_math/T_comms and bound), then the other three, then the thresholds.
    """
    head = f"{PICTURE_PREFIX}B/N={format_number(batch_per_chip)}"
    try:
        name, shp, N, n = slice_info(chip, shape)
        r = picture_ratios(name, shp, F, batch_per_chip)
        th = picture_thresholds(name, shp, F)
    except INPUT_ERRORS as exc:
        return (
            f"{head} on {getattr(chip, 'name', chip)} {str(shape).strip()!r}, F={F} → cannot evaluate: "
            f"{error_text(exc)}"
        )
    best, *rest = rank_schemes(r)
    bound = "compute-bound" if r[best] >= 1 else "communication-bound"
    others = " | ".join(f"{SCHEMES[s]} {_ratio(r[s])}" for s in rest)
    return (
        f"{head} on {name} {format_shape(shp)} (N={N}, {n} axes), F={format_number(F)} → {SCHEMES[best]} {bound} "
        f"(ratio {_ratio(r[best])}) | {others} | thresholds: FSDP α/M_X={th['fsdp']:.0f}, "
        f"FSDP+TP α²/(M_X·M_Y·F)={th['fsdp+tp']:.0f}"
    )


def render_picture(
    chip="tpu-v5p",
    shape="4x4x4",
    F: float = 30_000,
    batch_per_chip: float | None = 850,
    *,
    b_range: tuple[float, float] = (10, 1e5),
    ax=None,
) -> Figure:
    """Log-log T_math/T_comms against B/N for DP, FSDP, TP and FSDP+TP, the ratio-1 line and the thresholds.

    FSDP+TP is drawn where a real mix beats both pure schemes; elsewhere its best split is all TP (small B/N)
    or Y = 1, pure FSDP over all axes (large B/N), and its curve is theirs (`training.comms_ratio`).
    Book ch. 5, figure "mixed-fsdp-comms-2".
    """
    try:
        name, shp, N, n = slice_info(chip, shape)
        th = picture_thresholds(name, shp, F)
        if not F > 0:
            raise ValueError(f"F must be positive, got {F!r}")
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((9.0, 5.2), ax)
    lo, hi = b_range
    if batch_per_chip is not None:
        lo, hi = min(lo, batch_per_chip / 2), max(hi, batch_per_chip * 2)
    b = np.logspace(math.log10(lo), math.log10(hi), 400)
    curves = {s: np.array([T.comms_ratio(s, x, F, N, name, n_axes=n) for x in b]) for s in SCHEMES}
    ax.plot(b, curves["fsdp"], color=_COLORS["fsdp"], lw=2.2, label=f"FSDP (∝ B, over {n} axes)")
    ax.plot(b, curves["dp"], color=_COLORS["dp"], lw=1.6, ls=(0, (5, 4)), label="DP (same ratio: backward AllReduce)")
    ax.plot(b, curves["tp"], color=_COLORS["tp"], lw=2.2, label=f"TP, Y = N = {N} (flat in B)")
    # FSDP+TP's best split is X = 1 (all TP) at tiny B/N and Y = 1 (FSDP over all n axes) at large B/N: there its
    # curve *is* TP's or FSDP's and is drawn only where a real mix beats both (M_X = n − 1 axes, M_Y = 1).
    mixed = curves["fsdp+tp"]
    own = mixed > np.maximum(curves["fsdp"], curves["tp"]) * (1 + 1e-9)
    core = own.copy()
    own[1:] |= core[:-1]  # one more point each side: meet the pure curves
    own[:-1] |= core[1:]
    ax.plot(
        np.where(own, b, np.nan),
        np.where(own, mixed, np.nan),
        color=_COLORS["fsdp+tp"],
        lw=2.4,
        label=f"FSDP+TP, best split (∝ √B; M_X = {max(n - 1, 1)}, M_Y = 1); meets TP or FSDP where they win",
    )
    ax.axhline(1.0, color="black", lw=1.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    allv = np.concatenate([c[np.isfinite(c)] for c in curves.values()])
    ymin, ymax = max(allv.min() / 2, 1e-4), min(allv.max() * 1.5, 1e4)
    ymin, ymax = min(ymin, 0.3), max(ymax, 3)
    ax.set_ylim(ymin, ymax)
    ax.set_xlim(b[0], b[-1])
    ax.axhspan(1, ymax, color="#54a24b", alpha=0.07, lw=0)
    ax.axhspan(ymin, 1, color="#e45756", alpha=0.07, lw=0)
    ax.text(b[0] * 1.15, 1.12, "compute-bound ↑", fontsize=8, va="bottom")
    ax.text(b[0] * 1.15, 0.89, "communication-bound ↓", fontsize=8, va="top")
    for key, label, color in (
        ("fsdp", rf"$\alpha/M_X$ = {th['fsdp']:.0f}", _COLORS["fsdp"]),
        ("fsdp+tp", rf"$\alpha^2/(M_X M_Y F)$ = {th['fsdp+tp']:.0f}", _COLORS["fsdp+tp"]),
    ):
        x = th[key]
        if b[0] < x < b[-1]:
            ax.axvline(x, color=color, lw=1, ls="--", alpha=0.8)
            ax.text(x * 1.06, ymax / 1.25, label, color=color, fontsize=8, rotation=90, va="top", ha="left")
    if batch_per_chip is not None:
        ax.axvline(batch_per_chip, color="0.35", lw=1, label=f"current B/N = {format_number(batch_per_chip)}")
        for s in SCHEMES:
            v = T.comms_ratio(s, batch_per_chip, F, N, name, n_axes=n)
            if math.isfinite(v) and ymin < v < ymax:
                ax.plot([batch_per_chip], [v], "o", color=_COLORS[s], ms=6, zorder=5)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("batch per chip B/N (tokens)")
    ax.set_ylabel(r"$T_\mathrm{math}\,/\,T_\mathrm{comms}$ (> 1: compute-bound)")
    ax.set_title(
        f"{name} {format_shape(shp)} (N = {N}, {n} axes), F = {format_number(F)}: "
        "FLOPs time / communication time per layer",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return fig


def training_picture(
    chip: str = "tpu-v5p", shape: str = "4x4x4", F: int = 30_000, batch_per_chip: float = 850
) -> W.VBox:
    """Chip, slice shape, F and a log slider "B/N"; prints `picture_readout` and draws `render_picture`."""
    chip_dd = W.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    shape_box = W.Text(value=shape, description="slice", continuous_update=False, placeholder="e.g. 4x4x4 or 16x20x28")
    pod_btn = W.Button(description="full pod", tooltip="set the slice to this chip's pod")
    f_box = W.BoundedIntText(value=int(F), min=1, max=10**7, step=1024, description="F")
    b_slider = W.FloatLogSlider(
        value=batch_per_chip,
        base=10,
        min=0,
        max=5,
        step=0.01,
        description="B/N",
        readout_format=",.0f",
        continuous_update=False,
        layout=W.Layout(width="60%"),
    )
    pod_btn.on_click(lambda _b: setattr(shape_box, "value", format_shape(get_chip(chip_dd.value).pod_shape)))
    box = W.VBox()

    def view(chip, shape, F, B):
        emit(box, picture_readout(chip, shape, F, B), lambda: render_picture(chip, shape, F, B), key=(chip, shape, F))

    controls = {"chip": chip_dd, "shape": shape_box, "F": f_box, "B": b_slider}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, shape_box, pod_btn]), f_box, b_slider, out]
    values = lambda: (chip_dd.value, shape_box.value, f_box.value, b_slider.value)  # noqa: E731
    return attach(
        box, controls | {"pod": pod_btn}, out, lambda: picture_readout(*values()), lambda: render_picture(*values())
    )


# --- (2) step time against the total batch (book figure "math-comms-time") ------------------------------


def step_time_readout(chip="tpu-v5p", shape="16x16x16", D: int = 8192, F: int = 32_768, B: float = 1_048_576) -> str:
    """``step time: B=1.05M on tpu-v5p 16x16x16 → per layer T_math=… | DP … | FSDP … | TP … | FSDP+TP (X=…, Y=…) …``."""
    head = f"{STEP_PREFIX}B={format_si(B, digits=3)}"
    try:
        c = step_time_curves(chip, shape, D, F, [B])
        name, shp, N, n = slice_info(chip, shape)
        below = T.all_comm_bound_batch(N, F, name, max(n - 1, 1), 1)
    except INPUT_ERRORS as exc:
        return f"{head} on {chip} {str(shape).strip()!r} → cannot evaluate: {error_text(exc)}"
    split = c["split"][0]
    parts = [
        f"{SCHEMES[s]}{f' (X={split[0]}, Y={split[1]})' if s == 'fsdp+tp' and split else ''} "
        f"{format_time(float(c[s][0]))}"
        for s in SCHEMES
    ]
    fastest = min(SCHEMES, key=lambda s: c[s][0] if math.isfinite(c[s][0]) else math.inf)
    bound = "compute-bound" if c[fastest][0] <= c["math"][0] else "communication-bound"
    return (
        f"{head} on {name} {format_shape(shp)} (N={N}), D={D}, F={F} → per layer T_math="
        f"{format_time(float(c['math'][0]))} | comms: "
        + " | ".join(parts)
        + f" | best {SCHEMES[fastest]}: {bound} | every scheme comm-bound below B≈{format_si(below, digits=3)}"
    )


def render_step_time(
    chip="tpu-v5p",
    shape="16x16x16",
    D: int = 8192,
    F: int = 32_768,
    B: float | None = None,
    *,
    b_range: tuple[float, float] | None = None,
    ax=None,
) -> Figure:
    """Log-log communication time per layer and step of each scheme against the total batch B (tokens), with
    the FLOPs time (black, dashed) and the batch α²N/(M_X M_Y F) below which all are communication-bound.

    Book ch. 5, figure "math-comms-time" (v5p 16×16×16, D = 8192, F = 32,768: all comm-bound below ≈4e5).
    """
    try:
        name, shp, N, n = slice_info(chip, shape)
        lo, hi = b_range or (N * 4.0, N * 2e4)
        grid = np.logspace(math.log10(lo), math.log10(hi), 90)
        c = step_time_curves(name, shp, D, F, grid)
        below = T.all_comm_bound_batch(N, F, name, max(n - 1, 1), 1)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((9.0, 5.2), ax)
    labels = {
        "dp": f"DP (8DF per layer, {n} axes)",
        "fsdp": f"FSDP (12DF per layer, {n} axes)",
        "tp": "TP, Y = N (8BD per layer)",
        "fsdp+tp": "FSDP+TP, best X·Y split",
    }
    for s in SCHEMES:
        ax.plot(grid, c[s], color=_COLORS[s], lw=2, label=f"comms: {labels[s]}", ls=(0, (5, 4)) if s == "dp" else "-")
    ax.plot(grid, c["math"], color="black", lw=2, ls="--", label=r"matmul FLOPs time $T_\mathrm{math}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(grid[0], grid[-1])
    finite = np.concatenate([c[k][np.isfinite(c[k])] for k in ("math", "dp", "fsdp", "fsdp+tp")])
    ymin = max(finite.min() / 2, c["math"].min() / 10)
    ax.set_ylim(ymin, finite.max() * 8)  # pure TP runs off the top: it is hopeless at this N
    if grid[0] < below < grid[-1]:
        ax.axvline(
            below,
            color="0.3",
            lw=1,
            ls=":",
            label=rf"$\alpha^2 N/(M_X M_Y F)$ = {format_si(below, digits=3)}: all comm-bound below",
        )
    if B is not None and grid[0] <= B <= grid[-1]:
        ax.axvline(B, color="0.55", lw=1, label=f"current B = {format_si(B, digits=3)}")
    ax.xaxis.set_major_formatter(_si_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(_si_formatter("s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("total batch B (tokens)")
    ax.set_ylabel("time per layer, forward + backward (s)")
    ax.set_title(f"{name} {format_shape(shp)} (N = {N}), D = {D}, F = {F}: communication vs FLOPs time", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return fig


# --- (3) the planner -----------------------------------------------------------------------------------


def _planner_head(model, chip, chips, slices, batch_tokens, seq_len) -> str:
    if chips in (None, 0):
        try:
            chips_s = str(get_chip(chip).pod_chips)
        except INPUT_ERRORS:
            chips_s = "pod"
    else:
        chips_s = format_number(chips)
    return (
        f"{PLANNER_PREFIX}{model_name(model)}, {getattr(chip, 'name', chip)}, chips={chips_s}, "
        f"slices={slices}, batch={format_si(float(batch_tokens), digits=3)} tokens, seq={seq_len}"
    )


def planner_readout(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
) -> str:
    """``planner: llama3-70b, tpu-v5p, chips=8960, slices=1, batch=4.19M tokens, seq=4096 → best: FSDP 2240 × TP 4 |
    442 ms/step | MFU 100% | bound by compute | 13.2 GB/chip``."""
    try:
        head = _planner_head(model, chip, chips, slices, batch_tokens, seq_len)
    except INPUT_ERRORS:  # a batch that is not a number: keep the line readable
        head = f"{PLANNER_PREFIX}{model_name(model)}, {getattr(chip, 'name', chip)}, chips={chips}, slices={slices}"
    try:
        p = get_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
        b = p.best
    except INPUT_ERRORS as exc:
        return f"{head} → no plan: {error_text(exc)}"
    return (
        f"{head} → best: {b.config.name} | {format_time(b.step_time)}/step | MFU {b.mfu:.0%} | "
        f"bound by {b.bound} | {format_bytes(b.memory.total)}/chip"
    )


def planner_rows(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
    n: int = 6,
) -> list[dict[str, str]]:
    """The `n` fastest feasible configurations as text cells: config, ZeRO, remat, step, MFU, bound, memory/chip."""
    p = get_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
    return [
        {
            "config": e.config.name,
            "ZeRO": str(e.config.zero),
            "remat": str(e.config.remat),
            "step": format_time(e.step_time),
            "MFU": f"{e.mfu:.0%}",
            "bound by": e.bound,
            "memory/chip": format_bytes(e.memory.total),
        }
        for e in p.feasible[:n]
    ]


def planner_text(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
    n: int = 6,
) -> str:
    """The lines the planner widget prints under its readout: `Plan.explain()` and the top-`n` table."""
    try:
        p = get_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
        explain = p.explain()
    except INPUT_ERRORS as exc:
        return f"(no feasible configuration: {error_text(exc)})"
    return (
        explain
        + "\n\n"
        + format_rows(planner_rows(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding, n))
    )


def _family(c: T.Config) -> str:
    """The family `Plan.best_of` groups a configuration into."""
    if c.Z > 1:
        return "pp"
    if c.Y > 1:
        return "fsdp+tp" if c.X > 1 else "tp"
    return "fsdp" if c.zero == 3 else "dp"


_FAMILY_LABELS = {"dp": "DP, ZeRO-1/2", "fsdp": "FSDP", "tp": "TP", "fsdp+tp": "DP or FSDP + TP", "pp": "with pipeline"}


def render_planner(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
) -> Figure:
    """Left: the winner's time components (compute and each communication; the longest sets the step).
    Right: the step time of the best configuration of each family (DP, FSDP, TP, FSDP+TP, pipeline)."""
    try:
        p = get_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
        b = p.best
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}", figsize=(10, 1.4))
    fig = Figure(figsize=(11.0, 4.0))  # fixed margins: constrained layout would double the widget's redraw time
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[1, 1.1])
    fig.subplots_adjust(left=0.115, right=0.99, bottom=0.13, top=0.86, wspace=0.42)
    times = {k: v for k, v in b.times.items() if v > 0 or k == "compute"}
    names = list(times)[::-1]
    vals = np.array([times[k] for k in names]) * 1e3
    colors = ["#54a24b" if k == "compute" else "#e45756" if k == b.bound else "#9ecae1" for k in names]
    ax1.barh(names, vals, color=colors)
    for y, v in enumerate(vals):
        ax1.text(v, y, f" {v:.3g} ms", va="center", fontsize=8)
    ax1.set_xlim(0, vals.max() * 1.3)
    ax1.set_xlabel("time per step (ms; they overlap, the longest sets the step)")
    ax1.set_title(
        f"winner: {b.config.name}\n{format_time(b.step_time)}/step, MFU {b.mfu:.0%}, bound by {b.bound}", fontsize=9
    )
    # grouped as the labels say (`_family`: DP+ZeRO-1/2 with TP counts as "DP or FSDP + TP"); p.feasible is ranked
    fam = [
        (k, next((e for e in p.feasible if _family(e.config) == k), None))
        for k in ("dp", "fsdp", "tp", "fsdp+tp", "pp")
    ]
    labels, steps, cols, notes = [], [], [], []
    for k, e in fam:
        labels.append(_FAMILY_LABELS[k])
        if e is None:
            steps.append(0.0)
            cols.append("0.8")
            why = next((x.reason for x in p.estimates if _family(x.config) == k), None)
            if why is None:
                notes.append(" not tried: the planner keeps TP ≤ 64, PP ≤ 16")
            else:
                why = why.split("; ")[0]
                notes.append(" infeasible: " + (why if len(why) <= 50 else why[:48] + "…"))
        else:
            steps.append(e.step_time * 1e3)
            cols.append("#d62728" if e is b else "#1f4e9c")
            notes.append(f" {format_time(e.step_time)}, bound by {e.bound}\n {e.config.name}")
    labels, steps, cols, notes = labels[::-1], steps[::-1], cols[::-1], notes[::-1]
    ax2.barh(labels, steps, color=cols)
    top = max(steps) or 1.0
    for y, (v, t) in enumerate(zip(steps, notes)):
        ax2.text(v, y, t, va="center", fontsize=7)
    ax2.set_xlim(0, top * 2.2)
    ax2.set_xlabel("step time of the best configuration (ms)")
    ax2.set_title(
        f"best configuration of each family\n{p.model.name}, {format_si(p.batch_tokens, digits=3)} "
        f"tokens, {p.n_chips:,} {p.chip} chips",
        fontsize=9,
    )
    for a in (ax1, ax2):
        a.tick_params(axis="y", labelsize=8)
        a.grid(True, axis="x", alpha=0.3)
    return fig


_BATCH_CHOICES = [(f"{format_si(2.0**k, digits=3)} (2^{k})", 2**k) for k in range(17, 27)]


def planner_widget(
    model: str = "llama3-70b",
    chip: str = "tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: int = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
    *,
    n: int = 6,
) -> W.VBox:
    """Model, chip, chips per slice (default: the pod), a "slices" slider (DCN), global batch, sequence length and
    'allow sequence sharding'; prints `planner_readout`, `Plan.explain()` and the top-`n` table, draws `render_planner`."""
    spec = get_chip(chip)
    models = list(tf.MODELS)
    model_dd = W.Dropdown(options=models if model in models else [model] + models, value=model, description="model")
    chip_dd = W.Dropdown(options=[c for c in tpu_names() if get_chip(c).pod_chips], value=spec.name, description="chip")
    chips_box = W.BoundedIntText(value=int(chips or spec.pod_chips), min=1, max=10**6, description="chips/slice")
    slices_sl = W.IntSlider(value=slices, min=1, max=16, description="slices", continuous_update=False)
    batches = dict(_BATCH_CHOICES)
    if batch_tokens not in batches.values():
        batches = {format_si(float(batch_tokens), digits=3): int(batch_tokens)} | batches
    batch_dd = W.Dropdown(options=list(batches.items()), value=int(batch_tokens), description="batch")
    seq_dd = W.Dropdown(options=[1024, 2048, 4096, 8192, 16384, 32768], value=seq_len, description="seq len")
    seq_cb = W.Checkbox(value=allow_sequence_sharding, description="allow sequence sharding")

    def on_chip(change):  # registered before interactive_output: the chip's pod arrives with the chip
        chips_box.value = get_chip(change["new"]).pod_chips

    chip_dd.observe(on_chip, names="value")
    box = W.VBox()

    def view(model, chip, chips, slices, batch, seq, allow):
        emit(
            box,
            planner_readout(model, chip, chips, slices, batch, seq, allow),
            lambda: render_planner(model, chip, chips, slices, batch, seq, allow),
            key=(model, chip, chips, batch, seq, allow),
            lines=[planner_text(model, chip, chips, slices, batch, seq, allow, n)],
        )

    controls = {
        "model": model_dd,
        "chip": chip_dd,
        "chips": chips_box,
        "slices": slices_sl,
        "batch": batch_dd,
        "seq": seq_dd,
        "allow": seq_cb,
    }
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([model_dd, chip_dd, chips_box]), W.HBox([batch_dd, seq_dd, seq_cb]), slices_sl, out]
    values = lambda: tuple(c.value for c in controls.values())  # noqa: E731
    return attach(box, controls, out, lambda: planner_readout(*values()), lambda: render_planner(*values()))


# --- (5) pipelining: a schedule as a stage × time grid (book ch. 5 "Pipelining") --------------------------


def _microbatch_colors(M: int) -> ListedColormap:
    """M colours that read apart from the grey of idle slots: tab10 without its grey, then viridis."""
    from matplotlib import colormaps

    if M <= 9:
        tab10 = colormaps["tab10"].colors
        return ListedColormap([c for i, c in enumerate(tab10) if i != 7][:M])  # tab10[7] is grey
    return ListedColormap(colormaps["viridis"](np.linspace(0, 1, M)))


def render_pipeline_schedule(schedule, *, title: str | None = None, ax=None) -> Figure:
    """A pipeline schedule as a stage × time grid, stage 0 on top: cell (s, t) coloured by the microbatch
    that stage s works on at time step t (colorbar: microbatch id), idle slots (−1: the bubble) grey and hatched.

    `schedule`: an integer grid [stages, time steps], e.g. `jaxpipeline.pipeline_schedule(P, M)` or the
    schedule `jaxpipeline.gpipe_forward` ran. Cells carry their microbatch id while the grid is small enough
    to read; the title gives the grid's idle fraction (GPipe: (P − 1)/(M + P − 1), `training.bubble_fraction`).
    """
    try:
        grid = np.asarray(schedule)
        if grid.ndim != 2 or grid.size == 0 or not np.issubdtype(grid.dtype, np.integer):
            raise ValueError(
                f"a schedule is a 2-D integer grid [stages, time steps]; got an array of shape "
                f"{grid.shape} and dtype {grid.dtype}"
            )
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    P, steps = grid.shape
    M = int(grid.max()) + 1
    idle = grid < 0
    fig, ax = new_figure((min(13.0, max(7.5, 2.6 + 0.42 * steps)), 1.9 + 0.42 * min(P, 24)), ax)
    cmap = _microbatch_colors(max(M, 1))
    norm = BoundaryNorm(np.arange(max(M, 1) + 1) - 0.5, cmap.N)
    mesh = ax.pcolormesh(np.ma.masked_where(idle, grid), cmap=cmap, norm=norm, edgecolors="white", linewidth=1.5)
    for s, t in zip(*np.nonzero(idle)):
        ax.add_patch(Rectangle((t, s), 1, 1, facecolor="0.9", edgecolor="0.6", hatch="///", linewidth=0.5))
    if steps <= 32 and P <= 16:
        for s, t in zip(*np.nonzero(~idle)):
            r, g, b, _ = cmap(norm(grid[s, t]))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.55
            ax.text(
                t + 0.5,
                s + 0.5,
                str(grid[s, t]),
                ha="center",
                va="center",
                fontsize=8,
                color="white" if dark else "black",
            )
    ax.set_xlim(0, steps)
    ax.set_ylim(P, 0)  # stage 0 on top
    every = next(k for k in (1, 2, 5, 10, 20, 50, 100, 200, 500, 10**9) if steps / k <= 24)
    ax.set_xticks(np.arange(0, steps, every) + 0.5, [str(t) for t in range(0, steps, every)])  # labels on cells
    every = next(k for k in (1, 2, 5, 10, 20, 50, 100, 200, 500, 10**9) if P / k <= 16)
    ax.set_yticks(np.arange(0, P, every) + 0.5, [str(s) for s in range(0, P, every)])
    ax.tick_params(length=0)
    ax.set_xlabel("time step")
    ax.set_ylabel("pipeline stage")
    frac = float(idle.sum() / idle.size)
    plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("ch") else "s")  # noqa: E731
    ax.set_title(
        title or f"Pipeline schedule — {plural(P, 'stage')}, {plural(M, 'microbatch')}: {frac:.0%} idle",
        fontsize=10,
        loc="left",
    )
    if M > 0:
        cbar = fig.colorbar(mesh, ax=ax, pad=0.01, fraction=0.04 if steps > 12 else 0.07)
        cbar.set_label("microbatch id")
        cbar.set_ticks(range(0, M, 1 if M <= 10 else math.ceil(M / 8)))
    ax.legend(
        handles=[Patch(facecolor="0.9", edgecolor="0.6", hatch="///", label="idle (bubble)")],
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
        frameon=False,
        borderaxespad=0.3,
    )
    return fig
