"""Chapter 1's roofline figures: the classic roofline and this machine's measured roofline, and their colours.

Attainable throughput = min(C, I · W) in FLOP/s for an arithmetic intensity I (FLOPs/byte), a peak C (FLOP/s)
and a bandwidth W (bytes/s); the critical intensity α = C / W is where the two meet (book ch. 1, "Visualizing
rooflines"). The numbers are `core.roofline`'s; these figures only draw them.

`roofline_figure` draws the classic log-log roofline with each algorithm's intensity marked;
`measured_roofline_figure` draws the calibrated roofline of this machine with measured points on it ("predict,
then measure"). Colours follow the book's roofline figure (`REGION_COLORS`): red where an algorithm is
bandwidth-bound under every bandwidth, yellow where it is bound only under the slower one, green where it is
compute-bound; `REGION_ALPHA` is shared with the chapter's other figures (`ch01_figures`).

How this module differs from `ch01_figures`: both of these figures put arithmetic intensity (FLOPs/byte)
across and attainable throughput up (the roofline itself, classic and measured); `ch01_figures` draws one
problem against its size (a matmul's batch B, the two-chip D), its T_math / T_comms bars, and the critical
batch per chip.

Every builder returns a `matplotlib.figure.Figure` made without pyplot (no leaks, no `plt.close` needed) and
accepts `ax=` to draw into a caller's panel. `ch01_figures` re-exports these names, and the notebooks reach
them through the `plots` façade.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from scalebook_utils.core import roofline
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import LINE_COLORS, log_span, new_figure, plain_tick, si_scale, si_tick

__all__ = [
    "REGION_COLORS",
    "roofline_figure",
    "measured_roofline_figure",
]

REGION_COLORS = {"bandwidth-bound": "#e45756", "bound-at-slower": "#f2cf5b", "compute-bound": "#54a24b"}
#: the alpha of the region backgrounds (the bound-at-slower band is drawn at 0.22)
REGION_ALPHA = 0.13
_ALGO_COLORS = ["#d62728", "#2c7fb8", "#6a3d9a", "#e6550d", "#31a354", "#636363"]


# --- the classic roofline -------------------------------------------------------------------------


def _intensity_axes(ax, xlim, ylim, ylabel: str, title: str) -> None:
    """Log-log axes of a roofline: intensity (FLOPs/byte) across, throughput (FLOP/s) up."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.xaxis.set_major_formatter(FuncFormatter(plain_tick))
    ax.yaxis.set_major_formatter(si_tick())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)


def roofline_figure(
    peak_flops_per_s: float,
    bandwidths: Mapping[str, float],
    algorithms: Mapping[str, float] | None = None,
    *,
    ax=None,
    title: str | None = None,
    intensity_range: tuple[float, float] | None = None,
    figsize=(8.0, 4.8),
) -> Figure:
    """Log-log roofline: attainable FLOPs/s = min(peak, intensity × bandwidth) for each bandwidth.

    peak_flops_per_s: the compute ceiling (FLOPs/s). bandwidths: label → bytes/s (e.g. HBM, ICI).
    algorithms: label → arithmetic intensity (FLOPs/byte); each is drawn as a vertical marker with a
    dot where it meets each roofline. Background regions: bandwidth-bound under all bandwidths (red),
    bound only under the slower ones (yellow), compute-bound under all (green). Book ch. 1,
    "Visualizing rooflines".
    """
    if not bandwidths:
        raise ValueError("bandwidths must name at least one bandwidth (label → bytes/s)")
    algorithms = dict(algorithms or {})
    fig, ax = new_figure(figsize, ax)
    crit = {label: peak_flops_per_s / bw for label, bw in bandwidths.items()}
    lo_crit, hi_crit = min(crit.values()), max(crit.values())
    if intensity_range is None:
        values = list(crit.values()) + [v for v in algorithms.values() if v > 0]
        lo = 10 ** math.floor(math.log10(min(min(values), lo_crit) / 10))
        hi = 10 ** math.ceil(math.log10(max(max(values), hi_crit) * 10))
        intensity_range = (lo, hi)
    lo, hi = intensity_range
    x = log_span(lo, hi)

    ax.axvspan(
        lo,
        lo_crit,
        color=REGION_COLORS["bandwidth-bound"],
        alpha=REGION_ALPHA,
        lw=0,
        label="bandwidth-bound" + (" (every bandwidth)" if len(bandwidths) > 1 else ""),
    )
    if hi_crit > lo_crit * (1 + 1e-9):
        ax.axvspan(
            lo_crit,
            hi_crit,
            color=REGION_COLORS["bound-at-slower"],
            alpha=0.22,
            lw=0,
            label="bandwidth-bound only at the slower bandwidth",
        )
    ax.axvspan(hi_crit, hi, color=REGION_COLORS["compute-bound"], alpha=REGION_ALPHA, lw=0, label="compute-bound")

    order = sorted(bandwidths.items(), key=lambda kv: kv[1])
    for i, (label, bw) in enumerate(order):
        color = LINE_COLORS[i % len(LINE_COLORS)]
        ax.plot(
            x,
            roofline.attainable_flops_per_s(x, peak_flops_per_s, bw),
            color=color,
            lw=2.2,
            label=f"{label}: {format_si(bw, 'B/s')}, α = {crit[label]:,.3g} FLOPs/byte",
            gid=f"roofline:{label}",
        )
        ax.plot([crit[label]], [peak_flops_per_s], marker="o", ms=5, color=color, zorder=4)
    ax.axhline(peak_flops_per_s, color="0.35", lw=0.8, ls=":", zorder=1)
    ax.text(
        lo * 1.15,
        peak_flops_per_s * 1.15,
        f"peak {format_si(peak_flops_per_s, 'FLOP/s')}",
        fontsize=9,
        color="0.25",
        va="bottom",
    )

    for j, (label, inten) in enumerate(algorithms.items()):
        color = _ALGO_COLORS[j % len(_ALGO_COLORS)]
        ax.axvline(inten, color=color, lw=1.4, ls="--", gid=f"algorithm:{label}")
        for _, bw in order:
            y = roofline.attainable_flops_per_s(inten, peak_flops_per_s, bw)
            ax.plot([inten], [y], marker="D", ms=7, color=color, mec="white", zorder=5)
        y_best = roofline.attainable_flops_per_s(inten, peak_flops_per_s, order[-1][1])
        y_worst = roofline.attainable_flops_per_s(inten, peak_flops_per_s, order[0][1])
        sc, pre = si_scale(y_best)
        got = (
            format_si(y_best, "FLOP/s")
            if math.isclose(y_best, y_worst)
            else f"{y_worst / sc:.3g}–{y_best / sc:.3g} {pre}FLOP/s"
        )
        ax.annotate(
            f"{label}\n{inten:,.3g} FLOPs/byte\n→ {got}",
            xy=(inten, y_best),
            xytext=(6, -44 - 30 * (j % 2)),
            textcoords="offset points",
            fontsize=8.5,
            color=color,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8),
        )

    y_lo = min(roofline.attainable_flops_per_s(lo, peak_flops_per_s, order[0][1]), peak_flops_per_s / 1e3)
    _intensity_axes(
        ax,
        (lo, hi),
        (y_lo, peak_flops_per_s * 4),
        "attainable throughput (FLOP/s)",
        title or "Roofline: attainable FLOP/s vs arithmetic intensity",
    )
    return fig


# --- predict, then measure ------------------------------------------------------------------------


def measured_roofline_figure(
    calibration_peak: float,
    calibration_bw: float,
    points: Sequence[tuple[float, float, str]],
    *,
    ax=None,
    title: str | None = None,
    figsize=(8.0, 4.8),
    annotate: bool = True,
) -> Figure:
    """The calibrated roofline of this machine with measured (intensity, FLOPs/s, label) points on it.

    Points on or just under the roofline are what the model predicts; points far below it show
    where the simple model (peak, one bandwidth) misses (small ops, caches, launch overhead).
    """
    fig, ax = new_figure(figsize, ax)
    pts = [(float(i), float(f), str(lab)) for i, f, lab in points]
    crit = calibration_peak / calibration_bw
    xs = [p[0] for p in pts] + [crit]
    lo = 10 ** math.floor(math.log10(min(xs) / 3))
    hi = 10 ** math.ceil(math.log10(max(xs) * 3))
    x = log_span(lo, hi)
    ax.axvspan(lo, crit, color=REGION_COLORS["bandwidth-bound"], alpha=REGION_ALPHA, lw=0, label="memory-bound")
    ax.axvspan(crit, hi, color=REGION_COLORS["compute-bound"], alpha=REGION_ALPHA, lw=0, label="compute-bound")
    ax.plot(
        x,
        roofline.attainable_flops_per_s(x, calibration_peak, calibration_bw),
        color=LINE_COLORS[0],
        lw=2.2,
        label=(
            f"calibrated roofline: {format_si(calibration_peak, 'FLOP/s')}, "
            f"{format_si(calibration_bw, 'B/s')}, α = {crit:,.3g} FLOPs/byte"
        ),
        gid="calibrated-roofline",
    )
    if pts:
        ax.scatter(
            [p[0] for p in pts],
            [p[1] for p in pts],
            s=46,
            color="#d62728",
            edgecolor="white",
            zorder=5,
            label="measured",
            gid="measured",
        )
        if annotate and len(pts) <= 12:
            # labels alternate above and below their points (in order of intensity), so neighbours do not collide
            for k, (i, f, lab) in enumerate(sorted(pts)):
                above = k % 2 == 0
                ax.annotate(
                    lab,
                    xy=(i, f),
                    xytext=(0, 7 if above else -8),
                    textcoords="offset points",
                    ha="center",
                    va="bottom" if above else "top",
                    fontsize=7.5,
                    color="0.2",
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.75),
                )
    ys = [p[1] for p in pts] + [calibration_peak]
    _intensity_axes(
        ax,
        (lo, hi),
        (min(min(ys) / 3, calibration_peak / 1e3), max(ys) * 3),
        "measured throughput (FLOP/s)",
        title or "Predict, then measure: matmuls on this machine's calibrated roofline",
    )
    return fig
