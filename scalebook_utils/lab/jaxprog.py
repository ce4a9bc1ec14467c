"""jaxprog: book ch. 10 "Programming TPUs in JAX" run for real on simulated CPU devices.

The chapter's three ways to parallelise a program, each as a small function that returns what it saw:

- **Auto** (`auto_matmul`): `jax.jit` with Auto mesh axes; XLA's partitioner picks the collectives
  (In[B_X, D_Y] ·_D W[D_Y, F] → Out[B_X, F] compiles to one AllReduce over Y).
- **Explicit** (`explicit_types`, `explicit_contraction`, `reshard_demo`): the sharding is part of the
  type (`jax.typeof(x)` → `float32[8@X,2@Y]`); an ambiguous contraction is a trace-time error until
  `out_sharding=` says which result is wanted. Needs `jax.sharding.AxisType` (not in JAX 0.4.x: the
  functions then return `{"skipped": reason}`).
- **Manual** (`slice_and_average`, `shard_map_collectives`): `shard_map` with the collectives written
  out; each compiles to one HLO collective (`jaxlab.shard_map_demo` does the work).

Collective matmuls (book ch. 10 "Collective matmul", Wang et al. 2023) as shard_map bodies, defined in
`collective_matmul` and re-exported here:
`ag_matmul_fn` (AllGather fused into the matmul, A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]),
`rs_matmul_fn` (ReduceScatter fused into it, ch10.q3b), `ar_matmul_fn` (AllReduce, ch10.q3a), with
`bidirectional=True` for ch10.q4; `mlp_block_fn` chains AG and RS (ch10.q3c). `hlo_dependencies` reads
how many collectives each compiled matmul waits for, and `hlo_schedule` the order XLA put them in.

The worked problems (`q1a_jit`, `q1a_shard_map`, `q1b`, `moe_local`, `moe_ragged`, `moe_jit`,
`moe_gather`, `moe_all_to_all`, `moe_topk`, `q3a`…`q4`) take arrays and mesh sizes and return a jax
array, and JAX can trace each: `check()` compiles them with `jax.jit` (the sizes static) on the
simulated devices and reads the collectives of the compiled program.
CPU wall times of these say nothing about TPU interconnects; compare collectives in HLO instead.

Setup (before JAX runs anything)::

    from scalebook_utils import jaxlab, jaxprog
    jaxlab.use_simulated_devices(8)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from scalebook_utils.lab import _compat
from scalebook_utils.lab import runtime as jaxlab

# The collective-matmul section (C10.7, ch10.q3, ch10.q4) lives in `collective_matmul`; its public names are
# re-exported here (jaxprog.ag_matmul_fn, …) and the helpers this module shares with it are imported from it.
from scalebook_utils.lab.collective_matmul import (
    NS,
    P,
    ag_matmul_fn,
    ar_matmul_fn,
    axis_size,
    collective_matmul_check,
    hlo_dependencies,
    hlo_schedule,
    hlo_text,
    mlp_block_fn,
    overlap_summary,
    plain_matmul_fn,
    put,
    rs_matmul_fn,
)


def _mesh(X: int, Y: int | None = None):
    """An Auto-axes CPU mesh (X,) named 'X' or (X, Y) named ('X', 'Y')."""
    if Y is None:
        return jaxlab.make_mesh((X,), ("X",), cpu=True)
    return jaxlab.make_mesh((X, Y), ("X", "Y"), cpu=True)


# --- auto mode (C10.1) ------------------------------------------------------------------------------


def auto_matmul(B: int = 8, D: int = 512, F: int = 1024, mesh_shape=(4, 2), out_spec=("X", None)) -> dict:
    """In[B_X, D_Y] ·_D W[D_Y, F] under plain `jax.jit` with Auto axes (book ch. 10 "Auto sharding mode").

    The contraction dim is split over Y, so each device holds a partial sum Out[B_X, F]{U_Y}; with
    out_spec ('X', None) XLA must AllReduce over Y. Returns 'correct', 'collectives' (parsed
    `jaxlab.HloCollective` list), 'local' (per-device shapes of In, W, Out) and 'out_spec'.
    """
    mesh = jaxlab.make_mesh(mesh_shape, ("X", "Y"), cpu=True)
    rng = np.random.default_rng(0)
    a = rng.integers(-2, 3, (B, D)).astype(np.float32)
    w = rng.integers(-2, 3, (D, F)).astype(np.float32)
    A, W = put(a, mesh, P("X", "Y")), put(w, mesh, P("Y", None))
    f = jax.jit(lambda x, y: x @ y, out_shardings=NS(mesh, P(*out_spec)))
    hlo = hlo_text(f, A, W)
    out = f(A, W)
    return {
        "correct": bool(np.array_equal(np.asarray(out), a @ w)),
        "collectives": jaxlab.parse_hlo_collectives(hlo, mesh_shape, ("X", "Y")),
        "local": {n: tuple(v.addressable_shards[0].data.shape) for n, v in (("In", A), ("W", W), ("Out", out))},
        "out_spec": tuple(out.sharding.spec),
    }


# --- explicit mode (C10.3–C10.5) --------------------------------------------------------------------


def explicit_unavailable() -> str | None:
    """None when this JAX has explicit sharding (AxisType, jax.typeof, reshard); else why not."""
    missing = _compat.explicit_sharding_missing()
    if missing:
        return f"explicit sharding needs {', '.join(missing)}, which JAX {jax.__version__} lacks (try JAX ≥ 0.7)"
    return None


def explicit_mesh(axis_shapes=(2, 2), axis_names=("X", "Y")):
    """A CPU mesh whose axes are all AxisType.Explicit (sharding in types). RuntimeError on old JAX."""
    why = explicit_unavailable()
    if why:
        raise RuntimeError(why)
    n = math.prod(axis_shapes)
    return jax.make_mesh(
        tuple(axis_shapes),
        tuple(axis_names),
        axis_types=(jax.sharding.AxisType.Explicit,) * len(axis_names),
        devices=jax.devices("cpu")[:n],
    )


def explicit_types() -> dict:
    """The sharding-in-types of x[8, 2] on a 2×2 Explicit mesh, outside and inside `jax.jit` (C10.3).

    'outside', 'inside' (jax.typeof strings, e.g. 'float32[8@X,2@Y]'), 'elementwise' (of x * 2: same
    sharding), 'transposed' (x.T swaps the axes). {'skipped': reason} on old JAX.
    """
    why = explicit_unavailable()
    if why:
        return {"skipped": why}
    mesh = explicit_mesh()
    seen = {}
    with _compat.use_mesh(mesh):
        x = jax.device_put(np.arange(16, dtype=np.float32).reshape(8, 2), P("X", "Y"))

        @jax.jit
        def f(v):
            seen["inside"] = str(jax.typeof(v))
            seen["elementwise"] = str(jax.typeof(v * 2))
            seen["transposed"] = str(jax.typeof(v.T))
            return v * 2

        f(x)
    return {"outside": str(jax.typeof(x)), **seen}


def explicit_contraction(B: int = 8, D: int = 64, F: int = 128) -> dict:
    """In[B_X, D_Y] ·_D W[D_Y, F] on a 2×2 Explicit mesh (C10.4–C10.5).

    Without out_sharding the result's sharding is ambiguous: 'error' names the exception and gives its
    first line. With out_sharding=P('X', 'Y') the partial sums are reduce-scattered; with P('X', None)
    all-reduced: 'types' and 'collectives' (HLO kind counts) per choice, 'correct' for both.
    """
    why = explicit_unavailable()
    if why:
        return {"skipped": why}
    mesh = explicit_mesh()
    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (B, D)).astype(np.float32)
    w = rng.integers(-2, 3, (D, F)).astype(np.float32)
    res = {"types": {}, "collectives": {}, "correct": True}
    with _compat.use_mesh(mesh):
        A = jax.device_put(a, P("X", "Y"))
        W = jax.device_put(w, P("Y", None))
        try:
            jax.jit(lambda x, y: jnp.einsum("bd,df->bf", x, y))(A, W)
            res["error"] = None
        except Exception as exc:  # ShardingTypeError (its module moved between versions)
            res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        for name, spec in (("P('X','Y')", P("X", "Y")), ("P('X',None)", P("X", None))):
            f = jax.jit(lambda x, y, s=spec: jnp.einsum("bd,df->bf", x, y, out_sharding=s))
            out = f(A, W)
            res["types"][name] = str(jax.typeof(out))
            res["collectives"][name] = dict(jaxlab.count_hlo_collectives(hlo_text(f, A, W)))
            res["correct"] &= bool(np.array_equal(np.asarray(out), a @ w))
    return res


def reshard_demo() -> dict:
    """`jax.sharding.reshard` x[8, 4]: P('X','Y') → P(None,'Y') (an AllGather over X) → P('Y','X').

    Returns the jax.typeof string of each and the HLO collectives of each step (jitted).
    """
    why = explicit_unavailable()
    if why:
        return {"skipped": why}
    mesh = explicit_mesh()
    out = {"types": [], "collectives": []}
    with _compat.use_mesh(mesh):
        x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), P("X", "Y"))
        out["types"].append(str(jax.typeof(x)))
        for spec in (P(None, "Y"), P("Y", "X")):
            f = jax.jit(lambda v, s=spec: jax.sharding.reshard(v, s))
            out["collectives"].append(dict(jaxlab.count_hlo_collectives(hlo_text(f, x))))
            y = f(x)
            out["types"].append(str(jax.typeof(y)))
            out["equal"] = out.get("equal", True) and bool(np.array_equal(np.asarray(y), np.asarray(x)))
    return out


# --- manual mode: shard_map (C10.6) and one call per collective -------------------------------------


def slice_and_average(n: int = 512, mesh_shape=(2, 4)) -> np.ndarray:
    """The chapter's shard_map example: each of the 8 devices keeps x[:4] of its 64-element block, and
    `pmean` over both axes averages them → [224, 225, 226, 227] for arange(512)."""
    mesh = jaxlab.make_mesh(mesh_shape, ("x", "y"), cpu=True)
    x = put(np.arange(n, dtype=np.int32), mesh, P(("x", "y")))
    f = _compat.shard_map(
        lambda b: lax.pmean(b[:4].astype(jnp.float32), ("x", "y")), mesh=mesh, in_specs=P(("x", "y")), out_specs=P()
    )
    return np.asarray(jax.jit(f)(x))


def shard_map_collectives(mesh_shape=(8,), n: int = 64) -> list[dict]:
    """One row per JAX collective in shard_map: 'jax' (lax name), 'hlo' (the HLO ops it compiled to),
    'correct', 'local_in'/'local_out' — `jaxlab.shard_map_demo` for each of `jaxlab.SHARD_MAP_KINDS`."""
    rows = []
    for kind in jaxlab.SHARD_MAP_KINDS:
        r = jaxlab.shard_map_demo(kind, mesh_shape, n=n)
        rows.append(
            {
                "jax": kind,
                "hlo": sorted(r["hlo"]),
                "correct": r["correct"],
                "local_in": r["local_in"],
                "local_out": r["local_out"],
            }
        )
    return rows


# --- the worked problems (arrays in, a jax array out; JAX can trace each: `check()` compiles them) ----------


def q1a_jit(x, X: int, Y: int) -> jax.Array:
    """Mean of each (X, Y) shard of x[S_X, D_Y] with plain jax.jit → [X, Y] (ch10.q1a)."""
    mesh = _mesh(X, Y)
    S, D = np.shape(x)
    f = jax.jit(lambda v: v.reshape(X, S // X, Y, D // Y).mean(axis=(1, 3)), out_shardings=NS(mesh, P("X", "Y")))
    return f(put(jnp.asarray(x, jnp.float32), mesh, P("X", "Y")))


def _q1a_sm(mesh):
    return jax.jit(
        _compat.shard_map(lambda b: b.mean(keepdims=True), mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))
    )


def q1a_shard_map(x, X: int, Y: int) -> jax.Array:
    """The same with shard_map: each device averages its own block (no communication at all)."""
    mesh = _mesh(X, Y)
    return _q1a_sm(mesh)(put(jnp.asarray(x, jnp.float32), mesh, P("X", "Y")))


def q1a_collectives(S: int = 64, D: int = 64, X: int = 2, Y: int = 4) -> dict:
    """HLO collective counts of the jit and the shard_map versions of ch10.q1a (both should be {})."""
    mesh = _mesh(X, Y)
    xs = put(np.ones((S, D), np.float32), mesh, P("X", "Y"))
    jit_f = jax.jit(lambda v: v.reshape(X, S // X, Y, D // Y).mean(axis=(1, 3)), out_shardings=NS(mesh, P("X", "Y")))
    return {
        "jit": dict(jaxlab.count_hlo_collectives(hlo_text(jit_f, xs))),
        "shard_map": dict(jaxlab.count_hlo_collectives(hlo_text(_q1a_sm(mesh), xs))),
    }


def q1b(x, X: int, Y: int, shift: int) -> jax.Array:
    """roll(x, shift, axis=0) − x inside each X shard of x[S_X, D_Y], with shard_map (ch10.q1b)."""
    mesh = _mesh(X, Y)
    f = jax.jit(
        _compat.shard_map(
            lambda b: jnp.roll(b, shift, axis=0) - b, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y")
        )
    )
    return f(put(jnp.asarray(x, jnp.float32), mesh, P("X", "Y")))


def _moe_masked(a, w, b, e0=0):
    """Σ_e mask(b == e0 + e) · (a @ w[e]) as a scan over the experts w[E, D, F]: memory [S, F], no [S, D, F].

    Expert 0 seeds the running sum (rather than zeros), so inside shard_map the carry has the same
    per-device "varying" type as each step's result on every JAX version."""

    def step(acc, ew):
        e, we = ew
        return acc + jnp.where((b == e0 + e)[:, None], a @ we, 0), None

    acc0 = jnp.where((b == e0)[:, None], a @ w[0], 0)
    return lax.scan(step, acc0, (jnp.arange(1, w.shape[0]), w[1:]))[0]


def moe_local(A, W, B) -> jax.Array:
    """Out[i] = A[i] @ W[B[i]] on one device by a masked scan over experts (ch10.q2a)."""
    return jax.jit(_moe_masked)(jnp.asarray(A, jnp.float32), jnp.asarray(W, jnp.float32), jnp.asarray(B, jnp.int32))


def moe_ragged(A, W, B) -> jax.Array:
    """The same with `jax.lax.ragged_dot`: sort tokens by expert, one grouped matmul, unsort."""
    A, W, B = jnp.asarray(A, jnp.float32), jnp.asarray(W, jnp.float32), jnp.asarray(B, jnp.int32)

    @jax.jit
    def f(a, w, b):
        order = jnp.argsort(b)
        sizes = jnp.bincount(b, length=w.shape[0]).astype(jnp.int32)
        y = lax.ragged_dot(a[order], w, sizes)
        return jnp.zeros_like(y).at[order].set(y)

    return f(A, W, B)


def _moe_inputs(A, W, B, mesh):
    return (
        put(jnp.asarray(A, jnp.float32), mesh, P("X", None)),
        put(jnp.asarray(W, jnp.float32), mesh, P("X", None, None)),
        put(jnp.asarray(B, jnp.int32), mesh, P("X")),
    )


def moe_jit_fn(mesh):
    """Plain jax.jit of the masked MoE with A[S_X, D], W[E_X, D, F], B[S_X] → Out[S_X, F]: XLA chooses
    the communication (ch10.q2b)."""
    return jax.jit(_moe_masked, out_shardings=NS(mesh, P("X", None)))


def moe_jit(A, W, B, X: int) -> jax.Array:
    """ch10.q2b: the sharded plain-jit MoE on X devices."""
    mesh = _mesh(X)
    return moe_jit_fn(mesh)(*_moe_inputs(A, W, B, mesh))


def _gather_body(a, w, b):
    """AllGather tokens and routes over X, apply this device's experts, ReduceScatter the outputs home."""
    e_loc = w.shape[0]
    a_all = lax.all_gather(a, "X", tiled=True)
    b_all = lax.all_gather(b, "X", tiled=True)
    part = _moe_masked(a_all, w, b_all, e0=lax.axis_index("X") * e_loc)
    return lax.psum_scatter(part, "X", scatter_dimension=0, tiled=True)


def moe_gather_fn(mesh):
    """ch10.q2c(a) as shard_map: AllGather_X(A), AllGather_X(B), local experts, ReduceScatter_X(Out)."""
    return jax.jit(
        _compat.shard_map(
            _gather_body, mesh=mesh, in_specs=(P("X", None), P("X", None, None), P("X")), out_specs=P("X", None)
        )
    )


def moe_gather(A, W, B, X: int) -> jax.Array:
    mesh = _mesh(X)
    return moe_gather_fn(mesh)(*_moe_inputs(A, W, B, mesh))


def _a2a_body(a, w, b):
    """Dispatch each token to the device owning its expert with one AllToAll, compute, AllToAll back.

    The send buffer is [X, S_loc, D]: slot (dest, i) holds token i if its expert lives on dest — a
    capacity of S_loc per destination, so no token is ever dropped (a ragged all-to-all would send only
    the real tokens; the book's version loops with `ragged` sizes)."""
    n, e_loc, s = axis_size("X"), w.shape[0], a.shape[0]
    dest = b // e_loc  # [S_loc] owner of each token's expert
    hit = jnp.arange(n)[:, None] == dest[None, :]  # [X, S_loc]
    send_a = jnp.where(hit[..., None], a[None], 0)  # [X, S_loc, D]
    send_b = jnp.where(hit, b[None], -1)  # -1: an empty slot
    recv_a = lax.all_to_all(send_a, "X", 0, 0, tiled=True)  # [X, S_loc, D] from every source
    recv_b = lax.all_to_all(send_b, "X", 0, 0, tiled=True)
    y = _moe_masked(recv_a.reshape(n * s, -1), w, recv_b.reshape(-1), e0=lax.axis_index("X") * e_loc)
    back = lax.all_to_all(y.reshape(n, s, -1), "X", 0, 0, tiled=True)  # [X, S_loc, F]: outputs home
    return back.sum(0)  # exactly one slot per token is non-zero


def moe_all_to_all_fn(mesh):
    """ch10.q2c(b) as shard_map: AllToAll dispatch and combine; no [E, S, D] or gathered [S, D] array."""
    return jax.jit(
        _compat.shard_map(
            _a2a_body, mesh=mesh, in_specs=(P("X", None), P("X", None, None), P("X")), out_specs=P("X", None)
        )
    )


def moe_all_to_all(A, W, B, X: int) -> jax.Array:
    mesh = _mesh(X)
    return moe_all_to_all_fn(mesh)(*_moe_inputs(A, W, B, mesh))


def moe_topk(A, W, B, X: int) -> jax.Array:
    """ch10.q2d: B[S, k]; Out[i] = mean_j A[i] @ W[B[i, j]]. Each token is repeated k times (its copies
    stay on its own shard), routed with `moe_all_to_all`, and the k outputs averaged."""
    A, B = jnp.asarray(A, jnp.float32), jnp.asarray(B, jnp.int32)
    S, k = B.shape
    y = moe_all_to_all(np.repeat(A, k, axis=0), W, B.reshape(-1), X)
    return y.reshape(S, k, -1).mean(axis=1)


def _mm_inputs(x, w, X, Y, xspec, wspec):
    mesh = _mesh(X, Y)
    return mesh, put(jnp.asarray(x, jnp.float32), mesh, xspec), put(jnp.asarray(w, jnp.float32), mesh, wspec)


def q3a(A, W, X: int, Y: int, bidirectional: bool = False) -> jax.Array:
    """ch10.q3a: A[B_X, D_Y] ·_D W[D_Y, F] → Out[B_X, F] with `ar_matmul_fn`."""
    mesh, a, w = _mm_inputs(A, W, X, Y, P("X", "Y"), P("Y", None))
    return ar_matmul_fn(mesh, bidirectional=bidirectional)(a, w)


def q3b(T, W2, X: int, Y: int, bidirectional: bool = False) -> jax.Array:
    """ch10.q3b: Tmp[B_X, F_Y] ·_F W2[F_Y, D] → Out[B_X, D_Y] with `rs_matmul_fn`."""
    mesh, t, w = _mm_inputs(T, W2, X, Y, P("X", "Y"), P("Y", None))
    return rs_matmul_fn(mesh, bidirectional=bidirectional)(t, w)


def q3c(In, W_in, W_out, X: int, Y: int) -> jax.Array:
    """ch10.q3c: In[B_X, D_Y] · W_in[D, F_Y] · W_out[F_Y, D] → Out[B_X, D_Y] with `mlp_block_fn`."""
    mesh, a, wi = _mm_inputs(In, W_in, X, Y, P("X", "Y"), P(None, "Y"))
    wo = put(jnp.asarray(W_out, jnp.float32), mesh, P("Y", None))
    return mlp_block_fn(mesh)(a, wi, wo)


def q4(x, w, X: int, Y: int, kind: str) -> jax.Array:
    """ch10.q4: the bidirectional AllReduce ('all_reduce') or ReduceScatter ('reduce_scatter') matmul."""
    return {"all_reduce": q3a, "reduce_scatter": q3b}[kind](x, w, X, Y, bidirectional=True)


__all__ = [
    "auto_matmul",
    "explicit_unavailable",
    "explicit_mesh",
    "explicit_types",
    "explicit_contraction",
    "reshard_demo",
    "slice_and_average",
    "shard_map_collectives",
    "ag_matmul_fn",
    "plain_matmul_fn",
    "rs_matmul_fn",
    "ar_matmul_fn",
    "mlp_block_fn",
    "hlo_schedule",
    "hlo_dependencies",
    "overlap_summary",
    "collective_matmul_check",
    "q1a_jit",
    "q1a_shard_map",
    "q1a_collectives",
    "q1b",
    "moe_local",
    "moe_ragged",
    "moe_jit_fn",
    "moe_jit",
    "moe_gather_fn",
    "moe_gather",
    "moe_all_to_all_fn",
    "moe_all_to_all",
    "moe_topk",
    "q3a",
    "q3b",
    "q3c",
    "q4",
]
