"""hlo.collectives (`compiled_collectives`): the collectives XLA emitted — their kinds, arrays, bytes, mesh axes.

Book ch. 3, "Sharded Matrices" (which collectives a sharded matmul needs) and ch. 5 (the collectives of a
sharded training step): once a program is compiled, its HLO text says which collectives XLA actually
emitted. A reader on top of `hlo.text` (whose instructions, item sizes and opcode list it uses); pure
(re + numpy): no jax, no devices, so it reads HLO pasted from anywhere:

- `HLO_COLLECTIVES` (= `text.COLLECTIVE_OPS`): the collective ops as they appear in HLO text;
  `count_hlo_collectives(text)` counts the instructions of each kind (`all-reduce(` and async
  `all-reduce-start(`, whose `-done` half is not counted again).
- `parse_hlo_collectives(hlo, mesh_shape, axis_names)` reads each one into an `HloCollective`: dtype,
  full per-device shape, bytes, replica-group size, and the mesh axes it moves data along (`BOOK_LETTER`
  maps ch. 5's 'data'/'model'/'stage' to the book's X/Y/Z).
- `replica_groups(line, n_devices)` reads the replica groups of one instruction in every format XLA
  prints (`{{0,1},…}`, iota `[4,2]<=[2,4]T(1,0)`, `mesh['a'=2,'b'=4] {'b'}`).

`jaxlab` (the jax shell) re-exports all of these, next to `hlo_collectives(f, *args)`, which compiles `f`
first and counts its collectives.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalebook_utils.core.hlo.text import COLLECTIVE_OPS, HLO_ITEMSIZE, HloOp, parse_module

__all__ = [
    "HLO_COLLECTIVES",
    "count_hlo_collectives",
    "BOOK_LETTER",
    "HloCollective",
    "parse_hlo_collectives",
    "replica_groups",
    "source_target_pairs",
]

#: Collective ops as they appear in compiled HLO text (the one list: `hlo.text.COLLECTIVE_OPS`).
HLO_COLLECTIVES = COLLECTIVE_OPS

#: The book's letter for a mesh axis name: ch. 5 calls its axes 'data' (X), 'model' (Y) and 'stage' (Z);
#: other names (ch. 3's 'X', 'Y') stand for themselves.
BOOK_LETTER = {"data": "X", "model": "Y", "stage": "Z"}


def _collective_instructions(text: str) -> list[HloOp]:
    """The instructions that issue a collective (`all-gather(`, `all-gather-start(`; not the `-done` halves)."""
    return [op for op in parse_module(text).instructions if op.collective]


def count_hlo_collectives(text: str) -> Counter:
    """collections.Counter of collective ops in compiled HLO text (`all-reduce(` and `all-reduce-start(`).

    Ops with a tuple result count too (once): the CPU compiler writes an explicit all-to-all as
    `%all-to-all = (f32[1,4]{1,0}, …) all-to-all(…)`, a type with spaces in it.
    """
    return Counter(op.collective for op in _collective_instructions(text))


@dataclass(frozen=True)
class HloCollective:
    """One collective as XLA compiled it (one entry per array when XLA combined several into a tuple).

    kind: the HLO op ('all-gather', 'all-reduce', 'reduce-scatter', 'all-to-all', 'collective-permute');
    shape: the full per-device array in the convention of `training.Collective` — an AllGather's
    output, an AllReduce's operand, a ReduceScatter's input (its output × the group along the scatter
    dimension); nbytes = prod(shape) × itemsize; axes: the mesh axes its replica groups span (() for
    groups of one device, None when the groups fit no set of axes); subgroup: True when each group is only
    part of those axes' groups (e.g. 2 of the 8 devices along 'model'); group_size: devices per group;
    combined: how many arrays the HLO instruction carries (> 1: XLA's combiner merged collectives);
    dimension: the gather/scatter dimension (None for all-reduce); name, op_name: HLO name and metadata;
    hlo_shape: the output shape as the HLO prints it (differs from `shape` only for reduce-scatter).
    """

    kind: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    axes: tuple[str, ...] | None
    group_size: int | None
    combined: int
    dimension: int | None
    name: str
    op_name: str = ""
    subgroup: bool = False
    hlo_shape: tuple[int, ...] = ()

    @property
    def axis(self) -> str:
        """The book's letter(s) of the mesh axes (`BOOK_LETTER`): 'X' ('data'), 'Y' ('model'), 'XY', '' or '?'."""
        if self.axes is None:
            return "?"
        return "".join(BOOK_LETTER.get(a, a) for a in self.axes)

    @property
    def is_scalar(self) -> bool:
        return math.prod(self.shape) == 1

    def __str__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"{self.kind} {self.dtype}[{dims}] over {self.axis or 'one device'} ({self.nbytes} B)"


def _iota_array(text: str):
    """Device ids of XLA's iota notation, flattened: '[2,4]<=[8]', '[4,2]<=[2,4]T(1,0)' or '[2,2,2]T(1,0,2)'
    (arange over the dims after '<=' — or the leading dims — transposed, then read row-major).
    Returns (leading dims, flat ids) or None."""
    m = re.match(r"\s*\[([\d,]+)\](?:<=\[([\d,]+)\])?(?:T\(([\d,]+)\))?", text)
    if not m:
        return None
    lead = [int(v) for v in m.group(1).split(",")]
    dims = [int(v) for v in (m.group(2) or m.group(1)).split(",")]
    arr = np.arange(math.prod(dims)).reshape(dims)
    if m.group(3):
        arr = arr.transpose([int(v) for v in m.group(3).split(",")])
    return lead, arr.ravel()


def _iota_groups(text: str):
    got = _iota_array(text)
    if got is None:
        return None
    lead, flat = got
    return flat.reshape(lead[0], -1).tolist()


def _mesh_format_groups(text: str):
    """Groups of the newer format `mesh['a'=2,'b'=4] {'b'}` (optionally `, device_ids=(…)` and sub-axes
    `'a':(pre)size`): devices that differ only along the listed axes form a group."""
    m = re.match(r"mesh\[([^\]]*)\](?:,\s*device_ids=\(([^()]*(?:\([^()]*\))?[^()]*)\))?\s*\{([^}]*)\}", text)
    if not m:
        return None
    names, sizes = [], []
    for item in m.group(1).split(","):
        mm = re.match(r"\s*'?([^'=]+)'?\s*=\s*(\d+)", item)
        if not mm:
            return None
        names.append(mm.group(1))
        sizes.append(int(mm.group(2)))
    n = math.prod(sizes)
    if m.group(2):
        ids = _iota_array(m.group(2)) if "T(" in m.group(2) or "<=" in m.group(2) else None
        flat = ids[1] if ids is not None else np.array([int(v) for v in re.findall(r"\d+", m.group(2))])
        if flat.size != n:
            return None
    else:
        flat = np.arange(n)
    # expand sub-axes: an axis 'a':(pre)size splits dim a into [pre, size, rest] and groups the middle
    refs = re.findall(r"'([^']*)'(?::\((\d+)\)(\d+))?", m.group(3))
    new_sizes, grouped, offsets = [], [], {}
    sub = {name: (int(p), int(s)) for name, p, s in refs if p}
    for name, size in zip(names, sizes, strict=True):
        offsets[name] = len(new_sizes)
        if name in sub:
            pre, s = sub[name]
            if size % (pre * s):
                return None
            new_sizes += [pre, s, size // (pre * s)]
        else:
            new_sizes.append(size)
    for name, p, _s in refs:
        if name not in offsets:
            return None
        grouped.append(offsets[name] + (1 if p else 0))
    arr = flat.reshape(new_sizes)
    rest = [i for i in range(len(new_sizes)) if i not in grouped]
    gsize = math.prod(new_sizes[i] for i in grouped) if grouped else 1
    return arr.transpose(rest + grouped).reshape(-1, gsize).tolist()


def source_target_pairs(line: str) -> list[tuple[int, int]]:
    """The (source, target) device pairs of a collective-permute (`source_target_pairs={{0,1},{1,0}}`); []
    when the instruction has none."""
    m = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", line)
    return [(int(a), int(b)) for a, b in re.findall(r"\{(\d+),(\d+)\}", m.group(1))] if m else []


def replica_groups(line: str, n_devices: int):
    """The replica groups of one HLO instruction as lists of device positions, or None if unreadable.

    Understands `{}` (one group of all devices), `{{0,1},{2,3}}`, the iota form `[4,2]<=[2,4]T(1,0)` and
    the mesh-axes form `mesh['axis_0'=2,'axis_1'=4] {'axis_1'}` of newer XLA.
    """
    m = re.search(r"replica_groups=(.*)", line)
    if not m:
        return [list(range(n_devices))]
    text = m.group(1)
    if text.startswith("{}"):
        return [list(range(n_devices))]
    if text.startswith("{"):
        mm = re.match(r"\{((?:\{[\d,]*\},?)*)\}", text)
        if not mm:
            return None
        return [[int(v) for v in g.split(",") if v] for g in re.findall(r"\{([\d,]*)\}", mm.group(1))]
    if text.startswith("["):
        return _iota_groups(text)
    if text.startswith("mesh"):
        return _mesh_format_groups(text)
    return None


def _axes_of_groups(groups, mesh_shape, axis_names):
    """(axes, whole): the fewest mesh axes whose groups each contain one replica group, and whether the
    replica groups are exactly those axes' groups (False: a sub-group, e.g. 2 of the 8 devices along
    'model' when GQA's K = 2 KV heads split the axis). axes is () for groups of one device, None if the
    groups fit no set of axes."""
    if groups is None:
        return None, False
    if all(len(g) == 1 for g in groups):
        return (), True
    want = [frozenset(g) for g in groups]
    ids = np.arange(math.prod(mesh_shape)).reshape(mesh_shape)
    n = len(mesh_shape)
    for r in range(1, n + 1):
        for combo in itertools.combinations([i for i in range(n) if mesh_shape[i] > 1], r):
            rest = [i for i in range(n) if i not in combo]
            g = ids.transpose(rest + list(combo)).reshape(-1, math.prod(mesh_shape[i] for i in combo))
            have = [frozenset(row.tolist()) for row in g]
            if all(any(w <= h for h in have) for w in want):
                return tuple(axis_names[i] for i in combo), set(want) == set(have)
    return None, False


def parse_hlo_collectives(hlo: str, mesh_shape: Sequence[int], axis_names: Sequence[str]) -> list[HloCollective]:
    """Every collective in compiled HLO text, one `HloCollective` per array it moves, in program order.

    `mesh_shape`/`axis_names` are the mesh the program was compiled for (e.g. (4, 2) and ('data', 'model'));
    replica groups are read as positions in that mesh (row-major), which is how XLA numbers the devices
    of a jitted program. Async `-start` ops count once (their `-done` halves are skipped). Tuple-valued
    ops — XLA's combiner merges several all-reduces into one — give one entry per element, with
    `combined` = k. The instructions are those `count_hlo_collectives` counts.
    """
    mesh_shape = tuple(int(s) for s in mesh_shape)
    n = math.prod(mesh_shape)
    out = []
    for op in _collective_instructions(hlo):
        kind, start, rest = op.collective, op.async_half == "start", op.attributes
        shapes = [(s.dtype, s.dims) for s in op.outputs]
        if start and kind == "all-gather":  # (operands…, outputs…)
            shapes = shapes[len(shapes) // 2 :]
        elif start and kind == "collective-permute":
            shapes = shapes[1:2]
        dim_m = re.search(r"dimensions=\{(\d+)\}", rest)
        dim = int(dim_m.group(1)) if dim_m else None
        if kind == "collective-permute":
            pairs = source_target_pairs(rest)
            axes, whole = tuple(axis_names[i] for i in _permute_axes(pairs, mesh_shape)), True
            gsize = 2 if pairs else None
        else:
            groups = replica_groups(rest, n)
            axes, whole = _axes_of_groups(groups, mesh_shape, tuple(axis_names))
            gsize = len(groups[0]) if groups else None
        for dt, shp in shapes:
            full = shp
            if kind == "reduce-scatter" and dim is not None and gsize:
                full = tuple(s * gsize if i == dim else s for i, s in enumerate(shp))
            nbytes = math.ceil(math.prod(full) * HLO_ITEMSIZE[dt])  # s4/u4: half a byte each, rounded up
            out.append(
                HloCollective(
                    kind, dt, full, nbytes, axes, gsize, len(shapes), dim, op.name, op.op_name, not whole, shp
                )
            )
    return out


def _permute_axes(pairs, mesh_shape):
    """Mesh axes along which the source→target pairs of a collective-permute move data."""
    if not pairs:
        return ()
    axes = set()
    for s, t in pairs:
        a = np.unravel_index(int(s), mesh_shape)
        b = np.unravel_index(int(t), mesh_shape)
        axes |= {i for i in range(len(mesh_shape)) if a[i] != b[i]}
    return tuple(sorted(axes))
