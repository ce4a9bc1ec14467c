"""Chapter 3 — Sharded matrices: the questions of "Sharded Matrices and How to Multiply Them" (book ch. 3).

Every expected value is computed with `sharding` (bytes, plans) and `collectives` (ring costs).
Where the book leaves a question open (Q6, Q7's runtime, Q8) the exercise asks for what the
package's cost model gives, and `asks` says exactly what that is. TPU v5e axes shorter than 16 do
not wrap around (ch. 2), so every v5e plan here passes `wraparound=False`; the v4p 4×4×4 cube wraps.
"""

from __future__ import annotations

import math

import numpy as np

from scalebook_utils.core import collectives as col
from scalebook_utils.core import roofline as rl
from scalebook_utils.core import sharding as sh
from scalebook_utils.core import topology as topo
from scalebook_utils.core.hlo.text import HLO_NAME
from scalebook_utils.core.units import dtype_bytes
from scalebook_utils.questions.registry import Compiled, add

V5E, V4P, V5P = "tpu-v5e", "tpu-v4p", "tpu-v5p"
BF16 = dtype_bytes("bf16")

#: ch3.pq1b: the H100 HBM bandwidth the pop quiz states (ch. 1 uses 3.35e12).
PQ1_H100_HBM = 3.4e12
#: ch3.q2: B = 1024, D = 4096 on a v4p 4×4×4 (every axis wraps).
Q2_B, Q2_D = 1024, 4096
#: ch3.q4c, ch3.q5: representative large-model sizes used to decide the choice with the package.
Q4_SIZES = {"B": 128, "D": 8192, "F": 32768}
Q5_SIZES = {"I": 8192, "J": 8192, "K": 8192}
#: ch3.q6 on a v5e 4×4 (no wraparound); ch3.q7 on a v5e 2×2.
Q6_MESH = "{X: 4, Y: 4}"
Q6_MATMULS = {
    "a": "A[I_X, J_Y] ·_J B[J_Y, K] → C[I_X, K]",
    "b": "A[I_X, J] · B[J_X, K_Y] → C[I_X, K_Y]",
    "c": "A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]",
}
Q7_MESH, Q7_SIZES = "{X: 2, Y: 2}", {"B": 128, "D": 8192, "F": 32768}
Q7_FREE_BYTES = 300e6
Q7_OPTIONS = (
    "FSDP: In[B_X,D]·W_in[D_XY,F]·W_out[F,D_XY]→Out[B_X,D]",
    "TP: In[B,D_XY]·W_in[D,F_XY]·W_out[F_XY,D]→Out[B,D_XY]",
)
Q7_LAYERS = {
    Q7_OPTIONS[0]: ("In[B_X, D] ·_D W_in[D_XY, F] → H[B_X, F]", "H[B_X, F] ·_F W_out[F, D_XY] → Out[B_X, D]"),
    Q7_OPTIONS[1]: ("In[B, D_XY] ·_D W_in[D, F_XY] → H[B, F_XY]", "H[B, F_XY] ·_F W_out[F_XY, D] → Out[B, D_XY]"),
}
#: ch3.q9c: A is N×M, sharded over 4 devices (the ratio does not depend on either).
Q9_N, Q9_X = 1024, 4


# --- helpers ------------------------------------------------------------------------------------------


def _pq3(E: int, F: int) -> float:
    """AllGather_Y([E_Y, F]) on a v5e {X: 8, Y: 4}: the gathered bf16[E, F]; an axis of 4 does not wrap."""
    wraps = topo.default_wraparound(V5E, (8, 4))
    return col.all_gather(BF16 * E * F, 4, V5E, wraparound=wraps[1]).seconds


def _q2() -> dict[str, float]:
    """The AllGathers and the AllReduce of ch3.q2 on the v4p 4×4×4 cube (bf16 [B, D] = 8 MiB)."""
    full = BF16 * Q2_B * Q2_D
    return {
        "a": col.all_gather(full / 4, 4, V4P).seconds,  # [B_X, D_Y] → [B, D_Y]: V = B·D/4
        "b": col.all_gather(full, (4, 4), V4P).seconds,  # → [B, D] over X and Y
        "c": col.all_reduce(full / 16, 4, V4P).seconds,  # [B_X, D_Y]{U_Z}: V = B·D/16 per device
        "d": col.all_gather(full / 4, (4, 4), V4P).seconds,  # [B_XZ, D_Y] → [B, D_Y]
        "e": col.all_gather(full, (4, 4, 4), V4P).seconds,  # [B_XZ, D_Y] → [B, D]
    }


def _q4a(B, D, F, C, W):
    """Strategy 1: AllGather_X the bf16 weights Y[D_X, F] (V = 2DF, V/W_ici), then the full matmul."""
    return max(rl.t_math(rl.matmul_flops(B, D, F), C), rl.t_comms(BF16 * D * F, W))


def _q4b(B, D, F, X, C, W):
    """Strategy 2: local X[B, D_X]·Y[D_X, F] (1/X of the FLOPs), then AllReduce_X bf16[B, F] (2V/W_ici)."""
    return max(rl.t_math(rl.matmul_flops(B, D, F) / X, C), 2 * rl.t_comms(BF16 * B * F, W))


def _q4c() -> str:
    # the book's answer assumes a ring (V/W_ici); a lone axis of 4 v5p chips would have none (ch. 2)
    p = sh.plan("X[B, D] ·_D Y[D_X, F] → Z[B, F]", "{X: 4}", Q4_SIZES, chip=V5P, wraparound=True)
    reduce = next(a for a in p.alternatives if a.strategy == "reduce")
    opts = ("Strategy 1 (AllGather the weights)", "Strategy 2 (local matmul + AllReduce)")
    return opts[1] if reduce.t_lower < p.t_lower else opts[0]


Q5_OPTIONS = (
    "1: A[I_XYZ,J]·B[J,K], then AllGather",
    "2: A[I,J]·B[J,K_XYZ], then AllGather",
    "3: A[I,J_XYZ]·B[J_XYZ,K], then AllReduce",
    "4: fully replicated",
    "1 and 2 equally good",
)
Q5_MATMULS = (
    "A[I_XYZ, J] · B[J, K] → C[I, K]",
    "A[I, J] · B[J, K_XYZ] → C[I, K]",
    "A[I, J_XYZ] · B[J_XYZ, K] → C[I, K]",
    "A[I, J] · B[J, K] → C[I, K]",
)


def q5_times() -> list[float]:
    """T_math + T_comms of the four ch3.q5 options on a v4p 4×4×4 (I = J = K = 8192, bf16)."""
    return [sh.plan(m, "{X: 4, Y: 4, Z: 4}", Q5_SIZES, chip=V4P).t_upper for m in Q5_MATMULS]


def _q5() -> str:
    t = q5_times()
    best = min(range(4), key=t.__getitem__)
    if best in (0, 1) and math.isclose(t[0], t[1], rel_tol=1e-9):
        return Q5_OPTIONS[4]
    return Q5_OPTIONS[best]


def q6_plan(part: str, I=4096, J=4096, K=4096) -> sh.MatmulPlan:
    """The plan of ch3.q6 part a/b/c on a v5e 4×4 (no wraparound), bf16."""
    return sh.plan(Q6_MATMULS[part], Q6_MESH, {"I": int(I), "J": int(J), "K": int(K)}, chip=V5E, wraparound=False)


def _q6(part: str):
    """T_comms(I, J, K) of q6 `part`: the plan's collectives (found once at I = J = K = 4096) re-costed for the
    bytes of each one's input array at (I, J, K) (`sharding.comm_seconds_at`)."""
    base = {"I": 4096, "J": 4096, "K": 4096}
    plan = q6_plan(part)
    return lambda I, J, K: sh.comm_seconds_at(plan, {"I": I, "J": J, "K": K}, base, V5E)


def q7_bytes_per_device(option: str) -> float:
    """Bytes each chip holds for In, W_in, W_out and Out under a ch3.q7 option, bf16 (`sharding.layer_bytes_per_device`)."""
    return sh.layer_bytes_per_device(Q7_LAYERS[option], Q7_MESH, Q7_SIZES)


def q7_time(option: str) -> float:
    """Comms + FLOPs of both matmuls under a ch3.q7 option on a v5e 2×2, no overlap: `sharding.layer_time`."""
    return sh.layer_time(Q7_LAYERS[option], Q7_MESH, Q7_SIZES, chip=V5E, wraparound=False)


def _q7c() -> str:
    fits = [o for o in Q7_OPTIONS if q7_bytes_per_device(o) <= Q7_FREE_BYTES]
    return min(fits, key=q7_time)


def _q9c(M, K):
    """AllGather of A (bf16 N×M) ÷ ReduceScatter of C (bf16 N×K), bandwidth terms only."""
    chip = V5E
    ag = col.all_gather(BF16 * Q9_N * M, Q9_X, chip, latency=False).seconds
    rs = col.reduce_scatter(BF16 * Q9_N * K, Q9_X, chip, latency=False).seconds
    return ag / rs


def _q10_ratio(num: str, den: str, D: float, num_bidi: bool, den_bidi: bool) -> float:
    return col.ring_scalars_per_link(num, 1024, D, bidirectional=num_bidi) / col.ring_scalars_per_link(
        den, 1024, D, bidirectional=den_bidi
    )


def _q8_reference():
    from scalebook_utils.lab import runtime as jaxlab  # lazy: the registry must not import jax

    return jaxlab.simulate_collective


def _q8_inputs() -> tuple:
    rng = np.random.default_rng(3)
    out = []
    for kind in ("all_gather", "all_reduce", "reduce_scatter", "all_to_all"):
        for n, shard in ((4, (8, 3)), (8, (16,))):
            out.append((kind, rng.integers(-5, 6, size=(n,) + shard).astype(np.float32)))
    return tuple(out)


# --- the registry -------------------------------------------------------------------------------------

add(
    "ch3.pq1a",
    "number",
    "fp32[1024,4096] sharded A[I_XY,J] on mesh {X:8,Y:2}: bytes per device",
    lambda: sh.bytes_per_device("A[I_XY, J]", "{X: 8, Y: 2}", (1024, 4096), "fp32"),
    unit="bytes",
    accept=(1.017e06, 1.081e06),
)
add(
    "ch3.pq1b",
    "number",
    "Same: time to load that shard from HBM on an H100 at 3.4e12 B/s",
    lambda: sh.bytes_per_device("A[I_XY, J]", "{X: 8, Y: 2}", (1024, 4096), "fp32") / PQ1_H100_HBM,
    unit="s",
    accept=(2.851e-07, 3.085e-07),
    note="The book divides 1e6 B (294 ns); 1,048,576 B gives 308 ns. The quiz states 3.4e12 B/s (ch. 1: 3.35e12).",
)
add(
    "ch3.pq2a",
    "number",
    "int8[128,2048] sharded A[I_XY,J] on mesh {X:2,Y:8,Z:2}: bytes per device",
    lambda: sh.bytes_per_device("A[I_XY, J]", "{X: 2, Y: 8, Z: 2}", (128, 2048), "int8"),
    unit="bytes",
    accept=(1.589e04, 1.688e04),
)
add(
    "ch3.pq2b",
    "number",
    "Same: total bytes over all 32 devices (replicated over Z)",
    lambda: sh.total_bytes("A[I_XY, J]", "{X: 2, Y: 8, Z: 2}", (128, 2048), "int8"),
    unit="bytes",
    accept=(5.085e05, 5.401e05),
)
add(
    "ch3.pq3a",
    "number",
    "AllGather_Y([E_Y,F])→[E,F], bf16, v5e {X:8,Y:4} (axis of 4: no wraparound), E=2048, F=8192: time",
    lambda: _pq3(2048, 8192),
    unit="s",
    accept=(0.0005432, 0.0005768),
    note="No wraparound on a v5e axis of 4: one-way links, 3/4 of V each way → 559 µs (book: 560 µs; its "
    "ideal bidirectional 377 µs; measured 680 µs).",
    ring=4,
)
add(
    "ch3.pq3b",
    "number",
    "Same with E=F=256 (latency-bound, 1 µs per hop): time",
    lambda: _pq3(256, 256),
    unit="s",
    note="3 hops × 1 µs (the book measures ≈8 µs).",
)
add(
    "ch3.q1",
    "number",
    "A[I_X,J,K,…] on mesh {X:4,Y:8,Z:2}: total bytes over all chips ÷ bytes of one copy",
    lambda: sh.replication("A[I_X, J, K]", "{X: 4, Y: 8, Z: 2}"),
    unit="",
    accept=(16, 16),
)
add(
    "ch3.q2a",
    "number",
    "v4p 4x4x4, mesh {X:4,Y:4,Z:4}, bf16, B=1024, D=4096: time of AllGather_X([B_X,D_Y])",
    lambda: _q2()["a"],
    unit="s",
    accept=(2.231e-05, 2.369e-05),
    ring=4,
)
add(
    "ch3.q2b",
    "number",
    "Same: time of AllGather_XY([B_X,D_Y])",
    lambda: _q2()["b"],
    unit="s",
    accept=(4.462e-05, 4.738e-05),
    ring=16,
)
add("ch3.q2c", "number", "Same: time of AllReduce_Z([B_X,D_Y]{U_Z})", lambda: _q2()["c"], unit="s", ring=4)
add(
    "ch3.q2d",
    "number",
    "Same, follow-up: part 1 after a free reshard to [B_XZ,D_Y] and AllGather_XZ",
    lambda: _q2()["d"],
    unit="s",
    accept=(1.115e-05, 1.185e-05),
)
add(
    "ch3.q2e",
    "number",
    "Same follow-up: part 2 using AllGather_XYZ",
    lambda: _q2()["e"],
    unit="s",
    accept=(3.007e-05, 3.193e-05),
)
add(
    "ch3.q3",
    "number",
    "AllGather_X([B_X]), B=128, bf16, v4p 4x4x4 (wraparound), 1 µs per hop: time",
    lambda: col.all_gather(BF16 * 128, 4, V4P).seconds,
    unit="s",
    note="Latency-bound: ⌊4/2⌋ = 2 hops × 1 µs.",
    ring=4,
)
add(
    "ch3.q4a",
    "formula",
    "X[B,D]·_D Y[D_X,F] (bf16): Strategy 1 time (AllGather_X Y, then a replicated matmul); "
    "C = FLOPs/s per chip, W = bidirectional ICI B/s",
    lambda: _q4a,
    unit="s",
    variables=("B", "D", "F", "C", "W"),
    domains={"B": (1.0, 4096.0), "D": (128.0, 16384.0), "F": (128.0, 65536.0), "C": (1e14, 1e15), "W": (1e10, 1e12)},
)
add(
    "ch3.q4b",
    "formula",
    "Same: Strategy 2 time (local X[B,D_X]·Y[D_X,F] → Z{U_X}, then AllReduce_X of bf16[B,F])",
    lambda: _q4b,
    unit="s",
    variables=("B", "D", "F", "X", "C", "W"),
    domains={
        "B": (1.0, 4096.0),
        "D": (128.0, 16384.0),
        "F": (128.0, 65536.0),
        "X": (2.0, 64.0),
        "C": (1e14, 1e15),
        "W": (1e10, 1e12),
    },
)
add(
    "ch3.q4c",
    "choice",
    "Same: which strategy is better (for a large model, e.g. B=128, D=8192, F=32768 on v5p)?",
    _q4c,
    options=("Strategy 1 (AllGather the weights)", "Strategy 2 (local matmul + AllReduce)"),
    note="The question names no chip; the book's answer uses v5p's C/W_ici ≈ 2550: Strategy 2 wins iff D > 2B "
    "(B < 2550). Decided here with sharding.plan at B=128, D=8192, F=32768.",
)
add(
    "ch3.q5",
    "choice",
    "A[I,J]·_J B[J,K]→C[I,K], C fully replicated, TPU v4p 4x4x4, any input sharding: lowest-latency option",
    _q5,
    options=Q5_OPTIONS,
    note="The book's answer is qualitative; decided with sharding.plan (T_math + T_comms) at I = J = K = 8192: "
    "options 1 and 2 tie (one AllGather of C), 3 needs an AllReduce (2×), 4 does 64× the FLOPs.",
)
add(
    "ch3.q6a",
    "formula",
    "v5e 4x4 (no wraparound), bf16, A[I_X,J_Y]·_J B[J_Y,K]→C[I_X,K]: communication time T_comms(I, J, K) in seconds",
    lambda: _q6("a"),
    unit="s",
    variables=("I", "J", "K"),
    domains={"I": (1024.0, 32768.0), "J": (1024.0, 32768.0), "K": (1024.0, 32768.0)},
    note="Not answered in the book. Package: AllReduce_Y of C[I_X,K]{U_Y} (2·I·K/4 bytes), bandwidth-bound on "
    "these domains.",
)
add(
    "ch3.q6b",
    "formula",
    "Same for A[I_X,J]·B[J_X,K_Y]→C[I_X,K_Y] (data + tensor + ZeRO): T_comms(I, J, K)",
    lambda: _q6("b"),
    unit="s",
    variables=("I", "J", "K"),
    domains={"I": (1024.0, 32768.0), "J": (1024.0, 32768.0), "K": (1024.0, 32768.0)},
    note="Not answered in the book. Package: AllGather_X of B[J_X,K_Y] (2·J·K/4 bytes gathered).",
)
add(
    "ch3.q6c",
    "formula",
    "Same for A[I_X,J]·B[J,K_Y]→C[I_X,K_Y] (inference: TP + data): T_comms(I, J, K)",
    lambda: _q6("c"),
    unit="s",
    variables=("I", "J", "K"),
    domains={"I": (1024.0, 32768.0), "J": (1024.0, 32768.0), "K": (1024.0, 32768.0)},
    note="Not answered in the book. Package: case 1, no communication (T_comms = 0).",
)
add(
    "ch3.q7a",
    "number",
    "In[B,D]·W_in[D,F]·W_out[F,D], D=8192, F=32768, B=128, bf16: bytes of one weight matrix",
    lambda: sh.total_bytes("W_in[D, F]", "{X: 1}", (8192, 32768)),
    unit="bytes",
    accept=(5.199e08, 5.521e08),
)
add(
    "ch3.q7b",
    "number",
    "Same: bytes of In",
    lambda: sh.total_bytes("In[B, D]", "{X: 1}", (128, 8192)),
    unit="bytes",
    accept=(1.94e06, 2.098e06),
    note="Book: '2 MB'; exact 2,097,152 B.",
)
add(
    "ch3.q7c",
    "choice",
    "Same on a v5e 2x2 with 300 MB free per chip: sharding of In, W_in, W_out, Out that fits and is fastest",
    _q7c,
    options=Q7_OPTIONS,
    note="Both fit (weights split 4 ways: 268 MB); sharding.plan gives FSDP ≈ 6 ms (gathers 1 GB of weights) vs "
    "TP ≈ 0.2 ms. The book only implies TP.",
)
add(
    "ch3.q7d",
    "number",
    "Same: runtime of the chosen TP sharding = Σ over both matmuls of T_comms + T_math "
    "(v5e 2x2, no wraparound, collectives not overlapped; HBM traffic ignored)",
    lambda: q7_time(Q7_OPTIONS[1]),
    unit="s",
    rtol=0.05,
    note="Not worked in the book ('left as an exercise'). AllGather_XY In + 2 local matmuls + ReduceScatter_XY Out. "
    "Reading the 268 MB of weights from HBM (≈ 0.33 ms at 8.2e11 B/s) would in fact dominate at B = 128.",
)
add(
    "ch3.q8",
    "code",
    "collective(kind, x): x stacks each device's shard (shape [n_devices, ...]); run 'all_gather', "
    "'all_reduce', 'reduce_scatter' (over dim 0 of each shard) or 'all_to_all' (split and concatenate dim 0) with "
    "shard_map over n_devices simulated devices and the jax.lax collective (all_gather(tiled=True) / psum / "
    "psum_scatter(tiled=True) / all_to_all(0, 0, tiled=True)); return the stacked per-device results",
    _q8_reference,
    test_inputs=_q8_inputs(),
    compiled=Compiled(
        "shard_map over the n devices with the jax.lax collective",
        require=lambda kind, x: (HLO_NAME[kind] + ("|all-reduce" if kind == "reduce_scatter" else ""),),
        partitions=lambda kind, x: x.shape[0],
    ),
    note="The book's challenge is a hardware benchmark (no answer); the checkable part is the semantics (compared "
    "with jax.lax run under jax.vmap(axis_name=...)) and the collective the program compiles to.",
)
add(
    "ch3.q9a",
    "choice",
    "A[I,J_X]·_J B[J,K]→C[I,K] via local matmul then AllReduce (A: N×M, B: M×K): what each "
    "device computes before the collective",
    lambda: "a full-shape [N,K] partial sum over its slice of the contraction index",
    options=(
        "its own block of rows of C",
        "a full-shape [N,K] partial sum over its slice of the contraction index",
        "nothing until A is AllGathered",
    ),
)
add(
    "ch3.q9b",
    "choice",
    "Same: cheaper collective if a sharded result is acceptable",
    lambda: {"all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter"}[
        sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K_X]", "{X: 4}", {"I": 64, "J": 64, "K": 64}).collective_kinds[0]
    ],
    options=("AllReduce", "ReduceScatter", "AllGather", "AllToAll"),
)
add(
    "ch3.q9c",
    "formula",
    "Same: comm volume of AllGather-then-matmul (∝ N·M) ÷ matmul-then-ReduceScatter (∝ N·K)",
    lambda: _q9c,
    unit="",
    variables=("M", "K"),
    domains={"M": (128.0, 65536.0), "K": (128.0, 65536.0)},
)
add(
    "ch3.q10a",
    "formula",
    "D devices on a unidirectional ring, N×N A[I_X,J]: scalars per link for an AllGather or ReduceScatter",
    lambda: lambda N, D: col.ring_scalars_per_link("all_gather", N, D),
    unit="count",
    variables=("N", "D"),
    domains={"N": (8.0, 65536.0), "D": (2.0, 256.0)},
)
add(
    "ch3.q10b",
    "formula",
    "Same: scalars per link for an AllToAll",
    lambda: lambda N, D: col.ring_scalars_per_link("all_to_all", N, D),
    unit="count",
    variables=("N", "D"),
    domains={"N": (8.0, 65536.0), "D": (2.0, 256.0)},
)
add(
    "ch3.q10c",
    "number",
    "Same: AllToAll cost ÷ AllGather cost, unidirectional ring",
    lambda: _q10_ratio("all_to_all", "all_gather", 16, False, False),
    unit="",
    accept=(0.485, 0.515),
)
add(
    "ch3.q10d",
    "number",
    "Same: speedup of an AllGather from making the ring bidirectional",
    lambda: _q10_ratio("all_gather", "all_gather", 16, False, True),
    unit="",
    accept=(1.94, 2.06),
)
add(
    "ch3.q10e",
    "number",
    "Same: speedup of an AllToAll from making the ring bidirectional (large D)",
    lambda: _q10_ratio("all_to_all", "all_to_all", math.inf, False, True),
    unit="",
    accept=(3.88, 4.12),
    note="Exact for finite D: 4(D−1)/D for even D; the book's 4 is the large-D limit.",
)
add(
    "ch3.q10f",
    "number",
    "Same: AllToAll cost ÷ AllGather cost on a bidirectional ring (large D)",
    lambda: _q10_ratio("all_to_all", "all_gather", math.inf, True, True),
    unit="",
    accept=(0.2425, 0.2575),
)
