"""Grading submitted exercises with nbval (DESIGN §4); the exercises themselves are made in `exercises`,
the results' forms are in `report`, one nbval run and the words for its cell results are in `nbval_run`.

`grade(submissions, against=exercise)` grades each submission in a fresh kernel:

1. it checks the submission is a notebook for that exercise (it holds at least one of its question ids);
2. it writes a copy (`graded_copy`) in which every check cell of the exercise — found by the question id in
   its metadata, else by its cell id, else as the unlabelled code cell that calls `check("<qid>", ...)`,
   else appended at the end — is replaced by a cell that *records* the answer (`answers.record`: the value
   as given, or a function's outputs at the checker's test points); the student's other outputs are cleared;
3. it runs `pytest --nbval-lax` on the copy (`nbval_run.run_nbval`: per-cell timeout, a timeout for the
   whole run, a memory limit, `--noconftest`, its configuration in a read-only folder) inside a bubblewrap
   sandbox (`sandbox.py`: read-only system and package with the answer registry hidden, no network, its own
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

SECURITY. With bubblewrap (Debian's `bubblewrap`; `.ci/run` installs it) every attack of the
reliability report is closed (tests/test_grader_attacks.py has one test per family). Where bwrap cannot
run (no user namespaces), `grade(sandboxed=None)` falls back to the limits of `nbval_run` (time, memory)
and the CLI says so in one line: a submission can then read and write your files, and read the answer
key. What no grader can stop: a student computing a correct answer with the course's own package functions.

This module imports neither jax, matplotlib nor ipywidgets.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scalebook_utils.grading import sandbox
from scalebook_utils.grading.check import judge, spec_for
from scalebook_utils.grading.exercises import GradingError, cell_qid
from scalebook_utils.grading.graded_copy import (
    Reference,
    build_graded_copy,
    check_belongs,
    load_reference,
    read_notebook,
)
from scalebook_utils.grading.nbval_run import (
    NBVAL_OUTPUT_TIMEOUT_S,
    CellItem,
    is_timeout,
    item_detail,
    last_error_line,
    run_nbval,
    timeout_text,
)
from scalebook_utils.grading.report import QuestionResult, SubmissionResult

DEFAULT_TIMEOUT_PER_CELL = 60.0
DEFAULT_MEMORY_LIMIT_BYTES = 4 * 2**30
#: At most this many extra runs of one submission after cells timed out or killed the kernel.
MAX_RERUNS = 4


# --- grading ---------------------------------------------------------------------------------------


def _neutralized_source(detail: str) -> str:
    """The source that replaces a timed-out cell when the copy runs again: it raises at once, saying why."""
    return (
        "# scalebook grade: this cell was not run again\n"
        f"raise RuntimeError({('scalebook grade: this cell is skipped: ' + detail)!r})\n"
    )


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
        run_timeout = 120 + len(code_cells) * (timeout_per_cell + NBVAL_OUTPUT_TIMEOUT_S + 5)
    forced: dict[int, CellItem] = {}  # code-cell index → result fixed by an earlier run (a timeout)
    final: dict[int, CellItem] = {}
    found: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="scalebook-grade-", dir=tmp_root) as tmp:
        for attempt in range(MAX_RERUNS + 1):
            # a fresh folder for every run: a rerun never sees what an earlier run wrote (e.g. a conftest.py)
            run = run_nbval(
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
                    final.setdefault(i, CellItem("missing", f"not graded: the whole run went over {run_timeout:g} s"))
                break
            if not run.items:
                reason = last_error_line(run.log) if run.log.strip() else "no report"
                final = {
                    i: CellItem("missing", f"grading error: nbval did not run ({reason})")
                    for i in range(len(code_cells))
                }
                break
            new_timeouts = sorted(i for i, it in run.items.items() if i not in forced and is_timeout(it))
            if not new_timeouts:
                break
            masked = any(
                it.status == "xfailed" or "Kernel dead" in it.message
                for i, it in run.items.items()
                if i > new_timeouts[0]
            )
            for i in new_timeouts:
                forced[i] = CellItem("timeout", timeout_text(run.items[i].message, timeout_per_cell))
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
            detail = "answer cell raised " + last_error_line(raised.message)
        elif qid not in found:
            item = final.get(graded.check_index[qid], CellItem("missing", "not run"))
            detail = (
                item_detail(item, timeout_per_cell) if item.status != "passed" else f"{qid}: no answer was recorded"
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
