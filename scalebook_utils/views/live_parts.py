"""What one render of a live widget's figure shows, part by part, cheaply comparable with the next render.

`LiveFigure` (`views/live_figure.py`) names every drawable part of a figure (`drawable_parts`: per Axes the frame,
its x and y axis, spines, titles, legend and each data artist; the figure's own texts, legends and artists) by a
key that is the same in another render of the same view, and compares two renders by each part's signature
(`part_sig`: data, text, place, colour, style, and the Axes' limits where the part's pixels follow them). A part
whose signature changed between two slider steps is "moving" and is redrawn; the rest stays in the background.
Core matplotlib only; shared by every chapter's view through `LiveFigure`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

__all__ = ["figure_texts", "titles", "draws_inside", "drawable_parts", "part_sig"]


def figure_texts(fig: Figure) -> list:
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


def draws_inside(axis) -> bool:
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
        draws_inside(axis),
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
        tuple(bool(t.get_text()) for t in titles(ax)),
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


def titles(ax) -> tuple:
    """An Axes' three titles (centre, left, right), drawn or empty."""
    return (ax.title, ax._left_title, ax._right_title)


def drawable_parts(fig: Figure) -> dict:
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
        for j, t in enumerate(titles(ax)):
            if t.get_text():
                parts[(i, "title", j)] = t
        if ax.get_legend() is not None:
            parts[(i, "legend", 0)] = ax.get_legend()
    for j, t in enumerate(figure_texts(fig)):
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


def part_sig(name, artist) -> tuple:
    """The signature of the part `name` of `drawable_parts` (`artist`): equal in two renders when it paints the same."""
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
