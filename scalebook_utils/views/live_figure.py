"""One widget's figure between slider steps, drawn fast: `LiveFigure` (used by `_kit.emit` for every view).

A slider step used to build a new matplotlib Figure, lay it out (constrained layout) and PNG-encode it with
savefig: ≈ 0.4 s of CPU for the chapter-1 roofline explorer. Here a widget keeps one figure at `SCREEN_DPI`; its
layout is computed once per layout key; after that a step compares the new render with the last one part by part
(down to an Axes' x and y axis, spines, titles, legend and each data artist) and rasterises only what changed, and
what a full draw paints over it, over a kept background (blitting on an Agg canvas), then encodes the buffer with
fast zlib. Core matplotlib only (no ipympl): the PNG goes to the notebook as before, on ipywidgets 7 and 8.

The kit's other two live modules hold the machinery: `live_parts` names a figure's parts and their signatures
(what changed between two renders), `live_layers` finds the static parts a full draw paints over a moving one
and composites their overlay layers.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure

from scalebook_utils.views.live_layers import composite, overlay, paint_order, painted_over
from scalebook_utils.views.live_parts import drawable_parts, figure_texts, part_sig, titles

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
            len(figure_texts(fig)),
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
            self._texts_at = [t.get_position() for t in figure_texts(fig)]
            self._background, self._moving, self._over, self._plan, self._layers = None, set(), set(), [], []
            self._boxes = {}
            self._sigs = {n: part_sig(n, a) for n, a in drawable_parts(fig).items()} if key is not None else {}
            self.key = key
        self.figure = fig
        return _png_bytes(canvas)

    def _step(self, fig: Figure, old: Figure, canvas) -> None:
        fig.set_layout_engine("none")
        for ax, (orig, active) in zip(fig.axes, self._positions):
            ax.set_position(orig, which="original")
            ax.set_position(active, which="active")
        for t, xy in zip(figure_texts(fig), self._texts_at):
            t.set_position(xy)
        for ax, was in zip(fig.axes, old.axes):  # where the last draw placed the titles (a title drawn alone stays)
            for t, w in zip(titles(ax), titles(was)):
                t.set_position(w.get_position())
        for ax in fig.axes:  # what a full draw does first: aspect-locked axes shrink into their box
            ax.apply_aspect()
        parts = drawable_parts(fig)
        sigs = {n: part_sig(n, a) for n, a in parts.items()}
        changed = {n for n, s in sigs.items() if self._sigs.get(n) != s}
        self._sigs = sigs
        moving_axes = {n[0] for n in changed | self._moving if len(n) == 1}
        moving = {
            n
            for n in changed | self._moving
            if n in parts and (len(n) == 1 or n[0] == "fig" or n[0] not in moving_axes)
        }
        renderer = canvas.get_renderer()
        order = paint_order(fig, parts)
        over = painted_over(parts, moving, order, renderer, self.dpi, self._over, sigs, self._boxes)
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
                composite(buf, self._layers[op])
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
                self._layers.append(overlay(np.asarray(renderer.buffer_rgba())))
                run = []
            if n is not None:
                self._plan.append(n)
        np.asarray(renderer.buffer_rgba())[...] = self._background
