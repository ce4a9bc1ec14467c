"""One widget's figure between slider steps, drawn fast: `LiveFigure` (used by `_kit.emit` for every view).

A slider step used to build a new matplotlib Figure, lay it out (constrained layout) and PNG-encode it with
savefig: ≈ 0.4 s of CPU for the chapter-1 roofline explorer. Here a widget keeps one figure at `SCREEN_DPI`; its
layout is computed once per layout key; after that a step compares the new render with the last one part by part
and rasterises only what changed over a kept background (blitting on an Agg canvas), then encodes the buffer with
fast zlib. Core matplotlib only (no ipympl): the PNG goes to the notebook as before, on ipywidgets 7 and 8.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure

__all__ = ["SCREEN_DPI", "LiveFigure"]

#: Pixels per inch of a live widget's figure (and its static PNG): a 10.5-inch figure is 945 px wide, about a
#: JupyterLab or Colab output area; fewer pixels than savefig's 100 dpi to rasterise and to send per step.
SCREEN_DPI = 90


def _png_bytes(canvas) -> bytes:
    """The canvas's RGBA buffer as PNG bytes (zlib level 1: a few ms, a slightly larger file than savefig's)."""
    from PIL import Image as PILImage

    buf = io.BytesIO()
    PILImage.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(
        buf, format="png", compress_level=1)
    return buf.getvalue()


def _texts(fig: Figure) -> list:
    return [t for t in (fig._suptitle, fig._supxlabel, fig._supylabel) if t is not None] + list(fig.texts)


def _arr(x) -> bytes:
    return np.asarray(x, dtype=float).tobytes()


def _artist_sig(a) -> tuple:
    """What an artist shows, cheaply comparable between two renders (data, text, place, colour, style).

    An artist of a kind not listed here compares unequal every time (so it is redrawn every step)."""
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    common = (a.get_visible(), a.get_alpha(), a.get_zorder())
    if isinstance(a, Line2D):
        return ("line", _arr(a.get_xydata()), str(a.get_color()), a.get_marker(), a.get_markersize(),
                str(a.get_markerfacecolor()), a.get_linestyle(), a.get_linewidth(), *common)
    if isinstance(a, Text):
        xy = getattr(a, "xy", None)
        return ("text", a.get_text(), _arr(a.get_position()), None if xy is None else _arr(xy), a.get_ha(),
                a.get_va(), str(a.get_color()), a.get_fontsize(), a.get_rotation(), *common)
    if isinstance(a, Patch):
        return ("patch", _arr(a.get_path().vertices), _arr(a.get_patch_transform().get_matrix()),
                _arr(a.get_facecolor()), _arr(a.get_edgecolor()), a.get_linewidth(), a.get_hatch(), *common)
    if isinstance(a, Collection):
        return ("coll", _arr(a.get_offsets()), tuple(_arr(p.vertices) for p in a.get_paths()),
                _arr(a.get_facecolor()), _arr(a.get_edgecolor()),
                _arr(a.get_sizes() if hasattr(a, "get_sizes") else ()), _arr(a.get_linewidths()),  # LineCollection: none
                str(a.get_linestyle()), *common)
    if isinstance(a, AxesImage):
        arr = a.get_array()
        return ("image", None if arr is None else np.ma.getdata(arr).tobytes(), _arr(a.get_clim()),
                a.get_cmap().name, _arr(a.get_extent()), *common)
    return ("other", id(a))


def _axis_sig(axis) -> tuple:
    ticks = axis.get_majorticklocs()
    return (_arr(ticks), tuple(axis.get_major_formatter().format_ticks(ticks)), axis.get_label_text())


def _axes_sig(ax) -> tuple:
    """An Axes without its data artists: limits, scales, ticks and their labels, titles, legend, child counts."""
    return (_arr(ax.get_xlim()), _arr(ax.get_ylim()), ax.get_xscale(), ax.get_yscale(), _axis_sig(ax.xaxis),
            _axis_sig(ax.yaxis), ax.axison, ax.get_legend() is None, tuple(bool(t.get_text()) for t in _titles(ax)),
            len(ax.lines), len(ax.texts), len(ax.patches), len(ax.collections), len(ax.images), len(ax.artists),
            len(ax.tables), len(ax.child_axes))


def _titles(ax) -> tuple:
    return (ax.title, ax._left_title, ax._right_title)


def _parts(fig: Figure) -> dict:
    """Every drawable part of `fig` by a name that is the same in another render of the same view."""
    parts = {}
    for i, ax in enumerate(fig.axes):
        parts[(i,)] = ax
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


def _sig(name, artist):
    if len(name) == 1:
        return _axes_sig(artist)
    if name[1] == "legend":
        return ("legend", tuple(t.get_text() for t in artist.get_texts()))
    return _artist_sig(artist)


class LiveFigure:
    """One widget's figure between slider steps: drawn at `SCREEN_DPI` on an Agg canvas, laid out once, and
    after that only what changed is redrawn.

    Each step calls the view's pure render function (building a Figure costs a few ms; laying it out and
    rasterising it is what is slow). ``png(render, key=…)``:

    - a new `key` (or none given, or a figure of another size or with other axes): the whole figure is drawn and
      its layout engine (constrained layout) runs; the axes positions are kept;
    - the same `key` as the step before: the new figure takes the kept positions (no layout pass) and is compared,
      part by part, with the figure of the step before (line data, texts, patches, collections, titles, legends;
      per Axes its limits, ticks and labels). The parts that differ are "moving"; the rest is a static background,
      rasterised once without the moving parts and then restored, and only the moving parts are drawn over it
      (blitting). An Axes whose limits or ticks move is redrawn whole. When another part starts moving, the
      background is rasterised again without it.

    So `key` must hold every argument the layout depends on (the tests compare a stepped figure with a full draw,
    pixel by pixel). ``.figure`` is the figure of the last step (the render function's own Figure),
    ``.full_draws`` counts whole rasterisations (layout or background), ``.blits`` the steps drawn by blitting.
    """

    def __init__(self, dpi: float = SCREEN_DPI):
        self.dpi, self.figure, self.key, self.full_draws, self.blits = dpi, None, None, 0, 0
        self._positions = self._texts_at = self._background = None
        self._sigs: dict = {}
        self._moving: set = set()

    def _shape(self, fig: Figure):
        return (tuple(fig.get_size_inches()), tuple(type(ax).__name__ for ax in fig.axes), len(_texts(fig)),
                len(fig.legends), len(fig.lines) + len(fig.patches) + len(fig.images) + len(fig.artists))

    def png(self, render, *, key=None) -> bytes:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = render()
        fig.set_dpi(self.dpi)
        canvas = FigureCanvasAgg(fig)
        old = self.figure
        if key is not None and old is not None and key == self.key and self._shape(fig) == self._shape(old):
            self._step(fig, canvas)
        else:
            canvas.draw()  # runs the layout engine
            self.full_draws += 1
            self._positions = [(ax.get_position(original=True), ax.get_position(original=False)) for ax in fig.axes]
            self._texts_at = [t.get_position() for t in _texts(fig)]
            self._background, self._moving = None, set()
            self._sigs = {n: _sig(n, a) for n, a in _parts(fig).items()} if key is not None else {}
            self.key = key
        self.figure = fig
        return _png_bytes(canvas)

    def _step(self, fig: Figure, canvas) -> None:
        fig.set_layout_engine("none")
        for ax, (orig, active) in zip(fig.axes, self._positions):
            ax.set_position(orig, which="original")
            ax.set_position(active, which="active")
        for t, xy in zip(_texts(fig), self._texts_at):
            t.set_position(xy)
        for ax in fig.axes:  # what a full draw does first: aspect-locked axes shrink into their box
            ax.apply_aspect()
        parts = _parts(fig)
        sigs = {n: _sig(n, a) for n, a in parts.items()}
        changed = {n for n, s in sigs.items() if self._sigs.get(n) != s}
        self._sigs = sigs
        moving_axes = {n[0] for n in changed | self._moving if len(n) == 1}
        moving = {n for n in changed | self._moving
                  if n in parts and (len(n) == 1 or n[0] == "fig" or n[0] not in moving_axes)}
        renderer = canvas.get_renderer()
        if self._background is None or not moving <= self._moving or not self._moving <= parts.keys():
            self._moving = moving  # a new background, without every part that moves
            drawn = [parts[n] for n in moving]
            for a in drawn:
                a.set_animated(True)
            canvas.draw()
            self.full_draws += 1
            self._background = np.asarray(canvas.buffer_rgba()).copy()  # every pixel (copy_from_bbox misses a row)
            for a in drawn:
                a.set_animated(False)
        else:
            np.asarray(renderer.buffer_rgba())[...] = self._background
            self.blits += 1
        for a in sorted((parts[n] for n in self._moving), key=lambda a: a.get_zorder()):
            a.draw(renderer)
