"""Figures for chapter 1 (rooflines), built over the pure functions in `roofline`.

The classic roofline (`roofline_figure`), a matmul's achievable FLOPs/s against the batch
(`achievable_flops_figure`) with its T_math / T_comms bars (`time_bars`), the calibrated roofline of this
machine with measured points (`measured_roofline_figure`), the two-chip network roofline (`two_chip_figure`)
and the critical batch per chip (`critical_batch_figure`). The chapter's widgets (`ch01_rooflines`) draw with
them; the notebooks reach both through the `plots` and `widgets` façades.

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
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import LINE_COLORS, log_span, new_figure, si_scale, si_tick

__all__ = [
    "REGION_COLORS",
    "roofline_figure",
    "achievable_flops_figure",
    "time_bars",
    "measured_roofline_figure",
    "two_chip_figure",
    "critical_batch_figure",
]

REGION_COLORS = {"bandwidth-bound": "#e45756", "bound-at-slower": "#f2cf5b", "compute-bound": "#54a24b"}
_REGION_ALPHA = 0.13
_ALGO_COLORS = ["#d62728", "#2c7fb8", "#6a3d9a", "#e6550d", "#31a354", "#636363"]


def _plain_tick(v, _pos):
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"
    return f"{v:g}"


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
        alpha=_REGION_ALPHA,
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
    ax.axvspan(hi_crit, hi, color=REGION_COLORS["compute-bound"], alpha=_REGION_ALPHA, lw=0, label="compute-bound")

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


# --- achievable FLOPs/s of a matmul vs batch ------------------------------------------------------


def achievable_flops_figure(
    D: float,
    F: float,
    chip: ChipSpec | str = "tpu-v5e",
    mode: str = "bf16",
    *,
    B_max: int = 4096,
    B: float | None = None,
    ax=None,
    exact: bool = True,
    figsize=(8.0, 4.5),
    title: str | None = None,
) -> Figure:
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
        ax.axvspan(
            1,
            b_cross,
            color=REGION_COLORS["bandwidth-bound"],
            alpha=_REGION_ALPHA,
            lw=0,
            label="memory-bound (T_comms > T_math)",
        )
        ax.axvspan(
            b_cross,
            B_max,
            color=REGION_COLORS["compute-bound"],
            alpha=_REGION_ALPHA,
            lw=0,
            label="compute-bound (T_math > T_comms)",
        )
        ax.axvline(b_cross, color="black", lw=1.3, ls="--", gid="crossover", label=f"crossover B ≈ {b_cross:,.0f}")
        ax.annotate(
            f"crossover B ≈ {b_cross:,.0f}",
            xy=(b_cross, peak / scale),
            xytext=(5, 5),
            textcoords="offset points",
            ha="left" if b_cross < B_max**0.75 else "right",
            fontsize=9,
        )
    else:
        ax.axvspan(
            1,
            B_max,
            color=REGION_COLORS["bandwidth-bound"],
            alpha=_REGION_ALPHA,
            lw=0,
            label="memory-bound at every B shown",
        )
        if math.isfinite(b_cross):
            ax.axvline(
                b_cross,
                color="black",
                lw=1.3,
                ls="--",
                gid="crossover",
                label=f"crossover B ≈ {b_cross:,.0f} (off the plot)",
            )
        note = (
            "never compute-bound: D and F are too small"
            if not math.isfinite(b_cross)
            else f"compute-bound only beyond B ≈ {b_cross:,.0f}"
        )
        ax.text(0.02, 0.97, note, transform=ax.transAxes, fontsize=9, va="top")

    ax.axhline(peak / scale, color="0.3", lw=1, ls=":", label=f"peak {format_si(peak, unit[len(prefix) :])}")
    ax.plot(Bs, y / scale, color=LINE_COLORS[0], lw=2.2, label=f"achievable, {mode}")

    if B is not None:
        yb = float(roofline.achievable_flops_curve(np.array([float(B)]), D, F, spec, mode, exact)[0])
        ax.plot(
            [B], [yb / scale], marker="o", ms=9, color="#d62728", mec="white", zorder=5, gid="current-B", clip_on=False
        )
        right = math.log(max(B, 1)) > 0.7 * math.log(B_max)
        ax.annotate(
            f"B = {B:,.0f}: {format_si(yb, unit[len(prefix) :])}\n({yb / peak:.0%} of peak)",
            xy=(B, yb / scale),
            xytext=(-10 if right else 10, -36 if yb > 0.6 * peak else 8),
            textcoords="offset points",
            ha="right" if right else "left",
            fontsize=9,
            color="#b2182b",
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85),
        )

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
    for bar, t in zip(bars, [t_comms_s, t_math_s]):
        ax.text(
            max(vals) * 0.03,
            bar.get_y() + bar.get_height() / 2,
            format_si(t, "s").replace(" u", " µ"),
            va="center",
            ha="left",
            fontsize=9,
        )
    ax.set_xlim(0, max(vals) * 1.1)
    ax.set_xlabel(f"time ({prefix}s)")
    bound = "compute-bound" if t_math_s >= t_comms_s else "memory-bound"
    ax.set_title(title or rf"$T_\mathrm{{math}}$ vs $T_\mathrm{{comms}}$ → {bound}", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
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
    ax.axvspan(lo, crit, color=REGION_COLORS["bandwidth-bound"], alpha=_REGION_ALPHA, lw=0, label="memory-bound")
    ax.axvspan(crit, hi, color=REGION_COLORS["compute-bound"], alpha=_REGION_ALPHA, lw=0, label="compute-bound")
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


# --- the two-chip network roofline ----------------------------------------------------------------


def two_chip_figure(
    B: float = 1024,
    F: float = 8192,
    flops_per_s: float = 1.97e14,
    link_bytes_per_s: float = 4.5e10,
    *,
    D: float | None = None,
    D_range: tuple[float, float] = (256, 131072),
    ax=None,
    title: str | None = None,
    figsize=(8.0, 4.5),
) -> Figure:
    """T_math and T_comms against the contraction dim D when X[B, D] · Y[D, F] is split over D on 2 chips.

    T_math = B·D·F / C grows with D; T_comms = 2·B·F / W (swapping bf16 partial sums) does not, so the
    lines cross at D = 2C/W whatever B is (book ch. 1, "Network communication rooflines": D > 8755 on
    v5e-like chips with 4.5e10 B/s links). The threshold line carries gid "d-threshold".
    """
    fig, ax = new_figure(figsize, ax)
    d_lo, d_hi = D_range
    Ds = log_span(d_lo, d_hi)
    d_star = roofline.two_chip_d_threshold(flops_per_s, link_bytes_per_s)
    t_math = B * Ds * F / flops_per_s
    t_comms = np.full_like(Ds, 2 * B * F / link_bytes_per_s)
    ax.axvspan(
        d_lo,
        min(max(d_star, d_lo), d_hi),
        color=REGION_COLORS["bandwidth-bound"],
        alpha=_REGION_ALPHA,
        lw=0,
        label="communication-bound",
    )
    ax.axvspan(
        min(max(d_star, d_lo), d_hi),
        d_hi,
        color=REGION_COLORS["compute-bound"],
        alpha=_REGION_ALPHA,
        lw=0,
        label="compute-bound",
    )
    ax.plot(Ds, t_math, color=REGION_COLORS["compute-bound"], lw=2.2, label=r"$T_\mathrm{math} = BDF/C$")
    ax.plot(Ds, t_comms, color=REGION_COLORS["bandwidth-bound"], lw=2.2, label=r"$T_\mathrm{comms} = 2BF/W$")
    ax.axvline(d_star, color="black", lw=1.3, ls="--", gid="d-threshold", label=f"threshold D = 2C/W ≈ {d_star:,.0f}")
    if D is not None:
        r = roofline.two_chip_roofline(B, D, F, flops_per_s, link_bytes_per_s)
        ax.plot(
            [D, D],
            [r.t_math_s, r.t_comms_s],
            marker="o",
            ms=7,
            ls="",
            color="#1f4e9c",
            mec="white",
            zorder=5,
            gid="current-D",
        )
        ax.annotate(
            f"D = {D:,.0f}\n{r.bound}",
            xy=(D, max(r.t_math_s, r.t_comms_s)),
            xytext=(8, 8),
            textcoords="offset points",
            fontsize=9,
            color="#1f4e9c",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(d_lo, d_hi)
    ax.xaxis.set_major_formatter(FuncFormatter(_plain_tick))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(si_tick("s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("contraction dimension D (elements, log scale)")
    ax.set_ylabel("time per chip (s, log scale)")
    ax.set_title(
        title
        or (
            f"Two chips split D: B = {B:,.0f}, F = {F:,.0f}, C = {format_si(flops_per_s, 'FLOP/s')}, "
            f"W = {format_si(link_bytes_per_s, 'B/s')}"
        ),
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    return fig


# --- critical batch per chip ----------------------------------------------------------------------


def critical_batch_figure(
    chips: Sequence[str] | None = None, modes: Sequence[str] = ("bf16", "int8"), *, ax=None, figsize=(8.0, 3.8)
) -> Figure:
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
        bars = ax.bar(xs, ys, width=width, label=mode, color=LINE_COLORS[k % len(LINE_COLORS)])
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
