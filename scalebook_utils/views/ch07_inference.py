"""Views for chapter 7 (inference): readouts, figures and widgets over `inference` and `serving`.

The same three layers as `training_views` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets controls to
both (``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()``, as `widgets._attach` gives them). Bad
input (an unknown model, chip or precision, a model that does not fit the slice, batch 0, a context that is too
long) gives a readable line and a message figure, never an exception.

Book ch. 7 "All About Transformer Inference" (and the two ch. 8 figures built from the same roofline):

1. decode step time against the batch, with its parts and the knee at B_crit (`step_time_widget`; ch. 7
   "Theoretical estimates for LLM latency and throughput", ch. 8 "latency_breakdown_log");
2. KV-cache memory against the batch for MHA / GQA / MQA next to the HBM (`kv_explorer`; ch. 7 "What about
   memory?" and the LLaMA 2-13B tables);
3. the latency–throughput frontier over batch and slice size (`frontier_widget`; ch. 7 "latency vs cost");
4. one slice's latency–throughput curve against the context length (`context_pareto_widget`; ch. 8 "pareto").

The chapter's static figures (attention intensity, B_crit per precision, weight-stationary sharding,
latency-bound AllGathers, speculative decoding) are in `inference_figures`.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Sequence

import ipywidgets as W
import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import CHIPS, get_chip
from scalebook_utils.core.units import format_bytes, require_number, require_positive
from scalebook_utils.views._kit import (INPUT_ERRORS, attach, emit, error_text, format_number, log_axes, message_figure)

__all__ = [
    "STEP_PREFIX", "KV_PREFIX", "FRONTIER_PREFIX", "PARETO_PREFIX", "CONTEXTS",
    "serving_chips", "slice_options", "get_plan", "step_time_curves",
    "step_time_readout", "render_step_time", "step_time_widget",
    "kv_readout", "render_kv", "kv_explorer",
    "frontier_readout", "render_frontier", "frontier_widget",
    "context_pareto_readout", "render_context_pareto", "context_pareto_widget",
    "COLORS", "format_value",
]

#: Tests, the notebook and the browser test wait for these prefixes; do not change them.
STEP_PREFIX = "decode step: "
KV_PREFIX = "KV cache: "
FRONTIER_PREFIX = "frontier: "
PARETO_PREFIX = "pareto: "

#: Context lengths the widgets offer (tokens).
CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
#: One colour per term of the step time (and the memory-/compute-bound bands), shared with `ch07_figures`.
COLORS = {"total": "black", "weights": "#1f4e9c", "kv": "#e6550d", "flops": "#31a354", "ici": "#7b3294",
          "mem": "#dceaf7", "compute": "#f4c7c3", "oom": "0.85"}


# --- small helpers ----------------------------------------------------------------------------------------


def _sig(x: float) -> str:
    """3 significant figures, never scientific notation for the sizes seen here: 8.651 → '8.65', 425.0 → '425'."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def format_value(v) -> str:
    """`format_number(v)` (8192.0 → '8192'), or repr(v) for what is not a number (a readout echoing bad input)."""
    try:
        return format_number(v)
    except (TypeError, ValueError):
        return repr(v)


def _name(x) -> str:
    return getattr(x, "name", str(x))


def _shape(shape) -> str:
    return "x".join(map(str, shape))


def _on(plan: sv.ServingPlan) -> str:
    """'tpu-v5e 4x4' for a torus slice, '8 × h100' for one axis of chips."""
    return f"{plan.chip} {_shape(plan.shape)}" if len(plan.shape) > 1 else f"{plan.n_chips} × {plan.chip}"


def _cost(tokens_per_s_per_chip: float, chip) -> str:
    if get_chip(chip).price_per_hour_usd is None or tokens_per_s_per_chip <= 0:
        return ""
    return f" (${inf.cost_per_million_tokens(tokens_per_s_per_chip, chip):.3g}/1M tokens)"


_BOUND_LABELS = {"ici": "ICI-bound", "kv": "KV-bound", "compute": "compute-bound", "weights": "weights-bound"}


def _bound(d: inf.DecodeStep) -> str:
    """`DecodeStep.bottleneck` (what sets the step time) as a label: "KV-bound", "ICI-bound", ..."""
    return _BOUND_LABELS[d.bottleneck]


def _model_options(model) -> list[tuple[str, object]]:
    """(label, value) of the model presets, the caller's model first (a name, config or `ServedModel`)."""
    first = (model, model) if isinstance(model, str) else (f"{_name(model)} (as given)", model)
    return [first, *((n, n) for n in tf.MODELS if n != model)]


def serving_chips() -> list[tuple[str, str]]:
    """(label, name) of every chip with a bf16 peak, the hourly price in the label where the book gives one."""
    out = []
    for name, c in CHIPS.items():
        if "bf16" in c.peak_flops_per_s:
            out.append((f"{name} (${c.price_per_hour_usd:g}/h)" if c.price_per_hour_usd else name, name))
    return out


def slice_options(chip="tpu-v5e") -> list[str]:
    """Slice shapes with a power-of-two chip count up to a pod (TPU) or a node (GPU): '1', '2', '2x2', '4x2', …"""
    return [_shape(sv.slice_shape(chip, n)) for n in sv.pow2_slices(chip)]


@functools.lru_cache(maxsize=512)
def _pl(x) -> str:
    """The precision of a plan or frontier with its meaning ('int8-weights (int8 weights + KV, bf16 math)')."""
    return x.precision_label or x.precision


def _plan_cached(model, chip, slice_, precision, S, max_context):
    return sv.plan_serving(model, chip, slice_, precision, S, max_context=max_context)


def get_plan(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, *,
             max_context=None) -> sv.ServingPlan:
    """`serving.plan_serving` (cached): the feasible batches 1 … B_max, B_crit and the slice shape."""
    slice_ = tuple(slice_) if isinstance(slice_, list) else slice_
    try:
        return _plan_cached(model, chip, slice_, precision, S, max_context)
    except TypeError as exc:  # an unhashable argument: compute without the cache (plan_serving validates it)
        if "unhashable" not in str(exc):
            raise
        return sv.plan_serving(model, chip, slice_, precision, S, max_context=max_context)


def _decode(plan: sv.ServingPlan, model, precision, B, *, check_memory=True) -> inf.DecodeStep:
    """The decode step of `plan`'s slice at batch B; a batch that does not fit gives a reader's message."""
    require_number("B (batch)", B, minimum=1)
    if check_memory and B > plan.B_max:
        raise ValueError(f"B={format_value(B)} does not fit: at most {plan.B_max} sequences of {plan.S:g} tokens fit "
                         f"beside the weights on {_on(plan)} in {plan.precision}")
    return inf.decode_step(model, B, plan.S, plan.chip, plan.n_chips, precision, shape=plan.shape, check_memory=False,
                           conventions="book")


@contextlib.contextmanager
def _quiet(box):
    """Control changes made inside draw nothing (the change that caused them redraws once, with final values)."""
    box.quiet = True
    try:
        yield
    finally:
        box.quiet = False




# --- (1) decode step time against the batch -----------------------------------------------------------------


def step_time_curves(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192,
                     batches: Sequence[int] | None = None, *, max_context=None) -> dict:
    """Every term of the decode step (seconds) at each batch: {"B", "weights", "kv", "flops", "ici", "total",
    "tokens" (tokens/s/chip), "plan"}. Batches past B_max are computed as if the HBM were large enough."""
    plan = get_plan(model, chip, slice_, precision, S, max_context=max_context)
    B = np.asarray(batches if batches is not None else [p.B for p in plan.points], dtype=float)
    steps = [_decode(plan, model, precision, int(b), check_memory=False) for b in B]
    get = lambda f: np.array([f(d) for d in steps])  # noqa: E731
    return {"B": B, "weights": get(lambda d: d.t_hbm_weights), "kv": get(lambda d: d.t_hbm_kv),
            "flops": get(lambda d: d.t_math), "ici": get(lambda d: d.t_ici), "total": get(lambda d: d.step_time),
            "tokens": get(lambda d: d.tokens_per_s_per_chip), "plan": plan}


def step_time_readout(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, B=32, *,
                      max_context=None) -> str:
    """``decode step: B=32 → 8.65 ms/step, 231 tokens/s/chip ($1.44/1M tokens), weights-bound (B_crit=120,
    B_max=138) | llama3-70b int8-weights on tpu-v5e 4x4, S=8192`` (`inference.decode_step` on the slice)."""
    head = f"{STEP_PREFIX}B={format_value(B)}"
    try:
        plan = get_plan(model, chip, slice_, precision, S, max_context=max_context)
        d = _decode(plan, model, precision, B)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    return (f"{head} → {_sig(d.step_time * 1e3)} ms/step, {_sig(d.tokens_per_s_per_chip)} tokens/s/chip"
            f"{_cost(d.tokens_per_s_per_chip, plan.chip)}, {_bound(d)} (B_crit={plan.B_crit:.0f}, "
            f"B_max={plan.B_max}) | {plan.model} {_pl(plan)} on {_on(plan)}, S={format_value(S)}")


def _regions(ax, lo, hi, B_crit, B_max, *, log, label=True) -> None:
    """Shade the flat (weights-bound MLP) region, the compute-bound MLP region, and batches that do not fit."""
    knee = min(max(B_crit, lo), hi)
    ax.axvspan(lo, knee, color=COLORS["mem"], lw=0, label="MLP weights-bound (flat part)" if label else None)
    if B_crit < hi:
        ax.axvspan(knee, hi, color=COLORS["compute"], alpha=0.8 if log else 0.5, lw=0,
                   label="MLP compute-bound (B > B_crit)" if label else None)
        ax.axvline(B_crit, color="#b2182b", lw=1.2, ls="--", label=f"knee: B_crit = {B_crit:.0f}" if label else None)
    if B_max < hi:
        ax.axvspan(B_max, hi, facecolor="none", edgecolor="0.5", hatch="//", lw=0,
                   label=f"KV caches do not fit (B > {B_max})" if label else None)


def render_step_time(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192,
                     B=None, *, log=False, max_context=None) -> Figure:
    """Left: step time (ms) against the batch — weight loading, KV loading, matmul FLOPs, ICI and the total
    KV + max(weights, FLOPs); the flat region and the knee at B_crit shaded. Right: tokens/s/chip against the
    batch. Linear axes: batches 1 … B_max. `log=True`: log axes up to max(B_max, 4·B_crit), past B_max hatched
    (book ch. 8 "latency_breakdown_log", the compute-bound MLP region in red)."""
    try:
        plan = get_plan(model, chip, slice_, precision, S, max_context=max_context)
        if B is not None:
            _decode(plan, model, precision, B)
        hi = max(plan.B_max, 4 * math.ceil(plan.B_crit)) if log else plan.B_max
        grid = np.geomspace(1, hi, 160) if log else np.linspace(1, hi, min(hi, 200))
        grid = np.unique(np.concatenate([np.round(grid), [plan.B_max, min(round(plan.B_crit), hi)]]))
        c = step_time_curves(model, chip, slice_, precision, S, grid, max_context=max_context)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 5.4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    x, ms = c["B"], lambda k: c[k] * 1e3
    lo = 1 if log else 0
    for ax in (ax1, ax2):
        _regions(ax, lo, x[-1], plan.B_crit, plan.B_max, log=log, label=ax is ax1)
    ax1.plot(x, ms("weights"), color=COLORS["weights"], ls="--", lw=1.6, label="weight loading P·w/(N·W_hbm)")
    ax1.plot(x, ms("kv"), color=COLORS["kv"], lw=1.6, label="KV loading B·S·KV/(N·W_hbm)")
    ax1.plot(x, ms("flops"), color=COLORS["flops"], ls="-.", lw=1.6, label="matmul FLOPs 2·B·P/(N·C)")
    if plan.n_chips > 1:
        ax1.plot(x, ms("ici"), color=COLORS["ici"], ls=":", lw=1.6, label="ICI collectives (overlapped)")
    ax1.plot(x, ms("total"), color=COLORS["total"], lw=2.6, label="step = KV + max(weights, FLOPs)")
    ax2.plot(x, c["tokens"], color=COLORS["total"], lw=2.4, label="tokens/s/chip = B/(step·N)")
    if B is not None:
        d = _decode(plan, model, precision, B)
        dot = dict(color="#d62728", ms=8, zorder=5, clip_on=False, label=f"current B = {format_value(B)}")
        ax1.plot([B], [d.step_time * 1e3], "o", **dot)
        ax2.plot([B], [d.tokens_per_s_per_chip], "o", **dot)
    for ax in (ax1, ax2):
        ax.set_xlim(lo, x[-1])
        ax.set_xlabel("batch B (sequences decoded together)")
        ax.grid(True, alpha=0.3)
        if log:
            log_axes(ax)
    if not log:
        ax1.set_ylim(0, ms("total").max() * 1.08)
        ax2.set_ylim(0, c["tokens"].max() * 1.12)
    ax1.set_ylabel("time per decode step (ms)")
    ax2.set_ylabel("throughput (tokens/s per chip)")
    ax1.set_title("step time and its parts", fontsize=10)
    ax2.set_title(f"throughput: max {_sig(c['tokens'][x <= plan.B_max].max())} tokens/s/chip at B ≤ {plan.B_max}",
                  fontsize=10)
    fig.legend(*ax1.get_legend_handles_labels(), loc="outside lower center", ncols=5, fontsize=8)
    ax2.legend(loc="upper left" if log else "lower right", fontsize=8, framealpha=0.92)
    fig.suptitle(f"{plan.model} in {_pl(plan)} on {plan.chip} {_shape(plan.shape)} ({plan.n_chips} chips), "
                 f"S = {format_value(S)} tokens of context (book ch. 7 step-time bound)", fontsize=10.5)
    return fig


def _contexts(S) -> list:
    return list(CONTEXTS) if S in CONTEXTS else sorted({*CONTEXTS, S}, key=lambda v: (not isinstance(v, int), v))


def step_time_widget(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, B=32, *,
                     log=False) -> W.VBox:
    """Model, chip, slice, precision, context S and a batch slider "B" (its end follows B_max); prints
    `step_time_readout` and draws `render_step_time`."""
    model_dd = W.Dropdown(options=_model_options(model), value=model, description="model")
    chips = serving_chips()
    chip_dd = W.Dropdown(options=chips if chip in dict(chips).values() else [(chip, chip), *chips], value=chip,
                         description="chip")
    try:
        s0 = _shape(sv.slice_shape(chip, slice_)) if isinstance(slice_, int) else str(slice_)
    except INPUT_ERRORS:
        s0 = str(slice_)  # the readout says what is wrong with it

    def slices_for(c):
        try:
            return slice_options(c)
        except INPUT_ERRORS:
            return [s0]

    opts = slices_for(chip)
    slice_dd = W.Dropdown(options=opts if s0 in opts else [s0, *opts], value=s0, description="slice")
    prec_dd = W.Dropdown(options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision,
                         description="precision")
    s_dd = W.Dropdown(options=_contexts(S), value=S, description="context S")
    b_sl = W.IntSlider(value=B, min=1, max=max(B, 1), description="B", continuous_update=False,
                       layout=W.Layout(width="70%"))
    box = W.VBox()

    def on_config(change=None):  # the slider's end follows the largest batch that fits
        if change is not None and getattr(box, "quiet", False):
            return
        try:
            b_sl.max = max(get_plan(model_dd.value, chip_dd.value, slice_dd.value, prec_dd.value, s_dd.value).B_max, 1)
        except INPUT_ERRORS:
            pass

    def on_chip(change):  # keep the chip count when the new chip offers it
        old = slice_dd.value
        n = math.prod(int(v) for v in old.split("x")) if old.replace("x", "").isdigit() else 0
        new = slices_for(change["new"])
        same = [s for s in new if math.prod(int(v) for v in s.split("x")) == n]
        with _quiet(box):  # no view of the detour through the first option
            slice_dd.options = new
            slice_dd.value = same[0] if same else new[-1]
            on_config()

    chip_dd.observe(on_chip, names="value")
    for w in (model_dd, chip_dd, slice_dd, prec_dd, s_dd):
        w.observe(on_config, names="value")
    on_config()
    b_sl.value = B

    def view(model, chip, slice_, precision, S, B):
        if getattr(box, "quiet", False):
            return
        emit(box, step_time_readout(model, chip, slice_, precision, S, B),
              lambda: render_step_time(model, chip, slice_, precision, S, B, log=log),
              key=(model, chip, slice_, precision, S))

    controls = {"model": model_dd, "chip": chip_dd, "slice_": slice_dd, "precision": prec_dd, "S": s_dd, "B": b_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([model_dd, chip_dd, slice_dd]), W.HBox([prec_dd, s_dd]), b_sl, out]
    values = lambda: tuple(w.value for w in controls.values())  # noqa: E731
    return attach(box, controls, out, lambda: step_time_readout(*values()),
                   lambda: render_step_time(*values(), log=log))


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
        line = (f"{KV_PREFIX}{cfg.name} {kind}, {p.label}, S={format_value(S)} → {format_bytes(per_token)}/token, "
                f"{format_bytes(per_token * S)} per sequence | weights {format_bytes(weights)} on "
                f"{format_value(n_chips)} × {c.name} ({format_bytes(hbm)} HBM): ")
        if weights >= hbm:
            return line + f"weights do not fit (≥ {inf.min_chips(m, c, p, pow2=False)} chips needed)"
        line += f"max batch {inf.max_batch(m, S, c, n_chips, p)}"
        if B is not None:
            d = inf.decode_step(m, B, S, c, n_chips, p, check_memory=False, conventions="book")
            fits = "fits" if d.memory_bytes <= hbm else "does not fit"
            line += (f" | B={format_value(B)}: {format_bytes(d.memory_bytes)} ({fits}), "
                     f"{_sig(d.step_time * 1e3)} ms/step, {_sig(d.tokens_per_s)} tokens/s")
        return line
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"


def render_kv(model="llama2-13b", K=None, precision="bf16", S=8192, chip="tpu-v5e", n_chips=8, *, B=None,
              B_range=(1, 256)) -> Figure:
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
            curves[k] = {"mem": np.array([d.memory_bytes for d in steps]) / 1e9,
                         "ms": np.array([d.step_time for d in steps]) * 1e3,
                         "tps": np.array([d.tokens_per_s for d in steps])}
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
    for ax, ylabel, title in zip(axes, ("memory: weights + KV caches (GB)", "time per decode step (ms)",
                                        "throughput (tokens/s, whole slice)"),
                                 ("memory vs HBM (dotted: does not fit)", "step time", "throughput")):
        log_axes(ax)
        ax.set_xlim(x[0], x[-1])
        ax.set_xlabel("batch B (sequences)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"{cfg.name} in {p.label}, S = {format_value(S)} tokens, on {format_value(n_chips)} × {c.name}: "
                 "the KV cache against the batch (book ch. 7 'What about memory?')", fontsize=10.5)
    return fig


def kv_explorer(model="llama2-13b", K=None, precision="bf16", S=8192, chip="tpu-v5e", n_chips=8, B=8) -> W.VBox:
    """Model, KV heads K (MHA … GQA … MQA), precision, context S, chips and a batch slider "B"; prints
    `kv_readout` and draws `render_kv`. Defaults to the book's 8 × v5e server."""
    model_dd = W.Dropdown(options=_model_options(model), value=model, description="model")

    def k_options(name):
        try:
            cfg = tf.get_model(name)
        except INPUT_ERRORS:
            return [("—", None)]
        if cfg.is_mla:
            return [("MLA latent", None)]
        return [(f"{_attn_kind(k, cfg.N)} K={k}" + (" (the model's)" if k == cfg.K else ""), k)
                for k in range(cfg.N, 0, -1) if cfg.N % k == 0]

    def own_k(name):
        try:
            return tf.get_model(name).K
        except INPUT_ERRORS:
            return None

    ks = k_options(model)
    k0 = K if K is not None else own_k(model)
    k_dd = W.Dropdown(options=ks, value=k0 if k0 in dict(ks).values() else ks[0][1], description="KV heads")
    prec_dd = W.Dropdown(options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision,
                         description="precision")
    s_dd = W.Dropdown(options=_contexts(S), value=S, description="context S")
    chip_dd = W.Dropdown(options=[n for _l, n in serving_chips()], value=get_chip(chip).name, description="chip")
    n_dd = W.Dropdown(options=sorted({1, 2, 4, 8, 16, 32, 64, n_chips}), value=n_chips, description="chips")
    b_sl = W.IntSlider(value=B, min=1, max=256, description="B", continuous_update=False, layout=W.Layout(width="70%"))

    box = W.VBox()

    def on_model(change):  # offer the new model's divisors of N, starting from its own K
        ks = k_options(change["new"])
        with _quiet(box):
            k_dd.options = ks
            k_dd.value = own_k(change["new"]) if own_k(change["new"]) in dict(ks).values() else ks[0][1]

    model_dd.observe(on_model, names="value")

    def view(model, K, precision, S, chip, n_chips, B):
        if getattr(box, "quiet", False):
            return
        emit(box, kv_readout(model, K, precision, S, chip, n_chips, B=B),
              lambda: render_kv(model, K, precision, S, chip, n_chips, B=B), key=(model, K, precision, S, chip, n_chips))

    controls = {"model": model_dd, "K": k_dd, "precision": prec_dd, "S": s_dd, "chip": chip_dd, "n_chips": n_dd,
                "B": b_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([model_dd, k_dd, prec_dd]), W.HBox([s_dd, chip_dd, n_dd]), b_sl, out]
    values = lambda: tuple(w.value for w in controls.values())  # noqa: E731
    return attach(box, controls, out, lambda: kv_readout(*values()[:-1], B=b_sl.value),
                   lambda: render_kv(*values()[:-1], B=b_sl.value))


# --- (3) the latency–throughput frontier over batch and slice -----------------------------------------------------


def _frontier(model, chip, precision, S, slices=None) -> sv.Frontier:
    if slices is not None:
        slices = tuple(slices)
    return _frontier_cached(model, chip, precision, S, slices)


@functools.lru_cache(maxsize=128)
def _frontier_cached(model, chip, precision, S, slices):
    return sv.frontier(model, chip, precision, S, slices=slices)


def _where(pt: sv.ServingPoint) -> str:
    return f"B={pt.B:g} on {pt.n_chips} chips, {_sig(pt.latency * 1e3)} ms/step"


def frontier_readout(model="llama3-70b", chip="tpu-v5e", precision="int8-weights", S=8192, max_latency=None, *,
                     slices=None) -> str:
    """``frontier: llama3-70b int8-weights on tpu-v5e, S=8192, 8–256 chips → max 425 tokens/s/chip (B=128 on 64
    chips, 4.71 ms/step) ($0.784/1M tokens) | min latency 2.56 ms/step (B=45 on 64 chips) | 8 Pareto points``,
    then with `max_latency` (seconds) the best point under it. Book ch. 7 "latency vs cost" figure."""
    head = f"{FRONTIER_PREFIX}{_name(model)}"
    try:
        f = _frontier(model, chip, precision, S, slices)
        if max_latency is not None:
            require_positive(max_latency=max_latency)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    top, fast = sv.fastest_of_best(f.pareto), f.pareto[0]
    n = [pl.n_chips for pl in f.plans]
    line = (f"{FRONTIER_PREFIX}{f.model} {_pl(f)} on {f.chip}, S={format_value(S)}, {min(n)}–{max(n)} chips → max "
            f"{_sig(top.tokens_per_s_per_chip)} tokens/s/chip ({_where(top)}){_cost(top.tokens_per_s_per_chip, f.chip)}"
            f" | min latency {_sig(fast.latency * 1e3)} ms/step (B={fast.B:g} on {fast.n_chips} chips) | "
            f"{len(f.pareto)} Pareto points")
    if max_latency is not None:
        best = sv.best_under(f.points, max_latency)
        cap = f"under {_sig(max_latency * 1e3)} ms"
        line += (f" | {cap}: {_sig(best.tokens_per_s_per_chip)} tokens/s/chip ({_where(best)})" if best
                 else f" | {cap}: nothing (the fastest step is {_sig(fast.latency * 1e3)} ms)")
    return line


def render_frontier(model="llama3-70b", chip="tpu-v5e", precision="int8-weights", S=8192, *, slices=None,
                    max_latency=None, compare_precisions=False) -> Figure:
    """Latency (ms/step, x) against tokens/s/chip (y), log-log: every (batch, slice) point coloured by slice,
    the Pareto line, an optional latency cap with the best point under it, and with `compare_precisions` the
    Pareto line of bf16 (or of int8-weights when `precision` is bf16; pass precision names or `Precision`s to
    choose). Book ch. 7 figure "latency vs cost" (ESTI): int8 weights move the frontier."""
    try:
        f = _frontier(model, chip, precision, S, slices)
        others = []
        if compare_precisions:
            names = ([compare_precisions] if isinstance(compare_precisions, (str, inf.Precision)) else
                     compare_precisions if not isinstance(compare_precisions, bool) else
                     ["int8-weights" if f.precision == "bf16" else "bf16"])
            others = [_frontier(model, chip, q, S, slices) for q in names]
        if max_latency is not None:
            require_positive(max_latency=max_latency)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(9.5, 5.4), layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["viridis"]
    for i, pl in enumerate(f.plans):
        col = cmap(i / max(len(f.plans) - 1, 1))
        ax.scatter([p.latency * 1e3 for p in pl.points], [p.tokens_per_s_per_chip for p in pl.points], s=14,
                   color=col, alpha=0.8, label=f"{pl.n_chips} chips ({_shape(pl.shape)})", zorder=3)
    ax.plot([p.latency * 1e3 for p in f.pareto], [p.tokens_per_s_per_chip for p in f.pareto], color="black", lw=2,
            drawstyle="steps-post", label=f"Pareto frontier, {_pl(f)}", zorder=4)
    for o, ls in zip(others, ("--", ":", "-.")):
        ax.plot([p.latency * 1e3 for p in o.pareto], [p.tokens_per_s_per_chip for p in o.pareto], color="#d62728",
                lw=1.8, ls=ls, drawstyle="steps-post", label=f"Pareto frontier, {_pl(o)}", zorder=4)
    if max_latency is not None:
        ax.axvline(max_latency * 1e3, color="#d62728", lw=1.2, ls="--",
                   label=f"latency cap {_sig(max_latency * 1e3)} ms")
        best = sv.best_under(f.points, max_latency)
        if best:
            ax.plot([best.latency * 1e3], [best.tokens_per_s_per_chip], "*", color="#d62728", ms=16, zorder=6,
                    label=f"best under the cap: {_where(best)}")
    log_axes(ax, fine=True)
    lat = [p.latency * 1e3 for p in f.points]
    ax.set_xlim(min(lat) / 1.35, max(lat) * 1.2)
    ax.set_xlabel("latency: time per decode step, i.e. per token of each sequence (ms)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    vs = f"\nPareto lines: {f.precision} (black) vs {', '.join(o.precision for o in others)} (red)" if others else ""
    ax.set_title(f"{f.model} on {f.chip}, S = {format_value(S)}: every batch on every power-of-two slice in "
                 f"{f.precision}{vs}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right", framealpha=0.92, ncols=2)
    return fig


_CAPS = [("none", None), ("2 ms", 2e-3), ("5 ms", 5e-3), ("10 ms", 1e-2), ("20 ms", 2e-2), ("50 ms", 5e-2)]


def frontier_widget(model="llama3-70b", chip="tpu-v5e", precision="int8-weights", S=8192, max_latency=None, *,
                    compare_precisions=False) -> W.VBox:
    """Model, chip, precision, context S, a latency cap and "compare with bf16"; prints `frontier_readout`."""
    model_dd = W.Dropdown(options=_model_options(model), value=model, description="model")
    chip_dd = W.Dropdown(options=serving_chips(), value=get_chip(chip).name, description="chip")
    prec_dd = W.Dropdown(options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision,
                         description="precision")
    s_dd = W.Dropdown(options=_contexts(S), value=S, description="context S")
    caps = _CAPS if max_latency in dict(_CAPS).values() else [*_CAPS, (f"{_sig(max_latency * 1e3)} ms", max_latency)]
    cap_dd = W.Dropdown(options=caps, value=max_latency, description="latency cap")
    cmp_cb = W.Checkbox(value=bool(compare_precisions), description="compare precisions")
    box = W.VBox()

    def view(model, chip, precision, S, cap, compare):
        emit(box, frontier_readout(model, chip, precision, S, cap),
              lambda: render_frontier(model, chip, precision, S, max_latency=cap, compare_precisions=compare),
              key=(model, chip, precision, cap, compare))

    controls = {"model": model_dd, "chip": chip_dd, "precision": prec_dd, "S": s_dd, "cap": cap_dd, "compare": cmp_cb}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([model_dd, chip_dd, prec_dd]), W.HBox([s_dd, cap_dd, cmp_cb]), out]
    v = lambda: tuple(w.value for w in controls.values())  # noqa: E731
    return attach(box, controls, out, lambda: frontier_readout(*v()[:5]),
                   lambda: render_frontier(*v()[:4], max_latency=v()[4], compare_precisions=v()[5]))


# --- (4) one slice, several contexts: the ch. 8 "pareto" figure --------------------------------------------------


def context_pareto_readout(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights",
                           S=8192) -> str:
    """``pareto: S=8192 → B=1…138: 5.48–20.3 ms/step, up to 425 tokens/s/chip | 2× the minimum latency buys 27×
    the throughput of B=1 | llama3-70b int8-weights on tpu-v5e 4x4`` (book ch. 8 "pareto" figure)."""
    head = f"{PARETO_PREFIX}S={format_value(S)}"
    try:
        plan = get_plan(model, chip, slice_, precision, S)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    lo, top = plan.min_latency, sv.fastest_of_best(plan.points)
    twice = sv.best_under(plan.points, 2 * lo.latency)
    return (f"{head} → B=1…{plan.B_max}: {_sig(lo.latency * 1e3)}–{_sig(plan.points[-1].latency * 1e3)} ms/step, "
            f"up to {_sig(top.tokens_per_s_per_chip)} tokens/s/chip | 2× the minimum latency buys "
            f"{_sig(twice.tokens_per_s_per_chip / lo.tokens_per_s_per_chip)}× the throughput of B=1 | "
            f"{plan.model} {_pl(plan)} on {_on(plan)}")


def render_context_pareto(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, *,
                          contexts: Sequence[int] = CONTEXTS) -> Figure:
    """Latency (ms/step) against tokens/s/chip over the feasible batches of one slice, one curve per context
    length (faint), the selected S bold with its ends and B_crit marked. Book ch. 8 "pareto" figure."""
    try:
        plan = get_plan(model, chip, slice_, precision, S)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(9.5, 5.2), layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["plasma"]
    skipped = []
    for i, s in enumerate(sorted({*contexts, S})):
        try:
            pl = get_plan(model, chip, slice_, precision, s)
        except INPUT_ERRORS:
            skipped.append(format_value(s))
            continue
        sel = s == S
        ms = [p.latency * 1e3 for p in pl.points]
        tps = [p.tokens_per_s_per_chip for p in pl.points]
        ax.plot(ms, tps, color="black" if sel else cmap(0.85 * i / max(len(contexts), 1)), lw=3 if sel else 1.4,
                alpha=1 if sel else 0.6, marker="o" if sel else None, ms=3.5,
                label=f"S = {format_value(s)}: B ≤ {pl.B_max}" + (" (selected)" if sel else ""), zorder=4 if sel else 2)
    for pt, txt in ((plan.points[0], "B=1"), (plan.points[-1], f"B={plan.B_max}")):
        ax.annotate(txt, (pt.latency * 1e3, pt.tokens_per_s_per_chip), xytext=(6, -12), textcoords="offset points",
                    fontsize=8.5)
    if plan.B_crit <= plan.B_max:
        d = _decode(plan, model, precision, math.ceil(plan.B_crit))
        ax.plot([d.step_time * 1e3], [d.tokens_per_s_per_chip], "D", color="#d62728", ms=7, zorder=5,
                label=f"B_crit = {plan.B_crit:.0f} (MLP turns compute-bound)")
    ax.set_xlabel("latency: time per decode step (ms)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    note = f"; did not fit: S = {', '.join(skipped)}" if skipped else ""
    ax.set_title(f"{plan.model} {_pl(plan)} on {plan.chip} {_shape(plan.shape)}: the batch sweeps each curve"
                 f"{note}", fontsize=10)
    ax.set_xlim(0, None)
    ax.set_ylim(0, None)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.92)
    return fig


def context_pareto_widget(model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights",
                          S=8192) -> W.VBox:
    """A context-length slider "S" and a precision selector; prints `context_pareto_readout`."""
    s_sl = W.SelectionSlider(options=_contexts(S), value=S, description="S", continuous_update=False,
                             layout=W.Layout(width="70%"))
    prec_dd = W.Dropdown(options=list(dict.fromkeys([precision, *inf.PRECISIONS])), value=precision,
                         description="precision")
    box = W.VBox()

    def view(S, precision):
        emit(box, context_pareto_readout(model, chip, slice_, precision, S),
              lambda: render_context_pareto(model, chip, slice_, precision, S), key=(precision,))

    controls = {"S": s_sl, "precision": prec_dd}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([s_sl, prec_dd]), out]
    return attach(box, controls, out, lambda: context_pareto_readout(model, chip, slice_, prec_dd.value, s_sl.value),
                   lambda: render_context_pareto(model, chip, slice_, prec_dd.value, s_sl.value))
