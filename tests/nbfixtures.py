"""Small solution / exercise / submission notebooks for the grader tests (docs/conventions.md).

The fixture solution has three chapter-1 questions of three kinds — ch1.q2 (number), ch1.q1c
(formula), ch1.q3c (choice) — each with a question cell, an answer cell, a check cell and a worked
explanation (role "solution-text"). The check cells' reference outputs are computed in-process with
`check()` (no kernel needed), exactly as executing the solution would print them.
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from scalebook_utils import check
from scalebook_utils.grading import cell_qid, cell_role, make_exercise

ROOT = Path(__file__).resolve().parent.parent

#: qid → the solution's answer line (a correct answer).
ANSWERS = {
    "ch1.q2": "ch1_q2 = 120   # v5e: 1.97e14 FLOPs/s over 8.2e11 B/s, weights 1 byte each",
    "ch1.q1c": "ch1_q1c = lambda B, D, F: 2 * B * D * F",
    "ch1.q3c": 'ch1_q3c = "almost doubles it"',
}
#: qid → a wrong answer, and the line check() prints for it.
WRONG = {
    "ch1.q2": "ch1_q2 = 240",
    "ch1.q1c": "ch1_q1c = lambda B, D, F: B * D * F",
    "ch1.q3c": 'ch1_q3c = "decreases it"',
}
QIDS = list(ANSWERS)


def _check_source(qid: str) -> str:
    return f'# NBVAL_CHECK_OUTPUT\nfrom scalebook_utils import check\ncheck("{qid}", {qid.replace(".", "_")})'


def _printed(answer_source: str, qid: str) -> str:
    ns: dict = {}
    exec(answer_source, ns)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check(qid, ns[qid.replace(".", "_")])
    return buf.getvalue()


def solution_notebook():
    """A small executed-looking solution notebook with three questions."""
    cells = [
        new_markdown_cell("# Chapter 1 — fixture exercises\nAnswer in SI units.", id="title"),
        new_code_cell("import math\nfrom scalebook_utils import check", id="setup", execution_count=1),
    ]
    count = 2
    for qid, answer in ANSWERS.items():
        short = qid.split(".")[1]
        cells.append(new_markdown_cell(f"**{qid}.** A question.", id=f"{short}-question"))
        cells.append(
            new_code_cell(
                f"### BEGIN SOLUTION\n{answer}\n### END SOLUTION",
                id=f"{short}-answer",
                execution_count=count,
                metadata={"scalebook": {"qid": qid, "role": "answer"}},
            )
        )
        check_cell = new_code_cell(
            _check_source(qid),
            id=f"{short}-check",
            execution_count=count + 1,
            metadata={"scalebook": {"qid": qid, "role": "check"}},
        )
        check_cell.outputs = [new_output("stream", name="stdout", text=_printed(answer, qid))]
        cells.append(check_cell)
        cells.append(
            new_markdown_cell(
                f"Worked answer for {qid}.",
                id=f"{short}-explained",
                metadata={"scalebook": {"qid": qid, "role": "solution-text"}},
            )
        )
        count += 2
    nb = new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.validate(nb)
    return nb


def exercise_notebook():
    return make_exercise(solution_notebook())


def with_answers(nb, answers: dict[str, str]):
    """A copy of `nb` whose answer cells for the given qids have the given source."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell_role(cell) == "answer" and cell_qid(cell) in answers:
            cell.source = answers[cell_qid(cell)]
    return nb


def check_cell(nb, qid: str):
    return next(c for c in nb.cells if cell_role(c) == "check" and cell_qid(c) == qid)


def write(nb, path) -> Path:
    path = Path(path)
    nbformat.write(nb, str(path))
    return path
