"""Figures for the roofline model (book ch. 1), built over the pure functions in `roofline`.

Every builder returns a `matplotlib.figure.Figure` made without pyplot, so nothing is registered in
pyplot's figure manager (no leaks, no `plt.close` needed) and `fig.savefig(...)` works headless with
any backend. Builders that draw into one panel also accept `ax=` so widgets can combine them.

Colours follow the book's roofline figure: red where an algorithm is bandwidth-bound under every
bandwidth, yellow where it is bound only under the slower one, green where it is compute-bound
(book ch. 1, "Visualizing rooflines").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from scalebook_utils.core import roofline
# torus_path, bandwidth_channels, VMEM_TO_HBM_RATIO live in core; plots.torus_path etc. work as before
from scalebook_utils.core.hardware import VMEM_TO_HBM_RATIO, ChipSpec, bandwidth_channels, get_chip  # noqa: F401
from scalebook_utils.core.topology import ring_hops, torus_path, torus_route_args
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import (SHARD_COLORS, new_figure, si_scale, si_tick)  # noqa: F401  (re-exported: `plots.X` stays)

__all__ = [
    "REGION_COLORS",
    "roofline_figure",
    "achievable_flops_figure",
    "time_bars",
    "measured_roofline_figure",
    "two_chip_figure",
    "critical_batch_figure",
    "si_scale",
]

REGION_COLORS = {"bandwidth-bound": "#e45756", "bound-at-slower": "#f2cf5b", "compute-bound": "#54a24b"}
_REGION_ALPHA = 0.13
_LINE_COLORS = ["#1f4e9c", "#7b3294", "#008080", "#b35806"]
_ALGO_COLORS = ["#d62728", "#2c7fb8", "#6a3d9a", "#e6550d", "#31a354", "#636363"]


# --- small helpers --------------------------------------------------------------------------------






def _plain_tick(v, _pos):
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"
    return f"{v:g}"




def _log_span(lo: float, hi: float) -> np.ndarray:
    return np.logspace(math.log10(lo), math.log10(hi), 400)


# --- the classic roofline -------------------------------------------------------------------------


def _intensity_axes(ax, xlim, ylim, ylabel: str, title: str) -> None:
    """Log-log axes of a roofline: intensity (FLOPs/byte) across, throughput (FLOP/s) up."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.xaxis.set_major_formatter(FuncFormatter(_plain_tick))
    ax.yaxis.set_major_formatter(si_tick())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)


def roofline_figure(peak_flops_per_s: float, bandwidths: Mapping[str, float],
                    algorithms: Mapping[str, float] | None = None, *, ax=None, title: str | None = None,
                    intensity_range: tuple[float, float] | None = None, figsize=(8.0, 4.8)) -> Figure:
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
    x = _log_span(lo, hi)

    ax.axvspan(lo, lo_crit, color=REGION_COLORS["bandwidth-bound"], alpha=_REGION_ALPHA, lw=0,
               label="bandwidth-bound" + (" (every bandwidth)" if len(bandwidths) > 1 else ""))
    if hi_crit > lo_crit * (1 + 1e-9):
        ax.axvspan(lo_crit, hi_crit, color=REGION_COLORS["bound-at-slower"], alpha=0.22, lw=0,
                   label="bandwidth-bound only at the slower bandwidth")
    ax.axvspan(hi_crit, hi, color=REGION_COLORS["compute-bound"], alpha=_REGION_ALPHA, lw=0, label="compute-bound")

    order = sorted(bandwidths.items(), key=lambda kv: kv[1])
    for i, (label, bw) in enumerate(order):
        color = _LINE_COLORS[i % len(_LINE_COLORS)]
        ax.plot(x, roofline.attainable_flops_per_s(x, peak_flops_per_s, bw), color=color, lw=2.2,
                label=f"{label}: {format_si(bw, 'B/s')}, α = {crit[label]:,.3g} FLOPs/byte", gid=f"roofline:{label}")
        ax.plot([crit[label]], [peak_flops_per_s], marker="o", ms=5, color=color, zorder=4)
    ax.axhline(peak_flops_per_s, color="0.35", lw=0.8, ls=":", zorder=1)
    ax.text(lo * 1.15, peak_flops_per_s * 1.15, f"peak {format_si(peak_flops_per_s, 'FLOP/s')}", fontsize=9,
            color="0.25", va="bottom")

    for j, (label, inten) in enumerate(algorithms.items()):
        color = _ALGO_COLORS[j % len(_ALGO_COLORS)]
        ax.axvline(inten, color=color, lw=1.4, ls="--", gid=f"algorithm:{label}")
        for _, bw in order:
            y = roofline.attainable_flops_per_s(inten, peak_flops_per_s, bw)
            ax.plot([inten], [y], marker="D", ms=7, color=color, mec="white", zorder=5)
        y_best = roofline.attainable_flops_per_s(inten, peak_flops_per_s, order[-1][1])
        y_worst = roofline.attainable_flops_per_s(inten, peak_flops_per_s, order[0][1])
        sc, pre = si_scale(y_best)
        got = format_si(y_best, "FLOP/s") if math.isclose(y_best, y_worst) else \
            f"{y_worst / sc:.3g}–{y_best / sc:.3g} {pre}FLOP/s"
        ax.annotate(f"{label}\n{inten:,.3g} FLOPs/byte\n→ {got}", xy=(inten, y_best),
                    xytext=(6, -44 - 30 * (j % 2)),
                    textcoords="offset points", fontsize=8.5, color=color,
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.8))

    y_lo = min(roofline.attainable_flops_per_s(lo, peak_flops_per_s, order[0][1]), peak_flops_per_s / 1e3)
    _intensity_axes(ax, (lo, hi), (y_lo, peak_flops_per_s * 4), "attainable throughput (FLOP/s)",
                    title or "Roofline: attainable FLOP/s vs arithmetic intensity")
    return fig


# --- achievable FLOPs/s of a matmul vs batch ------------------------------------------------------


def achievable_flops_figure(D: float, F: float, chip: ChipSpec | str = "tpu-v5e", mode: str = "bf16", *,
                            B_max: int = 4096, B: float | None = None, ax=None, exact: bool = True,
                            figsize=(8.0, 4.5), title: str | None = None) -> Figure:
    """Achievable FLOPs/s of X[B, D] · W[D, F] against the batch B, with the crossover B marked.

    Below the crossover the matmul waits on HBM and throughput grows ~linearly with B; above it the
    chip runs at peak (book ch. 1, "Matrix multiplication"; the plot of Question 3). The crossover
    line carries gid "crossover" and sits at `roofline.crossover_batch(D, F, chip, mode)`; the
    current batch `B`, if given, is a dot with gid "current-B".
    """
    spec = get_chip(chip)
    peak = spec.peak_flops(roofline.MATMUL_MODES[mode][2]) if mode in roofline.MATMUL_MODES else None
    if peak is None:
        raise ValueError(f"unknown matmul mode {mode!r}; known modes: {', '.join(roofline.MATMUL_MODES)}")
    fig, ax = new_figure(figsize, ax)
    B_max = max(int(B_max), 2, int(B or 1))
    Bs = np.unique(np.round(np.logspace(0, math.log10(B_max), 600)))
    y = roofline.achievable_flops_curve(Bs, D, F, spec, mode, exact)
    scale, prefix = si_scale(peak)
    unit = f"{prefix}FLOP/s" if mode != "int8" else f"{prefix}OP/s"
    b_cross = roofline.crossover_batch(D, F, spec, mode)

    if math.isfinite(b_cross) and b_cross < B_max:
        ax.axvspan(1, b_cross, color=REGION_COLORS["bandwidth-bound"], alpha=_REGION_ALPHA, lw=0,
                   label="memory-bound (T_comms > T_math)")
        ax.axvspan(b_cross, B_max, color=REGION_COLORS["compute-bound"], alpha=_REGION_ALPHA, lw=0,
                   label="compute-bound (T_math > T_comms)")
        ax.axvline(b_cross, color="black", lw=1.3, ls="--", gid="crossover",
                   label=f"crossover B ≈ {b_cross:,.0f}")
        ax.annotate(f"crossover B ≈ {b_cross:,.0f}", xy=(b_cross, peak / scale), xytext=(5, 5),
                    textcoords="offset points", ha="left" if b_cross < B_max ** 0.75 else "right", fontsize=9)
    else:
        ax.axvspan(1, B_max, color=REGION_COLORS["bandwidth-bound"], alpha=_REGION_ALPHA, lw=0,
                   label="memory-bound at every B shown")
        if math.isfinite(b_cross):
            ax.axvline(b_cross, color="black", lw=1.3, ls="--", gid="crossover",
                       label=f"crossover B ≈ {b_cross:,.0f} (off the plot)")
        note = ("never compute-bound: D and F are too small" if not math.isfinite(b_cross)
                else f"compute-bound only beyond B ≈ {b_cross:,.0f}")
        ax.text(0.02, 0.97, note, transform=ax.transAxes, fontsize=9, va="top")

    ax.axhline(peak / scale, color="0.3", lw=1, ls=":", label=f"peak {format_si(peak, unit[len(prefix):])}")
    ax.plot(Bs, y / scale, color=_LINE_COLORS[0], lw=2.2, label=f"achievable, {mode}")

    if B is not None:
        yb = float(roofline.achievable_flops_curve(np.array([float(B)]), D, F, spec, mode, exact)[0])
        ax.plot([B], [yb / scale], marker="o", ms=9, color="#d62728", mec="white", zorder=5, gid="current-B",
                clip_on=False)
        right = math.log(max(B, 1)) > 0.7 * math.log(B_max)
        ax.annotate(f"B = {B:,.0f}: {format_si(yb, unit[len(prefix):])}\n({yb / peak:.0%} of peak)", xy=(B, yb / scale),
                    xytext=(-10 if right else 10, -36 if yb > 0.6 * peak else 8), textcoords="offset points",
                    ha="right" if right else "left", fontsize=9, color="#b2182b",
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85))

    ax.set_xscale("log", base=2)
    ax.set_xlim(1, B_max)
    ticks = [2**k for k in range(0, int(math.log2(B_max)) + 1, 2 if B_max >= 64 else 1)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(_plain_tick))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, peak / scale * 1.12)
    ax.set_xlabel("batch size B (tokens, log scale)")
    ax.set_ylabel(f"achievable throughput ({unit})")
    ax.set_title(title or f"{spec.name}, {mode}: X[B, {D:,.0f}] · W[{D:,.0f}, {F:,.0f}]")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return fig


# --- T_math vs T_comms ----------------------------------------------------------------------------


def time_bars(t_math_s: float, t_comms_s: float, *, ax=None, figsize=(3.2, 2.6), title: str | None = None) -> Figure:
    """Two horizontal bars, T_math and T_comms, in a shared time unit; the longer one sets the bound."""
    fig, ax = new_figure(figsize, ax)
    scale, prefix = si_scale(max(t_math_s, t_comms_s))
    vals = [t_comms_s / scale, t_math_s / scale]
    colors = [REGION_COLORS["bandwidth-bound"], REGION_COLORS["compute-bound"]]
    bars = ax.barh([r"$T_\mathrm{comms}$", r"$T_\mathrm{math}$"], vals, color=colors, height=0.6, gid="time-bars")
    for bar, v, t in zip(bars, vals, [t_comms_s, t_math_s]):
        ax.text(max(vals) * 0.03, bar.get_y() + bar.get_height() / 2,
                format_si(t, "s").replace(" u", " µ"), va="center", ha="left", fontsize=9)
    ax.set_xlim(0, max(vals) * 1.1)
    ax.set_xlabel(f"time ({prefix}s)")
    bound = "compute-bound" if t_math_s >= t_comms_s else "memory-bound"
    ax.set_title(title or rf"$T_\mathrm{{math}}$ vs $T_\mathrm{{comms}}$ → {bound}", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


# --- predict, then measure ------------------------------------------------------------------------


def measured_roofline_figure(calibration_peak: float, calibration_bw: float,
                             points: Sequence[tuple[float, float, str]], *, ax=None, title: str | None = None,
                             figsize=(8.0, 4.8), annotate: bool = True) -> Figure:
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
    x = _log_span(lo, hi)
    ax.axvspan(lo, crit, color=REGION_COLORS["bandwidth-bound"], alpha=_REGION_ALPHA, lw=0, label="memory-bound")
    ax.axvspan(crit, hi, color=REGION_COLORS["compute-bound"], alpha=_REGION_ALPHA, lw=0, label="compute-bound")
    ax.plot(x, roofline.attainable_flops_per_s(x, calibration_peak, calibration_bw), color=_LINE_COLORS[0], lw=2.2,
            label=(f"calibrated roofline: {format_si(calibration_peak, 'FLOP/s')}, "
                   f"{format_si(calibration_bw, 'B/s')}, α = {crit:,.3g} FLOPs/byte"), gid="calibrated-roofline")
    if pts:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=46, color="#d62728", edgecolor="white", zorder=5,
                   label="measured", gid="measured")
        if annotate and len(pts) <= 12:
            # labels alternate above and below their points (in order of intensity), so neighbours do not collide
            for k, (i, f, lab) in enumerate(sorted(pts)):
                above = k % 2 == 0
                ax.annotate(lab, xy=(i, f), xytext=(0, 7 if above else -8), textcoords="offset points",
                            ha="center", va="bottom" if above else "top", fontsize=7.5, color="0.2",
                            bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.75))
    ys = [p[1] for p in pts] + [calibration_peak]
    _intensity_axes(ax, (lo, hi), (min(min(ys) / 3, calibration_peak / 1e3), max(ys) * 3),
                    "measured throughput (FLOP/s)",
                    title or "Predict, then measure: matmuls on this machine's calibrated roofline")
    return fig


# --- the two-chip network roofline ----------------------------------------------------------------


def two_chip_figure(B: float = 1024, F: float = 8192, flops_per_s: float = 1.97e14, link_bytes_per_s: float = 4.5e10,
                    *, D: float | None = None, D_range: tuple[float, float] = (256, 131072), ax=None,
                    title: str | None = None, figsize=(8.0, 4.5)) -> Figure:
    """T_math and T_comms against the contraction dim D when X[B, D] · Y[D, F] is split over D on 2 chips.

    T_math = B·D·F / C grows with D; T_comms = 2·B·F / W (swapping bf16 partial sums) does not, so the
    lines cross at D = 2C/W whatever B is (book ch. 1, "Network communication rooflines": D > 8755 on
    v5e-like chips with 4.5e10 B/s links). The threshold line carries gid "d-threshold".
    """
    fig, ax = new_figure(figsize, ax)
    d_lo, d_hi = D_range
    Ds = _log_span(d_lo, d_hi)
    d_star = roofline.two_chip_d_threshold(flops_per_s, link_bytes_per_s)
    t_math = B * Ds * F / flops_per_s
    t_comms = np.full_like(Ds, 2 * B * F / link_bytes_per_s)
    ax.axvspan(d_lo, min(max(d_star, d_lo), d_hi), color=REGION_COLORS["bandwidth-bound"], alpha=_REGION_ALPHA, lw=0,
               label="communication-bound")
    ax.axvspan(min(max(d_star, d_lo), d_hi), d_hi, color=REGION_COLORS["compute-bound"], alpha=_REGION_ALPHA, lw=0,
               label="compute-bound")
    ax.plot(Ds, t_math, color=REGION_COLORS["compute-bound"], lw=2.2, label=r"$T_\mathrm{math} = BDF/C$")
    ax.plot(Ds, t_comms, color=REGION_COLORS["bandwidth-bound"], lw=2.2, label=r"$T_\mathrm{comms} = 2BF/W$")
    ax.axvline(d_star, color="black", lw=1.3, ls="--", gid="d-threshold", label=f"threshold D = 2C/W ≈ {d_star:,.0f}")
    if D is not None:
        r = roofline.two_chip_roofline(B, D, F, flops_per_s, link_bytes_per_s)
        ax.plot([D, D], [r.t_math_s, r.t_comms_s], marker="o", ms=7, ls="", color="#1f4e9c", mec="white", zorder=5,
                gid="current-D")
        ax.annotate(f"D = {D:,.0f}\n{r.bound}", xy=(D, max(r.t_math_s, r.t_comms_s)), xytext=(8, 8),
                    textcoords="offset points", fontsize=9, color="#1f4e9c")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(d_lo, d_hi)
    ax.xaxis.set_major_formatter(FuncFormatter(_plain_tick))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(si_tick("s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("contraction dimension D (elements, log scale)")
    ax.set_ylabel("time per chip (s, log scale)")
    ax.set_title(title or (f"Two chips split D: B = {B:,.0f}, F = {F:,.0f}, C = {format_si(flops_per_s, 'FLOP/s')}, "
                           f"W = {format_si(link_bytes_per_s, 'B/s')}"), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    return fig


# --- critical batch per chip ----------------------------------------------------------------------


def critical_batch_figure(chips: Sequence[str] | None = None, modes: Sequence[str] = ("bf16", "int8"), *,
                          ax=None, figsize=(8.0, 3.8)) -> Figure:
    """Grouped bars of `roofline.critical_batch` per chip and mode (chips without the dtype are skipped)."""
    from scalebook_utils.core.hardware import CHIPS

    names = list(chips) if chips is not None else list(CHIPS)
    fig, ax = new_figure(figsize, ax)
    width = 0.8 / max(1, len(modes))
    for k, mode in enumerate(modes):
        xs, ys = [], []
        for i, name in enumerate(names):
            try:
                ys.append(roofline.critical_batch(name, mode))
                xs.append(i + (k - (len(modes) - 1) / 2) * width)
            except ValueError:
                pass
        bars = ax.bar(xs, ys, width=width, label=mode, color=_LINE_COLORS[k % len(_LINE_COLORS)])
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    for i, name in enumerate(names):
        if not any(m_ in _supported_modes(name) for m_ in modes):
            ax.text(i, 5, f"no {'/'.join(modes)}\npeak", ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("critical batch B (tokens)")
    ax.set_xlabel("chip")
    ax.set_title("Critical batch: above it a weight-streaming matmul is compute-bound")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _supported_modes(chip: str) -> list[str]:
    spec = get_chip(chip)
    return [m for m, (_, _, compute) in roofline.MATMUL_MODES.items() if compute in spec.peak_flops_per_s]


# --- chapter 2: the systolic array, the ICI torus, the bandwidth hierarchy -------------------------

__all__ += ["systolic_frame_figure", "systolic_utilisation_figure", "torus_path", "torus_figure",
            "bandwidth_channels", "bandwidth_hierarchy_figure"]

_BUSY, _LOADED, _EMPTY = "#54a24b", "#dbe7f3", "white"


def _cell_text(v: float) -> str:
    return "" if not np.isfinite(v) else (f"{v:.0f}" if float(v).is_integer() and abs(v) < 1e5 else f"{v:.2g}")


def systolic_utilisation_figure(run, *, cycle: int | None = None, ax=None, figsize=(6.0, 2.6)) -> Figure:
    """Bars of the fraction of busy cells per cycle of a `systolic.SystolicRun`; `cycle` highlighted.

    The weight-load cycles are grey (no multiply-adds); the compute phase shows the fill and the drain.
    """
    fig, ax = new_figure(figsize, ax)
    u = run.utilisation * 100
    colors = ["0.75" if s.phase == "load" else "#2c7fb8" for s in run.snapshots]
    if cycle is not None:
        colors[cycle] = "#d62728"
    ax.bar(np.arange(run.cycles), u, color=colors, width=0.85, gid="utilisation")
    if run.load_cycles:
        ax.axvspan(-0.5, run.load_cycles - 0.5, color="0.92", lw=0, zorder=0)
        ax.text((run.load_cycles - 1) / 2, 50, "weights\nloading", ha="center", va="center", fontsize=8, color="0.35")
    ax.set_xlim(-0.5, run.cycles - 0.5)
    ax.set_ylim(0, 105)
    ax.set_xlabel("cycle (clock ticks, from 0)")
    ax.set_ylabel("cells busy (%)")
    M, K, N = run.shape
    ax.set_title(f"Utilisation per cycle: fill, then drain ({run.cycles} cycles = "
                 f"{run.load_cycles} load + {M}+{K}+{N}−2 compute)", fontsize=9)
    ax.set_xticks(range(0, run.cycles, 1 if run.cycles <= 20 else 2 if run.cycles <= 40 else 5))
    ax.tick_params(labelsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def systolic_frame_figure(run, cycle: int, *, figsize=None) -> Figure:
    """One cycle of a `systolic.SystolicRun`: the K × N grid, the skewed feed, the outputs, the utilisation.

    Each cell shows its weight w; a busy cell (green) also shows the activation a passing through it and
    the partial sum Σ it hands down. Activations still waiting sit to the left of their row, staggered
    by the skew; rows of B still to load sit above the grid; finished entries of C sit below it.
    Book ch. 2, Appendix B.
    """
    if not 0 <= int(cycle) < run.cycles:
        raise ValueError(f"cycle must be in 0..{run.cycles - 1} for this run, got {cycle!r}")
    cycle = int(cycle)
    s = run.snapshots[cycle]
    M, K, N = run.shape
    t = cycle - run.load_cycles  # compute-phase cycle (negative while loading)
    feed_w = M + K - 1
    # the leftmost activation still waiting sets the left edge (no empty margin once the feed has entered);
    # at least 2.6 units stay free for the row labels left of the grid
    waiting = [-((m + k) - max(t, -1)) for k in range(K) for m in range(M) if np.isfinite(s.feed[k, m])]
    left = min([-2.6] + [x - 0.6 for x in waiting])
    width_units = -left + N + 4.5  # + the colour key on the right
    height_units = K + M + 2.5 + (K if s.phase == "load" else 0)
    if figsize is None:
        figsize = (min(13.0, 2.4 + 0.85 * width_units), min(9.5, 2.6 + 0.55 * height_units + 2.2))
    fig = Figure(figsize=figsize, layout="constrained")
    ax, ax_u = fig.subplots(2, 1, height_ratios=[max(3.0, height_units * 0.6), 1.6])
    fs = max(6.0, min(9.0, 40 / max(K, N, 4)))

    from matplotlib.patches import FancyArrowPatch, Rectangle

    for k in range(K):
        for n in range(N):
            busy = bool(s.active[k, n])
            loaded = np.isfinite(s.weights[k, n])
            color = _BUSY if busy else _LOADED if loaded else _EMPTY
            ax.add_patch(Rectangle((n - 0.45, -k - 0.45), 0.9, 0.9, fc=color, ec="0.3", lw=1,
                                   gid=f"cell:{k},{n}" + (":busy" if busy else "")))
            if loaded:
                ax.text(n, -k + 0.24, f"w={_cell_text(s.weights[k, n])}", ha="center", va="center", fontsize=fs)
            if busy:
                ax.text(n, -k, f"a={_cell_text(s.activation[k, n])}", ha="center", va="center", fontsize=fs,
                        color="#08306b")
                ax.text(n, -k - 0.25, f"Σ={_cell_text(s.psum[k, n])}", ha="center", va="center", fontsize=fs,
                        color="#7f2704")
    # activations waiting to enter row k: A[m, k] enters at compute cycle m + k → distance (m + k) - t
    for k in range(K):
        for m in range(M):
            if np.isfinite(s.feed[k, m]):
                x = -((m + k) - max(t, -1))  # while weights load, the feed waits in its skewed start position
                ax.text(x, -k, f"{_cell_text(s.feed[k, m])}", ha="center", va="center", fontsize=fs,
                        bbox=dict(boxstyle="round,pad=0.25", fc="#c6dbef", ec="none"))
        ax.add_patch(FancyArrowPatch((-0.75, -k), (-0.5, -k), arrowstyle="-|>", mutation_scale=8, color="0.4"))
    if np.isfinite(s.feed).any():
        ax.text(-(feed_w + 1) / 2, 0.62, "A, skewed: row k waits k extra cycles →", ha="center", va="bottom",
                fontsize=fs, color="0.3")
    # rows of B still to load (phase 1): B[j] for j = 0 .. K-2-cycle, next to enter nearest the grid
    if s.phase == "load":
        remaining = K - 1 - cycle
        for j in range(remaining):
            y = 1 + (remaining - 1 - j)
            for n in range(N):
                ax.text(n, y, _cell_text(run.B[j, n]), ha="center", va="center", fontsize=fs,
                        bbox=dict(boxstyle="round,pad=0.25", fc="#fdd0a2", ec="none"))
        if remaining:
            ax.text(-0.7, 1 + (remaining - 1) / 2, "B rows\nto load ↓", ha="right", va="center", fontsize=fs, color="0.3")
    # outputs below the grid
    y0 = -K - 0.3
    ax.text(-0.7, y0 - (M - 1) / 2, "C = A @ B\n(finished)", ha="right", va="center", fontsize=fs, color="0.3")
    for m in range(M):
        for n in range(N):
            v = s.outputs[m, n]
            ax.add_patch(Rectangle((n - 0.4, y0 - m - 0.4), 0.8, 0.8, fc="#fee391" if np.isfinite(v) else "0.96",
                                   ec="0.6", lw=0.6))
            ax.text(n, y0 - m, _cell_text(v) if np.isfinite(v) else "–", ha="center", va="center", fontsize=fs)
    from matplotlib.patches import Patch

    key = [Patch(fc=_BUSY, ec="0.3", label="busy: w weight,\na activation, Σ partial sum"),
           Patch(fc=_LOADED, ec="0.3", label="weight loaded, idle"),
           Patch(fc="#c6dbef", label="A waiting to enter"),
           Patch(fc="#fee391", ec="0.6", label="finished entry of C")]
    if s.phase == "load":
        key.insert(2, Patch(fc=_EMPTY, ec="0.3", label="no weight yet"))
        key.insert(3, Patch(fc="#fdd0a2", label="row of B to load"))
    ax.legend(handles=key, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=fs, frameon=False,
              title="key", title_fontsize=fs)
    ax.set_xlim(left, N - 0.4)
    top = (K - 1 - cycle + 0.6) if s.phase == "load" and K - 1 - cycle > 0 else 1.0
    ax.set_ylim(y0 - M + 0.4, top + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    phase = ("loading weights (rows of B shift down from the top)" if s.phase == "load"
             else "activations from the left (skewed), partial sums down")
    ax.set_title(f"Systolic array {K}×{N}, A[{M}×{K}] @ B[{K}×{N}] — cycle {cycle} (of cycles 0–{run.cycles - 1}):\n"
                 f"{phase}; {s.n_active}/{K * N} cells busy", fontsize=9.5)
    systolic_utilisation_figure(run, cycle=cycle, ax=ax_u)
    return fig


# --- the ICI torus --------------------------------------------------------------------------------


def torus_figure(slice_shape, wraparound, src, dst, *, ax=None, figsize=None, title: str | None = None) -> Figure:
    """Chips of a slice as a grid with their ICI links, wraparound links as arcs, a shortest src→dst path in red.

    slice_shape: 1 to 3 sides, e.g. (4, 4) or (4, 4, 8). wraparound: one bool, or one per axis. src, dst:
    chip coordinates. A 3-D slice is drawn as the plane of its first two axes that holds `src`; the title
    says so and how many hops the route spends along axis 2. Book ch. 2, "TPU Networking".
    """
    shape, wrap, src, dst = torus_route_args(slice_shape, wraparound, src, dst)
    path = torus_path(shape, wrap, src, dst)
    hops = len(path) - 1
    shape2 = shape + (1,) * (2 - len(shape)) if len(shape) < 2 else shape[:2]
    rows, cols = shape2
    if figsize is None:
        figsize = (max(6.4, min(10.0, 2.6 + 0.55 * cols)), min(8.5, 2.3 + 0.5 * rows))
    fig, ax = new_figure(figsize, ax)

    lw = 1.6 if max(rows, cols) <= 16 else 0.8
    z = src[2] if len(shape) == 3 else None

    def xy(c):  # chip coordinate → (x, y): axis 1 across, axis 0 down
        r = c[0]
        col = c[1] if len(c) > 1 else 0
        return col, -r

    from matplotlib.collections import LineCollection

    # ordinary links: one collection (a Line2D per link costs ms each on a 16×16 pod)
    segs = [((c, -r), (c + 1, -r)) for r in range(rows) for c in range(cols - 1)]
    segs += [((c, -r), (c, -r - 1)) for r in range(rows - 1) for c in range(cols)]
    ax.add_collection(LineCollection(segs, colors="0.6", linewidths=lw, zorder=1, gid="links"), autolim=False)
    # wraparound links: a dashed stub leaving each edge chip outwards (it joins the stub on the opposite edge)
    stub = 0.55
    wrap1 = len(shape) >= 2 and wrap[1] and cols > 2
    wrap0 = wrap[0] and rows > 2
    stubs = []
    if wrap1:
        stubs += [s for r in range(rows) for s in (((-stub, -r), (0, -r)), ((cols - 1, -r), (cols - 1 + stub, -r)))]
    if wrap0:
        stubs += [s for c in range(cols) for s in (((c, 0), (c, stub)),
                                                   ((c, -(rows - 1)), (c, -(rows - 1) - stub)))]
    if stubs:  # one segment per stub
        ax.add_collection(LineCollection(stubs, colors="#7b3294", linewidths=lw, linestyles="--", zorder=1,
                                         gid="wrap-link"), autolim=False)
    # the route (only the steps inside the drawn plane); a step over a wraparound link is drawn as its two stubs
    red = dict(color="#d62728", lw=lw * 2.6, zorder=3, solid_capstyle="round")
    for a, b in zip(path[:-1], path[1:]):
        if z is not None and (a[2] != z or b[2] != z):
            continue
        (xa, ya), (xb, yb) = xy(a), xy(b)
        if abs(xa - xb) > 1:  # wrap along axis 1
            ax.plot([-stub, 0], [ya, ya], gid="path-wrap", **red)
            ax.plot([cols - 1, cols - 1 + stub], [ya, ya], gid="path-wrap", **red)
        elif abs(ya - yb) > 1:  # wrap along axis 0
            ax.plot([xa, xa], [0, stub], gid="path-wrap", **red)
            ax.plot([xa, xa], [-(rows - 1), -(rows - 1) - stub], gid="path-wrap", **red)
        else:
            ax.plot([xa, xb], [ya, yb], gid="path", **red)
    # chips: one marker line per fill colour (end points, on the route, off it)
    show_labels = rows * cols <= 64
    on_route = set(path)
    groups: dict[str, list] = {"#d62728": [], "#fcbba1": [], "#deebf7": []}
    for r in range(rows):
        for c in range(cols):
            coord = (r, c) if len(shape) >= 2 else (r,)
            full = coord + ((z,) if z is not None else ())
            fc = "#d62728" if full in (src, dst) else "#fcbba1" if full in on_route else "#deebf7"
            groups[fc].append((c, -r))
            if show_labels:
                ax.text(c, -r, ",".join(map(str, coord)), ha="center", va="center", fontsize=6.5, zorder=5,
                        color="white" if full in (src, dst) else "black", in_layout=False)  # inside the axes
    for fc, pts in groups.items():
        if pts:
            ax.plot(*zip(*pts), marker="s", ms=18 if show_labels else 7, mfc=fc, mec="0.25", zorder=4, ls="")
    pad = 0.75
    ax.set_xlim(-pad, cols - 1 + pad)
    ax.set_ylim(-(rows - 1) - pad, pad)
    ax.set_aspect("equal")
    tick = lambda n: 1 if n <= 8 else 2 if n <= 16 else 4  # noqa: E731 - every chip index, then every 2nd/4th
    ax.set_xticks(range(0, cols, tick(cols)))
    ax.set_yticks([-r for r in range(0, rows, tick(rows))], [str(r) for r in range(0, rows, tick(rows))])
    ax.tick_params(labelsize=7, length=0)
    for sp in ax.spines.values():
        sp.set_visible(False)
    ax.set_xlabel("axis 1 (chip index)" if len(shape) >= 2 else "(one axis: chips in a line)")
    ax.set_ylabel("axis 0 (chip index)")
    shape_s = "×".join(map(str, shape))
    wrap_s = "wraparound on " + (", ".join(f"axis {i}" for i, w in enumerate(wrap) if w and shape[i] > 2)
                                 if any(w and n > 2 for w, n in zip(wrap, shape)) else "no axis")
    head = f"{shape_s} slice, {wrap_s}: {src} → {dst} = {hops} hop{'s' if hops != 1 else ''}"
    far = sum(ring_hops(n, w) for n, w in zip(shape, wrap))  # the slice's diameter (topology.max_hops of a Slice)
    sub = f"(farthest pair in this slice: {far} hops; dashed stubs = wraparound links)"
    if z is not None:
        dz = sum(1 for a, b in zip(path[:-1], path[1:]) if a[2] != b[2])
        sub += f"\ndrawn: the plane axis 2 = {z} (of {shape[2]}); {dz} of the hops run along axis 2, not drawn"
    ax.set_title(title or f"{head}\n{sub}", fontsize=9)
    return fig


# --- the bandwidth hierarchy ----------------------------------------------------------------------

def bandwidth_hierarchy_figure(chip: ChipSpec | str = "tpu-v5e", dtype: str = "bf16", *, ax=None,
                               figsize=(8.5, 3.6)) -> Figure:
    """Horizontal log bars of each channel's bandwidth, each labelled with its critical intensity C/W.

    C is the chip's `dtype` peak; C/W (FLOPs per byte) is the intensity an operation needs to stay
    compute-bound when its bytes come over that channel (book ch. 2, "Key Takeaways": HBM > ICI > PCIe
    > DCN; VMEM ≈ 22 × HBM). Channels the book gives no number for are listed but not drawn.
    """
    spec = get_chip(chip)
    peak = spec.peak_flops(dtype)
    rows = bandwidth_channels(spec, dtype)
    fig, ax = new_figure(figsize, ax)
    names = [f"{n}\n({note})" for n, _, note in rows]
    ys = np.arange(len(rows))[::-1]
    colors = ["#1a9850", "#1f4e9c", "#7b3294", "#e6550d", "#b2182b", "#636363"]
    known = [bw for _, bw, _ in rows if bw]
    lo = 10 ** math.floor(math.log10(min(known) / 10))
    hi = 10 ** math.ceil(math.log10(max(known) * 40))
    for y, (name, bw, _note), color in zip(ys, rows, colors):
        if bw:
            ax.barh(y, bw, left=lo, color=color, height=0.6, gid=f"channel:{name}")
            cw = peak / bw
            sub = "link" if name == "ICI" else name  # ICI: one link, one way (W_link); α_ici uses both directions
            label = (f"{format_si(bw, 'B/s')} → C/W_{sub} = {cw:,.0f} FLOPs/byte" if cw >= 100 else
                     f"{format_si(bw, 'B/s')} → C/W_{sub} = {cw:.3g} FLOPs/byte")
            if name == "ICI":
                label += f"\n(both directions, W_ici = 2·W_link: α_ici = C/W_ici = {cw / 2:,.0f})"
            ax.text(bw * 1.3, y, label, va="center", fontsize=8.5)
        else:
            ax.text(lo * 1.3, y, "no number in the book for this chip", va="center", fontsize=8.5, color="0.4",
                    style="italic")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(si_tick("B/s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(ys, names, fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("bandwidth (bytes/s, log scale)")
    ax.set_ylabel("channel")
    ax.set_title(f"{spec.name}: bandwidth hierarchy and critical intensity C/W "
                 f"(C = {format_si(peak, 'FLOP/s')} {dtype})", fontsize=10)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    return fig


# --- chapter 3: sharded arrays and collective times -------------------------------------------------

__all__ += ["SHARD_COLORS", "sharding_blocks_figure", "collective_knee_bytes", "collective_time_figure",
            "ALLGATHER_AXES", "allgather_axes_figure"]



def _device_id(coords, sizes) -> int:
    k = 0
    for c, s in zip(coords, sizes):
        k = k * s + c
    return k


def sharding_blocks_figure(array, mesh, shape, *, ax=None, figsize=(4.2, 3.6), title: str | None = None) -> Figure:
    """The global 2-D array cut into the blocks devices hold (`sharding.device_blocks`), one colour per shard.

    Each block is labelled with the devices holding it (device number = mesh coordinates read
    first-axis-major, as `jax.make_mesh` numbers them): a replicated array shows one block listing
    every device. `shape`: the global dim sizes (a sequence, or a mapping dim → size). Book ch. 3,
    "A unified notation for sharding". 1-D arrays are drawn as one row.
    """
    from matplotlib.patches import Rectangle

    from scalebook_utils.core import sharding as sh

    arr, m = sh.parse_array(array), sh.parse_mesh(mesh)
    blocks = sh.device_blocks(arr, m, shape)
    local = sh.check(arr, m, shape)
    glob = list(sh.shape_tuple(arr, shape))
    by_block: dict = {}
    for coords, rng in blocks.items():
        by_block.setdefault(rng, []).append(_device_id(coords, m.sizes))
    fig, ax = new_figure(figsize, ax)
    rows_n = glob[0] if len(glob) > 1 else 1
    cols_n = glob[1] if len(glob) > 1 else glob[0]
    for i, (rng, devs) in enumerate(sorted(by_block.items())):
        (r0, r1), (c0, c1) = (rng[0], rng[1]) if len(rng) > 1 else ((0, 1), rng[0])
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=SHARD_COLORS[i % len(SHARD_COLORS)],
                               edgecolor="black", linewidth=1.2))
        label = ("d" + ",".join(map(str, devs))) if len(devs) <= 4 else f"d{devs[0]}…d{devs[-1]}\n({len(devs)} copies)"
        if len(devs) <= 4 and len(devs) > 1:
            label = "\n".join("d" + ",".join(map(str, devs[k:k + 2])) for k in range(0, len(devs), 2))
        w, h = (c1 - c0) / cols_n, (r1 - r0) / rows_n
        fs = max(6.0, min(11.0, 60 * min(w, h * 1.6)))
        ax.text((c0 + c1) / 2, (r0 + r1) / 2, label, ha="center", va="center", fontsize=fs)
    ax.set_xlim(0, cols_n)
    ax.set_ylim(rows_n, 0)
    ax.set_aspect("auto")
    dims = arr.dims
    ax.set_xlabel(f"{dims[1] if len(dims) > 1 else dims[0]} ({cols_n})")
    ax.set_ylabel(f"{dims[0]} ({rows_n})" if len(dims) > 1 else "")
    ax.set_xticks([])
    ax.set_yticks([])
    rep = sh.replication(arr, m)
    ax.set_title(title if title is not None else
                 f"{arr.spec()} on {m}\nper device {'×'.join(map(str, local))}, "
                 f"{len(by_block)} distinct shard{'s' if len(by_block) > 1 else ''}, each on {rep} device{'s' if rep > 1 else ''}",
                 fontsize=9)
    return fig


def collective_knee_bytes(kind: str, chip: ChipSpec | str, axis_sizes, wraparound=True) -> float:
    """Bytes where the latency and bandwidth terms of a collective's cost are equal (the regime boundary).

    Both terms are linear in bytes / constant, so knee = n · latency_s / bandwidth_s at any n.
    For 'ppermute' `axis_sizes` is ignored (one hop). Book ch. 3, "A Deeper Dive…" (latency-bound regime).
    """
    from scalebook_utils.core import collectives
    kw = {"hops": 1} if collectives.normalize_kind(kind) == "ppermute" else {"wraparound": wraparound}
    c = collectives.collective(kind, 1e9, axis_sizes, chip, **kw)
    return 1e9 * c.latency_s / c.bandwidth_s if c.bandwidth_s > 0 else math.inf


def collective_time_figure(kind: str, chip: ChipSpec | str = "tpu-v5e", axis_sizes=(16,), wraparound=True, *,
                           bytes_range=(1e3, 1e10), n_bytes: float | None = None, ax=None, figsize=(6.4, 4.0),
                           label: str | None = None, color: str | None = None, title: str | None = None) -> Figure:
    """Collective time against bytes (log-log) from `collectives.collective`, the knee marked.

    Left of the knee the time is flat (latency-bound: T_min × hops); right of it, linear in bytes
    (bandwidth-bound). The dashed line is the bandwidth term alone. `n_bytes` adds a marker at that
    size. Call again with the same `ax` to overlay another chip or axis size.
    """
    from scalebook_utils.core import collectives
    k = collectives.normalize_kind(kind)
    kw = {"hops": 1} if k == "ppermute" else {"wraparound": wraparound}
    spec = get_chip(chip)
    xs = _log_span(*bytes_range)
    costs = [collectives.collective(k, float(x), axis_sizes, spec, **kw) for x in xs]
    t = np.array([c.seconds for c in costs])
    tb = np.array([c.bandwidth_s for c in costs])
    fresh = ax is None
    fig, ax = new_figure(figsize, ax)
    n_lines = sum(1 for ln in ax.get_lines() if ln.get_linestyle() == "-")  # one solid line per curve
    color = color or _LINE_COLORS[n_lines % len(_LINE_COLORS)]
    sizes_txt = "×".join(str(s) for s in np.atleast_1d(axis_sizes)) if k != "ppermute" else "1 hop"
    wrap_txt = "" if k == "ppermute" else (", wrap" if wraparound else ", no wrap")
    knee = collective_knee_bytes(k, spec, axis_sizes, wraparound)
    shown = bytes_range[0] < knee < bytes_range[1]
    # the knee goes into the legend (labels next to the points overlapped when curves were overlaid)
    text = (label or f"{spec.name}, axis {sizes_txt}{wrap_txt}") + (f" · knee {format_si(knee, 'B', digits=3)}"
                                                                    if shown else "")
    ax.plot(xs, t, color=color, lw=2, label=text)
    ax.plot(xs, tb, color=color, lw=1, ls="--", alpha=0.6)
    if shown:
        t_knee = collectives.collective(k, knee, axis_sizes, spec, **kw).seconds
        ax.plot([knee], [t_knee], "o", color=color, ms=7, mfc="white", mew=2)
    if n_bytes is not None:
        c = collectives.collective(k, float(n_bytes), axis_sizes, spec, **kw)
        ax.plot([n_bytes], [c.seconds], "*", color="#d62728", ms=13, zorder=5, ls="none",
                label=f"this size: {format_si(float(n_bytes), 'B', digits=3)} → {format_si(c.seconds, 's', digits=3)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(si_tick("B"))
    ax.yaxis.set_major_formatter(si_tick("s"))
    ax.set_xlabel("bytes (n_bytes given to the cost model)")
    ax.set_ylabel("time")
    ax.grid(True, which="major", alpha=0.3)
    if fresh or title is not None:
        ax.set_title(title if title is not None else
                     f"{k}: latency-bound (flat) left of the knee ○,\nbandwidth-bound right of it (dashed: bandwidth term alone)",
                     fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return fig


#: Axes that exist, with the wraparound ch. 2 gives them, grouped by one-way ICI link bandwidth (the only
#: chip number the bandwidth-bound part depends on): (axis size, wraps?, where such an axis occurs).
ALLGATHER_AXES = {
    "TPU v5e, v4p: 45 GB/s one-way links": [
        (4, False, "v5e 4×4: no wrap below 16"), (4, True, "v4p 4×4×4 cube"),
        (16, True, "v5e pod side; v4p 16×16×16")],
    "TPU v6e, v5p: 90 GB/s one-way links": [
        (4, False, "v6e 4×4: no wrap below 16"), (4, True, "v5p 4×4×4 cube"),
        (16, True, "v6e pod side; v5p 16×16×16"), (28, True, "v5p pod's long axis")],
}


def allgather_axes_figure(kind: str = "all_gather", axes=None, *, bytes_range=(1e3, 1e9),
                          figsize=(12.5, 4.4)) -> Figure:
    """One panel per link bandwidth: `kind`'s time vs bytes on axes that exist, with their wraparound.

    `axes`: {panel title: [(axis size, wraps, label), …]}, default ALLGATHER_AXES (v5e/v6e pods are
    16×16, so no axis is longer than 16 there; a v5e/v6e axis under 16 has no wraparound; v4p/v5p
    wrap in whole 4×4×4 cubes; book ch. 2). Chips with equal link bandwidth share a panel because
    their curves coincide (v4p = v5e, v5p = v6e). Book ch. 3, "A Deeper Dive…".
    """
    from scalebook_utils.core.hardware import get_chip as _chip
    axes = ALLGATHER_AXES if axes is None else axes
    chips = {"45": "tpu-v5e", "90": "tpu-v5p"}
    fig = Figure(figsize=figsize, layout="constrained")
    for ax, (title, rows) in zip(np.atleast_1d(fig.subplots(1, len(axes))), axes.items()):
        chip = next((c for bw, c in chips.items() if f"{bw} GB/s" in title), "tpu-v5e")
        for x, wrap, where in rows:
            collective_time_figure(kind, _chip(chip), (x,), wrap, ax=ax, bytes_range=bytes_range,
                                   label=f"axis {x}, {'ring' if wrap else 'line'} ({where})")
        ax.set_title(title, fontsize=10)
    fig.suptitle(f"{kind}: flat (latency) left of each knee ○, sloped (bandwidth) right of it; "
                 "dashed: bandwidth term alone", fontsize=10)
    return fig
