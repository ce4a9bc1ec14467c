"""Chapter 7 views, (2) KV-cache memory against the batch for MHA / GQA / MQA next to the HBM: `kv_readout`,
`render_kv` and the `kv_explorer` widget (book ch. 7 "What about memory?" and the LLaMA 2-13B tables).
Re-exported by `ch07_inference` (`inference_views`).
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.units import format_bytes, require_number
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, log_axes, message_figure
from scalebook_utils.views.ch07_common import KV_PREFIX, format_value, serving_chips
from scalebook_utils.views.ch07_common import contexts as _contexts
from scalebook_utils.views.ch07_common import model_name as _name
from scalebook_utils.views.ch07_common import model_options as _model_options
from scalebook_utils.views.ch07_common import quiet as _quiet
from scalebook_utils.views.ch07_common import sig as _sig

__all__ = ["kv_readout", "render_kv", "kv_explorer"]


# --- (2) KV cache memory: MHA, GQA, MQA ---------------------------------------------------------------------


def _kv_model(model, K) -> tuple[tf.TransformerConfig, int, inf.ServedModel]:
    """(config, K, served model with 2·L·K·H KV elements per token). The weights stay the model's (the book's
    GQA table keeps LLaMA 2-13B's 26 GB and shrinks only the cache)."""
    cfg = tf.get_model(model)
    if cfg.is_mla:
        if K is not None:
            raise ValueError(f"{cfg.name} uses latent attention (MLA): its cache has no K to choose")
        return cfg, cfg.K, inf.served_model(cfg)
    K = cfg.K if K is None else K
    require_number("K (KV heads)", K, minimum=1)
    if K > cfg.N or cfg.N % K:
        raise ValueError(f"K (KV heads) must divide N = {cfg.N} query heads; got K={format_value(K)}")
    return cfg, int(K), inf.served_model(cfg, kv_elements_per_token=2 * cfg.L * int(K) * cfg.H)


def _attn_kind(K: int, N: int) -> str:
    return "MHA" if K == N else "MQA" if K == 1 else "GQA"


def kv_readout(model="llama2-13b", K=None, precision="bf16", S=8192, chip="tpu-v5e", n_chips=1, *, B=None) -> str:
    """``KV cache: llama2-13b MHA (K=40 of N=40), bf16, S=8192 → 819 kB/token, 6.71 GB per sequence | weights
    26 GB on 8 × tpu-v5e (128 GB HBM): max batch 15`` (or "weights do not fit"); with B, the memory and the
    book's step time of that batch. Book ch. 7 "What about memory?"."""
    head = f"{KV_PREFIX}{_name(model)}"
    try:
        cfg, K, m = _kv_model(model, K)
        p, c = inf.get_precision(precision), get_chip(chip)
        require_number("S (context)", S, minimum=1)
        require_number("n_chips", n_chips, minimum=1)
        per_token = m.kv_bytes_per_token(p)
        hbm, weights = n_chips * c.hbm_bytes, m.weight_bytes(p)
        kind = "MLA latent cache" if cfg.is_mla else f"{_attn_kind(K, cfg.N)} (K={K} of N={cfg.N})"
        line = (
            f"{KV_PREFIX}{cfg.name} {kind}, {p.label}, S={format_value(S)} → {format_bytes(per_token)}/token, "
            f"{format_bytes(per_token * S)} per sequence | weights {format_bytes(weights)} on "
            f"{format_value(n_chips)} × {c.name} ({format_bytes(hbm)} HBM): "
        )
        if weights >= hbm:
            return line + f"weights do not fit (≥ {inf.min_chips(m, c, p, pow2=False)} chips needed)"
        line += f"max batch {inf.max_batch(m, S, c, n_chips, p)}"
        if B is not None:
            d = inf.decode_step(m, B, S, c, n_chips, p, check_memory=False, conventions="book")
            fits = "fits" if d.memory_bytes <= hbm else "does not fit"
            line += (
                f" | B={format_value(B)}: {format_bytes(d.memory_bytes)} ({fits}), "
                f"{_sig(d.step_time * 1e3)} ms/step, {_sig(d.tokens_per_s)} tokens/s"
            )
        return line
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"


def render_kv(
    model="llama2-13b", K=None, precision="bf16", S=8192, chip="tpu-v5e", n_chips=8, *, B=None, B_range=(1, 256)
) -> Figure:
    """Three log-scale panels against the batch: memory (weights + KV caches) with the HBM line, step time and
    throughput (whole slice), for the chosen K and, faint, MHA (K = N), the book's GQA K = 8 (when 8 divides N) and
    MQA (K = 1). Dotted where the caches
    do not fit. Book ch. 7, the LLaMA 2-13B tables (8 × v5e, 8192 tokens: MHA fits B ≤ 15, GQA K=8 B ≤ 75)."""
    try:
        cfg, K, m0 = _kv_model(model, K)
        p, c = inf.get_precision(precision), get_chip(chip)
        require_number("S (context)", S, minimum=1)
        require_number("n_chips", n_chips, minimum=1)
        hbm = n_chips * c.hbm_bytes
        if m0.weight_bytes(p) >= hbm:
            raise ValueError(f"weights do not fit: {format_bytes(m0.weight_bytes(p))} > {format_bytes(hbm)} of HBM")
        x = np.unique(np.round(np.geomspace(B_range[0], B_range[1], 120)))
        book_gqa = [8] if cfg.N % 8 == 0 and cfg.N > 8 else []  # the book's LLaMA 2-13B table: 1:5 GQA, K = 8
        variants = dict.fromkeys([K] if cfg.is_mla else [K, cfg.N, *book_gqa, 1])
        curves = {}
        for k in variants:
            m = _kv_model(cfg, None if cfg.is_mla else k)[2]
            steps = [inf.decode_step(m, b, S, c, n_chips, p, check_memory=False, conventions="book") for b in x]
            curves[k] = {
                "mem": np.array([d.memory_bytes for d in steps]) / 1e9,
                "ms": np.array([d.step_time for d in steps]) * 1e3,
                "tps": np.array([d.tokens_per_s for d in steps]),
            }
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(13.5, 4.4), layout="constrained")
    axes = fig.subplots(1, 3)
    colors = {1: "#31a354", 8: "#7b3294", cfg.N: "#e6550d", K: "#1f4e9c"}
    for k, cv in curves.items():
        fits = cv["mem"] <= hbm / 1e9
        main = k == K
        label = "MLA" if cfg.is_mla else f"{_attn_kind(k, cfg.N)} K={k}" + (" (chosen)" if main else "")
        for ax, key in zip(axes, ("mem", "ms", "tps")):
            style = dict(color=colors.get(k, "0.4"), lw=2.6 if main else 1.3, alpha=1 if main else 0.6)
            ax.plot(x[fits], cv[key][fits], label=label, **style)
            ax.plot(x[~fits], cv[key][~fits], ls=":", **style)
    axes[0].axhline(hbm / 1e9, color="#d62728", lw=1.5, ls="--", label=f"HBM {format_bytes(hbm)}")
    axes[0].axhline(m0.weight_bytes(p) / 1e9, color="0.4", lw=1, ls="-.", label="weights alone")
    if B is not None:
        d = inf.decode_step(m0, B, S, c, n_chips, p, check_memory=False, conventions="book")
        for ax, v in zip(axes, (d.memory_bytes / 1e9, d.step_time * 1e3, d.tokens_per_s)):
            ax.plot([B], [v], "o", color="#d62728", ms=7, zorder=5)
    for ax, ylabel, title in zip(
        axes,
        ("memory: weights + KV caches (GB)", "time per decode step (ms)", "throughput (tokens/s, whole slice)"),
        ("memory vs HBM (dotted: does not fit)", "step time", "throughput"),
    ):
        log_axes(ax)
        ax.set_xlim(x[0], x[-1])
        ax.set_xlabel("batch B (sequences)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(
        f"{cfg.name} in {p.label}, S = {format_value(S)} tokens, on {format_value(n_chips)} × {c.name}: "
        "the KV cache against the batch (book ch. 7 'What about memory?')",
        fontsize=10.5,
    )
    return fig


def kv_explorer(model="llama2-13b", K=None, precision="bf16", S=8192, chip="tpu-v5e", n_chips=8, B=8) -> widgets.VBox:
    """Model, KV heads K (MHA … GQA … MQA), precision, context S, chips and a batch slider "B"; prints
    `kv_readout` and draws `render_kv`. Defaults to the book's 8 × v5e server."""
    model_dd = widgets.Dropdown(options=_model_options(model), value=model, description="model")

    def k_options(name):
        try:
            cfg = tf.get_model(name)
        except INPUT_ERRORS:
            return [("—", None)]
        if cfg.is_mla:
            return [("MLA latent", None)]
        return [
            (f"{_attn_kind(k, cfg.N)} K={k}" + (" (the model's)" if k == cfg.K else ""), k)
            for k in range(cfg.N, 0, -1)
            if cfg.N % k == 0
        ]

    def own_k(name):
        try:
            return tf.get_model(name).K
        except INPUT_ERRORS:
            return None

    ks = k_options(model)
    k0 = K if K is not None else own_k(model)
    k_dd = widgets.Dropdown(options=ks, value=k0 if k0 in dict(ks).values() else ks[0][1], description="KV heads")
    prec_dd = widgets.Dropdown(
        options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision, description="precision"
    )
    s_dd = widgets.Dropdown(options=_contexts(S), value=S, description="context S")
    chip_dd = widgets.Dropdown(options=[n for _l, n in serving_chips()], value=get_chip(chip).name, description="chip")
    n_dd = widgets.Dropdown(options=sorted({1, 2, 4, 8, 16, 32, 64, n_chips}), value=n_chips, description="chips")
    b_sl = widgets.IntSlider(
        value=B, min=1, max=256, description="B", continuous_update=False, layout=widgets.Layout(width="70%")
    )

    box = widgets.VBox()

    def on_model(change):  # offer the new model's divisors of N, starting from its own K
        ks = k_options(change["new"])
        with _quiet(box):
            k_dd.options = ks
            k_dd.value = own_k(change["new"]) if own_k(change["new"]) in dict(ks).values() else ks[0][1]

    model_dd.observe(on_model, names="value")

    def view(model, K, precision, S, chip, n_chips, B):
        if getattr(box, "quiet", False):
            return
        emit(
            box,
            kv_readout(model, K, precision, S, chip, n_chips, B=B),
            lambda: render_kv(model, K, precision, S, chip, n_chips, B=B),
            key=(model, K, precision, S, chip, n_chips),
        )

    controls = {
        "model": model_dd,
        "K": k_dd,
        "precision": prec_dd,
        "S": s_dd,
        "chip": chip_dd,
        "n_chips": n_dd,
        "B": b_sl,
    }
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([model_dd, k_dd, prec_dd]), widgets.HBox([s_dd, chip_dd, n_dd]), b_sl, out]
    values = lambda: tuple(w.value for w in controls.values())  # noqa: E731
    return attach(
        box,
        controls,
        out,
        lambda: kv_readout(*values()[:-1], B=b_sl.value),
        lambda: render_kv(*values()[:-1], B=b_sl.value),
    )
