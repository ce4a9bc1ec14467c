"""Figures for chapter 1 (rooflines): a matmul against the batch, T_math vs T_comms, two chips, critical batches.

Built over the pure functions in `roofline`: a matmul's achievable FLOPs/s against the batch
(`achievable_flops_figure`; "Matrix multiplication") with its T_math / T_comms bars (`time_bars`), the critical
batch per chip (`critical_batch_figure`), and the two-chip network roofline (`two_chip_figure`; "Network
communication rooflines"). The classic and the measured roofline (`roofline_figure`, `measured_roofline_figure`,
"Visualizing rooflines") and the region colours `REGION_COLORS` live in `ch01_roofline_plots`; this module
re-exports them, so every chapter-1 figure name still resolves here. How the two differ: this module's figures
put a problem's size across (a matmul's batch B, the two-chip D), show its times as bars, or compare chips
(critical batch); `ch01_roofline_plots`' put arithmetic intensity across (the roofline, classic and measured).
The chapter's widgets (`ch01_rooflines`) draw with both; the notebooks reach them through the `plots` and
`widgets` façades.

Every builder returns a `matplotlib.figure.Figure` made without pyplot, so nothing is registered in
pyplot's figure manager (no leaks, no `plt.close` needed) and `fig.savefig(...)` works headless with
any backend. Builders that draw into one panel also accept `ax=` so widgets can combine them.

Colours follow the book's roofline figure: red where an algorithm is bandwidth-bound under every
bandwidth, yellow where it is bound only under the slower one, green where it is compute-bound
(book ch. 1, "Visualizing rooflines").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from scalebook_utils.core import roofline
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import LINE_COLORS, log_span, new_figure, plain_tick, si_scale, si_tick
from scalebook_utils.views.ch01_roofline_plots import (
    REGION_ALPHA,
    REGION_COLORS,
    measured_roofline_figure,
    roofline_figure,
)

__all__ = [
    "achievable_flops_figure",
    "time_bars",
    "two_chip_figure",
    "critical_batch_figure",
    # re-exported from ch01_roofline_plots (moved there; kept so `ch01_figures.X` resolves as before)
    "REGION_COLORS",
    "roofline_figure",
    "measured_roofline_figure",
]


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
            alpha=REGION_ALPHA,
            lw=0,
            label="memory-bound (T_comms > T_math)",
        )
        ax.axvspan(
            b_cross,
            B_max,
            color=REGION_COLORS["compute-bound"],
            alpha=REGION_ALPHA,
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
            alpha=REGION_ALPHA,
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
    ax.xaxis.set_major_formatter(FuncFormatter(plain_tick))
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
    split = [roofline.two_chip_roofline(B, d, F, flops_per_s, link_bytes_per_s) for d in Ds]  # core's T_math, T_comms
    t_math = np.array([r.t_math_s for r in split])
    t_comms = np.array([r.t_comms_s for r in split])
    ax.axvspan(
        d_lo,
        min(max(d_star, d_lo), d_hi),
        color=REGION_COLORS["bandwidth-bound"],
        alpha=REGION_ALPHA,
        lw=0,
        label="communication-bound",
    )
    ax.axvspan(
        min(max(d_star, d_lo), d_hi),
        d_hi,
        color=REGION_COLORS["compute-bound"],
        alpha=REGION_ALPHA,
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
    ax.xaxis.set_major_formatter(FuncFormatter(plain_tick))
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
        if not any(roofline.has_matmul_peak(name, m_) for m_ in modes):
            ax.text(i, 5, f"no {'/'.join(modes)}\npeak", ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("critical batch B (tokens)")
    ax.set_xlabel("chip")
    ax.set_title("Critical batch: above it a weight-streaming matmul is compute-bound")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
