"""Views for chapter 2's systolic array: one cycle of a matmul on the MXU, and its utilisation cycle by cycle.

Book ch. 2, Appendix B ("How does a systolic array work?"): A[M×K] @ B[K×N] on a K × N grid of multiply-add
cells. The weights B load row by row (K cycles), then the activations of A enter from the left, skewed one cycle
per row, and the partial sums flow down; the compute phase takes M + K + N − 2 cycles (fill, then drain).
The cycle-by-cycle state is `core.systolic`'s (`SystolicRun`); these figures only draw it.

Figures (each returns a matplotlib Figure made without pyplot; the one-panel one accepts ``ax=``):
`systolic_frame_figure` (one cycle: the grid, the skewed feed, the finished outputs, the utilisation bars) and
`systolic_utilisation_figure` (the fraction of busy cells per cycle). `ch02_tpus` re-exports both, and the
notebooks reach them through the `plots` façade.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.views._kit import new_figure

__all__ = [
    "systolic_frame_figure",
    "systolic_utilisation_figure",
]


# --- one cycle of the systolic array, and the utilisation per cycle ---------------------------------------

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
    ax.set_title(
        f"Utilisation per cycle: fill, then drain ({run.cycles} cycles = "
        f"{run.load_cycles} load + {M}+{K}+{N}−2 compute)",
        fontsize=9,
    )
    ax.set_xticks(range(0, run.cycles, 1 if run.cycles <= 20 else 2 if run.cycles <= 40 else 5))
    ax.tick_params(labelsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _draw_rows_to_load(ax, run, cycle: int, fs: float) -> None:
    """Rows of B still to load (phase 1) above the grid: B[j] for j = 0 .. K-2-cycle, next to enter nearest it."""
    _M, K, N = run.shape
    remaining = K - 1 - cycle
    for j in range(remaining):
        y = 1 + (remaining - 1 - j)
        for n in range(N):
            ax.text(
                n,
                y,
                _cell_text(run.B[j, n]),
                ha="center",
                va="center",
                fontsize=fs,
                bbox=dict(boxstyle="round,pad=0.25", fc="#fdd0a2", ec="none"),
            )
    if remaining:
        ax.text(-0.7, 1 + (remaining - 1) / 2, "B rows\nto load ↓", ha="right", va="center", fontsize=fs, color="0.3")


def _systolic_key(phase: str) -> list:
    """The colour key of `systolic_frame_figure` (two more entries while the weights load)."""
    from matplotlib.patches import Patch

    key = [
        Patch(fc=_BUSY, ec="0.3", label="busy: w weight,\na activation, Σ partial sum"),
        Patch(fc=_LOADED, ec="0.3", label="weight loaded, idle"),
        Patch(fc="#c6dbef", label="A waiting to enter"),
        Patch(fc="#fee391", ec="0.6", label="finished entry of C"),
    ]
    if phase == "load":
        key.insert(2, Patch(fc=_EMPTY, ec="0.3", label="no weight yet"))
        key.insert(3, Patch(fc="#fdd0a2", label="row of B to load"))
    return key


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
            ax.add_patch(
                Rectangle(
                    (n - 0.45, -k - 0.45),
                    0.9,
                    0.9,
                    fc=color,
                    ec="0.3",
                    lw=1,
                    gid=f"cell:{k},{n}" + (":busy" if busy else ""),
                )
            )
            if loaded:
                ax.text(n, -k + 0.24, f"w={_cell_text(s.weights[k, n])}", ha="center", va="center", fontsize=fs)
            if busy:
                ax.text(
                    n, -k, f"a={_cell_text(s.activation[k, n])}", ha="center", va="center", fontsize=fs, color="#08306b"
                )
                ax.text(
                    n,
                    -k - 0.25,
                    f"Σ={_cell_text(s.psum[k, n])}",
                    ha="center",
                    va="center",
                    fontsize=fs,
                    color="#7f2704",
                )
    # activations waiting to enter row k: A[m, k] enters at compute cycle m + k → distance (m + k) - t
    for k in range(K):
        for m in range(M):
            if np.isfinite(s.feed[k, m]):
                x = -((m + k) - max(t, -1))  # while weights load, the feed waits in its skewed start position
                ax.text(
                    x,
                    -k,
                    f"{_cell_text(s.feed[k, m])}",
                    ha="center",
                    va="center",
                    fontsize=fs,
                    bbox=dict(boxstyle="round,pad=0.25", fc="#c6dbef", ec="none"),
                )
        ax.add_patch(FancyArrowPatch((-0.75, -k), (-0.5, -k), arrowstyle="-|>", mutation_scale=8, color="0.4"))
    if np.isfinite(s.feed).any():
        ax.text(
            -(feed_w + 1) / 2,
            0.62,
            "A, skewed: row k waits k extra cycles →",
            ha="center",
            va="bottom",
            fontsize=fs,
            color="0.3",
        )
    if s.phase == "load":
        _draw_rows_to_load(ax, run, cycle, fs)
    # outputs below the grid
    y0 = -K - 0.3
    ax.text(-0.7, y0 - (M - 1) / 2, "C = A @ B\n(finished)", ha="right", va="center", fontsize=fs, color="0.3")
    for m in range(M):
        for n in range(N):
            v = s.outputs[m, n]
            ax.add_patch(
                Rectangle(
                    (n - 0.4, y0 - m - 0.4), 0.8, 0.8, fc="#fee391" if np.isfinite(v) else "0.96", ec="0.6", lw=0.6
                )
            )
            ax.text(n, y0 - m, _cell_text(v) if np.isfinite(v) else "–", ha="center", va="center", fontsize=fs)
    ax.legend(
        handles=_systolic_key(s.phase),
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=fs,
        frameon=False,
        title="key",
        title_fontsize=fs,
    )
    ax.set_xlim(left, N - 0.4)
    top = (K - 1 - cycle + 0.6) if s.phase == "load" and K - 1 - cycle > 0 else 1.0
    ax.set_ylim(y0 - M + 0.4, top + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    phase = (
        "loading weights (rows of B shift down from the top)"
        if s.phase == "load"
        else "activations from the left (skewed), partial sums down"
    )
    ax.set_title(
        f"Systolic array {K}×{N}, A[{M}×{K}] @ B[{K}×{N}] — cycle {cycle} "
        f"(of cycles 0–{run.cycles - 1}):\n{phase}; {s.n_active}/{K * N} cells busy",
        fontsize=9.5,
    )
    systolic_utilisation_figure(run, cycle=cycle, ax=ax_u)
    return fig
