"""The communication plan of a sharded matmul (book ch. 3): `plan(matmul, mesh, shapes, dtype, chip)` tries
the book's strategies for the matmul's case (gather, reduce, permute, move a subscript; which input to
gather for case 4; gather the inputs first or reshard the output after), keeps each distinct one with its
steps (`comm.StepBuilder`), bytes, times and the local matmul's FLOPs, and returns the book's default as a
`MatmulPlan` with the others as `alternatives`, cheapest first.

Pure Python over `notation`, `cases` and `comm`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.sharding.cases import Matmul, MatmulCase, classify, contract_axes, free_axes, parse_matmul
from scalebook_utils.core.sharding.comm import CommStep, StepBuilder, common_prefix, mesh_wraparound
from scalebook_utils.core.sharding.notation import Mesh, ShardedArray, ShardingError, check, parse_mesh
from scalebook_utils.core.topology import shape_text
from scalebook_utils.core.units import canonical_dtype

__all__ = ["MatmulPlan", "plan"]


@dataclass(frozen=True)
class MatmulPlan:
    """The communication plan of a sharded matmul on a mesh (book ch. 3).

    steps: the collectives in order; a_local, b_local: the inputs' shardings at the local matmul;
    local_out: the local matmul's output (unreduced axes when case 3); output: the final sharding.
    flops_per_device: 2 × Π(local sizes of all dims) of the local matmul; t_math = FLOPs / peak;
    t_comms = Σ step seconds; t_lower = max(t_math, t_comms) (perfect overlap), t_upper = sum.
    alternatives: other valid strategies the book names (e.g. case 2's local matmul + AllReduce).
    """

    matmul: Matmul
    mesh: Mesh
    case: MatmulCase
    strategy: str
    steps: tuple[CommStep, ...]
    a_local: ShardedArray
    b_local: ShardedArray
    local_out: ShardedArray
    output: ShardedArray
    flops_per_device: float
    t_math: float
    chip: str
    dtype: str
    notes: tuple[str, ...] = ()
    alternatives: tuple[MatmulPlan, ...] = field(default=(), compare=False)

    @property
    def t_comms(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def t_lower(self) -> float:
        return max(self.t_math, self.t_comms)

    @property
    def t_upper(self) -> float:
        return self.t_math + self.t_comms

    @property
    def collective_kinds(self) -> tuple[str, ...]:
        """Step kinds in order, without repeats, e.g. ('all_gather',)."""
        return tuple(dict.fromkeys(s.kind for s in self.steps))

    def summary(self) -> str:
        """One line, e.g. 'case 2: AllGather_X A[I, J_X] → A[I, J] | out C[I, K] | T_comms=… T_math=…'."""
        from scalebook_utils.core.units import format_time

        comms = "; ".join(s.describe() for s in self.steps) or "no communication"
        return (
            f"case {int(self.case)}: {comms} | out {self.output.spec()} | "
            f"T_comms={format_time(self.t_comms)} T_math={format_time(self.t_math)}"
        )


def _strategies(m: Matmul, case: int) -> list[tuple[str, str]]:
    """(contraction strategy, case-4 choice) pairs; the book's default first."""
    ca, cb = contract_axes(m.a, m.contracting), contract_axes(m.b, m.contracting)
    first_c = "reduce" if case == 3 else "gather"
    contr = [first_c]
    if case == 2 and not (ca and cb):
        contr.append("reduce")  # slice the other input, local matmul, reduce (book: Questions 4 and 9)
    if case == 2:
        contr.append("permute")  # move a contracting sharding with a ppermute so both match, then reduce
    if case == 2 and m.out is not None:
        contr.append("move")  # AllToAll the contracting sharding onto a free dim the target shards
    pre = (False, True) if m.out is not None else (False,)
    return [(c, g, p) for p in pre for c in contr for g in ("a", "b")]


def _permute_to_match(m: Matmul, mesh: Mesh, bld: StepBuilder):
    """Make both inputs shard the contracting dim on the same axes T without gathering: an input already
    on other axes of the same total size is moved with a ppermute (a device permutation), an unsharded
    one is sliced for free. T: one input's contracting axes, or an axis neither input uses. XLA's SPMD
    partitioner does this on meshes with a spare axis (e.g. 2×2×2). Returns (a, b, T) or None."""
    if len(m.contracting) != 1:
        return None
    j = m.contracting[0]
    a, b = m.a, m.b
    ca, cb = a.axes_of(j), b.axes_of(j)
    free = set(free_axes(a, m.contracting)) | set(free_axes(b, m.contracting))
    spare = [(n,) for n in mesh.names if n not in set(a.used_axes) | set(b.used_axes)]
    for t in [x for x in (ca, cb) if x] + spare:
        if set(t) & free:
            continue
        plan_steps = []
        for arr in (a, b):
            c = arr.axes_of(j)
            if c == t:
                continue
            if c and mesh.axes_size(c) != mesh.axes_size(t):
                break
            plan_steps.append((arr, "ppermute" if c else "slice"))
        else:
            if not any(k == "ppermute" for _, k in plan_steps):
                continue  # that is the plain "reduce" strategy
            out = {}
            for arr, kind in plan_steps:
                new = arr.with_axes(j, t)
                if kind == "ppermute":
                    bld.add("ppermute", tuple(dict.fromkeys(arr.axes_of(j) + t)), arr, new, "input")
                else:
                    bld.notes.append(f"{arr.spec()} → {new.spec()}: a local slice (no communication)")
                out[arr.name] = new
            return out.get(a.name, a), out.get(b.name, b), tuple(t)
    return None


def _move_to_free_dim(m: Matmul, bld: StepBuilder):
    """AllToAll an input's contracting sharding onto one of its free dims that the target shards the same
    way (A[I, J_X] → A[I_X, J], book ch. 3 "AllToAll moves a subscript"); the matmul is then case 1.
    A quarter of an AllGather's cost on a ring. Returns (a, b) or None when no input fits."""
    if len(m.contracting) != 1:
        return None
    j = m.contracting[0]
    out = []
    moved = False
    for arr, free in ((m.a, m.free_a), (m.b, m.free_b)):
        c = arr.axes_of(j)
        for d in free:
            if c and not moved and not arr.axes_of(d) and m.out.axes_of(d) == c:
                new = arr.with_axes(j, ()).with_axes(d, c)
                bld.add("all_to_all", c, arr, new, "input")
                arr, moved = new, True
                break
        out.append(arr)
    return tuple(out) if moved else None


def _contract(m: Matmul, mesh: Mesh, bld: StepBuilder, contr: str):
    """The inputs at the local matmul after strategy `contr` handles the contracting dim, and the axes the
    local matmul's output is unreduced over: (a, b, unreduced), or None when `contr` does not apply."""
    ca, cb = contract_axes(m.a, m.contracting), contract_axes(m.b, m.contracting)
    if contr == "reduce":
        return _slice_to_match(m, bld, ca, cb)
    if contr == "permute":
        return _permute_to_match(m, mesh, bld)
    if contr == "move":
        r = _move_to_free_dim(m, bld)
        return None if r is None else (*r, ())
    return bld.gather(m.a, ca, "input"), bld.gather(m.b, cb, "input"), ()


def _slice_to_match(m: Matmul, bld: StepBuilder, ca: tuple[str, ...], cb: tuple[str, ...]):
    """The "reduce" strategy: both inputs shard the contracting dim on the same axes (case 3) as they are,
    or the one sharded on it makes the other slice its contracting dim the same way (free), if that input
    does not use those axes already. Returns (a, b, unreduced axes) or None."""
    if ca and ca == cb:
        return m.a, m.b, ca
    # one input is sharded on the contracting dim: slice the other one the same way (free), if it can
    src, other = (m.a, m.b) if ca else (m.b, m.a)
    axes = ca or cb
    if set(axes) & set(other.used_axes):
        return None
    sliced = other
    for d in m.contracting:
        sliced = sliced.with_axes(d, src.axes_of(d))
    bld.notes.append(f"{other.spec()} → {sliced.spec()}: a local slice (no communication)")
    a, b = (src, sliced) if ca else (sliced, src)
    return a, b, axes


def _pregather(m: Matmul, bld: StepBuilder, a: ShardedArray, b: ShardedArray):
    """Book: gather an input's non-contracting sharding first (the axes past its common prefix with the
    target's) instead of resharding C after. Returns (a, b), or None when nothing was gathered."""
    before = (a, b)
    for which in ("a", "b"):
        arr = a if which == "a" else b
        drop = []
        for d in m.free_a if which == "a" else m.free_b:
            c = arr.axes_of(d)
            drop += c[common_prefix(c, m.out.axes_of(d)) :]
        arr = bld.gather(arr, drop, "input")
        a, b = (arr, b) if which == "a" else (a, arr)
    return None if (a, b) == before else (a, b)


def _local_flops(m: Matmul, mesh: Mesh, shapes, a: ShardedArray, b: ShardedArray) -> float:
    """2 × Π(local sizes of every dim) of the local matmul of shards `a` and `b`."""
    sizes = {d: shapes[d] for d in set(m.a.dims) | set(m.b.dims)}
    local = {}
    for arr in (a, b):
        for d, n in zip(arr.dims, check(arr, mesh, {d: sizes[d] for d in arr.dims})):
            local[d] = n
    return 2.0 * math.prod(local.values())


def _strategy_name(contr: str, sharded: bool, gather_in: str, clash, pregather: bool) -> str:
    """'reduce', 'gather; gather B', 'local; inputs gathered first', …"""
    base = "reduce" if contr == "reduce" else "all-to-all" if contr == "move" else "gather" if sharded else "local"
    return base + (f"; gather {gather_in.upper()}" if clash else "") + ("; inputs gathered first" if pregather else "")


def _build(
    m: Matmul,
    mesh: Mesh,
    shapes,
    dtype,
    chip: ChipSpec,
    wraparound,
    contr: str,
    gather_in: str,
    pregather: bool = False,
):
    bld = StepBuilder(mesh, shapes, dtype, chip, wraparound)
    r = _contract(m, mesh, bld, contr)
    if r is None:
        return None
    a, b, unreduced = r
    clash = set(free_axes(a, m.contracting)) & set(free_axes(b, m.contracting))
    if clash:
        if gather_in == "a":
            a = bld.gather(a, clash, "input")
        else:
            b = bld.gather(b, clash, "input")
    elif gather_in == "b":
        return None  # no case-4 choice to make: the "a" variant is the only one
    if pregather:
        r = _pregather(m, bld, a, b)
        if r is None:
            return None
        a, b = r
    axes = {d: a.axes_of(d) for d in m.free_a} | {d: b.axes_of(d) for d in m.free_b}
    local_out = ShardedArray(m.out_name, m.out_dims, tuple(axes[d] for d in m.out_dims), unreduced)
    flops = _local_flops(m, mesh, shapes, a, b)
    t_math = flops / chip.peak_flops(dtype)
    out = bld.to_target(local_out, m.out) if m.out is not None else local_out
    sharded = bool(contract_axes(m.a, m.contracting) or contract_axes(m.b, m.contracting))
    return dict(
        strategy=_strategy_name(contr, sharded, gather_in, clash, pregather),
        steps=tuple(bld.steps),
        a_local=a,
        b_local=b,
        local_out=local_out,
        output=out,
        flops_per_device=flops,
        t_math=t_math,
        notes=tuple(bld.notes),
    )


def plan(
    matmul: Matmul | str,
    mesh: Mesh | str | Mapping,
    shapes: Mapping[str, int],
    dtype: str = "bf16",
    chip: str | ChipSpec = "tpu-v5e",
    wraparound: bool | Sequence[bool] | None = None,
) -> MatmulPlan:
    """The communication plan of a sharded matmul (book ch. 3, the four cases) with its cost on `chip`.

    Book defaults: case 1 nothing; case 2 AllGather the input(s) sharded on the contracting dim; case 3
    local matmul → C{U_axes}, then AllReduce (or ReduceScatter into a target dim that those axes shard);
    case 4 AllGather one input (A unless the target keeps A's sharding). With a target C, the final
    collectives to reach it follow (AllGather to unshard, AllToAll to move a subscript, a free local
    slice to shard a replicated dim). Collective times: `collectives.collective(kind, n_bytes,
    axis_sizes, chip, wraparound)`; T_math = 2·Π(local dims) / peak FLOPs/s in `dtype`. Collectives on
    axes of size 1 are dropped (noted). `alternatives` holds the other book strategies, cheapest first.
    wraparound=None (default): each mesh axis wraps by the chip's rule (`mesh_wraparound`: on a v5e
    {X: 2, Y: 4} no axis wraps, so an AllGather uses the one-way links); a bool or one bool per axis
    overrides it ("what if this mesh were a ring?"). A mesh of more devices than the chip's pod raises
    ShardingError, and so does a collective over more axes than the chip's torus has (`collectives.check_fits`).
    """
    m, mesh = parse_matmul(matmul), parse_mesh(mesh)
    chip_spec = get_chip(chip)
    pod = chip_spec.pod_chips
    if pod is not None and mesh.n_devices > pod:
        raise ShardingError(
            f"mesh {mesh} has {mesh.n_devices} devices, more than one {chip_spec.name} pod "
            f"({pod} chips, {shape_text(chip_spec.pod_shape)}); a sharded matmul runs over "
            "ICI inside one pod (book ch. 2–3)"
        )
    wraparound = mesh_wraparound(mesh, chip_spec, wraparound)
    dtype = canonical_dtype(dtype)
    for arr in (m.a, m.b) + ((m.out,) if m.out is not None else ()):
        check(arr, mesh, shapes)
    case = classify(m)
    seen, built = set(), []
    for contr, g, pre in _strategies(m, case):
        r = _build(m, mesh, shapes, dtype, chip_spec, wraparound, contr, g, pre)
        key = None if r is None else tuple(s.describe() for s in r["steps"])
        if r is not None and key not in seen:
            seen.add(key)
            built.append((r, contr, pre))
    # the default: the book's contraction strategy, no pre-gathering; for case 4 the input whose gather
    # leaves the fewest collectives to reach the target (A when it is a tie)
    default = [r for r, contr, pre in built if contr == built[0][1] and not pre]
    first = min(default, key=lambda r: sum(1 for s in r["steps"] if s.phase == "output"))
    others = [r for r, _, _ in built if r is not first]
    mk = lambda r, alts=(): MatmulPlan(
        matmul=m,
        mesh=mesh,
        case=case,
        chip=chip_spec.name,
        dtype=dtype,  # noqa: E731
        alternatives=alts,
        **r,
    )
    alts = sorted((mk(r) for r in others), key=lambda p: p.t_lower)
    return mk(first, tuple(alts))
