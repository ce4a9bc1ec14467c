"""Views for chapter 4 (Transformer math), the accounting: readouts, figures and widgets over `transformer`.

The same three layers as `widgets` and `training_views` (DESIGN §3): a pure *readout* returning one
deterministic line with a fixed prefix (tests and the browser test wait for it), a *render* function returning
a matplotlib Figure, and a *builder* wiring ipywidgets controls to both (``.controls``, ``.readout()``,
``.last_readout``, ``.snapshot()``, as `_kit.attach` gives them). Bad input (K not dividing N, a zero size,
an unknown chip) gives a readable line and a message figure, never an exception.

Book ch. 4 "All the Transformer Math You Need to Know":

1. `calculator_widget` — parameters by component, training FLOPs per token with and without attention,
   the 6·P·tokens rule, KV bytes per token, for a preset or a custom model ("Transformer Accounting",
   "Global FLOPs and Params Calculation", "General rule of thumb for Transformer FLOPs");
2. `render_remat` — memory against FLOPs (84 TB / 4.2 TB, 6 → 8 · P; "Gradient checkpointing");
3. `render_kv_cache` — KV cache against context length for MHA/GQA/MQA, bf16 and int8 (8 GiB;
   "Key-Value (KV) caching");
4. `render_moe_critical_batch` — the MoE critical batch 120·E/k (DeepSeek: 3840; ch4.q8;
   "Sparsity and Mixture-of-Experts"); it lives in `ch04_moe` and is re-exported here.

The attention views of the chapter (attention's share of the FLOPs, its arithmetic intensity, flash attention
step by step) are in `attention_views`; the plumbing both use (`INPUT_ERRORS` … `live_output`) is `views._kit`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.units import format_count, format_si
from scalebook_utils.views._kit import (  # noqa: F401 - PALETTE … static_png: re-exported (`transformer_views.X` stays)
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
from scalebook_utils.views.ch04_moe import MOE_PREFIX, moe_coefficient, moe_readout, render_moe_critical_batch

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
    "kv_cache_bytes",
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

#: The browser test and the notebook wait for these prefixes; do not change them.
CALC_PREFIX = "calculator: "
REMAT_PREFIX = "remat: "
KV_PREFIX = "KV cache: "

#: The calculator's model choice that takes the sizes from the boxes as they are.
CUSTOM = "custom"
_FIELDS = ("D", "F", "N", "K", "H", "L", "V")
_FLAGS = {"gated": "gated_mlp", "tied": "tied_embeddings"}
#: What bad input raises; every readout and render catches these and says what went wrong instead.
#: The book's gradient-checkpointing example: B·T = 4M tokens, L = 64, D = 8192 (F, N, H, V are not given in the
#: book and matter only for the FLOPs bars; an MHA model with F = 4D and NH = D).
REMAT_EXAMPLE = tf.TransformerConfig(
    "book-remat-example",
    L=64,
    D=8192,
    F=4 * 8192,
    N=64,
    K=64,
    H=128,
    V=32_000,
    source="book ch. 4 'Gradient checkpointing' (BT = 4M, L = 64, D = 8192; F = 4D, NH = D, V chosen)",
)
#: The book's KV-cache example: S = 8192, L = 64, K·H = N·H = D = 8192 → 8 GiB in int8.
KV_EXAMPLE = {"L": 64, "N": 64, "H": 128}


# --- small helpers (shared with `attention_views`) --------------------------------------------------------


def format_binary_bytes(n: float) -> str:
    """Bytes with binary prefixes (KV caches are quoted that way): 327680 → '320 KiB', 2**33 → '8 GiB'."""
    for scale, unit in ((2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


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


def calculator_config(model: str | tf.TransformerConfig = "llama3-70b", **sizes) -> tf.TransformerConfig:
    """A preset (`transformer.MODELS`) with some sizes replaced, or `CUSTOM` built from the sizes alone.

    sizes: any of D, F, N, K, H, L, V (positive ints), gated (bool), tied (bool); None leaves the preset's
    value. The name says what changed: ``llama3-70b``, ``llama3-70b with K=1``, ``custom``. A preset keeps
    what the boxes cannot express (MoE experts, MLA). Raises ValueError for an invalid combination (the
    message of `TransformerConfig`, e.g. K not dividing N, or a size ≤ 0).
    """
    unknown = set(sizes) - set(_FIELDS) - set(_FLAGS)
    if unknown:
        raise ValueError(f"unknown size(s) {', '.join(sorted(unknown))}; known: {', '.join(_FIELDS + tuple(_FLAGS))}")
    given = {(_FLAGS.get(k, k)): v for k, v in sizes.items() if v is not None}
    if isinstance(model, str) and model.strip().lower() == CUSTOM:
        missing = [f for f in _FIELDS if f not in given]
        if missing:
            raise ValueError(f"a custom model needs every size; missing {', '.join(missing)}")
        return tf.TransformerConfig(CUSTOM, **given, source="calculator: custom sizes")
    base = tf.get_model(model)
    changed = {k: v for k, v in given.items() if getattr(base, k) != v}
    if not changed:
        return base
    label = ", ".join(
        f"{k}={v}" if k in _FIELDS else f"{'gated' if k == 'gated_mlp' else 'tied'}={v}" for k, v in changed.items()
    )
    return dataclasses.replace(base, name=f"{base.name} with {label}", **changed)


def calculator_numbers(cfg: tf.TransformerConfig, T: float = 4096, B: float = 1) -> dict:
    """Everything the calculator shows, per token unless stated (book ch. 4 summary table).

    params (ParamCount); P = activated params (= total for a dense model); six_p = 6·P (the rule of thumb);
    train_matmul = 6·matmul_params (attention projections, active MLP, unembedding; no embedding lookup,
    no norms); train_attention = 12·T·N·H·L (dot-product attention, self-attention S = T, no causal
    saving); train = their sum (`transformer.training_flops_per_token`); step = B·T·train; the FLOPs split
    by component (training, per token); kv_bf16 / kv_int8 = KV-cache bytes per token.
    """
    if not (isinstance(B, (int, float)) and not isinstance(B, bool) and B >= 1):
        raise ValueError(f"B must be a batch of ≥ 1 sequences, got {B!r}")
    if not (isinstance(T, (int, float)) and not isinstance(T, bool) and T >= 1):
        raise ValueError(f"T must be a sequence of ≥ 1 tokens, got {T!r}")
    pc = tf.param_count(cfg)
    train = tf.training_flops_per_token(cfg, T)
    attention = 3 * tf.attention_flops(cfg, 1, T)
    parts = {
        "QKVO projections": 3 * tf.projection_flops(cfg, 1),
        "MLP": 3 * tf.mlp_flops(cfg, 1),
        "unembedding": 6 * cfg.D * cfg.V,
        "dot-product attention": attention,
    }
    return {
        "params": pc,
        "P": pc.activated,
        "six_p": 6 * pc.activated,
        "train_matmul": train - attention,
        "train_attention": attention,
        "train": train,
        "step": B * T * train,
        "flops_parts": parts,
        "kv_bf16": tf.kv_cache_bytes_per_token(cfg, "bf16"),
        "kv_int8": tf.kv_cache_bytes_per_token(cfg, "int8"),
    }


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


def calculator_widget(model: str = "llama3-70b", T: int = 4096, B: int = 1) -> W.VBox:
    """A model dropdown (the presets and "custom"), boxes D, F, N, K, H, L, V, gated and tied checkboxes, a batch
    box B and a log slider T (128 … 1M tokens); prints `calculator_readout` and draws `render_calculator`.

    Choosing a preset fills the boxes (one redraw); editing a box shows "<preset> with K=…"; "custom" uses the
    boxes as they are. Any value may be typed, also a zero or a K that does not divide N: the readout says why
    the model is invalid.
    """
    presets = list(tf.MODELS)
    start = tf.get_model(model)
    model_dd = W.Dropdown(options=presets + [CUSTOM], value=start.name, description="model")
    boxes = {f: W.IntText(value=getattr(start, f), description=f, layout=W.Layout(width="170px")) for f in _FIELDS}
    gated_cb = W.Checkbox(value=start.gated_mlp, description="gated MLP", indent=False)
    tied_cb = W.Checkbox(value=start.tied_embeddings, description="tied embeddings", indent=False)
    b_box = W.IntText(value=int(B), description="B", layout=W.Layout(width="170px"))
    t_slider = W.FloatLogSlider(
        value=float(T),
        base=2,
        min=7,
        max=20,
        step=1,
        description="T",
        readout_format=",.0f",
        continuous_update=False,
        layout=W.Layout(width="60%"),
    )
    box = W.VBox()

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
        W.HBox([model_dd, gated_cb, tied_cb]),
        W.HBox(fields[:4]),
        W.HBox(fields[4:] + [b_box]),
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


# --- (2) gradient checkpointing -----------------------------------------------------------------------------

_POLICY_LABELS = {"none": "save everything", "big_matmuls": "save the big matmul outputs", "block": "block remat"}


def remat_rows(cfg: tf.TransformerConfig = REMAT_EXAMPLE, tokens: float = 4e6, seq_len: float = 4096) -> list[dict]:
    """Per policy ("none", "big_matmuls", "block"): the book's tensors of D per token and layer
    (`REMAT_TENSORS_PER_LAYER`: 20 / 7 / 1), their bf16 bytes for `tokens` tokens (2·n·BT·D·L), the same at the
    tensors' true widths (`activation_bytes`; differs for "big_matmuls", whose F-wide outputs are 4D each), and
    training FLOPs per token in units of matmul params: matmuls 6, attention 12·S·N·H·L/P, recompute
    (`remat_recompute_flops_per_token`), total."""
    P = tf.matmul_params(cfg)
    attn = 3 * tf.attention_flops(cfg, 1, seq_len) / P
    rows = []
    for policy, n in tf.REMAT_TENSORS_PER_LAYER.items():
        recompute = tf.remat_recompute_flops_per_token(cfg, seq_len, policy) / P
        rows.append(
            {
                "policy": policy,
                "tensors": n,
                "bytes": 2.0 * n * tokens * cfg.D * cfg.L,
                "bytes_true": tf.activation_bytes(cfg, tokens, policy),
                "true_tensors": tf.activation_elements_per_token_per_layer(cfg, policy) / cfg.D,
                "matmul": 6.0,
                "attention": attn,
                "recompute": recompute,
                "multiple": tf.training_flops_per_token(cfg, seq_len, remat=policy) / P,
            }
        )
    return rows


def remat_readout(cfg: tf.TransformerConfig = REMAT_EXAMPLE, tokens: float = 4e6, seq_len: float = 4096) -> str:
    """``remat: BT=4M tokens, L=64, D=8192, T=4096 → save everything 20·D: 84 TB, 6.37·P | save the big matmul
    outputs ~7·D: 29 TB (13·D at true widths: 55 TB), 6.50·P | block remat 1·D: 4.2 TB, 8.50·P`` (memory in bf16
    with the book's tensor counts, and the true-width count where it differs; FLOPs per token / matmul params)."""
    try:
        rows = remat_rows(cfg, tokens, seq_len)
    except INPUT_ERRORS as exc:
        return f"{REMAT_PREFIX}{getattr(cfg, 'name', cfg)} → cannot evaluate: {error_text(exc)}"

    def true_width(r):  # the book's "≈ 7 tensors" are 13·D wide when F = 4D (the figure's hatched bar)
        if math.isclose(r["bytes_true"], r["bytes"]):
            return ""
        return f" ({r['true_tensors']:.3g}·D at true widths: {format_si(r['bytes_true'], 'B', 2)})"

    parts = [
        f"{_POLICY_LABELS[r['policy']]} {'~' if r['policy'] == 'big_matmuls' else ''}{r['tensors']}·D: "
        f"{format_si(r['bytes'], 'B', 2)}{true_width(r)}, {r['multiple']:.2f}·P"
        for r in rows
    ]
    return (
        f"{REMAT_PREFIX}BT={format_si(tokens, digits=3).replace(' ', '')} tokens, L={cfg.L}, D={cfg.D}, "
        f"T={format_number(seq_len)} → " + " | ".join(parts)
    )


def render_remat(cfg: tf.TransformerConfig = REMAT_EXAMPLE, tokens: float = 4e6, seq_len: float = 4096) -> Figure:
    """Left: activation memory (TB, bf16) per policy with the book's tensor counts (the true-width count of
    "big matmuls" as an outline). Right: training FLOPs per token / matmul params, stacked: 6 (forward +
    backward matmuls), attention, recompute; the book's 6 and 8 as lines."""
    try:
        rows = remat_rows(cfg, tokens, seq_len)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(11.5, 4.4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    x = np.arange(len(rows))
    labels = [
        f"{_POLICY_LABELS[r['policy']]}\n({'≈' if r['policy'] == 'big_matmuls' else ''}{r['tensors']}·D per "
        f"token-layer)"
        for r in rows
    ]
    tb = np.array([r["bytes"] for r in rows]) / 1e12
    true_tb = np.array([r["bytes_true"] for r in rows]) / 1e12
    ax1.bar(x, tb, width=0.6, color=[PALETTE[4], PALETTE[1], PALETTE[2]])
    handles = [Patch(color="0.55", label="book's count: n tensors of D per token and layer")]
    diff = ~np.isclose(true_tb, tb)
    if diff.any():
        ax1.bar(x[diff], true_tb[diff], width=0.6, fill=False, hatch="//", edgecolor="0.35", lw=1)
        handles.append(
            Patch(
                fill=False,
                hatch="//",
                edgecolor="0.35",
                label=f"at true widths (F-wide outputs count F/D = {cfg.F / cfg.D:g} each)",
            )
        )
        for xi in x[diff]:
            ax1.text(
                xi,
                true_tb[xi],
                f"{true_tb[xi]:.3g} TB ({rows[xi]['true_tensors']:.0f}·D)",
                ha="center",
                va="bottom",
                fontsize=8,
                color="0.3",
            )
    for xi, v in zip(x, tb):
        inside = bool(diff[xi])  # under a true-width outline: label inside the bar
        ax1.text(
            xi,
            v / 2 if inside else v,
            f"{v:.3g} TB",
            ha="center",
            va="center" if inside else "bottom",
            fontsize=9,
            fontweight="bold",
            color="white" if inside else "black",
        )
    ax1.set_xticks(x, labels, fontsize=8)
    ax1.set_ylim(0, max(tb.max(), true_tb.max()) * 1.15)
    ax1.set_ylabel("saved activations (TB, bf16)")
    ax1.set_xlabel("checkpointing policy (what the forward pass keeps)")
    ax1.set_title(
        f"memory: 2·n·BT·D·L bytes, BT = {format_si(tokens, digits=3)}, L = {cfg.L}, D = {cfg.D:,}", fontsize=10
    )
    ax1.grid(True, axis="y", alpha=0.3)
    ax1.legend(handles=handles, loc="upper right", fontsize=8)

    bottom = np.zeros(len(rows))
    attn_label = f"dot-product attention (12·T·N·H·L, T = {format_number(seq_len)})"
    for key, color, label in (
        ("matmul", PALETTE[0], "matmuls forward + backward (6·P)"),
        ("attention", "#9ecae1", attn_label),
        ("recompute", PALETTE[4], "recomputed in the backward pass"),
    ):
        v = np.array([r[key] for r in rows])
        ax2.bar(x, v, bottom=bottom, width=0.6, color=color, label=label)
        bottom += v
    for xi, t in zip(x, bottom):
        ax2.text(xi, t + 0.08, f"{t:.2f}·P", ha="center", va="bottom", fontsize=9)
    for y in (6, 8):
        ax2.axhline(y, color="0.25", lw=1, ls=":")
    ax2.plot([], [], ls=":", color="0.25", label="the book's 6·P and 8·P per token")
    ax2.set_xticks(x, labels, fontsize=8)
    ax2.set_ylim(0, bottom.max() * 1.35)
    ax2.set_ylabel("training FLOPs per token / matmul params P")
    ax2.set_xlabel("checkpointing policy (what the forward pass keeps)")
    ax2.set_title("compute: block remat reruns the forward pass (+2·P)", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend(loc="upper left", fontsize=8)
    fig.suptitle("Gradient checkpointing trades memory for FLOPs (book ch. 4)", fontsize=10)
    return fig


# --- (3) KV cache -------------------------------------------------------------------------------------------

_ATTN_KIND = {1: "MQA"}


def _kv_label(K: int, N: int) -> str:
    return "MHA" if K == N else _ATTN_KIND.get(K, "GQA")


def kv_cache_bytes(
    S: float,
    K: int,
    *,
    L: int = KV_EXAMPLE["L"],
    N: int = KV_EXAMPLE["N"],
    H: int = KV_EXAMPLE["H"],
    dtype: str = "int8",
) -> float:
    """KV-cache bytes of one sequence of S tokens: S · 2·L·K·H · bytes(dtype) (`kv_cache_bytes_per_token`)."""
    cfg = tf.TransformerConfig("kv", L=L, D=N * H, F=1, N=N, K=K, H=H, V=1)
    if not S >= 1:
        raise ValueError(f"S must be ≥ 1 token, got {S!r}")
    return S * tf.kv_cache_bytes_per_token(cfg, dtype)


def kv_readout(
    S: float = 8192,
    Ks: Sequence[int] = (64, 8, 1),
    *,
    L: int = KV_EXAMPLE["L"],
    N: int = KV_EXAMPLE["N"],
    H: int = KV_EXAMPLE["H"],
) -> str:
    """``KV cache: S=8192, L=64, N·H=8192 → MHA (K=64) 8 GiB int8, 16 GiB bf16 | GQA (K=8) 1 GiB int8, … | MQA …``."""
    head = f"{KV_PREFIX}S={format_number(S) if isinstance(S, (int, float)) else S}, L={L}, N·H={N * H}"
    try:
        parts = [
            f"{_kv_label(K, N)} (K={K}) {format_binary_bytes(kv_cache_bytes(S, K, L=L, N=N, H=H))} int8, "
            f"{format_binary_bytes(kv_cache_bytes(S, K, L=L, N=N, H=H, dtype='bf16'))} bf16"
            for K in Ks
        ]
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    return f"{head} → " + " | ".join(parts)


def render_kv_cache(
    Ks: Sequence[int] = (64, 8, 1),
    *,
    L: int = KV_EXAMPLE["L"],
    N: int = KV_EXAMPLE["N"],
    H: int = KV_EXAMPLE["H"],
    S_range: tuple[float, float] = (512, 2**20),
    S_mark: float = 8192,
    chips: Sequence[str] = ("tpu-v5e", "h100"),
    ax=None,
) -> Figure:
    """Log-log KV-cache bytes of one sequence against S for each K (colour) in bf16 (solid) and int8 (dashed),
    the book's 8 GiB example (S = 8192, MHA, int8) marked, and the HBM of `chips` as horizontal lines."""
    try:
        lo, hi = S_range
        if not 1 <= lo < hi:
            raise ValueError(f"S_range must be 1 ≤ lo < hi, got {S_range}")
        S = np.logspace(math.log10(lo), math.log10(hi), 100)
        curves = {(K, d): S * kv_cache_bytes(1, K, L=L, N=N, H=H, dtype=d) for K in Ks for d in ("bf16", "int8")}
        specs = [get_chip(c) for c in chips]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((9.0, 5.2), ax)
    for i, K in enumerate(Ks):
        c = PALETTE[i % len(PALETTE)]
        ax.plot(S, curves[(K, "bf16")], color=c, lw=2, label=f"{_kv_label(K, N)} K = {K}, bf16")
        ax.plot(S, curves[(K, "int8")], color=c, lw=1.6, ls="--", label=f"{_kv_label(K, N)} K = {K}, int8")
    for spec in specs:
        ax.axhline(spec.hbm_bytes, color="0.45", lw=1, ls=":")
        ax.text(
            lo * 1.1,
            spec.hbm_bytes * 1.08,
            f"{spec.name} HBM ({format_si(spec.hbm_bytes, 'B', 3)})",
            fontsize=7.5,
            ha="left",
            va="bottom",
            color="0.35",
        )
    if N in Ks and lo <= S_mark <= hi:
        v = kv_cache_bytes(S_mark, N, L=L, N=N, H=H)
        ax.plot([S_mark], [v], "o", color="black", ms=7, zorder=6)
        note = (
            f"book: S = {format_number(S_mark)}, L = {L}, KH = {N * H:,}\n2·S·L·K·H = {format_binary_bytes(v)} (int8)"
        )
        ax.annotate(
            note,
            (S_mark, v),
            xytext=(25, -55),
            textcoords="offset points",
            fontsize=8,
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.6", "alpha": 0.95},
            arrowprops={"arrowstyle": "->", "color": "0.3"},
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v / 1024:.0f}k" if v >= 1024 else f"{v:.0f}"))
    ax.yaxis.set_major_locator(LogLocator(base=2, numticks=30))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda v, _p: format_binary_bytes(v) if v > 0 and round(math.log2(v)) % 2 == 0 else "")
    )
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("context length S (tokens, one sequence)")
    ax.set_ylabel("KV cache (bytes; 2·S·L·K·H × bytes per value)")
    ax.set_title(f"KV cache per sequence: L = {L}, N = {N}, H = {H} (MHA: K = N; GQA: K < N; MQA: K = 1)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2, framealpha=0.9)
    return fig
