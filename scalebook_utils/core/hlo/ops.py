"""hlo.ops: what kind of work each compiled op is, and how much memory a compiled program needs.

Book ch. 9, "How to Profile TPU Programs" (§"Trace Viewer": which ops are matmuls, fusions,
collectives, copies; §"Memory Profile"). A reader on top of `hlo.text` (pure: no jax):

- `categorize(name, ops)` puts one executed op in one of `CATEGORIES` (matmul, fusion, collective, copy,
  other), from the compiled HLO when given (`parse_hlo_ops`), else from the op's name.
- `memory_report(compiled)` reads `compiled.memory_analysis()` (duck-typed: any object with that method or
  with `as_text()`), falling back to the ENTRY signature's argument and output types.

`profiling` (the jax shell of ch. 9) re-exports both. Sizes are bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scalebook_utils.core.hlo.text import (
    COLLECTIVE_OPS,
    MATMUL_OPS,
    OTHER_COMMUNICATION_OPS,
    HloOp,
    base_opcode,
    parse_module,
)

CATEGORIES = ("matmul", "fusion", "collective", "copy", "other")

#: opcodes that only move or re-lay-out data on one device
COPY_OPS = (
    "copy",
    "copy-start",
    "copy-done",
    "transpose",
    "bitcast",
    "reshape",
    "dynamic-update-slice",
    "dynamic-slice",
    "slice",
    "concatenate",
    "pad",
)
_COMMUNICATION = COLLECTIVE_OPS + OTHER_COMMUNICATION_OPS
#: what XLA names an op after its opcode ('all-reduce.1'); GPU kernels drop the hyphens ('ncclAllReduce')
_COLLECTIVE_WORDS = COLLECTIVE_OPS + tuple(k.replace("-", "") for k in COLLECTIVE_OPS)


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
        if any(base_opcode(o) in _COMMUNICATION for o in (op.opcode,) + op.inner):
            return "collective"
        if (
            op.opcode in MATMUL_OPS
            or any(o in MATMUL_OPS for o in op.inner)
            or op.opcode == "custom-call"
            and re.search(r"matmul|gemm|dot", op.attributes, re.I)
        ):
            return "matmul"
        if op.opcode in COPY_OPS or (
            op.opcode == "fusion"
            and op.inner
            and all(o in COPY_OPS + ("parameter", "tuple", "get-tuple-element") for o in op.inner)
        ):
            return "copy"
        if op.opcode == "fusion":
            return "fusion"
        return "other"
    n = name.lower()
    if any(k in n for k in _COLLECTIVE_WORDS):
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
        return (
            f"arguments {self.argument_bytes / mib:.2f} MiB, outputs {self.output_bytes / mib:.2f} MiB, "
            f"temporaries {self.temp_bytes / mib:.2f} MiB, aliased {self.alias_bytes / mib:.2f} MiB → "
            f"≤ {self.peak_bytes / mib:.2f} MiB ({self.source})"
        )


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
        raise TypeError(
            f"expected a compiled program (jax.jit(f).lower(*args).compile()), got {type(compiled).__name__}"
        )
    ma = None
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - backends without the analysis raise various errors
        ma = None
    if isinstance(ma, (list, tuple)):
        ma = ma[0] if ma else None
    if ma is not None and _attr(ma, "argument_size_in_bytes") is not None:
        return MemoryReport(
            _attr(ma, "argument_size_in_bytes") or 0.0,
            _attr(ma, "output_size_in_bytes") or 0.0,
            _attr(ma, "temp_size_in_bytes") or 0.0,
            _attr(ma, "alias_size_in_bytes") or 0.0,
            _attr(ma, "generated_code_size_in_bytes") or 0.0,
        )
    entry = parse_module(compiled.as_text()).entry
    if entry is None or entry.parameters is None:
        raise ValueError("the compiled program has neither a memory analysis nor an ENTRY signature to read")
    return MemoryReport(
        sum(s.nbytes for s in entry.parameters), sum(s.nbytes for s in entry.result), 0.0, source="shapes"
    )


__all__ = ["CATEGORIES", "COPY_OPS", "categorize", "MemoryReport", "memory_report"]
