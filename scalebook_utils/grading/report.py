"""Grading results: one `QuestionResult` per question, one `SubmissionResult` per notebook, and their
JSON, CSV and table forms (what `scalebook grade` prints)."""

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

# --- results ---------------------------------------------------------------------------------------


@dataclass
class QuestionResult:
    qid: str
    passed: bool
    detail: str


@dataclass
class SubmissionResult:
    submission: str
    questions: list[QuestionResult] = field(default_factory=list)
    seconds: float = 0.0
    #: whether the run was inside the bubblewrap sandbox (False: bwrap cannot run here; see sandbox.py)
    sandboxed: bool = True

    @property
    def passed(self) -> int:
        return sum(q.passed for q in self.questions)

    @property
    def total(self) -> int:
        return len(self.questions)

    def to_dict(self) -> dict:
        return {
            "submission": self.submission,
            "passed": self.passed,
            "total": self.total,
            "questions": [{"qid": q.qid, "passed": q.passed, "detail": q.detail} for q in self.questions],
        }


def results_to_json(results: Iterable[SubmissionResult]) -> str:
    """A JSON list, one object per submission: submission, passed, total, questions[qid, passed, detail]."""
    return json.dumps([r.to_dict() for r in results], indent=2, ensure_ascii=False)


def results_to_csv(results: Iterable[SubmissionResult]) -> str:
    """CSV with a header and one row per (submission, question); `passed` is 1 or 0."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["submission", "qid", "passed", "detail"])
    for r in results:
        for q in r.questions:
            w.writerow([r.submission, q.qid, int(q.passed), q.detail])
    return buf.getvalue()


def summary_line(result: SubmissionResult) -> str:
    return f"{result.submission}: {result.passed}/{result.total}"


def format_results_table(results: Iterable[SubmissionResult]) -> str:
    """Per submission: a table of qid, pass/FAIL, detail, then the line `alice.ipynb: 21/24`."""
    blocks = []
    for r in results:
        width = max([len("qid")] + [len(q.qid) for q in r.questions])
        lines = [r.submission, f"  {'qid':<{width}}  {'result':<6}  detail"]
        for q in r.questions:
            lines.append(f"  {q.qid:<{width}}  {'pass' if q.passed else 'FAIL':<6}  {q.detail}")
        lines.append(summary_line(r))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


__all__ = [
    "QuestionResult",
    "SubmissionResult",
    "results_to_json",
    "results_to_csv",
    "summary_line",
    "format_results_table",
]
