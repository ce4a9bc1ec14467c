"""Views for chapter 5 (training): readouts, figures and widgets over `training` and `transformer`.

The same three layers as `widgets` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix (tests and the browser test wait for it), a *render* function returning a matplotlib Figure,
and a *builder* wiring ipywidgets controls to both (``.controls``, ``.readout()``, ``.last_readout``,
``.snapshot()``, as `_kit.attach` gives them). Bad input (an unknown model, a slice shape that is not a
shape) gives a readable line and a message figure, never an exception.

This module draws the chapter's central picture (T_math / T_comms of DP, FSDP, TP and FSDP+TP against the
batch per chip) and step time against the batch. The planner (readout, table, figure, widget) is in
`ch05_planner` and the pipeline schedule in `ch05_pipelines`; this module re-exports both, so
`training_views` is still the one name the notebooks import. The numbers it shows (`slice_info`,
`picture_ratios`, `picture_thresholds`, `step_time_curves`, `threshold_rows`) are computed in
`core.training.pictures` and re-exported here, and `get_plan` is the planner's cached plan
(`training.cached_plan`) under the name the notebooks use; `format_rows` comes from the views' kit.
Chapter 6's views (parameters, days to train, memory, the budget widget, the decision path) are in
`applied_training_views`, which uses the same core module and kit.

Book ch. 5 "How to Parallelize a Transformer for Training".
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as training

# the numbers these views show (pure, in core; re-exported here: training_views.slice_info, … as before)
from scalebook_utils.core.training.pictures import (
    SCHEMES,
    picture_ratios,
    picture_thresholds,
    rank_schemes,
    slice_info,
    step_time_curves,
    threshold_rows,
)

# `training_views.get_plan` (notebooks 5 and 6): the planner's cached plan, `training.cached_plan`
from scalebook_utils.core.training.planner import cached_plan as get_plan
from scalebook_utils.core.units import format_si, format_time
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
    plain_formatter,
    tpu_names,
)

# the chapter's other sections, re-exported (`training_views.planner_widget`, … as before)
from scalebook_utils.views.ch05_pipelines import render_pipeline_schedule
from scalebook_utils.views.ch05_planner import (
    PLANNER_PREFIX,
    planner_readout,
    planner_rows,
    planner_text,
    planner_widget,
    render_planner,
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

#: The browser tests wait for these prefixes; do not change them (PLANNER_PREFIX: `ch05_planner`).
PICTURE_PREFIX = "training picture: "
STEP_PREFIX = "step time: "

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
    curves = {s: np.array([training.comms_ratio(s, x, F, N, name, n_axes=n) for x in b]) for s in SCHEMES}
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
            v = training.comms_ratio(s, batch_per_chip, F, N, name, n_axes=n)
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
) -> widgets.VBox:
    """Chip, slice shape, F and a log slider "B/N"; prints `picture_readout` and draws `render_picture`."""
    chip_dd = widgets.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    shape_box = widgets.Text(
        value=shape, description="slice", continuous_update=False, placeholder="e.g. 4x4x4 or 16x20x28"
    )
    pod_btn = widgets.Button(description="full pod", tooltip="set the slice to this chip's pod")
    f_box = widgets.BoundedIntText(value=int(F), min=1, max=10**7, step=1024, description="F")
    b_slider = widgets.FloatLogSlider(
        value=batch_per_chip,
        base=10,
        min=0,
        max=5,
        step=0.01,
        description="B/N",
        readout_format=",.0f",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    pod_btn.on_click(lambda _b: setattr(shape_box, "value", format_shape(get_chip(chip_dd.value).pod_shape)))
    box = widgets.VBox()

    def view(chip, shape, F, B):
        emit(box, picture_readout(chip, shape, F, B), lambda: render_picture(chip, shape, F, B), key=(chip, shape, F))

    controls = {"chip": chip_dd, "shape": shape_box, "F": f_box, "B": b_slider}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([chip_dd, shape_box, pod_btn]), f_box, b_slider, out]
    values = lambda: (chip_dd.value, shape_box.value, f_box.value, b_slider.value)
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
        below = training.all_comm_bound_batch(N, F, name, max(n - 1, 1), 1)
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
        below = training.all_comm_bound_batch(N, F, name, max(n - 1, 1), 1)
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
