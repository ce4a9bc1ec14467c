"""Views for chapter 11 (the capstone): "plan your model" as one readout, one figure and one self-contained app.

The same layers as `training_views` (DESIGN §3) over the pure `capstone` core: `capstone_readout` returns one
deterministic line starting with ``capstone: `` (tests and the browser test wait for it), `capstone_figure` draws
the training step's time budget next to the serving frontier, and `plan_app` wires every control into ONE widget
(a VBox: title, controls, a "Training plan" | "Serving plan" pair of panes with their reasons, the readout line
and the figure), so the notebook also renders in Voilà with no code visible. Bad input (an unknown name, a zero
size, an MFU above 1, a chip count beyond a pod) shows as text in the panes and the readout, never a traceback.

Browser hooks: the panes carry the CSS classes ``scalebook-train-pane`` and ``scalebook-serve-pane``, the readout
``scalebook-capstone-readout``.

The readout and the figure live in their own modules (`ch11_capstone_readout`, `ch11_capstone_figure`) and are
re-exported here; this module holds the app, its panes and its cached PNG of the figure.

Book ch. 11 "Conclusions and Further Reading" over ch. 5–8 and ch. 12.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import time

import ipywidgets as widgets
from IPython.display import Image

from scalebook_utils.core import capstone as cap
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import chip_names, get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.views._kit import INPUT_ERRORS, error_text, message_figure
from scalebook_utils.views.ch11_capstone_figure import capstone_figure
from scalebook_utils.views.ch11_capstone_readout import CAPSTONE_PREFIX, capstone_readout, model_key, plan_sides
from scalebook_utils.views.live_figure import LiveFigure

__all__ = [
    "CAPSTONE_PREFIX",
    "CUSTOM",
    "MODEL_LABEL",
    "TRAIN_CHIP_LABEL",
    "SERVE_CHIP_LABEL",
    "capstone_readout",
    "capstone_figure",
    "pane_html",
    "layouts_html",
    "plan_app",
]

#: The model dropdown's entry that reveals the L, D, F, N, K, H, V fields.
CUSTOM = "custom…"
#: CSS classes the browser test looks for.
TRAIN_PANE_CLASS, SERVE_PANE_CLASS, READOUT_CLASS = (
    "scalebook-train-pane",
    "scalebook-serve-pane",
    "scalebook-capstone-readout",
)
#: Descriptions of the chip dropdowns (the browser test picks them by these labels).
MODEL_LABEL, TRAIN_CHIP_LABEL, SERVE_CHIP_LABEL = "model", "training chip", "serving chip"

_DIMS = ("L", "D", "F", "N", "K", "H", "V")
_BATCHES = [(f"{2.0**k / 1e6:.3g}M (2^{k})", 2**k) for k in range(17, 27)]
_SEQS = (1024, 2048, 4096, 8192, 16384, 32768)
_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


# --- panes ----------------------------------------------------------------------------------------------------------


def pane_html(side, title: str) -> str:
    """One side as HTML: a heading, its headline numbers as a list, then "Why" and its reasons as bullets; an
    exception (bad input) as a red line."""
    h = f"<h4 style='margin:4px 0'>{html.escape(title)}</h4>"
    if isinstance(side, Exception):
        return (
            f"<div style='line-height:1.4'>{h}<p style='color:#b00020'>cannot plan: "
            f"{html.escape(error_text(side))}</p></div>"
        )
    lines = side.lines()
    items = "".join(f"<li>{html.escape(x)}</li>" for x in lines[1:])
    why = "".join(f"<li>{html.escape(r)}</li>" for r in side.reasons)
    verdict = ""
    if not side.feasible:
        verdict = f"<p style='color:#b00020'>{html.escape(side.reason)}</p>"
    return (
        f"<div style='line-height:1.4'>{h}<p style='margin:2px 0'><i>{html.escape(lines[0])}</i></p>{verdict}"
        + (f"<ul style='margin:2px 0'>{items}</ul>" if items and side.feasible else "")
        + f"<p style='margin:6px 0 2px'><b>Why</b></p><ul style='margin:2px 0'>{why}</ul>"
        + layouts_html(getattr(side, "layouts", ()))
        + "</div>"
    )


def layouts_html(rows) -> str:
    """The training planner's layout kinds as a small table: the chosen one, ties, slower ones and those that do
    not fit, each with its reason (`capstone.layout_rows`); empty for none."""
    if not rows:
        return ""
    color = {"chosen": "#1b7837", "tie": "#1f4e9c", "slower": "#555", "does not fit": "#b00020"}
    body = "".join(
        f"<tr><td>{html.escape(r.kind)}</td><td>{html.escape(r.layout)}</td>"
        f"<td style='color:{color.get(r.verdict, '#555')}'>{html.escape(r.verdict)}</td>"
        f"<td>{html.escape(r.why)}</td></tr>"
        for r in rows
    )
    return (
        "<p style='margin:6px 0 2px'><b>Layouts considered</b></p>"
        "<table style='font-size:90%;border-collapse:collapse'><tr><th align='left'>kind</th>"
        "<th align='left'>fastest of its kind</th><th align='left'>verdict</th><th align='left'>why</th></tr>"
        f"{body}</table>"
    )


# --- the figure, as the app shows it ----------------------------------------------------------------------------------


def _picture_budget(b: cap.Budget) -> cap.Budget:
    """`b` without the fields the figure does not draw (tokens, MFU, deadline, money): those change only text."""
    return dataclasses.replace(b, train_tokens=15e12, mfu=0.4, max_days=None, max_usd=None)


def _figure_png(model, train_chip, serve_chip, budget: cap.Budget, live: LiveFigure | None = None) -> bytes:
    return _figure_png_cached(model, train_chip, serve_chip, _picture_budget(budget), live)


@functools.lru_cache(maxsize=32)
def _figure_png_cached(model, train_chip, serve_chip, budget: cap.Budget, live: LiveFigure | None = None) -> bytes:
    """`capstone_figure` as PNG bytes (`widgets.SCREEN_DPI`), cached: drawing is most of an app update. On the app's
    `LiveFigure` (`live`) a change redraws only the side that changed (fixed margins: one layout for every plan)."""
    live = live or LiveFigure()
    try:
        return live.png(lambda: capstone_figure(model, train_chip, serve_chip, budget), key="capstone")
    except Exception as exc:  # noqa: BLE001 - an app never shows a traceback
        msg = f"cannot draw: {type(exc).__name__}: {exc}"
        return live.png(lambda: message_figure(msg))


# --- the app ------------------------------------------------------------------------------------------------------------


def _label(text: str) -> widgets.HTML:
    return widgets.HTML(f"<span style='color:#555;font-size:90%'>{html.escape(text)}</span>")


def plan_app(
    model: str | tf.TransformerConfig = "llama3-70b",
    train_chip: str = "tpu-v5p",
    serve_chip: str = "tpu-v5e",
    budget: cap.Budget | None = None,
) -> widgets.VBox:
    """The chapter-11 app as ONE widget: model (presets or "custom…" with L, D, F, N, K, H, V), training chip, chip
    count (0 = the default: a TPU's pod, 1024 GPUs), tokens, batch, sequence length, achieved MFU, an optional
    deadline and money cap; serving chip, precision, context and latency cap. Below: the training and serving plans
    side by side with their reasons, the `capstone_readout` line and `capstone_figure`.

    The returned VBox carries ``.controls`` (name → widget), ``.panes`` (training, serving HTML), ``.readout()``
    (the line for the current values), ``.last_readout``, ``.last_update_s`` (seconds the last update took) and
    ``.snapshot()`` (the current figure as a PNG Image)."""
    b = budget or cap.Budget()
    models = list(tf.MODELS)
    style = {"description_width": "130px"}
    wide = widgets.Layout(width="320px")
    model_dd = widgets.Dropdown(
        options=models + [CUSTOM],
        value=model if model in models else CUSTOM,
        description=MODEL_LABEL,
        style=style,
        layout=wide,
    )
    base = model if isinstance(model, tf.TransformerConfig) else tf.get_model(model if model in models else "llama3-8b")
    dims = {
        d: widgets.IntText(
            value=getattr(base, d),
            description=d,
            layout=widgets.Layout(width="150px"),
            style={"description_width": "20px"},
        )
        for d in _DIMS
    }
    custom_box = widgets.HBox(list(dims.values()))
    custom_box.layout.display = "" if model_dd.value == CUSTOM else "none"
    chips_all = chip_names()
    train_dd = widgets.Dropdown(
        options=chips_all, value=get_chip(train_chip).name, description=TRAIN_CHIP_LABEL, style=style, layout=wide
    )
    n_box = widgets.IntText(value=b.train_chips or 0, description="training chips", style=style, layout=wide)
    tokens_box = widgets.FloatText(value=b.train_tokens / 1e12, description="tokens (T)", style=style, layout=wide)
    batches = dict(_BATCHES)
    if b.batch_tokens not in batches.values():
        batches = {f"{b.batch_tokens:g}": b.batch_tokens} | batches
    batch_dd = widgets.Dropdown(
        options=list(batches.items()), value=b.batch_tokens, description="batch (tokens)", style=style, layout=wide
    )
    seq_dd = widgets.Dropdown(
        options=sorted({*_SEQS, b.seq_len}), value=b.seq_len, description="sequence length", style=style, layout=wide
    )
    mfu_sl = widgets.FloatSlider(
        value=b.mfu,
        min=0.05,
        max=1.0,
        step=0.01,
        readout_format=".0%",
        continuous_update=False,
        description="achieved MFU",
        style=style,
        layout=wide,
    )
    days_box = widgets.FloatText(value=b.max_days or 0, description="deadline (days)", style=style, layout=wide)
    usd_box = widgets.FloatText(value=(b.max_usd or 0) / 1e6, description="money cap (M USD)", style=style, layout=wide)
    serve_dd = widgets.Dropdown(
        options=chips_all, value=get_chip(serve_chip).name, description=SERVE_CHIP_LABEL, style=style, layout=wide
    )
    prec_dd = widgets.Dropdown(
        options=list(dict.fromkeys([b.serve_precision, *inf.PRECISIONS])),
        value=b.serve_precision,
        description="precision",
        style=style,
        layout=wide,
    )
    ctx_dd = widgets.Dropdown(
        options=sorted({*_CONTEXTS, int(b.serve_context)}),
        value=int(b.serve_context),
        description="context (tokens)",
        style=style,
        layout=wide,
    )
    lat_box = widgets.FloatText(value=b.max_latency * 1e3, description="latency cap (ms)", style=style, layout=wide)

    controls = {
        "model": model_dd,
        **dims,
        "train_chip": train_dd,
        "train_chips": n_box,
        "tokens": tokens_box,
        "batch": batch_dd,
        "seq_len": seq_dd,
        "mfu": mfu_sl,
        "max_days": days_box,
        "max_usd": usd_box,
        "serve_chip": serve_dd,
        "precision": prec_dd,
        "context": ctx_dd,
        "max_latency": lat_box,
    }

    train_pane = widgets.HTML(layout=widgets.Layout(width="50%", padding="0 8px 0 0"))
    serve_pane = widgets.HTML(layout=widgets.Layout(width="50%", padding="0 0 0 8px"))
    train_pane.add_class(TRAIN_PANE_CLASS)
    serve_pane.add_class(SERVE_PANE_CLASS)
    readout = widgets.HTML()
    readout.add_class(READOUT_CLASS)
    image = widgets.Image(
        format="png", layout=widgets.Layout(max_width="100%", align_self="flex-start")
    )  # never upscaled

    def current():
        """(model, train chip, serve chip, budget) from the controls; raises for bad values."""
        if model_dd.value == CUSTOM:
            m = tf.TransformerConfig("custom", **{d: dims[d].value for d in _DIMS})
        else:
            m = model_dd.value
        bud = cap.Budget(
            train_chips=n_box.value or None,
            train_tokens=tokens_box.value * 1e12,
            batch_tokens=batch_dd.value,
            seq_len=seq_dd.value,
            mfu=mfu_sl.value,
            max_days=days_box.value or None,
            max_usd=usd_box.value * 1e6 or None,
            serve_precision=prec_dd.value,
            serve_context=ctx_dd.value,
            max_latency=lat_box.value * 1e-3,
        )
        return m, train_dd.value, serve_dd.value, bud

    def line_now() -> str:
        try:
            m, tc, sc, bud = current()
        except INPUT_ERRORS as exc:
            return f"{CAPSTONE_PREFIX}{model_dd.value} → cannot plan: {error_text(exc)}"
        return capstone_readout(m, tc, sc, bud)

    box = widgets.VBox()
    box.quiet = False
    box.live_figure = LiveFigure()

    def update(_change=None):
        if box.quiet:
            return
        t0 = time.perf_counter()
        custom_box.layout.display = "" if model_dd.value == CUSTOM else "none"
        try:
            m, tc, sc, bud = current()
        except INPUT_ERRORS as exc:
            err = f"<p style='color:#b00020'>cannot plan: {html.escape(error_text(exc))}</p>"
            train_pane.value = "<h4 style='margin:4px 0'>Training plan</h4>" + err
            serve_pane.value = "<h4 style='margin:4px 0'>Serving plan</h4>" + err
            line = f"{CAPSTONE_PREFIX}{model_dd.value} → cannot plan: {error_text(exc)}"
        else:
            train, serve = plan_sides(m, tc, sc, bud)
            train_pane.value = pane_html(train, "Training plan")
            serve_pane.value = pane_html(serve, "Serving plan")
            line = capstone_readout(m, tc, sc, bud)
        # the text first (the browser shows it at once), then the picture
        readout.value = f"<code style='white-space:pre-wrap'>{html.escape(line)}</code>"
        box.last_readout = line
        if line.startswith(CAPSTONE_PREFIX) and " → cannot plan" not in line:
            image.value = box.last_png = _figure_png(model_key(m), tc, sc, bud, box.live_figure)
        box.last_update_s = time.perf_counter() - t0

    def on_model(change):
        # choosing "custom…" starts from the preset that was selected, so the fields hold a sensible model
        if change["new"] == CUSTOM and change["old"] in tf.MODELS:
            src = tf.MODELS[change["old"]]
            box.quiet = True
            try:
                for d in _DIMS:
                    dims[d].value = getattr(src, d)
            finally:
                box.quiet = False

    model_dd.observe(on_model, names="value")  # before `update`, so the fields are filled when it runs
    for w in controls.values():
        w.observe(update, names="value")

    title = widgets.HTML(
        "<h3 style='margin:4px 0'>Plan your model — training and serving side by side</h3>"
        "<p style='margin:0 0 6px;color:#555'>Book ch. 11: the planners of ch. 5–6 (TPU training), ch. 12 "
        "(GPU training) and ch. 7–8 (serving). Step times are rooflines; the days use the MFU you expect "
        "to achieve.</p>"
    )
    train_col = widgets.VBox(
        [
            _label("Training"),
            train_dd,
            n_box,
            _label("0 = a TPU's full pod, 1024 GPUs (576 GB200s)"),
            tokens_box,
            batch_dd,
            seq_dd,
            mfu_sl,
            days_box,
            usd_box,
            _label("0 = no deadline / no cap"),
        ]
    )
    serve_col = widgets.VBox([_label("Serving"), serve_dd, prec_dd, ctx_dd, lat_box])
    box.children = [
        title,
        widgets.HBox([model_dd]),
        custom_box,
        widgets.HBox([train_col, serve_col]),
        widgets.HBox([train_pane, serve_pane], layout=widgets.Layout(width="100%")),
        readout,
        image,
    ]
    box.controls, box.panes, box.image = controls, (train_pane, serve_pane), image
    box.readout = line_now
    box.snapshot = lambda: Image(data=box.last_png, format="png")
    update()
    return box
