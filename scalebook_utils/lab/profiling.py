"""profiling: capture a trace of a jitted step, read it as an op table, and compare op times with the roofline.

Book ch. 9, "How to Profile TPU Programs". The chapter's profiler (XProf / TensorBoard) shows a
timeline of XLA ops per core; here we do the same by hand on whatever JAX runs on:

- `capture_trace(f, *args)` runs `jax.profiler.trace` around a few calls of jit(f) and parses the
  Chrome-trace JSON (`*.trace.json.gz`) the profiler writes beside its `.xplane.pb` (ch. 9 §"The JAX
  Profiler"). Every XLA op the runtime executed is one complete event ("ph": "X") whose `args` carry
  `hlo_op` (the HLO instruction name, e.g. `dot.8`, `fusion.3`) and `hlo_module` (`jit_step`).
  Works on CPU with jax 0.4.35 and 0.10.x; no TensorBoard/XProf needed. (Capturing and reading traces is
  `lab/traces.py`, re-exported here; this module reads them.)
- `op_table(trace)` sums those events per HLO op: total seconds, calls, category (matmul, fusion,
  collective, copy, other), read from the compiled HLO text (ch. 9 §"How to read an XLA op").
- `matmul_vs_roofline(trace, calibration)` predicts each matmul's time with the roofline of ch. 1,
  T = max(2·(∏ dims) / C, bytes / W), and divides by the measured time (ch. 9 "Looking at a real(ish)
  example profile": the book's FFW matmul, 95.6 ms predicted, 96 ms measured).
- `memory_vs_roofline(trace, W)` does the same for elementwise fusions and copies, whose only limit is
  bandwidth: T ≥ (operand bytes + output bytes) / W.
- `hlo_listing(hlo, mesh_shape, axis_names)` lists a compiled program's fusions and, through
  `jaxlab.parse_hlo_collectives`, its collectives with their shapes and mesh axes (ch. 9 §"Graph Viewer").
- `memory_report(compiled)` reads `compiled.memory_analysis()` (ch. 9 §"Memory Profile").
- `parse_hlo_shape` / `tiled_shape` read an HLO type such as `bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}`:
  dtype, dims, layout, tiles, memory space, and the padding that tiling costs (ch. 9 §"How to read an XLA op").

The HLO readers (`parse_hlo_shape`, `tiled_shape`, `padding_overhead`, `parse_hlo_ops`, `HloShape`, `HloOp`:
`core.hlo.text`; `categorize`, `CATEGORIES`, `memory_report`: `core.hlo.ops`) are pure text parsing (no jax)
and are re-exported here.

Times are seconds, sizes bytes. Times measured on simulated CPU devices say nothing about interconnects:
read communication from the compiled HLO (which collectives, how many bytes), not from the clock.
"""

from __future__ import annotations

# The imports marked "kept" are names `profiling` held before the traces had their own module: no
# `profiling.X` that worked before breaks.
import glob  # noqa: F401  (kept)
import gzip  # noqa: F401  (kept)
import json  # noqa: F401  (kept)
import math
import os  # noqa: F401  (kept)
import re
import tempfile  # noqa: F401  (kept)
from collections.abc import Callable, Sequence  # noqa: F401  (kept: Callable)
from dataclasses import dataclass, field  # noqa: F401  (kept: field)

import jax  # noqa: F401  (kept)

from scalebook_utils.core.hardware import ChipSpec
from scalebook_utils.core.hlo.ops import CATEGORIES, MemoryReport, categorize, memory_report
from scalebook_utils.core.hlo.text import (
    CONTAINER_OPS,
    HLO_ITEMSIZE,
    MATMUL_OPS,
    HloOp,
    HloShape,
    padding_overhead,
    parse_hlo_ops,
    parse_hlo_shape,
    parse_module,  # noqa: F401  (kept)
    tiled_shape,
)
from scalebook_utils.core.roofline import MatmulRoofline, matmul_roofline
from scalebook_utils.lab import runtime as jaxlab
from scalebook_utils.lab.traces import Trace, TraceEvent, capture_trace, find_trace_file, load_trace, step_times

# --- the op table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpRow:
    """One HLO op of a profile: total seconds over all its executions, count, category, and its share of
    the traced op time. `per_call_s` divides by the number of profiled steps when known (else by count)."""

    name: str
    category: str
    total_s: float
    count: int
    fraction: float
    per_call_s: float
    shape: str = ""

    def __str__(self) -> str:
        return (
            f"{self.name:<28} {self.category:<10} {self.total_s * 1e6:>11.1f} µs {self.count:>5}× "
            f"{self.fraction:>6.1%}  {self.shape}"
        )


def _op_events(trace: Trace, module: str | None, ops: dict[str, HloOp] | None) -> list[TraceEvent]:
    """XLA op events without container ops (a `call` that runs a computation in parallel tasks, `while`,
    `conditional`): they enclose the events of the ops they run, so counting both would count that time twice."""
    events = trace.xla_ops(module)
    containers = {n for n, op in (ops or {}).items() if op.opcode in CONTAINER_OPS}
    if containers and any(e.hlo_op not in containers for e in events):
        events = [e for e in events if e.hlo_op not in containers]
    return events


def op_table(trace: Trace, *, module: str | None = None, ops: dict[str, HloOp] | None = None) -> list[OpRow]:
    """Sum the XLA op events of `trace` per HLO op, largest total first (the profiler's "op profile").

    Container ops (`call`, `while`, `conditional`: old XLA:CPU wraps parallel work in a `call`) are left
    out when the ops they run have events of their own, so no time is counted twice.
    fraction = op total / Σ totals over all ops; per_call_s = total / trace.calls (time per step) when
    `capture_trace` recorded the number of calls, else total / count. `ops` (default: the trace's own
    parsed HLO) names each op's category (`categorize`). ValueError when the trace has no XLA op events —
    e.g. a trace of Python only, or a module name that does not match.
    """
    ops = trace.ops if ops is None else ops
    events = _op_events(trace, module, ops)
    if not events:
        mods = sorted({e.hlo_module for e in trace.events if e.is_xla_op})
        of = f" of module {module or trace.module!r}" if (module or trace.module) else ""
        raise ValueError(
            f"no XLA op events{of} in the trace (modules with ops: {mods or 'none'}); "
            "was the step executed inside jax.profiler.trace?"
        )
    totals: dict[str, list] = {}
    for e in events:
        t = totals.setdefault(e.hlo_op, [0.0, 0])
        t[0] += e.duration_s
        t[1] += 1
    grand = sum(t for t, _ in totals.values()) or 1.0
    rows = []
    for name, (total, count) in totals.items():
        op = ops.get(name) if ops else None
        rows.append(
            OpRow(
                name,
                categorize(name, ops),
                total,
                count,
                total / grand,
                total / (trace.calls or count),
                str(op.shape) if op and op.shape else "",
            )
        )
    rows.sort(key=lambda r: (-r.total_s, r.name))
    return rows


@dataclass(frozen=True)
class Span:
    """One executed XLA op on the timeline: thread (lane), op, category, start (s, from the first op) and duration."""

    thread: str
    name: str
    category: str
    start_s: float
    duration_s: float


def timeline(trace: Trace, *, module: str | None = None) -> list[Span]:
    """The XLA op events of `trace` as spans on a common clock (0 = the first op's start), in time order —
    the "XLA Ops" rows of the profiler's trace viewer (ch. 9 §"Trace Viewer"). ValueError when there are none."""
    events = _op_events(trace, module, trace.ops)
    if not events:
        raise ValueError("the trace has no XLA op events to draw")
    t0 = min(e.start_s for e in events)
    return [
        Span(e.thread or f"pid {e.pid}", e.hlo_op, categorize(e.hlo_op, trace.ops), e.start_s - t0, e.duration_s)
        for e in events
    ]


def top_ops(rows: Sequence[OpRow], k: int = 5) -> list[OpRow]:
    """The k rows with the largest total time."""
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    return sorted(rows, key=lambda r: -r.total_s)[:k]


def category_totals(rows: Sequence[OpRow]) -> dict[str, float]:
    """Seconds per category (every category in `CATEGORIES`, 0.0 when absent); they sum to the table total."""
    out = {c: 0.0 for c in CATEGORIES}
    for r in rows:
        out[r.category] = out.get(r.category, 0.0) + r.total_s
    return out


def scope_totals(rows: Sequence[OpRow], ops: dict[str, HloOp], scopes: Sequence[str]) -> dict[str, float]:
    """Seconds per `jax.named_scope`: each op counts for the first of `scopes` that is a component of its HLO
    `op_name` ('jit(mlp)/ffw_up/dot_general' → 'ffw_up'); ops in none of them go to 'other'."""
    out = {s: 0.0 for s in scopes} | {"other": 0.0}
    for r in rows:
        parts = ops[r.name].op_name.split("/") if r.name in ops else []
        out[next((s for s in scopes if s in parts), "other")] += r.total_s
    return out


def format_side_by_side(
    before: Sequence[OpRow], after: Sequence[OpRow], k: int = 8, labels: tuple[str, str] = ("before", "after")
) -> str:
    """Two op tables next to each other (the k largest rows of each, µs per step), and a line of µs per step
    per category for each, so a fix's effect on the profile can be read row by row."""

    def cells(rows):
        return [f"{r.name[:24]:<24} {r.category:<10} {r.per_call_s * 1e6:>9.0f}" for r in list(rows)[:k]]

    a, b = cells(before), cells(after)
    width = 46
    lines = [
        f"{labels[0]:<{width}} | {labels[1]}",
        f"{'op':<24} {'category':<10} {'µs/step':>9}".ljust(width) + f" | {'op':<24} {'category':<10} {'µs/step':>9}",
    ]
    lines += [f"{x:<{width}} | {y}" for x, y in zip(a + [""] * (len(b) - len(a)), b + [""] * (len(a) - len(b)))]
    for lab, rows in zip(labels, (before, after)):
        per_cat = {c: sum(r.per_call_s for r in rows if r.category == c) for c in CATEGORIES}
        lines.append(f"{lab}: " + ", ".join(f"{c} {t * 1e6:.0f} µs" for c, t in per_cat.items() if t))
    return "\n".join(lines)


def format_op_table(rows: Sequence[OpRow], k: int | None = 10) -> str:
    """A text table of the first k rows (all when k is None)."""
    head = f"{'op':<28} {'category':<10} {'total':>14} {'count':>6} {'share':>6}  output"
    return "\n".join([head] + [str(r) for r in (rows if k is None else rows[:k])])


# --- matmuls against the roofline -----------------------------------------------------------------


@dataclass(frozen=True)
class MatmulCheck:
    """One matmul op of a profile against the roofline: B·D·F are the (batch×rows, contraction, columns)
    sizes of its dot, `roofline` the ch. 1 prediction on the chip, measured_s the time per call.
    ratio = predicted / measured (1.0: at the roofline; 0.25: four times slower than it)."""

    name: str
    B: int
    D: int
    F: int
    measured_s: float
    roofline: MatmulRoofline

    @property
    def predicted_s(self) -> float:
        return self.roofline.t_lower_s

    @property
    def ratio(self) -> float:
        return self.predicted_s / self.measured_s

    def __str__(self) -> str:
        return (
            f"{self.name:<24} [{self.B}×{self.D}]·[{self.D}×{self.F}] measured {self.measured_s * 1e6:9.1f} µs "
            f"roofline {self.predicted_s * 1e6:9.1f} µs → {self.ratio:.2f}"
        )


def dot_dims(op: HloOp, ops: dict[str, HloOp] | None = None) -> tuple[int, int, int]:
    """(B, D, F) of a dot with 2·B·D·F FLOPs: D = ∏ contracting dims of the lhs, F = output size / B, where
    B = ∏ lhs dims that are not contracted (batch dims included). For a fusion, the `dot` inside the computation
    it calls is read (pass `ops`, all instructions from `parse_hlo_ops`); without it the sizes are guessed from
    the fusion's two largest operands and its output. ValueError when not a matmul."""
    if op.opcode == "fusion" and ops:
        inner = [o for o in ops.values() if o.opcode == "dot" and o.computation == op.calls]
        if inner:
            return dot_dims(inner[0])
    lhs_c = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", op.attributes)
    out = op.shape
    if out is None or len(op.operands) < 2:
        raise ValueError(f"{op.name} ({op.opcode}) has no two operands and an output: not a matmul")
    if op.opcode == "dot" and lhs_c is not None:
        lhs = op.operands[0]
        cdims = [int(c) for c in lhs_c.group(1).split(",") if c]
        D = math.prod(lhs.dims[c] for c in cdims)
        B = math.prod(lhs.dims) // max(D, 1)
        F = math.prod(out.dims) // max(B, 1)
        return int(B), int(D), int(F)
    # a fusion around a dot: inputs X[B, D] and W[D, F] (any order), output [B, F]
    a, b = sorted(op.operands, key=lambda s: math.prod(s.dims))[-2:]
    n_out = math.prod(out.dims)
    for x, w in ((a, b), (b, a)):
        for D in sorted({d for d in x.dims if d in w.dims}, reverse=True):
            B, F = math.prod(x.dims) // D, math.prod(w.dims) // D
            if B * F == n_out:
                return int(B), int(D), int(F)
    raise ValueError(f"cannot read the matmul sizes of {op.name} from {[str(s) for s in op.operands]} → {out}")


def matmul_vs_roofline(
    trace: Trace,
    chip: ChipSpec | str | None = None,
    *,
    mode: str | None = None,
    calibration=None,
    rows: Sequence[OpRow] | None = None,
) -> list[MatmulCheck]:
    """Each matmul op of the profile: measured time per call vs the roofline T = max(2BDF/C, bytes/W).

    Give `calibration` (`jaxlab.calibrate()`: this machine's measured C and W) or a `chip` name / ChipSpec
    (`mode`, default the calibration's dtype or 'bf16', picks the peak and bytes per element). The
    measured time is the op's total ÷ its count. Book ch. 9: the FFW matmul of the mock Transformer,
    2·32·1024·8192·32768 / (8 · 23e12) = 95.6 ms predicted, 96 ms measured → ratio ≈ 1.0.
    """
    if calibration is not None:
        chip, mode = calibration.as_chip(), mode or calibration.mode
    if chip is None:
        raise ValueError("give a calibration (jaxlab.calibrate()) or a chip to predict matmul times")
    mode = mode or "bf16"
    rows = op_table(trace) if rows is None else rows
    out = []
    for r in rows:
        if r.category != "matmul" or r.name not in trace.ops:
            continue
        try:
            B, D, F = dot_dims(trace.ops[r.name], trace.ops)
        except ValueError:
            continue
        out.append(MatmulCheck(r.name, B, D, F, r.total_s / r.count, matmul_roofline(B, D, F, chip, mode)))
    return out


@dataclass(frozen=True)
class BandwidthCheck:
    """One non-matmul op against the memory roofline: it must read its operands and write its output at least
    once, so T ≥ bytes / W. ratio = (bytes / W) / measured (1.0: streaming at full bandwidth)."""

    name: str
    category: str
    bytes: float
    measured_s: float
    predicted_s: float

    @property
    def ratio(self) -> float:
        return self.predicted_s / self.measured_s

    def __str__(self) -> str:
        return (
            f"{self.name:<28} {self.category:<8} {self.bytes / 2**20:8.2f} MiB measured "
            f"{self.measured_s * 1e6:9.1f} µs, bytes/W {self.predicted_s * 1e6:9.1f} µs → {self.ratio:.2f}"
        )


def memory_vs_roofline(
    trace: Trace,
    bytes_per_s: float,
    *,
    rows: Sequence[OpRow] | None = None,
    categories: Sequence[str] = ("fusion", "copy", "other"),
) -> list[BandwidthCheck]:
    """Ops of the given categories against the memory roofline: (operand bytes + output bytes) / W vs the
    measured time per execution, largest total time first. Elementwise fusions and copies have an arithmetic
    intensity near 0 (ch. 1), so bandwidth is their only limit; a ratio far below 1 marks a slow kernel
    (e.g. a transposing copy that writes memory with a large stride). W in bytes/s, e.g. `calibrate().bytes_per_s`."""
    if not bytes_per_s or bytes_per_s <= 0:
        raise ValueError(f"bytes_per_s must be a positive bandwidth in B/s, got {bytes_per_s}")
    rows = op_table(trace) if rows is None else rows
    out = []
    for r in rows:
        op = trace.ops.get(r.name)
        if r.category not in categories or op is None or not op.outputs:
            continue
        nbytes = sum(x.nbytes for x in op.operands) + sum(x.nbytes for x in op.outputs)
        if nbytes:
            out.append(BandwidthCheck(r.name, r.category, nbytes, r.total_s / r.count, nbytes / bytes_per_s))
    return out


# --- compiled programs: fusions and collectives ---------------------------------------------------


@dataclass(frozen=True)
class HloListing:
    """What a compiled program contains: its fusions (name, kind, output type, whether it wraps a matmul),
    its matmuls (dots outside fusions too) and its collectives (`jaxlab.HloCollective`, with shapes,
    bytes and mesh axes)."""

    fusions: list[tuple[str, str, str, bool]]
    matmuls: list[tuple[str, str]]
    collectives: list

    def collective_kinds(self) -> dict[str, int]:
        """Count of collective instructions per kind."""
        out: dict[str, int] = {}
        for c in self.collectives:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out

    def __str__(self) -> str:
        lines = [f"{len(self.fusions)} fusions, {len(self.matmuls)} matmuls, {len(self.collectives)} collectives"]
        lines += [f"  fusion {n} ({k}) → {s}{'  [matmul]' if m else ''}" for n, k, s, m in self.fusions]
        lines += [f"  {c}" for c in self.collectives]
        return "\n".join(lines)


def hlo_listing(hlo: str, mesh_shape: Sequence[int] = (1,), axis_names: Sequence[str] = ("x",)) -> HloListing:
    """Fusions, matmuls and collectives of compiled HLO text (ENTRY and called computations).

    `mesh_shape`/`axis_names` are the mesh the program was compiled for; they let
    `jaxlab.parse_hlo_collectives` name each collective's mesh axes. Only the top-level fusions are
    listed (not the computations they call).
    """
    if len(tuple(mesh_shape)) != len(tuple(axis_names)):
        raise ValueError(f"mesh_shape {tuple(mesh_shape)} and axis_names {tuple(axis_names)} differ in length")
    ops = parse_hlo_ops(hlo)
    called = {op.calls for op in ops.values() if op.opcode == "fusion"}
    fusions, matmuls = [], []
    for op in ops.values():
        if op.computation in called:
            continue
        if op.opcode == "fusion":
            is_mm = any(o in MATMUL_OPS for o in op.inner)
            fusions.append((op.name, op.fusion_kind, str(op.shape) if op.shape else "", is_mm))
            if is_mm:
                matmuls.append((op.name, str(op.shape)))
        elif op.opcode in MATMUL_OPS:
            matmuls.append((op.name, str(op.shape)))
    return HloListing(fusions, matmuls, jaxlab.parse_hlo_collectives(hlo, mesh_shape, axis_names))


__all__ = [
    "CATEGORIES",
    "HLO_ITEMSIZE",
    "HloShape",
    "parse_hlo_shape",
    "tiled_shape",
    "padding_overhead",
    "HloOp",
    "parse_hlo_ops",
    "categorize",
    "TraceEvent",
    "Trace",
    "find_trace_file",
    "load_trace",
    "capture_trace",
    "OpRow",
    "op_table",
    "Span",
    "timeline",
    "top_ops",
    "category_totals",
    "format_op_table",
    "step_times",
    "scope_totals",
    "format_side_by_side",
    "MatmulCheck",
    "dot_dims",
    "matmul_vs_roofline",
    "BandwidthCheck",
    "memory_vs_roofline",
    "HloListing",
    "hlo_listing",
    "MemoryReport",
    "memory_report",
]
