"""Chapter 10 — Programming TPUs in JAX: the worked problems (book ch. 10, "Worked Problems").

Every question is a `code` question: the answer is a function that takes arrays and mesh sizes, shards
them on simulated CPU devices however it likes (jax.jit, shard_map, collectives), and returns the result
as a jax array. `check()` runs it as `jax.jit(f)` with the sizes static, compares the result with the
numpy references here, and reads the compiled program: each question's `Compiled` rule says which
collectives must (not) appear, over how many devices, which arrays it may not build — so plain numpy
(which jax.jit cannot trace) and code that skips the technique both fail, with a hint naming what was found. The answers need
8 simulated devices (`jaxlab.use_simulated_devices(8)` first); meshes are X × Y with X·Y ≤ 8.

Inputs are small integers stored as float32, so every sum is exact in any order and a sharded answer
matches the reference to the last bit. Conventions of the signatures (our choice; the book gives none):

- ch10.q1a f(x, X, Y) → [X, Y]; x[S_X, D_Y]; out[i, j] = mean of shard (i, j).
- ch10.q1b f(x, X, Y, shift) → [S, D]; within each X shard: roll(shard, shift, axis=0) − shard. The book's
  reference code omits the "− x" its question asks for; we follow the question.
- ch10.q2a f(A, W, B) → [S, F]; Out[i] = A[i] @ W[B[i]] on one device.
- ch10.q2b, q2c f(A, W, B, X) → [S, F]: the same sharded over X devices (A[S_X, D], W[E_X, D, F], B[S_X]).
- ch10.q2d f(A, W, B, X) with B[S, k] → [S, F]: the mean of the k expert outputs.
- ch10.q3a f(A, W, X, Y) → A @ W for A[B_X, D_Y], W[D_Y, F] (AllReduce collective matmul).
- ch10.q3b f(T, W2, X, Y) → T @ W2 for T[B_X, F_Y], W2[F_Y, D] (ReduceScatter collective matmul).
- ch10.q3c f(In, W_in, W_out, X, Y) → In @ W_in @ W_out (the nonlinearity the book omits is left out).
- ch10.q4 f(x, w, X, Y, kind) → x @ w, kind 'all_reduce' (q3a's sharding) or 'reduce_scatter' (q3b's),
  bidirectional.
"""

from __future__ import annotations

import numpy as np

from scalebook_utils.questions.registry import Compiled, add


def _ints(rng, shape, lo=-3, hi=4):
    return rng.integers(lo, hi, shape).astype(np.float32)


# --- references (numpy) -----------------------------------------------------------------------------


def shard_means(x, X, Y):
    S, D = np.shape(x)
    return np.asarray(x, np.float64).reshape(X, S // X, Y, D // Y).mean(axis=(1, 3))


def shard_roll(x, X, Y, shift):
    S = np.shape(x)[0]
    blocks = np.asarray(x).reshape(X, S // X, -1)
    return (np.roll(blocks, shift, axis=1) - blocks).reshape(np.shape(x))


def moe(A, W, B):
    A, W, B = np.asarray(A), np.asarray(W), np.asarray(B)
    if B.ndim == 2:
        return np.stack([moe(A, W, B[:, j]) for j in range(B.shape[1])], axis=1).mean(axis=1)
    return np.einsum("sd,sdf->sf", A, W[B])


def _moe_sharded(A, W, B, X):
    return moe(A, W, B)


def _matmul_xy(x, w, X, Y):
    return np.asarray(x) @ np.asarray(w)


def _block(x, w_in, w_out, X, Y):
    return np.asarray(x) @ np.asarray(w_in) @ np.asarray(w_out)


def _bidi(x, w, X, Y, kind):
    if kind not in ("all_reduce", "reduce_scatter"):
        raise ValueError(f"kind must be 'all_reduce' or 'reduce_scatter', not {kind!r}")
    return np.asarray(x) @ np.asarray(w)


# --- test inputs ------------------------------------------------------------------------------------

_rng = np.random.default_rng(10)
_MESHES = ((2, 4), (4, 2))
S, D, F, E, K = 16, 8, 16, 8, 2
_X1 = _ints(_rng, (S, 8 * 2))
_A, _W = _ints(_rng, (S, D)), _ints(_rng, (E, D, F), -2, 3)
_B = _rng.integers(0, E, S).astype(np.int32)
_B[:4] = 0  # crowded expert: several tokens share expert 0 (and shard)
_BK = _rng.integers(0, E, (S, K)).astype(np.int32)
_MM = _ints(_rng, (16, 16)), _ints(_rng, (16, 16))
_MLP = _ints(_rng, (16, 8), -2, 3), _ints(_rng, (8, 16), -2, 3), _ints(_rng, (16, 8), -2, 3)

Q1A_INPUTS = tuple((_X1, X, Y) for X, Y in _MESHES)
Q1B_INPUTS = ((_X1, 2, 4, 1), (_X1, 4, 2, -2), (_X1, 2, 4, 3))
Q2A_INPUTS = ((_A, _W, _B), (_A[:8], _W[:4], _B[:8] % 4))
Q2_SHARDED_INPUTS = ((_A, _W, _B, 2), (_A, _W, _B, 4), (_A, _W, _B, 8))
Q2D_INPUTS = ((_A, _W, _BK, 2), (_A, _W, _BK, 4))
Q3_INPUTS = tuple((*_MM, X, Y) for X, Y in _MESHES)
Q3C_INPUTS = tuple((*_MLP, X, Y) for X, Y in _MESHES)
Q4_INPUTS = tuple((*_MM, X, Y, kind) for X, Y in _MESHES for kind in ("all_reduce", "reduce_scatter"))

NOTE_CODE = (
    "Checked by value on simulated devices and by what it compiles to (the collectives, the device count, "
    "the arrays it builds)."
)

#: What each answer's compiled program must show (check.compiled_problem reads it from the HLO).
NO_COMM = Compiled(
    "each device works on its own shard of the X·Y devices",
    forbid=("any",),
    partitions=lambda x, X, Y, *rest: X * Y,
    out_spec=("X", "Y"),
)
Q2A_RULE = Compiled(
    "a scan or grouped matmul over experts, not one gather of W[B]",
    no_array_of=lambda A, W, B: (A.shape[0], A.shape[1], W.shape[2]),
    forbid=("any",),
)
Q2B_RULE = Compiled("plain jax.jit over the X devices", partitions=lambda A, W, B, X: X, out_spec=("X",))
Q2C_RULE = Compiled(
    "tokens move to the experts (AllGather of tokens or AllToAll), the experts stay put",
    require=("all-to-all|all-gather",),
    no_gather_of=lambda A, W, B, X: W.shape,
    partitions=lambda A, W, B, X: X,
    out_spec=("X",),
)
Q3A_RULE = Compiled(
    "an AllReduce collective matmul: the matmul in tiles, each tile's psum overlapped",
    require=("all-reduce",),
    forbid=("all-gather",),
    min_dots=lambda A, W, X, Y: 2,
    partitions=lambda A, W, X, Y: X * Y,
    out_spec=("X",),
)
Q3B_RULE = Compiled(
    "a ReduceScatter collective matmul: partial sums passed round the ring with ppermute",
    require=("collective-permute",),
    forbid=("all-reduce", "all-gather"),
    partitions=lambda T, W2, X, Y: X * Y,
    out_spec=("X", "Y"),
)
Q3C_RULE = Compiled(
    "an AllGather then a ReduceScatter collective matmul, both with ppermute",
    require=("collective-permute",),
    forbid=("all-gather", "all-reduce"),
    partitions=lambda In, Wi, Wo, X, Y: X * Y,
    out_spec=("X", "Y"),
)
Q4_RULE = Compiled(
    "a bidirectional collective matmul: ppermutes both ways round the ring",
    require=("collective-permute",),
    bidirectional=True,
    partitions=lambda x, w, X, Y, kind: X * Y,
    out_spec=lambda x, w, X, Y, kind: ("X",) if kind == "all_reduce" else ("X", "Y"),
)

add(
    "ch10.q1a",
    "code",
    "f(x, X, Y): the mean of each (X, Y) shard of x[S_X, D_Y] → [X, Y] (with jax.jit and with "
    "shard_map; neither should need communication)",
    lambda: shard_means,
    test_inputs=Q1A_INPUTS,
    note="No numeric answer in the book. " + NOTE_CODE,
    compiled=NO_COMM,
)
add(
    "ch10.q1b",
    "code",
    "f(x, X, Y, shift): roll(x, shift, axis=0) − x within each X shard of x[S_X, D_Y], with shard_map",
    lambda: shard_roll,
    test_inputs=Q1B_INPUTS,
    compiled=NO_COMM,
    note="The book's code omits the '− x' of its question; we follow the question.",
)
add(
    "ch10.q2a",
    "code",
    "f(A, W, B): Out[i] = A[i] @ W[B[i]] on one device without an [S, D, F] array",
    lambda: moe,
    test_inputs=Q2A_INPUTS,
    compiled=Q2A_RULE,
    note="Book: a masked scan over experts; jax.lax.ragged_dot also works.",
)
add(
    "ch10.q2b",
    "code",
    "f(A, W, B, X): the MoE with plain jax.jit on X devices, A[S_X, D], W[E_X, D, F], B[S_X] "
    "(then read its collectives and time it)",
    lambda: _moe_sharded,
    test_inputs=Q2_SHARDED_INPUTS,
    compiled=Q2B_RULE,
    note="Not answered in the book (it guesses an AllGather_X of A). " + NOTE_CODE,
)
add(
    "ch10.q2c",
    "code",
    "f(A, W, B, X): the same with shard_map — AllGather + reorder, or an AllToAll dispatch",
    lambda: _moe_sharded,
    test_inputs=Q2_SHARDED_INPUTS,
    compiled=Q2C_RULE,
    note="Book: pseudocode only (a ragged all_to_all in a while_loop). " + NOTE_CODE,
)
add(
    "ch10.q2d",
    "code",
    "f(A, W, B, X) with top-k routing B[S_X, k]: the mean of the k expert outputs",
    lambda: _moe_sharded,
    test_inputs=Q2D_INPUTS,
    compiled=Q2B_RULE,
    note="Not answered in the book.",
)
add(
    "ch10.q3a",
    "code",
    "f(A, W, X, Y): AllReduce collective matmul A[B_X, D_Y] ·_D W[D_Y, F] → Out[B_X, F]",
    lambda: _matmul_xy,
    test_inputs=Q3_INPUTS,
    compiled=Q3A_RULE,
    note="Not answered in the book. " + NOTE_CODE,
)
add(
    "ch10.q3b",
    "code",
    "f(T, W2, X, Y): ReduceScatter collective matmul Tmp[B_X, F_Y] ·_F W2[F_Y, D] → Out[B_X, D_Y]",
    lambda: _matmul_xy,
    test_inputs=Q3_INPUTS,
    compiled=Q3B_RULE,
    note="Not answered in the book. " + NOTE_CODE,
)
add(
    "ch10.q3c",
    "code",
    "f(In, W_in, W_out, X, Y): In[B_X, D_Y] · W_in[D, F_Y] · W_out[F_Y, D] → Out[B_X, D_Y] "
    "with "
    "overlapped collective matmuls",
    lambda: _block,
    test_inputs=Q3C_INPUTS,
    compiled=Q3C_RULE,
    note="Not answered in the book; the speedup over jax.jit is a TPU measurement (CPU times say nothing).",
)
add(
    "ch10.q4",
    "code",
    "f(x, w, X, Y, kind): bidirectional AllReduce ('all_reduce') or ReduceScatter ('reduce_scatter') collective matmul",
    lambda: _bidi,
    test_inputs=Q4_INPUTS,
    compiled=Q4_RULE,
    note="Not answered in the book. Bidirectional rings halve the per-link bytes (ch. 3), ≈2× on TPU ICI.",
)
