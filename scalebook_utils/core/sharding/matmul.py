"""Sharded matmuls: the four cases, their communication plans and the JAX program (book ch. 3).

The four cases (ch. 3, "Computation With Sharded Arrays"):
    1. the contracting dim is unsharded in both inputs → no communication
    2. one input is sharded on the contracting dim → AllGather it first (or: local matmul + AllReduce)
    3. both are sharded on the contracting dim along the same axes → local matmul, then AllReduce
       (or ReduceScatter when the target is sharded)
    4. both shard a non-contracting dim on the same axis → AllGather one input first

`plan` turns a matmul, a mesh and dim sizes into those steps with their bytes and their time on a
chip (collective times from `collectives.collective`), the local matmul's FLOPs and T_math, and the
output sharding. The notation itself (meshes, sharded arrays) is in `sharding`. Pure Python: the JAX
side (PartitionSpec, compiled HLO) lives in `jaxlab`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.hlo.text import HLO_NAME
from scalebook_utils.core.sharding.notation import (Mesh, ShardedArray, ShardingError, axes_text, bytes_per_device, check, device_blocks, local_shape, parse_array, parse_mesh, replication, total_bytes)
from scalebook_utils.core.units import canonical_dtype

# --- matmuls --------------------------------------------------------------------------------------

_OP = r"(?:·|⋅|\*|@|\.)"


@dataclass(frozen=True)
class Matmul:
    """A ·_contracting B [→ out]. `out` is the target sharding (None: whatever the local matmul gives)."""

    a: ShardedArray
    b: ShardedArray
    contracting: tuple[str, ...]
    out: ShardedArray | None = None

    def __post_init__(self):
        object.__setattr__(self, "contracting", tuple(self.contracting))
        for arr in (self.a, self.b):
            if arr.unreduced:
                raise ShardingError(f"input {arr.spec()} is unreduced; reduce it before a matmul")
        if not self.contracting:
            raise ShardingError(f"{self.a.spec()} and {self.b.spec()} share no dim to contract")
        for d in self.contracting:
            if d not in self.a.dims or d not in self.b.dims:
                raise ShardingError(f"contracting dim {d} must appear in both {self.a.spec()} and {self.b.spec()}")
        batch = [d for d in self.a.dims if d in self.b.dims and d not in self.contracting]
        if batch:
            raise ShardingError(f"dim(s) {', '.join(batch)} appear in both inputs but are not contracted; "
                                "batched matmuls are not covered by the four cases")
        if self.out is not None:
            free = self.free_a + self.free_b
            if sorted(self.out.dims) != sorted(free):
                raise ShardingError(f"target {self.out.spec()} must have dims {', '.join(free)} "
                                    f"(the free dims of {self.a.name} and {self.b.name})")

    @property
    def free_a(self) -> tuple[str, ...]:
        return tuple(d for d in self.a.dims if d not in self.contracting)

    @property
    def free_b(self) -> tuple[str, ...]:
        return tuple(d for d in self.b.dims if d not in self.contracting)

    @property
    def out_dims(self) -> tuple[str, ...]:
        """Output dims: the target's order when given, else A's free dims then B's."""
        return self.out.dims if self.out is not None else self.free_a + self.free_b

    @property
    def out_name(self) -> str:
        return self.out.name if self.out is not None else "C"

    def spec(self) -> str:
        """'A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]' (parse_matmul(m.spec()) == m)."""
        sub = self.contracting[0] if len(self.contracting) == 1 else "{" + ",".join(self.contracting) + "}"
        s = f"{self.a.spec()} ·_{sub} {self.b.spec()}"
        return s + (f" → {self.out.spec()}" if self.out is not None else "")

    def __str__(self) -> str:
        return self.spec()

    def einsum(self) -> str:
        """numpy/jnp einsum string, e.g. 'ij,jk->ik' (one lower-case letter per dim name)."""
        names = list(dict.fromkeys(self.a.dims + self.b.dims))
        if all(len(d) == 1 for d in names) and len({d.lower() for d in names}) == len(names):
            letters = {d: d.lower() for d in names}                      # I, J, K → 'ij,jk->ik'
        else:
            letters = {d: "abcdefghijklmnopqrstuvwxyz"[i] for i, d in enumerate(names)}
        lt = lambda dims: "".join(letters[d] for d in dims)  # noqa: E731
        return f"{lt(self.a.dims)},{lt(self.b.dims)}->{lt(self.out_dims)}"


def parse_matmul(text: str | Matmul) -> Matmul:
    """'A[I_X, J] ·_J B[J, K_Y]' (also '*_J', '@', no subscript, '→ C[...]' or '-> C[...]') → Matmul.

    Without a subscript the contracting dims are the dims shared by A and B (minus any the target keeps).
    """
    if isinstance(text, Matmul):
        return text
    if not isinstance(text, str):
        raise ShardingError(f"a matmul is a string like 'A[I_X, J] ·_J B[J, K_Y]', got {text!r}")
    left, *rest = re.split(r"→|->", text)
    if len(rest) > 1:
        raise ShardingError(f"{text!r} has more than one arrow")
    m = re.match(rf"^\s*(?P<a>[^\[\]]+\[[^\]]*\](?:\s*\{{[^}}]*\}})?)\s*{_OP}"
                 rf"(?:_\s*(?P<sub>\{{[^}}]*\}}|[A-Za-z][A-Za-z0-9']*(?=\s)))?\s*(?P<b>.+)$", left)
    if not m:
        raise ShardingError(f"cannot read {text!r} as a matmul; write e.g. 'A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]'")
    a, b = parse_array(m.group("a")), parse_array(m.group("b"))
    out = parse_array(rest[0]) if rest else None
    sub = m.group("sub")
    if sub:
        contracting = tuple(s.strip() for s in sub.strip("{}").split(",") if s.strip())
    else:
        keep = set(out.dims) if out is not None else set()
        contracting = tuple(d for d in a.dims if d in b.dims and d not in keep)
    return Matmul(a, b, contracting, out)


class MatmulCase(int):
    """The book's case number (1–4) as an int, with `.reason` saying why."""

    reason: str

    def __new__(cls, case: int, reason: str):
        obj = super().__new__(cls, case)
        obj.reason = reason
        return obj

    def __repr__(self) -> str:
        return f"MatmulCase({int(self)}, {self.reason!r})"


def _contract_axes(arr: ShardedArray, contracting: Sequence[str]) -> tuple[str, ...]:
    return tuple(a for d in contracting for a in arr.axes_of(d))


def _free_axes(arr: ShardedArray, contracting: Sequence[str]) -> tuple[str, ...]:
    return tuple(a for d, ax in zip(arr.dims, arr.axes) if d not in contracting for a in ax)


def classify(matmul: Matmul | str) -> MatmulCase:
    """The book's case (ch. 3, "Computation With Sharded Arrays") of a sharded matmul, with a reason.

    1: the contracting dim is unsharded in both inputs (and no non-contracting axis clash) — no comms;
    2: the contracting dim is sharded in one input only, or on different axes in the two;
    3: both inputs shard the contracting dim along the same axes — local matmul, then a reduction;
    4: the contracting dim is unsharded but both inputs shard a non-contracting dim on the same axis.
    Cases 2/3 are decided first (a contraction clash is resolved before a free-dim clash).
    """
    m = parse_matmul(matmul)
    ca, cb = _contract_axes(m.a, m.contracting), _contract_axes(m.b, m.contracting)
    j = ",".join(m.contracting)
    clash = sorted(set(_free_axes(m.a, m.contracting)) & set(_free_axes(m.b, m.contracting)))
    extra = (f"; afterwards both still shard a non-contracting dim on {', '.join(clash)} (case 4), "
             "so one input is also gathered") if clash else ""
    if ca and ca == cb:
        return MatmulCase(3, f"both inputs shard the contracting dim {j} on {axes_text(ca)}: local matmul "
                             f"gives partial sums {{U_{axes_text(ca)}}}, then AllReduce or ReduceScatter" + extra)
    if ca or cb:
        if ca and cb:
            why = (f"the contracting dim {j} is sharded on different axes ({m.a.name}: {axes_text(ca)}, "
                   f"{m.b.name}: {axes_text(cb)})")
        else:
            who, ax = (m.a, ca) if ca else (m.b, cb)
            why = f"only {who.name} shards the contracting dim {j} (on {axes_text(ax)})"
        return MatmulCase(2, why + ": AllGather it first (or local matmul + AllReduce)" + extra)
    if clash:
        return MatmulCase(4, f"both inputs shard a non-contracting dim on {', '.join(clash)}: "
                             "AllGather one input first")
    return MatmulCase(1, f"the contracting dim {j} is unsharded in both inputs: no communication, "
                         "the output keeps the inputs' shardings")


# --- plans ----------------------------------------------------------------------------------------

# HLO_NAME (imported above from `hlo.text`, the one table): plan step kinds (as `collectives.collective`
# spells them) → the op name in compiled HLO.


@dataclass(frozen=True)
class CommStep:
    """One collective of a plan: `kind` over mesh `axes`, turning `before` into `after`.

    n_bytes: what `collectives.collective` is given — the bytes of the array as a whole over `axes`
    (per device after an AllGather; the unreduced per-device array for AllReduce/ReduceScatter; for
    AllToAll the array gathered over `axes`; for ppermute the per-device shard). seconds: its time.
    phase: 'input' (before the local matmul) or 'output'.
    """

    kind: str
    axes: tuple[str, ...]
    before: str
    after: str
    n_bytes: float
    seconds: float
    phase: str

    def describe(self) -> str:
        name = {"all_gather": "AllGather", "reduce_scatter": "ReduceScatter", "all_reduce": "AllReduce",
                "all_to_all": "AllToAll", "ppermute": "ppermute"}[self.kind]
        return f"{name}_{axes_text(self.axes)} {self.before} → {self.after}"


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
    alternatives: tuple["MatmulPlan", ...] = field(default=(), compare=False)

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
        return (f"case {int(self.case)}: {comms} | out {self.output.spec()} | "
                f"T_comms={format_time(self.t_comms)} T_math={format_time(self.t_math)}")


def _local_bytes(arr: ShardedArray, mesh: Mesh, shapes: Mapping[str, int], dtype: str) -> float:
    return bytes_per_device(arr, mesh, {d: shapes[d] for d in arr.dims}, dtype)


def _collective_seconds(kind, n_bytes, axis_sizes, chip, wraparound) -> float:
    """Seconds of one collective from `collectives.collective` (book ch. 3 cost model).

    `wraparound`: one bool per axis in `axis_sizes`. A ppermute over axes is a device permutation whose
    farthest pair we take as ⌊X/2⌋ hops on a ring axis (X − 1 without wraparound), the longest axis
    deciding; n_bytes is what each device sends.
    """
    from scalebook_utils.core import collectives
    wraps = tuple(wraparound)
    if kind == "ppermute":
        hops = max((x // 2 if w else x - 1) for x, w in zip(axis_sizes, wraps))
        return float(collectives.collective("ppermute", n_bytes, None, chip, hops=max(hops, 1)).seconds)
    return float(collectives.collective(kind, n_bytes, tuple(axis_sizes), chip, wraparound=wraps).seconds)


def mesh_wraparound(mesh: Mesh | str | Mapping, chip: str | ChipSpec,
                    wraparound: bool | Sequence[bool] | None = None) -> dict[str, bool]:
    """Which mesh axes are rings: {axis name: wraps?} (book ch. 2's rule unless `wraparound` is given).

    wraparound=None treats the mesh as a slice of that shape on `chip` (padded with 1s to the chip's
    torus, as `topology.make_slice` does) and applies `topology.default_wraparound`: on v5e/v6e an axis
    wraps only when it spans the pod side (16); on v4p/v5p/TPU7x every axis wraps only for whole 4×4×4
    cubes. So a v5e {X: 2, Y: 4} has no wraparound, a v4p {X: 4, Y: 4, Z: 4} wraps everywhere. A bool
    applies to every axis; a sequence gives one bool per axis (in mesh order).
    """
    from scalebook_utils.core.topology import default_wraparound, tpu_chip

    mesh = parse_mesh(mesh)
    if wraparound is None:
        spec = tpu_chip(chip)
        sizes = tuple(mesh.sizes)
        dims = spec.ici_torus_dims
        padded = sizes + (1,) * (dims - len(sizes)) if len(sizes) <= dims else sizes
        wraps = default_wraparound(spec, padded)[: len(sizes)]
    elif isinstance(wraparound, (bool, int)):
        wraps = (bool(wraparound),) * len(mesh.names)
    else:
        wraps = tuple(bool(w) for w in wraparound)
        if len(wraps) != len(mesh.names):
            raise ShardingError(f"wraparound has {len(wraps)} entries but mesh {mesh} has "
                                f"{len(mesh.names)} axes; give one bool per axis, a single bool or None")
    return dict(zip(mesh.names, wraps))


class _Builder:
    """Accumulates the steps of one strategy."""

    def __init__(self, mesh, shapes, dtype, chip, wraparound):
        self.mesh, self.shapes, self.dtype, self.chip, self.wrap = mesh, shapes, dtype, chip, wraparound
        self.steps: list[CommStep] = []
        self.notes: list[str] = []

    def add(self, kind, axes, before: ShardedArray, after: ShardedArray, phase: str):
        axes = tuple(axes)
        live = tuple(a for a in axes if self.mesh.size(a) > 1)
        if not live:
            self.notes.append(f"{kind} over {axes_text(axes)} skipped: axis size 1")
            return after
        bytes_before = _local_bytes(before, self.mesh, self.shapes, self.dtype)
        if kind in ("all_reduce", "reduce_scatter", "ppermute"):
            n_bytes = bytes_before
        else:  # all_gather, all_to_all: the array gathered over `axes`
            n_bytes = bytes_before * self.mesh.axes_size(axes)
        sizes = tuple(self.mesh.size(a) for a in live)
        secs = _collective_seconds(kind, n_bytes, sizes, self.chip, tuple(self.wrap[a] for a in live))
        self.steps.append(CommStep(kind, live, before.spec(), after.spec(), n_bytes, secs, phase))
        return after

    def gather(self, arr: ShardedArray, drop: Iterable[str], phase: str) -> ShardedArray:
        drop = tuple(a for a in arr.used_axes if a in set(drop))
        if not drop:
            return arr
        new = replace(arr, axes=tuple(tuple(a for a in ax if a not in drop) for ax in arr.axes))
        return self.add("all_gather", drop, arr, new, phase)

    def to_target(self, cur: ShardedArray, tgt: ShardedArray) -> ShardedArray:
        """Collectives from `cur` (same dims, maybe unreduced) to the target sharding `tgt`."""
        cur = replace(cur, name=tgt.name)
        extra_u = [a for a in tgt.unreduced if a not in cur.unreduced]
        if extra_u:
            raise ShardingError(f"target {tgt.spec()} is unreduced over {axes_text(extra_u)} but the "
                                f"matmul gives {cur.spec()}; a reduction cannot be undone")
        reduce = [a for a in cur.unreduced if a not in tgt.unreduced]
        if reduce:
            scatter = {}
            for a in reduce:
                for d in tgt.dims:
                    if a in tgt.axes_of(d):
                        scatter[a] = d
            rs_axes = tuple(a for a in reduce if a in scatter)
            ar_axes = tuple(a for a in reduce if a not in scatter)
            if ar_axes:
                new = replace(cur, unreduced=tuple(a for a in cur.unreduced if a not in ar_axes))
                cur = self.add("all_reduce", ar_axes, cur, new, "output")
            if rs_axes:
                new = replace(cur, unreduced=tuple(a for a in cur.unreduced if a not in rs_axes))
                for d in tgt.dims:  # append in the target's axis order
                    add = tuple(a for a in tgt.axes_of(d) if a in rs_axes)
                    if add:
                        new = new.with_axes(d, cur.axes_of(d) + add)
                cur = self.add("reduce_scatter", rs_axes, cur, new, "output")
        # per-dim reshard: keep the common prefix, move (AllToAll), drop (AllGather), add (free slice)
        removed, added = {}, {}
        for d in tgt.dims:
            c, t = cur.axes_of(d), tgt.axes_of(d)
            k = 0
            while k < min(len(c), len(t)) and c[k] == t[k]:
                k += 1
            for a in c[k:]:
                removed[a] = d
            for a in t[k:]:
                added[a] = d
        for a in [a for a in removed if added.get(a) == removed[a]]:  # same dim, other order: permute
            del removed[a], added[a]
        moved = tuple(a for a in removed if a in added)
        gone = tuple(a for a in removed if a not in added)
        fresh = tuple(a for a in added if a not in removed)
        if fresh:  # slicing a replicated axis needs no communication
            new = cur
            for d in tgt.dims:
                new = new.with_axes(d, new.axes_of(d) + tuple(a for a in tgt.axes_of(d) if a in fresh
                                                              and a not in new.axes_of(d)))
            # a freshly sliced axis may sit before axes still to be fixed; only the set matters for bytes
            self.notes.append(f"{cur.spec()} → {new.spec()}: a local slice over {axes_text(fresh)} "
                              "(no communication)")
            cur = new
        if moved:
            new = cur
            for a in moved:
                new = new.with_axes(removed[a], tuple(x for x in new.axes_of(removed[a]) if x != a))
            for d in tgt.dims:
                new = new.with_axes(d, new.axes_of(d) + tuple(a for a in tgt.axes_of(d) if a in moved))
            cur = self.add("all_to_all", moved, cur, new, "output")
        if gone:
            cur = self.gather(cur, gone, "output")
        if cur.axes != tgt.axes:  # same axes, different order on a dim: a device permutation
            new = replace(cur, axes=tgt.axes)
            cur = self.add("ppermute", tuple(a for d in tgt.dims for a in tgt.axes_of(d)
                                             if tgt.axes_of(d) != cur.axes_of(d)), cur, new, "output")
        return cur


def _strategies(m: Matmul, case: int) -> list[tuple[str, str]]:
    """(contraction strategy, case-4 choice) pairs; the book's default first."""
    ca, cb = _contract_axes(m.a, m.contracting), _contract_axes(m.b, m.contracting)
    first_c = "reduce" if case == 3 else "gather"
    contr = [first_c]
    if case == 2 and not (ca and cb):
        contr.append("reduce")   # slice the other input, local matmul, reduce (book: Questions 4 and 9)
    if case == 2:
        contr.append("permute")  # move a contracting sharding with a ppermute so both match, then reduce
    if case == 2 and m.out is not None:
        contr.append("move")     # AllToAll the contracting sharding onto a free dim the target shards
    pre = (False, True) if m.out is not None else (False,)
    return [(c, g, p) for p in pre for c in contr for g in ("a", "b")]


def _permute_to_match(m: Matmul, mesh: Mesh, bld: "_Builder"):
    """Make both inputs shard the contracting dim on the same axes T without gathering: an input already
    on other axes of the same total size is moved with a ppermute (a device permutation), an unsharded
    one is sliced for free. T: one input's contracting axes, or an axis neither input uses. XLA's SPMD
    partitioner does this on meshes with a spare axis (e.g. 2×2×2). Returns (a, b, T) or None."""
    if len(m.contracting) != 1:
        return None
    j = m.contracting[0]
    a, b = m.a, m.b
    ca, cb = a.axes_of(j), b.axes_of(j)
    free = set(_free_axes(a, m.contracting)) | set(_free_axes(b, m.contracting))
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


def _move_to_free_dim(m: Matmul, bld: "_Builder"):
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


def _build(m: Matmul, mesh: Mesh, shapes, dtype, chip: ChipSpec, wraparound, contr: str, gather_in: str,
           pregather: bool = False):
    bld = _Builder(mesh, shapes, dtype, chip, wraparound)
    a, b = m.a, m.b
    ca, cb = _contract_axes(a, m.contracting), _contract_axes(b, m.contracting)
    unreduced: tuple[str, ...] = ()
    if contr == "reduce" and ca == cb and ca:
        unreduced = ca
    elif contr == "reduce":
        # one input is sharded on the contracting dim: slice the other one the same way (free), if it can
        src, other = (a, b) if ca else (b, a)
        axes = ca or cb
        if set(axes) & set(other.used_axes):
            return None
        sliced = other
        for d in m.contracting:
            sliced = sliced.with_axes(d, src.axes_of(d))
        bld.notes.append(f"{other.spec()} → {sliced.spec()}: a local slice (no communication)")
        a, b = (src, sliced) if ca else (sliced, src)
        unreduced = axes
    elif contr == "permute":
        r = _permute_to_match(m, mesh, bld)
        if r is None:
            return None
        a, b, unreduced = r
    elif contr == "move":
        r = _move_to_free_dim(m, bld)
        if r is None:
            return None
        a, b = r
    else:
        a = bld.gather(a, _contract_axes(a, m.contracting), "input")
        b = bld.gather(b, _contract_axes(b, m.contracting), "input")
    clash = set(_free_axes(a, m.contracting)) & set(_free_axes(b, m.contracting))
    if clash:
        if gather_in == "a":
            a = bld.gather(a, clash, "input")
        else:
            b = bld.gather(b, clash, "input")
    elif gather_in == "b":
        return None  # no case-4 choice to make: the "a" variant is the only one
    if pregather:  # book: gather an input's non-contracting sharding first instead of resharding C after
        before = (a, b)
        for which in ("a", "b"):
            arr = a if which == "a" else b
            drop = []
            for d in (m.free_a if which == "a" else m.free_b):
                c, t = arr.axes_of(d), m.out.axes_of(d)
                k = 0
                while k < min(len(c), len(t)) and c[k] == t[k]:
                    k += 1
                drop += c[k:]
            arr = bld.gather(arr, drop, "input")
            a, b = (arr, b) if which == "a" else (a, arr)
        if (a, b) == before:
            return None
    axes = {d: a.axes_of(d) for d in m.free_a} | {d: b.axes_of(d) for d in m.free_b}
    local_out = ShardedArray(m.out_name, m.out_dims, tuple(axes[d] for d in m.out_dims), unreduced)
    sizes = {d: shapes[d] for d in set(m.a.dims) | set(m.b.dims)}
    local = {}
    for arr in (a, b):
        for d, n in zip(arr.dims, check(arr, mesh, {d: sizes[d] for d in arr.dims})):
            local[d] = n
    flops = 2.0 * math.prod(local.values())
    t_math = flops / chip.peak_flops(dtype)
    out = bld.to_target(local_out, m.out) if m.out is not None else local_out
    base = ("reduce" if contr == "reduce" else "all-to-all" if contr == "move" else "gather" if (ca or cb)
            else "local")
    name = base + (f"; gather {gather_in.upper()}" if clash else "") + ("; inputs gathered first" if pregather else "")
    return dict(strategy=name, steps=tuple(bld.steps), a_local=a, b_local=b, local_out=local_out, output=out,
                flops_per_device=flops, t_math=t_math, notes=tuple(bld.notes))


def plan(matmul: Matmul | str, mesh: Mesh | str | Mapping, shapes: Mapping[str, int], dtype: str = "bf16",
         chip: str | ChipSpec = "tpu-v5e", wraparound: bool | Sequence[bool] | None = None) -> MatmulPlan:
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
        raise ShardingError(f"mesh {mesh} has {mesh.n_devices} devices, more than one {chip_spec.name} pod "
                            f"({pod} chips, {'x'.join(map(str, chip_spec.pod_shape))}); a sharded matmul runs over "
                            "ICI inside one pod (book ch. 2–3)")
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
    mk = lambda r, alts=(): MatmulPlan(matmul=m, mesh=mesh, case=case, chip=chip_spec.name, dtype=dtype,  # noqa: E731
                                       alternatives=alts, **r)
    alts = sorted((mk(r) for r in others), key=lambda p: p.t_lower)
    return mk(first, tuple(alts))


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
            why.append(f"the predicted reduce-scatter compiled as all-reduce{sl} (the CPU compiler never "
                       "emits reduce-scatter from automatic sharding)")
        if "collective-permute" in have and "collective-permute" not in pred:
            have.discard("collective-permute")
            why.append("XLA added a collective-permute that moves shards between devices to match its "
                       "device order (a layout fix-up, not a reduction or gather)")
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


def predicted_vs_compiled(plan_: MatmulPlan, compiled_counter: Mapping[str, int],
                          hlo: str | None = None) -> tuple[bool, str]:
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
        head = (f"agree: compiled {kinds}; plan ({p.strategy}): "
                f"{'; '.join(s.describe() for s in p.steps) or 'no communication'}")
        if p is not plan_:
            head += (f". XLA chose the book's alternative strategy '{p.strategy}' instead of the default "
                     f"'{plan_.strategy}'")
        return True, head + (". " + "; ".join(why) if why else "")
    pred = ", ".join(HLO_NAME[k] for k in plan_.collective_kinds) or "none"
    return False, (f"disagree: plan predicts {pred} but XLA compiled "
                   f"{dict(compiled_counter) or 'no collectives'}")


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


def jax_program(matmul: Matmul | str, mesh: Mesh | str | Mapping, shapes: Mapping[str, int] | None = None,
                dtype: str = "float32") -> str:
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
        f"A = jax.device_put(jnp.ones({shape(m.a)}, jnp.{jdt}), NamedSharding(mesh, {_pspec_src(m.a)}))  # {m.a.spec()}",
        f"B = jax.device_put(jnp.ones({shape(m.b)}, jnp.{jdt}), NamedSharding(mesh, {_pspec_src(m.b)}))  # {m.b.spec()}",
        f"matmul = jax.jit(lambda a, b: jnp.einsum({m.einsum()!r}, a, b){out})",
        "C = matmul(A, B)",
        "print(C.shape, C.sharding.spec)",
    ]
    return "\n".join(lines) + "\n"


__all__ = [
    "ShardingError", "Mesh", "parse_mesh", "ShardedArray", "parse_array", "check", "local_shape",
    "bytes_per_device", "replication", "total_bytes", "device_blocks", "Matmul", "parse_matmul", "MatmulCase",
    "classify", "CommStep", "MatmulPlan", "plan", "mesh_wraparound", "predicted_vs_compiled", "matched_strategy", "jax_program", "HLO_NAME",
]
