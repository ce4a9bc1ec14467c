"""The answer registry: every checkable problem of the book, by its canonical id.

Ids follow the book's numbering (see docs/conventions.md): `ch{N}.q{M}` for "Question M" of chapter
N, a letter per number asked (`ch1.q1a`), `ch{N}.e{K}` for worked examples in the text, `pq` for pop
quizzes, `iq` for in-text questions.

`expected(qid)` *computes* each answer with the package — it never returns a pasted number. The
book's printed values live in tests/test_book_numbers.py, which pins the package to the book.

One module per chapter (`ch01.py`, `ch02.py`, …) registers its questions with `registry.add()`; the
package's `__init__` imports them all, in chapter order, after this module (so no chapter imports a
partly run package).

Kinds:
- "number":  a float in SI base units (seconds, bytes, FLOPs, FLOPs/s; tokens and counts as plain numbers)
- "formula": a callable over the named variables, compared at sample points
- "choice":  one of `options`
- "code":    a function, run on `test_inputs` and compared with the reference
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scalebook_utils.core.errors import UnknownNameError, WrongTypeError
from scalebook_utils.core.units import require_int

#: The book's chapters are 1–12 (11, the conclusion, has no questions).
BOOK_CHAPTERS = 12


@dataclass(frozen=True)
class Compiled:
    """What the compiled program of a `code` answer must (not) contain (checked by check.judge on its HLO).

    Each field is either a constant or a function of the test input's arguments:
    - require: collective kinds that must appear ("all-reduce"; "all-to-all|all-gather" = either);
    - forbid: kinds that must not appear ("any": no collective at all);
    - partitions: the device count the program must be split over (HLO num_partitions);
    - no_array_of: a shape no array of the program may have (e.g. [S, D, F] in ch10.q2a);
    - no_gather_of: a shape no all-gather may produce (a full weight matrix);
    - min_dots: the matmul must be split into at least this many dot products (tiles of a collective matmul);
    - bidirectional: collective-permutes must run both ways round the ring;
    - out_spec: the result's PartitionSpec, trailing Nones dropped (("X", "Y") for Out[B_X, D_Y]).
    `why` says in a few words what the technique is, for the hint.
    """

    why: str
    require: Any = ()
    forbid: Any = ()
    partitions: Any = None
    no_array_of: Any = None
    no_gather_of: Any = None
    min_dots: Any = None
    bidirectional: bool = False
    out_spec: Any = None

    def value(self, name: str, args: tuple):
        v = getattr(self, name)
        return v(*args) if callable(v) else v


@dataclass(frozen=True)
class Question:
    """One checkable answer. `compute()` returns the expected value (or callable, or option)."""

    qid: str
    kind: str
    asks: str
    compute: Callable[[], Any]
    unit: str = ""
    variables: tuple[str, ...] = ()
    domains: dict[str, tuple[float, float]] = field(default_factory=dict)
    accept: tuple[float, float] | None = None
    rtol: float = 0.03
    #: formulas: relative tolerance at each test point (exact structure by default; a formula with a rounded
    #: model constant in it, like ch7.q5e's 2·31.2e9·T, sets a looser one)
    formula_rtol: float = 1e-6
    options: tuple[str, ...] = ()
    test_inputs: tuple = ()
    note: str = ""
    #: the slips a wrong answer is checked for (names in `SLIPS`); `add()` fills them from the unit and the
    #: question's wording (`default_slips`) unless the question declares its own, e.g. `slips=("prefix", "ring:4")`
    slips: tuple[str, ...] = ()
    #: code questions: what the compiled program must show (None: the value alone is checked)
    compiled: Compiled | None = None

    @property
    def chapter(self) -> int:
        return int(self.qid.split(".")[0][2:])

    @property
    def variable_name(self) -> str:
        """The notebook variable that holds the answer: dots become underscores (ch1.q1a → ch1_q1a)."""
        return self.qid.replace(".", "_")


QUESTIONS: dict[str, Question] = {}

#: The slips a hint can name (check.py words each one). "ring:N" (a collective over N devices: a missing or
#: extra (N−1)/N) is always declared with its N by the question itself, never guessed.
SLIPS = ("prefix", "time-unit", "bits", "bf16", "fp32", "fma", "bidirectional", "gib", "percent")
#: Units whose quantity involves bytes, FLOPs, links or time (see `default_slips`).
_SLIPS_BY_UNIT: dict[str, tuple[str, ...]] = {
    "s": ("prefix", "time-unit", "fma", "bf16"),
    "bytes": ("prefix", "bits", "bf16", "fp32", "gib"),
    "B/s": ("prefix", "bits", "gib"),
    "FLOPs": ("prefix", "fma"),
    "OPs": ("prefix", "fma"),
    "FLOPs/s": ("prefix", "fma"),
    "FLOPs/byte": ("fma", "bf16", "fp32"),
    "OPs/byte": ("fma", "bf16", "fp32"),
    "Hz": ("prefix",),
    "tokens": ("prefix", "bf16"),  # critical batches and token counts: k vs M, bytes per weight
    "count": ("prefix",),
    "params": ("prefix",),
    "sequences": ("prefix",),
    "queries/s": ("prefix",),
    "tokens/s": ("prefix",),
}
_LINK_WORDS = re.compile(
    r"\b(link|ICI|DCN|PCIe|NVLink|InfiniBand|bidirectional|unidirectional|ring|hop|"
    r"AllGather|AllReduce|ReduceScatter|AllToAll|ppermute|collective)",
    re.I,
)
_FRACTION_WORDS = re.compile(r"\b(fraction|share|MFU|HFU|utili[sz]ation|efficiency|percent)", re.I)


def default_slips(kind: str, unit: str, asks: str) -> tuple[str, ...]:
    """The slips plausible for a question, from its unit and wording (a question may declare others).

    - a unit prefix (×1000) for any quantity with a scale; days/hours for seconds;
    - bits vs bytes, bf16 = 2 bytes, fp32 = 4 bytes, GB vs GiB where bytes are counted;
    - 2 FLOPs per multiply-add where FLOPs (or their time) are counted;
    - one-way vs bidirectional links only where the question is about links or collectives;
    - ×100 (a percentage for a fraction) where a fraction is asked.
    """
    if kind not in ("number", "formula"):
        return ()
    slips = list(_SLIPS_BY_UNIT.get(unit, ()))
    if unit in ("s", "B/s") and _LINK_WORDS.search(asks):
        slips.append("bidirectional")
    if unit in ("", "ratio") and _FRACTION_WORDS.search(asks):
        slips.append("percent")
    return tuple(slips)


_DIMS = {"B": (1.0, 4096.0), "D": (128.0, 16384.0), "F": (128.0, 65536.0), "N": (1.0, 1e6)}


def add(qid: str, kind: str, asks: str, compute: Callable[[], Any], **kw) -> None:
    if qid in QUESTIONS:
        raise ValueError(f"duplicate question id {qid}")
    slips, ring = kw.pop("slips", None), kw.pop("ring", None)
    declared = tuple(slips) if slips is not None else default_slips(kind, kw.get("unit", ""), asks)
    if ring is not None:  # a collective over `ring` devices: (N−1)/N is a plausible slip, with this N
        declared += (f"ring:{ring}",)
    for name in declared:
        n = name.split(":", 1)[1] if name.startswith("ring:") else None
        if name not in SLIPS and not (n and n.isdigit() and int(n) >= 2):
            raise ValueError(f"{qid}: unknown slip {name!r}; use one of {', '.join(SLIPS)} or 'ring:N' (N ≥ 2)")
    kw["slips"] = declared
    if (
        kind == "formula" and "domains" not in kw
    ):  # (setdefault would build the default eagerly, failing on other names)
        kw["domains"] = {v: _DIMS[v] for v in kw["variables"]}
    QUESTIONS[qid] = Question(qid=qid, kind=kind, asks=asks, compute=compute, **kw)


def get_question(qid: str) -> Question:
    """The `Question` for `qid`; raises UnknownNameError naming the id (and the chapter's ids), WrongTypeError
    when `qid` is not a string."""
    if not isinstance(qid, str):
        raise WrongTypeError(f"a question id is a string such as 'ch1.q2', got {qid!r}")
    if qid not in QUESTIONS:
        chapter = str(qid).split(".")[0]
        same = [q for q in QUESTIONS if q.startswith(chapter + ".")]
        hint = (
            f"; ids in {chapter}: {', '.join(same)}"
            if same
            else f"; chapters with questions: {', '.join(sorted({q.split('.')[0] for q in QUESTIONS}))}"
        )
        raise UnknownNameError(f"unknown question id {qid!r}{hint}")
    return QUESTIONS[qid]


def expected(qid: str) -> Any:
    """The expected answer of `qid`, computed with the package (float in SI units, callable, or option)."""
    return get_question(qid).compute()


def question_ids(chapter: int | None = None) -> list[str]:
    """All ids, or one chapter's, in registry (book) order.

    `chapter` is None or a book chapter, an integer 1–12 (numpy integers too); a chapter without questions
    (11, the conclusion) gives []. Anything else raises an error naming `chapter`."""
    if chapter is not None:
        chapter = require_int("chapter", chapter, 1, BOOK_CHAPTERS)
    return [q for q, Q in QUESTIONS.items() if chapter is None or Q.chapter == chapter]


__all__ = [
    "BOOK_CHAPTERS",
    "Compiled",
    "Question",
    "QUESTIONS",
    "SLIPS",
    "default_slips",
    "add",
    "get_question",
    "expected",
    "question_ids",
]
