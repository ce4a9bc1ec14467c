"""hlo.text: the one reader of compiled HLO text — element types, array types, instructions, computations.

Book ch. 9, "How to Profile TPU Programs" §"Reading HLO" (§"How to read an XLA op"). Pure text parsing: no
jax, so it reads HLO pasted from anywhere (a TPU profile, `compiled.as_text()` on a laptop). Every other
module that looks at HLO text (`hlo.collectives`, `hlo.ops`, `hlo.schedule`, the grader's checks of a
compiled answer) reads it through `parse_module`; none has its own line pattern.

- The vocabulary: `HLO_ITEMSIZE` (bytes per element of each element type, s4/u4 = ½), `COLLECTIVE_OPS`
  (the five collective opcodes, with their async `-start`/`-done` halves in `ASYNC_COLLECTIVE_OPS`),
  `HLO_NAME` (the book's collective kinds, `collectives.KINDS`, → their opcode: the one place the two
  vocabularies meet), `MATMUL_OPS`, `CONTAINER_OPS`.
- `parse_hlo_shape` / `tiled_shape` read an HLO type such as `bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}`:
  dtype, dims, layout, tiles, memory space, and the padding that tiling costs (`padding_overhead`).
- `parse_module(hlo)` reads the whole text into an `HloModule`: its computations (`ENTRY` and the ones
  instructions call, each with its signature) and every instruction as an `HloOp` (opcode, output and
  operand types, operand names, fusion kind, the computation it calls and the opcodes inside it).
- `parse_hlo_ops(hlo)` is the same instructions by name (what ch. 9's profiling looks ops up in).

Sizes are bytes.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

# --- the vocabulary: element types and opcodes ------------------------------------------------------

#: bytes per element of HLO element types (s4/u4 pack two to a byte)
HLO_ITEMSIZE = MappingProxyType(
    {
        "pred": 1,
        "s8": 1,
        "u8": 1,
        "s16": 2,
        "u16": 2,
        "f16": 2,
        "bf16": 2,
        "s32": 4,
        "u32": 4,
        "f32": 4,
        "s64": 8,
        "u64": 8,
        "f64": 8,
        "c64": 8,
        "c128": 16,
        "f8e4m3fn": 1,
        "f8e5m2": 1,
        "s4": 0.5,
        "u4": 0.5,
    }
)

#: The book's collective kinds (`core.collectives.KINDS`, as `collectives.collective` spells them) → the
#: opcode XLA prints for each in compiled HLO. The only table that joins the two vocabularies.
HLO_NAME = MappingProxyType(
    {
        "all_gather": "all-gather",
        "reduce_scatter": "reduce-scatter",
        "all_reduce": "all-reduce",
        "all_to_all": "all-to-all",
        "ppermute": "collective-permute",
    }
)

#: The collective opcodes of compiled HLO (the ones the book's collectives compile to).
COLLECTIVE_OPS = tuple(HLO_NAME.values())
#: Their asynchronous halves: `all-gather-start(` … `all-gather-done(` (an async pair is one collective).
ASYNC_COLLECTIVE_OPS = tuple(f"{k}-{half}" for k in COLLECTIVE_OPS for half in ("start", "done"))
#: Other opcodes that move data between devices (not among the book's five collectives).
OTHER_COMMUNICATION_OPS = ("collective-broadcast", "send", "recv")
MATMUL_OPS = ("dot", "convolution")
CONTAINER_OPS = ("call", "while", "conditional")

_ASYNC_SUFFIX = re.compile(r"-(start|done|update)$")
_PAREN_RE = re.compile(r"[()]")
_TYPE_RE = re.compile(r"\b([a-z][a-z0-9]*)\[([\d,\s]*)\](\{[^{}]*(?:\([^)]*\))*[^{}]*\})?")
#: `[ROOT] %name = TYPE opcode(REST` — the type may be a tuple with spaces in it
_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([a-z][\w\-]*)\((.*)$")
#: `[ENTRY] %name (params) -> result {` (a computation's header; the signature may be absent)
_COMP_RE = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_SIGNATURE_RE = re.compile(r"^\s*(?:ENTRY\s+)?%?[\w.\-]+\s*\((.*)\)\s*->\s*(.*?)\s*\{\s*$")


def base_opcode(opcode: str) -> str:
    """The opcode without its async suffix: 'all-gather-start' → 'all-gather'; 'copy-done' → 'copy'."""
    return _ASYNC_SUFFIX.sub("", opcode)


# --- array types ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HloShape:
    """One HLO array type, e.g. `bf16[8,1024,8192]{2,1,0:T(8,128)(2,1)S(1)}`.

    minor_to_major: the layout's dimension order, most-minor first (`{1,0}` = row-major for 2-D);
    tiles: the tiling, outermost first (`T(8,128)(2,1)` → ((8, 128), (2, 1))); memory_space: the `S(n)`
    annotation (0 = HBM, the default; 1 = VMEM on TPU). nbytes = ∏ dims × itemsize, without padding.
    """

    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] = ()
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0

    @property
    def itemsize(self) -> float:
        return HLO_ITEMSIZE[self.dtype]

    @property
    def nbytes(self) -> float:
        return math.prod(self.dims) * self.itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def _shape_of(m: re.Match) -> HloShape:
    return _shape_from(m.group(1), m.group(2), m.group(3) or "")


@functools.lru_cache(maxsize=4096)
def _shape_from(dtype: str, dims_text: str, layout_text: str) -> HloShape:
    """One array type from its three parts (`bf16`, `8,128`, `{1,0:T(8,128)}`); memoised: HLO repeats them."""
    dims = tuple(int(d) for d in dims_text.replace(" ", "").split(",") if d)
    layout = layout_text[1:-1]
    order_text, _, rest = layout.partition(":")
    order = tuple(int(d) for d in order_text.split(",") if d.strip().isdigit())
    tile_text = rest.split("S(")[0]
    tiles = tuple(tuple(int(v) for v in t.split(",") if v) for t in re.findall(r"\(([\d,]+)\)", tile_text))
    space = re.search(r"S\((\d+)\)", rest)
    return HloShape(dtype, dims, order, tiles, int(space.group(1)) if space else 0)


def parse_hlo_shape(text: str) -> HloShape:
    """The first array type in `text` (an HLO line or a bare type); ValueError when there is none.

    `parse_hlo_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")` → dtype 'bf16', dims (32, 32, 4096),
    minor_to_major (2, 1, 0), tiles ((8, 128), (2, 1)), memory_space 1 (VMEM) — ch. 9 §"How to read an XLA op".
    """
    m = _TYPE_RE.search(str(text))
    if not m or m.group(1) not in HLO_ITEMSIZE:
        raise ValueError(f"no HLO array type such as 'bf16[8,128]{{1,0}}' in {str(text)[:80]!r}")
    return _shape_of(m)


def hlo_shapes(text: str) -> tuple[HloShape, ...]:
    """Every array type in `text`, in order (`(f32[8]{0}, s32[])` → two; `token[]` and the like skipped)."""
    return tuple(_shape_of(m) for m in _TYPE_RE.finditer(text) if m.group(1) in HLO_ITEMSIZE)


def tiled_shape(dims: Sequence[int], tile: Sequence[int]) -> tuple[int, ...]:
    """The shape after padding the last len(tile) dims up to multiples of the tile (ch. 9 §"tiling").

    `tiled_shape((3, 5), (2, 2))` → (4, 6): 24 stored elements for 15, so memory grows by 24/15 = 1.6×.
    Only the outer tile pads (an inner tile such as (2, 1) for bf16 subdivides the outer one).
    """
    dims, tile = tuple(int(d) for d in dims), tuple(int(t) for t in tile)
    if any(d < 0 for d in dims) or any(t < 1 for t in tile):
        raise ValueError(f"dims must be ≥ 0 and tiles ≥ 1, got dims={dims}, tile={tile}")
    if len(tile) > len(dims):
        raise ValueError(f"a tile of rank {len(tile)} does not fit an array of rank {len(dims)}")
    lead = dims[: len(dims) - len(tile)]
    return lead + tuple(-(-d // t) * t for d, t in zip(dims[len(dims) - len(tile) :], tile, strict=True))


def padding_overhead(dims: Sequence[int], tile: Sequence[int]) -> float:
    """Stored elements ÷ logical elements after tiling: (3, 5) in (2, 2) tiles → 1.6."""
    n = math.prod(dims)
    if n == 0:
        raise ValueError("an empty array has no padding overhead")
    return math.prod(tiled_shape(dims, tile)) / n


# --- instructions, computations, modules ----------------------------------------------------------


@dataclass(frozen=True)
class HloOp:
    """One instruction of compiled HLO text: name, opcode ('dot', 'fusion', 'all-gather-start', …), the output
    types, the operand types, the fusion kind (kLoop, kOutput, kCustom …), the computation it calls
    (`calls=` or `to_apply=`), the opcodes inside that computation and the ones it calls (`inner`), the
    computation it belongs to, the text after its operand list (`attributes`), the names of its operands,
    and whether it is its computation's ROOT."""

    name: str
    opcode: str
    outputs: tuple[HloShape, ...]
    operands: tuple[HloShape, ...]
    fusion_kind: str = ""
    calls: str = ""
    inner: tuple[str, ...] = ()
    computation: str = ""
    attributes: str = ""
    operand_names: tuple[str, ...] = ()
    is_root: bool = False

    @property
    def shape(self) -> HloShape | None:
        return self.outputs[0] if self.outputs else None

    @property
    def base_opcode(self) -> str:
        """The opcode without an async suffix ('all-gather-start' → 'all-gather')."""
        return base_opcode(self.opcode)

    @property
    def async_half(self) -> str:
        """'start', 'done' or 'update' for one half of an async pair (`all-gather-start`), else ''."""
        m = _ASYNC_SUFFIX.search(self.opcode)
        return m.group(1) if m else ""

    @property
    def collective(self) -> str:
        """The collective this instruction issues ('all-gather' for `all-gather(` and `all-gather-start(`),
        '' otherwise — also for a `-done` half, so an async pair counts once."""
        return self.base_opcode if self.base_opcode in COLLECTIVE_OPS and self.async_half in ("", "start") else ""

    @property
    def control_predecessors(self) -> tuple[str, ...]:
        """Instructions this one is ordered after without using their values (`control-predecessors={%a}`)."""
        m = re.search(r"control-predecessors=\{([^}]*)\}", self.attributes)
        return tuple(re.findall(r"%?([\w.\-]+)", m.group(1))) if m else ()

    @property
    def op_name(self) -> str:
        """The JAX name the instruction came from (its `metadata={op_name="…"}`), e.g.
        'jit(mlp)/ffw_up/dot_general' for a dot inside `jax.named_scope("ffw_up")`; '' when absent."""
        m = re.search(r'op_name="([^"]*)"', self.attributes)
        return m.group(1) if m else ""


@dataclass(frozen=True)
class HloComputation:
    """One computation: its name, whether it is the ENTRY, its signature's parameter and result types
    (None when the header prints no signature), and its instructions in program order."""

    name: str
    is_entry: bool
    parameters: tuple[HloShape, ...] | None
    result: tuple[HloShape, ...] | None
    instructions: tuple[HloOp, ...]

    @property
    def opcodes(self) -> tuple[str, ...]:
        return tuple(op.opcode for op in self.instructions)


@dataclass(frozen=True)
class HloModule:
    """A compiled program's HLO text, read: its name and header attributes (`HloModule jit_f, …`), its
    computations by name (in text order; instructions outside any computation are under ''), and every
    instruction in text order. `ops` looks instructions up by name; `entry` is the ENTRY computation."""

    name: str
    header: str
    computations: Mapping[str, HloComputation]
    instructions: tuple[HloOp, ...]

    @functools.cached_property
    def entry(self) -> HloComputation | None:
        return next((c for c in self.computations.values() if c.is_entry), None)

    @functools.cached_property
    def ops(self) -> Mapping[str, HloOp]:
        return MappingProxyType({op.name: op for op in self.instructions})

    @property
    def num_partitions(self) -> int:
        """Devices the program is split over (`num_partitions=8` in the header; 1 when not printed)."""
        m = re.search(r"num_partitions=(\d+)", self.header)
        return int(m.group(1)) if m else 1

    @property
    def shapes(self) -> tuple[HloShape, ...]:
        """Every array type the instructions produce or read, and the computations' signatures."""
        sig = tuple(s for c in self.computations.values() for part in (c.parameters, c.result) for s in part or ())
        return sig + tuple(s for op in self.instructions for s in op.outputs + op.operands)


def _split_operands(rest: str) -> tuple[str, str]:
    """(operand text, attribute text) of an instruction's text after the opening parenthesis."""
    depth = 1
    for m in _PAREN_RE.finditer(rest):
        depth += 1 if m.group() == "(" else -1
        if depth == 0:
            return rest[: m.start()], rest[m.end() :]
    return rest, ""


def _operand_names(text: str) -> tuple[str, ...]:
    """Names of the operands in an operand list: `%a`, `f32[8]{0} %b` (or `a, b` in text printed without %)."""
    if "%" in text:
        return tuple(re.findall(r"%([\w.\-]+)", text))
    return tuple(re.findall(r"([\w.\-]+)", text))


def _header(line: str) -> re.Match | None:
    m = _COMP_RE.match(line)
    return m if m and "=" not in line.split("{")[0].split("(")[0] else None


def _signature(line: str) -> tuple[tuple[HloShape, ...] | None, tuple[HloShape, ...] | None]:
    m = _SIGNATURE_RE.match(line)
    return (hlo_shapes(m.group(1)), hlo_shapes(m.group(2))) if m else (None, None)


def parse_module(hlo: str) -> HloModule:
    """Read compiled HLO text (`compiled.as_text()`) into an `HloModule` (immutable; cached per text).

    Lines are read as computation headers (`ENTRY %main (…) -> … {`, `%fused_computation (…) -> … {`) or
    instructions (`[ROOT] %name = TYPE opcode(OPERANDS), ATTRIBUTES`); anything else is skipped, so a
    fragment of instructions reads too. Operand types are the types printed before operand names
    (`dot(f32[8,16]{1,0} %a, …)`) when the text carries them; otherwise they are looked up from the
    operands' own instructions. An instruction's `inner` lists the opcodes of the computation it calls,
    with the ones that computation calls, so a fusion that wraps a `dot` is recognisable as a matmul.
    Text without instructions gives a module without instructions (`parse_hlo_ops` refuses it).
    """
    if not isinstance(hlo, str):
        raise TypeError(f"hlo must be HLO text (str), got {type(hlo).__name__}")
    return _parse_module(hlo)


def _read_lines(hlo: str):
    """One pass over the lines: (instructions as tuples, headers by computation, opcodes by computation,
    computations called by computation)."""
    raw: list[tuple] = []
    headers: dict[str, tuple] = {}
    comp_ops: dict[str, list[str]] = {}
    comp_calls: dict[str, list[str]] = {}
    comp = ""
    for line in hlo.splitlines():
        if not line.strip() or line.lstrip().startswith(("HloModule", "//", "}")):
            continue
        cm = _header(line)
        if cm:
            comp = cm.group(2)
            headers[comp] = (bool(cm.group(1)), *_signature(line))
            comp_ops.setdefault(comp, [])
            continue
        m = _INSTR_RE.match(line)
        if not m:
            continue
        root, name, type_text, opcode, rest = m.groups()
        operand_text, attrs = _split_operands(rest)
        kind = re.search(r"kind=(k\w+)", attrs)
        calls = re.search(r"(?:calls|to_apply)=%?([\w.\-]+)", attrs)
        raw.append(
            (
                name,
                opcode,
                type_text,
                operand_text,
                attrs,
                kind.group(1) if kind else "",
                calls.group(1) if calls else "",
                comp,
                bool(root),
            )
        )
        comp_ops.setdefault(comp, []).append(opcode)
        if calls:
            comp_calls.setdefault(comp, []).append(calls.group(1))
    return raw, headers, comp_ops, comp_calls


@functools.lru_cache(maxsize=16)
def _parse_module(hlo: str) -> HloModule:
    raw, headers, comp_ops, comp_calls = _read_lines(hlo)

    def inner(c: str, seen=()) -> tuple[str, ...]:
        if not c or c in seen:
            return ()
        ops = tuple(comp_ops.get(c, ()))
        for sub in comp_calls.get(c, ()):
            ops += inner(sub, seen + (c,))
        return ops

    by_name = {r[0]: hlo_shapes(r[2]) for r in raw}
    ops = []
    for name, opcode, _type_text, operand_text, attrs, kind, calls, c, root in raw:
        refs = _operand_names(operand_text)
        operands = hlo_shapes(operand_text) or tuple(s for r in refs for s in by_name.get(r, ())[:1])
        ops.append(
            HloOp(
                name,
                opcode,
                by_name[name],
                operands,
                kind,
                calls,
                inner(calls),
                c,
                attrs,
                refs if "%" in operand_text else tuple(r for r in refs if r in by_name),
                root,
            )
        )
    members: dict[str, list[HloOp]] = {c: [] for c in comp_ops}
    for op in ops:
        members[op.computation].append(op)
    comps = {c: HloComputation(c, *headers.get(c, (False, None, None)), tuple(members[c])) for c in comp_ops}
    module = re.search(r"^HloModule\s+([\w.\-]+)(.*)$", hlo, re.M)
    return HloModule(
        module.group(1) if module else "", module.group(2) if module else "", MappingProxyType(comps), tuple(ops)
    )


def parse_hlo_ops(hlo: str) -> dict[str, HloOp]:
    """Every instruction of compiled HLO text (`compiled.as_text()`), by name (`parse_module`'s instructions).

    Raises TypeError on anything but text and ValueError on text with no instructions.
    """
    module = parse_module(hlo)
    if not module.instructions:
        raise ValueError(
            "no HLO instructions found: pass the text of compiled.as_text() (or jaxlab.compiled_hlo_text(f, *args))"
        )
    return dict(module.ops)


__all__ = [
    "HLO_ITEMSIZE",
    "HLO_NAME",
    "COLLECTIVE_OPS",
    "ASYNC_COLLECTIVE_OPS",
    "OTHER_COMMUNICATION_OPS",
    "MATMUL_OPS",
    "CONTAINER_OPS",
    "base_opcode",
    "HloShape",
    "parse_hlo_shape",
    "hlo_shapes",
    "tiled_shape",
    "padding_overhead",
    "HloOp",
    "HloComputation",
    "HloModule",
    "parse_module",
    "parse_hlo_ops",
]
