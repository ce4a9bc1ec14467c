"""The collectives of a sharded-matmul plan (book ch. 3): one step (`CommStep`), its time on a chip
(`collective_seconds`, from `collectives.collective`), which mesh axes are rings (`mesh_wraparound`), and
`StepBuilder`, which records the steps of one strategy — the AllGathers of its inputs and the collectives
from the local matmul's output to the target sharding (reduce, then reshard, then permute).

Pure Python over `notation`; `plans` chooses the strategies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from scalebook_utils.core.hardware import ChipSpec
from scalebook_utils.core.sharding.notation import (
    Mesh,
    ShardedArray,
    ShardingError,
    axes_text,
    bytes_per_device,
    parse_mesh,
)

__all__ = ["CommStep", "mesh_wraparound"]  # (collective_seconds, StepBuilder, common_prefix: for `plans`)


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
        name = {
            "all_gather": "AllGather",
            "reduce_scatter": "ReduceScatter",
            "all_reduce": "AllReduce",
            "all_to_all": "AllToAll",
            "ppermute": "ppermute",
        }[self.kind]
        return f"{name}_{axes_text(self.axes)} {self.before} → {self.after}"


def _local_bytes(arr: ShardedArray, mesh: Mesh, shapes: Mapping[str, int], dtype: str) -> float:
    return bytes_per_device(arr, mesh, {d: shapes[d] for d in arr.dims}, dtype)


def collective_seconds(kind, n_bytes, axis_sizes, chip, wraparound) -> float:
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


def mesh_wraparound(
    mesh: Mesh | str | Mapping, chip: str | ChipSpec, wraparound: bool | Sequence[bool] | None = None
) -> dict[str, bool]:
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
            raise ShardingError(
                f"wraparound has {len(wraps)} entries but mesh {mesh} has "
                f"{len(mesh.names)} axes; give one bool per axis, a single bool or None"
            )
    return dict(zip(mesh.names, wraps))


def common_prefix(c: Sequence[str], t: Sequence[str]) -> int:
    """How many leading axes two dims' shardings share: ('X', 'Y') and ('X', 'Z') → 1."""
    k = 0
    while k < min(len(c), len(t)) and c[k] == t[k]:
        k += 1
    return k


class StepBuilder:
    """Accumulates the steps of one strategy (`steps`) and what needs no communication (`notes`)."""

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
        secs = collective_seconds(kind, n_bytes, sizes, self.chip, tuple(self.wrap[a] for a in live))
        self.steps.append(CommStep(kind, live, before.spec(), after.spec(), n_bytes, secs, phase))
        return after

    def gather(self, arr: ShardedArray, drop: Iterable[str], phase: str) -> ShardedArray:
        drop = tuple(a for a in arr.used_axes if a in set(drop))
        if not drop:
            return arr
        new = replace(arr, axes=tuple(tuple(a for a in ax if a not in drop) for ax in arr.axes))
        return self.add("all_gather", drop, arr, new, phase)

    def to_target(self, cur: ShardedArray, tgt: ShardedArray) -> ShardedArray:
        """Collectives from `cur` (same dims, maybe unreduced) to the target sharding `tgt`: reduce the
        unreduced axes (`reduce`), then move, drop or add axes per dim (`reshard`), then reorder (`permute`)."""
        cur = self.reduce(replace(cur, name=tgt.name), tgt)
        cur = self.reshard(cur, tgt)
        return self.permute(cur, tgt)

    def reduce(self, cur: ShardedArray, tgt: ShardedArray) -> ShardedArray:
        """AllReduce the unreduced axes the target does not shard; ReduceScatter those it shards a dim on."""
        extra_u = [a for a in tgt.unreduced if a not in cur.unreduced]
        if extra_u:
            raise ShardingError(
                f"target {tgt.spec()} is unreduced over {axes_text(extra_u)} but the "
                f"matmul gives {cur.spec()}; a reduction cannot be undone"
            )
        to_reduce = [a for a in cur.unreduced if a not in tgt.unreduced]
        scatter = {a: d for a in to_reduce for d in tgt.dims if a in tgt.axes_of(d)}
        rs_axes = tuple(a for a in to_reduce if a in scatter)
        ar_axes = tuple(a for a in to_reduce if a not in scatter)
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
        return cur

    def reshard(self, cur: ShardedArray, tgt: ShardedArray) -> ShardedArray:
        """Per dim, keep the common prefix with the target and fix the rest: an axis on another dim moves
        (AllToAll), an axis the target lacks goes (AllGather), a new one is a free local slice."""
        removed, added = {}, {}
        for d in tgt.dims:
            c, t = cur.axes_of(d), tgt.axes_of(d)
            k = common_prefix(c, t)
            removed.update((a, d) for a in c[k:])
            added.update((a, d) for a in t[k:])
        for a in [a for a in removed if added.get(a) == removed[a]]:  # same dim, other order: permute
            del removed[a], added[a]
        moved = tuple(a for a in removed if a in added)
        gone = tuple(a for a in removed if a not in added)
        fresh = tuple(a for a in added if a not in removed)
        if fresh:
            cur = self._slice(cur, tgt, fresh)
        if moved:
            new = cur
            for a in moved:
                new = new.with_axes(removed[a], tuple(x for x in new.axes_of(removed[a]) if x != a))
            for d in tgt.dims:
                new = new.with_axes(d, new.axes_of(d) + tuple(a for a in tgt.axes_of(d) if a in moved))
            cur = self.add("all_to_all", moved, cur, new, "output")
        if gone:
            cur = self.gather(cur, gone, "output")
        return cur

    def _slice(self, cur: ShardedArray, tgt: ShardedArray, fresh: tuple[str, ...]) -> ShardedArray:
        """Shard a replicated dim over `fresh` axes: a local slice, no communication (noted)."""
        new = cur
        for d in tgt.dims:
            new = new.with_axes(
                d, new.axes_of(d) + tuple(a for a in tgt.axes_of(d) if a in fresh and a not in new.axes_of(d))
            )
        # a freshly sliced axis may sit before axes still to be fixed; only the set matters for bytes
        self.notes.append(f"{cur.spec()} → {new.spec()}: a local slice over {axes_text(fresh)} (no communication)")
        return new

    def permute(self, cur: ShardedArray, tgt: ShardedArray) -> ShardedArray:
        """Same axes, different order on a dim: a device permutation (ppermute) onto the target's order."""
        if cur.axes == tgt.axes:
            return cur
        new = replace(cur, axes=tgt.axes)
        return self.add(
            "ppermute",
            tuple(a for d in tgt.dims for a in tgt.axes_of(d) if tgt.axes_of(d) != cur.axes_of(d)),
            cur,
            new,
            "output",
        )
