"""A profile of a jitted step as data (book ch. 9, "The JAX Profiler"): capture it with `jax.profiler.trace`
and read the Chrome-trace JSON the profiler writes beside its `.xplane.pb`.

`capture_trace(f, *args)` profiles a few calls of jit(f) (compiled outside the trace) and returns a `Trace`
that also holds the compiled HLO; `load_trace` reads any `*.trace.json.gz` (or the newest under a folder,
`find_trace_file`); `step_times` reads the steps' own annotations. Every XLA op the runtime executed is one
complete event ("ph": "X") whose `args` carry `hlo_op` (e.g. `dot.8`) and `hlo_module` (`jit_step`).
Part of `profiling` (re-exported by `lab/profiling.py`, which reads traces as op tables). Times are seconds.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import jax

from scalebook_utils.core.hlo.text import HloOp, parse_hlo_ops, parse_module
from scalebook_utils.lab import _compat


@dataclass(frozen=True)
class TraceEvent:
    """One complete event of a Chrome trace: start and duration in seconds, the thread it ran on, and for
    XLA ops the HLO instruction (`hlo_op`) and module (`hlo_module`, e.g. 'jit_step')."""

    name: str
    start_s: float
    duration_s: float
    thread: str
    pid: int = 0
    hlo_op: str = ""
    hlo_module: str = ""

    @property
    def is_xla_op(self) -> bool:
        return bool(self.hlo_op)


@dataclass
class Trace:
    """A parsed profile: its events, the file it came from, and (when `capture_trace` made it) the compiled
    HLO of the traced function and its XLA module name."""

    events: list[TraceEvent]
    path: str = ""
    hlo: str = ""
    module: str = ""
    calls: int = 0
    ops: dict[str, HloOp] = field(default_factory=dict, repr=False)

    def xla_ops(self, module: str | None = None) -> list[TraceEvent]:
        """The XLA op events (of `module`, default: the traced function's module when known)."""
        module = self.module if module is None else module
        return [e for e in self.events if e.is_xla_op and (not module or _same_module(e.hlo_module, module))]


def _same_module(a: str, b: str) -> bool:
    """Module names differ in small ways between the trace and the HLO text ('jit__lambda' vs 'jit__lambda_')."""
    return a.rstrip("_.0123456789") == b.rstrip("_.0123456789")


def find_trace_file(log_dir: str | os.PathLike) -> str:
    """The newest `*.trace.json.gz` (or `*.trace.json`) under `log_dir` (jax.profiler.trace writes
    `plugins/profile/<timestamp>/<host>.trace.json.gz`). FileNotFoundError names what was there instead."""
    log_dir = os.fspath(log_dir)
    if not os.path.isdir(log_dir):
        raise FileNotFoundError(f"profile directory {log_dir!r} does not exist")
    found = glob.glob(os.path.join(log_dir, "**", "*.trace.json.gz"), recursive=True) + glob.glob(
        os.path.join(log_dir, "**", "*.trace.json"), recursive=True
    )
    if not found:
        seen = sorted(
            os.path.relpath(p, log_dir)
            for p in glob.glob(os.path.join(log_dir, "**", "*"), recursive=True)
            if os.path.isfile(p)
        )[:8]
        raise FileNotFoundError(
            f"no *.trace.json.gz under {log_dir!r} (files there: {seen or 'none'}); was the "
            "profile written by jax.profiler.trace?"
        )
    return max(found, key=os.path.getmtime)


def load_trace(path: str | os.PathLike, *, hlo: str = "", calls: int = 0) -> Trace:
    """Parse a Chrome-trace JSON file (gzip or plain, or a directory holding one: the newest trace under it) into
    a `Trace`.

    Keeps complete events ("ph": "X"), with `ts`/`dur` converted from µs to seconds and thread names from
    the "thread_name" metadata events. Drops the CPU runtime's zero-length markers ('end: …'). `hlo` (the
    traced program's `compiled.as_text()`) and `calls` (how many steps ran inside the trace) let `op_table`
    name each op's category and give times per step.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = find_trace_file(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError, EOFError) as exc:
        raise ValueError(f"{path} is not a readable Chrome-trace JSON file: {exc}") from exc
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise ValueError(f"{path} has no 'traceEvents' list: not a Chrome trace")
    threads = {
        (e.get("pid"), e.get("tid")): (e.get("args") or {}).get("name", "")
        for e in raw
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    events = []
    for e in raw:
        if not isinstance(e, dict) or e.get("ph") != "X" or str(e.get("name", "")).startswith("end: "):
            continue
        args = e.get("args") or {}
        events.append(
            TraceEvent(
                str(e.get("name", "")),
                float(e.get("ts", 0.0)) * 1e-6,
                float(e.get("dur", 0.0)) * 1e-6,
                threads.get((e.get("pid"), e.get("tid")), ""),
                int(e.get("pid") or 0),
                str(args.get("hlo_op", "")),
                str(args.get("hlo_module", "")),
            )
        )
    events.sort(key=lambda ev: ev.start_s)
    trace = Trace(events, path)
    if hlo:
        trace.hlo, trace.module, trace.ops = hlo, parse_module(hlo).name, parse_hlo_ops(hlo)
    trace.calls = int(calls)
    return trace


def step_times(trace: Trace, name: str) -> list[float]:
    """Wall-clock seconds of each step: the durations of the events called `name` (those of
    `jax.profiler.StepTraceAnnotation(name, step_num=i)`, or any `TraceAnnotation(name)`), in time order.
    Unlike a sum of op durations, this does not add up ops that ran at the same time on different threads."""
    out = [e.duration_s for e in trace.events if e.name == name and not e.hlo_op]
    if not out:
        raise ValueError(
            f"no event named {name!r} in the trace: wrap each step in "
            f"jax.profiler.StepTraceAnnotation({name!r}, step_num=i)"
        )
    return out


def capture_trace(f: Callable, *args, repeats: int = 3, log_dir: str | os.PathLike | None = None) -> Trace:
    """Profile `repeats` calls of jit(f)(*args) with `jax.profiler.trace` and parse the trace.

    f is jitted (jitting a jitted function is free) and called once before tracing, so compilation is
    not in the profile. The trace goes to `log_dir` (default: a fresh temporary directory, kept, so
    TensorBoard/XProf can open it: `trace.path`). The returned Trace also holds the compiled HLO text,
    its parsed instructions and the module name, so `op_table` can categorise the ops.
    """
    if not callable(f):
        raise TypeError(f"f must be a function to profile, got {type(f).__name__}")
    if int(repeats) < 1:
        raise ValueError(f"repeats must be ≥ 1, got {repeats}")
    jf = jax.jit(f)
    compiled = jf.lower(*args).compile()
    hlo = compiled.as_text()
    _compat.block_until_ready(jf(*args))  # warm up: compile outside the trace
    log_dir = os.fspath(log_dir) if log_dir is not None else tempfile.mkdtemp(prefix="scalebook-trace-")
    with jax.profiler.trace(log_dir):
        for i in range(int(repeats)):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                _compat.block_until_ready(jf(*args))
    return load_trace(find_trace_file(log_dir), hlo=hlo, calls=int(repeats))


__all__ = ["TraceEvent", "Trace", "find_trace_file", "load_trace", "step_times", "capture_trace"]
