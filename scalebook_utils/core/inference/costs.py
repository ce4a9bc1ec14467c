"""Inference cost model: prefill vs decode, step-time bounds with KV loads, max batch, quantization, TP limits
in decode, 2D weight-stationary sharding, latency-bound collectives, disaggregation, cost (book ch. 7 and 8).

Notation (book ch. 7): B batch (sequences; one new token each per decode step), S context length (keys in the
KV cache), T prompt length (prefill), D d_model, F d_ff, L layers, K KV heads, H head dim, P parameters.
N_chips ("n_chips") is the model-parallel degree (Y in ch. 7 "Distributing Inference": every chip holds 1/Y of
the weights and of the KV caches; no data parallelism, no FSDP in decode). C = peak FLOPs/s per chip in the
compute dtype, W_hbm = HBM bytes/s per chip, W_ici = bidirectional bandwidth of one ICI axis (2 × one-way link,
9e10 B/s on TPU v5e), α_hbm = C/W_hbm, β = W_hbm/W_ici. Everything is SI: seconds, bytes, FLOPs, FLOPs/s.

The decode step is the book's roofline (ch. 7 "Theoretical estimates for LLM latency and throughput"):

    step = B·S·KV/(N·W_hbm)  +  max(2·B·P/(N·C), P·w/(N·W_hbm))
           [attention: always bandwidth-bound]  [MLP/projections: may be compute-bound]

i.e. a *sum* of the attention term and a *max* for the parameter matmuls, exactly as the book writes it; the
ICI term of model parallelism is compared by max (assumed to overlap, as ch. 7 does when it asks whether
"T_ICI > T_HBM"). Like the book we load every parameter on every step (true for a dense model, and for an MoE
once B·k ≥ E), count matmul FLOPs with the activated parameters, and ignore activations in HBM.

Conventions (`conventions=` on `decode_step`, `prefill_time`, `speculative_step`): "practice" (the default)
differs from the book in three places, and conventions="book" reproduces the book's numbers:

- the input embedding is a gather: a step reads the tokens' rows, not the V·D table, and costs no 2·V·D
  FLOPs per token (the unembedding stays a matmul; with tied embeddings the table is read for it anyway).
  The book streams and multiplies all P parameters (2·P·T for prefill);
- prefill has its communication term (`inference_comms.tp_comm`, the decode rule at B·T tokens) and counts
  causal attention FLOPs by default; the book's ch. 8 prefill is 2·P·T/(N·C·MFU) alone;
- GPUs run their TP collectives as NCCL does: 2 AllReduces per layer with NCCL's latency, not overlapped (the
  book's TPU rule, overlapped and without latency on a GPU, under "book"). Both conventions move a GPU group
  larger than a node at the inter-node bandwidth (ch. 12's fat-tree rule) or refuse it with the reason.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.errors import UnknownNameError
from scalebook_utils.core.inference.comms import CONVENTIONS, TPComm, check_conventions, tp_comm
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import require_int, require_positive

CH7 = "book ch. 7 'All About Transformer Inference'"
CH8 = "book ch. 8 'Serving LLaMA 3-70B on TPUs'"


# --- precision modes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    """How weights and the KV cache are stored and in which dtype the matmuls run (book ch. 7, "Tricks":
    quantization; ch. 8 "Thinking about throughput").

    weight_bytes / kv_bytes: bytes per stored element; compute_dtype: the MXU dtype (selects the chip's peak);
    activation_bytes: bytes per activation element (what TP collectives move): 2 for bf16 compute, 1 for int8/fp8.
    """

    name: str
    weight_bytes: float
    kv_bytes: float
    compute_dtype: str
    activation_bytes: float

    def __post_init__(self):
        require_positive(weight_bytes=self.weight_bytes, kv_bytes=self.kv_bytes,
                         activation_bytes=self.activation_bytes)

    @property
    def meaning(self) -> str:
        """What the name stands for, from the fields: 'int8 weights + KV, bf16 math' (see `PRECISIONS`)."""
        math_ = self.compute_dtype
        w, kv = (_STORED.get((b, math_), _STORED.get((b, None), f"{b:g}-byte")) for b in (self.weight_bytes, self.kv_bytes))
        return f"{w} weights + KV, {math_} math" if w == kv else f"{w} weights, {kv} KV, {math_} math"

    @property
    def label(self) -> str:
        """The name with its meaning, as every readout and figure title prints it:
        'int8-weights (int8 weights + KV, bf16 math)' vs 'int8 (int8 weights + KV, int8 math)'."""
        return f"{self.name} ({self.meaning})"


#: Stored dtype for (bytes per element, compute dtype); (bytes, None) is the default for that size.
_STORED = {(2.0, None): "bf16", (1.0, None): "int8", (1.0, "fp8"): "fp8", (0.5, None): "int4", (4.0, None): "fp32"}


#: The modes the book uses — one vocabulary for every chapter, exercise and readout (each readout prints
#: `Precision.label`, the name with its meaning). "int8-weights" and "int4-weights" quantize the weights and the
#: KV cache and run the matmuls in bf16 (what book ch. 8 calls "int8": int8 params and KV, bf16 FLOPs);
#: "int8" also runs the matmuls in int8 (twice the peak on a v5e). Build a `Precision` for other mixes.
PRECISIONS: dict[str, Precision] = {p.name: p for p in (
    Precision("bf16", 2.0, 2.0, "bf16", 2.0),            # bf16 weights, KV and compute
    Precision("int8-weights", 1.0, 1.0, "bf16", 2.0),    # int8 weights and KV, bf16 FLOPs (B_crit halves)
    Precision("int8", 1.0, 1.0, "int8", 1.0),            # int8 weights, KV, activations and OPs
    Precision("int4-weights", 0.5, 0.5, "bf16", 2.0),    # int4 weights and KV, bf16 FLOPs
    Precision("fp8", 1.0, 1.0, "fp8", 1.0),              # GPUs: fp8 everything
)}


def precision_label(precision: str | Precision) -> str:
    """`get_precision(precision).label`: 'int8-weights (int8 weights + KV, bf16 math)'."""
    return get_precision(precision).label


def get_precision(precision: str | Precision) -> Precision:
    """Look up a precision mode by name; raises UnknownNameError listing the allowed names."""
    if isinstance(precision, Precision):
        return precision
    key = str(precision).strip().lower()
    if key not in PRECISIONS:
        raise UnknownNameError(f"unknown precision {precision!r}; allowed precisions: {', '.join(PRECISIONS)} "
                               "(or pass a Precision)")
    return PRECISIONS[key]


def critical_batch(chip="tpu-v5e", precision: str | Precision = "bf16") -> float:
    """Token batch above which weight-streaming matmuls are compute-bound: B_crit = β·α_hbm.

    FLOPs 2·B·D·F at C (compute dtype) against weight bytes D·F·w at W_hbm: B_crit = (C/W_hbm)·w/2, i.e. the
    book's β·α_hbm with β = bits per weight / bits per bf16 activation scaled by the compute peak. TPU v5e:
    bf16 240, int8 weights + bf16 FLOPs 120, int8 × int8 240 (400 TOPs/s), int4 weights 60. Units: tokens.

    Book ch. 7 "Linear operations: what bottlenecks us?"; ch. 8 in-text question 4.
    """
    c, p = get_chip(chip), get_precision(precision)
    return c.critical_intensity(p.compute_dtype) * p.weight_bytes / 2


# --- the served model -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ServedModel:
    """The numbers of a model that the inference roofline needs.

    params: parameters stored (all loaded from HBM each step); active_params: parameters each token multiplies
    (matmul FLOPs per token = 2·active_params); kv_elements_per_token: 2·L·K·H (×bytes per element = KV bytes per
    token); attn_flops_per_key: decode attention FLOPs per token per cached key (4·N·H·L); D, L: for the ICI term
    of model parallelism (None: no ICI term can be computed); gather_params: parameters read by a lookup, not a
    matmul — the untied input embedding V·D and learned positions (0: every parameter is a matmul weight, the
    book's count; `conventions="book"` ignores it).
    """

    name: str
    params: float
    active_params: float
    kv_elements_per_token: float
    attn_flops_per_key: float = 0.0
    D: int | None = None
    L: int | None = None
    gather_params: float = 0.0

    def __post_init__(self):
        require_positive(params=self.params, active_params=self.active_params,
                         kv_elements_per_token=self.kv_elements_per_token)
        if not (0 <= self.gather_params < self.active_params):
            raise ValueError(f"gather_params must be in [0, active_params), got {self.gather_params!r}")

    def weight_bytes(self, precision="bf16") -> float:
        """P · bytes per weight."""
        return self.params * get_precision(precision).weight_bytes

    def kv_bytes_per_token(self, precision="bf16") -> float:
        """2·L·K·H · bytes per KV element (book ch. 7 "What about memory?")."""
        return self.kv_elements_per_token * get_precision(precision).kv_bytes

    def matmul_params(self, conventions: str = "practice") -> float:
        """Parameters each token multiplies: active_params − gather_params ("book": active_params, 2·P FLOPs)."""
        return self.active_params - (self.gather_params if check_conventions(conventions) == "practice" else 0.0)

    def streamed_bytes(self, tokens: float, precision="bf16", conventions: str = "practice") -> float:
        """Weight bytes one pass over `tokens` tokens reads from HBM: (P − G + min(tokens·D, G))·w, the gathered
        table G read only at the tokens' rows ("book": P·w, the whole table as if it were a matmul)."""
        if check_conventions(conventions) == "book" or not self.gather_params:
            return self.weight_bytes(precision)
        rows = min(tokens * (self.D or 0), self.gather_params)
        return (self.params - self.gather_params + rows) * get_precision(precision).weight_bytes


def served_model(model: str | tf.TransformerConfig | ServedModel, *, params: float | None = None,
                 kv_elements_per_token: float | None = None) -> ServedModel:
    """A `ServedModel` from a preset name or `TransformerConfig` (params = param_count().total, active =
    .activated, KV elements = 2·L·K·H), optionally overriding the parameter count or the KV size (the book's
    LLaMA-2-13B GQA table keeps the MHA model's 26 GB of weights while shrinking the cache 5×). gather_params =
    the embedding table when untied (V·D + learned positions), the positions alone when tied; 0 when `params`
    is given (a bare count, as the book uses it, says nothing about the table)."""
    if isinstance(model, ServedModel):
        if params is None and kv_elements_per_token is None:
            return model
        return ServedModel(model.name, params or model.params, params or model.active_params,
                           kv_elements_per_token or model.kv_elements_per_token, model.attn_flops_per_key,
                           model.D, model.L, model.gather_params if params is None else 0.0)
    cfg = tf.get_model(model)
    pc = tf.param_count(cfg)
    kv = tf.kv_cache_bytes_per_token(cfg, "bf16") / 2
    gathered = cfg.max_positions * cfg.D + (0 if cfg.tied_embeddings else cfg.V * cfg.D)
    return ServedModel(cfg.name, params if params is not None else pc.total,
                       params if params is not None else pc.activated,
                       kv_elements_per_token if kv_elements_per_token is not None else kv,
                       tf.attention_flops(cfg, 1, 1), cfg.D, cfg.L, gathered if params is None else 0.0)


def _model(model) -> ServedModel:
    return served_model(model)


def _count(name: str, v, minimum: int = 1) -> None:
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v)) and v >= minimum
    if not ok:
        raise ValueError(f"{name} must be a number >= {minimum}, got {v!r}")


def _ici_bandwidth(chip: ChipSpec) -> float:
    """Bidirectional bytes/s of one model-parallel axis: TPU ICI link × 2 (ch. 2), else NVLink egress (ch. 12)."""
    if chip.ici_link_bandwidth_bidi_bytes_per_s is not None:
        return chip.ici_link_bandwidth_bidi_bytes_per_s
    if chip.nvlink_bandwidth_oneway_bytes_per_s is not None:
        return chip.nvlink_bandwidth_oneway_bytes_per_s
    raise ValueError(f"{chip.name} has no ICI/NVLink bandwidth; model parallelism needs one")


# --- memory ---------------------------------------------------------------------------------------


def kv_cache_bytes(model, B: float, S: float, precision="bf16") -> float:
    """KV cache of B sequences of S tokens: 2·L·K·H·bytes·S·B (book ch. 7 "What about memory?": LLaMA-2-13B,
    8192 tokens, bf16: 6.7 GB per sequence). Units: bytes."""
    _count("B (batch)", B, 0)
    _count("S (context)", S, 0)
    return _model(model).kv_bytes_per_token(precision) * S * B


def inference_memory(model, B: float, S: float, precision="bf16") -> float:
    """Weights + KV caches: P·w + B·S·KV (activations ignored; book ch. 8 "Thinking about throughput":
    LLaMA 3-70B, B = 32, 8k context, int8 → ≈ 112 GB). Units: bytes."""
    m = _model(model)
    return m.weight_bytes(precision) + kv_cache_bytes(m, B, S, precision)


def min_chips(model, chip="tpu-v5e", precision="bf16", *, B: float = 0, S: float = 0, pow2: bool = True) -> int:
    """Fewest chips whose HBM holds the weights (+ B caches of S tokens): ceil(bytes/HBM), rounded up to a power
    of two when `pow2` (the book's `min_topology`; ch. 8: LLaMA 3-70B bf16 16, int8 8, int4 4 v5e chips).
    More chips than the chip's pod raises ValueError (the memory does not fit one model-parallel slice)."""
    c = get_chip(chip)
    n = math.ceil(inference_memory(model, B, S, precision) / c.hbm_bytes)
    n = 2 ** math.ceil(math.log2(n)) if pow2 and n > 1 else max(n, 1)
    pod = c.pod_chips
    if pod is not None and n > pod:
        what = f"with B={B:g} KV caches of S={S:g} tokens" if B and S else "(its weights alone)"
        raise ValueError(f"{_model(model).name} in {get_precision(precision).name} {what} needs {n} × {c.name}, more "
                         f"than one pod ({pod} chips): model parallelism runs inside a pod (book ch. 7); use a "
                         "smaller B, S or precision")
    return n


def free_hbm(model, chip="tpu-v5e", n_chips: int = 1, precision="bf16") -> float:
    """HBM left for KV caches after the weights: N·HBM − P·w (bytes); ValueError if the weights do not fit."""
    require_int("n_chips", n_chips)
    c, m = get_chip(chip), _model(model)
    free = n_chips * c.hbm_bytes - m.weight_bytes(precision)
    if free <= 0:
        need = min_chips(m, c, precision, pow2=False)
        raise ValueError(f"{m.name} in {get_precision(precision).name} ({m.weight_bytes(precision) / 1e9:.1f} GB) "
                         f"does not fit the HBM of {n_chips} × {c.name} ({n_chips * c.hbm_bytes / 1e9:.0f} GB); "
                         f"it needs at least {need} chips")
    return free


def max_batch(model, S: float, chip="tpu-v5e", n_chips: int = 1, precision="bf16", *,
              integer: bool = True) -> float:
    """Largest batch of S-token KV caches that fits next to the weights: ⌊(N·HBM − P·w)/(S·KV)⌋ (book ch. 7
    Question 2; ch. 8 "Thinking about throughput"). `integer=False` returns the unrounded quotient."""
    _count("S (context)", S)
    m = _model(model)
    b = free_hbm(m, chip, n_chips, precision) / (S * m.kv_bytes_per_token(precision))
    return math.floor(b) if integer else b


# --- decode and prefill -----------------------------------------------------------------------------

#: collectives of a [B, D] activation per layer under 1D model parallelism (Megatron): AllGather in and
#: ReduceScatter out, around attention and around the MLP (ch. 7 "Distributing Inference": T_ICI = 2BD/W_ici per
#: collective in bf16). GPUs under conventions="practice" use 2 AllReduces instead (`inference_comms`).
COLLECTIVES_PER_LAYER = 4


def collective_time(nbytes: float, n_shards: int, chip="tpu-v5e") -> float:
    """AllGather/ReduceScatter of `nbytes` (the full array) over a ring of n_shards on one axis:
    max(T_hop·n/2, bytes/W_ici) (book ch. 7 Appendix C; W_ici bidirectional, ≈1 µs per hop). Units: s."""
    require_positive(nbytes=nbytes)
    require_int("n_shards", n_shards)
    c = get_chip(chip)
    if n_shards == 1:
        return 0.0
    hop = c.ici_hop_latency_s or 0.0
    return max(hop * n_shards / 2, nbytes / _ici_bandwidth(c))


def ring_hops(n_chips: int, ici_axes: int = 1, shape=None) -> float:
    """Hops a bidirectional-ring collective waits for: |X|/2 per axis (ch. 7 Appendix C). With a slice `shape`
    (e.g. (8, 16)) the sum over its axes (4 + 8 = 12); otherwise `ici_axes` equal axes of n^(1/ici_axes) chips
    (a 16-chip single axis: 8; 16 chips on 2 axes: 2 + 2)."""
    if shape is not None:
        dims = tuple(shape)
        if not dims or math.prod(dims) != n_chips or not all(isinstance(d, numbers.Integral) and d >= 1 for d in dims):
            raise ValueError(f"slice shape {shape!r} must be positive integers whose product is n_chips={n_chips}")
        return sum(d / 2 for d in dims if d > 1)
    require_int("n_chips", n_chips)
    require_int("ici_axes", ici_axes)
    return ici_axes * n_chips ** (1 / ici_axes) / 2


def latency_bound_bytes(n_shards: int, chip="tpu-v5e") -> float:
    """Array size below which a collective over n_shards is latency-bound: T_hop·n·W_ici/2 (= per-shard bytes
    below one-way link × hop latency). Book ch. 7 Appendix C: 8-way on v5e → 360 kB. Units: bytes."""
    require_int("n_shards", n_shards)
    c = get_chip(chip)
    if c.ici_hop_latency_s is None:
        raise ValueError(f"{c.name} has no hop-latency figure in the book")
    return c.ici_hop_latency_s * n_shards * _ici_bandwidth(c) / 2


def latency_bound_tp_degree(B: float, D: float, chip="tpu-v5e", precision="int8") -> float:
    """TP degree above which the decode collectives of a [B, D] activation are latency-bound:
    Y > B·D·a/(T_hop·W_ici/2) (book ch. 7 Appendix C, int8: Y > BD/45,000 on v5e). Units: chips."""
    require_positive(B=B, D=D)
    return B * D * get_precision(precision).activation_bytes / latency_bound_bytes(1, chip)


@dataclass(frozen=True)
class DecodeStep:
    """One generate step of B sequences at context S on n_chips-way model parallelism (book ch. 7).

    t_math: parameter matmuls 2·B·P_matmul/(N·C); t_math_attention: 4·B·S·N·H·L/(N·C); t_hbm_weights: the weight
    bytes the step reads /(N·W_hbm) (P·w under the book's conventions); t_hbm_kv: B·S·KV/(N·W_hbm); t_ici: the
    model-parallel collectives (`inference_comms.tp_comm`; t_ici_latency its latency share). step_time =
    max(t_hbm_kv, t_math_attention) + max(t_math, t_hbm_weights), then max with t_ici when `overlap_comms` (the
    book: ICI overlapped) or plus t_ici when not (GPUs under "practice"). All in seconds.
    """

    model: str
    chip: str
    precision: str
    B: float
    S: float
    n_chips: int
    t_math: float
    t_math_attention: float
    t_hbm_weights: float
    t_hbm_kv: float
    t_ici: float
    memory_bytes: float
    overlap_comms: bool = True
    t_ici_latency: float = 0.0
    conventions: str = "book"

    @property
    def step_time(self) -> float:
        """Seconds per generate step (= per-token latency): the book's bound, with the collectives overlapped
        (max) or, when `overlap_comms` is False, after the matmuls (+)."""
        core = max(self.t_hbm_kv, self.t_math_attention) + max(self.t_math, self.t_hbm_weights)
        return max(core, self.t_ici) if self.overlap_comms else core + self.t_ici

    @property
    def step_time_overlapped(self) -> float:
        """Optimistic bound with every term perfectly overlapped: the max of all terms."""
        return max(self.t_math + self.t_math_attention, self.t_hbm_weights + self.t_hbm_kv, self.t_ici)

    @property
    def latency(self) -> float:
        """Per-token latency = step_time (one token per sequence per step)."""
        return self.step_time

    @property
    def tokens_per_s(self) -> float:
        """B / step_time over the whole slice."""
        return self.B / self.step_time

    @property
    def tokens_per_s_per_chip(self) -> float:
        """B / (step_time · N) (ch. 8: LLaMA 3-70B int8 on v5e 4x2, B = 32: ≈ 235)."""
        return self.tokens_per_s / self.n_chips

    @property
    def bottleneck(self) -> str:
        """What sets step_time: "ici" when the collectives outlast the rest; otherwise the dominant term of the
        larger half of attention + parameter matmuls: "kv" or "compute" (attention), "weights" or "compute"
        (matmuls)."""
        attention = max(self.t_hbm_kv, self.t_math_attention)
        matmuls = max(self.t_math, self.t_hbm_weights)
        if self.t_ici > (attention + matmuls if self.overlap_comms else max(attention, matmuls)):
            return "ici"
        if attention >= matmuls:
            return "kv" if self.t_hbm_kv >= self.t_math_attention else "compute"
        return "compute" if self.t_math > self.t_hbm_weights else "weights"

    @property
    def mlp_compute_bound(self) -> bool:
        """True when the parameter matmuls are compute-bound (per-chip batch above B_crit)."""
        return self.t_math > self.t_hbm_weights

    def queries_per_s_per_chip(self, decode_len: float) -> float:
        """B/(step_time · decode steps · N): finished queries per second per chip (ch. 8 in-text question 7)."""
        require_positive(decode_len=decode_len)
        return self.B / (self.step_time * decode_len * self.n_chips)


def decode_step(model, B: float, S: float, chip="tpu-v5e", n_chips: int = 1, precision="bf16", *,
                max_context: float | None = None, check_memory: bool = True, ici_axes: int = 1,
                shape=None, conventions: str = "practice", overlap_comms: bool | None = None) -> DecodeStep:
    """Roofline of one generate step (book ch. 7 "Theoretical estimates for LLM latency and throughput" and
    "Distributing Inference Over Multiple Accelerators"; ch. 8 "What's the LLaMA Serving Story?").

    B sequences (≥ 1), context S tokens (≥ 1, ≤ max_context when given), n_chips-way model parallelism with
    weights and KV fully sharded. `check_memory` raises when P·w + B·S·KV exceeds N·HBM (the book's LLaMA-2-13B
    table computes beyond that on purpose: pass False). `ici_axes` = hardware axes the TP axis spans (M_Y), of
    equal length; or give the slice `shape` (e.g. (4, 8)): M_Y = its axes longer than 1, hops = Σ|axis|/2.

    `conventions="practice"` (default) reads the input embedding as a gather (the tokens' rows; no 2·V·D
    FLOPs) and runs GPU collectives as NCCL does (2 AllReduces per layer with NCCL's latency, after the
    matmuls); `conventions="book"` streams and multiplies every parameter and overlaps the book's TPU-style
    collectives on every chip, reproducing the book's numbers. `overlap_comms` overrides the overlap. A GPU
    group larger than an NVLink node moves at the inter-node bandwidth, or raises ValueError saying why not.
    """
    _count("B (batch)", B)
    _count("S (context)", S)
    require_int("n_chips", n_chips)
    require_int("ici_axes", ici_axes)
    if shape is not None:
        hops = ring_hops(n_chips, shape=shape)
        ici_axes = max(1, sum(1 for d in shape if d > 1))
    else:
        hops = ring_hops(n_chips, ici_axes)
    if max_context is not None and S > max_context:
        raise ValueError(f"context S={S} is longer than the maximum context {max_context}")
    c, m, p = get_chip(chip), _model(model), get_precision(precision)
    C = c.peak_flops(p.compute_dtype)
    W = c.hbm_bandwidth_bytes_per_s
    mem = inference_memory(m, B, S, p)
    if check_memory and mem > n_chips * c.hbm_bytes:
        if m.weight_bytes(p) >= n_chips * c.hbm_bytes:
            hint = f"the weights alone need at least {min_chips(m, c, p, pow2=False)} chips"
        else:
            hint = f"the largest batch that fits at S={S} is {max_batch(m, S, c, n_chips, p)}"
        raise ValueError(f"{m.name} at B={B}, S={S} in {p.name} needs {mem / 1e9:.1f} GB, more than the HBM of "
                         f"{n_chips} × {c.name} ({n_chips * c.hbm_bytes / 1e9:.0f} GB); {hint} "
                         "(or pass check_memory=False)")
    conv = check_conventions(conventions)
    comm = _comm(m, B, c, n_chips, p, conv, ici_axes, hops, overlap_comms)
    return DecodeStep(
        model=m.name, chip=c.name, precision=p.name, B=B, S=S, n_chips=n_chips,
        t_math=2 * B * m.matmul_params(conv) / (n_chips * C),
        t_math_attention=B * S * m.attn_flops_per_key / (n_chips * C),
        t_hbm_weights=m.streamed_bytes(B, p, conv) / (n_chips * W),
        t_hbm_kv=kv_cache_bytes(m, B, S, p) / (n_chips * W),
        t_ici=comm.seconds, memory_bytes=mem, overlap_comms=comm.overlapped, t_ici_latency=comm.latency_total_s,
        conventions=conv)


def _comm(m: ServedModel, tokens, c: ChipSpec, n_chips: int, p: Precision, conv: str, ici_axes: int, hops,
          overlap) -> TPComm:
    """`tp_comm` for a served model (none when it has no D, L: a bare parameter count)."""
    if n_chips == 1 or m.D is None or m.L is None:
        return tp_comm(1, 1, 1, c, 1, conventions=conv, overlap=overlap)
    return tp_comm(m.D, m.L, tokens, c, n_chips, p.activation_bytes, conventions=conv, ici_axes=ici_axes,
                   hops=hops, overlap=overlap)


@dataclass(frozen=True)
class Prefill:
    """Prefill of B prompts of T tokens: t_math = FLOPs/(N·C·MFU), t_hbm_weights = weight bytes read/(N·W_hbm),
    t_ici = the model-parallel collectives of B·T tokens (0 under the book's conventions; t_ici_latency its
    latency share). time = max(t_math, t_hbm_weights, t_ici) when `overlap_comms`, else max(…) + t_ici. Seconds."""

    T: float
    B: float
    n_chips: int
    flops: float
    t_math: float
    t_hbm_weights: float
    t_ici: float = 0.0
    overlap_comms: bool = True
    t_ici_latency: float = 0.0
    conventions: str = "book"

    @property
    def time(self) -> float:
        """Seconds: compute-bound for any prompt longer than ≈ B_crit tokens, unless the collectives dominate or,
        not overlapped, add to it."""
        core = max(self.t_math, self.t_hbm_weights)
        return max(core, self.t_ici) if self.overlap_comms else core + self.t_ici

    @property
    def bottleneck(self) -> str:
        """"comms" when the collectives outlast the matmuls, else "compute" or "weights"."""
        if self.t_ici > max(self.t_math, self.t_hbm_weights):
            return "comms"
        return "compute" if self.t_math >= self.t_hbm_weights else "weights"


def prefill_time(model, T: float, chip="tpu-v5e", n_chips: int = 1, precision="bf16", *, mfu: float = 1.0,
                 B: float = 1, include_attention: bool | None = None, conventions: str = "practice",
                 overlap_comms: bool | None = None, ici_axes: int = 1, shape=None) -> Prefill:
    """Time to prefill B prompts of T tokens on n_chips-way model parallelism.

    conventions="book": 2·P·T·B/(N·C·MFU) and nothing else (book ch. 8 "What about prefill?": LLaMA 3-70B, 8192
    tokens, 16 v5e at 40% MFU ≈ 0.91 s). conventions="practice" (default): FLOPs 2·(P − G)·T·B (the input
    embedding G is a gather) + the causal attention FLOPs 2·T²·N·H·L per prompt (`include_attention`, on by
    default here, off for the book), and the communication term of the decode rule at B·T tokens
    (`inference_comms.tp_comm`: on a TPU 4·L overlapped collectives, ch. 7's "Prefill" limit Y < F·M_Y/α_ici; on
    GPUs 2·L NCCL AllReduces of B·T·D·a bytes after the matmuls). `shape` / `ici_axes` as in `decode_step`."""
    _count("T (prompt tokens)", T)
    _count("B (batch)", B)
    require_int("n_chips", n_chips)
    require_int("ici_axes", ici_axes)
    if not (isinstance(mfu, numbers.Real) and 0 < mfu <= 1):
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    conv = check_conventions(conventions)
    hops = None
    if shape is not None:
        hops = ring_hops(n_chips, shape=shape)
        ici_axes = max(1, sum(1 for d in shape if d > 1))
    c, m, p = get_chip(chip), _model(model), get_precision(precision)
    attention = (conv == "practice") if include_attention is None else include_attention
    flops = B * (2 * m.matmul_params(conv) * T + (m.attn_flops_per_key * T * T / 2 if attention else 0.0))
    comm = _comm(m, B * T, c, n_chips, p, conv, ici_axes, hops, overlap_comms) if conv == "practice" else None
    return Prefill(T=T, B=B, n_chips=n_chips, flops=flops,
                   t_math=flops / (n_chips * c.peak_flops(p.compute_dtype) * mfu),
                   t_hbm_weights=m.streamed_bytes(B * T, p, conv) / (n_chips * c.hbm_bandwidth_bytes_per_s),
                   t_ici=comm.seconds if comm else 0.0, overlap_comms=comm.overlapped if comm else True,
                   t_ici_latency=comm.latency_total_s if comm else 0.0, conventions=conv)


# --- limits on model parallelism in decode ------------------------------------------------------------


@dataclass(frozen=True)
class TPMatmulTimes:
    """One [B, D] × [D, F] matmul with F sharded Y ways (ch. 8 in-text question 9): seconds each."""

    t_math: float
    t_hbm: float
    t_ici: float

    @property
    def bottleneck(self) -> str:
        terms = {"FLOPs": self.t_math, "HBM bandwidth": self.t_hbm, "ICI": self.t_ici}
        return max(terms, key=terms.get)


def tp_matmul_times(B: float, D: float, F: float, Y: int, chip="tpu-v5e", precision="bf16", *,
                    M_Y: int = 1) -> TPMatmulTimes:
    """T_math = 2BDF/(Y·C), T_hbm = w·DF/(Y·W_hbm), T_ici = a·BD/(M_Y·W_ici) (book ch. 7 "Generation"; ch. 8
    question 9: LLaMA 3-70B bf16 on 4x8, B = 64 → 4.8 µs, 17.9 µs, 11.7 µs: HBM-bound). The book's question uses
    one axis (M_Y = 1) here but M_Y = 2 in its large-batch limit `tp_limit_large_batch`; pass M_Y to match."""
    require_positive(B=B, D=D, F=F)
    _count("Y (TP degree)", Y)
    _count("M_Y", M_Y)
    c, p = get_chip(chip), get_precision(precision)
    return TPMatmulTimes(t_math=2 * B * D * F / (Y * c.peak_flops(p.compute_dtype)),
                         t_hbm=p.weight_bytes * D * F / (Y * c.hbm_bandwidth_bytes_per_s),
                         t_ici=p.activation_bytes * B * D / (M_Y * _ici_bandwidth(c)))


def hbm_ici_beta(chip="tpu-v5e") -> float:
    """β = W_hbm/W_ici (ch. 7: "about 8" on v5e and v6e; 8.2e11/9e10 = 9.1 on v5e)."""
    c = get_chip(chip)
    return c.hbm_bandwidth_bytes_per_s / _ici_bandwidth(c)


def tp_limit_small_batch(F: float, B: float, chip="tpu-v5e", precision="bf16", *, beta: float | None = None) -> float:
    """Largest TP degree before ICI dominates memory-bound decode: T_ici = a·BD/W_ici > T_hbm = w·DF/(Y·W_hbm)
    iff Y > w·F/(a·B·β) (bf16: F/(B·β)). Book ch. 7 "Generation": F = 16,384, B = 32, β = 8 → 64; ch. 8 question 9
    with β = 8: 56. `beta` overrides the chip's β (the book rounds it to 8)."""
    require_positive(F=F, B=B)
    p = get_precision(precision)
    b = hbm_ici_beta(chip) if beta is None else beta
    require_positive(beta=b)
    return p.weight_bytes * F / (p.activation_bytes * B * b)


def tp_limit_large_batch(F: float, chip="tpu-v5e", precision="bf16", *, M_Y: int = 1) -> float:
    """Largest TP degree keeping a compute-bound matmul off the ICI roofline: 2BDF/(Y·C) > a·BD/(W_ici·M_Y)
    iff Y < 2·F·M_Y·W_ici/(a·C) (bf16: F·M_Y/α_ici, α_ici ≈ 2200 on v5e). Book ch. 7 "Prefill"/"Generation";
    ch. 8 question 9: LLaMA 3-70B, M_Y = 2 → 26."""
    require_positive(F=F)
    _count("M_Y", M_Y)
    c, p = get_chip(chip), get_precision(precision)
    return 2 * F * M_Y * _ici_bandwidth(c) / (p.activation_bytes * c.peak_flops(p.compute_dtype))


# --- 2D weight-stationary sharding (Appendix B, Question 7) --------------------------------------------

#: 1D model sharding's comms in units of B·D/W_ici that the book's crossover 128·(3/4)² (ch7 Question 7) implies.
#: The derivation of that factor is not in our notes; it is a stated assumption, see `ws_1d_comms`.
WS_1D_COMMS_FACTOR = 4 / 3


@dataclass(frozen=True)
class WeightStationary2D:
    """FFW block on N = X·YZ chips, 2D weight-stationary (book ch. 7 Appendix B / Question 7). Seconds."""

    X: float
    YZ: float
    t_math: float
    t_comms: float

    @property
    def time(self) -> float:
        return max(self.t_math, self.t_comms)


def ws_2d_optimal_X(N: float, D: float, F: float) -> float:
    """X minimizing 2BD/(X·W) + 4BF·X/(N·W): X = √(D·N/(2F)) (F = 4D: √(N/8)). Book ch. 7 Question 7."""
    require_positive(N=N, D=D, F=F)
    return math.sqrt(D * N / (2 * F))


def weight_stationary_2d(B: float, D: float, F: float, N: float, chip="tpu-v5e", *, X: float | None = None,
                         precision="bf16") -> WeightStationary2D:
    """T_math = 4BDF/(N·C) (two matmuls), T_comms = 2BD/(X·W_ici) + 4BF/(YZ·W_ici), YZ = N/X (X defaults to the
    optimum; W_ici bidirectional). Book ch. 7 Appendix B, Question 7."""
    require_positive(B=B, D=D, F=F, N=N)
    X = ws_2d_optimal_X(N, D, F) if X is None else X
    require_positive(X=X)
    c, p = get_chip(chip), get_precision(precision)
    W = _ici_bandwidth(c)
    YZ = N / X
    return WeightStationary2D(X=X, YZ=YZ, t_math=4 * B * D * F / (N * c.peak_flops(p.compute_dtype)),
                              t_comms=2 * B * D / (X * W) + 4 * B * F / (YZ * W))


def ws_1d_comms(B: float, D: float, chip="tpu-v5e") -> float:
    """1D model-sharding comms for the FFW block, WS_1D_COMMS_FACTOR·B·D/W_ici, independent of N (the assumption
    behind the book's crossover in Question 7). Units: s."""
    require_positive(B=B, D=D)
    return WS_1D_COMMS_FACTOR * B * D / _ici_bandwidth(get_chip(chip))


def ws_2d_crossover_chips(D: float, F: float) -> float:
    """N above which 2D weight-stationary comms (at the optimal X) beat 1D: 4·√(2F/(D·N)) < c ⇔
    N > 32·(F/D)/c² with c = WS_1D_COMMS_FACTOR (F = 4D: 72). Book ch. 7 Question 7."""
    require_positive(D=D, F=F)
    return 32 * (F / D) / WS_1D_COMMS_FACTOR ** 2


# --- serving: disaggregation, evictions, cost, speculative decoding ---------------------------------------


def prefill_servers_per_generate_server(prefill_latency: float, generate_step_time: float, batch: float,
                                        decode_len: float) -> float:
    """Prefill/generate server ratio that keeps both saturated: each generate server finishes B sequences every
    decode_len steps, each prefill server one prompt per prefill_latency, so
    ratio = prefill_latency·B/(step_time·decode_len) (book ch. 8 question 12: 0.91·32/(0.019·512) ≈ 3)."""
    require_positive(prefill_latency=prefill_latency, generate_step_time=generate_step_time, batch=batch,
                     decode_len=decode_len)
    return prefill_latency * batch / (generate_step_time * decode_len)


@dataclass(frozen=True)
class KVEviction:
    """Sequences finishing and KV tokens to evict (and replace) per generate step; bytes when sizes are given."""

    sequences_per_step: float
    tokens_per_step: float
    bytes_per_step: float | None = None
    bytes_per_s: float | None = None


def kv_eviction_rate(B: float, prefill_len: float, decode_len: float, *, kv_bytes_per_token: float | None = None,
                     step_time: float | None = None) -> KVEviction:
    """Steady state: B/G sequences finish per step, each freeing (P + G) KV tokens: B·(P+G)/G tokens per step
    (book ch. 8 question 11: B = 32, P = 8192, G = 4096 → 96). With KV bytes/token and the step time this is the
    bytes/s of cache freed (and re-filled by new sequences). Under disaggregated serving only the P prompt tokens
    of each new sequence arrive from a prefill server: that inbound transfer is sequences_per_step·P·KV bytes."""
    require_positive(B=B, prefill_len=prefill_len, decode_len=decode_len)
    seqs = B / decode_len
    toks = seqs * (prefill_len + decode_len)
    nbytes = None if kv_bytes_per_token is None else toks * kv_bytes_per_token
    rate = None
    if nbytes is not None and step_time is not None:
        require_positive(step_time=step_time)
        rate = nbytes / step_time
    return KVEviction(seqs, toks, nbytes, rate)


def flops_per_dollar(chip="tpu-v5e", dtype: str = "bf16") -> float:
    """Peak FLOPs bought per US dollar: C·3600/price per hour (book ch. 8 cost table; v5e 5.9e17)."""
    c = get_chip(chip)
    if c.price_per_hour_usd is None:
        raise ValueError(f"{c.name} has no hourly price in the book")
    return c.peak_flops(dtype) * 3600 / c.price_per_hour_usd


def cost_per_million_tokens(tokens_per_s_per_chip: float, chip="tpu-v5e", *,
                            price_per_hour_usd: float | None = None) -> float:
    """US dollars per 1e6 tokens: price/3600 / (tokens/s/chip) · 1e6 (book ch. 8, cost per token at roofline)."""
    require_positive(tokens_per_s_per_chip=tokens_per_s_per_chip)
    c = get_chip(chip)
    price = c.price_per_hour_usd if price_per_hour_usd is None else price_per_hour_usd
    if price is None:
        raise ValueError(f"{c.name} has no hourly price in the book; pass price_per_hour_usd")
    require_positive(price_per_hour_usd=price)
    return price / 3600 / tokens_per_s_per_chip * 1e6


def speculative_tokens_per_step(acceptance: float, draft_len: int) -> float:
    """Expected tokens per target-model step with k drafted tokens, each accepted independently with
    probability α: (1 − α^(k+1))/(1 − α) (k + 1 when α = 1). Not printed in the book (ch. 7 Appendix D describes
    the scheme); the formula is Leviathan et al., "Fast Inference from Transformers via Speculative Decoding"
    (arXiv 2211.17192), eq. 1."""
    if not (isinstance(acceptance, numbers.Real) and 0 <= acceptance <= 1):
        raise ValueError(f"acceptance must be a probability in [0, 1], got {acceptance!r}")
    if not (isinstance(draft_len, numbers.Integral) and not isinstance(draft_len, bool) and draft_len >= 0):
        raise ValueError(f"draft_len must be an integer >= 0, got {draft_len!r}")
    if acceptance == 1:
        return float(draft_len + 1)
    return (1 - acceptance ** (draft_len + 1)) / (1 - acceptance)


@dataclass(frozen=True)
class SpeculativeStep:
    """Cost of one greedy speculative round (book ch. 7 Appendix D): k draft steps, then one target step that
    scores k + 1 positions per sequence. t_plain: one ordinary target step; t_draft = k draft steps;
    t_verify: the target step on B·(k+1) query tokens (the weights read once, the KV of B sequences read once,
    (k+1)× the FLOPs); tokens: expected tokens per round. All times in seconds."""

    t_plain: float
    t_draft: float
    t_verify: float
    tokens: float

    @property
    def time_per_token(self) -> float:
        """(t_draft + t_verify) / tokens: seconds per generated token per sequence."""
        return (self.t_draft + self.t_verify) / self.tokens

    @property
    def speedup(self) -> float:
        """t_plain / time_per_token: how much faster each sequence decodes than without a drafter."""
        return self.t_plain / self.time_per_token


def speculative_step(target, draft, B: float, S: float, draft_len: int, acceptance: float, chip="tpu-v5e",
                     n_chips: int = 1, precision="bf16", *, shape=None, conventions: str = "practice") -> SpeculativeStep:
    """Model one speculative round: `decode_step` of the draft k times and of the target at B·(k+1) tokens,
    with the KV term of B sequences (the k+1 queries of a sequence read its cache once) and the collectives
    of B·(k+1) activations: t_verify = max(KV(B), attn FLOPs(B(k+1))) + max(2·B(k+1)·P/(N·C), P·w/(N·W))
    (then max with ICI, or + ICI where the collectives are not overlapped). Expected tokens =
    `speculative_tokens_per_step(acceptance, k)` (external formula, see there). Both models share the n_chips
    slice; `conventions` as in `decode_step`. Book ch. 7 Appendix D; the cost is not in the book."""
    if not (isinstance(draft_len, numbers.Integral) and not isinstance(draft_len, bool) and draft_len >= 1):
        raise ValueError(f"draft_len must be an integer >= 1, got {draft_len!r}")
    kw = dict(chip=chip, n_chips=n_chips, precision=precision, check_memory=False, shape=shape,
              conventions=conventions)
    plain = decode_step(target, B, S, **kw)
    d = decode_step(draft, B, S, **kw)
    v = decode_step(target, B * (draft_len + 1), S, **kw)
    attention = max(plain.t_hbm_kv, v.t_math_attention)
    core = attention + max(v.t_math, v.t_hbm_weights)
    t_verify = max(core, v.t_ici) if v.overlap_comms else core + v.t_ici
    return SpeculativeStep(t_plain=plain.step_time, t_draft=draft_len * d.step_time, t_verify=t_verify,
                           tokens=speculative_tokens_per_step(acceptance, draft_len))
