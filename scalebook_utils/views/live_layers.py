"""Which static parts of a live widget's figure a full draw paints over a moving one, and their overlay layers.

Blitting redraws only a figure's moving parts over a kept background; a static part that a full draw paints
*after* a moving one where the two overlap (a legend over a moving line, grid lines or spines over moving bars,
a label over a moving patch) would be covered. `painted_over` finds those parts (in turn, the static parts
painted over them), in the full draw's painting order (`paint_order`); `LiveFigure` (`views/live_figure.py`)
rasterises each run of them once into a transparent layer (`overlay`) and composites it every step
(`composite`: straight-alpha "over", as Agg blends). Core matplotlib and numpy only; shared by every chapter's
view through `LiveFigure`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.views.live_parts import draws_inside

__all__ = ["paint_order", "painted_over", "overlay", "composite"]


def _bbox(a, renderer):
    """Display-pixel box `a` paints into (clipped to its clip box), or None where it paints nothing."""
    from matplotlib.axis import Axis
    from matplotlib.transforms import Bbox

    if not a.get_visible():
        return None
    if isinstance(a, Axis):
        ax, fig = a.axes, a.get_figure(root=True)
        if draws_inside(a):
            box = ax.bbox
        else:  # ticks and labels lie outside the Axes, on its side(s): the strip from the Axes to the figure's edge
            if a.get_ticks_position() not in ("bottom", "left"):  # top, right or both sides: anywhere
                return fig.bbox
            b = ax.bbox
            return (
                Bbox([[0, 0], [fig.bbox.width, b.y0]])
                if a.axis_name == "x"
                else Bbox([[0, 0], [b.x0, fig.bbox.height]])
            )
        return box
    from matplotlib.patches import Patch
    from matplotlib.spines import Spine

    if isinstance(a, Spine):  # its own extent would lay out the ticks: the line alone, as drawing places it
        a._adjust_location()
        return Patch.get_window_extent(a, renderer).padded(renderer.points_to_pixels(a.get_linewidth()) + 1)
    try:
        box = a.get_window_extent(renderer)
    except Exception:  # noqa: BLE001 - an artist that cannot say: assume it covers the figure
        return a.get_figure(root=True).bbox
    if not np.all(np.isfinite(box.get_points())):
        return a.get_figure(root=True).bbox
    clip = a.get_clip_box() if a.get_clip_on() else None
    return Bbox.intersection(box, clip) if clip is not None else box


def _line_meets(line, box, dpi: float) -> bool:
    """Whether a default-style Line2D's drawn path (with its width and markers) comes within `box`."""
    from matplotlib.path import Path

    data = np.asarray(line.get_xydata(), dtype=float)
    xy = line.get_transform().transform(data)
    ok = np.all(np.isfinite(xy), axis=1)
    if np.any(np.all(np.isfinite(data), axis=1) & ~ok):  # e.g. a value ≤ 0 on a log axis: drawn clipped, somewhere
        return True
    marker = line.get_marker() not in (None, "None", "none", "", " ")
    pad = (line.get_linewidth() + (line.get_markersize() + line.get_markeredgewidth() if marker else 0)) * dpi / 72
    padded = box.padded(pad + 2)
    pts = xy[ok]
    if not len(pts):
        return False
    if marker and padded.count_contains(pts):
        return True
    if line.get_linestyle() in ("None", "none", "", " ") or len(pts) < 2:
        return False
    codes = np.full(len(xy), Path.LINETO, dtype=Path.code_type)
    codes[0] = Path.MOVETO
    codes[1:][ok[1:] & ~ok[:-1]] = Path.MOVETO  # a new run after a gap (NaN)
    path = Path(xy[ok], codes[ok])
    return path.intersects_bbox(padded, filled=False)


def _meets(a, box_a, b, box_b, dpi: float) -> bool:
    from matplotlib.lines import Line2D

    if box_a is None or box_b is None or not box_a.overlaps(box_b):
        return False
    for line, other in ((a, box_b), (b, box_a)):
        if isinstance(line, Line2D) and line.get_drawstyle() == "default" and not _line_meets(line, other, dpi):
            return False
    return True


def paint_order(fig: Figure, parts: dict) -> dict:
    """Each part's place in a full draw's painting order (Figure, then each Axes' children by zorder, stable)."""
    fig_rank = {id(a): k for k, a in enumerate(fig.get_children())}
    rank, children = {}, {}
    for name, a in parts.items():
        if len(name) > 1 and name[0] != "fig":
            ax = fig.axes[name[0]]
            if name[0] not in children:
                children[name[0]] = {id(c): k for k, c in enumerate(ax.get_children())}
            rank[name] = (ax.get_zorder(), fig_rank.get(id(ax), 0), a.get_zorder(), children[name[0]].get(id(a), 0))
        else:
            rank[name] = (a.get_zorder(), fig_rank.get(id(a), 0), 0, 0)
    return rank


def painted_over(
    parts: dict,
    moving: set,
    order: dict,
    renderer,
    dpi: float,
    known: set = frozenset(),
    sigs: dict | None = None,
    kept: dict | None = None,
) -> set:
    """The static parts of each Axes that a full draw paints after (over) one of its moving parts where the two
    overlap (a legend over a moving line, grid lines or spines over moving bars, a label over a moving patch), and
    in turn the static parts it paints over those. Blitting the moving part alone would cover them; they are kept
    in overlay layers instead (`LiveFigure`). Parts in `known` (already in a layer, where they may stay) count as
    painted each step and are not looked at again. `kept` (name → (sig, box)) keeps the boxes of static parts
    between steps: a part with the same `sigs` entry paints the same pixels."""
    groups: dict = {}
    for n in parts:
        if len(n) > 1 and n[0] != "fig" and (n[0],) not in moving:
            groups.setdefault(n[0], []).append(n)
    boxes: dict = {}

    def box(n):
        if n not in boxes:
            hit = kept.get(n) if kept is not None and n not in moving else None
            if hit is not None and hit[0] == sigs[n]:
                boxes[n] = hit[1]
            else:
                boxes[n] = _bbox(parts[n], renderer)
                if kept is not None and n not in moving:
                    kept[n] = (sigs[n], boxes[n])
        return boxes[n]

    over = set()
    for names in groups.values():
        under = [n for n in names if n in moving or n in known]  # what is redrawn or composited each step
        static = [n for n in names if n not in moving and n not in known]
        while under and static:  # and, in turn, whatever a full draw paints over those
            new = [
                s
                for s in static
                if any(order[m] < order[s] and _meets(parts[m], box(m), parts[s], box(s), dpi) for m in under)
            ]
            over.update(new)
            static = [s for s in static if s not in over]
            under = new
    return over


def overlay(buf: np.ndarray):
    """A transparent layer's painted pixels and their premultiplied colours, ready to composite (None if empty)."""
    flat = buf.reshape(-1, 4)
    idx = np.flatnonzero(flat[:, 3])
    if not len(idx):
        return None
    px = flat[idx].astype(np.uint32)
    a = px[:, 3:4]
    return idx, px[:, :3] * a + 127, 255 - a, px[:, 3]


def composite(dst: np.ndarray, layer) -> None:
    """Paint `layer` (from `overlay`) over `dst` in place: straight-alpha "over", as Agg blends."""
    if layer is None:
        return
    idx, premul, inv, alpha = layer
    flat = dst.reshape(-1, 4)
    d = flat[idx]
    if d[:, 3].min() == 255:  # over an opaque figure: the colours only
        flat[idx, :3] = (premul + d[:, :3].astype(np.uint32) * inv) // 255
        return
    da, oa = d[:, 3:4] / 255, alpha[:, None] / 255
    out_a = oa + da * (1 - oa)
    rgb = ((premul - 127) / 255 + d[:, :3] * (da * (1 - oa))) / np.maximum(out_a, 1e-12)
    flat[idx, :3] = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    flat[idx, 3] = np.rint(out_a[:, 0] * 255).astype(np.uint8)
