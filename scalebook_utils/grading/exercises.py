"""Exercises from solutions (DESIGN §4): the cell metadata that marks check cells, and the conversion.

`make_exercise(solution)` turns a solution notebook into its exercise: every answer between
`### BEGIN SOLUTION` and `### END SOLUTION` becomes `ch1_q2 = ...  # your answer here`, solution-only
cells (role "solution-text": worked explanations; "solution-plot"; any role starting "solution") are
dropped, and outputs are cleared except those of the check cells, which keep the solution's output
(`ch1.q2: correct`) as the reference. `exercise_differences` says how an exercise on disk differs from
the one its solution makes (tools/make_exercises.py --check).
"""

import copy
import json
import re

import nbformat

from scalebook_utils.questions import get_question

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
ANSWER_PLACEHOLDER = "{var} = ...  # your answer here"

_SOLUTION_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)" + re.escape(BEGIN_SOLUTION) + r"[^\n]*\n"
    r".*?"
    r"^[ \t]*" + re.escape(END_SOLUTION) + r"[^\n]*(?P<nl>\n?)",
    re.M | re.S,
)


class GradingError(ValueError):
    """Misuse of the grader: a missing or corrupt file, or a notebook that is not for this exercise.

    The message is one line, fit to print as is.
    """


# --- cell metadata ---------------------------------------------------------------------------------


def cell_role(cell) -> str | None:
    """The cell's `scalebook.role` ("answer", "check", "solution-text"), or None."""
    meta = cell.get("metadata", {}).get("scalebook", {})
    return meta.get("role") if isinstance(meta, dict) else None


def cell_qid(cell) -> str | None:
    """The question id in the cell's `scalebook.qid`, or None."""
    meta = cell.get("metadata", {}).get("scalebook", {})
    return meta.get("qid") if isinstance(meta, dict) else None


def check_cells(nb) -> list:
    """The check cells of a notebook (code cells with role "check" and a qid), in order."""
    return [c for c in nb.cells if c.cell_type == "code" and cell_role(c) == "check" and cell_qid(c)]


# --- exercises from solutions ----------------------------------------------------------------------


def strip_solution(source: str, variable: str) -> str:
    """`source` with each BEGIN…END SOLUTION block (markers included) replaced by the placeholder."""
    if BEGIN_SOLUTION not in source or END_SOLUTION not in source:
        raise ValueError(f"no '{BEGIN_SOLUTION}' … '{END_SOLUTION}' block")
    out, n = _SOLUTION_BLOCK.subn(lambda m: m["indent"] + ANSWER_PLACEHOLDER.format(var=variable) + m["nl"], source)
    if n == 0 or BEGIN_SOLUTION in out or END_SOLUTION in out:
        raise ValueError(f"unbalanced '{BEGIN_SOLUTION}' / '{END_SOLUTION}' markers")
    return out


def make_exercise(solution_nb):
    """The exercise notebook for `solution_nb` (an nbformat v4 NotebookNode; not modified).

    Answer cells: the solution block becomes `<variable> = ...  # your answer here`. Check cells keep
    their source and execution count; the solution's output there must be the line `QID: correct`
    (ValueError otherwise: execute the solution first), and the exercise shows `QID: not answered yet`
    instead — what the student gets on running it unanswered (the grader needs no reference output:
    it judges recorded answers, see `grade`). Cells with a role starting with "solution"
    ("solution-text": worked explanations; "solution-plot": a figure that gives the answer away) are
    dropped. Every other cell is copied with its outputs cleared. Cell ids and metadata are kept.
    """
    nb = copy.deepcopy(solution_nb)
    cells = []
    for i, cell in enumerate(nb.cells):
        role = cell_role(cell)
        if isinstance(role, str) and role.startswith("solution"):
            continue
        if role == "check" and cell.cell_type == "code":
            qid = cell_qid(cell)
            printed = printed_text(cell)
            if printed != f"{qid}: correct\n":
                shown = printed.strip().splitlines()[0][:80] if printed.strip() else "nothing"
                raise ValueError(
                    f"check cell {i} ({qid}) shows {shown!r}, not '{qid}: correct' "
                    "(execute the solution with tools/execute_notebooks.py first)"
                )
            # the student sees what running the check on an empty answer prints, never the solution's "correct"
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{qid}: not answered yet\n")]
        if role == "answer":
            qid = cell_qid(cell)
            if not qid:
                raise ValueError(f"answer cell {i} (id {cell.get('id')}) has no scalebook.qid")
            try:
                cell.source = strip_solution(cell.source, get_question(qid).variable_name)
            except ValueError as exc:
                raise ValueError(f"answer cell {i} ({qid}): {exc}") from None
        if cell.cell_type == "code" and role != "check":
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    nb.cells = cells
    return nb


def _comparable_cell(cell) -> dict:
    d = {
        "cell_type": cell.cell_type,
        "id": cell.get("id"),
        "source": cell.source,
        "metadata": _jsonable(cell.get("metadata", {})),
    }
    if cell.cell_type == "code" and cell_role(cell) == "check":
        d["outputs"] = _jsonable(cell.get("outputs", []))
        d["execution_count"] = cell.get("execution_count")
    return d


def _jsonable(x):
    return json.loads(json.dumps(x, sort_keys=True))


def exercise_differences(actual, expected) -> list[str]:
    """How notebook `actual` differs from `expected` (both exercises), as readable lines; [] if equal.

    Compares notebook metadata and, per cell, type, id, source, metadata, and for check cells the
    outputs and execution count. Outputs and execution counts of the other cells are ignored.
    """
    diffs = []
    if _jsonable(actual.metadata) != _jsonable(expected.metadata):
        diffs.append("notebook metadata differs")
    if len(actual.cells) != len(expected.cells):
        diffs.append(f"{len(actual.cells)} cells, expected {len(expected.cells)}")
    for i, (a, e) in enumerate(zip(actual.cells, expected.cells)):
        ca, ce = _comparable_cell(a), _comparable_cell(e)
        for key in ce.keys() | ca.keys():
            if ca.get(key) != ce.get(key):
                diffs.append(f"cell {i} ({cell_qid(e) or e.get('id')}): {key} differs")
    return diffs


def printed_text(cell) -> str:
    """What a code cell printed (its stream and text/plain outputs), as one string."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif "data" in o:
            parts.append(o["data"].get("text/plain", ""))
    return "".join(parts)


__all__ = [
    "BEGIN_SOLUTION",
    "END_SOLUTION",
    "ANSWER_PLACEHOLDER",
    "GradingError",
    "cell_role",
    "cell_qid",
    "check_cells",
    "strip_solution",
    "make_exercise",
    "exercise_differences",
    "printed_text",
]
