"""Sharded programs of book ch. 3 on (simulated) devices: the notation as PartitionSpecs, sharded matmuls
run and set against the cost model, the four collectives, and the collective matmul.

`partition_spec` / `book_spec` / `book_matmul` turn the book's notation into PartitionSpecs and back;
`run_sharded_matmul` runs a matmul in that notation and reads back what XLA compiled, `compile_matmul` keeps
that per mesh and matmul against `sharding.plan`; `simulate_collective` and `shard_map_demo` run the four
collectives; `collective_matmul_fn` overlaps the ring's ppermutes with the matmul.
Part of `jaxlab` (`lab/runtime.py` re-exports every name but the explorer's `compile_matmul` and
`clear_compile_cache`); builds on `lab/devices.py` (meshes) and the pure HLO
reader `core/hlo`. Bytes and seconds are SI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core import sharding as sh
from scalebook_utils.core.hlo.collectives import count_hlo_collectives
from scalebook_utils.core.hlo.text import parse_module
from scalebook_utils.lab import _compat
from scalebook_utils.lab.devices import jnp_dtype, make_mesh

# --- sharded matmuls in the book's notation (ch. 3) -------------------------------------------------


def partition_spec(array):
    """`jax.sharding.PartitionSpec` of a `sharding.ShardedArray` (or its notation string).

    A[I_XY, J] → PartitionSpec(('X', 'Y'), None); A[I_X, J] → PartitionSpec('X', None). An unreduced
    array (C[I, K]{U_X}) has no PartitionSpec under Auto axes: ValueError.
    """
    arr = sh.parse_array(array)
    if arr.unreduced:
        raise ValueError(
            f"{arr.spec()} is unreduced over {', '.join(arr.unreduced)}; a PartitionSpec "
            "describes only how dims are split (reduce it first, or drop the {U_…})"
        )
    items = [None if ax is None else (ax[0] if len(ax) == 1 else ax) for ax in arr.partition_spec()]
    return jax.sharding.PartitionSpec(*items)


def book_spec(name: str, dims: Sequence[str], spec) -> str:
    """The book's notation of an array with PartitionSpec `spec`: ('A', 'IJ', P(None, 'X')) → 'A[I, J_X]'.

    The inverse of `partition_spec`: P(('X', 'Y'), None) → 'A[I_XY, J]'; a spec shorter than the array
    leaves the remaining dims unsharded. Book ch. 3, "A unified notation for sharding".
    """
    dims = list(dims)
    items = list(spec) + [None] * (len(dims) - len(spec))
    if len(items) != len(dims):
        raise ValueError(f"{spec} has {len(spec)} entries but {name} has {len(dims)} dims {dims}")
    out = []
    for d, e in zip(dims, items):
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        sub = "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"
        out.append(f"{d}_{sub}" if axes else d)
    return f"{name}[{', '.join(out)}]"


def book_matmul(spec_a, spec_b, spec_c=None) -> str:
    """'A[I, J_X] ·_J B[J_X, K] → C[I, K]' for C[I, K] = A[I, J] @ B[J, K] placed with these PartitionSpecs.

    spec_c=None: no target (XLA picks the output sharding). The string `sharding.plan` reads, so a
    notebook can check the collectives XLA compiled for its own PartitionSpecs against the cost model.
    """
    text = f"{book_spec('A', 'IJ', spec_a)} ·_J {book_spec('B', 'JK', spec_b)}"
    return text if spec_c is None else f"{text} → {book_spec('C', 'IK', spec_c)}"


def spec_tuple(spec, ndim: int) -> tuple:
    """PartitionSpec → the plain form of `ShardedArray.partition_spec()`: (('X', 'Y'), None), one entry per dim."""
    items = list(spec) + [None] * (ndim - len(spec))
    return tuple(None if e is None else (e,) if isinstance(e, str) else tuple(e) for e in items)


def run_sharded_matmul(matmul, mesh_dict, shapes=None, dtype: str = "float32", seed: int = 0) -> dict:
    """Run a matmul in the book's notation on simulated CPU devices and report what XLA did.

    Builds the mesh (Auto axes) from CPU devices, places random A and B with the notation's
    NamedShardings, jits jnp.einsum with the target's out_shardings (none when the matmul has no
    target: XLA then picks), and compares with the numpy product. Returns a dict with
    'result_matches' (bool), 'collectives' (Counter of HLO collective kinds), 'dynamic_slices' (count),
    'hlo' (compiled text), 'output_spec' (the result's sharding as a plain tuple like
    `ShardedArray.partition_spec()`, e.g. (('X',), None)), 'local_shapes'
    ({'A': …, 'B': …, 'C': …} per-device shapes), 'shapes' (the dim sizes used).
    Default dim sizes: 16 × the number of devices. Needs `use_simulated_devices(n)` with n ≥ mesh size.
    """
    m, mesh = sh.parse_matmul(matmul), sh.parse_mesh(mesh_dict)
    dims = list(dict.fromkeys(m.a.dims + m.b.dims))
    shapes = dict(shapes) if shapes else {d: 16 * mesh.n_devices for d in dims}
    jmesh = make_mesh(mesh.sizes, mesh.names, cpu=True)
    NS = jax.sharding.NamedSharding
    dt = jnp_dtype(dtype)
    rng = np.random.default_rng(seed)
    a_np = rng.standard_normal([shapes[d] for d in m.a.dims]).astype(np.float32)
    b_np = rng.standard_normal([shapes[d] for d in m.b.dims]).astype(np.float32)
    a = jax.device_put(jnp.asarray(a_np, dt), NS(jmesh, partition_spec(m.a)))
    b = jax.device_put(jnp.asarray(b_np, dt), NS(jmesh, partition_spec(m.b)))
    eq = m.einsum()
    kwargs = {} if m.out is None else {"out_shardings": NS(jmesh, partition_spec(m.out))}
    f = jax.jit(lambda x, y: jnp.einsum(eq, x, y), **kwargs)
    hlo = f.lower(a, b).compile().as_text()
    c = f(a, b)
    ref = np.einsum(eq, np.asarray(a, np.float32), np.asarray(b, np.float32))
    tol = 1e-4 if jnp.dtype(dt).itemsize >= 4 else 3e-2
    got = np.asarray(jnp.asarray(c, jnp.float32))
    scale = max(1.0, float(np.abs(ref).max()))
    return {
        "result_matches": bool(np.allclose(got, ref, rtol=tol, atol=tol * scale)),
        "collectives": count_hlo_collectives(hlo),
        "dynamic_slices": sum(op.opcode == "dynamic-slice" for op in parse_module(hlo).instructions),
        "hlo": hlo,
        "output_spec": spec_tuple(c.sharding.spec, c.ndim),
        "local_shapes": {
            m.a.name: a.addressable_shards[0].data.shape,
            m.b.name: b.addressable_shards[0].data.shape,
            m.out_name: c.addressable_shards[0].data.shape,
        },
        "shapes": shapes,
    }


def predicted_vs_compiled(plan, compiled_counter, hlo: str | None = None):
    """(agree, explanation): the plan's collectives vs those XLA compiled (see sharding.predicted_vs_compiled)."""
    return sh.predicted_vs_compiled(plan, compiled_counter, hlo)


# --- the sharding explorer's compiles, kept (ch. 3) --------------------------------------------------------

#: (mesh in the book's notation, matmul spec) → what `compile_matmul` returned (one compile per pair)
_COMPILE_CACHE: dict = {}


def compile_matmul(mesh, matmul: str) -> dict:
    """What XLA compiles for `matmul` on simulated CPU devices, against `sharding.plan` (cached per mesh, matmul).

    `run_sharded_matmul` once per (mesh, matmul), so the chapter 3 sharding explorer
    (`widgets.sharding_explorer`, which calls it lazily) and the notebook's check cell compile each preset
    only once per kernel. `mesh`: the book's notation ("{X: 2, Y: 4}") or anything `sharding.parse_mesh`
    reads. Returns {'collectives': Counter of HLO kinds, 'result_matches': bool, 'dynamic_slices': int,
    'agree': bool, 'why': str (sharding.predicted_vs_compiled's explanation), 'plan': the plan at the
    compiled sizes, 'strategy': the plan's strategy XLA's collectives match (sharding.matched_strategy:
    plan.strategy for the book's default, an alternative's name, or None)}. Needs
    jaxlab.use_simulated_devices(n ≥ mesh size) before JAX first ran.
    """
    key = (str(sh.parse_mesh(mesh)), sh.parse_matmul(matmul).spec())
    if key not in _COMPILE_CACHE:
        r = run_sharded_matmul(matmul, mesh)
        p = sh.plan(matmul, mesh, r["shapes"])
        ok, why = sh.predicted_vs_compiled(p, r["collectives"], r["hlo"])
        _COMPILE_CACHE[key] = dict(
            collectives=r["collectives"],
            result_matches=r["result_matches"],
            dynamic_slices=r["dynamic_slices"],
            agree=ok,
            why=why,
            plan=p,
            strategy=sh.matched_strategy(p, r["collectives"], r["hlo"]),
        )
    return _COMPILE_CACHE[key]


def clear_compile_cache() -> None:
    """Forget every kept compile (the next `compile_matmul` compiles again)."""
    _COMPILE_CACHE.clear()


# --- the four collectives on simulated devices (ch3.q8) -----------------------------------------------


def simulate_collective(kind: str, x):
    """Run one collective with jax.lax on the stacked shards `x` (shape [n_devices, ...]); numpy result.

    Each x[i] is device i's local array; `jax.vmap(..., axis_name="i")` stands in for n devices, so
    it runs on a single CPU (no simulated device count needed). Results are stacked the same way:
    - 'all_gather':     jax.lax.all_gather(tiled=True)   → out[i] = concatenate(x[0], …, x[n-1])
    - 'all_reduce':     jax.lax.psum                    → out[i] = Σ_j x[j]
    - 'reduce_scatter': jax.lax.psum_scatter(tiled=True) → out[i] = i-th block (dim 0) of Σ_j x[j]
    - 'all_to_all':     jax.lax.all_to_all(0, 0, tiled=True) → out[i] = concat_j (block i of x[j])
    `kind` may be spelled as in `collectives.normalize_kind` ('AllGather', 'psum', …). Book ch. 3, Q8.
    """
    from scalebook_utils.core.collectives import normalize_kind

    k = normalize_kind(kind)
    ops = {
        "all_gather": lambda v: jax.lax.all_gather(v, "i", tiled=True),
        "all_reduce": lambda v: jax.lax.psum(v, "i"),
        "reduce_scatter": lambda v: jax.lax.psum_scatter(v, "i", scatter_dimension=0, tiled=True),
        "all_to_all": lambda v: jax.lax.all_to_all(v, "i", 0, 0, tiled=True),
    }
    if k not in ops:
        raise ValueError(f"simulate_collective runs {', '.join(ops)}, not {kind!r}")
    with jax.default_device(jax.devices("cpu")[0]):
        out = jax.vmap(ops[k], axis_name="i")(jnp.asarray(np.asarray(x, np.float32)))
    return np.asarray(out)


#: The JAX collectives `shard_map_demo` runs (book ch. 3 names: AllReduce, AllGather, ReduceScatter,
#: AllToAll, ppermute) → the collectives.KINDS name of their cost model.
SHARD_MAP_KINDS = {
    "psum": "all_reduce",
    "all_gather": "all_gather",
    "psum_scatter": "reduce_scatter",
    "all_to_all": "all_to_all",
    "ppermute": "ppermute",
}


def shard_map_demo(kind: str, mesh_shape: Sequence[int] = (8,), n: int = 1024, chip: str = "tpu-v5e") -> dict:
    """Run one JAX collective under shard_map on simulated CPU devices; check it and count its bytes.

    `kind`: psum, all_gather, psum_scatter, all_to_all or ppermute, over all axes of a mesh of
    `mesh_shape` (axes X, Y, Z…; D devices in total). Every device holds a float32 block: n values for
    psum, all_gather and ppermute (ring shift by one); D·n values for psum_scatter and all_to_all (a
    chunk of n for each device). Returns
    'correct' (the gathered result equals the numpy computation), 'local_in'/'local_out' (per-device
    shapes), 'bytes_sent' (what one device must send at the least, from the shapes: (D−1) chunks for a
    gather/scatter/all-to-all, twice that for psum, one block for ppermute), 'model_bytes'
    (`collectives.collective(...).bytes_per_device`, which counts forwarding along the ring),
    'model_seconds' on `chip` (one ring per axis, wraparound), 'n_bytes' (what the model is given) and
    'hlo' (Counter of collective kinds in the compiled program). Book ch. 3, "A Deeper Dive…".
    """
    from jax import lax

    from scalebook_utils.core import collectives

    if kind not in SHARD_MAP_KINDS:
        raise ValueError(f"unknown shard_map collective {kind!r}; choose one of {', '.join(SHARD_MAP_KINDS)}")
    mesh_shape = tuple(int(s) for s in mesh_shape)
    names = tuple("XYZW"[: len(mesh_shape)])
    D, P = math.prod(mesh_shape), jax.sharding.PartitionSpec
    mesh = make_mesh(mesh_shape, names, cpu=True)
    ax = names if len(names) > 1 else names[0]
    item = 4
    if kind in ("psum", "all_gather", "ppermute"):
        x = np.arange(D * n, dtype=np.float32).reshape(D, n) % 97
    else:
        x = np.arange(D * D * n, dtype=np.float32).reshape(D, D * n) % 89
    if kind == "psum":
        body, out_spec, ref = (lambda a: lax.psum(a, ax)), P(), lambda: x.sum(0, keepdims=True)
        n_bytes, sent = n * item, 2 * (D - 1) * n * item / D
    elif kind == "all_gather":
        body, out_spec = (lambda a: _compat.all_gather_invariant(a, ax, axis=0, tiled=True)), P()
        ref, n_bytes, sent = (lambda: x), D * n * item, (D - 1) * n * item
    elif kind == "psum_scatter":
        body = lambda a: lax.psum_scatter(a, ax, scatter_dimension=1, tiled=True)  # noqa: E731
        out_spec, ref = P(None, ax), lambda: x.sum(0, keepdims=True)
        n_bytes, sent = D * n * item, (D - 1) * n * item
    elif kind == "all_to_all":
        body = lambda a: lax.all_to_all(a.reshape(D, n), ax, 0, 0, tiled=True).reshape(1, D * n)  # noqa: E731
        out_spec, ref = P(ax), lambda: x.reshape(D, D, n).transpose(1, 0, 2).reshape(D, D * n)
        n_bytes, sent = D * D * n * item, (D - 1) * n * item
    else:  # ppermute: a shift by one around the ring of all D devices
        perm = [(i, (i + 1) % D) for i in range(D)]
        body, out_spec = (lambda a: lax.ppermute(a, ax, perm)), P(ax)
        ref, n_bytes, sent = (lambda: np.roll(x, 1, axis=0)), n * item, n * item
    f = jax.jit(_compat.shard_map(body, mesh=mesh, in_specs=P(ax), out_specs=out_spec))
    xa = jax.device_put(jnp.asarray(x), jax.sharding.NamedSharding(mesh, P(ax)))
    hlo = f.lower(xa).compile().as_text()
    y = f(xa)
    got = np.asarray(y)
    want = ref()
    model_kind = SHARD_MAP_KINDS[kind]
    kw = {"hops": 1} if model_kind == "ppermute" else {"wraparound": True}
    cost = collectives.collective(model_kind, float(n_bytes), mesh_shape, chip, **kw)
    return {
        "kind": kind,
        "mesh_shape": mesh_shape,
        "n_devices": D,
        "correct": bool(got.shape == want.shape and np.allclose(got, want)),
        "local_in": tuple(xa.addressable_shards[0].data.shape),
        "local_out": tuple(y.addressable_shards[0].data.shape),
        "bytes_sent": float(sent),
        "model_bytes": float(cost.bytes_per_device),
        "n_bytes": float(n_bytes),
        "model_seconds": float(cost.seconds),
        "regime": cost.regime,
        "hlo": count_hlo_collectives(hlo),
    }


def collective_matmul_fn(mesh, axis: str | None = None):
    """A jitted f(x, w) → x @ w for x[I_X, J], w[J, K_X] (case 4) that never gathers x all at once.

    The book's collective matmul (ch. 3, "Overlapping communication with compute"): at step s each
    device multiplies the block of x it holds by its local w (writing rows of C[I, K_X]) while
    `ppermute` passes that block one step round the ring; after D steps every device has seen every
    block. The compiled program has D − 1 collective-permutes and no all-gather. `mesh`: a jax Mesh
    (use `make_mesh`); `axis`: the mesh axis to shard over (default: the first).
    """
    from jax import lax

    axis = axis or mesh.axis_names[0]
    D = mesh.shape[axis]
    P = jax.sharding.PartitionSpec
    perm = [(j, (j - 1) % D) for j in range(D)]  # device j sends to j−1: at step s device i holds block i+s

    def body(xb, wb):
        rows = xb.shape[0]
        idx = lax.axis_index(axis)
        out = jnp.zeros((rows * D, wb.shape[1]), jnp.result_type(xb, wb))
        blk = xb
        for s in range(D):
            src = (idx + s) % D
            if s < D - 1:
                nxt = lax.ppermute(blk, axis, perm)  # issued before the multiply: the two can overlap
            out = lax.dynamic_update_slice(out, blk @ wb, (src * rows, 0))
            if s < D - 1:
                blk = nxt
        return out

    return jax.jit(_compat.shard_map(body, mesh=mesh, in_specs=(P(axis, None), P(None, axis)), out_specs=P(None, axis)))


def collective_matmul(x, w, mesh, axis: str | None = None):
    """x @ w computed by `collective_matmul_fn` (x sharded by rows over `axis`, w by columns)."""
    axis = axis or mesh.axis_names[0]
    NS, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    xs = jax.device_put(jnp.asarray(x), NS(mesh, P(axis, None)))
    ws = jax.device_put(jnp.asarray(w), NS(mesh, P(None, axis)))
    return collective_matmul_fn(mesh, axis)(xs, ws)


__all__ = [
    "partition_spec",
    "book_spec",
    "book_matmul",
    "spec_tuple",
    "run_sharded_matmul",
    "predicted_vs_compiled",
    "compile_matmul",
    "clear_compile_cache",
    "simulate_collective",
    "SHARD_MAP_KINDS",
    "shard_map_demo",
    "collective_matmul_fn",
    "collective_matmul",
]
