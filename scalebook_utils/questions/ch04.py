"""Chapter 4 — Transformer math: the questions of "All the Transformer Math You Need to Know" (book ch. 4).

Every expected value is computed with `transformer` (parameter, FLOP, KV-cache and intensity accounting),
`roofline` (matmul FLOPs, T_math), `sharding` (mesh sizes, replication) and `hardware` (TPU v5e).
Formula answers are compared to 1e-6 at sample points, so where the book rounds a chip constant inside a
formula (ch4.q8a: 240 FLOPs/byte for v5e's 1.97e14/8.2e11 = 240.2) the expected formula rounds it the same
way, and the `asks` says so.
"""

from __future__ import annotations

import dataclasses

from scalebook_utils.core import roofline as rl
from scalebook_utils.core import sharding as sh
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.questions.registry import add

V5E = "tpu-v5e"
BOOK_CH4 = "book-ch4"

#: ch4.q2: A[B_X, D_Y] ·_D W[D_Y, F] on this mesh.
Q2_MESH = "{X: 4, Y: 8, Z: 4}"
Q2_A = "A[B_X, D_Y]"
#: ch4.q4e: the group sizes G and KV lengths S over which the choice is decided (MHA … GQA with G = 16).
Q4E_G, Q4E_S = (1, 2, 4, 8, 16), (1024, 32_768, 1_048_576)
Q4E_OPTIONS = ("yes, at large enough batch", "no: intensity ≤ G (small) regardless of batch")
#: ch4.q7: DeepSeek v3 as the question states it.
Q7_ACTIVE_PARAMS = 37e9
Q7_TOKENS = 14.8e12
Q7_GPU_HOURS = 2.79e6
Q7_H800_FP8_SPARSE = 3.026e15  # FLOPs/s, the spec sheet's number "with sparsity"; dense is half
#: ch4.q8b: DeepSeek v3's routed experts (E = 256, k = 8).
DEEPSEEK = "deepseek-v3-like"


# --- helpers ------------------------------------------------------------------------------------------


def _mha(D: float, F: float | None = None) -> tf.TransformerConfig:
    """One MHA layer with a single head of width D (only N·H = D matters) and a gated MLP (F = 4D by default)."""
    D = int(D)
    return tf.TransformerConfig("ch4-mha", L=1, D=D, F=int(F) if F else 4 * D, N=1, K=1, H=D, V=1)


def _q2_flops_per_device(B, D, F):
    """FLOPs on one TPU: the local [B/X, D/Y] · [D/Y, F] matmul (a partial sum over Y)."""
    mesh = sh.parse_mesh(Q2_MESH)
    return rl.matmul_flops(B, D, F) / mesh.axes_size(("X", "Y"))


def _q2_flops_executed(B, D, F):
    """FLOPs summed over all chips: every Z-replica repeats the theoretical 2BDF."""
    return rl.matmul_flops(B, D, F) * sh.replication(Q2_A, Q2_MESH)


def _q3(I, J, K, L, M, N, O):
    """A[I,J,K,L]·B[I,J,M,N,O] → C[K,L,M,N,O] as one matmul [K·L, I·J] · [I·J, M·N·O]."""
    return rl.matmul_flops(K * L, I * J, M * N * O)


def _q4e() -> str:
    """Decode attention (T = 1) against v5e's critical intensity, for every G and S; batch does not enter
    (each sequence reads its own KV cache)."""
    alpha = get_chip(V5E).critical_intensity("bf16")
    worst = max(tf.attention_intensity(1, S, G) for G in Q4E_G for S in Q4E_S)
    return Q4E_OPTIONS[0] if worst >= alpha else Q4E_OPTIONS[1]


def _q4f(T, D, F):
    """Dot-product attention FLOPs ÷ gated-MLP FLOPs in one MHA layer (N·H = D): 4BT²D / 6BTDF = 2T/(3F)."""
    cfg = _mha(D, F)
    return tf.attention_flops(cfg, T) / tf.mlp_flops(cfg, T)


def _q6(B, T, N, H):
    """Recomputed forward FLOPs per layer when only the 7 big matmul outputs are saved (softmax(QKᵀ)·V)."""
    N, H = int(N), int(H)
    cfg = tf.TransformerConfig("ch4-q6", L=1, D=N * H, F=N * H, N=N, K=N, H=H, V=1)
    return tf.remat_recompute_flops_per_token(cfg, T, "big_matmuls") * B * T


def _q7() -> float:
    """MFU = (time the training FLOPs would take at dense FP8 peak) ÷ (GPU-seconds actually used)."""
    flops = 6 * Q7_ACTIVE_PARAMS * Q7_TOKENS
    ideal_s = rl.t_math(flops, Q7_H800_FP8_SPARSE / 2)
    return ideal_s / (Q7_GPU_HOURS * 3600)


def v5e_as_the_book_rounds_it() -> ChipSpec:
    """TPU v5e with its critical intensity rounded to the book's 240 FLOPs/byte (1.97e14/8.2e11 = 240.2)."""
    c = get_chip(V5E)
    alpha = round(c.critical_intensity("bf16"))
    return dataclasses.replace(c, hbm_bandwidth_bytes_per_s=c.peak_flops("bf16") / alpha)


def _q8a(E, k):
    cfg = tf.TransformerConfig("ch4-q8", L=1, D=128, F=128, N=1, K=1, H=128, V=1, E=int(E), k=int(k))
    return tf.moe_critical_batch(cfg, chip=v5e_as_the_book_rounds_it(), weight_dtype="int8", flops_dtype="bf16")


# --- the registry -------------------------------------------------------------------------------------

add(
    "ch4.q1a",
    "number",
    "D=4096, F=4D, V=32,000, L=64, N·H=D (MHA, 2 norms per layer, untied embedding and "
    "unembedding): total parameter count L·(3DF + 4DNH + 2D) + 2DV",
    lambda: tf.param_count(BOOK_CH4).total,
    unit="params",
    accept=(1.552e10, 1.745e10),
    note="DISAGREES: the stated config gives 17.44e9 exactly; the book's '16B' comes from rounding D ≈ 4e3 and "
    "F ≈ 16e3 (≈16.6e9). Both are accepted.",
)
add(
    "ch4.q1b",
    "number",
    "Same model: fraction of the per-layer parameters that sit in attention, 4DNH / (4DNH + 3DF)",
    lambda: tf.param_count(BOOK_CH4).attention_fraction,
    unit="",
    accept=(0.2425, 0.2575),
    note="Exactly 1/4 for F = 4D, NH = D; 0.246 if embeddings and norms are counted too.",
)
add(
    "ch4.q1c",
    "number",
    "Same model: KV-cache bytes per token with an int8 cache, 2·L·N·H",
    lambda: tf.kv_cache_bytes_per_token(tf.get_model(BOOK_CH4), "int8"),
    unit="bytes",
)
add(
    "ch4.q2a",
    "formula",
    "A[B_X, D_Y] ·_D W[D_Y, F] on a mesh {X: 4, Y: 8, Z: 4}: total FLOPs in theory "
    "(the unsharded matmul), as a function of B, D, F",
    lambda: rl.matmul_flops,
    unit="FLOPs",
    variables=("B", "D", "F"),
)
add(
    "ch4.q2b",
    "formula",
    "Same: FLOPs actually executed, summed over all 128 chips (the work is repeated on each of the Z = 4 replicas)",
    lambda: _q2_flops_executed,
    unit="FLOPs",
    variables=("B", "D", "F"),
)
add(
    "ch4.q2c",
    "formula",
    "Same: FLOPs executed by one TPU",
    lambda: _q2_flops_per_device,
    unit="FLOPs",
    variables=("B", "D", "F"),
    note="General form 2BDF/(|X|·|Y|); the Y-partial sums still need a reduction.",
)
add(
    "ch4.q3",
    "formula",
    "FLOPs of the contraction A[I,J,K,L] · B[I,J,M,N,O] → C[K,L,M,N,O] (I and J are "
    "contracted), as a function of I, J, K, L, M, N, O",
    lambda: _q3,
    unit="FLOPs",
    variables=("I", "J", "K", "L", "M", "N", "O"),
    domains={v: (2.0, 512.0) for v in "IJKLMNO"},
)
add(
    "ch4.q4a",
    "formula",
    "Arithmetic intensity (FLOPs/byte) of grouped-query attention without the projections, "
    "bf16, with a kernel that reads Q, K, V and writes O once: T queries, S keys, G query heads per KV head; "
    "a function of T, S, G",
    lambda: tf.attention_intensity,
    unit="FLOPs/byte",
    variables=("T", "S", "G"),
    domains={"T": (1.0, 131072.0), "S": (1.0, 131072.0), "G": (1.0, 64.0)},
)
add(
    "ch4.q4b",
    "formula",
    "Same at prefill or training (self-attention, S = T): a function of T, G",
    lambda: lambda T, G: tf.attention_intensity(T, T, G),
    unit="FLOPs/byte",
    variables=("T", "G"),
    domains={"T": (1.0, 131072.0), "G": (1.0, 64.0)},
)
add(
    "ch4.q4c",
    "formula",
    "Same at generation (one query per sequence, T = 1): a function of S, G",
    lambda: lambda S, G: tf.attention_intensity(1, S, G),
    unit="FLOPs/byte",
    variables=("S", "G"),
    domains={"S": (1.0, 131072.0), "G": (1.0, 64.0)},
    note="Tends to G for S ≫ G.",
)
add(
    "ch4.q4d",
    "number",
    "Same: the sequence length above which prefill/training attention is compute-bound on a "
    "TPU v5e (bf16), in the book's large-G reading where TG/(G+1) ≈ T",
    lambda: get_chip(V5E).critical_intensity("bf16"),
    unit="tokens",
    accept=(232.8, 480.5),
    note="DISAGREES: the book says compute-bound above ≈240 tokens, which is the G → ∞ limit of "
    "TG/(G+1) > 240.2. The exact threshold is 240.2·(G+1)/G: 480 for MHA (G = 1), 270 for G = 8. The "
    "expected value is the book's stated one (the v5e critical intensity); anything from it up to the MHA "
    "value 480.5 is accepted.",
)
add(
    "ch4.q4e",
    "choice",
    "Same: can attention during generation (T = 1) ever be compute-bound on a TPU?",
    _q4e,
    options=Q4E_OPTIONS,
    note="Decided with the package: S·G/(S + G) < G ≤ 16 ≪ 240 for every G ≤ 16 and S ≤ 1M; batching does not "
    "help because every sequence streams its own KV cache.",
)
add(
    "ch4.q4f",
    "formula",
    "Same (the plot the book asks for): dot-product attention FLOPs (QKᵀ and PV, no "
    "projections, no causal saving) ÷ FLOPs of the gated 3-matrix MLP, in one MHA layer with N·H = D, as a "
    "function of T, D, F (write all three arguments even if one drops out)",
    lambda: _q4f,
    unit="",
    variables=("T", "D", "F"),
    domains={"T": (128.0, 131072.0), "D": (128.0, 16384.0), "F": (128.0, 65536.0)},
    note="Not answered in the book (it asks for a plot). 4BT²D / 6BTDF = 2T/(3F): D cancels; attention "
    "overtakes the MLP at T = 1.5F (6D for F = 4D).",
)
add(
    "ch4.q5",
    "formula",
    "Sequence length T at which the self-attention FLOPs (QKᵀ, PV) equal the Q, K, V, O "
    "projection FLOPs in an MHA layer (N·H = D), as a function of D",
    lambda: lambda D: tf.attention_projection_crossover(_mha(D)),
    unit="tokens",
    variables=("D",),
    note="Training: 24BTDNH = 12BT²NH ⇒ T = 2D; the book's example is 8192 for D = 4096.",
)
add(
    "ch4.q6",
    "formula",
    "Per layer, extra forward FLOPs recomputed in the backward pass when only the outputs "
    "of the 7 big matmuls (Q, K, V, O, W1, W2, W3) are saved; ignore O(BTD) and O(BTF) elementwise work; "
    "a function of B, T, N, H",
    lambda: _q6,
    unit="FLOPs",
    variables=("B", "T", "N", "H"),
    domains={"B": (1.0, 1024.0), "T": (128.0, 131072.0), "N": (1.0, 128.0), "H": (32.0, 256.0)},
    note="The attention's QKᵀ and PV must be redone: 4BT²NH. The newest text adds O(BTD) and O(BTF) terms.",
)
add(
    "ch4.q7",
    "number",
    "DeepSeek v3: 37e9 activated parameters, 14.8e12 tokens, 2.79e6 H800-hours; the H800 "
    "does 3.026e15 FP8 FLOPs/s with sparsity (half that dense). FLOPs utilization (MFU) of the run, "
    "taking training FLOPs = 6 · params · tokens",
    _q7,
    unit="",
    note="6·37e9·14.8e12 / (2.79e6·3600·1.513e15) ≈ 21.6%.",
)
add(
    "ch4.q8a",
    "formula",
    "MoE layer with E experts, k active per token, int8 weights, bf16 FLOPs, on a TPU v5e "
    "(take its critical intensity as 240 FLOPs/byte, as the book does): token batch above which the layer is "
    "compute-bound, as a function of E, k",
    lambda: _q8a,
    unit="tokens",
    variables=("E", "k"),
    domains={"E": (8.0, 512.0), "k": (1.0, 8.0)},
    note="Weights E·D·F bytes, FLOPs 2·k·B·D·F: 2kB/E > 240 ⇒ B > 120·E/k.",
)
add(
    "ch4.q8b",
    "number",
    "Same for DeepSeek v3 (E = 256, k = 8): token batch",
    lambda: tf.moe_critical_batch(tf.get_model(DEEPSEEK), chip=V5E, weight_dtype="int8", flops_dtype="bf16"),
    unit="tokens",
    accept=(3724, 3956),
    note="With v5e's exact 240.2 FLOPs/byte: 3844; the book's 120·E/k gives 3840.",
)
