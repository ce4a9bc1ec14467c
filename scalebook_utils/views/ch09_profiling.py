"""Figures for chapter 9 (profiling): a trace timeline (the trace viewer's "XLA Ops" rows) and a bar chart of the
op table. Each `render_*` takes what `profiling` computed and returns a matplotlib Figure; bad input gives a
message figure, as in the other views.

Book ch. 9 "How to Profile TPU Programs", §"Trace Viewer".
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from scalebook_utils.core.hlo.ops import CATEGORIES
from scalebook_utils.views._kit import message_figure

if TYPE_CHECKING:  # the types the profiler (lab, jax) returns; a view imports lab only inside a function
    from scalebook_utils.lab.profiling import MatmulCheck, OpRow, Span

__all__ = ["CATEGORY_COLORS", "render_timeline", "render_op_table", "render_matmul_ratios"]

#: one colour per op category (the op table, the timeline and the legend share them)
CATEGORY_COLORS = {
    "matmul": "#1f77b4",
    "fusion": "#ff7f0e",
    "collective": "#d62728",
    "copy": "#2ca02c",
    "other": "#7f7f7f",
}


def _legend(ax, cats, loc: str = "upper right") -> None:
    ax.legend(
        handles=[Patch(color=CATEGORY_COLORS[c], label=c) for c in CATEGORIES if c in cats],
        loc=loc,
        fontsize=8,
        framealpha=0.9,
    )


def _short_thread(name: str) -> str:
    """'tf_XLAPjRtCpuClient/4585110756518486277' → 'XLAPjRtCpuClient/…6277' (lane labels stay short)."""
    head, _, tail = name.removeprefix("tf_").partition("/")
    return f"{head}/…{tail[-4:]}" if tail else head


def render_timeline(
    spans: Sequence[Span],
    *,
    title: str = "XLA ops on the timeline",
    max_spans: int = 2000,
    label_min_fraction: float = 0.04,
    max_keys: int = 6,
) -> Figure:
    """One lane per thread, one bar per executed op (time in ms from the first op), coloured by category.

    Ops longer than `label_min_fraction` of the visible span carry their HLO name where it fits inside the bar;
    the longest of the others carry a number, and the title lists what each number names (at most `max_keys`).
    At most `max_spans` bars are drawn (the earliest).
    """
    spans = list(spans)[:max_spans]
    if not spans:
        return message_figure("cannot draw: no XLA op events (was the step run inside jax.profiler.trace?)")
    lanes = sorted({s.thread for s in spans})
    end = max(s.start_s + s.duration_s for s in spans) or 1.0
    fig = Figure(figsize=(9.0, 1.3 + 0.55 * len(lanes)), layout="constrained")
    ax = fig.add_subplot()
    names = []  # (text, span): each name stays only if it fits inside its bar (checked once laid out, below)
    for s in spans:
        y = lanes.index(s.thread)
        wide = s.duration_s > 3e-3 * end  # a white edge separates neighbours; on a sliver it would hide the colour
        ax.broken_barh(
            [(s.start_s * 1e3, max(s.duration_s, end * 1e-4) * 1e3)],
            (y - 0.35, 0.7),
            facecolors=CATEGORY_COLORS.get(s.category, "#7f7f7f"),
            edgecolor="white" if wide else "none",
            linewidth=0.4,
        )
        if s.duration_s >= label_min_fraction * end:
            names.append(
                (
                    ax.text(
                        (s.start_s + s.duration_s / 2) * 1e3,
                        y,
                        s.name,
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white",
                        clip_on=True,
                    ),
                    s,
                )
            )
    ax.set_yticks(range(len(lanes)), [_short_thread(t) for t in lanes], fontsize=8)
    ax.set_ylim(-0.6, len(lanes) - 0.4 + 0.5)
    ax.set_xlim(0, end * 1e3 * 1.01)
    ax.set_xlabel("time since the first op (ms)")
    ax.set_ylabel("thread")
    ax.set_title(title, fontsize=10)
    _legend(ax, {s.category for s in spans})
    FigureCanvasAgg(fig).draw()  # lay the figure out, so bar and text widths are the final ones
    renderer = fig.canvas.get_renderer()

    def fits(text, s) -> bool:
        x0, x1 = ax.transData.transform([(s.start_s * 1e3, 0), ((s.start_s + s.duration_s) * 1e3, 0)])[:, 0]
        return text.get_window_extent(renderer).width <= x1 - x0 - 2

    keys: dict[str, str] = {}  # a name wider than its bar would run over its neighbours: a number instead
    for text, s in sorted(names, key=lambda ts: -ts[1].duration_s):
        if fits(text, s):
            continue
        if s.name not in keys and len(keys) < max_keys:
            keys[s.name] = str(len(keys) + 1)
        if s.name in keys:
            text.set_text(keys[s.name])
        if s.name not in keys or not fits(text, s):
            text.remove()
    if keys:  # the key, under the title (the horizontal layout, and so the bar widths, stay as measured)
        key = textwrap.fill(
            ", ".join(f"{k}\u00a0=\u00a0{n}" for n, k in keys.items()), width=90
        )  # no break in "1 = op"
        ax.set_title(f"{title}\n{key}", fontsize=10)
    return fig


def render_op_table(
    rows: Sequence[OpRow], k: int = 12, *, title: str = "where the time goes", per_call: bool = True
) -> Figure:
    """Horizontal bars of the k most expensive ops (µs per step when `per_call`, else the total), coloured by
    category, each labelled with its share of the traced op time."""
    rows = sorted(rows, key=lambda r: -r.total_s)[: max(int(k), 1)]
    if not rows:
        return message_figure("cannot draw: the op table is empty")
    vals = [(r.per_call_s if per_call else r.total_s) * 1e6 for r in rows]
    fig = Figure(figsize=(8.5, 1.0 + 0.32 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    ys = range(len(rows))[::-1]
    ax.barh(list(ys), vals, color=[CATEGORY_COLORS.get(r.category, "#7f7f7f") for r in rows])
    for y, v, r in zip(ys, vals, rows):
        ax.text(v, y, f" {r.fraction:.0%}", va="center", fontsize=8)
    ax.set_yticks(list(ys), [r.name for r in rows], fontsize=8)
    ax.set_xlim(0, max(vals) * 1.12)
    ax.set_xlabel("µs per step" if per_call else "µs in the whole trace")
    ax.set_ylabel("HLO op")
    ax.set_title(title, fontsize=10)
    _legend(ax, {r.category for r in rows}, loc="lower right")
    return fig


def render_matmul_ratios(
    checks: Sequence[MatmulCheck], k: int = 15, *, title: str = "matmuls: roofline ÷ measured"
) -> Figure:
    """One bar per matmul op — the k with the largest measured time — of roofline time ÷ measured time
    (1 = at the roofline), labelled with the op's sizes [B×D]·[D×F]."""
    checks = sorted(checks, key=lambda c: -c.measured_s)[: max(int(k), 1)]
    if not checks:
        return message_figure("cannot draw: no matmul ops in the profile")
    fig = Figure(figsize=(7.5, 1.2 + 0.35 * len(checks)), layout="constrained")
    ax = fig.add_subplot()
    ys = range(len(checks))[::-1]
    ax.barh(list(ys), [c.ratio for c in checks], color=CATEGORY_COLORS["matmul"])
    ax.axvline(1.0, color="k", lw=1, ls="--")
    ax.set_yticks(list(ys), [f"{c.name} [{c.B}×{c.D}]·[{c.D}×{c.F}]" for c in checks], fontsize=8)
    ax.set_xlim(0, max(1.1, max(c.ratio for c in checks) * 1.1))
    ax.set_xlabel("roofline time ÷ measured time (1 = at the roofline)")
    ax.set_ylabel("matmul op [B×D]·[D×F]")
    ax.set_title(title, fontsize=10)
    return fig
