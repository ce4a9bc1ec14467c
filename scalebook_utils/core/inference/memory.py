"""Inference memory: precision modes, the served model, the weights and KV caches in HBM, the fewest chips and
the largest batch (book ch. 7 "What about memory?" and "Tricks": quantization; ch. 8 "Thinking about throughput").

Notation as in `inference` (book ch. 7): B batch (sequences), S context length (keys in each KV cache), P
parameters, w bytes per weight, KV bytes per token = 2·L·K·H·bytes per element, N chips of HBM each. Units:
bytes, tokens. The first layer of the inference cost model: `decode` and `economics` build on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.errors import UnknownNameError
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference.comms import check_conventions
from scalebook_utils.core.units import dtype_bytes, require_int, require_number, require_positive

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
        require_positive(weight_bytes=self.weight_bytes, kv_bytes=self.kv_bytes, activation_bytes=self.activation_bytes)

    @property
    def meaning(self) -> str:
        """What the name stands for, from the fields: 'int8 weights + KV, bf16 math' (see `PRECISIONS`)."""
        math_ = self.compute_dtype
        w, kv = (
            _STORED.get((b, math_), _STORED.get((b, None), f"{b:g}-byte")) for b in (self.weight_bytes, self.kv_bytes)
        )
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
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("bf16", 2.0, 2.0, "bf16", 2.0),  # bf16 weights, KV and compute
        Precision("int8-weights", 1.0, 1.0, "bf16", 2.0),  # int8 weights and KV, bf16 FLOPs (B_crit halves)
        Precision("int8", 1.0, 1.0, "int8", 1.0),  # int8 weights, KV, activations and OPs
        Precision("int4-weights", 0.5, 0.5, "bf16", 2.0),  # int4 weights and KV, bf16 FLOPs
        Precision("fp8", 1.0, 1.0, "fp8", 1.0),  # GPUs: fp8 everything
    )
}


def precision_label(precision: str | Precision) -> str:
    """`get_precision(precision).label`: 'int8-weights (int8 weights + KV, bf16 math)'."""
    return get_precision(precision).label


def get_precision(precision: str | Precision) -> Precision:
    """Look up a precision mode by name; raises UnknownNameError listing the allowed names."""
    if isinstance(precision, Precision):
        return precision
    key = str(precision).strip().lower()
    if key not in PRECISIONS:
        raise UnknownNameError(
            f"unknown precision {precision!r}; allowed precisions: {', '.join(PRECISIONS)} (or pass a Precision)"
        )
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
        require_positive(
            params=self.params, active_params=self.active_params, kv_elements_per_token=self.kv_elements_per_token
        )
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


def served_model(
    model: str | tf.TransformerConfig | ServedModel,
    *,
    params: float | None = None,
    kv_elements_per_token: float | None = None,
) -> ServedModel:
    """A `ServedModel` from a preset name or `TransformerConfig` (params = param_count().total, active =
    .activated, KV elements = 2·L·K·H), optionally overriding the parameter count or the KV size (the book's
    LLaMA-2-13B GQA table keeps the MHA model's 26 GB of weights while shrinking the cache 5×). gather_params =
    the embedding table when untied (V·D + learned positions), the positions alone when tied; 0 when `params`
    is given (a bare count, as the book uses it, says nothing about the table)."""
    if isinstance(model, ServedModel):
        if params is None and kv_elements_per_token is None:
            return model
        return ServedModel(
            model.name,
            params or model.params,
            params or model.active_params,
            kv_elements_per_token or model.kv_elements_per_token,
            model.attn_flops_per_key,
            model.D,
            model.L,
            model.gather_params if params is None else 0.0,
        )
    cfg = tf.get_model(model)
    pc = tf.param_count(cfg)
    kv = tf.kv_cache_bytes_per_token(cfg, "bf16") / 2
    gathered = cfg.max_positions * cfg.D + (0 if cfg.tied_embeddings else cfg.V * cfg.D)
    return ServedModel(
        cfg.name,
        params if params is not None else pc.total,
        params if params is not None else pc.activated,
        kv_elements_per_token if kv_elements_per_token is not None else kv,
        tf.attention_flops(cfg, 1, 1),
        cfg.D,
        cfg.L,
        gathered if params is None else 0.0,
    )


# --- memory ---------------------------------------------------------------------------------------


def kv_cache_bytes(model, B: float, S: float, precision="bf16") -> float:
    """KV cache of B sequences of S tokens: 2·L·K·H·bytes·S·B (book ch. 7 "What about memory?": LLaMA-2-13B,
    8192 tokens, bf16: 6.7 GB per sequence). Units: bytes."""
    require_number("B (batch)", B, minimum=0)
    require_number("S (context)", S, minimum=0)
    return served_model(model).kv_bytes_per_token(precision) * S * B


def inference_memory(model, B: float, S: float, precision="bf16") -> float:
    """Weights + KV caches: P·w + B·S·KV (activations ignored; book ch. 8 "Thinking about throughput":
    LLaMA 3-70B, B = 32, 8k context, int8 → ≈ 112 GB). Units: bytes."""
    m = served_model(model)
    return m.weight_bytes(precision) + kv_cache_bytes(m, B, S, precision)


def decode_activation_bytes(cfg: tf.TransformerConfig | str, B: float, dtype: str = "bf16") -> float:
    """Peak working activations of one decode step of B sequences (one new token each), in bytes: the larger of
    one layer's intermediates (the ch. 4 rule of thumb, 20·D per token, nothing rematerialized) and the logits
    [B, V], in `dtype`; a decode step keeps no layer's activations for a backward pass (book ch. 8 worked
    problem 2: LLaMA 3-8B at B = 240 → logits 240 · 128,256 · 2 = 62 MB, one layer 39 MB)."""
    cfg = tf.get_model(cfg)
    per_layer = tf.activation_bytes(cfg, B, "none", dtype) / cfg.L
    logits = B * cfg.V * dtype_bytes(dtype)
    return max(per_layer, logits)


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
        raise ValueError(
            f"{served_model(model).name} in {get_precision(precision).name} {what} needs {n} × "
            f"{c.name}, more than one pod ({pod} chips): model parallelism runs inside a pod "
            "(book ch. 7); use a smaller B, S or precision"
        )
    return n


def free_hbm(model, chip="tpu-v5e", n_chips: int = 1, precision="bf16") -> float:
    """HBM left for KV caches after the weights: N·HBM − P·w (bytes); ValueError if the weights do not fit."""
    require_int("n_chips", n_chips)
    c, m = get_chip(chip), served_model(model)
    free = n_chips * c.hbm_bytes - m.weight_bytes(precision)
    if free <= 0:
        need = min_chips(m, c, precision, pow2=False)
        raise ValueError(
            f"{m.name} in {get_precision(precision).name} ({m.weight_bytes(precision) / 1e9:.1f} GB) "
            f"does not fit the HBM of {n_chips} × {c.name} ({n_chips * c.hbm_bytes / 1e9:.0f} GB); "
            f"it needs at least {need} chips"
        )
    return free


def max_batch(model, S: float, chip="tpu-v5e", n_chips: int = 1, precision="bf16", *, integer: bool = True) -> float:
    """Largest batch of S-token KV caches that fits next to the weights: ⌊(N·HBM − P·w)/(S·KV)⌋ (book ch. 7
    Question 2; ch. 8 "Thinking about throughput"). `integer=False` returns the unrounded quotient."""
    require_number("S (context)", S, minimum=1)
    m = served_model(model)
    b = free_hbm(m, chip, n_chips, precision) / (S * m.kv_bytes_per_token(precision))
    return math.floor(b) if integer else b


__all__ = [
    "CH7",
    "CH8",
    "Precision",
    "PRECISIONS",
    "precision_label",
    "get_precision",
    "critical_batch",
    "ServedModel",
    "served_model",
    "kv_cache_bytes",
    "inference_memory",
    "decode_activation_bytes",
    "min_chips",
    "free_hbm",
    "max_batch",
]
