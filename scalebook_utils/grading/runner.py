"""Grading submitted exercises with nbval (DESIGN §4); the exercises themselves are made in `exercises`,
the results' forms are in `report`.

`grade(submissions, against=exercise)` grades each submission in a fresh kernel:

1. it checks the submission is a notebook for that exercise (it holds at least one of its question ids);
2. it writes a copy in which every check cell of the exercise — found by the question id in its metadata,
   else by its cell id, else as the unlabelled code cell that calls `check("<qid>", ...)`, else appended
   at the end — is replaced by a cell that *records* the answer (`answers.record`: the value as given,
   or a function's outputs at the checker's test points); the student's other outputs are cleared;
3. it runs `pytest --nbval-lax` on the copy (per-cell timeout, a timeout for the whole run, a memory
   limit, `--noconftest`, its configuration in a read-only folder) inside a bubblewrap sandbox
   (`sandbox.py`: read-only system and package with the answer registry hidden, no network, its own
   work folder and /tmp, its own PID namespace — every process it starts dies with it);
4. it reads the recorded answers (a size-limited file, links not followed) and *judges* them with
   `check.judge` in this process, which never runs student code. nbval's JUnit report only adds
   details (which cell timed out or raised); a forged report cannot change a verdict.

The submission file itself is only read, never written. Each run (a rerun too) gets a fresh folder.

What nbval 0.11 does on a per-cell timeout (measured): it interrupts the kernel (SIGINT) and fails
that cell; every later cell still runs but is marked xfail ("Previous cell timed out"), so a later
failure shows up only as "skipped" in the JUnit report (a later pass as an XPASS, i.e. passed). If
the kernel does not respond to the interrupt (C code, SIGINT ignored, a crashed kernel — which nbval
also only notices after the full cell timeout) nbval stops it after 5 s more and every later cell
fails with "Kernel dead on test start" (also as xfail). Either way later questions would not be
graded, so the grader replaces each timed-out cell by one that raises at once and runs the copy
again in a new folder (at most MAX_RERUNS times); the timed-out cell keeps its "timed out" result.

Memory limit: RLIMIT_DATA (default 4 GiB), set in the child process before it runs pytest; the
kernel that nbval starts inherits it. A Python allocation over the limit raises MemoryError in the
student's cell. RLIMIT_AS is not used: XLA reserves address space it never touches (a jax process
with ~330 MB resident has ~1.9 GB of address space on 2 cores, more with more cores and threads),
and under RLIMIT_AS = 1 GiB `import jax` aborts. RLIMIT_DATA counts only writable private memory
(heap, anonymous mmap, thread stacks), not those reservations; jax runs under 1 GiB of it.

SECURITY. With bubblewrap (Debian's `bubblewrap`; `.ci/run` installs it) every attack of the
reliability report is closed (tests/test_grader_attacks.py has one test per family). Where bwrap cannot
run (no user namespaces), `grade(sandboxed=None)` falls back to the limits above and the CLI says so in
one line: a submission can then read and write your files, and read the answer key. What no grader can
stop: a student computing a correct answer with the course's own package functions.

This module imports neither jax, matplotlib nor ipywidgets.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from scalebook_utils.grading import answers, sandbox
from scalebook_utils.grading.check import judge, spec_for
from scalebook_utils.grading.exercises import GradingError, cell_qid
from scalebook_utils.grading.graded_copy import (
    Reference,
    build_graded_copy,
    check_belongs,
    load_reference,
    read_notebook,
)
from scalebook_utils.grading.report import QuestionResult, SubmissionResult

DEFAULT_TIMEOUT_PER_CELL = 60.0
DEFAULT_MEMORY_LIMIT_BYTES = 4 * 2**30
#: At most this many extra runs of one submission after cells timed out or killed the kernel.
MAX_RERUNS = 4
#: nbval waits this long for output after an interrupt before it stops the kernel.
_NBVAL_OUTPUT_TIMEOUT_S = 5
_COPY_NAME = "submission.ipynb"


# --- running nbval ---------------------------------------------------------------------------------


@dataclass
class _Item:
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


def _parse_junit(text: str) -> dict[int, _Item]:
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
        items[int(m[1])] = _Item(status, message)
    return items


@dataclass
class _Run:
    items: dict[int, _Item]
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


def _run_nbval(
    nb,
    rundir: Path,
    spec: dict,
    timeout_per_cell: float,
    memory_limit_bytes: int | None,
    run_timeout: float,
    sandboxed: bool,
) -> _Run:
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
    package_dir = Path(__file__).resolve().parents[1]  # the scalebook_utils folder (this file is grading/runner.py)
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
            items[int(m[1])] = _Item(status, "")
    found = _read_answers(probe / "out" / "answers.jsonl", set(spec))
    return _Run(items, seconds, run_timed_out, log or "", found)


# --- details ---------------------------------------------------------------------------------------


def _last_error_line(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b", ln):
            return ln[:200]
    return lines[-1][:200] if lines else "failed"


def _item_detail(item: _Item, timeout_per_cell: float) -> str:
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
        return _timeout_text(msg, timeout_per_cell)
    if item.status == "error":
        return "grading error: " + _last_error_line(msg)
    return _last_error_line(msg)


def _timeout_text(msg: str, timeout_per_cell: float) -> str:
    if "Failed to interrupt" in msg or "waiting for output" in msg:
        return f"timed out after {timeout_per_cell:g} s; the kernel did not respond (stuck or crashed) and was stopped"
    return f"timed out after {timeout_per_cell:g} s"


def _is_timeout(item: _Item) -> bool:
    return item.status == "failed" and bool(_TIMEOUT_MSG.search(item.message))


def _neutralized_source(detail: str) -> str:
    return (
        "# scalebook grade: this cell was not run again\n"
        f"raise RuntimeError({('scalebook grade: this cell is skipped: ' + detail)!r})\n"
    )


# --- grading ---------------------------------------------------------------------------------------


def _grade_one(
    path: str,
    nb,
    ref: Reference,
    timeout_per_cell: float,
    memory_limit_bytes: int | None,
    run_timeout: float | None,
    tmp_root: str | None,
    sandboxed: bool,
) -> SubmissionResult:
    t0 = time.monotonic()
    graded = build_graded_copy(nb, ref)
    spec = {cell_qid(r): spec_for(cell_qid(r)) for r in ref.checks}
    code_cells = [c for c in graded.nb.cells if c.cell_type == "code"]
    if run_timeout is None:
        run_timeout = 120 + len(code_cells) * (timeout_per_cell + _NBVAL_OUTPUT_TIMEOUT_S + 5)
    forced: dict[int, _Item] = {}  # code-cell index → result fixed by an earlier run (a timeout)
    final: dict[int, _Item] = {}
    found: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="scalebook-grade-", dir=tmp_root) as tmp:
        for attempt in range(MAX_RERUNS + 1):
            # a fresh folder for every run: a rerun never sees what an earlier run wrote (e.g. a conftest.py)
            run = _run_nbval(
                graded.nb,
                Path(tmp) / f"run{attempt}",
                spec,
                timeout_per_cell,
                memory_limit_bytes,
                run_timeout,
                sandboxed,
            )
            found = run.answers
            final = dict(run.items)
            final.update(forced)
            if run.run_timed_out:
                for i in range(len(code_cells)):
                    final.setdefault(i, _Item("missing", f"not graded: the whole run went over {run_timeout:g} s"))
                break
            if not run.items:
                reason = _last_error_line(run.log) if run.log.strip() else "no report"
                final = {
                    i: _Item("missing", f"grading error: nbval did not run ({reason})") for i in range(len(code_cells))
                }
                break
            new_timeouts = sorted(i for i, it in run.items.items() if i not in forced and _is_timeout(it))
            if not new_timeouts:
                break
            masked = any(
                it.status == "xfailed" or "Kernel dead" in it.message
                for i, it in run.items.items()
                if i > new_timeouts[0]
            )
            for i in new_timeouts:
                forced[i] = _Item("timeout", _timeout_text(run.items[i].message, timeout_per_cell))
            final.update(forced)
            if not masked or attempt == MAX_RERUNS:
                break
            for i in new_timeouts:  # run again with the timed-out cells failing at once
                code_cells[i].source = _neutralized_source(forced[i].message)

    questions = []
    for r in ref.checks:
        qid = cell_qid(r)
        # the verdict: the recorded answer judged here, in a process that never ran the student's code
        passed, detail = judge(qid, found[qid]) if qid in found else (False, "")
        detail = "correct" if passed else (f"{qid}: {detail}" if detail else "")
        answer_items = [final.get(i) for i in graded.answer_index.get(qid, [])]
        timed = next((a for a in answer_items if a and a.status == "timeout"), None)
        raised = next((a for a in answer_items if a and a.status == "failed"), None)
        if not passed and timed is not None:
            detail = "answer cell " + timed.message
        elif not passed and raised is not None and (qid not in found or found[qid].get("answered") is False):
            detail = "answer cell raised " + _last_error_line(raised.message)
        elif qid not in found:
            item = final.get(graded.check_index[qid], _Item("missing", "not run"))
            detail = (
                _item_detail(item, timeout_per_cell) if item.status != "passed" else f"{qid}: no answer was recorded"
            )
        questions.append(QuestionResult(qid, passed, detail))
    return SubmissionResult(str(path), questions, time.monotonic() - t0, sandboxed)


def _check_limits(timeout_per_cell, memory_limit_bytes, run_timeout, jobs) -> None:
    """Limits must be finite and positive (a NaN or infinite timeout would silently fail every student)."""

    def bad(x) -> bool:
        return isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0

    if bad(timeout_per_cell):
        raise GradingError(f"timeout_per_cell must be a finite number of seconds > 0, got {timeout_per_cell!r}")
    if memory_limit_bytes is not None and bad(memory_limit_bytes):
        raise GradingError(
            f"memory_limit_bytes must be a finite number of bytes > 0 or None (no limit), got {memory_limit_bytes!r}"
        )
    if run_timeout is not None and bad(run_timeout):
        raise GradingError(f"run_timeout must be a finite number of seconds > 0 or None, got {run_timeout!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise GradingError(f"jobs must be an integer ≥ 1, got {jobs!r}")


def grade(
    submissions: Iterable[str | os.PathLike],
    against: str | os.PathLike,
    *,
    timeout_per_cell: float = DEFAULT_TIMEOUT_PER_CELL,
    memory_limit_bytes: int | None = DEFAULT_MEMORY_LIMIT_BYTES,
    run_timeout: float | None = None,
    jobs: int = 1,
    tmp_root: str | None = None,
    progress: Callable[[SubmissionResult], None] | None = None,
    sandboxed: bool | None = None,
) -> list[SubmissionResult]:
    """Grade each submission against the exercise notebook `against`; one result per submission.

    Every input is checked before anything runs: GradingError (one line) for a missing, unreadable or
    invalid notebook, an exercise without check cells, or a submission that holds none of the
    exercise's question ids. Each submission then runs in its own temporary folder and fresh kernel
    with `timeout_per_cell` seconds per cell, `memory_limit_bytes` of RLIMIT_DATA (None: no limit),
    and `run_timeout` seconds for a whole run (default: generous, from the number of cells).
    `jobs` submissions are graded at once. A failing student is a result, not an exception.

    `sandboxed`: run each submission under bubblewrap (see `sandbox`); None (default) means "when bwrap
    can run here". True where it cannot raises GradingError with the reason.
    """
    _check_limits(timeout_per_cell, memory_limit_bytes, run_timeout, jobs)
    if sandboxed is None:
        sandboxed = sandbox.available()
    elif sandboxed and not sandbox.available():
        raise GradingError(f"no sandbox: {sandbox.unavailable_reason()}")
    ref = load_reference(against)
    loaded = []
    for s in submissions:
        nb = read_notebook(s, "submission")
        check_belongs(nb, ref, s)
        loaded.append((str(s), nb))

    def one(item):
        result = _grade_one(
            item[0], item[1], ref, timeout_per_cell, memory_limit_bytes, run_timeout, tmp_root, sandboxed
        )
        if progress is not None:
            progress(result)
        return result

    if jobs <= 1 or len(loaded) <= 1:
        return [one(x) for x in loaded]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, loaded))


__all__ = ["DEFAULT_TIMEOUT_PER_CELL", "DEFAULT_MEMORY_LIMIT_BYTES", "MAX_RERUNS", "grade"]
