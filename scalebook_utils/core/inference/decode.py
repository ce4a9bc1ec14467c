"""Decode and prefill on one model-parallel slice: the step-time roofline with KV loads, the ring collectives
and when they are latency-bound (book ch. 7 "Theoretical estimates for LLM latency and throughput",
"Distributing Inference", Appendix C; ch. 8 "What's the LLaMA Serving Story?", "What about prefill?").

Notation as in `inference`; memory (precisions, the served model, HBM) comes from `inference.memory`, the
model-parallel collectives from `inference_comms`.

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

from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.inference.comms import TPComm, axis_bandwidth, check_conventions, tp_comm
from scalebook_utils.core.inference.memory import (
    Precision,
    ServedModel,
    get_precision,
    inference_memory,
    kv_cache_bytes,
    max_batch,
    min_chips,
    served_model,
)
from scalebook_utils.core.units import require_int, require_number, require_positive

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
    return max(hop * n_shards / 2, nbytes / axis_bandwidth(c))


def collective_wait_hops(n_chips: int, ici_axes: int = 1, shape=None) -> float:
    """Hops a bidirectional-ring collective waits for: |X|/2 per axis (ch. 7 Appendix C). With a slice `shape`
    (e.g. (8, 16)) the sum over its axes (4 + 8 = 12); otherwise `ici_axes` equal axes of n^(1/ici_axes) chips
    (a 16-chip single axis: 8; 16 chips on 2 axes: 2 + 2). A float, the book's |X|/2 on every axis; a slice's
    longest path is `topology.ring_hops` (⌊n/2⌋ with wraparound, n − 1 without)."""
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
    return c.ici_hop_latency_s * n_shards * axis_bandwidth(c) / 2


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


def decode_step(
    model,
    B: float,
    S: float,
    chip="tpu-v5e",
    n_chips: int = 1,
    precision="bf16",
    *,
    max_context: float | None = None,
    check_memory: bool = True,
    ici_axes: int = 1,
    shape=None,
    conventions: str = "practice",
    overlap_comms: bool | None = None,
) -> DecodeStep:
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
    require_number("B (batch)", B, minimum=1)
    require_number("S (context)", S, minimum=1)
    require_int("n_chips", n_chips)
    require_int("ici_axes", ici_axes)
    if shape is not None:
        hops = collective_wait_hops(n_chips, shape=shape)
        ici_axes = max(1, sum(1 for d in shape if d > 1))
    else:
        hops = collective_wait_hops(n_chips, ici_axes)
    if max_context is not None and S > max_context:
        raise ValueError(f"context S={S} is longer than the maximum context {max_context}")
    c, m, p = get_chip(chip), served_model(model), get_precision(precision)
    C = c.peak_flops(p.compute_dtype)
    W = c.hbm_bandwidth_bytes_per_s
    mem = inference_memory(m, B, S, p)
    if check_memory and mem > n_chips * c.hbm_bytes:
        if m.weight_bytes(p) >= n_chips * c.hbm_bytes:
            hint = f"the weights alone need at least {min_chips(m, c, p, pow2=False)} chips"
        else:
            hint = f"the largest batch that fits at S={S} is {max_batch(m, S, c, n_chips, p)}"
        raise ValueError(
            f"{m.name} at B={B}, S={S} in {p.name} needs {mem / 1e9:.1f} GB, more than the HBM of "
            f"{n_chips} × {c.name} ({n_chips * c.hbm_bytes / 1e9:.0f} GB); {hint} "
            "(or pass check_memory=False)"
        )
    conv = check_conventions(conventions)
    comm = _comm(m, B, c, n_chips, p, conv, ici_axes, hops, overlap_comms)
    return DecodeStep(
        model=m.name,
        chip=c.name,
        precision=p.name,
        B=B,
        S=S,
        n_chips=n_chips,
        t_math=2 * B * m.matmul_params(conv) / (n_chips * C),
        t_math_attention=B * S * m.attn_flops_per_key / (n_chips * C),
        t_hbm_weights=m.streamed_bytes(B, p, conv) / (n_chips * W),
        t_hbm_kv=kv_cache_bytes(m, B, S, p) / (n_chips * W),
        t_ici=comm.seconds,
        memory_bytes=mem,
        overlap_comms=comm.overlapped,
        t_ici_latency=comm.latency_total_s,
        conventions=conv,
    )


def _comm(
    m: ServedModel, tokens, c: ChipSpec, n_chips: int, p: Precision, conv: str, ici_axes: int, hops, overlap
) -> TPComm:
    """`tp_comm` for a served model (none when it has no D, L: a bare parameter count)."""
    if n_chips == 1 or m.D is None or m.L is None:
        return tp_comm(1, 1, 1, c, 1, conventions=conv, overlap=overlap)
    return tp_comm(
        m.D,
        m.L,
        tokens,
        c,
        n_chips,
        p.activation_bytes,
        conventions=conv,
        ici_axes=ici_axes,
        hops=hops,
        overlap=overlap,
    )


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
        """ "comms" when the collectives outlast the matmuls, else "compute" or "weights"."""
        if self.t_ici > max(self.t_math, self.t_hbm_weights):
            return "comms"
        return "compute" if self.t_math >= self.t_hbm_weights else "weights"


def prefill_time(
    model,
    T: float,
    chip="tpu-v5e",
    n_chips: int = 1,
    precision="bf16",
    *,
    mfu: float = 1.0,
    B: float = 1,
    include_attention: bool | None = None,
    conventions: str = "practice",
    overlap_comms: bool | None = None,
    ici_axes: int = 1,
    shape=None,
) -> Prefill:
    """Time to prefill B prompts of T tokens on n_chips-way model parallelism.

    conventions="book": 2·P·T·B/(N·C·MFU) and nothing else (book ch. 8 "What about prefill?": LLaMA 3-70B, 8192
    tokens, 16 v5e at 40% MFU ≈ 0.91 s). conventions="practice" (default): FLOPs 2·(P − G)·T·B (the input
    embedding G is a gather) + the causal attention FLOPs 2·T²·N·H·L per prompt (`include_attention`, on by
    default here, off for the book), and the communication term of the decode rule at B·T tokens
    (`inference_comms.tp_comm`: on a TPU 4·L overlapped collectives, ch. 7's "Prefill" limit Y < F·M_Y/α_ici; on
    GPUs 2·L NCCL AllReduces of B·T·D·a bytes after the matmuls). `shape` / `ici_axes` as in `decode_step`."""
    require_number("T (prompt tokens)", T, minimum=1)
    require_number("B (batch)", B, minimum=1)
    require_int("n_chips", n_chips)
    require_int("ici_axes", ici_axes)
    require_number("mfu", mfu, above=0, maximum=1)
    conv = check_conventions(conventions)
    hops = None
    if shape is not None:
        hops = collective_wait_hops(n_chips, shape=shape)
        ici_axes = max(1, sum(1 for d in shape if d > 1))
    c, m, p = get_chip(chip), served_model(model), get_precision(precision)
    attention = (conv == "practice") if include_attention is None else include_attention
    flops = B * (2 * m.matmul_params(conv) * T + (m.attn_flops_per_key * T * T / 2 if attention else 0.0))
    comm = _comm(m, B * T, c, n_chips, p, conv, ici_axes, hops, overlap_comms) if conv == "practice" else None
    return Prefill(
        T=T,
        B=B,
        n_chips=n_chips,
        flops=flops,
        t_math=flops / (n_chips * c.peak_flops(p.compute_dtype) * mfu),
        t_hbm_weights=m.streamed_bytes(B * T, p, conv) / (n_chips * c.hbm_bandwidth_bytes_per_s),
        t_ici=comm.seconds if comm else 0.0,
        overlap_comms=comm.overlapped if comm else True,
        t_ici_latency=comm.latency_total_s if comm else 0.0,
        conventions=conv,
    )


__all__ = [
    "COLLECTIVES_PER_LAYER",
    "collective_time",
    "collective_wait_hops",
    "latency_bound_bytes",
    "latency_bound_tp_degree",
    "DecodeStep",
    "decode_step",
    "Prefill",
    "prefill_time",
]
