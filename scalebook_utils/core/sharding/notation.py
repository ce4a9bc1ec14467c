"""Sharded arrays in the book's notation (book ch. 3, "A unified notation for sharding").

    mesh      {X: 2, Y: 4}             named mesh axes and their sizes (8 devices)
    A[I_X, J]                          dim I split over X, J whole; replicated over the unused axis Y
    A[I_XY, J]                         I split over X and Y together (X major: the traversal order)
    C[I, K]{U_X}                       partial sums, not yet reduced over X

Axis names in a subscript are single letters (`I_XY` = axes X, Y); longer names go in braces,
`I_{data,model}`. A mesh axis may appear at most once in an array. This module parses and checks
meshes and sharded arrays and answers "what does each device hold?" (local shape, bytes,
replication, block coordinates).

Sharded *matmuls* — the four cases, communication plans and the JAX program — are in the sibling
`matmul` module; the folder's front door (`core/sharding/__init__.py`, the public name `sharding`)
re-exports both, so chapter 3 reads from one namespace. Pure Python: the JAX side lives in `lab`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from scalebook_utils.core.units import dtype_bytes, is_int


class ShardingError(ValueError):
    """An invalid sharding, mesh or matmul spec (the message names the array, dim, axis and sizes)."""


# --- meshes ---------------------------------------------------------------------------------------

_AXIS_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


@dataclass(frozen=True)
class Mesh:
    """A device mesh: ordered (axis name, size) pairs, e.g. {X: 2, Y: 4} (book ch. 3).

    The first axis is the major one: device (x, y) is number x·|Y| + y, as in jax.make_mesh.
    """

    axes: tuple[tuple[str, int], ...]

    def __post_init__(self):
        axes = tuple((str(n), s) for n, s in self.axes)
        if not axes:
            raise ShardingError("a mesh needs at least one axis, e.g. {X: 8}")
        seen = set()
        for name, size in axes:
            if not _AXIS_NAME.match(name):
                raise ShardingError(f"mesh axis name {name!r} must be a letter followed by letters or digits")
            if name in seen:
                raise ShardingError(f"mesh axis {name!r} appears twice in {dict(axes)}")
            seen.add(name)
            if not is_int(size) or size < 1:
                raise ShardingError(f"mesh axis {name!r} needs a positive integer size, got {size!r}")
        object.__setattr__(self, "axes", tuple((n, int(s)) for n, s in axes))

    @classmethod
    def from_dict(cls, axes: Mapping[str, int]) -> Mesh:
        """Mesh.from_dict({"X": 2, "Y": 4})."""
        return cls(tuple((k, v) for k, v in dict(axes).items()))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def n_devices(self) -> int:
        """Number of devices: the product of the axis sizes."""
        return math.prod(self.sizes)

    def as_dict(self) -> dict[str, int]:
        return dict(self.axes)

    def size(self, axis: str) -> int:
        """Size of one axis; a ShardingError naming the mesh's axes when it has no such axis."""
        for n, s in self.axes:
            if n == axis:
                return s
        raise ShardingError(f"mesh {self} has no axis {axis!r} (axes: {', '.join(self.names)})")

    def axes_size(self, axes: Iterable[str]) -> int:
        """Product of the sizes of `axes` (1 for none)."""
        return math.prod(self.size(a) for a in axes)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{n}: {s}" for n, s in self.axes) + "}"


def parse_mesh(text: str | Mapping[str, int] | Mesh) -> Mesh:
    """'{X: 2, Y: 4}' (braces and quotes optional, ':' or '=') → Mesh; a dict or Mesh passes through."""
    if isinstance(text, Mesh):
        return text
    if isinstance(text, Mapping):
        return Mesh.from_dict(text)
    if not isinstance(text, str):
        raise ShardingError(f"a mesh is a string like '{{X: 2, Y: 4}}' or a dict, got {text!r}")
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    axes = []
    for part in filter(None, (p.strip() for p in body.split(","))):
        m = re.match(r"""^['"]?([A-Za-z][A-Za-z0-9]*)['"]?\s*[:=]\s*(\d+)$""", part)
        if not m:
            raise ShardingError(f"cannot read mesh axis {part!r} in {text!r}; write e.g. '{{X: 2, Y: 4}}'")
        axes.append((m.group(1), int(m.group(2))))
    return Mesh(tuple(axes))


# --- sharded arrays -------------------------------------------------------------------------------

_NAME = r"[A-Za-z][A-Za-z0-9_']*"
_DIM = re.compile(r"^([A-Za-z][A-Za-z0-9']*)(?:_(\{[^}]*\}|[A-Za-z0-9]+))?$")


def axes_text(axes: Sequence[str]) -> str:
    """('X', 'Y') → 'XY'; names longer than one letter → '{data,model}'."""
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


def _parse_axes(text: str, where: str) -> tuple[str, ...]:
    text = text.strip()
    axes = tuple(a.strip() for a in text[1:-1].split(",") if a.strip()) if text.startswith("{") else tuple(text)
    for a in axes:
        if not _AXIS_NAME.match(a):
            raise ShardingError(f"bad mesh axis name {a!r} in {where}")
    if not axes:
        raise ShardingError(f"empty axis list in {where}")
    return axes


@dataclass(frozen=True)
class ShardedArray:
    """An array in the book's sharding notation, e.g. A[I_XY, J] or C[I, K]{U_X}.

    name: 'A'; dims: ('I', 'J'); axes: per dim, the mesh axes it is split over in traversal order
    (major first), e.g. (('X', 'Y'), ()); unreduced: mesh axes over which the values are partial sums.
    """

    name: str
    dims: tuple[str, ...]
    axes: tuple[tuple[str, ...], ...]
    unreduced: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "axes", tuple(tuple(a) for a in self.axes))
        object.__setattr__(self, "unreduced", tuple(self.unreduced))
        if len(self.dims) != len(self.axes):
            raise ShardingError(f"array {self.name}: {len(self.dims)} dims but {len(self.axes)} axis tuples")
        if len(set(self.dims)) != len(self.dims):
            dup = next(d for d in self.dims if self.dims.count(d) > 1)
            raise ShardingError(f"array {self.name}: dim {dup} appears twice in {self.spec()}")
        where: dict[str, str] = {}
        for dim, axes in zip(self.dims, self.axes):
            for a in axes:
                if a in where:
                    raise ShardingError(
                        f"array {self.name}: mesh axis {a} is used twice (dims {where[a]} and {dim}) in "
                        f"{self.spec()}; a mesh axis may shard at most one dim of an array (book ch. 3)"
                    )
                where[a] = dim
        for a in self.unreduced:
            if a in where:
                raise ShardingError(
                    f"array {self.name}: mesh axis {a} both shards dim {where[a]} and is unreduced in {self.spec()}"
                )
            if self.unreduced.count(a) > 1:
                raise ShardingError(f"array {self.name}: axis {a} listed twice as unreduced")

    # -- text -----------------------------------------------------------------------------------
    def spec(self) -> str:
        """The book-notation string: 'A[I_XY, J]', 'C[I, K]{U_X}' (parse_array(a.spec()) == a)."""
        dims = ", ".join(d + (f"_{axes_text(ax)}" if ax else "") for d, ax in zip(self.dims, self.axes))
        u = "{U_" + axes_text(self.unreduced) + "}" if self.unreduced else ""
        return f"{self.name}[{dims}]{u}"

    def __str__(self) -> str:
        return self.spec()

    def partition_spec(self) -> tuple:
        """Plain tuple for jax.sharding.PartitionSpec: A[I_XY, J] → (('X', 'Y'), None).

        Unreduced axes have no PartitionSpec entry; `jaxlab.partition_spec` refuses such arrays.
        """
        return tuple(tuple(ax) if ax else None for ax in self.axes)

    # -- structure ------------------------------------------------------------------------------
    @property
    def used_axes(self) -> tuple[str, ...]:
        """Mesh axes that shard some dim, in dim order (unreduced axes not included)."""
        return tuple(a for ax in self.axes for a in ax)

    def axes_of(self, dim: str) -> tuple[str, ...]:
        return self.axes[self.dims.index(dim)]

    def with_axes(self, dim: str, axes: Sequence[str]) -> ShardedArray:
        i = self.dims.index(dim)
        return replace(self, axes=self.axes[:i] + (tuple(axes),) + self.axes[i + 1 :])


def parse_array(text: str | ShardedArray) -> ShardedArray:
    """'A[I_X, J]', 'A[I_XY, J]', 'C[I, K]{U_X}', 'W_in[D, F_{data,model}]' → ShardedArray."""
    if isinstance(text, ShardedArray):
        return text
    if not isinstance(text, str):
        raise ShardingError(f"a sharded array is a string like 'A[I_X, J]', got {text!r}")
    m = re.match(rf"^\s*({_NAME})\s*\[([^\]]*)\]\s*(\{{[^}}]*\}})?\s*$", text)
    if not m:
        raise ShardingError(f"cannot read {text!r} as a sharded array; write e.g. 'A[I_X, J]' or 'C[I, K]{{U_X}}'")
    name, body, unred = m.groups()
    dims, axes = [], []
    parts = [p.strip() for p in re.split(r",(?![^{]*\})", body)] if body.strip() else []
    for part in parts:
        dm = _DIM.match(part)
        if not dm:
            raise ShardingError(f"cannot read dim {part!r} of {name} in {text!r}; write e.g. I, I_X or I_XY")
        dims.append(dm.group(1))
        axes.append(_parse_axes(dm.group(2), f"{text!r}") if dm.group(2) else ())
    unreduced: tuple[str, ...] = ()
    if unred:
        for item in (p.strip() for p in re.split(r",(?![^{]*\})", unred[1:-1])):
            um = re.match(r"^U_(\{[^}]*\}|[A-Za-z0-9]+)$", item)
            if not um:
                raise ShardingError(f"cannot read {item!r} in {text!r}; unreduced axes are written {{U_X}} or {{U_XY}}")
            unreduced += _parse_axes(um.group(1), f"{text!r}")
    if not dims:
        raise ShardingError(f"array {name} in {text!r} has no dims")
    return ShardedArray(name, tuple(dims), tuple(axes), unreduced)


def shape_tuple(array: ShardedArray, shape) -> tuple[int, ...]:
    if isinstance(shape, Mapping):
        missing = [d for d in array.dims if d not in shape]
        if missing:
            raise ShardingError(
                f"array {array.name}: no size given for dim(s) {', '.join(missing)} (sizes given: {dict(shape)})"
            )
        sizes = tuple(shape[d] for d in array.dims)
    else:
        sizes = tuple(shape)
        if len(sizes) != len(array.dims):
            raise ShardingError(f"array {array.spec()} has {len(array.dims)} dims but shape {sizes} has {len(sizes)}")
    for d, s in zip(array.dims, sizes):
        if not is_int(s) or s < 1:
            raise ShardingError(f"array {array.name}: dim {d} needs a positive integer size, got {s!r}")
    return tuple(int(s) for s in sizes)


def check(
    array: ShardedArray | str, mesh: Mesh | str | Mapping, shape: Mapping[str, int] | Sequence[int]
) -> tuple[int, ...]:
    """Validate `array` on `mesh` with global `shape`; return the per-device (local) shape.

    Local size of dim d = |d| / Π_{a ∈ axes(d)} |a| (book ch. 3: A[I_X, J_Y] → (|I|/|X|, |J|/|Y|)).
    Raises ShardingError for an axis the mesh lacks or a dim size that the axes do not divide.
    `shape` is a sequence with one size per dim of `array`, or a mapping {dim: size}. A mapping must name
    every dim of the array and may name more: one dict of the model's sizes ({"B": …, "D": …, "F": …})
    serves every array, and the dims an array does not have are not used.
    """
    array, mesh = parse_array(array), parse_mesh(mesh)
    sizes = shape_tuple(array, shape)
    for a in array.used_axes + array.unreduced:
        if a not in mesh.names:
            raise ShardingError(f"array {array.name}: mesh {mesh} has no axis {a} (used in {array.spec()})")
    local = []
    for d, ax, s in zip(array.dims, array.axes, sizes):
        n = mesh.axes_size(ax)
        if s % n:
            detail = " × ".join(f"|{a}|={mesh.size(a)}" for a in ax)
            raise ShardingError(
                f"array {array.name}: dim {d} of size {s} is not divisible by {n} "
                f"(axes {axes_text(ax)}: {detail}) in {array.spec()} on {mesh}"
            )
        local.append(s // n)
    return tuple(local)


def local_shape(array: ShardedArray | str, mesh, global_shape) -> tuple[int, ...]:
    """Per-device shape of `array` (see `check`). A[I_XY, J], (1024, 4096) on {X: 8, Y: 2} → (64, 4096)."""
    return check(array, mesh, global_shape)


def bytes_per_device(array: ShardedArray | str, mesh, global_shape, dtype: str = "bf16") -> float:
    """Bytes each device holds: Π(local shape) × bytes per element (book ch. 3 pop quizzes).

    fp32[1024, 4096] as A[I_XY, J] on {X: 8, Y: 2}: 64 × 4096 × 4 = 1 MiB (ch3.pq1).
    """
    return math.prod(check(array, mesh, global_shape)) * dtype_bytes(dtype)


def replication(array: ShardedArray | str, mesh) -> int:
    """How many devices hold each shard: Π sizes of the mesh axes the array does not use.

    Unreduced axes count as used (those devices hold different partial sums, not copies).
    A[I_X, J, K] on {X: 4, Y: 8, Z: 2} → 16 (ch3.q1: total bytes stored ÷ one copy).
    """
    array, mesh = parse_array(array), parse_mesh(mesh)
    used = set(array.used_axes) | set(array.unreduced)
    for a in used:
        mesh.size(a)
    return math.prod(s for n, s in mesh.axes if n not in used)


def total_bytes(array: ShardedArray | str, mesh, global_shape, dtype: str = "bf16") -> float:
    """Bytes stored over all devices = bytes_per_device × n_devices (ch3.pq2b: 512 KiB)."""
    mesh = parse_mesh(mesh)
    return bytes_per_device(array, mesh, global_shape, dtype) * mesh.n_devices


#: Most devices `device_blocks` lists (4096: a v4p pod; larger tables are nothing to read).
MAX_BLOCK_DEVICES = 4096


def device_blocks(array: ShardedArray | str, mesh, global_shape) -> dict[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """For each device (its mesh coordinates), the [start, stop) index range it holds in each dim.

    Shard index of dim d on device c = mixed-radix number of c's coordinates along axes(d), first axis
    major (the traversal order of I_XY; JAX's PartitionSpec(('X', 'Y')) lays shards out the same way).
    One entry per device: meshes of more than MAX_BLOCK_DEVICES devices are refused (it is a table to read).
    """
    array, mesh = parse_array(array), parse_mesh(mesh)
    if mesh.n_devices > MAX_BLOCK_DEVICES:
        raise ShardingError(
            f"device_blocks lists every device; mesh {mesh} has {mesh.n_devices} devices, more "
            f"than the {MAX_BLOCK_DEVICES} it lists (a v4p pod). Use local_shape for the per-device "
            "shape of a larger mesh"
        )
    local = check(array, mesh, global_shape)
    pos = {n: i for i, n in enumerate(mesh.names)}
    out = {}
    for coords in _coords(mesh.sizes):
        ranges = []
        for ax, n in zip(array.axes, local):
            k = 0
            for a in ax:
                k = k * mesh.size(a) + coords[pos[a]]
            ranges.append((k * n, (k + 1) * n))
        out[coords] = tuple(ranges)
    return out


def _coords(sizes: Sequence[int]):
    if not sizes:
        yield ()
        return
    for i in range(sizes[0]):
        for rest in _coords(sizes[1:]):
            yield (i,) + rest


__all__ = [
    "ShardingError",
    "Mesh",
    "parse_mesh",
    "ShardedArray",
    "parse_array",
    "check",
    "local_shape",
    "bytes_per_device",
    "replication",
    "total_bytes",
    "device_blocks",
    "MAX_BLOCK_DEVICES",
    "shape_tuple",
]
