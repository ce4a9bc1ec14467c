"""exercises/ is generated from solutions/ (tools/make_exercises.py) and runs without error.

- make_exercise on the small fixture: placeholders, reference outputs kept, solution-only cells gone;
- drift: every exercises/NN_slug.ipynb equals make_exercise(solutions/NN_slug.ipynb) — editing either
  by hand fails here until `python tools/make_exercises.py` is run again;
- the exercise notebooks execute with nbclient: no error, every check says "not answered yet".
"""

from __future__ import annotations

import copy
import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import nbfixtures as F
import nbformat
import pytest

from scalebook_utils.grading import (
    ANSWER_PLACEHOLDER,
    cell_qid,
    cell_role,
    exercise_differences,
    make_exercise,
    strip_solution,
)
from scalebook_utils.questions import question_ids

ROOT = F.ROOT
TOOL = ROOT / "tools" / "make_exercises.py"
#: Chapters whose exercise must exist now; every other solutions/NN_slug.ipynb is checked as it lands.
REQUIRED = ["01_rooflines.ipynb"]
NAMES = sorted(set(REQUIRED) | {p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")})


def _read(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbformat.read(str(path), as_version=4)


# --- make_exercise on the fixture -----------------------------------------------------------------


def test_answers_become_placeholders():
    ex = F.exercise_notebook()
    answers = [c for c in ex.cells if cell_role(c) == "answer"]
    assert [cell_qid(c) for c in answers] == F.QIDS
    for c in answers:
        var = cell_qid(c).replace(".", "_")
        assert c.source == ANSWER_PLACEHOLDER.format(var=var) == f"{var} = ...  # your answer here"
        assert "SOLUTION" not in c.source


def test_check_cells_look_unanswered_and_others_are_cleared():
    """A student opening the exercise sees what the check prints for an empty answer, never 'correct'."""
    sol, ex = F.solution_notebook(), F.exercise_notebook()
    for qid in F.QIDS:
        s, e = F.check_cell(sol, qid), F.check_cell(ex, qid)
        assert e.source == s.source and e.execution_count == s.execution_count
        assert s.outputs[0]["text"] == f"{qid}: correct\n"
        assert [o["text"] for o in e.outputs] == [f"{qid}: not answered yet\n"]
    for c in ex.cells:
        if c.cell_type == "code" and cell_role(c) != "check":
            assert c.outputs == [] and c.execution_count is None


def test_solution_only_cells_are_dropped_and_ids_kept():
    sol, ex = F.solution_notebook(), F.exercise_notebook()
    assert not any(str(cell_role(c)).startswith("solution") for c in ex.cells)
    kept = [c.id for c in sol.cells if not str(cell_role(c)).startswith("solution")]
    assert [c.id for c in ex.cells] == kept
    assert ex.metadata == sol.metadata
    nbformat.validate(ex)


def test_make_exercise_does_not_modify_its_input():
    sol = F.solution_notebook()
    before = copy.deepcopy(sol)
    make_exercise(sol)
    assert sol == before


def test_strip_solution_keeps_text_around_the_block():
    src = "# hint: bytes per element\n### BEGIN SOLUTION\nx = 1\ny = 2\n### END SOLUTION\nprint(ch1_q2)"
    assert strip_solution(src, "ch1_q2") == "# hint: bytes per element\nch1_q2 = ...  # your answer here\nprint(ch1_q2)"
    with pytest.raises(ValueError):
        strip_solution("ch1_q2 = 3", "ch1_q2")
    with pytest.raises(ValueError):
        strip_solution("### BEGIN SOLUTION\nx = 1\n", "ch1_q2")


def test_unexecuted_or_wrong_solution_is_refused():
    sol = F.solution_notebook()
    F.check_cell(sol, "ch1.q2").outputs = []
    with pytest.raises(ValueError, match="execute the solution"):
        make_exercise(sol)
    sol = F.solution_notebook()
    F.check_cell(sol, "ch1.q2").outputs[0]["text"] = "ch1.q2: incorrect — too high\n"
    with pytest.raises(ValueError, match="ch1.q2"):
        make_exercise(sol)


def test_differences_notice_edits_to_either_side():
    sol, ex = F.solution_notebook(), F.exercise_notebook()
    assert exercise_differences(ex, make_exercise(sol)) == []
    edited_ex = copy.deepcopy(ex)
    F.check_cell(edited_ex, "ch1.q2").outputs[0]["text"] = "ch1.q2: correct\n"
    assert exercise_differences(edited_ex, make_exercise(sol))
    edited_sol = copy.deepcopy(sol)
    edited_sol.cells[0].source += " (edited)"
    assert exercise_differences(ex, make_exercise(edited_sol))
    # outputs and counts of non-check cells do not matter (someone ran the exercise)
    ran = copy.deepcopy(ex)
    ran.cells[1].execution_count = 7
    assert exercise_differences(ran, make_exercise(sol)) == []


def _tool():
    spec = importlib.util.spec_from_file_location("make_exercises_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_exercises_tool_writes_and_checks(tmp_path, capsys):
    tool = _tool()
    (tmp_path / "solutions").mkdir()
    F.write(F.solution_notebook(), tmp_path / "solutions" / "01_fixture.ipynb")

    def run(*args):
        code = tool.main(["--root", str(tmp_path), *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    r = run("--check")
    assert r.returncode == 1 and "missing" in r.stderr
    r = run()
    assert r.returncode == 0, r.stderr
    assert exercise_differences(_read(tmp_path / "exercises" / "01_fixture.ipynb"), F.exercise_notebook()) == []
    assert run("--check").returncode == 0
    target = tmp_path / "exercises" / "01_fixture.ipynb"
    ex = _read(target)
    ex.cells[0].source = "# edited by hand"
    nbformat.write(ex, str(target))
    r = run("--check")
    assert r.returncode == 1 and "01_fixture.ipynb" in r.stderr and "source differs" in r.stderr
    (tmp_path / "exercises" / "99_orphan.ipynb").write_bytes(target.read_bytes())
    assert "no solutions/99_orphan.ipynb" in run("--check").stderr


def test_make_exercises_tool_runs_as_a_script(tmp_path):
    r = subprocess.run(
        [sys.executable, str(TOOL), "--root", str(tmp_path), "--check"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1 and "no solutions" in r.stderr


# --- the real exercises ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_exercise_matches_its_solution(name):
    sol, ex = ROOT / "solutions" / name, ROOT / "exercises" / name
    assert sol.exists(), f"solutions/{name} is missing"
    assert ex.exists(), f"exercises/{name} is missing: run `python tools/make_exercises.py`"
    diffs = exercise_differences(_read(ex), make_exercise(_read(sol)))
    assert not diffs, (
        f"exercises/{name} drifted from solutions/{name} (never edit exercises by hand; "
        "run `python tools/make_exercises.py`):\n" + "\n".join(diffs[:10])
    )


def test_chapter_1_exercise_asks_every_chapter_1_question():
    path = ROOT / "exercises" / "01_rooflines.ipynb"
    assert path.exists(), "exercises/01_rooflines.ipynb is missing: run `python tools/make_exercises.py`"
    ex = _read(path)
    checks = [cell_qid(c) for c in ex.cells if cell_role(c) == "check"]
    answers = [cell_qid(c) for c in ex.cells if cell_role(c) == "answer"]
    assert checks == answers == question_ids(chapter=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_exercise_runs_and_every_check_says_not_answered_yet(name):
    from nbclient import NotebookClient

    path = ROOT / "exercises" / name
    nb = _read(path)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = [
        (i, o.get("ename"), o.get("evalue"))
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "error"
    ]
    assert not errors
    for c in nb.cells:
        if cell_role(c) == "check":
            text = "".join(o.get("text", "") for o in c.outputs)
            assert text == f"{cell_qid(c)}: not answered yet\n"


# --- tools/execute_notebooks.py -------------------------------------------------------------------


@pytest.mark.slow
def test_execute_notebooks_tool(tmp_path):
    from nbformat.v4 import new_code_cell, new_notebook

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "exercises").mkdir()
    good = new_notebook(
        cells=[
            new_code_cell(
                "import os\nprint(os.environ['SCALEBOOK_EXECUTING'], os.getcwd())",
                id="env",
                metadata={"execution": {"iopub.status.busy": "2020"}},
            ),
            new_code_cell("2 + 2", id="sum"),
        ]
    )
    F.write(good, tmp_path / "notebooks" / "01_good.ipynb")
    bad = new_notebook(cells=[new_code_cell("1 / 0", id="boom")])
    bad_path = F.write(bad, tmp_path / "notebooks" / "02_bad.ipynb")
    ex_path = F.write(F.exercise_notebook(), tmp_path / "exercises" / "01_fixture.ipynb")
    before = {p: p.read_bytes() for p in (bad_path, ex_path)}

    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "execute_notebooks.py"),
            str(tmp_path / "notebooks" / "01_good.ipynb"),
            str(bad_path),
            str(ex_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()[1:]}
    assert rows[str(tmp_path / "notebooks" / "01_good.ipynb")].endswith("OK")
    assert " FAIL" in rows[str(bad_path)] and "ZeroDivisionError" in r.stderr
    assert "OK" in rows[str(ex_path)]

    nb = _read(tmp_path / "notebooks" / "01_good.ipynb")
    assert [c.id for c in nb.cells] == ["env", "sum"]
    assert nb.cells[0].outputs[0]["text"] == f"1 {tmp_path / 'notebooks'}\n"
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "4"
    assert all("execution" not in c.metadata for c in nb.cells)
    for p, data in before.items():  # a failing notebook and an exercise are not written
        assert p.read_bytes() == data


def test_no_exercise_notebook_shows_a_correct_verdict():
    """The repository's exercises: every check cell shows 'not answered yet' under its empty answer."""
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        for c in nb.cells:
            if cell_role(c) == "check":
                text = "".join(o.get("text", "") for o in c.outputs)
                assert text == f"{cell_qid(c)}: not answered yet\n", (path.name, cell_qid(c), text)
