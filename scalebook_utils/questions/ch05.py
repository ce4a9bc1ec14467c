"""Chapter 5 — Parallelizing training: the questions of "How to Parallelize a Transformer for Training".

Every expected value is computed with `training` (α, the compute-bound thresholds, X_opt, memory,
training time), `transformer` (LLaMA-2 13B and LLaMA 3-70B parameter counts) and `hardware` (TPU v5p:
4.59e14 bf16 FLOPs/s, W_ici = 1.8e11 B/s per axis, 96 GB HBM, 8960-chip pod). Where the book states a
rounded input (F ≈ 30,000 for LLaMA 3-70B, F ≈ 50k for Gemma 7B, a 40M-token batch) the module keeps it
as a named constant and says so; "2M"/"16M" batches are read as SI (2e6, 16e6) unless a row says
otherwise. Degrees chosen from X_opt use `training.round_pow2` (see `fsdp_tp_degrees`).
"""

from __future__ import annotations

import math

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as tr
from scalebook_utils.questions.registry import add

V5P = "tpu-v5p"
#: a full TPU v5p pod (16×20×28); the book's ch5.e9 also calls the maximum pod "8k chips"
POD = get_chip(V5P).pod_chips
#: hardware axes of a v5p slice: pure DP/FSDP spans all 3; mixed FSDP+TP puts TP on 1 and FSDP on 2
AXES = get_chip(V5P).ici_torus_dims

#: ch5.e3: DeepSeek-V2's batch, in tokens (book: "about 40M").
E3_BATCH = 40e6
#: ch5.e4: LLaMA 3-70B, 15T tokens, a 16M-token batch, 50% MFU.
E4_TOKENS, E4_BATCH, E4_MFU = 15e12, 16e6, 0.5
#: ch5.e5 / ch5.e9: the book's round d_ff for LLaMA 3-70B (the model's is 28,672) and for Gemma 7B.
F_LLAMA3_70B_BOOK, F_GEMMA_7B_BOOK = 30_000, 50_000
E5_DEGREES = (8, 16)
E5_OPTIONS = ("both compute-bound", "8-way compute-bound, 16-way comm-bound", "both comm-bound")
#: ch5.e6: a v5p 4×4×4 slice, batch 48,000 tokens, F = 32,768, M_X/M_Y = 2.
E6_N, E6_B, E6_F = 64, 48_000, 32_768
#: ch5.e7 and ch5.e8: F = 32,768 = 4·8192; the e8 slice is a v5p 16×16×16.
E7_F, E8_N = 32_768, 16 * 16 * 16
#: ch5.e9: LLaMA 3-70B with a 2M-token batch; the recipe is for a 1M batch on one pod.
E9_BATCH, E9_RECIPE_BATCH = 2e6, 1e6
#: ch5.q1–q3: LLaMA-2 13B; q2 a 16M-token batch; q3 3M tokens on a v5p 16×16×16, 40% MFU.
LLAMA2 = "llama2-13b"
Q2_BATCH = 16e6
Q3_BATCH, Q3_N, Q3_MFU = 3e6, 16 * 16 * 16, 0.4
YES_NO = ("yes", "no")


# --- helpers (shared with ch06) ------------------------------------------------------------------------

fsdp_tp_degrees = tr.fsdp_tp_degrees


def llama2_checkpoint_bytes(tokens: float) -> float:
    """Ch5.q2/q3 checkpoints: after the three big FFW matmuls, one [B, D] and two [B, F] in bf16 per
    layer = 2·L·B·(D + 2F) bytes (`checkpoint_bytes` with (D + 2F)/D tensors of width D per layer)."""
    cfg = tf.get_model(LLAMA2)
    return tr.checkpoint_bytes(cfg.D, cfg.L, tokens, per_layer=(cfg.D + 2 * cfg.F) / cfg.D)


def _p(model: str) -> int:
    return tf.param_count(model).total


def _llama2_state_bytes() -> float:
    """bf16 parameters + fp32 Adam moments, 10 bytes per parameter (no parallelism)."""
    return tr.training_memory(_p(LLAMA2), zero=0).total


def _e5a() -> str:
    ymax = tr.tp_max_degree(F_LLAMA3_70B_BOOK, V5P)
    ok = [y < ymax for y in E5_DEGREES]
    return E5_OPTIONS[0] if all(ok) else E5_OPTIONS[1] if ok[0] else E5_OPTIONS[2]


def _q3_memory():
    """Pure FSDP of LLaMA-2 13B over 4096 chips: params + optimizer sharded, checkpoints spread evenly."""
    return tr.training_memory(
        _p(LLAMA2), zero=3, X=Q3_N, activation_bytes_total=llama2_checkpoint_bytes(Q3_BATCH), n_chips=Q3_N
    )


def q3_step_time() -> float:
    """Ch5.q3k: 6 FLOPs per token per matmul parameter (ch. 4's count: the embedding lookup is no matmul;
    dot-product attention ignored, as the chapter's MLP model does) / (4096 · C · 40%)."""
    flops = 6 * tf.matmul_params(tf.get_model(LLAMA2)) * Q3_BATCH
    return flops / (Q3_N * get_chip(V5P).peak_flops("bf16") * Q3_MFU)


# --- the registry -------------------------------------------------------------------------------------

add(
    "ch5.e1",
    "number",
    "Largest model trainable with pure data parallelism + Adam (bf16 params + fp32 moments, "
    "10 bytes/param) on one 96 GB TPU v5p",
    lambda: tr.max_params_pure_dp(V5P),
    unit="params",
    accept=(8.73e09, 9.6e09),
    note="DISAGREES: 96e9/10 = 9.6e9 exactly; the book rounds to '≈9B' (6.7% lower). Both accepted.",
)
add(
    "ch5.e2a",
    "number",
    "Min batch per chip (tokens) for data parallelism to be compute-bound on v5p over one ICI "
    "axis: C/W_ici = 4.59e14/1.8e11",
    lambda: tr.dp_min_batch_per_chip(V5P, M_X=1),
    unit="tokens",
    accept=(2473, 2627),
)
add(
    "ch5.e2b",
    "number",
    "Same with the data axis spanning all 3 ICI axes of the v5p torus (tokens per chip)",
    lambda: tr.dp_min_batch_per_chip(V5P, M_X=AXES),
    unit="tokens",
)
add(
    "ch5.e2c",
    "number",
    "Same: min total batch (tokens) for a full 8960-chip v5p pod, 3 axes",
    lambda: tr.dp_min_batch_per_chip(V5P, M_X=AXES) * POD,
    unit="tokens",
    accept=(7.372e06, 7.828e06),
)
add(
    "ch5.e3",
    "number",
    "Chips that pure FSDP can use compute-bound with a 40M-token batch (DeepSeek-V2) at 850 "
    "tokens per chip (v5p, 3 axes): ⌊40e6/850⌋",
    lambda: math.floor(E3_BATCH / tr.dp_min_batch_per_chip(V5P, M_X=AXES)),
    unit="count",
    note="Book: '~47,000 chips (~5 TPU v5 pods)'; 40e6/850 = 47,059.",
)
add(
    "ch5.e4a",
    "number",
    "LLaMA 3-70B training FLOPs on 15T tokens: 6 · params · tokens",
    lambda: 6 * _p("llama3-70b") * E4_TOKENS,
    unit="FLOPs",
    accept=(6.111e24, 6.489e24),
    note="Package: 70.55e9 parameters (LLaMA 3-70B config) → 6.35e24; the book uses 70e9 → 6.3e24.",
)
add(
    "ch5.e4b",
    "number",
    "Same: chips that FSDP can use compute-bound with a 16M-token batch at 850 tokens per chip (2550/3): ⌊16e6/850⌋",
    lambda: math.floor(E4_BATCH / tr.dp_min_batch_per_chip(V5P, M_X=AXES)),
    unit="count",
    note="Book: 18,823 (~2 pods).",
)
add(
    "ch5.e4c",
    "number",
    "Same: training time in seconds on those chips at 4.59e14 bf16 FLOPs/s and 50% MFU",
    lambda: tr.training_time(
        _p("llama3-70b"), E4_TOKENS, math.floor(E4_BATCH / tr.dp_min_batch_per_chip(V5P, M_X=AXES)), V5P, mfu=E4_MFU
    ),
    unit="s",
    accept=(1.424e06, 1.513e06),
    note="Book: '~17 days' (17.0 days = 1.47e6 s).",
)
add(
    "ch5.e5a",
    "choice",
    "LLaMA 3-70B (F ≈ 30,000) on v5p with tensor parallelism on one ICI axis (compute-bound "
    "while Y < F/2550): 8-way vs 16-way",
    _e5a,
    options=E5_OPTIONS,
    note="Decided with training.tp_max_degree(30,000) = 11.8 (with the model's F = 28,672: 11.2, same verdict).",
)
add(
    "ch5.e5b",
    "number",
    "Same: d_ff needed for 8-way TP on one v5p axis to stay compute-bound (8 · 2550)",
    lambda: tr.tp_min_F(8, V5P),
    unit="count",
    accept=(1.94e04, 2.06e04),
    note="8 × 2550 = 20,400; the book says '20k'.",
)
add(
    "ch5.e5c",
    "number",
    "TP degree (on one v5p axis) at which Gemma 7B (F ≈ 50,000) becomes comm-bound: F/2550",
    lambda: tr.tp_max_degree(F_GEMMA_7B_BOOK, V5P),
    unit="count",
    accept=(18.43, 19.61),
    note="50,000/2550 = 19.6; the book says '19-way'.",
)
add(
    "ch5.e6a",
    "number",
    "Optimal FSDP degree X_opt = sqrt((B/F)·(M_X/M_Y)·N) for N = 64 (v5p 4x4x4), B = 48,000 "
    "tokens, F = 32,768, M_X/M_Y = 2 (real-valued)",
    lambda: tr.optimal_fsdp_degree(E6_B, E6_F, E6_N, M_X=2, M_Y=1),
    unit="count",
    note="The formula gives 13.69; the book prints 13.9 (1.5% higher, inside the 3% tolerance, so accepted). "
    "Without the factor M_X/M_Y = 2 it would be 9.68.",
)
add(
    "ch5.e6b",
    "number",
    "Same: FSDP degree X chosen (a power of two near X_opt)",
    lambda: fsdp_tp_degrees(E6_B, E6_F, E6_N)[0],
    unit="count",
    accept=(16, 16),
    note="round_pow2(13.7) = 16 (log2 13.7 = 3.78).",
)
add(
    "ch5.e6c",
    "number",
    "Same: TP degree Y = N/X",
    lambda: fsdp_tp_degrees(E6_B, E6_F, E6_N)[1],
    unit="count",
    accept=(4, 4),
)
add(
    "ch5.e7",
    "number",
    "Min batch per chip (tokens) for mixed FSDP+TP at the optimal split: α²/(M_X·M_Y·F), "
    "α = 2550, M_X·M_Y = 2, F = 32,768",
    lambda: tr.mixed_min_batch_per_chip(E7_F, V5P, M_X=2, M_Y=1),
    unit="tokens",
    accept=(96.03, 102),
    note="≈ 8.6× less than pure FSDP's 850.",
)
add(
    "ch5.e8",
    "number",
    "Predicted total batch (tokens) below which every strategy is comm-bound on a v5p 16x16x16: "
    "N·α²/(2F), N = 4096, F = 4·8192",
    lambda: tr.all_comm_bound_batch(E8_N, E7_F, V5P, M_X=2, M_Y=1),
    unit="tokens",
    accept=(3.88e05, 4.12e05),
    note="4096 · 2550² / (2 · 32,768) = 406,406. The book's figure shows the crossing near 6e5 (not accepted: the "
    "example asks for the formula's prediction).",
)
add(
    "ch5.e9a",
    "number",
    "LLaMA 3-70B (F ≈ 30,000) on v5p: largest integer TP degree on one ICI axis that stays compute-bound (⌊F/2550⌋)",
    lambda: math.floor(tr.tp_max_degree(F_LLAMA3_70B_BOOK, V5P)),
    unit="count",
    accept=(10.67, 11.77),
    note="F/2550 = 11.76; the book writes Y ≈ 11·M_Y.",
)
add(
    "ch5.e9b",
    "number",
    "Same, 2M-token batch: max chips for pure FSDP over 3 axes (B/N > 850): ⌊2e6/850⌋",
    lambda: math.floor(E9_BATCH / tr.dp_min_batch_per_chip(V5P, M_X=AXES)),
    unit="count",
    accept=(2328, 2472),
    note="2e6/850 = 2352; the book says '≈2400 chips (~1/4 pod)'. 2·2^20/850 = 2467 is also accepted.",
)
add(
    "ch5.e9c",
    "number",
    "Same: min batch per chip (tokens) for FSDP+TP, 2550²/(2F) with F = 30,000",
    lambda: tr.mixed_min_batch_per_chip(F_LLAMA3_70B_BOOK, V5P, M_X=2, M_Y=1),
    unit="tokens",
    accept=(104.7, 111.3),
)
add(
    "ch5.e9d",
    "number",
    "Same: max chips for FSDP+TP compute-bound with the 2M batch: ⌊2e6/(2550²/(2F))⌋",
    lambda: math.floor(E9_BATCH / tr.mixed_min_batch_per_chip(F_LLAMA3_70B_BOOK, V5P, M_X=2, M_Y=1)),
    unit="count",
    accept=(1.746e04, 1.854e04),
    note="18,454: more than one pod (the book: '~18k chips' vs an '8k' pod maximum), so the rest goes over DCN.",
)
add(
    "ch5.e9e",
    "number",
    "Same: recipe for a 1M-token batch on one v5p pod: FSDP degree X (X_opt = sqrt(2BN/F) "
    "rounded to a power of two; N = 8960, F = 30,000)",
    lambda: fsdp_tp_degrees(E9_RECIPE_BATCH, F_LLAMA3_70B_BOOK, POD)[0],
    unit="count",
    accept=(1024, 1024),
    note="X_opt = 773 → 1024.",
)
add(
    "ch5.e9f",
    "number",
    "Same: TP degree Y (the largest power of two with X·Y ≤ 8960)",
    lambda: fsdp_tp_degrees(E9_RECIPE_BATCH, F_LLAMA3_70B_BOOK, POD)[1],
    unit="count",
    accept=(8, 8),
    note="8960/1024 = 8.75 → 8: the layout uses 8192 chips, the book's '8k' pod. Y = 8 < F/2550 = 11.8.",
)
add(
    "ch5.e9g",
    "number",
    "Same: a 2M-token batch on 2 full pods (pure DP across pods over DCN): batch per TPU (tokens)",
    lambda: E9_BATCH / (2 * POD),
    unit="tokens",
    accept=(107.6, 117.1),
    note="2e6/17,920 = 111.6, just above 108 ('cutting it a bit close'); each pod's 1M ≫ 73,440 for DCN. "
    "The binary reading 2^20/8960 = 117 is also accepted.",
)
add(
    "ch5.q1a",
    "number",
    "LLaMA-2 13B (L=40, D=5120, F=13,824, N=K=40, H=128, V=32,000): FFW parameters 3·L·D·F",
    lambda: tf.param_count(LLAMA2).mlp,
    unit="params",
    accept=(8.245e09, 8.755e09),
)
add(
    "ch5.q1b",
    "number",
    "Same: attention parameters 4·D·N·H·L",
    lambda: tf.param_count(LLAMA2).attention,
    unit="params",
    accept=(4.074e09, 4.326e09),
)
add(
    "ch5.q1c",
    "number",
    "Same: vocabulary parameters 2·V·D (separate input and output embeddings)",
    lambda: tf.param_count(LLAMA2).embedding + tf.param_count(LLAMA2).unembedding,
    unit="params",
    accept=(3e08, 3.399e08),
    note="3.28e8; an older version printed 0.3e9.",
)
add(
    "ch5.q1d",
    "number",
    "Same: total parameters",
    lambda: _p(LLAMA2),
    unit="params",
    accept=(1.261e10, 1.339e10),
    note="13.016e9 with the 2 RMSNorm vectors per layer (0.4M; the book ignores them). An older version printed "
    "13.1e9.",
)
add(
    "ch5.q2a",
    "number",
    "LLaMA-2 13B, 16M-token batch, Adam, no parallelism: bytes of bf16 params + fp32 moments (10 bytes/param)",
    _llama2_state_bytes,
    unit="bytes",
    accept=(1.261e11, 1.339e11),
)
add(
    "ch5.q2b",
    "number",
    "Same: bytes of activation checkpoints (3 per layer after the big FFW matmuls: two [B,F], "
    "one [B,D], bf16) = 2·L·B·(D + 2F), B = 16e6",
    lambda: llama2_checkpoint_bytes(Q2_BATCH),
    unit="bytes",
    accept=(4.074e13, 4.399e13),
    note="4.19e13; the binary reading of 16M (16·2^20) gives 4.40e13, also accepted.",
)
add(
    "ch5.q2c",
    "number",
    "Same: total memory (bytes)",
    lambda: _llama2_state_bytes() + llama2_checkpoint_bytes(Q2_BATCH),
    unit="bytes",
    accept=(4.074e13, 4.326e13),
    note="Book: '≈42 TB'; the checkpoints dominate (0.13 TB of parameters and optimizer).",
)
add(
    "ch5.q3a",
    "choice",
    "LLaMA-2 13B, 32k-token sequences, 3M-token batch, v5p 16x16x16 (4096 chips): can pure data parallelism be used?",
    lambda: YES_NO[_p(LLAMA2) > tr.max_params_pure_dp(V5P)],
    options=YES_NO,
    note="Decided by memory: 10 bytes × 13.0e9 = 130 GB of params + optimizer per chip > 96 GB HBM.",
)
add(
    "ch5.q3b",
    "number",
    "Same, pure FSDP: total memory in bytes (checkpoints 2·L·B·(D + 2F) with B = 3e6, plus 10 bytes/param)",
    lambda: llama2_checkpoint_bytes(Q3_BATCH) + _llama2_state_bytes(),
    unit="bytes",
    accept=(7.76e12, 8.377e12),
    note="Book: '≈8 TB' (checkpoints 7.86e12). 96 sequences × 32,768 tokens gives 8.38e12, also accepted.",
)
add(
    "ch5.q3c",
    "number",
    "Same: memory per device (bytes) under pure FSDP over all 4096 chips: params and optimizer "
    "sharded 4096 ways, checkpoints spread evenly (training.training_memory with ZeRO-3)",
    lambda: _q3_memory().total,
    unit="bytes",
    note="Not answered in the book (it prints only the 8 TB total, ≪ 4096 × 96 GB = 393 TB). Package: "
    "7.99e12 / 4096 = 1.95 GB per chip.",
)
add(
    "ch5.q3d",
    "number",
    "Same: min total batch (tokens) for pure FSDP to be compute-bound on 4096 chips over 3 axes (850 × 4096)",
    lambda: tr.dp_min_batch_per_chip(V5P, M_X=AXES) * Q3_N,
    unit="tokens",
    accept=(3.375e06, 3.585e06),
)
add(
    "ch5.q3e",
    "choice",
    "Same: is pure FSDP compute-bound with the 3M-token batch?",
    lambda: YES_NO[Q3_BATCH / Q3_N < tr.dp_min_batch_per_chip(V5P, M_X=AXES)],
    options=YES_NO,
    note="732 tokens per chip < 850.",
)
add(
    "ch5.q3f",
    "number",
    "Same, mixed FSDP+TP: min batch per chip (tokens), 2550²/(2F) with F = 13,824",
    lambda: tr.mixed_min_batch_per_chip(tf.get_model(LLAMA2).F, V5P, M_X=2, M_Y=1),
    unit="tokens",
    note="235 tokens per chip, well below the 732 available: mixed FSDP+TP is compute-bound.",
)
add(
    "ch5.q3g",
    "number",
    "Same: batch per chip (tokens) 3e6/4096",
    lambda: Q3_BATCH / Q3_N,
    unit="tokens",
    accept=(710, 754),
)
add(
    "ch5.q3h",
    "number",
    "Same: X_opt = sqrt(2·B·N/F) with B = 3e6, N = 4096, F = 13,824 (real-valued)",
    lambda: tr.optimal_fsdp_degree(Q3_BATCH, tf.get_model(LLAMA2).F, Q3_N, M_X=2, M_Y=1),
    unit="count",
    accept=(1293, 1373),
    note="The current text writes X_opt = sqrt((B/F)·(M_X/M_Y)·N) with M_X/M_Y = 2.",
)
add(
    "ch5.q3i",
    "number",
    "Same: FSDP degree X chosen (a power of two near X_opt)",
    lambda: fsdp_tp_degrees(Q3_BATCH, tf.get_model(LLAMA2).F, Q3_N)[0],
    unit="count",
    accept=(1024, 1024),
    note="round_pow2(1333) = 1024.",
)
add(
    "ch5.q3j",
    "number",
    "Same: TP degree Y = 4096/X",
    lambda: fsdp_tp_degrees(Q3_BATCH, tf.get_model(LLAMA2).F, Q3_N)[1],
    unit="count",
    accept=(4, 4),
)
add(
    "ch5.q3k",
    "number",
    "Same: step time in seconds at 40% MFU: 6·(params)·3e6 / (4096 · C · 0.4)",
    q3_step_time,
    unit="s",
    accept=(0.291, 0.3125),
    note="Book: '300ms'. Package: 6 FLOPs per matmul parameter (12.85e9: the 0.16e9 input-embedding lookup is no "
    "matmul) → 0.308 s; 6·13e9 at 4.59e14 gives 0.311 s, and the full 13.016e9 gives 0.3115 s (accepted "
    "since PROBLEMS.md widened the range to 0.3125). The old answer (2·2550²/F = 940 with 4-chip TP) used the old "
    "additive comm model; not accepted.",
)
