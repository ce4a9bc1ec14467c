"""Views for chapter 7 (inference): readouts, figures and widgets over `inference` and `serving`.

The same three layers as `training_views` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets controls to
both (``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()``, as `_kit.attach` gives them). Bad
input (an unknown model, chip or precision, a model that does not fit the slice, batch 0, a context that is too
long) gives a readable line and a message figure, never an exception.

Book ch. 7 "All About Transformer Inference" (and the two ch. 8 figures built from the same roofline):

1. decode step time against the batch, with its parts and the knee at B_crit (`step_time_widget`; ch. 7
   "Theoretical estimates for LLM latency and throughput", ch. 8 "latency_breakdown_log");
2. KV-cache memory against the batch for MHA / GQA / MQA next to the HBM (`kv_explorer`; ch. 7 "What about
   memory?" and the LLaMA 2-13B tables);
3. the latency–throughput frontier over batch and slice size (`frontier_widget`; ch. 7 "latency vs cost");
4. one slice's latency–throughput curve against the context length (`context_pareto_widget`; ch. 8 "pareto").

The chapter's static figures (attention intensity, B_crit per precision, weight-stationary sharding,
latency-bound AllGathers, speculative decoding) are in `inference_figures`.

This module holds (1); the others live beside it and their chapter-facing names are re-exported here (the
shared part's helpers are not): `ch07_common` (prefixes, colours, `get_serving_plan`), `ch07_kv` (2),
`ch07_frontier` (3, 4).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, log_axes, message_figure
from scalebook_utils.views.ch07_common import (
    COLORS,
    CONTEXTS,
    FRONTIER_PREFIX,
    KV_PREFIX,
    PARETO_PREFIX,
    STEP_PREFIX,
    format_value,
    get_serving_plan,
    serving_chips,
    slice_options,
)
from scalebook_utils.views.ch07_common import contexts as _contexts
from scalebook_utils.views.ch07_common import cost_text as _cost
from scalebook_utils.views.ch07_common import decode_at as _decode
from scalebook_utils.views.ch07_common import model_options as _model_options
from scalebook_utils.views.ch07_common import plan_on as _on
from scalebook_utils.views.ch07_common import precision_text as _pl
from scalebook_utils.views.ch07_common import quiet as _quiet
from scalebook_utils.views.ch07_common import shape_text as _shape
from scalebook_utils.views.ch07_common import sig as _sig
from scalebook_utils.views.ch07_frontier import (
    context_pareto_readout,
    context_pareto_widget,
    frontier_readout,
    frontier_widget,
    render_context_pareto,
    render_frontier,
)
from scalebook_utils.views.ch07_kv import kv_explorer, kv_readout, render_kv

__all__ = [
    "STEP_PREFIX",
    "KV_PREFIX",
    "FRONTIER_PREFIX",
    "PARETO_PREFIX",
    "CONTEXTS",
    "serving_chips",
    "slice_options",
    "get_serving_plan",
    "step_time_curves",
    "step_time_readout",
    "render_step_time",
    "step_time_widget",
    "kv_readout",
    "render_kv",
    "kv_explorer",
    "frontier_readout",
    "render_frontier",
    "frontier_widget",
    "context_pareto_readout",
    "render_context_pareto",
    "context_pareto_widget",
    "COLORS",
    "format_value",
]


_BOUND_LABELS = {"ici": "ICI-bound", "kv": "KV-bound", "compute": "compute-bound", "weights": "weights-bound"}


def _bound(d: inf.DecodeStep) -> str:
    """`DecodeStep.bottleneck` (what sets the step time) as a label: "KV-bound", "ICI-bound", ..."""
    return _BOUND_LABELS[d.bottleneck]


# --- (1) decode step time against the batch -----------------------------------------------------------------


def step_time_curves(
    model="llama3-70b",
    chip="tpu-v5e",
    slice_="4x4",
    precision="int8-weights",
    S=8192,
    batches: Sequence[int] | None = None,
    *,
    max_context=None,
) -> dict:
    """Every term of the decode step (seconds) at each batch: {"B", "weights", "kv", "flops", "ici", "total",
    "tokens" (tokens/s/chip), "plan"}. Batches past B_max are computed as if the HBM were large enough."""
    plan = get_serving_plan(model, chip, slice_, precision, S, max_context=max_context)
    B = np.asarray(batches if batches is not None else [p.B for p in plan.points], dtype=float)
    steps = [_decode(plan, model, precision, int(b), check_memory=False) for b in B]
    get = lambda f: np.array([f(d) for d in steps])  # noqa: E731
    return {
        "B": B,
        "weights": get(lambda d: d.t_hbm_weights),
        "kv": get(lambda d: d.t_hbm_kv),
        "flops": get(lambda d: d.t_math),
        "ici": get(lambda d: d.t_ici),
        "total": get(lambda d: d.step_time),
        "tokens": get(lambda d: d.tokens_per_s_per_chip),
        "plan": plan,
    }


def step_time_readout(
    model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, B=32, *, max_context=None
) -> str:
    """``decode step: B=32 → 8.65 ms/step, 231 tokens/s/chip ($1.44/1M tokens), weights-bound (B_crit=120,
    B_max=138) | llama3-70b int8-weights on tpu-v5e 4x4, S=8192`` (`inference.decode_step` on the slice)."""
    head = f"{STEP_PREFIX}B={format_value(B)}"
    try:
        plan = get_serving_plan(model, chip, slice_, precision, S, max_context=max_context)
        d = _decode(plan, model, precision, B)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    return (
        f"{head} → {_sig(d.step_time * 1e3)} ms/step, {_sig(d.tokens_per_s_per_chip)} tokens/s/chip"
        f"{_cost(d.tokens_per_s_per_chip, plan.chip)}, {_bound(d)} (B_crit={plan.B_crit:.0f}, "
        f"B_max={plan.B_max}) | {plan.model} {_pl(plan)} on {_on(plan)}, S={format_value(S)}"
    )


def _regions(ax, lo, hi, B_crit, B_max, *, log, label=True) -> None:
    """Shade the flat (weights-bound MLP) region, the compute-bound MLP region, and batches that do not fit."""
    knee = min(max(B_crit, lo), hi)
    ax.axvspan(lo, knee, color=COLORS["mem"], lw=0, label="MLP weights-bound (flat part)" if label else None)
    if B_crit < hi:
        ax.axvspan(
            knee,
            hi,
            color=COLORS["compute"],
            alpha=0.8 if log else 0.5,
            lw=0,
            label="MLP compute-bound (B > B_crit)" if label else None,
        )
        ax.axvline(B_crit, color="#b2182b", lw=1.2, ls="--", label=f"knee: B_crit = {B_crit:.0f}" if label else None)
    if B_max < hi:
        ax.axvspan(
            B_max,
            hi,
            facecolor="none",
            edgecolor="0.5",
            hatch="//",
            lw=0,
            label=f"KV caches do not fit (B > {B_max})" if label else None,
        )


def render_step_time(
    model="llama3-70b",
    chip="tpu-v5e",
    slice_="4x4",
    precision="int8-weights",
    S=8192,
    B=None,
    *,
    log=False,
    max_context=None,
) -> Figure:
    """Left: step time (ms) against the batch — weight loading, KV loading, matmul FLOPs, ICI and the total
    KV + max(weights, FLOPs); the flat region and the knee at B_crit shaded. Right: tokens/s/chip against the
    batch. Linear axes: batches 1 … B_max. `log=True`: log axes up to max(B_max, 4·B_crit), past B_max hatched
    (book ch. 8 "latency_breakdown_log", the compute-bound MLP region in red)."""
    try:
        plan = get_serving_plan(model, chip, slice_, precision, S, max_context=max_context)
        if B is not None:
            _decode(plan, model, precision, B)
        hi = max(plan.B_max, 4 * math.ceil(plan.B_crit)) if log else plan.B_max
        grid = np.geomspace(1, hi, 160) if log else np.linspace(1, hi, min(hi, 200))
        grid = np.unique(np.concatenate([np.round(grid), [plan.B_max, min(round(plan.B_crit), hi)]]))
        c = step_time_curves(model, chip, slice_, precision, S, grid, max_context=max_context)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 5.4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    x, ms = c["B"], lambda k: c[k] * 1e3
    lo = 1 if log else 0
    for ax in (ax1, ax2):
        _regions(ax, lo, x[-1], plan.B_crit, plan.B_max, log=log, label=ax is ax1)
    ax1.plot(x, ms("weights"), color=COLORS["weights"], ls="--", lw=1.6, label="weight loading P·w/(N·W_hbm)")
    ax1.plot(x, ms("kv"), color=COLORS["kv"], lw=1.6, label="KV loading B·S·KV/(N·W_hbm)")
    ax1.plot(x, ms("flops"), color=COLORS["flops"], ls="-.", lw=1.6, label="matmul FLOPs 2·B·P/(N·C)")
    if plan.n_chips > 1:
        ax1.plot(x, ms("ici"), color=COLORS["ici"], ls=":", lw=1.6, label="ICI collectives (overlapped)")
    ax1.plot(x, ms("total"), color=COLORS["total"], lw=2.6, label="step = KV + max(weights, FLOPs)")
    ax2.plot(x, c["tokens"], color=COLORS["total"], lw=2.4, label="tokens/s/chip = B/(step·N)")
    if B is not None:
        d = _decode(plan, model, precision, B)
        dot = dict(color="#d62728", ms=8, zorder=5, clip_on=False, label=f"current B = {format_value(B)}")
        ax1.plot([B], [d.step_time * 1e3], "o", **dot)
        ax2.plot([B], [d.tokens_per_s_per_chip], "o", **dot)
    for ax in (ax1, ax2):
        ax.set_xlim(lo, x[-1])
        ax.set_xlabel("batch B (sequences decoded together)")
        ax.grid(True, alpha=0.3)
        if log:
            log_axes(ax)
    if not log:
        ax1.set_ylim(0, ms("total").max() * 1.08)
        ax2.set_ylim(0, c["tokens"].max() * 1.12)
    ax1.set_ylabel("time per decode step (ms)")
    ax2.set_ylabel("throughput (tokens/s per chip)")
    ax1.set_title("step time and its parts", fontsize=10)
    ax2.set_title(
        f"throughput: max {_sig(c['tokens'][x <= plan.B_max].max())} tokens/s/chip at B ≤ {plan.B_max}", fontsize=10
    )
    fig.legend(*ax1.get_legend_handles_labels(), loc="outside lower center", ncols=5, fontsize=8)
    ax2.legend(loc="upper left" if log else "lower right", fontsize=8, framealpha=0.92)
    fig.suptitle(
        f"{plan.model} in {_pl(plan)} on {plan.chip} {_shape(plan.shape)} ({plan.n_chips} chips), "
        f"S = {format_value(S)} tokens of context (book ch. 7 step-time bound)",
        fontsize=10.5,
    )
    return fig


def step_time_widget(
    model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, B=32, *, log=False
) -> widgets.VBox:
    """Model, chip, slice, precision, context S and a batch slider "B" (its end follows B_max); prints
    `step_time_readout` and draws `render_step_time`."""
    model_dd = widgets.Dropdown(options=_model_options(model), value=model, description="model")
    chips = serving_chips()
    chip_dd = widgets.Dropdown(
        options=chips if chip in dict(chips).values() else [(chip, chip), *chips], value=chip, description="chip"
    )
    try:
        s0 = _shape(sv.slice_shape(chip, slice_)) if isinstance(slice_, int) else str(slice_)
    except INPUT_ERRORS:
        s0 = str(slice_)  # the readout says what is wrong with it

    def slices_for(c):
        try:
            return slice_options(c)
        except INPUT_ERRORS:
            return [s0]

    opts = slices_for(chip)
    slice_dd = widgets.Dropdown(options=opts if s0 in opts else [s0, *opts], value=s0, description="slice")
    prec_dd = widgets.Dropdown(
        options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision, description="precision"
    )
    s_dd = widgets.Dropdown(options=_contexts(S), value=S, description="context S")
    b_sl = widgets.IntSlider(
        value=B, min=1, max=max(B, 1), description="B", continuous_update=False, layout=widgets.Layout(width="70%")
    )
    box = widgets.VBox()

    def on_config(change=None):  # the slider's end follows the largest batch that fits
        if change is not None and getattr(box, "quiet", False):
            return
        with contextlib.suppress(*INPUT_ERRORS):
            b_sl.max = max(
                get_serving_plan(model_dd.value, chip_dd.value, slice_dd.value, prec_dd.value, s_dd.value).B_max, 1
            )

    def on_chip(change):  # keep the chip count when the new chip offers it
        old = slice_dd.value
        n = math.prod(int(v) for v in old.split("x")) if old.replace("x", "").isdigit() else 0
        new = slices_for(change["new"])
        same = [s for s in new if math.prod(int(v) for v in s.split("x")) == n]
        with _quiet(box):  # no view of the detour through the first option
            slice_dd.options = new
            slice_dd.value = same[0] if same else new[-1]
            on_config()

    chip_dd.observe(on_chip, names="value")
    for w in (model_dd, chip_dd, slice_dd, prec_dd, s_dd):
        w.observe(on_config, names="value")
    on_config()
    b_sl.value = B

    def view(model, chip, slice_, precision, S, B):
        if getattr(box, "quiet", False):
            return
        emit(
            box,
            step_time_readout(model, chip, slice_, precision, S, B),
            lambda: render_step_time(model, chip, slice_, precision, S, B, log=log),
            key=(model, chip, slice_, precision, S),
        )

    controls = {"model": model_dd, "chip": chip_dd, "slice_": slice_dd, "precision": prec_dd, "S": s_dd, "B": b_sl}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([model_dd, chip_dd, slice_dd]), widgets.HBox([prec_dd, s_dd]), b_sl, out]
    values = lambda: tuple(w.value for w in controls.values())  # noqa: E731
    return attach(
        box, controls, out, lambda: step_time_readout(*values()), lambda: render_step_time(*values(), log=log)
    )
