"""collective_matmul: book ch. 10 "Programming TPUs in JAX", section "Collective matmul" (C10.7, ch10.q3, ch10.q4).

Collective matmuls (book ch. 10 "Collective matmul", Wang et al. 2023) as shard_map bodies, run for real
on simulated CPU devices:
`ag_matmul_fn` (AllGather fused into the matmul, A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]),
`rs_matmul_fn` (ReduceScatter fused into it, ch10.q3b), `ar_matmul_fn` (AllReduce, ch10.q3a), with
`bidirectional=True` for ch10.q4; `mlp_block_fn` chains AG and RS (ch10.q3c); `plain_matmul_fn` is the
`jax.jit` baseline. `hlo_dependencies` reads how many collectives each compiled matmul waits for, and
`hlo_schedule` the order XLA put them in (pure readers of the HLO text, from `core.hlo.schedule`, re-exported
here); `collective_matmul_check` runs AG against the plain one.

`jaxprog` (the rest of chapter 10) re-exports these names and imports the small helpers it shares with
this module (`P`, `NS`, `put`, `hlo_text`, `axis_size`) from here, so they are defined in one place.

Setup (before JAX runs anything)::

    from scalebook_utils import jaxlab, collective_matmul
    jaxlab.use_simulated_devices(8)
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from scalebook_utils.core.hlo.schedule import hlo_dependencies, hlo_schedule, overlap_summary
from scalebook_utils.lab import _compat
from scalebook_utils.lab import runtime as jaxlab

P = jax.sharding.PartitionSpec
NS = jax.sharding.NamedSharding
#: devices along a mesh axis inside shard_map — a version shim (lax.axis_size, or psum(1) on old JAX)
axis_size = _compat.axis_size


def put(x, mesh, spec):
    return jax.device_put(jnp.asarray(x), NS(mesh, spec))


def hlo_text(f, *args) -> str:
    return f.lower(*args).compile().as_text()


# --- collective matmuls (C10.7, ch10.q3, ch10.q4) ---------------------------------------------------


def _ring(axis: str, step: int):
    """ppermute pairs that send device j's block to j + step (mod the axis size)."""
    n = axis_size(axis)
    return [(j, (j + step) % n) for j in range(n)], n


def _ag_body(a, w, *, axis="Y"):
    """a: [b, d/Y] (block idx of the contraction dim), w: [d, f/Y]. At step s this device holds A-block
    (idx + s) mod Y, multiplies it by the matching rows of w and passes it to its left neighbour."""
    perm, n = _ring(axis, -1)
    idx, k = lax.axis_index(axis), a.shape[1]
    acc = jnp.zeros((a.shape[0], w.shape[1]), jnp.result_type(a, w))
    for s in range(n):
        nxt = lax.ppermute(a, axis, perm) if s < n - 1 else None  # issued first: it can overlap the dot
        acc = acc + a @ lax.dynamic_slice_in_dim(w, ((idx + s) % n) * k, k, axis=0)
        a = nxt
    return acc


def ag_matmul_fn(mesh, axis: str = "Y"):
    """Jitted collective matmul A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y] (book ch. 10 "Collective
    matmul"): Y − 1 collective-permutes of A-blocks interleaved with Y partial matmuls, no AllGather."""
    return jax.jit(
        _compat.shard_map(
            partial(_ag_body, axis=axis), mesh=mesh, in_specs=(P("X", axis), P(None, axis)), out_specs=P("X", axis)
        )
    )


def plain_matmul_fn(mesh, out_spec=("X", "Y")):
    """The baseline: `jax.jit(a @ w)` with the same input shardings; XLA AllGathers A first."""
    return jax.jit(lambda a, w: a @ w, out_shardings=NS(mesh, P(*out_spec)))


def rs_chunks(x, w, axis, step, cols):
    """Ring reduce-scatter fused with the matmul, for output columns `cols` (a slice of w's columns).

    Device m adds its partial for output block (m + step·(n−1−s)) mod n at step s and passes the running
    sum to m + step; after n steps device m holds the fully reduced block m (its own partial goes in last)."""
    perm, n = _ring(axis, step)
    idx = lax.axis_index(axis)
    width = cols.stop - cols.start
    blk = w.shape[1] // n
    acc = None
    for s in range(n):
        c = (idx + step * (n - 1 - s)) % n
        part = x @ lax.dynamic_slice_in_dim(w, c * blk + cols.start, width, axis=1)
        acc = part if acc is None else acc + part
        if s < n - 1:
            acc = lax.ppermute(acc, axis, perm)
    return acc


def _rs_body(x, w, *, axis="Y", bidirectional=False):
    """x: [b, k/Y] (contraction block), w: [k/Y, n] → this device's reduced block [b, n/Y]."""
    blk = w.shape[1] // axis_size(axis)
    if not bidirectional:
        return rs_chunks(x, w, axis, 1, slice(0, blk))
    h = blk // 2  # half of each block goes clockwise, half counter-clockwise: both links busy
    return jnp.concatenate([rs_chunks(x, w, axis, 1, slice(0, h)), rs_chunks(x, w, axis, -1, slice(h, blk))], axis=1)


def rs_matmul_fn(mesh, axis: str = "Y", bidirectional: bool = False):
    """Jitted ReduceScatter collective matmul Tmp[B_X, F_Y] ·_F W2[F_Y, D] → Out[B_X, D_Y] (ch10.q3b):
    each step sends one [B/X, D/Y] block of running sums — the least any reduce-scatter can send."""
    return jax.jit(
        _compat.shard_map(
            partial(_rs_body, axis=axis, bidirectional=bidirectional),
            mesh=mesh,
            in_specs=(P("X", axis), P(axis, None)),
            out_specs=P("X", axis),
        )
    )


def _ar_body(x, w, *, axis="Y", bidirectional=False):
    if bidirectional:  # a bidirectional reduce-scatter matmul, then AllGather the reduced blocks
        return _compat.all_gather_invariant(_rs_body(x, w, axis=axis, bidirectional=True), axis, axis=1, tiled=True)
    n = axis_size(axis)
    blk = w.shape[1] // n  # tile the output: the psum of tile t can run while tile t + 1 is multiplied
    return jnp.concatenate([lax.psum(x @ w[:, t * blk : (t + 1) * blk], axis) for t in range(n)], axis=1)


def ar_matmul_fn(mesh, axis: str = "Y", bidirectional: bool = False):
    """Jitted AllReduce collective matmul A[B_X, D_Y] ·_D W[D_Y, F] → Out[B_X, F] (ch10.q3a, ch10.q4)."""
    return jax.jit(
        _compat.shard_map(
            partial(_ar_body, axis=axis, bidirectional=bidirectional),
            mesh=mesh,
            in_specs=(P("X", axis), P(axis, None)),
            out_specs=P("X", None),
        )
    )


def mlp_block_fn(mesh, axis: str = "Y", bidirectional: bool = False):
    """In[B_X, D_Y] · W_in[D, F_Y] · W_out[F_Y, D] → Out[B_X, D_Y] (ch10.q3c): the AllGather collective
    matmul, then the ReduceScatter one; the intermediate [B_X, F_Y] never leaves its device."""

    def body(a, w_in, w_out):
        return _rs_body(_ag_body(a, w_in, axis=axis), w_out, axis=axis, bidirectional=bidirectional)

    return jax.jit(
        _compat.shard_map(
            body, mesh=mesh, in_specs=(P("X", axis), P(None, axis), P(axis, None)), out_specs=P("X", axis)
        )
    )


def collective_matmul_check(B: int = 64, D: int = 256, F: int = 512, mesh_shape=(2, 4)) -> dict:
    """Runs `ag_matmul_fn` and `plain_matmul_fn` on integer-valued float32 inputs (exact sums) and
    returns 'equal' (bitwise), 'exact' (= numpy), and per program 'hlo' (collective counts), 'overlap'
    (`overlap_summary`), 'out' and 'fn'; 'args' are the placed inputs."""
    mesh = jaxlab.make_mesh(mesh_shape, ("X", "Y"), cpu=True)
    rng = np.random.default_rng(2)
    a, w = rng.integers(-3, 4, (B, D)).astype(np.float32), rng.integers(-3, 4, (D, F)).astype(np.float32)
    A, W = put(a, mesh, P("X", "Y")), put(w, mesh, P(None, "Y"))
    res = {}
    for name, f in (("collective", ag_matmul_fn(mesh)), ("plain", plain_matmul_fn(mesh))):
        hlo = hlo_text(f, A, W)
        res[name] = {
            "out": np.asarray(f(A, W)),
            "hlo": dict(jaxlab.count_hlo_collectives(hlo)),
            "overlap": overlap_summary(hlo),
            "fn": f,
        }
    res["equal"] = bool(np.array_equal(res["collective"]["out"], res["plain"]["out"]))
    res["exact"] = bool(np.array_equal(res["plain"]["out"], a @ w))
    res["args"] = (A, W)
    return res


__all__ = [
    "ag_matmul_fn",
    "plain_matmul_fn",
    "rs_matmul_fn",
    "ar_matmul_fn",
    "mlp_block_fn",
    "hlo_schedule",
    "hlo_dependencies",
    "overlap_summary",
    "collective_matmul_check",
]
