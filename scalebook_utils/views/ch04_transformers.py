"""Views for chapter 4 (Transformer math), the accounting: readouts, figures and widgets over `transformer`.

The same three layers as `widgets` and `training_views` (DESIGN §3): a pure *readout* returning one
deterministic line with a fixed prefix (tests and the browser test wait for it), a *render* function returning
a matplotlib Figure, and a *builder* wiring ipywidgets controls to both (``.controls``, ``.readout()``,
``.last_readout``, ``.snapshot()``, as `_kit.attach` gives them). Bad input (K not dividing N, a zero size,
an unknown chip) gives a readable line and a message figure, never an exception.

Book ch. 4 "All the Transformer Math You Need to Know":

1. `calculator_widget` — parameters by component, training FLOPs per token with and without attention,
   the 6·P·tokens rule, KV bytes per token, for a preset or a custom model ("Transformer Accounting",
   "Global FLOPs and Params Calculation", "General rule of thumb for Transformer FLOPs"); its numbers
   (`calculator_config`, `calculator_numbers`) are computed in `core.calculator` and re-exported here;
2. `render_remat` — memory against FLOPs (84 TB / 4.2 TB, 6 → 8 · P; "Gradient checkpointing"); it lives in
   `ch04_remat` and is re-exported here;
3. `render_kv_cache` — KV cache against context length for MHA/GQA/MQA, bf16 and int8 (8 GiB;
   "Key-Value (KV) caching"); it lives in `ch04_kv_cache` and is re-exported here;
4. `render_moe_critical_batch` — the MoE critical batch 120·E/k (DeepSeek: 3840; ch4.q8;
   "Sparsity and Mixture-of-Experts"); it lives in `ch04_moe` and is re-exported here.

This module holds the calculator and is the one name (`transformer_views`) the notebooks import for all four.
The attention views of the chapter (attention's share of the FLOPs, its arithmetic intensity, flash attention
step by step) are in `attention_views`; the plumbing both use (`INPUT_ERRORS` … `live_output`) is `views._kit`'s.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from scalebook_utils.core import transformer as tf

# the numbers these views show (pure, in core; re-exported here: transformer_views.remat_rows, … as before)
from scalebook_utils.core.calculator import (
    CUSTOM,
    KV_EXAMPLE,
    REMAT_EXAMPLE,
    SIZE_FIELDS,
    calculator_config,
    calculator_numbers,
    kv_bytes_per_sequence,
    remat_rows,
)
from scalebook_utils.core.units import format_count
from scalebook_utils.views._kit import (
    INPUT_ERRORS,
    PALETTE,
    attach,
    emit,
    error_text,
    format_number,
    live_output,
    message_figure,
    new_figure,
    plain_formatter,
    static_png,
)

# the chapter's other sections, re-exported (`transformer_views.render_remat`, … as before)
from scalebook_utils.views.ch04_kv_cache import KV_PREFIX, format_binary_bytes, kv_readout, render_kv_cache
from scalebook_utils.views.ch04_moe import MOE_PREFIX, moe_coefficient, moe_readout, render_moe_critical_batch
from scalebook_utils.views.ch04_remat import REMAT_PREFIX, remat_readout, render_remat

__all__ = [
    "CALC_PREFIX",
    "REMAT_PREFIX",
    "KV_PREFIX",
    "MOE_PREFIX",
    "CUSTOM",
    "REMAT_EXAMPLE",
    "KV_EXAMPLE",
    "calculator_config",
    "calculator_numbers",
    "calculator_readout",
    "render_calculator",
    "calculator_widget",
    "remat_rows",
    "remat_readout",
    "render_remat",
    "kv_bytes_per_sequence",
    "kv_readout",
    "render_kv_cache",
    "moe_coefficient",
    "moe_readout",
    "render_moe_critical_batch",
    "format_count",
    "format_binary_bytes",
    "static_png",
    "INPUT_ERRORS",
    "PALETTE",
    "error_text",
    "format_number",
    "plain_formatter",
    "new_figure",
    "live_output",
]

#: The browser test and the notebook wait for this prefix; do not change it (REMAT_PREFIX, KV_PREFIX: their
#: modules).
CALC_PREFIX = "calculator: "


# --- small helpers (the calculator's number formats) -----------------------------------------------------


def _e(x: float) -> str:
    """FLOP counts: 4.2335e11 → '4.23e11', 6.4e9 → '6.4e9', 512 → '512'."""
    if x == 0 or 1e-3 <= abs(x) < 1e4 or not math.isfinite(x):
        return f"{x:.3g}"
    m, e = f"{x:.2e}".split("e")
    return f"{float(m):.3g}e{int(e)}"


def _share(x: float) -> str:
    """0.171 → '17.1%', 1.9e-5 → '0.0019%' (a norm's share is not 0.0%)."""
    return f"{x:.1%}" if x >= 0.001 or x == 0 else f"{100 * x:.2g}%"


# --- (1) the parameter / FLOP / KV calculator --------------------------------------------------------------


def _calc_head(model, T, B) -> str:
    name = model.name if isinstance(model, tf.TransformerConfig) else str(model)
    return f"{CALC_PREFIX}{name}, T={format_number(T) if isinstance(T, (int, float)) else T}, B={B}"


def calculator_readout(model: str | tf.TransformerConfig = "llama3-70b", T: float = 4096, B: float = 1, **sizes) -> str:
    """``calculator: llama3-70b, T=4096, B=1 → 70.6B params | 6·P = 4.23e11 FLOPs/token | …``.

    Then the exact training FLOPs per token: matmuls (6 · matmul params) + attention at context T, the
    attention's share, the FLOPs of one step of B sequences of T tokens, and the KV cache per token in bf16
    and int8. Invalid sizes give ``… → invalid: <reason>``.
    """
    try:
        cfg = calculator_config(model, **sizes)
        head = _calc_head(cfg, T, format_number(B) if isinstance(B, (int, float)) else B)
        n = calculator_numbers(cfg, T, B)
    except INPUT_ERRORS as exc:
        return f"{_calc_head(model, T, B)} → invalid: {error_text(exc)}"
    pc = n["params"]
    params = f"{format_count(pc.total)} params" + (f" ({format_count(pc.activated)} activated)" if cfg.is_moe else "")
    share = n["train_attention"] / n["train_matmul"]
    return (
        f"{head} → {params} | 6·P = {_e(n['six_p'])} FLOPs/token | exact: {_e(n['train_matmul'])} matmuls + "
        f"{_e(n['train_attention'])} attention (+{share:.1%}) = {_e(n['train'])} | step {_e(n['step'])} FLOPs | "
        f"KV {format_binary_bytes(n['kv_bf16'])}/token bf16, {format_binary_bytes(n['kv_int8'])} int8"
    )


def render_calculator(
    model: str | tf.TransformerConfig = "llama3-70b", T: float = 4096, B: float = 1, **sizes
) -> Figure:
    """Left: parameters by component (MoE: routed experts hatched beyond the activated ones). Right: training
    FLOPs per token by component at context T, with 6·P as a dashed line."""
    try:
        cfg = calculator_config(model, **sizes)
        n = calculator_numbers(cfg, T, B)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}", figsize=(11, 1.4))
    fig = Figure(figsize=(11.5, 3.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    pc = n["params"]
    parts = {
        "embedding": pc.embedding,
        "attention": pc.attention,
        "MLP": pc.mlp,
        "norms": pc.norms,
        "unembedding": pc.unembedding,
    }
    ys = np.arange(len(parts))[::-1]
    vals = np.array(list(parts.values()), float)
    ax1.barh(ys, vals, height=0.6, color=PALETTE[0], label="parameters")
    if cfg.is_moe:
        active_mlp = pc.mlp - (pc.total - pc.activated)
        ax1.barh(ys[2], active_mlp, height=0.6, color=PALETTE[1], label="activated per token (k of E experts)")
    for y, v in zip(ys, vals):
        ax1.text(v + vals.max() * 0.015, y, f"{format_count(v)} ({_share(v / pc.total)})", va="center", fontsize=8)
    ax1.set_yticks(ys, list(parts))
    ax1.set_xlim(0, vals.max() * 1.4)
    ax1.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_count(v) if v > 0 else "0"))
    ax1.set_xlabel("parameters (count)")
    ax1.set_ylabel("component")
    ax1.set_title(f"{cfg.name}: {format_count(pc.total)} parameters", fontsize=10)
    ax1.grid(True, axis="x", alpha=0.3)
    ax1.legend(loc="lower right", fontsize=8)

    fp = n["flops_parts"]
    ys2 = np.arange(len(fp))[::-1]
    v2 = np.array(list(fp.values()), float)
    colors = [PALETTE[0]] * 3 + [PALETTE[4]]
    ax2.barh(ys2, v2, height=0.6, color=colors)
    top = max(v2.max(), n["six_p"])
    for y, v in zip(ys2, v2):
        ax2.text(
            v + top * 0.015,
            y,
            f"{_e(v)} ({_share(v / n['train'])})",
            va="center",
            fontsize=8,
            zorder=5,
            bbox={"fc": "white", "ec": "none", "pad": 1.0, "alpha": 0.9},
        )  # readable over the 6·P line
    ax2.axvline(n["six_p"], color="black", ls="--", lw=1.2, label=f"6·P = {_e(n['six_p'])} (rule of thumb)")
    ax2.set_yticks(ys2, list(fp))
    ax2.set_xlim(0, top * 1.45)
    ax2.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: _e(v) if v > 0 else "0"))
    ax2.set_xlabel("training FLOPs per token (forward + backward)")
    ax2.set_ylabel("component")
    share = n["train_attention"] / n["train_matmul"]
    ax2.set_title(f"{_e(n['train'])} FLOPs/token at T = {format_number(T)} (attention +{share:.1%})", fontsize=10)
    ax2.grid(True, axis="x", alpha=0.3)
    ax2.legend(loc="upper right", fontsize=8)
    return fig


def calculator_widget(model: str = "llama3-70b", T: int = 4096, B: int = 1) -> widgets.VBox:
    """A model dropdown (the presets and "custom"), boxes D, F, N, K, H, L, V, gated and tied checkboxes, a batch
    box B and a log slider T (128 … 1M tokens); prints `calculator_readout` and draws `render_calculator`.

    Choosing a preset fills the boxes (one redraw); editing a box shows "<preset> with K=…"; "custom" uses the
    boxes as they are. Any value may be typed, also a zero or a K that does not divide N: the readout says why
    the model is invalid.
    """
    presets = list(tf.MODELS)
    start = tf.get_model(model)
    model_dd = widgets.Dropdown(options=presets + [CUSTOM], value=start.name, description="model")
    boxes = {
        f: widgets.IntText(value=getattr(start, f), description=f, layout=widgets.Layout(width="170px"))
        for f in SIZE_FIELDS
    }
    gated_cb = widgets.Checkbox(value=start.gated_mlp, description="gated MLP", indent=False)
    tied_cb = widgets.Checkbox(value=start.tied_embeddings, description="tied embeddings", indent=False)
    b_box = widgets.IntText(value=int(B), description="B", layout=widgets.Layout(width="170px"))
    t_slider = widgets.FloatLogSlider(
        value=float(T),
        base=2,
        min=7,
        max=20,
        step=1,
        description="T",
        readout_format=",.0f",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    box = widgets.VBox()

    def view(model, D, F, N, K, H, L, V, gated, tied, B, T):
        kw = dict(D=D, F=F, N=N, K=K, H=H, L=L, V=V, gated=gated, tied=tied)
        emit(
            box,
            calculator_readout(model, T, B, **kw),
            lambda: render_calculator(model, T, B, **kw),
            key=(model, B, *kw.values()),
        )

    controls = {"model": model_dd, **boxes, "gated": gated_cb, "tied": tied_cb, "B": b_box, "T": t_slider}

    def on_model(change):
        if change["new"] == CUSTOM:
            return
        cfg = tf.get_model(change["new"])
        for f, b in boxes.items():
            b.value = getattr(cfg, f)
        gated_cb.value, tied_cb.value = cfg.gated_mlp, cfg.tied_embeddings

    out = live_output(controls, view, {"model": on_model})
    fields = list(boxes.values())
    box.children = [
        widgets.HBox([model_dd, gated_cb, tied_cb]),
        widgets.HBox(fields[:4]),
        widgets.HBox(fields[4:] + [b_box]),
        t_slider,
        out,
    ]

    def values():
        v = {k: c.value for k, c in controls.items()}
        return (v.pop("model"), v.pop("T"), v.pop("B")), v

    def readout():
        a, kw = values()
        return calculator_readout(*a, **kw)

    def render():
        a, kw = values()
        return render_calculator(*a, **kw)

    return attach(box, controls, out, readout, render)
