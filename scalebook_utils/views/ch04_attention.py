"""Views for chapter 4 (Transformer math), attention: readouts, figures and widgets over `transformer` and
`tinymodel`.

The same three layers as `transformer_views` (DESIGN §3): a pure *readout* returning one deterministic line with
a fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets controls to
both (``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()``, as `_kit.attach` gives them). Bad
input (an unknown model or chip, a step past the last chunk) gives a readable line and a message figure, never an
exception. The helpers (`INPUT_ERRORS`, `PALETTE`, `live_output`, …) are `views._kit`'s.

Book ch. 4 "All the Transformer Math You Need to Know":

1. `render_attention_share` — attention / matmul FLOPs against T: T/(8D), and ch4.q5's 2D crossover
   ("Fractional cost of attention with context length");
2. `intensity_widget` — attention arithmetic intensity, prefill and decode, against a chip (Question 4);
3. `flash_widget` — flash attention step by step for one query row ("Appendix A: how does flash attention
   work?"; imports JAX lazily, through `tinymodel`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import CHIPS, get_chip
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

__all__ = [
    "SHARE_PREFIX",
    "INTENSITY_PREFIX",
    "FLASH_PREFIX",
    "attention_share_readout",
    "render_attention_share",
    "intensity_chips",
    "prefill_threshold",
    "intensity_readout",
    "render_attention_intensity",
    "intensity_widget",
    "flash_inputs",
    "flash_readout",
    "render_flash",
    "flash_widget",
    "static_png",
]

#: Tests and the notebook match these prefixes; do not change them.
SHARE_PREFIX = "attention share: "
INTENSITY_PREFIX = "attention intensity: "
FLASH_PREFIX = "flash attention: "


# --- (1) attention's share of the FLOPs against T ----------------------------------------------------------


def _mha(D: int, H: int = 128) -> tf.TransformerConfig:
    """One MHA layer with F = 4D and N·H = D: the book's setting for T/(8D)."""
    return tf.TransformerConfig(
        f"mha-D{D}", L=1, D=D, F=4 * D, N=max(D // H, 1), K=max(D // H, 1), H=H if D >= H else D, V=1
    )


def _share_crossover(cfg: tf.TransformerConfig) -> float:
    """T at which attention FLOPs equal the layers' matmul FLOPs (the ratio is linear in T)."""
    return 1.0 / tf.attention_to_matmul_flops_ratio(cfg, 1)


def attention_share_readout(model: str | tf.TransformerConfig = "llama3-70b", T: float = 4096) -> str:
    """``attention share: llama3-70b at T=4096 → attention / layer matmuls 0.078 | = 1 at T≈52,224 | = QKVO
    projections at T≈9216 (ch4.q5) | MHA, F=4D, D=8192: T/(8D), 1 at 8D = 65,536``.

    The ratio is `transformer.attention_to_matmul_flops_ratio`: per layer, so the unembedding is not in the
    denominator (self-attention, no causal saving). The calculator's "+7.7%" for the same model and T divides
    by all matmuls, unembedding included, hence a little less. The last part is the book's idealised model
    of the same D.
    """
    name = model.name if isinstance(model, tf.TransformerConfig) else str(model)
    try:
        cfg = tf.get_model(model)
        r = tf.attention_to_matmul_flops_ratio(cfg, T)
        cross, proj = _share_crossover(cfg), tf.attention_projection_crossover(cfg)
    except INPUT_ERRORS as exc:
        return f"{SHARE_PREFIX}{name} at T={T} → cannot evaluate: {error_text(exc)}"
    return (
        f"{SHARE_PREFIX}{cfg.name} at T={format_number(T)} → attention / layer matmuls {r:.3g} | "
        f"= 1 at T≈{cross:,.0f} | = QKVO projections at T≈{proj:,.0f} (ch4.q5) | MHA, F=4D, D={cfg.D}: T/(8D), 1 at 8D = {8 * cfg.D:,}"
    )


def render_attention_share(
    Ds: Sequence[int] = (2048, 4096, 8192, 16384),
    model: str | None = "llama3-70b",
    *,
    T_range: tuple[float, float] = (256, 2**20),
    ax=None,
) -> Figure:
    """Log-log attention / matmul FLOPs against T for MHA layers with F = 4D (T/(8D)), one line per D, plus
    `model` dashed. Circles: T = 8D (attention = MLP + projections); triangles: T = 2D (attention = QKVO
    projections, ch4.q5). Book ch. 4 "Fractional cost of attention with context length"."""
    try:
        cfgs = [_mha(int(D)) for D in Ds]
        mcfg = tf.get_model(model) if model else None
        lo, hi = T_range
        if not 1 <= lo < hi:
            raise ValueError(f"T_range must be 1 ≤ lo < hi, got {T_range}")
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((9.0, 5.2), ax)
    Ts = np.logspace(math.log10(lo), math.log10(hi), 200)
    for i, cfg in enumerate(cfgs):
        c = PALETTE[i % len(PALETTE)]
        r = np.array([tf.attention_to_matmul_flops_ratio(cfg, t) for t in Ts])
        ax.plot(Ts, r, color=c, lw=2, label=f"D = {cfg.D:,} (MHA, F = 4D): 8D = {8 * cfg.D:,}, 2D = {2 * cfg.D:,}")
        for t, mk in ((8 * cfg.D, "o"), (2 * cfg.D, "^")):
            if lo <= t <= hi:
                ax.plot([t], [tf.attention_to_matmul_flops_ratio(cfg, t)], mk, color=c, ms=7, mec="white", zorder=5)
    if mcfg is not None:
        r = np.array([tf.attention_to_matmul_flops_ratio(mcfg, t) for t in Ts])
        x1 = _share_crossover(mcfg)
        ax.plot(
            Ts,
            r,
            color="black",
            lw=1.6,
            ls="--",
            label=f"{mcfg.name} (D = {mcfg.D:,}, F = {mcfg.F:,}, GQA K = {mcfg.K}): = 1 at T ≈ {x1:,.0f} (■)",
        )
        if lo <= x1 <= hi:
            ax.plot([x1], [1], "s", color="black", ms=6, zorder=6)
    ax.axhline(1.0, color="0.3", lw=1)
    ax.text(lo * 1.1, 1.08, "attention = all matmuls (MLP + projections)", fontsize=8, va="bottom", color="0.3")
    ax.plot([], [], "o", color="0.4", mec="white", ms=7, label="T = 8D: attention FLOPs = matmul FLOPs")
    ax.plot([], [], "^", color="0.4", mec="white", ms=7, label="T = 2D (ch4.q5): attention = QKVO projections")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v / 1024:.0f}k" if v >= 1024 else f"{v:.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.set_xlabel("sequence length T (tokens, log scale)")
    ax.set_ylabel("attention FLOPs / matmul FLOPs (per layer)")
    ax.set_title(
        "Attention's share of the FLOPs grows linearly with T: 12BT²NH / (18BTDF + 24BTDNH) = T/(8D) "
        "when F = 4D, NH = D",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    return fig


# --- (2) attention arithmetic intensity (ch4.q4) ----------------------------------------------------------


def intensity_chips() -> list[str]:
    """Chips with a bf16 matmul peak (the ones whose critical intensity ch4.q4 compares against)."""
    return [n for n, c in CHIPS.items() if "bf16" in c.peak_flops_per_s]


def prefill_threshold(alpha: float, G: float) -> float:
    """Smallest T with T·G/(G + 1) ≥ α: T = α(G + 1)/G (480 for MHA on v5e, → α for large G)."""
    return alpha * (G + 1) / G


def _decode_threshold(alpha: float, G: float) -> float:
    """Smallest S with S·G/(S + G) ≥ α, or inf (decode intensity < G, so never when G ≤ α)."""
    return math.inf if G <= alpha else alpha * G / (G - alpha)


def intensity_readout(chip: str = "tpu-v5e", Gs: Sequence[int] = (1, 4, 8, 16)) -> str:
    """``attention intensity: tpu-v5e, critical 240 FLOPs/byte (bf16) → prefill (S=T) compute-bound for T > 480
    (G=1), 300 (G=4), 270 (G=8), 255 (G=16) | decode (T=1): intensity < G ≤ 16 → memory-bound at any S``."""
    try:
        spec = get_chip(chip)
        a = spec.critical_intensity("bf16")
        Gs = [int(g) for g in Gs]
        if not Gs or min(Gs) < 1:
            raise ValueError(f"G must be positive integers, got {Gs}")
    except INPUT_ERRORS as exc:
        return f"{INTENSITY_PREFIX}{chip} → cannot evaluate: {error_text(exc)}"
    pre = ", ".join(f"{prefill_threshold(a, g):,.0f} (G={g})" for g in Gs)
    dec = {g: _decode_threshold(a, g) for g in Gs}
    if all(math.isinf(s) for s in dec.values()):
        tail = f"intensity < G ≤ {max(Gs)} → memory-bound at any S"
    else:
        tail = ", ".join(f"G={g}: S > {s:,.0f}" if math.isfinite(s) else f"G={g}: never" for g, s in dec.items())
    return (
        f"{INTENSITY_PREFIX}{spec.name}, critical {a:.0f} FLOPs/byte (bf16) → prefill (S=T) compute-bound for "
        f"T > {pre} | decode (T=1): {tail}"
    )


@functools.lru_cache(maxsize=32)
def _intensity_curves(g: int, lo: float, hi: float):
    """(x, prefill S = T, decode T = 1) intensities on 300 log-spaced lengths (chip-independent, so cached)."""
    x = np.logspace(math.log10(lo), math.log10(hi), 300)
    out = (
        x,
        np.array([tf.attention_intensity(t, t, g) for t in x]),
        np.array([tf.attention_intensity(1, t, g) for t in x]),
    )
    for arr in out:
        arr.flags.writeable = False
    return out


def render_attention_intensity(
    chip: str = "tpu-v5e", Gs: Sequence[int] = (1, 4, 8, 16), *, T_range: tuple[float, float] = (16, 2**17)
) -> Figure:
    """Two log-log panels against the chip's critical intensity (bf16): prefill/training (S = T),
    T·G/(G + 1), with each G's threshold marked; generation (T = 1), S·G/(S + G) < G. Book ch4.q4."""
    try:
        spec = get_chip(chip)
        a = spec.critical_intensity("bf16")
        Gs = [int(g) for g in Gs]
        lo, hi = T_range
        if not Gs or min(Gs) < 1 or not 1 <= lo < hi:
            raise ValueError(f"need G ≥ 1 and 1 ≤ lo < hi; got G={Gs}, range {T_range}")
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(11.5, 4.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    for i, g in enumerate(Gs):
        c = PALETTE[i % len(PALETTE)]
        x, prefill, decode = _intensity_curves(g, float(lo), float(hi))
        ax1.plot(x, prefill, color=c, lw=2, label=f"G = {g}: TG/(G+1)")
        t0 = prefill_threshold(a, g)
        if lo <= t0 <= hi:
            ax1.plot([t0], [a], "o", color=c, ms=6, mec="white", zorder=5)
        ax2.plot(x, decode, color=c, lw=2, label=f"G = {g}: SG/(S+G) → {g}")
    ymax = hi * 1.5
    for ax in (ax1, ax2):
        ax.axhline(a, color="#d62728", lw=1.5, ls="--", label=f"{spec.name} critical intensity {a:.0f} FLOPs/byte")
        ax.axhspan(a, ymax, color="#54a24b", alpha=0.07, lw=0)
        ax.axhspan(0.3, a, color="#e45756", alpha=0.06, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(0.3, ymax)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v / 1024:.0f}k" if v >= 1024 else f"{v:.0f}"))
        ax.yaxis.set_major_formatter(plain_formatter())
        ax.grid(True, which="major", alpha=0.3)
        ax.text(lo * 1.15, a * 1.15, "compute-bound ↑", fontsize=8, va="bottom")
        ax.text(lo * 1.15, a / 1.15, "memory-bound ↓", fontsize=8, va="top")
    ax1.plot([], [], "o", color="0.4", mec="white", label="threshold T = α(G+1)/G")
    ax1.set_xlabel("sequence length T = S (tokens)")
    ax1.set_ylabel("arithmetic intensity (FLOPs / byte, bf16)")
    ax1.set_title(
        f"prefill / training (S = T): compute-bound for T > {prefill_threshold(a, 1):,.0f} (MHA)", fontsize=10
    )
    ax1.legend(loc="lower right", fontsize=8, framealpha=0.9)
    ax2.set_xlabel("context length S (tokens), one new query (T = 1)")
    ax2.set_ylabel("FLOPs / byte (same axis)")
    ax2.set_title("generation (T = 1): intensity < G" + (", memory-bound" if max(Gs) <= a else ""), fontsize=10)
    ax2.legend(loc="upper right", fontsize=8, framealpha=0.9)
    fig.suptitle(
        "Attention arithmetic intensity, one KV head and its G query heads (book ch. 4, Question 4)", fontsize=10
    )
    return fig


def intensity_widget(chip: str = "tpu-v5e", Gs: Sequence[int] = (1, 4, 8, 16)) -> widgets.VBox:
    """A chip dropdown; prints `intensity_readout` and draws `render_attention_intensity`."""
    chip_dd = widgets.Dropdown(options=intensity_chips(), value=get_chip(chip).name, description="chip")
    box = widgets.VBox()

    def view(chip):
        emit(box, intensity_readout(chip, Gs), lambda: render_attention_intensity(chip, Gs), key=tuple(Gs))

    controls = {"chip": chip_dd}
    out = widgets.interactive_output(view, controls)
    box.children = [chip_dd, out]
    return attach(
        box,
        controls,
        out,
        lambda: intensity_readout(chip_dd.value, Gs),
        lambda: render_attention_intensity(chip_dd.value, Gs),
    )


# --- (3) flash attention, step by step ----------------------------------------------------------------------


def flash_inputs(S: int = 64, H: int = 16, seed: int = 0, q_scale: float = 2.0):
    """Seeded (q_row[H], k[S, H], v[S, H]) in float64; q is scaled by `q_scale` so the softmax is peaked
    enough for the running max to move."""
    if not (isinstance(S, int) and isinstance(H, int) and S >= 1 and H >= 1):
        raise ValueError(f"S and H must be positive integers, got S={S!r}, H={H!r}")
    rng = np.random.default_rng(seed)
    return q_scale * rng.standard_normal(H), rng.standard_normal((S, H)), rng.standard_normal((S, H))


def _flash(chunk: int, S: int, H: int, seed: int):
    from scalebook_utils.lab import tinymodel as tm  # JAX only when a flash view is asked for

    q, k, v = flash_inputs(S, H, seed)
    steps = tm.flash_steps(q, k, v, chunk)
    return q, k, v, steps, tm.softmax_row


def _flash_state(chunk, S, H, seed, step):
    q, k, v, steps, softmax_row = _flash(chunk, S, H, seed)
    n = len(steps)
    j = n if step is None else int(step)
    if not 1 <= j <= n:
        raise ValueError(f"step must be 1 … {n} (S={S} keys in chunks of {chunk}), got {step!r}")
    full = softmax_row(q, k, v)
    errs = [float(np.max(np.abs(s.output - full))) for s in steps]
    prefix = [float(np.max(np.abs(s.output - softmax_row(q, k[: s.keys[1]], v[: s.keys[1]])))) for s in steps]
    return q, k, v, steps, j, full, errs, prefix


def flash_readout(step: int | None = None, chunk: int = 16, S: int = 64, H: int = 16, seed: int = 0) -> str:
    """``flash attention: S=64, chunk=16, step=2/4 (keys 16–31) → M=…, L=… | max|O/L − softmax(q·Kᵀ/√H)·V| = …
    | vs keys 0–31 only: 4.4e-16`` (step None: the last chunk, where the first distance is ≈ 1e-16 too)."""
    head = f"{FLASH_PREFIX}S={S}, chunk={chunk}"
    try:
        _q, _k, _v, steps, j, _full, errs, prefix = _flash_state(chunk, S, H, seed, step)
    except INPUT_ERRORS as exc:
        return f"{head}, step={step} → cannot evaluate: {error_text(exc)}"
    s = steps[j - 1]
    a, b = s.keys
    return (
        f"{head}, step={j}/{len(steps)} (keys {a}–{b - 1}) → M={s.M:.4f}, L={s.L:.4f} | "
        f"max|O/L − softmax(q·Kᵀ/√H)·V| = {errs[j - 1]:.2g} | "
        f"vs keys 0–{b - 1} only: {prefix[j - 1]:.2g}"
    )


def _padded(values, margin: float = 0.05) -> tuple[float, float]:
    """(lo, hi) of `values` widened by `margin` of their span on each side (matplotlib's default autoscale)."""
    lo, hi = float(np.min(values)), float(np.max(values))
    pad = margin * (hi - lo) if hi > lo else max(abs(hi), 1.0) * margin
    return lo - pad, hi + pad


def render_flash(
    step: int | None = None, chunk: int = 16, S: int = 64, H: int = 16, seed: int = 0, dims: int = 4
) -> Figure:
    """Four panels for one query row: (a) scores q·k/√H per key, chunks merged so far and the running max M;
    (b) the running denominator L (rescaled at each new max) against the naive Σ exp(s − max s);
    (c) the first `dims` components of O/L against the naive softmax output; (d) max |O/L − naive| per step
    (log scale), against all keys and against the keys seen so far."""
    try:
        q, k, v, steps, j, full, errs, prefix = _flash_state(chunk, S, H, seed, step)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(11.5, 6.4), layout="constrained")
    (ax1, ax2), (ax3, ax4) = fig.subplots(2, 2)
    scores = k @ q / math.sqrt(H)
    n = len(steps)
    idx = np.arange(S)
    seen = idx < steps[j - 1].keys[1]
    cur = (idx >= steps[j - 1].keys[0]) & seen
    ax1.plot(idx[~seen], scores[~seen], "o", color="0.75", ms=4, label="keys not read yet")
    ax1.plot(idx[seen & ~cur], scores[seen & ~cur], "o", color=PALETTE[0], ms=4, label="earlier chunks (merged)")
    ax1.plot(idx[cur], scores[cur], "o", color=PALETTE[1], ms=5, label=f"chunk {j} (this step)")
    xs = [s.keys[0] for s in steps[:j]] + [steps[j - 1].keys[1]]
    ms = [s.M for s in steps[:j]]
    ax1.stairs(ms, np.array(xs) - 0.5, color=PALETTE[4], lw=2, baseline=None, label="running max M")
    ax1.axhline(scores.max(), color=PALETTE[4], lw=1, ls=":", label=f"max over all keys = {scores.max():.2f}")
    for s in steps[1:]:
        ax1.axvline(s.keys[0] - 0.5, color="0.85", lw=0.8, zorder=0)
    ax1.set_xlim(-1, S)
    span = scores.max() - scores.min()
    ax1.set_ylim(scores.min() - 0.55 * span, scores.max() + 0.12 * span)  # room for the legend below the dots
    ax1.set_xlabel("key index")
    ax1.set_ylabel("score q·k / √H")
    ax1.set_title(f"(a) scores, chunks of {chunk} keys: step {j} of {n}", fontsize=10)
    ax1.legend(loc="lower left", fontsize=7, ncol=2, framealpha=0.9)

    x = np.arange(1, n + 1)
    naive_L = float(np.exp(scores - scores.max()).sum())
    ax2.plot(x[:j], [s.L for s in steps[:j]], "o-", color=PALETTE[0], lw=2, label="running L = Σ exp(s − M)")
    ax2.axhline(naive_L, color="black", ls="--", lw=1, label=f"naive Σ exp(s − max s) = {naive_L:.3f}")
    ax2.set_xlim(0.5, n + 0.5)
    ax2.set_ylim(*_padded([s.L for s in steps] + [naive_L]))  # every step's range: the slider only moves data
    ax2.set_xticks(x)
    ax2.set_xlabel("chunks merged")
    ax2.set_ylabel("denominator L")
    ax2.set_title("(b) running denominator (rescaled by exp(M_old − M_new))", fontsize=10)
    ax2.legend(loc="lower right", fontsize=8)

    for d in range(min(dims, H)):
        c = PALETTE[d % len(PALETTE)]
        ax3.plot(x[:j], [s.output[d] for s in steps[:j]], "o-", color=c, lw=1.8, label=f"(O/L)[{d}]")
        ax3.axhline(full[d], color=c, ls="--", lw=1)
    ax3.plot([], [], "--", color="0.3", label="naive softmax(q·Kᵀ/√H)·V")
    ax3.set_xlim(0.5, n + 0.5)
    ax3.set_ylim(*_padded([s.output[d] for s in steps for d in range(min(dims, H))] + list(full[: min(dims, H)])))
    ax3.set_xticks(x)
    ax3.set_xlabel("chunks merged")
    ax3.set_ylabel("output component")
    ax3.set_title(f"(c) output O/L, first {min(dims, H)} of H = {H} components", fontsize=10)
    ax3.legend(loc="best", fontsize=7, ncol=2)

    floor = 1e-17
    ax4.semilogy(x[:j], np.maximum(errs[:j], floor), "o-", color=PALETTE[4], lw=2, label="vs softmax over all keys")
    ax4.semilogy(
        x[:j],
        np.maximum(prefix[:j], floor),
        "s--",
        color=PALETTE[2],
        lw=1.5,
        label="vs softmax over the keys seen so far",
    )
    ax4.axhline(np.finfo(np.float64).eps, color="0.5", lw=1, ls=":", label="float64 epsilon")
    ax4.set_xlim(0.5, n + 0.5)
    ax4.set_ylim(floor / 2, 10)
    ax4.set_xticks(x)
    ax4.set_xlabel("chunks merged")
    ax4.set_ylabel("max |O/L − naive| (log)")
    ax4.set_title(f"(d) distance to the naive result: {errs[j - 1]:.1e} after step {j}", fontsize=10)
    ax4.legend(loc="center left", fontsize=8)
    fig.suptitle(f"Flash attention for one query (S = {S}, H = {H}): merge (M, L, O) chunk by chunk", fontsize=10)
    return fig


def flash_widget(chunk: int = 16, S: int = 64, H: int = 16, seed: int = 0) -> widgets.VBox:
    """A "chunk" size dropdown and a "step" slider (chunks merged so far); prints `flash_readout`, draws
    `render_flash`. Changing the chunk size resets the slider to the last step."""
    sizes = sorted({4, 8, 16, 32, int(chunk)})
    chunk_dd = widgets.Dropdown(options=sizes, value=int(chunk), description="chunk")
    n = -(-S // chunk)
    step_sl = widgets.IntSlider(value=n, min=1, max=n, description="step", continuous_update=False)
    box = widgets.VBox()

    def view(chunk, step):
        emit(box, flash_readout(step, chunk, S, H, seed), lambda: render_flash(step, chunk, S, H, seed), key=(chunk,))

    controls = {"chunk": chunk_dd, "step": step_sl}

    def on_chunk(change):
        m = -(-S // change["new"])
        step_sl.max = max(m, step_sl.min)
        step_sl.value = m

    out = live_output(controls, view, {"chunk": on_chunk})
    box.children = [widgets.HBox([chunk_dd, step_sl]), out]
    return attach(
        box,
        controls,
        out,
        lambda: flash_readout(step_sl.value, chunk_dd.value, S, H, seed),
        lambda: render_flash(step_sl.value, chunk_dd.value, S, H, seed),
    )
