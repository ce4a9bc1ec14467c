"""Chapter 7 views, (3) the latency–throughput frontier over batch and slice size (`frontier_widget`; book ch. 7
"latency vs cost") and (4) one slice's latency–throughput curve against the context length
(`context_pareto_widget`; ch. 8 "pareto"): readouts, figures and widgets. Re-exported by `ch07_inference`
(`inference_views`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import ipywidgets as widgets
from matplotlib import colormaps
from matplotlib.figure import Figure

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.core.units import require_positive
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, log_axes, message_figure
from scalebook_utils.views.ch07_common import (
    CONTEXTS,
    FRONTIER_PREFIX,
    PARETO_PREFIX,
    format_value,
    get_serving_plan,
    serving_chips,
)
from scalebook_utils.views.ch07_common import contexts as _contexts
from scalebook_utils.views.ch07_common import cost_text as _cost
from scalebook_utils.views.ch07_common import decode_at as _decode
from scalebook_utils.views.ch07_common import model_name as _name
from scalebook_utils.views.ch07_common import model_options as _model_options
from scalebook_utils.views.ch07_common import plan_on as _on
from scalebook_utils.views.ch07_common import precision_text as _pl
from scalebook_utils.views.ch07_common import shape_text as _shape
from scalebook_utils.views.ch07_common import sig as _sig

__all__ = [
    "frontier_readout",
    "render_frontier",
    "frontier_widget",
    "context_pareto_readout",
    "render_context_pareto",
    "context_pareto_widget",
]


# --- (3) the latency–throughput frontier over batch and slice -----------------------------------------------------


def _frontier(model, chip, precision, S, slices=None) -> sv.Frontier:
    if slices is not None:
        slices = tuple(slices)
    return _frontier_cached(model, chip, precision, S, slices)


@functools.lru_cache(maxsize=128)
def _frontier_cached(model, chip, precision, S, slices):
    return sv.frontier(model, chip, precision, S, slices=slices)


def _where(pt: sv.ServingPoint) -> str:
    return f"B={pt.B:g} on {pt.n_chips} chips, {_sig(pt.latency * 1e3)} ms/step"


def frontier_readout(
    model="llama3-70b", chip="tpu-v5e", precision="int8-weights", S=8192, max_latency=None, *, slices=None
) -> str:
    """``frontier: llama3-70b int8-weights on tpu-v5e, S=8192, 8–256 chips → max 425 tokens/s/chip (B=128 on 64
    chips, 4.71 ms/step) ($0.784/1M tokens) | min latency 2.56 ms/step (B=45 on 64 chips) | 8 Pareto points``,
    then with `max_latency` (seconds) the best point under it. Book ch. 7 "latency vs cost" figure."""
    head = f"{FRONTIER_PREFIX}{_name(model)}"
    try:
        f = _frontier(model, chip, precision, S, slices)
        if max_latency is not None:
            require_positive(max_latency=max_latency)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    top, fast = sv.fastest_of_best(f.pareto), f.pareto[0]
    n = [pl.n_chips for pl in f.plans]
    line = (
        f"{FRONTIER_PREFIX}{f.model} {_pl(f)} on {f.chip}, S={format_value(S)}, {min(n)}–{max(n)} chips → max "
        f"{_sig(top.tokens_per_s_per_chip)} tokens/s/chip ({_where(top)}){_cost(top.tokens_per_s_per_chip, f.chip)}"
        f" | min latency {_sig(fast.latency * 1e3)} ms/step (B={fast.B:g} on {fast.n_chips} chips) | "
        f"{len(f.pareto)} Pareto points"
    )
    if max_latency is not None:
        best = sv.best_under(f.points, max_latency)
        cap = f"under {_sig(max_latency * 1e3)} ms"
        line += (
            f" | {cap}: {_sig(best.tokens_per_s_per_chip)} tokens/s/chip ({_where(best)})"
            if best
            else f" | {cap}: nothing (the fastest step is {_sig(fast.latency * 1e3)} ms)"
        )
    return line


def render_frontier(
    model="llama3-70b",
    chip="tpu-v5e",
    precision="int8-weights",
    S=8192,
    *,
    slices=None,
    max_latency=None,
    compare_precisions=False,
) -> Figure:
    """Latency (ms/step, x) against tokens/s/chip (y), log-log: every (batch, slice) point coloured by slice,
    the Pareto line, an optional latency cap with the best point under it, and with `compare_precisions` the
    Pareto line of bf16 (or of int8-weights when `precision` is bf16; pass precision names or `Precision`s to
    choose). Book ch. 7 figure "latency vs cost" (ESTI): int8 weights move the frontier."""
    try:
        f = _frontier(model, chip, precision, S, slices)
        others = []
        if compare_precisions:
            names = (
                [compare_precisions]
                if isinstance(compare_precisions, (str, inf.Precision))
                else compare_precisions
                if not isinstance(compare_precisions, bool)
                else ["int8-weights" if f.precision == "bf16" else "bf16"]
            )
            others = [_frontier(model, chip, q, S, slices) for q in names]
        if max_latency is not None:
            require_positive(max_latency=max_latency)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(9.5, 5.4), layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["viridis"]
    for i, pl in enumerate(f.plans):
        col = cmap(i / max(len(f.plans) - 1, 1))
        ax.scatter(
            [p.latency * 1e3 for p in pl.points],
            [p.tokens_per_s_per_chip for p in pl.points],
            s=14,
            color=col,
            alpha=0.8,
            label=f"{pl.n_chips} chips ({_shape(pl.shape)})",
            zorder=3,
        )
    ax.plot(
        [p.latency * 1e3 for p in f.pareto],
        [p.tokens_per_s_per_chip for p in f.pareto],
        color="black",
        lw=2,
        drawstyle="steps-post",
        label=f"Pareto frontier, {_pl(f)}",
        zorder=4,
    )
    for o, ls in zip(others, ("--", ":", "-.")):
        ax.plot(
            [p.latency * 1e3 for p in o.pareto],
            [p.tokens_per_s_per_chip for p in o.pareto],
            color="#d62728",
            lw=1.8,
            ls=ls,
            drawstyle="steps-post",
            label=f"Pareto frontier, {_pl(o)}",
            zorder=4,
        )
    if max_latency is not None:
        ax.axvline(
            max_latency * 1e3, color="#d62728", lw=1.2, ls="--", label=f"latency cap {_sig(max_latency * 1e3)} ms"
        )
        best = sv.best_under(f.points, max_latency)
        if best:
            ax.plot(
                [best.latency * 1e3],
                [best.tokens_per_s_per_chip],
                "*",
                color="#d62728",
                ms=16,
                zorder=6,
                label=f"best under the cap: {_where(best)}",
            )
    log_axes(ax, fine=True)
    lat = [p.latency * 1e3 for p in f.points]
    ax.set_xlim(min(lat) / 1.35, max(lat) * 1.2)
    ax.set_xlabel("latency: time per decode step, i.e. per token of each sequence (ms)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    vs = f"\nPareto lines: {f.precision} (black) vs {', '.join(o.precision for o in others)} (red)" if others else ""
    ax.set_title(
        f"{f.model} on {f.chip}, S = {format_value(S)}: every batch on every power-of-two slice in {f.precision}{vs}",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right", framealpha=0.92, ncols=2)
    return fig


_CAPS = [("none", None), ("2 ms", 2e-3), ("5 ms", 5e-3), ("10 ms", 1e-2), ("20 ms", 2e-2), ("50 ms", 5e-2)]


def frontier_widget(
    model="llama3-70b", chip="tpu-v5e", precision="int8-weights", S=8192, max_latency=None, *, compare_precisions=False
) -> widgets.VBox:
    """Model, chip, precision, context S, a latency cap and "compare with bf16"; prints `frontier_readout`."""
    model_dd = widgets.Dropdown(options=_model_options(model), value=model, description="model")
    chip_dd = widgets.Dropdown(options=serving_chips(), value=get_chip(chip).name, description="chip")
    prec_dd = widgets.Dropdown(
        options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision, description="precision"
    )
    s_dd = widgets.Dropdown(options=_contexts(S), value=S, description="context S")
    caps = _CAPS if max_latency in dict(_CAPS).values() else [*_CAPS, (f"{_sig(max_latency * 1e3)} ms", max_latency)]
    cap_dd = widgets.Dropdown(options=caps, value=max_latency, description="latency cap")
    cmp_cb = widgets.Checkbox(value=bool(compare_precisions), description="compare precisions")
    box = widgets.VBox()

    def view(model, chip, precision, S, cap, compare):
        emit(
            box,
            frontier_readout(model, chip, precision, S, cap),
            lambda: render_frontier(model, chip, precision, S, max_latency=cap, compare_precisions=compare),
            key=(model, chip, precision, cap, compare),
        )

    controls = {"model": model_dd, "chip": chip_dd, "precision": prec_dd, "S": s_dd, "cap": cap_dd, "compare": cmp_cb}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([model_dd, chip_dd, prec_dd]), widgets.HBox([s_dd, cap_dd, cmp_cb]), out]
    v = lambda: tuple(w.value for w in controls.values())  # noqa: E731
    return attach(
        box,
        controls,
        out,
        lambda: frontier_readout(*v()[:5]),
        lambda: render_frontier(*v()[:4], max_latency=v()[4], compare_precisions=v()[5]),
    )


# --- (4) one slice, several contexts: the ch. 8 "pareto" figure --------------------------------------------------


def context_pareto_readout(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192) -> str:
    """``pareto: S=8192 → B=1…138: 5.48–20.3 ms/step, up to 425 tokens/s/chip | 2× the minimum latency buys 27×
    the throughput of B=1 | llama3-70b int8-weights on tpu-v5e 4x4`` (book ch. 8 "pareto" figure)."""
    head = f"{PARETO_PREFIX}S={format_value(S)}"
    try:
        plan = get_serving_plan(model, chip, slice_, precision, S)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    lo, top = plan.min_latency, sv.fastest_of_best(plan.points)
    twice = sv.best_under(plan.points, 2 * lo.latency)
    return (
        f"{head} → B=1…{plan.B_max}: {_sig(lo.latency * 1e3)}–{_sig(plan.points[-1].latency * 1e3)} ms/step, "
        f"up to {_sig(top.tokens_per_s_per_chip)} tokens/s/chip | 2× the minimum latency buys "
        f"{_sig(twice.tokens_per_s_per_chip / lo.tokens_per_s_per_chip)}× the throughput of B=1 | "
        f"{plan.model} {_pl(plan)} on {_on(plan)}"
    )


def render_context_pareto(
    model="llama3-70b",
    chip="tpu-v5e",
    slice_="4x4",
    precision="int8-weights",
    S=8192,
    *,
    contexts: Sequence[int] = CONTEXTS,
) -> Figure:
    """Latency (ms/step) against tokens/s/chip over the feasible batches of one slice, one curve per context
    length (faint), the selected S bold with its ends and B_crit marked. Book ch. 8 "pareto" figure."""
    try:
        plan = get_serving_plan(model, chip, slice_, precision, S)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(9.5, 5.2), layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["plasma"]
    skipped = []
    for i, s in enumerate(sorted({*contexts, S})):
        try:
            pl = get_serving_plan(model, chip, slice_, precision, s)
        except INPUT_ERRORS:
            skipped.append(format_value(s))
            continue
        sel = s == S
        ms = [p.latency * 1e3 for p in pl.points]
        tps = [p.tokens_per_s_per_chip for p in pl.points]
        ax.plot(
            ms,
            tps,
            color="black" if sel else cmap(0.85 * i / max(len(contexts), 1)),
            lw=3 if sel else 1.4,
            alpha=1 if sel else 0.6,
            marker="o" if sel else None,
            ms=3.5,
            label=f"S = {format_value(s)}: B ≤ {pl.B_max}" + (" (selected)" if sel else ""),
            zorder=4 if sel else 2,
        )
    for pt, txt in ((plan.points[0], "B=1"), (plan.points[-1], f"B={plan.B_max}")):
        ax.annotate(
            txt, (pt.latency * 1e3, pt.tokens_per_s_per_chip), xytext=(6, -12), textcoords="offset points", fontsize=8.5
        )
    if plan.B_crit <= plan.B_max:
        d = _decode(plan, model, precision, math.ceil(plan.B_crit))
        ax.plot(
            [d.step_time * 1e3],
            [d.tokens_per_s_per_chip],
            "D",
            color="#d62728",
            ms=7,
            zorder=5,
            label=f"B_crit = {plan.B_crit:.0f} (MLP turns compute-bound)",
        )
    ax.set_xlabel("latency: time per decode step (ms)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    note = f"; did not fit: S = {', '.join(skipped)}" if skipped else ""
    ax.set_title(
        f"{plan.model} {_pl(plan)} on {plan.chip} {_shape(plan.shape)}: the batch sweeps each curve{note}", fontsize=10
    )
    ax.set_xlim(0, None)
    ax.set_ylim(0, None)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.92)
    return fig


def context_pareto_widget(
    model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192
) -> widgets.VBox:
    """A context-length slider "S" and a precision selector; prints `context_pareto_readout`."""
    s_sl = widgets.SelectionSlider(
        options=_contexts(S), value=S, description="S", continuous_update=False, layout=widgets.Layout(width="70%")
    )
    prec_dd = widgets.Dropdown(
        options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision, description="precision"
    )
    box = widgets.VBox()

    def view(S, precision):
        emit(
            box,
            context_pareto_readout(model, chip, slice_, precision, S),
            lambda: render_context_pareto(model, chip, slice_, precision, S),
            key=(precision,),
        )

    controls = {"S": s_sl, "precision": prec_dd}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([s_sl, prec_dd]), out]
    return attach(
        box,
        controls,
        out,
        lambda: context_pareto_readout(model, chip, slice_, prec_dd.value, s_sl.value),
        lambda: render_context_pareto(model, chip, slice_, prec_dd.value, s_sl.value),
    )
