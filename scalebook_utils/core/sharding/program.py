"""A sharded matmul's plan against the program XLA compiled, and the JAX program itself (book ch. 3).

`predicted_vs_compiled` / `matched_strategy` compare a `MatmulPlan`'s collectives with the counts that
`jaxlab` reads from the compiled HLO (`HLO_NAME` maps one spelling to the other); `jax_program` writes the
JAX source that runs the matmul with the given shardings. Pure Python: this module only writes and reads
text and counts, the JAX side lives in `jaxlab`.
"""

from __future__ import annotations

from collections.abc import Mapping

from scalebook_utils.core.hlo.text import HLO_NAME
from scalebook_utils.core.sharding.cases import Matmul, parse_matmul
from scalebook_utils.core.sharding.notation import Mesh, ShardedArray, ShardingError, check, parse_mesh
from scalebook_utils.core.sharding.plans import MatmulPlan
from scalebook_utils.core.units import canonical_dtype

__all__ = ["HLO_NAME", "predicted_vs_compiled", "matched_strategy", "jax_program"]

# HLO_NAME (imported from `hlo.text`, the one table): plan step kinds (as `collectives.collective` spells
# them) → the op name in compiled HLO.


# --- compiled programs vs the plan (pure: works on counts from jaxlab) -----------------------------


def _match(plan_: MatmulPlan, compiled_counter: Mapping[str, int], hlo: str | None):
    """(the plan or alternative whose kinds XLA compiled, or None; the CPU forms noted; compiled kinds)."""
    compiled = {k for k, v in dict(compiled_counter).items() if v and k in HLO_NAME.values()}

    def match(p: MatmulPlan) -> tuple[bool, list[str]]:
        pred = {HLO_NAME[k] for k in p.collective_kinds}
        why = []
        have = set(compiled)
        if "reduce-scatter" in pred and "reduce-scatter" not in have and "all-reduce" in have:
            pred = (pred - {"reduce-scatter"}) | {"all-reduce"}
            sl = " + dynamic-slice" if hlo is None or "dynamic-slice" in hlo else ""
            why.append(
                f"the predicted reduce-scatter compiled as all-reduce{sl} (the CPU compiler never "
                "emits reduce-scatter from automatic sharding)"
            )
        if "collective-permute" in have and "collective-permute" not in pred:
            have.discard("collective-permute")
            why.append(
                "XLA added a collective-permute that moves shards between devices to match its "
                "device order (a layout fix-up, not a reduction or gather)"
            )
        return pred == have, why

    for p in [plan_] + list(plan_.alternatives):
        ok, why = match(p)
        if ok:
            return p, why, compiled
    return None, [], compiled


def matched_strategy(plan_: MatmulPlan, compiled_counter: Mapping[str, int], hlo: str | None = None) -> str | None:
    """The strategy XLA's collectives match: the plan's own (`plan_.strategy`, e.g. 'gather'), one of its
    `alternatives` (e.g. 'reduce': local matmul + AllReduce), or None when they match none of them.
    Same rules as `predicted_vs_compiled`."""
    p, _why, _compiled = _match(plan_, compiled_counter, hlo)
    return None if p is None else p.strategy


def predicted_vs_compiled(
    plan_: MatmulPlan, compiled_counter: Mapping[str, int], hlo: str | None = None
) -> tuple[bool, str]:
    """Do the collectives XLA compiled agree with the plan (or one of its alternatives)?

    Compared by kind (XLA may split or fuse a collective), with these CPU forms counted as agreement
    (DESIGN §5): a predicted reduce-scatter compiled as all-reduce + dynamic-slice; an extra
    collective-permute that only reorders shards between devices (XLA's layout fix-up, no reduction
    or gather). Returns (agree, one-paragraph explanation); the explanation says when XLA chose one
    of the book's alternative strategies rather than the plan's default (`matched_strategy`).
    """
    p, why, compiled = _match(plan_, compiled_counter, hlo)
    if p is not None:
        kinds = ", ".join(sorted(compiled)) or "no collectives"
        head = (
            f"agree: compiled {kinds}; plan ({p.strategy}): "
            f"{'; '.join(s.describe() for s in p.steps) or 'no communication'}"
        )
        if p is not plan_:
            head += (
                f". XLA chose the book's alternative strategy '{p.strategy}' instead of the default '{plan_.strategy}'"
            )
        return True, head + (". " + "; ".join(why) if why else "")
    pred = ", ".join(HLO_NAME[k] for k in plan_.collective_kinds) or "none"
    return False, (f"disagree: plan predicts {pred} but XLA compiled {dict(compiled_counter) or 'no collectives'}")


# --- the JAX program ------------------------------------------------------------------------------


def _pspec_src(arr: ShardedArray) -> str:
    items = []
    for ax in arr.axes:
        if not ax:
            items.append("None")
        elif len(ax) == 1:
            items.append(repr(ax[0]))
        else:
            items.append("(" + ", ".join(repr(a) for a in ax) + ")")
    return "P(" + ", ".join(items) + ")"


def jax_program(
    matmul: Matmul | str, mesh: Mesh | str | Mapping, shapes: Mapping[str, int] | None = None, dtype: str = "float32"
) -> str:
    """JAX source (a string to show and `exec`) that runs `matmul` with the given shardings.

    Builds the mesh with Auto axes (`jaxlab.make_mesh`, i.e. jax.make_mesh(..., axis_types=(Auto,)*n)),
    places A and B with NamedSharding(mesh, PartitionSpec(...)), and jits jnp.einsum with the target's
    out_shardings (book ch. 3, "How do we describe this in code?"). Defines `mesh`, `A`, `B`, `matmul`,
    `C`. Needs enough (simulated) devices: run `jaxlab.use_simulated_devices(n)` before JAX starts.
    Default dim sizes: 16 × the number of devices (divisible by any sharding).
    """
    m, mesh = parse_matmul(matmul), parse_mesh(mesh)
    dims = list(dict.fromkeys(m.a.dims + m.b.dims))
    shapes = dict(shapes) if shapes else {d: 16 * mesh.n_devices for d in dims}
    for arr in (m.a, m.b) + ((m.out,) if m.out is not None else ()):
        check(arr, mesh, shapes)
    jdt = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(canonical_dtype(dtype), canonical_dtype(dtype))
    shape = lambda arr: "(" + ", ".join(str(shapes[d]) for d in arr.dims) + ("," if len(arr.dims) == 1 else "") + ")"  # noqa: E731
    out = ""
    if m.out is not None:
        if m.out.unreduced:
            raise ShardingError(f"target {m.out.spec()} is unreduced; jit's out_shardings cannot ask for that")
        out = f", out_shardings=NamedSharding(mesh, {_pspec_src(m.out)})"
    lines = [
        f"# {m.spec()} on mesh {mesh}",
        "import jax, jax.numpy as jnp",
        "from jax.sharding import NamedSharding, PartitionSpec as P",
        "from scalebook_utils import jaxlab",
        "",
        f"mesh = jaxlab.make_mesh({mesh.sizes!r}, {mesh.names!r})  "
        f"# = jax.make_mesh(..., axis_types=(AxisType.Auto,) * {len(mesh.axes)})",
        f"A = jax.device_put(jnp.ones({shape(m.a)}, jnp.{jdt}), "
        f"NamedSharding(mesh, {_pspec_src(m.a)}))  # {m.a.spec()}",
        f"B = jax.device_put(jnp.ones({shape(m.b)}, jnp.{jdt}), "
        f"NamedSharding(mesh, {_pspec_src(m.b)}))  # {m.b.spec()}",
        f"matmul = jax.jit(lambda a, b: jnp.einsum({m.einsum()!r}, a, b){out})",
        "C = matmul(A, B)",
        "print(C.shape, C.sharding.spec)",
    ]
    return "\n".join(lines) + "\n"
