"""`scalebook grade` / grading.grade: per-question results from nbval, robust to what students do.

Grading starts a kernel per submission, so the submissions are graded together in a few `grade`
calls (module fixtures), and the tests look at the results.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import nbfixtures as F
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from scalebook_utils import cli, grading
from scalebook_utils.grading import (
    QuestionResult,
    SubmissionResult,
    build_graded_copy,
    cell_qid,
    cell_role,
    load_reference,
)
from scalebook_utils.questions import question_ids

ROOT = F.ROOT
TIMEOUT = 10  # per cell, for the fixture notebooks (every cell there takes well under a second)


def _tampered(ex):
    """q2 unanswered but its check cell prints 'correct'; q1c wrong and its check cell relabelled and
    edited; q3c right and its check cell deleted."""
    nb = F.with_answers(ex, {"ch1.q1c": F.WRONG["ch1.q1c"], "ch1.q3c": F.ANSWERS["ch1.q3c"]})
    c = F.check_cell(nb, "ch1.q2")
    c.source = '# NBVAL_CHECK_OUTPUT\nprint("ch1.q2: correct")'
    c.outputs = [new_output("stream", name="stdout", text="ch1.q2: correct\n")]
    c = F.check_cell(nb, "ch1.q1c")
    c.metadata = {}
    c.source = 'print("ch1.q1c: correct")'
    nb.cells = [x for x in nb.cells if not (cell_role(x) == "check" and cell_qid(x) == "ch1.q3c")]
    return nb


def _moved(ex):
    """All right, but with cells added and the q3c pair moved to the top."""
    nb = F.with_answers(ex, F.ANSWERS)
    q3c = [c for c in nb.cells if cell_qid(c) == "ch1.q3c" and cell_role(c) in ("answer", "check")]
    rest = [c for c in nb.cells if c not in q3c]
    nb.cells = (
        rest[:2]
        + [
            new_markdown_cell("my notes"),
            new_code_cell(
                "import subprocess\n"  # left running in the background, in its own session (escapes the kernel's killpg)
                "scratch = subprocess.Popen(['sleep', '600'], start_new_session=True)"
            ),
        ]
        + q3c
        + rest[2:]
        + [new_code_cell("print('the end')")]
    )
    return nb


SUBMISSIONS = {
    "untouched": lambda ex: ex,
    "solution": lambda ex: F.solution_notebook(),
    "wrong": lambda ex: F.with_answers(ex, {**F.ANSWERS, "ch1.q2": F.WRONG["ch1.q2"]}),
    "tampered": _tampered,
    "moved": _moved,
    # q2 loops; q3c asks for 8 GiB (np.empty touches none of it), over the 4 GiB memory limit
    "loop": lambda ex: F.with_answers(
        ex,
        {
            **F.ANSWERS,
            "ch1.q2": "while True:\n    pass",
            "ch1.q3c": ("import numpy as np\nbig = np.empty(2**30)\n" + F.ANSWERS["ch1.q3c"]),
        },
    ),
    # SIGINT ignored: nbval cannot interrupt the cell and stops the kernel
    "hardloop": lambda ex: F.with_answers(
        ex,
        {
            **F.ANSWERS,
            "ch1.q1c": ("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"),
        },
    ),
}


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("grade")
    ex = F.exercise_notebook()
    F.write(ex, d / "exercise.ipynb")
    for name, make in SUBMISSIONS.items():
        F.write(make(copy.deepcopy(ex)), d / f"{name}.ipynb")
    return d


@pytest.fixture(scope="module")
def graded(fixture_dir, tmp_path_factory):
    """name → SubmissionResult, plus the submissions' bytes and mtimes before grading."""
    paths = [fixture_dir / f"{n}.ipynb" for n in SUBMISSIONS]
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in paths}
    listing = sorted(os.listdir(fixture_dir))
    work = tmp_path_factory.mktemp("work")
    results = grading.grade(paths, fixture_dir / "exercise.ipynb", timeout_per_cell=TIMEOUT, jobs=2, tmp_root=str(work))
    return {Path(r.submission).stem: r for r in results}, before, listing, work


def _by_qid(result: SubmissionResult) -> dict[str, QuestionResult]:
    return {q.qid: q for q in result.questions}


# --- the graded copy (no kernel) -------------------------------------------------------------------


def test_graded_copy_puts_the_reference_check_cells_in(fixture_dir):
    ref = load_reference(fixture_dir / "exercise.ipynb")
    copy_ = build_graded_copy(_tampered(F.exercise_notebook()), ref)
    code = [c for c in copy_.nb.cells if c.cell_type == "code"]
    for qid in F.QIDS:
        cell = code[copy_.check_index[qid]]
        # the check cell becomes the cell that records the answer (judged outside the kernel), with no output
        assert cell.source == grading.probe_source(qid) and f"record({qid!r}" in cell.source
        assert cell.outputs == [] and "tags" not in cell.metadata
    assert len({c.id for c in copy_.nb.cells}) == len(copy_.nb.cells)
    assert copy_.check_index["ch1.q3c"] == len(code) - 1  # deleted → appended at the end
    assert not any("print(\"ch1.q2: correct\")" in c.source for c in code)
    nbformat.validate(copy_.nb)


def test_graded_copy_clears_the_students_other_outputs():
    ex = F.exercise_notebook()
    nb = F.with_answers(ex, F.ANSWERS)
    nb.cells[1].outputs = [new_output("stream", name="stdout", text="stale\n")]
    nb.cells[1].execution_count = None  # nbval would fail "unrun cell has outputs"
    copy_ = build_graded_copy(nb, grading.Reference("x", ex, grading.check_cells(ex)))
    assert copy_.nb.cells[1].outputs == []


# --- grading the fixture submissions ---------------------------------------------------------------


@pytest.mark.slow
def test_untouched_exercise_scores_zero(graded):
    r = graded[0]["untouched"]
    assert (r.passed, r.total) == (0, 3)
    assert [q.qid for q in r.questions] == F.QIDS
    assert all(q.detail == f"{q.qid}: not answered yet" for q in r.questions)


@pytest.mark.slow
def test_solution_scores_full_marks(graded):
    r = graded[0]["solution"]
    assert (r.passed, r.total) == (3, 3)
    assert all(q.detail == "correct" for q in r.questions)


@pytest.mark.slow
def test_one_wrong_answer_costs_that_question(graded):
    r = graded[0]["wrong"]
    assert (r.passed, r.total) == (2, 3)
    failed = [q for q in r.questions if not q.passed]
    assert [q.qid for q in failed] == ["ch1.q2"]
    assert failed[0].detail.startswith("ch1.q2: incorrect — off by a factor of 2")


@pytest.mark.slow
def test_edited_check_cells_are_replaced_by_the_reference(graded):
    q = _by_qid(graded[0]["tampered"])
    assert not q["ch1.q2"].passed and q["ch1.q2"].detail == "ch1.q2: not answered yet"
    assert not q["ch1.q1c"].passed and q["ch1.q1c"].detail.startswith("ch1.q1c: incorrect")
    assert q["ch1.q3c"].passed  # its check cell was deleted; the reference one is appended


@pytest.mark.slow
def test_added_and_moved_cells_do_not_matter(graded):
    r = graded[0]["moved"]
    assert (r.passed, r.total) == (3, 3)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, qid, others_passed",
    [
        ("loop", "ch1.q2", ["ch1.q1c"]),  # q3c: MemoryError
        ("hardloop", "ch1.q1c", ["ch1.q2", "ch1.q3c"]),
    ],
)
def test_an_infinite_loop_times_out_and_the_rest_is_graded(graded, name, qid, others_passed):
    r = graded[0][name]
    q = _by_qid(r)
    assert not q[qid].passed
    assert q[qid].detail.startswith(f"answer cell timed out after {TIMEOUT} s")
    assert [x.qid for x in r.questions if x.passed] == others_passed, r.questions
    assert r.seconds < 12 * TIMEOUT


@pytest.mark.slow
def test_a_run_over_its_whole_time_limit_keeps_the_results_so_far(fixture_dir, tmp_path):
    nb = F.with_answers(F.exercise_notebook(), {**F.ANSWERS, "ch1.q3c": "import time\ntime.sleep(600)"})
    [r] = grading.grade(
        [F.write(nb, tmp_path / "slow.ipynb")], fixture_dir / "exercise.ipynb", timeout_per_cell=900, run_timeout=20
    )
    q = _by_qid(r)
    assert q["ch1.q2"].passed and q["ch1.q1c"].passed
    assert not q["ch1.q3c"].passed and q["ch1.q3c"].detail == "not graded: the whole run went over 20 s"
    assert r.seconds < 45


@pytest.mark.slow
def test_memory_limit(graded):
    q = _by_qid(graded[0]["loop"])
    assert not q["ch1.q3c"].passed
    assert q["ch1.q3c"].detail.startswith("answer cell raised MemoryError")
    assert q["ch1.q1c"].passed


@pytest.mark.slow
def test_submissions_are_never_written(graded, fixture_dir):
    _, before, listing, _ = graded
    for path, (data, mtime) in before.items():
        assert path.read_bytes() == data
        assert path.stat().st_mtime_ns == mtime
    assert sorted(os.listdir(fixture_dir)) == listing


@pytest.mark.slow
def test_nothing_is_left_behind(graded):
    """Temporary folders are removed; no kernel or background process of a run survives it."""
    psutil = pytest.importorskip("psutil")
    work = graded[3]
    assert os.listdir(work) == []
    left = []
    for p in psutil.process_iter():
        try:
            if p.cwd().startswith(str(work)):
                left.append(p.cmdline())
        except psutil.Error:
            continue
    assert not left


# --- output formats --------------------------------------------------------------------------------


RESULTS = [
    SubmissionResult(
        "alice.ipynb",
        [
            QuestionResult("ch1.q2", True, "correct"),
            QuestionResult("ch1.q3c", False, "ch1.q3c: incorrect — not that option"),
        ],
    ),
    SubmissionResult(
        "bob.ipynb",
        [
            QuestionResult("ch1.q2", False, "timed out after 10 s"),
            QuestionResult("ch1.q3c", False, "ch1.q3c: not answered yet"),
        ],
    ),
]


def test_table_has_a_row_per_question_and_a_summary_line():
    text = grading.format_results_table(RESULTS)
    lines = text.splitlines()
    assert "alice.ipynb: 1/2" in lines and "bob.ipynb: 0/2" in lines
    assert any(ln.split()[:2] == ["ch1.q3c", "FAIL"] for ln in lines)
    assert any(ln.split()[:2] == ["ch1.q2", "pass"] for ln in lines)


def test_json_and_csv_shapes():
    data = json.loads(grading.results_to_json(RESULTS))
    assert data[0] == {
        "submission": "alice.ipynb",
        "passed": 1,
        "total": 2,
        "questions": [
            {"qid": "ch1.q2", "passed": True, "detail": "correct"},
            {"qid": "ch1.q3c", "passed": False, "detail": "ch1.q3c: incorrect — not that option"},
        ],
    }
    rows = list(csv.reader(io.StringIO(grading.results_to_csv(RESULTS))))
    assert rows[0] == ["submission", "qid", "passed", "detail"]
    assert rows[1:] == [
        ["alice.ipynb", "ch1.q2", "1", "correct"],
        ["alice.ipynb", "ch1.q3c", "0", "ch1.q3c: incorrect — not that option"],
        ["bob.ipynb", "ch1.q2", "0", "timed out after 10 s"],
        ["bob.ipynb", "ch1.q3c", "0", "ch1.q3c: not answered yet"],
    ]


# --- the command line ------------------------------------------------------------------------------


def _cli(capsys, *argv):
    code = cli.main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_json(fixture_dir, capsys):
    code, out, err = _cli(
        capsys,
        "grade",
        fixture_dir / "wrong.ipynb",
        "--against",
        fixture_dir / "exercise.ipynb",
        "--json",
        "--timeout",
        60,
    )
    assert code == 0, err
    data = json.loads(out)
    assert [d["submission"] for d in data] == [str(fixture_dir / "wrong.ipynb")]
    assert [(d["passed"], d["total"]) for d in data] == [(2, 3)]
    for d in data:
        assert set(d) == {"submission", "passed", "total", "questions"}
        assert [q["qid"] for q in d["questions"]] == F.QIDS
        assert all(set(q) == {"qid", "passed", "detail"} and isinstance(q["passed"], bool) for q in d["questions"])


@pytest.mark.slow
def test_cli_csv(fixture_dir, capsys):
    code, out, err = _cli(
        capsys,
        "grade",
        fixture_dir / "wrong.ipynb",
        "--against",
        fixture_dir / "exercise.ipynb",
        "--csv",
        "--timeout",
        60,
        "--memory-limit",
        2,
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["qid"], r["passed"]) for r in rows] == [("ch1.q2", "0"), ("ch1.q1c", "1"), ("ch1.q3c", "1")]
    assert {r["submission"] for r in rows} == {str(fixture_dir / "wrong.ipynb")}


def test_cli_default_output_is_the_table(monkeypatch, capsys, fixture_dir):
    from scalebook_utils.grading import runner  # patch the defining module: the CLI calls runner.grade

    monkeypatch.setattr(runner, "grade", lambda *a, **k: RESULTS)
    code, out, err = _cli(capsys, "grade", "alice.ipynb", "bob.ipynb", "--against", fixture_dir / "exercise.ipynb")
    assert code == 0
    assert out.rstrip("\n") == grading.format_results_table(RESULTS)


def _error(capsys, *argv):
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_cli_corrupt_notebook(tmp_path, fixture_dir, capsys):
    bad = tmp_path / "alice.ipynb"
    bad.write_text('{"cells": [ {"cell_type": "code", ')
    msg = _error(capsys, "grade", bad, "--against", fixture_dir / "exercise.ipynb")
    assert "alice.ipynb" in msg and "not a readable Jupyter notebook" in msg
    bad.write_text(
        '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
        '"id": "a", "metadata": {}, "source": "x", "outputs": [], "execution_count": "seven"}]}'
    )
    assert "not a valid Jupyter notebook" in _error(capsys, "grade", bad, "--against", fixture_dir / "exercise.ipynb")
    bad.write_text('{"nbformat": 4, "nbformat_minor": 5, "cells": "nope", "metadata": {}}')
    assert "Jupyter notebook" in _error(capsys, "grade", bad, "--against", fixture_dir / "exercise.ipynb")
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert "not a readable Jupyter notebook" in _error(
        capsys, "grade", bad, "--against", fixture_dir / "exercise.ipynb"
    )


def test_cli_missing_files(tmp_path, fixture_dir, capsys):
    msg = _error(capsys, "grade", tmp_path / "nobody.ipynb", "--against", fixture_dir / "exercise.ipynb")
    assert "nobody.ipynb" in msg and "no such file" in msg
    msg = _error(capsys, "grade", fixture_dir / "solution.ipynb", "--against", tmp_path / "exercises.ipynb")
    assert "exercises.ipynb" in msg and "no such file" in msg


def test_cli_submission_for_another_exercise(tmp_path, fixture_dir, capsys):
    other = new_notebook(
        cells=[
            new_code_cell("ch1_q5 = 295", metadata={"scalebook": {"qid": "ch1.q5", "role": "answer"}}),
            new_code_cell('check("ch1.q5", ch1_q5)'),
        ]
    )
    F.write(other, tmp_path / "other.ipynb")
    msg = _error(capsys, "grade", tmp_path / "other.ipynb", "--against", fixture_dir / "exercise.ipynb")
    assert msg.endswith(")") and f"does not look like a submission for {fixture_dir / 'exercise.ipynb'}" in msg
    F.write(new_notebook(cells=[new_code_cell("print(1)")]), tmp_path / "plain.ipynb")
    assert "does not look like a submission" in _error(
        capsys, "grade", tmp_path / "plain.ipynb", "--against", fixture_dir / "exercise.ipynb"
    )


def test_cli_against_must_be_an_exercise(tmp_path, fixture_dir, capsys):
    F.write(new_notebook(cells=[new_code_cell("print(1)")]), tmp_path / "notes.ipynb")
    msg = _error(capsys, "grade", fixture_dir / "solution.ipynb", "--against", tmp_path / "notes.ipynb")
    assert "not an exercise notebook" in msg


def test_cli_help():
    exe = Path(sys.executable).with_name("scalebook")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "scalebook_utils.grading.cli"]
    r = subprocess.run(cmd + ["--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "grade" in r.stdout


def test_cli_grade_help_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["grade", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "--against" in out and "--json" in out and "--csv" in out
    assert "sandbox" in out and "judged outside" in out  # says how student code is contained
    with pytest.raises(SystemExit) as exc:
        cli.main(["grade", "x.ipynb"])
    assert exc.value.code == 2 and "--against" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--timeout", "0"),
        ("--timeout", "-1"),
        ("--memory-limit", "nan"),
        ("--memory-limit", "inf"),
        ("--memory-limit", "0"),
        ("--memory-limit", "-1"),
        ("--timeout", "abc"),
    ],
)
def test_cli_rejects_non_finite_and_non_positive_limits(flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["grade", "x.ipynb", "--against", "y.ipynb", flag, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and flag in err and "finite number > 0" in err


def test_api_rejects_bad_limits(fixture_dir):
    for kw in (
        {"timeout_per_cell": float("nan")},
        {"timeout_per_cell": 0},
        {"memory_limit_bytes": -1},
        {"memory_limit_bytes": float("inf")},
        {"jobs": 0},
    ):
        with pytest.raises(grading.GradingError, match="must be"):
            grading.grade([fixture_dir / "solution.ipynb"], fixture_dir / "exercise.ipynb", **kw)


# --- the real chapter-1 exercise -------------------------------------------------------------------


@pytest.fixture(scope="module")
def chapter1(tmp_path_factory):
    ex, sol = ROOT / "exercises" / "01_rooflines.ipynb", ROOT / "solutions" / "01_rooflines.ipynb"
    assert ex.exists() and sol.exists(), "exercises/ and solutions/01_rooflines.ipynb are needed"
    d = tmp_path_factory.mktemp("ch1")
    nb = nbformat.read(str(sol), as_version=4)
    for c in nb.cells:
        if cell_role(c) == "answer" and cell_qid(c) == "ch1.q2":
            c.source = "ch1_q2 = 240   # counted the int8 weights as 2 bytes"
    F.write(nb, d / "wrong.ipynb")
    results = grading.grade([ex, sol, d / "wrong.ipynb"], ex, timeout_per_cell=300, jobs=2)
    return {"exercise": results[0], "solution": results[1], "wrong": results[2]}


@pytest.mark.slow
def test_chapter1_exercise_scores_zero(chapter1):
    r = chapter1["exercise"]
    assert [q.qid for q in r.questions] == question_ids(chapter=1)
    assert (r.passed, r.total) == (0, len(question_ids(chapter=1)))


@pytest.mark.slow
def test_chapter1_solution_scores_full_marks(chapter1):
    r = chapter1["solution"]
    assert r.passed == r.total == len(question_ids(chapter=1)), [q for q in r.questions if not q.passed]


@pytest.mark.slow
def test_chapter1_one_wrong_answer(chapter1):
    r = chapter1["wrong"]
    assert r.passed == r.total - 1
    assert [q.qid for q in r.questions if not q.passed] == ["ch1.q2"]


@pytest.mark.slow
def test_every_chapter_solution_scores_full_marks_in_the_sandbox():
    """The honest solutions of every chapter, graded as a student's submission (in the sandbox where bubblewrap
    runs): nothing an exercise needs may depend on what the sandbox hides (the registry, the network, the repo)."""
    pairs = [(ROOT / "solutions" / p.name, p) for p in sorted((ROOT / "exercises").glob("*.ipynb"))]
    assert len(pairs) >= 11
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda sp: grading.grade([sp[0]], sp[1], timeout_per_cell=300)[0], pairs))
    bad = {
        Path(r.submission).name: [(q.qid, q.detail) for q in r.questions if not q.passed]
        for r in results
        if r.passed != r.total
    }
    assert not bad, bad
