"""One nbval run of a graded copy, and what its cell results say (DESIGN §4). `runner` builds the copy
(`graded_copy`), calls `run_nbval` once per attempt and turns the recorded answers into verdicts.

`run_nbval` writes the copy into a fresh folder, runs `pytest --nbval-lax` on it in a child process (under
bubblewrap when sandboxed: `sandbox.bwrap_command`) with a per-cell timeout, a timeout for the whole run
and a memory limit, kills every process the run started, and returns each code cell's result (`CellItem`,
from nbval's JUnit report, else from its verbose log) with the answers the kernel recorded (answers.jsonl,
size-limited, links not followed). The cell results only add details: the verdict is `check.judge`'s on
the recorded answers. `item_detail`, `timeout_text`, `is_timeout` and `last_error_line` read a cell's
result in words (what nbval 0.11 does on a timeout or a dead kernel: the `runner` docstring).

Memory limit: RLIMIT_DATA (default 4 GiB, `runner.DEFAULT_MEMORY_LIMIT_BYTES`), set in the child process before it runs pytest; the
kernel that nbval starts inherits it. A Python allocation over the limit raises MemoryError in the
student's cell. RLIMIT_AS is not used: XLA reserves address space it never touches (a jax process
with ~330 MB resident has ~1.9 GB of address space on 2 cores, more with more cores and threads),
and under RLIMIT_AS = 1 GiB `import jax` aborts. RLIMIT_DATA counts only writable private memory
(heap, anonymous mmap, thread stacks), not those reservations; jax runs under 1 GiB of it.

This module imports neither jax, matplotlib nor ipywidgets.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
import sys
import time
import uuid
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from scalebook_utils.grading import answers, sandbox

#: nbval waits this long for output after an interrupt before it stops the kernel.
NBVAL_OUTPUT_TIMEOUT_S = 5
_COPY_NAME = "submission.ipynb"


# --- running nbval ---------------------------------------------------------------------------------


@dataclass
class CellItem:
    """One code cell's result in a run (by code-cell index), or one the runner fixed (a "timeout")."""

    status: str  # passed | failed | error | xfailed | skipped | missing
    message: str = ""


_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*[A-Za-z]")
_TIMEOUT_MSG = re.compile(r"Timeout of [\d.]+ seconds exceeded")
_VERBOSE_LINE = re.compile(r"::Cell (\d+) (PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)")


#: The child process: sets the limits, then runs pytest (the kernel nbval starts inherits the limits).
#: A launcher rather than Popen(preexec_fn=...), which may deadlock when `jobs` > 1 runs threads.
#: It also keeps jsonschema from importing the optional `rfc3987_syntax` IRI checker, which builds
#: ~35 Lark parsers at import (1–4 s per run; python-jsonschema/jsonschema#1428) and which the
#: notebook schema never uses.
_LAUNCHER = """\
import sys
try:
    import resource
except ImportError:  # not POSIX: no limits
    resource = None
if resource is not None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = int(sys.argv[1])
    if limit > 0:
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
sys.modules.setdefault("rfc3987_syntax", None)
import pytest
sys.exit(pytest.main(sys.argv[2:]))
"""


def _kill_marked(token: str, root_pid: int | None = None) -> None:
    """Kill every process of this run: the child tree, and anything carrying the run's env marker."""
    try:
        import psutil  # a dependency of ipykernel
    except ImportError:  # pragma: no cover
        return
    victims = {}
    if root_pid is not None:
        try:
            root = psutil.Process(root_pid)
            victims[root.pid] = root
            for p in root.children(recursive=True):
                victims[p.pid] = p
        except psutil.Error:
            pass
    for p in psutil.process_iter():
        if p.pid in victims or p.pid == os.getpid():
            continue
        try:
            if p.environ().get("SCALEBOOK_GRADE_RUN") == token:
                victims[p.pid] = p
        except psutil.Error:
            continue
    for p in victims.values():
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(list(victims.values()), timeout=5)


def _parse_junit(text: str) -> dict[int, CellItem]:
    items = {}
    for tc in ET.fromstring(text).iter("testcase"):
        m = re.search(r"Cell (\d+)$", tc.get("name", ""))
        if not m:
            continue
        status, message = "passed", ""
        for child in tc:
            text = _ANSI.sub("", (child.text or child.get("message") or ""))
            if child.tag == "failure":
                status, message = "failed", text
            elif child.tag == "error":
                status, message = "error", text
            elif child.tag == "skipped":
                status = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                message = child.get("message") or ""
        items[int(m[1])] = CellItem(status, message)
    return items


@dataclass
class NbvalRun:
    """One run: each code cell's result, its wall seconds, whether the whole run went over its timeout,
    pytest's log, and qid → the answer record the kernel wrote."""

    items: dict[int, CellItem]
    seconds: float
    run_timed_out: bool
    log: str
    answers: dict[str, dict] = field(default_factory=dict)


#: The answers file a run may write: at most this many bytes are read (a record is a few kB at most).
_MAX_ANSWERS_BYTES = 8 * 2**20


def _read_limited(path: Path, limit: int) -> str:
    """Text of a regular file written by a run, without following a link the run may have put there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        return f.read(limit).decode("utf-8", errors="replace")


def _read_answers(path: Path, qids: set[str]) -> dict[str, dict]:
    """qid → the last record a run wrote for it (lines that are not records of these qids are ignored)."""
    answers = {}
    for line in _read_limited(path, _MAX_ANSWERS_BYTES).splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("qid") in qids and isinstance(entry.get("record"), dict):
            answers[entry["qid"]] = entry["record"]
    return answers


def run_nbval(
    nb,
    rundir: Path,
    spec: dict,
    timeout_per_cell: float,
    memory_limit_bytes: int | None,
    run_timeout: float,
    sandboxed: bool,
) -> NbvalRun:
    """Run the graded copy with nbval once, in the fresh folder `rundir` (sandboxed when asked).

    rundir/work holds the notebook (the run's working folder, writable); rundir/probe holds the read-only
    spec.json and pytest.ini and the writable out/ where the kernel appends answers.jsonl.
    """
    work, probe = rundir / "work", rundir / "probe"
    (probe / "out").mkdir(parents=True)
    work.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nbformat.write(nb, str(work / _COPY_NAME))
    (probe / "spec.json").write_text(json.dumps(spec))
    (probe / "pytest.ini").write_text("[pytest]\n")
    log_path = rundir / "pytest.log"
    token = uuid.uuid4().hex
    package_dir = Path(__file__).resolve().parents[1]  # the scalebook_utils folder (this file is grading/nbval_run.py)
    if sandboxed:
        inside_work, inside_probe = sandbox.SANDBOX_WORK, sandbox.SANDBOX_PROBE
        env = {
            "PATH": os.defpath,
            "HOME": "/tmp/home",
            "LANG": "C.UTF-8",
            "JUPYTER_RUNTIME_DIR": "/tmp/jupyter",
            "IPYTHONDIR": "/tmp/ipython",
            "MPLCONFIGDIR": "/tmp/matplotlib",
            "XDG_CACHE_HOME": "/tmp/cache",
            "PYTHONPATH": sandbox.SANDBOX_PACKAGE_ROOT,
        }
    else:
        inside_work, inside_probe = str(work), str(probe)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SCALEBOOK_"))}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(package_dir.parent), env.get("PYTHONPATH")) if p)
    env.update(
        SCALEBOOK_GRADING="1",
        SCALEBOOK_GRADE_RUN=token,
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
        JAX_PLATFORMS="cpu",
        **{answers.PROBE_DIR_ENV: inside_probe},
    )
    report = f"{inside_work}/nbval-report.xml"
    argv = [
        sys.executable,
        "-c",
        _LAUNCHER,
        str(memory_limit_bytes or 0),  # then pytest's arguments:
        "-c",
        f"{inside_probe}/pytest.ini",
        "--rootdir",
        inside_work,
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "--nbval-lax",
        "--nbval-current-env",
        f"--nbval-cell-timeout={timeout_per_cell:g}",
        f"--junitxml={report}",
        "--color=no",
        "-vv",
        _COPY_NAME,
    ]
    if sandboxed:
        cmd = sandbox.bwrap_command(argv, package_dir=package_dir, work_dir=work, probe_dir=probe, env=env)
    else:
        cmd = argv
    t0 = time.monotonic()
    run_timed_out = False
    # output to a file, not a pipe: a process the notebook leaves behind may hold the pipe open
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=None if sandboxed else env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=run_timeout)
        except subprocess.TimeoutExpired:
            run_timed_out = True
            _kill_marked(token, proc.pid)
            proc.wait()
        finally:
            _kill_marked(token)  # whatever the notebook left running in the background
    seconds = time.monotonic() - t0
    log = log_path.read_text(errors="replace")
    items = {}
    report_path = work / "nbval-report.xml"
    if not run_timed_out:
        text = _read_limited(report_path, _MAX_ANSWERS_BYTES)
        try:
            items = _parse_junit(text) if text else {}
        except ET.ParseError:
            items = {}
    if not items:  # no report: take what the verbose log shows
        for m in _VERBOSE_LINE.finditer(log or ""):
            status = {
                "PASSED": "passed",
                "XPASS": "passed",
                "FAILED": "failed",
                "ERROR": "error",
                "XFAIL": "xfailed",
                "SKIPPED": "skipped",
            }[m[2]]
            items[int(m[1])] = CellItem(status, "")
    found = _read_answers(probe / "out" / "answers.jsonl", set(spec))
    return NbvalRun(items, seconds, run_timed_out, log or "", found)


# --- details ---------------------------------------------------------------------------------------


def last_error_line(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b", ln):
            return ln[:200]
    return lines[-1][:200] if lines else "failed"


def item_detail(item: CellItem, timeout_per_cell: float) -> str:
    if item.status == "passed":
        return "correct"
    if item.status == "timeout":
        return item.message
    if item.status == "xfailed":
        return "not graded: an earlier cell timed out"
    if item.status == "missing":
        return item.message or "not run"
    msg = item.message
    if "Kernel dead on test start" in msg:
        return "not run: the kernel died in an earlier cell"
    if _TIMEOUT_MSG.search(msg):
        return timeout_text(msg, timeout_per_cell)
    if item.status == "error":
        return "grading error: " + last_error_line(msg)
    return last_error_line(msg)


def timeout_text(msg: str, timeout_per_cell: float) -> str:
    if "Failed to interrupt" in msg or "waiting for output" in msg:
        return f"timed out after {timeout_per_cell:g} s; the kernel did not respond (stuck or crashed) and was stopped"
    return f"timed out after {timeout_per_cell:g} s"


def is_timeout(item: CellItem) -> bool:
    return item.status == "failed" and bool(_TIMEOUT_MSG.search(item.message))


__all__ = [
    "NBVAL_OUTPUT_TIMEOUT_S",
    "CellItem",
    "NbvalRun",
    "run_nbval",
    "last_error_line",
    "item_detail",
    "timeout_text",
    "is_timeout",
]
