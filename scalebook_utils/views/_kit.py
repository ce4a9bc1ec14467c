"""The views' shared kit: what every chapter's widgets and figures use, so no chapter view imports another.

- Widget plumbing (DESIGN §3: readout, render, builder): `attach` gives a builder's box its handles
  (`.controls`, `.readout()`, `.snapshot()`…), `emit` prints a view's line and draws its figure (through the
  box's `LiveFigure`), `show` displays a widget once with its static PNG, `live_output` redraws once per change.
- Messages instead of tracebacks: `INPUT_ERRORS`, `error_text`, `message_figure`.
- Formatting and figures: `format_number`, `plain_tick`, `plain_formatter`, `si_scale`, `si_tick`, `log_axes`,
  `log_span`, `new_figure`, `PALETTE`, `LINE_COLORS`, `SHARD_COLORS`, `format_rows` (fixed-width text tables).
- TPU pickers: `tpu_names` (a chip dropdown's options), `format_shape` ((4, 4) → "4x4", as a shape box takes it;
  `topology.shape_text`).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from IPython.display import Image, clear_output, display
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from scalebook_utils.core.hardware import chip_names
from scalebook_utils.core.topology import shape_text as format_shape  # (4, 4) → '4x4', as a shape box reads it
from scalebook_utils.core.units import format_si
from scalebook_utils.views.live_figure import LiveFigure


def static_png(fig: Figure, dpi: int = 100) -> Image:
    """The figure as a PNG `IPython.display.Image` (a notebook's static snapshot of a widget)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return Image(data=buf.getvalue(), format="png")


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def show(box: widgets.Widget) -> None:
    """Display `box` once, as one output with two representations: the live widget and its static PNG.

    A front end with a kernel and the widget manager (JupyterLab, Notebook 7, Colab, Kaggle) draws the
    widget; one without (GitHub, nbviewer, a saved notebook reopened) draws the PNG of the default
    state, so a widget cell never shows two figures. Works on ipywidgets 7 and 8 (both display a widget
    as this widget-view bundle). Widgets without `.snapshot()` get only their live view.
    """
    bundle = {
        "text/plain": f"{type(box).__name__} (run the cell to use the live widget)",
        _WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": box.model_id},
    }
    snapshot = getattr(box, "snapshot", None)
    if snapshot is not None:
        bundle["image/png"] = base64.b64encode(snapshot().data).decode("ascii")
    display(bundle, raw=True)


def live_figure_of(box: widgets.Box) -> LiveFigure:
    live = getattr(box, "live_figure", None)
    if live is None:
        live = box.live_figure = LiveFigure()
    return live


def figure_png(box: widgets.Box, render, key=None) -> bytes:
    """`render()` drawn on `box`'s `LiveFigure` as PNG bytes; a failing render gives a message figure (never raises)."""
    try:
        return live_figure_of(box).png(render, key=key)
    except Exception as exc:  # noqa: BLE001 - shown to the reader instead of a traceback in the widget
        msg = f"cannot draw: {type(exc).__name__}: {exc}"
        return live_figure_of(box).png(lambda: message_figure(msg))


def emit(box: widgets.Box, text: str, render, *, key=None, lines=()) -> None:
    """A view's output: the readout line (and any further `lines`), then the figure as a PNG, kept on `box`.

    The figure is rendered before anything is printed, so the line and the picture appear together
    (no moment where the new line sits over the old picture). `key`: the arguments the figure's layout depends
    on (see `LiveFigure`: with the same key a step redraws only what changed). A view never raises.
    """
    png = figure_png(box, render, key)
    box.last_readout, box.last_png = text, png
    print(text)
    for line in lines:
        print(line)
    display(Image(data=png, format="png"))


def attach(box: widgets.Box, controls: dict, output: widgets.Output, readout, render) -> widgets.Box:
    """Give a builder's container its test/notebook handles (see the module docstring).

    readout() and render() evaluate the pure functions at the controls' current values (kept as
    ``box.readout`` and ``box.render``).
    """
    box.controls, box.output, box.readout, box.render = controls, output, readout, render

    def snapshot() -> Image:
        png = getattr(box, "last_png", None)
        return Image(data=png if png is not None else figure_png(box, render), format="png")

    box.snapshot = snapshot
    if not hasattr(box, "last_readout"):  # no view has run yet
        box.last_readout = readout()
    return box


def message_figure(text: str, figsize=(8.0, 1.2)) -> Figure:
    fig = Figure(figsize=figsize)
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, wrap=True)
    return fig


#: what a readout or render catches from bad input and turns into a message (never a traceback in a widget)
INPUT_ERRORS = (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError)


def error_text(exc: BaseException) -> str:
    """The readable part of a caught `INPUT_ERRORS` exception (a KeyError's message without its quotes)."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def format_number(x) -> str:
    """512 → '512', 8192.0 → '8192', 0.5 → '0.5', 851.138 → '851.1'."""
    x = float(x)
    return f"{x:.0f}" if x.is_integer() else f"{x:.4g}"


def plain_tick(v, _pos) -> str:
    """A log axis's tick label as a plain number: 1000 → '1,000', 1.5 → '1.5', 0.5 → '0.5', nothing at or below 0.

    A `FuncFormatter` function (chapter 1's intensity axes). Unlike `plain_formatter` it keeps a fraction above
    1 ('1.5', where `plain_formatter` rounds to '2'); on whole numbers and below 1 the two agree.
    """
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"
    return f"{v:g}"


def plain_formatter() -> FuncFormatter:
    """Log-axis tick labels as plain numbers: 1000 → '1,000', 0.5 → '0.5', nothing at or below 0 (values above
    1 rounded to whole numbers; `plain_tick` keeps their fractions)."""

    def fmt(v, _p):
        if v <= 0:
            return ""
        return f"{v:,.0f}" if v >= 1 else f"{v:g}"

    return FuncFormatter(fmt)


def si_scale(value: float) -> tuple[float, str]:
    """(scale, prefix) for showing `value` with an SI prefix: 1.97e14 → (1e12, "T"), 3e-5 → (1e-6, "µ")."""
    a = abs(float(value))
    if a == 0 or not math.isfinite(a):
        return 1.0, ""
    for scale, prefix in [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "µ"),
        (1e-9, "n"),
        (1e-12, "p"),
    ]:
        if a >= scale * (1 - 1e-9):
            return scale, prefix
    return 1e-12, "p"


def si_tick(unit: str = "") -> FuncFormatter:
    """Tick labels such as '100 T' or '10 µs' (3 significant figures, SI prefix)."""

    def fmt(v, _pos):
        if v <= 0:
            return ""
        s = format_si(v, unit, digits=3).replace(" u", " µ")
        return s

    return FuncFormatter(fmt)


def log_span(lo: float, hi: float) -> np.ndarray:
    """400 points from `lo` to `hi`, evenly spaced on a log axis (the x values of a log-log curve)."""
    return np.logspace(math.log10(lo), math.log10(hi), 400)


def new_figure(figsize, ax=None):
    """(fig, ax): `ax` and its figure when given (to draw into a caller's panel), else a new one-panel Figure."""
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


#: Line colours of every chapter-4 figure, in order.
PALETTE = ["#1f4e9c", "#e6550d", "#31a354", "#7b3294", "#d62728", "#8c6d31"]
#: Line colours of the chapter 1-3 figures (rooflines, collective times), in order.
LINE_COLORS = ["#1f4e9c", "#7b3294", "#008080", "#b35806"]


def tpu_names() -> list[str]:
    """The TPU names of `hardware.CHIPS` (what a chip dropdown of chapters 2, 3 and 5 offers)."""
    return chip_names("tpu")


def live_output(controls: dict, view, on_change: dict | None = None):
    """`ipywidgets.interactive_output` that can change several controls with one redraw.

    `on_change` maps a control's name to a handler that runs first when that control changes (e.g. a preset
    that fills seven boxes); every change the handler makes is held back and the view redraws once, after it.
    Returns the Output widget.
    """
    out = widgets.Output()
    on_change = on_change or {}
    held = [0]

    def refresh():
        if held[0]:
            return
        kwargs = {k: c.value for k, c in controls.items()}
        with out:
            clear_output(wait=True)
            view(**kwargs)

    def observer(name):
        def changed(change):
            if name in on_change and not held[0]:
                held[0] += 1
                try:
                    on_change[name](change)
                finally:
                    held[0] -= 1
            refresh()

        return changed

    for name, c in controls.items():
        c.observe(observer(name), "value")
    refresh()
    return out


def format_rows(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """Rows of text cells as a fixed-width table (header, rule, one line per row)."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0])
    width = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    line = lambda r: "  ".join(str(r.get(c, "")).ljust(width[c]) for c in cols).rstrip()  # noqa: E731
    return "\n".join([line({c: c for c in cols}), "  ".join("-" * width[c] for c in cols)] + [line(r) for r in rows])


def log_axes(ax, *, x=True, y=True, fine=False) -> None:
    """Log scale with plain tick labels and no minor ticks (they slow constrained layout down); `fine` labels
    1, 2, 5 of each decade (for axes spanning a few decades)."""
    for on, axis, scale in ((x, ax.xaxis, ax.set_xscale), (y, ax.yaxis, ax.set_yscale)):
        if on:
            scale("log")
            if fine:
                axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
            axis.set_major_formatter(plain_formatter())
            axis.set_minor_locator(NullLocator())
            axis.set_minor_formatter(NullFormatter())


#: One colour per distinct shard (tab20-like, readable with black text).
SHARD_COLORS = [
    "#8dd3c7",
    "#fdb462",
    "#bebada",
    "#fb8072",
    "#80b1d3",
    "#b3de69",
    "#fccde5",
    "#d9d9d9",
    "#ffed6f",
    "#bc80bd",
    "#ccebc5",
    "#ffffb3",
    "#a6cee3",
    "#fdbf6f",
    "#cab2d6",
    "#b2df8a",
]


__all__ = [
    "attach",
    "emit",
    "figure_png",
    "live_figure_of",
    "show",
    "static_png",
    "live_output",
    "INPUT_ERRORS",
    "error_text",
    "message_figure",
    "format_number",
    "plain_tick",
    "plain_formatter",
    "si_scale",
    "si_tick",
    "log_axes",
    "log_span",
    "new_figure",
    "PALETTE",
    "LINE_COLORS",
    "SHARD_COLORS",
    "format_rows",
    "tpu_names",
    "format_shape",
]
