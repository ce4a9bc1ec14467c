"""Views for chapter 5 (training), pipelining: a pipeline schedule drawn as a stage × time grid.

`render_pipeline_schedule` draws an integer grid [stages P, time steps] — cell (s, t) holds the microbatch that
stage s works on at step t, −1 an idle slot — e.g. `jaxpipeline.pipeline_schedule(P, M)` or the schedule
`jaxpipeline.gpipe_forward` ran. The idle slots are the bubble: GPipe's idle fraction is (P − 1)/(M + P − 1)
for M microbatches (`training.bubble_fraction`). A grid that is not a 2-D integer array gives a message
figure, never an exception. `training_views` (`ch05_training`) re-exports it with the chapter's other views.

Book ch. 5 "How to Parallelize a Transformer for Training", section "Pipelining".
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from scalebook_utils.views._kit import INPUT_ERRORS, error_text, message_figure, new_figure

__all__ = ["render_pipeline_schedule"]


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
