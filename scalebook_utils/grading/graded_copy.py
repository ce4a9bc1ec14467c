"""The graded copy of a submission (DESIGN §4): read the notebooks, find each check cell of the exercise in the
submission (by the question id in its metadata, else its cell id, else the unlabelled code cell that calls
`check("<qid>", ...)`, else appended at the end) and replace it by a cell that *records* the answer
(`answers.record`); the student's other outputs are cleared. The runner executes this copy.
"""

from __future__ import annotations

import copy
import os
import re
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat

from scalebook_utils.grading.exercises import GradingError, cell_qid, cell_role, check_cells
from scalebook_utils.questions import get_question

# --- reading notebooks -----------------------------------------------------------------------------


def read_notebook(path: str | os.PathLike, what: str = "notebook"):
    """Read and validate a notebook; GradingError (one line) when missing, unreadable or invalid."""
    p = Path(path)
    if not p.exists():
        raise GradingError(f"{what} {path}: no such file")
    if not p.is_file():
        raise GradingError(f"{what} {path}: not a file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.read(str(p), as_version=4)
    except Exception as exc:  # NotJSONError, UnicodeDecodeError, OSError, KeyError for JSON without 'nbformat', ...
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise GradingError(f"{what} {path}: not a readable Jupyter notebook ({reason})") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        reason = str(exc).splitlines()[0][:120]
        raise GradingError(f"{what} {path}: not a valid Jupyter notebook ({reason})") from None
    return nb


@dataclass
class Reference:
    """An exercise notebook as the grader sees it: its check cells, in order, by question id."""

    path: str
    nb: object
    checks: list

    @property
    def qids(self) -> list[str]:
        return [cell_qid(c) for c in self.checks]


def load_reference(path: str | os.PathLike) -> Reference:
    nb = read_notebook(path, "exercise")
    checks = check_cells(nb)
    if not checks:
        raise GradingError(f"exercise {path}: not an exercise notebook (it has no check cells)")
    seen, unique = set(), []
    for c in checks:  # one reference check per question
        if cell_qid(c) not in seen:
            seen.add(cell_qid(c))
            unique.append(c)
    for c in unique:
        try:
            get_question(cell_qid(c))
        except KeyError:
            raise GradingError(f"exercise {path}: check cell for unknown question {cell_qid(c)!r}") from None
    return Reference(str(path), nb, unique)


def _calls_check(source: str, qid: str) -> bool:
    return re.search(r"check\(\s*[\"']" + re.escape(qid) + r"[\"']", source) is not None


def check_belongs(nb, ref: Reference, path) -> None:
    theirs = {cell_qid(c) for c in nb.cells if cell_qid(c)}
    theirs |= {q for q in ref.qids for c in nb.cells if c.cell_type == "code" and _calls_check(c.source, q)}
    if not theirs & set(ref.qids):
        raise GradingError(
            f"submission {path}: does not look like a submission for {ref.path} "
            f"(none of its question ids {ref.qids[0]} … {ref.qids[-1]} is in it)"
        )


# --- the graded copy -------------------------------------------------------------------------------


@dataclass
class GradedCopy:
    nb: object
    check_index: dict[str, int]  # qid → code-cell index (nbval's "Cell N")
    answer_index: dict[str, list[int]]  # qid → code-cell indices of the answer cells


def probe_source(qid: str) -> str:
    """The cell that replaces `qid`'s check cell in the graded copy: it records the answer (answers.record)."""
    var = get_question(qid).variable_name
    return (
        "# scalebook grade: records the answer; it is judged outside this kernel\n"
        "from scalebook_utils.answers import record\n"
        f"record({qid!r}, lambda: {var})\n"
    )


def build_graded_copy(submission_nb, ref: Reference) -> GradedCopy:
    """The submission with each check cell replaced by the recording cell of its question (see `grade`)."""
    nb = copy.deepcopy(submission_nb)
    cells = list(nb.cells)
    ids = {c.get("id") for c in cells}
    reference_positions = set()
    for r in ref.checks:
        qid = cell_qid(r)
        hit = next(
            (
                i
                for i, c in enumerate(cells)
                if i not in reference_positions
                and c.cell_type == "code"
                and cell_qid(c) == qid
                and cell_role(c) == "check"
            ),
            None,
        )
        if hit is None and r.get("id"):
            hit = next((i for i, c in enumerate(cells) if i not in reference_positions and c.get("id") == r.id), None)
        if hit is None:  # metadata lost (some editors drop it): the cell that calls check("<qid>", ...)
            hit = next(
                (
                    i
                    for i, c in enumerate(cells)
                    if i not in reference_positions
                    and c.cell_type == "code"
                    and not cell_role(c)
                    and _calls_check(c.source, qid)
                ),
                None,
            )
        new = copy.deepcopy(r)
        new.source = probe_source(qid)
        new.outputs = []
        new.metadata.pop("tags", None)  # no nbval-check-output: the verdict is not the cell's output
        if hit is None:
            if new.get("id") in ids or not new.get("id"):
                new["id"] = uuid.uuid4().hex[:8]
            ids.add(new["id"])
            cells.append(new)
            hit = len(cells) - 1
        else:
            if cells[hit].get("id"):
                new["id"] = cells[hit]["id"]  # keep the student's id: ids must stay unique
            cells[hit] = new
        new["execution_count"] = None
        reference_positions.add(hit)

    check_index, answer_index, n_code = {}, {}, 0
    for i, c in enumerate(cells):
        if c.cell_type != "code":
            continue
        if i in reference_positions:
            check_index[cell_qid(c)] = n_code
        else:
            c.outputs = []
            c.execution_count = None
            if cell_role(c) == "answer" and cell_qid(c):
                answer_index.setdefault(cell_qid(c), []).append(n_code)
        n_code += 1
    nb.cells = cells
    return GradedCopy(nb, check_index, answer_index)


__all__ = [
    "read_notebook",
    "Reference",
    "load_reference",
    "check_belongs",
    "GradedCopy",
    "probe_source",
    "build_graded_copy",
]
