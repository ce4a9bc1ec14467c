"""Chapter 8 — Serving LLaMA 3-70B on TPUs, part 2: Worked Problems 1–3 (ids q1..q3; book ch. 8).

Book ch. 8, "Worked Problems". Registered after `ch08` (the in-text questions), whose chapter inputs (v5e, the
bf16 and int8 modes, slice names) it imports.

The book gives no answers; our choices:
- Q1 (LLaMA 3-405B forward pass): FLOPs per token 2·P (the chapter's rule; `prefill_time(..., T=1).flops`);
  the FLOPs-bound time 2·P/(N·C) and the HBM-bound time P·2/(N·W_hbm) for bf16 weights, both as formulas of the
  parameter count P and the chip count N, for one token (batch 1).
- Q2 (LLaMA 3-8B at batch 240, int8 weights and KV): 8192-token sequences (LLaMA 3's context; the book names
  none). Peak working activations (`inference.decode_activation_bytes`): the larger of one layer's intermediates
  (the ch. 4 rule of thumb, 20·D per token) and the logits [B, V], in bf16 — tens of MB ("roughly", so
  rtol = 0.5). Smallest topology from `min_chips` with weights + KV caches.
- Q3 (LLaMA 3-405B, int8 weights, bf16 FLOPs, ≤ 15 ms per token): `serving.frontier` over every power-of-two
  slice up to a pod with 8192-token contexts. The plan is the smallest slice whose batch-1 step fits 15 ms
  (`Frontier.smallest_under`), with pure model parallelism over it; the highest-throughput configuration is
  `frontier.best_under(15e-3)`; the theoretical minimum step time is the fastest point of the whole frontier
  (weight loading shrinks as 1/N, but the hop latency of 4·L collectives per step grows with the slice, so it is
  not the largest slice).
  The answers depend on `inference.decode_step`'s collective-latency model, so the question states it
  (`Q3_MODEL`): step = max(roofline, 4·L collectives), each collective max(1 µs × Σ|axis|/2 hops,
  2·B·D/(M_Y·W_ici)). With it: the 8x8's best batch (128, 13.4 ms) is compute-bound (bf16 matmul FLOPs 8.2 ms +
  KV loads 5.2 ms; the collectives' 11.7 ms overlapped), and the floor is 504 × 12 hops × 1 µs = 6.05 ms on the
  8x16 (4 + 8 hops). A book-style answer without hop latency (the weight load on a 256-chip pod, 1.9 ms) is not
  accepted: the question says which model to use.
"""

from __future__ import annotations

from functools import cache

from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.questions.ch08 import BF16, INT8W, V5E, shape
from scalebook_utils.questions.registry import add

L8, L405 = "llama3-8b", "llama3-405b"
#: q2: LLaMA 3-8B at batch 240, int8 weights and KV, our 8192-token sequences
Q2_BATCH, Q2_CONTEXT = 240, 8192
#: q3: LLaMA 3-405B, int8 weights, bf16 FLOPs, at most 15 ms per token, 8192-token contexts
Q3_LIMIT, Q3_CONTEXT = 15e-3, 8192
#: q3: the step-time model the answers depend on (inference.decode_step, book ch. 7 Appendix C), stated in the asks
Q3_MODEL = (
    "step time = max(KV loads + max(matmul FLOPs, weight loads), 4·L collectives per step), each collective "
    "(AllGather/ReduceScatter of the [B, D] bf16 activation, 4 per layer) taking max(1 µs per hop × "
    "Σ|axis|/2 hops, 2·B·D/(M_Y·9e10 B/s)) on the slice's M_Y torus axes (an 8x16 waits 4 + 8 = 12 hops)"
)


def _plan_label(n: int) -> str:
    return f"{shape(n)} ({n} chips), {n}-way model parallelism"


Q3_PLAN_OPTIONS = tuple(_plan_label(n) for n in (16, 32, 64, 128, 256)) + (
    "8x8 (64 chips), 16-way model parallelism × 4 replicas",
)
Q3_BEST_OPTIONS = tuple(
    f"{shape(n)} ({n} chips) at its highest-throughput batch under 15 ms" for n in (32, 64, 128, 256)
)


def _forward_405b(P, N, field: str) -> float:
    """One token's forward pass of a P-parameter LLaMA 3-405B-shaped model on N v5e chips, bf16."""
    return getattr(inf.prefill_time(inf.served_model(L405, params=P), 1, V5E, N, BF16, conventions="book"), field)


def q1_flops_bound(P, N):
    return _forward_405b(P, N, "t_math")


def q1_hbm_bound(P, N):
    return _forward_405b(P, N, "t_hbm_weights")


def q2_activation_bytes() -> float:
    """Peak working activations at one decode step: max(one layer's 20·D per token, logits [B, V]) in bf16."""
    return inf.decode_activation_bytes(L8, Q2_BATCH, BF16)


@cache
def q3_frontier() -> sv.Frontier:
    return sv.frontier(L405, V5E, INT8W, S=Q3_CONTEXT)


def q3_plan() -> str:
    """Smallest slice whose batch-1 step meets the limit, pure model parallelism over it."""
    return _plan_label(q3_frontier().smallest_under(Q3_LIMIT).n_chips)


def q3_best() -> sv.ServingPoint:
    return q3_frontier().best_under(Q3_LIMIT)


# --- the worked problems ------------------------------------------------------------------------------

add(
    "ch8.q1a",
    "number",
    "Worked problem 1: LLaMA 3-405B (L=126, D=16,384, F=53,248, N=128, K=8, H=128, V=128,256): "
    "forward FLOPs per token (2 · params)",
    lambda: inf.prefill_time(L405, 1, V5E, conventions="book").flops,
    unit="FLOPs",
    note="Not answered in the book. 2 · 405.9e9 = 8.1e11 (2·matmul params without the embedding lookup is "
    "0.5% less, also accepted).",
)
add(
    "ch8.q1b",
    "formula",
    "Same: lower bound (s) on one token's forward pass on N v5e chips if FLOPs-bound, as a "
    "function of the parameter count P and N",
    lambda: q1_flops_bound,
    unit="s",
    variables=("P", "N"),
    domains={"P": (1e9, 1e12), "N": (1.0, 4096.0)},
    note="Not answered in the book. 2·P/(N·1.97e14).",
)
add(
    "ch8.q1c",
    "formula",
    "Same: lower bound (s) if bound by loading the bf16 weights from HBM, as a function of P and N",
    lambda: q1_hbm_bound,
    unit="s",
    variables=("P", "N"),
    domains={"P": (1e9, 1e12), "N": (1.0, 4096.0)},
    note="Not answered in the book. 2·P/(N·8.2e11): 240× the FLOPs bound at batch 1.",
)
add(
    "ch8.q2a",
    "number",
    "Worked problem 2: LLaMA 3-8B at batch 240, int8 weights and KV cache, 8192-token sequences: parameter bytes",
    lambda: inf.served_model(L8).weight_bytes(INT8W),
    unit="bytes",
    note="Not answered in the book. 8.03e9 B.",
)
add(
    "ch8.q2b",
    "number",
    "Same: KV-cache bytes",
    lambda: inf.kv_cache_bytes(L8, Q2_BATCH, Q2_CONTEXT, INT8W),
    unit="bytes",
    note="Not answered in the book; the sequence length is ours. 240 · 8192 · 65,536 B = 129 GB.",
)
add(
    "ch8.q2c",
    "number",
    "Same: peak working-activation bytes at a decode step (the larger of one layer's "
    "intermediates, 20·D per token, and the logits [B, V], bf16) — roughly",
    q2_activation_bytes,
    unit="bytes",
    rtol=0.5,
    note="Not answered in the book. Logits 240 · 128,256 · 2 = 62 MB (one layer: 39 MB): negligible.",
)
add(
    "ch8.q2d",
    "number",
    "Same: the smallest v5e topology (chips, a power of two) that holds weights and KV caches",
    lambda: inf.min_chips(L8, V5E, INT8W, B=Q2_BATCH, S=Q2_CONTEXT),
    unit="count",
    rtol=0.01,
    note="Not answered in the book. 137 GB / 16 GB = 8.6 → 9 → 16 chips (a 4x4).",
)
add(
    "ch8.q3a",
    "choice",
    "Worked problem 3: serve LLaMA 3-405B on v5e with int8 weights and KV, bf16 FLOPs, at most "
    f"15 ms per token, 8192-token contexts, pure model parallelism over power-of-two slices; {Q3_MODEL}: the "
    "serving plan (the smallest slice that meets the limit, and its sharding)",
    q3_plan,
    options=Q3_PLAN_OPTIONS,
    note="Not answered in the book. 406 GB / (N · 8.2e11) ≤ 15 ms needs N ≥ 33 → 64 chips; 4 replicas of 16-way "
    "MP would need 25 GB of weights per chip.",
)
add(
    "ch8.q3b",
    "choice",
    "Same, with the same step-time model: the highest-throughput configuration under 15 ms "
    "(serving.frontier(...).best_under)",
    lambda: next(o for o in Q3_BEST_OPTIONS if o.startswith(f"{shape(q3_best().n_chips)} ({q3_best().n_chips} ")),
    options=Q3_BEST_OPTIONS,
    note="Not answered in the book. Batch 128 on the 8x8: 13.4 ms, 149 tokens/s/chip, compute-bound (128 > "
    "B_crit = 120: bf16 matmul FLOPs 8.2 ms + KV loads 5.2 ms; the TP collectives' 11.7 ms are overlapped). "
    "On the 8x16 the collectives are the limit: 85 tokens/s/chip.",
)
add(
    "ch8.q3c",
    "number",
    "Same, with the same step-time model (4·L = 504 collectives per step, each at least "
    "1 µs per hop × Σ|axis|/2 hops): the theoretical minimum step time over every slice and batch",
    lambda: q3_frontier().pareto[0].latency,
    unit="s",
    rtol=0.05,
    note="Not answered in the book. 6.05 ms on the 8x16 (128 chips) at any batch up to ≈ 64: the weights read in "
    "3.9 ms there, but 4·126 = 504 collectives × (4 + 8) hops × 1 µs = 6.05 ms set the floor (8x8: 7.7 ms "
    "of weight loads; 16x16: 16 hops, 8.06 ms).",
)
