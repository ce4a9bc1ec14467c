"""One widget's figure between slider steps, drawn fast: `LiveFigure` (used by `_kit.emit` for every view).

A slider step used to build a new matplotlib Figure, lay it out (constrained layout) and PNG-encode it with
savefig: ≈ 0.4 s of CPU for the chapter-1 roofline explorer. Here a widget keeps one figure at `SCREEN_DPI`; its
layout is computed once per layout key; after that a step compares the new render with the last one part by part
(down to an Axes' x and y axis, spines, titles, legend and each data artist) and rasterises only what changed, and
what a full draw paints over it, over a kept background (blitting on an Agg canvas), then encodes the buffer with
fast zlib. Core matplotlib only (no ipympl): the PNG goes to the notebook as before, on ipywidgets 7 and 8.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure

__all__ = ["SCREEN_DPI", "LiveFigure"]

#: Pixels per inch of a live widget's figure (and its static PNG): a 10.5-inch figure is 945 px wide, about a
#: JupyterLab or Colab output area; fewer pixels than savefig's 100 dpi to rasterise and to send per step.
SCREEN_DPI = 90


def _png_bytes(canvas) -> bytes:
    """The canvas's buffer as PNG bytes (zlib level 1: a few ms, a slightly larger file than savefig's); RGB when
    the figure's background is opaque (then every pixel is: Agg blends over it), RGBA otherwise."""
    from PIL import Image as PILImage

    buf = io.BytesIO()
    img = PILImage.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    patch = canvas.figure.patch
    if patch.get_visible() and patch.get_facecolor()[3] == 1:
        img = img.convert("RGB")
    img.save(buf, format="png", compress_level=1)
    return buf.getvalue()


def _texts(fig: Figure) -> list:
    """The figure's own texts, each once (newer matplotlib keeps the suptitle in ``fig.texts`` too)."""
    sup = [t for t in (fig._suptitle, fig._supxlabel, fig._supylabel) if t is not None]
    return sup + [t for t in fig.texts if not any(t is u for u in sup)]


def _arr(x) -> bytes:
    return np.asarray(x, dtype=float).tobytes()


def _artist_sig(a) -> tuple:
    """What an artist shows, cheaply comparable between two renders (data, text, place, colour, style).

    An artist of a kind not listed here compares unequal every time (so it is redrawn every step)."""
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.legend import Legend
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    common = (a.get_visible(), a.get_alpha(), a.get_zorder())
    if isinstance(a, Legend):  # a second legend, added with `Axes.add_artist`
        return (*_legend_sig(a), *common)
    if isinstance(a, Line2D):
        return (
            "line",
            _arr(a.get_xydata()),
            str(a.get_color()),
            a.get_marker(),
            a.get_markersize(),
            str(a.get_markerfacecolor()),
            a.get_linestyle(),
            a.get_linewidth(),
            *common,
        )
    if isinstance(a, Text):
        xy = getattr(a, "xy", None)
        return (
            "text",
            a.get_text(),
            _arr(a.get_position()),
            None if xy is None else _arr(xy),
            a.get_ha(),
            a.get_va(),
            str(a.get_color()),
            a.get_fontsize(),
            a.get_rotation(),
            str(a.get_fontweight()),
            a.get_fontstyle(),
            tuple(a.get_fontfamily()),
            *common,
        )
    if isinstance(a, Patch):
        return (
            "patch",
            _arr(a.get_path().vertices),
            _arr(a.get_patch_transform().get_matrix()),
            _arr(a.get_facecolor()),
            _arr(a.get_edgecolor()),
            a.get_linewidth(),
            a.get_hatch(),
            *common,
        )
    if isinstance(a, Collection):
        return (
            "coll",
            _arr(a.get_offsets()),
            tuple(_arr(p.vertices) for p in a.get_paths()),
            _arr(a.get_facecolor()),
            _arr(a.get_edgecolor()),
            _arr(a.get_sizes() if hasattr(a, "get_sizes") else ()),
            _arr(a.get_linewidths()),  # LineCollection: none
            str(a.get_linestyle()),
            *common,
        )
    if isinstance(a, AxesImage):
        arr = a.get_array()
        return (
            "image",
            None if arr is None else np.ma.getdata(arr).tobytes(),
            _arr(a.get_clim()),
            a.get_cmap().name,
            _arr(a.get_extent()),
            *common,
        )
    return ("other", id(a))


def _axis_sig(axis) -> tuple:
    ticks = axis.get_majorticklocs()
    return (_arr(ticks), tuple(axis.get_major_formatter().format_ticks(ticks)), axis.get_label_text())


def _limits(ax) -> tuple:
    return (_arr(ax.get_xlim()), _arr(ax.get_ylim()))


def _draws_inside(axis) -> bool:
    """Whether `axis` paints inside its Axes, where the data artists lie: grid lines, or ticks not pointing out."""
    from matplotlib import rcParams

    for kw in (getattr(axis, "_major_tick_kw", None), getattr(axis, "_minor_tick_kw", None)):
        if kw is None or kw.get("gridOn", True):  # unknown: assume it does
            return True
        if kw.get("tickdir", rcParams[f"{axis.axis_name}tick.direction"]) != "out":
            return True
    return False


def _axis_part_sig(axis) -> tuple:
    """One axis of an Axes: its limits, ticks and their labels, its label, and whether it paints inside."""
    return (
        "axis",
        _arr(axis.get_view_interval()),
        *_axis_sig(axis),
        _draws_inside(axis),
        axis.get_visible(),
        axis.get_ticks_position(),
        axis.get_label_position(),
    )


def _axes_sig(ax) -> tuple:
    """An Axes as a frame, without its axes, titles, legend and data artists (each a part of its own): scales,
    frame, background colour and how many children of each kind it has. When it changes the Axes is drawn whole."""
    return (
        ax.get_xscale(),
        ax.get_yscale(),
        ax.axison,
        ax.get_frame_on(),
        ax.get_visible(),
        _arr(ax.patch.get_facecolor()),
        ax.get_legend() is None,
        tuple(bool(t.get_text()) for t in _titles(ax)),
        len(ax.lines),
        len(ax.texts),
        len(ax.patches),
        len(ax.collections),
        len(ax.images),
        len(ax.artists),
        len(ax.tables),
        len(ax.child_axes),
        ("other", id(ax)) if ax.child_axes else None,
    )  # insets: always whole


def _titles(ax) -> tuple:
    return (ax.title, ax._left_title, ax._right_title)


def _parts(fig: Figure) -> dict:
    """Every drawable part of `fig` by a name that is the same in another render of the same view."""
    parts = {}
    for i, ax in enumerate(fig.axes):
        parts[(i,)] = ax
        if ax.axison:
            parts[(i, "xaxis")], parts[(i, "yaxis")] = ax.xaxis, ax.yaxis
            if ax.get_frame_on():
                for name, spine in ax.spines.items():
                    parts[(i, "spine", name)] = spine
        for kind in ("lines", "texts", "patches", "collections", "images", "artists", "tables"):
            for j, a in enumerate(getattr(ax, kind)):
                parts[(i, kind, j)] = a
        for j, t in enumerate(_titles(ax)):
            if t.get_text():
                parts[(i, "title", j)] = t
        if ax.get_legend() is not None:
            parts[(i, "legend", 0)] = ax.get_legend()
    for j, t in enumerate(_texts(fig)):
        parts[("fig", j)] = t
    for j, leg in enumerate(fig.legends):
        parts[("fig", "legend", j)] = leg
    for j, a in enumerate([*fig.lines, *fig.patches, *fig.images, *fig.artists]):
        parts[("fig", "other", j)] = a
    return parts


def _legend_sig(leg) -> tuple:
    """A legend's texts, handles and place; with ``loc="best"`` also the limits (its place follows the data)."""
    best = getattr(leg, "_loc", None) == 0
    return (
        "legend",
        tuple(t.get_text() for t in leg.get_texts()),
        tuple(_artist_sig(h) for h in getattr(leg, "legend_handles", ())),
        getattr(leg, "_loc", None),
        _arr(leg.get_bbox_to_anchor().bounds),
        _limits(leg.axes) if best and leg.axes is not None else None,
    )


def _sig(name, artist):
    if len(name) == 1:
        return _axes_sig(artist)
    if name[1] == "legend":
        return _legend_sig(artist)
    if name[0] == "fig" or name[1] == "title":
        return _artist_sig(artist)
    if name[1] in ("xaxis", "yaxis"):
        return _axis_part_sig(artist)
    if name[1] == "spine":  # its path is set when drawn: compare what sets it
        return (
            "spine",
            str(artist.get_position()),
            artist.get_bounds(),
            _arr(artist.get_edgecolor()),
            artist.get_linewidth(),
            str(artist.get_linestyle()),
            artist.get_visible(),
            artist.get_zorder(),
            _limits(artist.axes),
        )
    return (*_artist_sig(artist), _limits(artist.axes))  # data and spines: their pixels follow the Axes' limits


# --- which static parts a full draw paints over a moving one ------------------------------------------------------


def _bbox(a, renderer):
    """Display-pixel box `a` paints into (clipped to its clip box), or None where it paints nothing."""
    from matplotlib.axis import Axis
    from matplotlib.transforms import Bbox

    if not a.get_visible():
        return None
    if isinstance(a, Axis):
        ax, fig = a.axes, a.get_figure(root=True)
        if _draws_inside(a):
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


def _order(fig: Figure, parts: dict) -> dict:
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


def _painted_over(
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


def _overlay(buf: np.ndarray):
    """A transparent layer's painted pixels and their premultiplied colours, ready to composite (None if empty)."""
    flat = buf.reshape(-1, 4)
    idx = np.flatnonzero(flat[:, 3])
    if not len(idx):
        return None
    px = flat[idx].astype(np.uint32)
    a = px[:, 3:4]
    return idx, px[:, :3] * a + 127, 255 - a, px[:, 3]


def _composite(dst: np.ndarray, overlay) -> None:
    """Paint `overlay` (from `_overlay`) over `dst` in place: straight-alpha "over", as Agg blends."""
    if overlay is None:
        return
    idx, premul, inv, alpha = overlay
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


class _Canvas(FigureCanvasAgg):
    """An Agg canvas drawing on its `LiveFigure`'s renderer for this size: one renderer for every step, so
    matplotlib's text-size cache (kept per renderer) stays warm between steps."""

    def __init__(self, figure: Figure, live: LiveFigure):
        super().__init__(figure)
        self._live = live

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        self.renderer = self._live._renderer(w, h, self.figure.dpi)
        return self.renderer


class LiveFigure:
    """One widget's figure between slider steps: drawn at `SCREEN_DPI` on an Agg canvas, laid out once, and
    after that only what changed is redrawn.

    Each step calls the view's pure render function (building a Figure costs a few ms; laying it out and
    rasterising it is what is slow). ``png(render, key=…)``:

    - a new `key` (or none given, or a figure of another size or with other axes): the whole figure is drawn and
      its layout engine (constrained layout) runs; the axes positions are kept;
    - the same `key` as the step before: the new figure takes the kept positions (no layout pass) and is compared,
      part by part, with the figure of the step before: per Axes its frame (scales, how many artists of each
      kind), its x and y axis (limits, ticks, tick labels, label), spines, titles, legend and each data artist
      (line data, texts, patches, collections; an artist's part includes the limits, so when they move it moves).
      The parts that differ are "moving", and so is every static part of the same Axes that a full draw paints
      over a moving one where they overlap (a legend over a moving line, spines over moving bars, a grid over a
      moving patch); the rest is a static background, rasterised once without the moving parts and then restored,
      and only the moving parts are drawn over it, in the full draw's order (blitting). An Axes whose frame
      changes is redrawn whole. When another part starts moving, the background is rasterised again without it.

    So `key` must hold every argument the layout depends on (the tests compare a stepped figure with a full draw,
    pixel by pixel). ``.figure`` is the figure of the last step (the render function's own Figure),
    ``.full_draws`` counts whole rasterisations (layout or background), ``.blits`` the steps drawn by blitting.
    """

    def __init__(self, dpi: float = SCREEN_DPI):
        self.dpi, self.figure, self.key, self.full_draws, self.blits = dpi, None, None, 0, 0
        self._positions = self._texts_at = self._background = None
        self._sigs: dict = {}
        self._moving: set = set()  # parts redrawn every step
        self._over: set = set()  # static parts a full draw paints over a moving one: kept in `_layers`
        self._plan: list = []  # each step: a part's name (draw it) or an index into `_layers` (composite it)
        self._layers: list = []
        self._renderers: dict = {}
        self._boxes: dict = {}  # static parts' display boxes, by name: (sig, box)

    def _shape(self, fig: Figure):
        return (
            tuple(fig.get_size_inches()),
            tuple(type(ax).__name__ for ax in fig.axes),
            len(_texts(fig)),
            len(fig.legends),
            len(fig.lines) + len(fig.patches) + len(fig.images) + len(fig.artists),
        )

    def _renderer(self, w: int, h: int, dpi: float) -> RendererAgg:
        key = (w, h, dpi)
        if key not in self._renderers:
            if len(self._renderers) >= 3:  # the widget's size, a message figure's, …
                self._renderers.pop(next(iter(self._renderers)))
            self._renderers[key] = RendererAgg(w, h, dpi)
        return self._renderers[key]

    def png(self, render, *, key=None) -> bytes:
        fig = render()
        fig.set_dpi(self.dpi)
        canvas = _Canvas(fig, self)
        old = self.figure
        if key is not None and old is not None and key == self.key and self._shape(fig) == self._shape(old):
            self._step(fig, old, canvas)
        else:
            canvas.draw()  # runs the layout engine
            self.full_draws += 1
            self._positions = [(ax.get_position(original=True), ax.get_position(original=False)) for ax in fig.axes]
            self._texts_at = [t.get_position() for t in _texts(fig)]
            self._background, self._moving, self._over, self._plan, self._layers = None, set(), set(), [], []
            self._boxes = {}
            self._sigs = {n: _sig(n, a) for n, a in _parts(fig).items()} if key is not None else {}
            self.key = key
        self.figure = fig
        return _png_bytes(canvas)

    def _step(self, fig: Figure, old: Figure, canvas) -> None:
        fig.set_layout_engine("none")
        for ax, (orig, active) in zip(fig.axes, self._positions):
            ax.set_position(orig, which="original")
            ax.set_position(active, which="active")
        for t, xy in zip(_texts(fig), self._texts_at):
            t.set_position(xy)
        for ax, was in zip(fig.axes, old.axes):  # where the last draw placed the titles (a title drawn alone stays)
            for t, w in zip(_titles(ax), _titles(was)):
                t.set_position(w.get_position())
        for ax in fig.axes:  # what a full draw does first: aspect-locked axes shrink into their box
            ax.apply_aspect()
        parts = _parts(fig)
        sigs = {n: _sig(n, a) for n, a in parts.items()}
        changed = {n for n, s in sigs.items() if self._sigs.get(n) != s}
        self._sigs = sigs
        moving_axes = {n[0] for n in changed | self._moving if len(n) == 1}
        moving = {
            n
            for n in changed | self._moving
            if n in parts and (len(n) == 1 or n[0] == "fig" or n[0] not in moving_axes)
        }
        renderer = canvas.get_renderer()
        order = _order(fig, parts)
        over = _painted_over(parts, moving, order, renderer, self.dpi, self._over, sigs, self._boxes)
        if (
            self._background is None
            or not moving <= self._moving
            or not over <= self._over
            or not (self._moving | self._over) <= parts.keys()
        ):
            self._rebuild(parts, moving, over, order, canvas)
        else:
            np.asarray(canvas.get_renderer().buffer_rgba())[...] = self._background
            self.blits += 1
        buf = np.asarray(renderer.buffer_rgba())
        for op in self._plan:
            if isinstance(op, int):
                _composite(buf, self._layers[op])
            else:
                parts[op].draw(renderer)

    def _rebuild(self, parts: dict, moving: set, over: set, order: dict, canvas) -> None:
        """A new background without the moving parts and the parts painted over them; those static parts drawn
        once into transparent layers, one per run of them between moving parts in the full draw's order."""
        self._moving = moving
        self._over = {n for n in over | self._over if n in parts and n not in moving and (n[0],) not in moving}
        drawn = [parts[n] for n in moving | self._over]
        for a in drawn:
            a.set_animated(True)
        canvas.draw()
        self.full_draws += 1
        renderer = canvas.get_renderer()
        self._background = np.asarray(renderer.buffer_rgba()).copy()  # every pixel (copy_from_bbox misses a row)
        for a in drawn:
            a.set_animated(False)
        self._plan, self._layers, run = [], [], []
        for n in sorted(moving | self._over, key=order.__getitem__) + [None]:
            if n in self._over:
                run.append(n)
                continue
            if run:  # a run of static parts painted over what is before them: one layer
                renderer.clear()
                for r in run:
                    parts[r].draw(renderer)
                self._plan.append(len(self._layers))
                self._layers.append(_overlay(np.asarray(renderer.buffer_rgba())))
                run = []
            if n is not None:
                self._plan.append(n)
        np.asarray(renderer.buffer_rgba())[...] = self._background
