"""hlo: read compiled HLO text — array types, instructions, op categories, and a compiled program's memory.

Book ch. 9, "How to Profile TPU Programs" §"Reading HLO" (§"How to read an XLA op", §"Memory Profile"). Pure
text parsing: no jax, so it reads HLO pasted from anywhere (a TPU profile, `compiled.as_text()` on a laptop):

- `parse_hlo_shape` / `tiled_shape` read an HLO type such as `bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}`:
  dtype, dims, layout, tiles, memory space, and the padding that tiling costs (`padding_overhead`).
- `parse_hlo_ops(hlo)` reads every instruction of `compiled.as_text()` into an `HloOp` (opcode, output and
  operand types, fusion kind, the computation it calls and the opcodes inside it).
- `categorize(name, ops)` puts one executed op in one of `CATEGORIES` (matmul, fusion, collective, copy,
  other), from the compiled HLO when given, else from the op's name.
- `memory_report(compiled)` reads `compiled.memory_analysis()` (duck-typed: any object with that method or
  with `as_text()`), falling back to the ENTRY signature's argument and output types.

`profiling` (the jax shell of ch. 9) re-exports all of these. Sizes are bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

CATEGORIES = ("matmul", "fusion", "collective", "copy", "other")

# --- reading HLO types and instructions -----------------------------------------------------------

#: bytes per element of HLO element types
HLO_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1,
                "s4": 0.5, "u4": 0.5}
_TYPE_RE = re.compile(r"\b([a-z][a-z0-9]*)\[([\d,\s]*)\](\{[^{}]*(?:\([^)]*\))*[^{}]*\})?")
_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([a-z][\w\-]*)\((.*)$")
_COMP_RE = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")


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


def parse_hlo_shape(text: str) -> HloShape:
    """The first array type in `text` (an HLO line or a bare type); ValueError when there is none.

    `parse_hlo_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")` → dtype 'bf16', dims (32, 32, 4096),
    minor_to_major (2, 1, 0), tiles ((8, 128), (2, 1)), memory_space 1 (VMEM) — ch. 9 §"How to read an XLA op".
    """
    m = _TYPE_RE.search(str(text))
    if not m or m.group(1) not in HLO_ITEMSIZE:
        raise ValueError(f"no HLO array type such as 'bf16[8,128]{{1,0}}' in {str(text)[:80]!r}")
    dims = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
    layout = (m.group(3) or "")[1:-1]
    order_text, _, rest = layout.partition(":")
    order = tuple(int(d) for d in order_text.split(",") if d.strip().isdigit())
    tile_text = rest.split("S(")[0]
    tiles = tuple(tuple(int(v) for v in t.split(",") if v) for t in re.findall(r"\(([\d,]+)\)", tile_text))
    space = re.search(r"S\((\d+)\)", rest)
    return HloShape(m.group(1), dims, order, tiles, int(space.group(1)) if space else 0)


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
    lead = dims[:len(dims) - len(tile)]
    return lead + tuple(-(-d // t) * t for d, t in zip(dims[len(dims) - len(tile):], tile))


def padding_overhead(dims: Sequence[int], tile: Sequence[int]) -> float:
    """Stored elements ÷ logical elements after tiling: (3, 5) in (2, 2) tiles → 1.6."""
    n = math.prod(dims)
    if n == 0:
        raise ValueError("an empty array has no padding overhead")
    return math.prod(tiled_shape(dims, tile)) / n


@dataclass(frozen=True)
class HloOp:
    """One instruction of compiled HLO text: name, opcode ('dot', 'fusion', 'all-reduce', …), the output
    types, the operand types, the fusion kind (kLoop, kOutput, kCustom …), the computation it calls,
    the opcodes inside that computation (`inner`), and the computation it belongs to."""

    name: str
    opcode: str
    outputs: tuple[HloShape, ...]
    operands: tuple[HloShape, ...]
    fusion_kind: str = ""
    calls: str = ""
    inner: tuple[str, ...] = ()
    computation: str = ""
    attributes: str = ""

    @property
    def shape(self) -> HloShape | None:
        return self.outputs[0] if self.outputs else None

    @property
    def op_name(self) -> str:
        """The JAX name the instruction came from (its `metadata={op_name="…"}`), e.g.
        'jit(mlp)/ffw_up/dot_general' for a dot inside `jax.named_scope("ffw_up")`; '' when absent."""
        m = re.search(r'op_name="([^"]*)"', self.attributes)
        return m.group(1) if m else ""


def _split_operands(rest: str) -> tuple[str, str]:
    """(operand text, attribute text) of an instruction's text after the opening parenthesis."""
    depth = 1
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return rest[:i], rest[i + 1:]
    return rest, ""


def _shapes(text: str) -> tuple[HloShape, ...]:
    out = []
    for m in _TYPE_RE.finditer(text):
        if m.group(1) in HLO_ITEMSIZE:
            out.append(parse_hlo_shape(m.group(0)))
    return tuple(out)


def parse_hlo_ops(hlo: str) -> dict[str, HloOp]:
    """Every instruction of compiled HLO text (`compiled.as_text()`), by name.

    Operand types are the types printed before operand names (`dot(f32[8,16]{1,0} %a, …)`) when the
    text carries them; otherwise they are looked up from the operands' own instructions. A fusion's
    `inner` lists the opcodes of the computation it calls (with nested calls), so a fusion that wraps a
    `dot` or `convolution` is recognisable as a matmul. Raises ValueError on text with no instructions.
    """
    if not isinstance(hlo, str):
        raise TypeError(f"hlo must be HLO text (str), got {type(hlo).__name__}")
    raw: list[tuple] = []
    comp_ops: dict[str, list[str]] = {}
    comp_calls: dict[str, list[str]] = {}
    comp = ""
    for line in hlo.splitlines():
        if not line.strip() or line.lstrip().startswith(("HloModule", "//", "}")):
            continue
        cm = _COMP_RE.match(line)
        if cm and "=" not in line.split("{")[0].split("(")[0]:
            comp = cm.group(2)
            comp_ops.setdefault(comp, [])
            continue
        m = _INSTR_RE.match(line)
        if not m:
            continue
        _, name, type_text, opcode, rest = m.groups()
        operand_text, attrs = _split_operands(rest)
        kind = re.search(r"kind=(k\w+)", attrs)
        calls = re.search(r"(?:calls|to_apply)=%?([\w.\-]+)", attrs)
        raw.append((name, opcode, type_text, operand_text, attrs, kind.group(1) if kind else "",
                    calls.group(1) if calls else "", comp))
        comp_ops.setdefault(comp, []).append(opcode)
        if calls:
            comp_calls.setdefault(comp, []).append(calls.group(1))
    if not raw:
        raise ValueError("no HLO instructions found: pass the text of compiled.as_text() "
                         "(or jaxlab.compiled_hlo_text(f, *args))")

    def inner(c: str, seen=()) -> tuple[str, ...]:
        if not c or c in seen:
            return ()
        ops = tuple(comp_ops.get(c, ()))
        for sub in comp_calls.get(c, ()):
            ops += inner(sub, seen + (c,))
        return ops

    by_name = {r[0]: _shapes(r[2]) for r in raw}
    out = {}
    for name, opcode, type_text, operand_text, attrs, kind, calls, c in raw:
        operands = _shapes(operand_text)
        if not operands:
            refs = re.findall(r"%([\w.\-]+)", operand_text) or re.findall(r"([\w.\-]+)", operand_text)
            operands = tuple(s for r in refs for s in by_name.get(r, ())[:1])
        out[name] = HloOp(name, opcode, by_name[name], operands, kind, calls, inner(calls), c, attrs)
    return out


_COLLECTIVE_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                   "collective-broadcast", "send", "recv")
_COPY_OPS = ("copy", "copy-start", "copy-done", "transpose", "bitcast", "reshape", "dynamic-update-slice",
             "dynamic-slice", "slice", "concatenate", "pad")
MATMUL_OPS = ("dot", "convolution")
CONTAINER_OPS = ("call", "while", "conditional")


def categorize(name: str, ops: dict[str, HloOp] | None = None) -> str:
    """Category of one executed op: 'matmul', 'fusion', 'collective', 'copy' or 'other'.

    With the compiled HLO (`parse_hlo_ops`): a `dot`/`convolution`, or a fusion whose computation holds
    one (XLA fuses at most one matmul with its pointwise neighbours — ch. 9), is a matmul; collectives
    (also inside an async wrapper or a fusion, as TPUs' `all-reduce-scatter` fusions) are collectives;
    copies, transposes and slices are copies; other fusions are fusions. Without HLO the op's name decides
    (XLA names ops after their opcode: `dot.8`, `fusion.3`, `all-reduce.1`, `copy.2`).
    """
    op = (ops or {}).get(name)
    if op is not None:
        base = re.sub(r"-(start|done|update)$", "", op.opcode)
        pool = (op.opcode,) + op.inner
        if base in _COLLECTIVE_OPS or any(re.sub(r"-(start|done)$", "", o) in _COLLECTIVE_OPS for o in pool):
            return "collective"
        if op.opcode in MATMUL_OPS or any(o in MATMUL_OPS for o in op.inner) or op.opcode == "custom-call" \
                and re.search(r"matmul|gemm|dot", op.attributes, re.I):
            return "matmul"
        if op.opcode in _COPY_OPS or (op.opcode == "fusion" and op.inner and
                                      all(o in _COPY_OPS + ("parameter", "tuple", "get-tuple-element")
                                          for o in op.inner)):
            return "copy"
        if op.opcode == "fusion":
            return "fusion"
        return "other"
    n = name.lower()
    if any(k in n for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                            "allreduce", "allgather", "reducescatter")):
        return "collective"
    if re.match(r"(dot|convolution|gemm|matmul|cublas)", n) or "_dot" in n or "dot_" in n:
        return "matmul"
    if re.match(r"(copy|transpose|bitcast|reshape|slice|dynamic|concatenate|pad)", n):
        return "copy"
    if "fusion" in n:
        return "fusion"
    return "other"


# --- a compiled program's memory ------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryReport:
    """Bytes a compiled program needs per device (ch. 9 §"Memory Profile"): arguments, outputs, temporaries
    (XLA's scratch buffers), generated code, and outputs that alias (reuse) argument buffers.
    peak_bytes = arguments + outputs + temporaries − aliased (the buffers live at once in the worst case).
    `source` says where the numbers came from ('memory_analysis' or 'shapes' when XLA gave none)."""

    argument_bytes: float
    output_bytes: float
    temp_bytes: float
    alias_bytes: float = 0.0
    code_bytes: float = 0.0
    source: str = "memory_analysis"

    @property
    def peak_bytes(self) -> float:
        return self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes

    def __str__(self) -> str:
        mib = 2.0**20
        return (f"arguments {self.argument_bytes / mib:.2f} MiB, outputs {self.output_bytes / mib:.2f} MiB, "
                f"temporaries {self.temp_bytes / mib:.2f} MiB, aliased {self.alias_bytes / mib:.2f} MiB → "
                f"≤ {self.peak_bytes / mib:.2f} MiB ({self.source})")


def _attr(obj, *names) -> float | None:
    for n in names:
        v = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if v is not None:
            try:
                return float(v)
            except (TypeError, ValueError):
                continue
    return None


def memory_report(compiled) -> MemoryReport:
    """Memory use of a compiled program: `compiled.memory_analysis()` when XLA provides it.

    `compiled` is a `jax.stages.Compiled` (`jax.jit(f).lower(*args).compile()`). Old and new JAX return an
    object with `argument_size_in_bytes`, `output_size_in_bytes`, `temp_size_in_bytes`,
    `alias_size_in_bytes`, `generated_code_size_in_bytes`; some backends/versions return None, a list of
    one such object, or raise. Then the argument and output bytes are read from the ENTRY signature of
    `compiled.as_text()` (temporaries unknown → 0; source 'shapes').
    """
    if not (hasattr(compiled, "memory_analysis") or hasattr(compiled, "as_text")):
        raise TypeError(f"expected a compiled program (jax.jit(f).lower(*args).compile()), got {type(compiled).__name__}")
    ma = None
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - backends without the analysis raise various errors
        ma = None
    if isinstance(ma, (list, tuple)):
        ma = ma[0] if ma else None
    if ma is not None and _attr(ma, "argument_size_in_bytes") is not None:
        return MemoryReport(_attr(ma, "argument_size_in_bytes") or 0.0, _attr(ma, "output_size_in_bytes") or 0.0,
                            _attr(ma, "temp_size_in_bytes") or 0.0, _attr(ma, "alias_size_in_bytes") or 0.0,
                            _attr(ma, "generated_code_size_in_bytes") or 0.0)
    hlo = compiled.as_text()
    m = re.search(r"^ENTRY\s+%?[\w.\-]+\s*\((.*)\)\s*->\s*(.*?)\s*\{\s*$", hlo, re.M)
    if not m:
        raise ValueError("the compiled program has neither a memory analysis nor an ENTRY signature to read")
    return MemoryReport(sum(s.nbytes for s in _shapes(m.group(1))), sum(s.nbytes for s in _shapes(m.group(2))),
                        0.0, source="shapes")


__all__ = [
    "CATEGORIES", "HLO_ITEMSIZE", "HloShape", "parse_hlo_shape", "tiled_shape", "padding_overhead", "HloOp",
    "parse_hlo_ops", "categorize", "MemoryReport", "memory_report",
]
