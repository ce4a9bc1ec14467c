"""Views for chapter 11 (the capstone), the figure: `capstone_figure`, the training step's time budget next to
the serving frontier.

Left: the best training layout's step as bars, compute and each communication in ms (they overlap; the longest
sets the step), titled with the layout, the step time, the bound and the roofline MFU. Right: the serving
frontier on log–log axes — tokens/s per chip against ms per decode step for every batch on every slice size,
coloured by slice, the Pareto frontier, the latency cap, the smallest slice's best point (◆) and the chosen
point under the cap (★). Fixed margins (no constrained layout): one layout for every plan, so the app's
`LiveFigure` redraws only what a new plan moves. A side that cannot be planned shows its reason in its half.
`capstone_views` (`ch11_conclusion`) re-exports the figure with the chapter's other views.

Book ch. 11 "Conclusions and Further Reading" over ch. 5–8 and ch. 12.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from scalebook_utils.core import capstone as cap
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.units import format_time
from scalebook_utils.views._kit import INPUT_ERRORS, error_text, plain_formatter
from scalebook_utils.views.ch11_capstone_readout import budget_with, plan_sides

__all__ = ["capstone_figure"]


def _message(ax, text: str) -> None:
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, wrap=True, transform=ax.transAxes)


def _draw_training(ax, side) -> None:
    if isinstance(side, Exception):
        return _message(ax, f"training: cannot plan\n{error_text(side)}")
    if not side.feasible:
        return _message(ax, f"training: no feasible layout on {side.n_chips:,} × {side.chip}")
    e = side.estimate
    times = {k: v for k, v in e.times.items() if v > 0 or k == "compute"}
    names = list(times)[::-1]
    vals = np.array([times[k] for k in names]) * 1e3
    slowest = max(times, key=times.get)
    colors = ["#54a24b" if k == "compute" else "#e45756" if k == slowest else "#9ecae1" for k in names]
    ax.barh(names, vals, color=colors)
    for y, v in enumerate(vals):
        ax.text(v, y, " " + format_time(v / 1e3).replace(" u", " µ"), va="center", fontsize=8)
    ax.set_xlim(0, vals.max() * 1.35)
    ax.set_xlabel("time per training step (ms); they overlap, the longest sets the step")
    ax.set_ylabel("part of the step")
    ax.set_title(
        f"training {side.model} on {side.n_chips:,} × {side.chip}: {side.layout}\n"
        f"{format_time(side.step_time)}/step, {side.bound}, roofline MFU {side.roofline_mfu:.0%} "
        f"(upper bound; the days use {side.mfu:.0%})",
        fontsize=9,
    )
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Log-axis ticks inside [lo, hi]: 1, 2 and 5 of each decade over at most four decades, else the decades
    alone (a TPU v5p pod spans five)."""
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    subs = (1, 2, 5) if math.log10(hi / lo) <= 4 else (1,)
    return [m * 10.0**k for k in range(k0, k1 + 1) for m in subs if lo <= m * 10.0**k <= hi]


def _draw_serving(ax, side) -> None:
    """The serving frontier. Its structure is the same for every plan (one scatter of every point, coloured by
    slice; the marker key fixed, the chosen and smallest-slice points' numbers in a text under it), so the app's
    `LiveFigure` redraws what a new plan moves — points, limits, title, the slice key, that text."""
    if isinstance(side, Exception):
        return _message(ax, f"serving: cannot plan\n{error_text(side)}")
    if not side.feasible:
        return _message(ax, f"serving: {side.reason}")
    f = side.frontier
    gpu = get_chip(side.chip).kind == "gpu"
    cmap = colormaps["viridis"]
    colors = [cmap(i / max(len(f.plans) - 1, 1)) for i in range(len(f.plans))]
    pts = [(p.latency * 1e3, p.tokens_per_s_per_chip, c) for pl, c in zip(f.plans, colors) for p in pl.points]
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=9, c=[p[2] for p in pts], alpha=0.75, zorder=3)
    ax.plot(
        [p.latency * 1e3 for p in f.pareto],
        [p.tokens_per_s_per_chip for p in f.pareto],
        color="black",
        lw=1.6,
        drawstyle="steps-post",
        zorder=4,
        label="Pareto frontier",
    )
    ax.axvline(
        side.max_latency * 1e3, color="#d62728", lw=1.1, ls="--", label=f"latency cap {side.max_latency * 1e3:.3g} ms"
    )
    top, b = side.max_throughput, side.best
    ax.plot(
        [top.latency * 1e3],
        [top.tokens_per_s_per_chip],
        "D",
        color="#ff7f0e",
        ms=8,
        mec="black",
        zorder=6,
        label="smallest slice's best",
    )
    ax.plot(
        [b.latency * 1e3] if b else [],
        [b.tokens_per_s_per_chip] if b else [],
        "*",
        color="#d62728",
        ms=15,
        mec="black",
        zorder=7,
        label="chosen (best under the cap)",
    )
    lat = [p.latency * 1e3 for p in f.points] + [side.max_latency * 1e3]
    thr = [p.tokens_per_s_per_chip for p in f.points]
    for axis, scale, limits, lim in (
        (ax.xaxis, ax.set_xscale, ax.set_xlim, (min(lat) / 1.3, max(lat) * 1.3)),
        (ax.yaxis, ax.set_yscale, ax.set_ylim, (min(thr) / 1.5, max(thr) * 1.8)),
    ):
        scale("log")
        limits(*lim)
        axis.set_major_locator(FixedLocator(_log_ticks(*lim)))
        axis.set_major_formatter(plain_formatter())
        axis.set_minor_locator(NullLocator())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("latency: time per decode step (ms)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    ax.set_title(
        f"serving {side.model} in {side.precision_text()}, {side.S:g}-token context\n"
        "every batch on every slice size (right: the chip and its slices)",
        fontsize=9,
    )
    ax.grid(True, which="major", alpha=0.3)
    key = dict(fontsize=7, borderaxespad=0, frameon=False, handletextpad=0.4)
    slices = ax.legend(
        [Line2D([], [], ls="", marker="o", ms=3, color=c, alpha=0.75) for c in colors],
        [cap.slice_text(pl.n_chips, pl.shape, gpu) for pl in f.plans],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        labelspacing=0.3,
        title=f"{side.chip} slices",
        title_fontsize=7,
        alignment="left",
        **key,
    )  # a TPU v5p pod: 14 slices
    ax.add_artist(slices)  # a second legend below: the markers' key, the same for every plan
    ax.legend(loc="lower left", bbox_to_anchor=(1.01, 0.0), **key)
    chosen = (
        f"★ B={b.B:g} on {cap.chips_text(b.n_chips, gpu)},\n   {cap.tokens_per_s_text(b.tokens_per_s_per_chip)} tokens/s/chip"
        if b
        else "★ nothing under the cap"
    )
    ax.text(
        1.01,
        0.23,
        f"{chosen}\n◆ B={top.B:g} on {cap.chips_text(top.n_chips, gpu)}",
        transform=ax.transAxes,
        fontsize=7,
        va="bottom",
    )  # just above the markers' key


def capstone_figure(
    model="llama3-70b", train_chip="tpu-v5p", serve_chip="tpu-v5e", budget: cap.Budget | None = None, **budget_fields
) -> Figure:
    """Left: the training step's time budget of the best layout (compute and each communication, ms; the longest
    sets the step). Right: the serving frontier — tokens/s per chip against ms per decode step for every batch and
    slice, the latency cap, the smallest slice's best point (◆) and the chosen point under the cap (★)."""
    fig = Figure(figsize=(13.0, 4.6))  # fixed margins: constrained layout would double the app's redraw time
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[1, 1.15])
    fig.subplots_adjust(left=0.11, right=0.80, bottom=0.12, top=0.86, wspace=0.3)
    try:
        b = budget_with(budget, budget_fields)
        tf.get_model(model)
    except INPUT_ERRORS as exc:
        _message(ax1, f"cannot plan: {error_text(exc)}")
        ax2.set_axis_off()
        return fig
    train, serve = plan_sides(model, train_chip, serve_chip, b)
    _draw_training(ax1, train)
    _draw_serving(ax2, serve)
    return fig
