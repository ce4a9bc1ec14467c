"""check(qid, answer): one deterministic line saying whether an answer is right (DESIGN §4).

It prints rather than raises, so "Run All" goes on past a wrong answer:
    ch1.q2: correct
    ch1.q2: incorrect — off by a factor of 2: did you count int8 weights as 2 bytes?
    ch1.q2: not answered yet

Numbers may be given as floats in SI units or as strings with units ("194 us", "1.3 GB"). Formula
answers are callables compared with the reference at fixed pseudo-random points. Choice answers are
matched case-insensitively. Hints recognise common slips: a factor of 2 (one-way vs bidirectional
links, FLOPs per multiply-add), 8 (bits vs bytes), 1.074 (GB vs GiB), powers of 1000 (unit
prefixes) and a missing (N−1)/N.
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
import zlib

import numpy as np

from .questions import Question, get_question
from .units import parse_quantity

_UNIT_BASE = {"s": "s", "bytes": "B", "B": "B", "B/s": "B/s", "bytes/s": "B/s", "Hz": "Hz", "FLOPs": "FLOP", "OPs": "FLOP", "FLOPs/s": "FLOP/s",
              "FLOPs/byte": "FLOP/B", "OPs/byte": "FLOP/B", "tokens": "", "count": "", "params": "", "": ""}
_FORMULA_POINTS = 8
_FORMULA_RTOL = 1e-6


def check(qid: str, answer) -> None:
    """Print `qid: correct`, `qid: incorrect — hint`, or `qid: not answered yet`.

    Raises UnknownNameError only for an unknown `qid` (a typo in the notebook, not a wrong answer).
    """
    # one write call, so the notebook stores the line as one stream output
    sys.stdout.write(f"{qid}: {verdict(qid, answer)[1]}\n")


def verdict(qid: str, answer) -> tuple[bool, str]:
    """(is_correct, message) for `answer` to `qid`; the message is what `check` prints after the id."""
    q = get_question(qid)
    if answer is Ellipsis or answer is None:
        return False, "not answered yet"
    try:
        if q.kind == "number":
            return _check_number(q, answer)
        if q.kind == "formula":
            return _check_formula(q, answer)
        if q.kind == "choice":
            return _check_choice(q, answer)
        if q.kind == "code":
            return _check_code(q, answer)
    except Exception as exc:  # a student's input must never crash the notebook
        return False, f"incorrect — could not check this answer ({type(exc).__name__}: {exc})"
    raise ValueError(f"question {qid} has unknown kind {q.kind!r}")


# --- numbers --------------------------------------------------------------------------------------


def _as_number(q: Question, answer) -> tuple[float | None, str | None]:
    if isinstance(answer, bool):
        return None, "incorrect — expected a number, got a bool"
    if isinstance(answer, str):
        try:
            value, base = parse_quantity(answer)
        except ValueError as exc:
            return None, f"incorrect — {exc}"
        want = _UNIT_BASE.get(q.unit, "")
        if base and base != want:
            return None, f"incorrect — this asks for {q.unit or 'a plain number'}, but the answer is in {base}"
        return value, None
    if isinstance(answer, numbers.Real) or (isinstance(answer, np.ndarray) and answer.size == 1):
        value = float(answer)
        if not math.isfinite(value):
            return None, f"incorrect — the answer is {value}, not a finite number"
        return value, None
    return None, f"incorrect — expected a number (e.g. 240 or '194 us'), got {type(answer).__name__}"


def _close(value: float, want: float, q: Question) -> bool:
    if q.accept is not None:
        lo, hi = q.accept
        return lo <= value <= hi or math.isclose(value, want, rel_tol=1e-9)
    return math.isclose(value, want, rel_tol=q.rtol)


def _slip_hint(ratio: float) -> str | None:
    """Name a common slip when answer/expected is a telltale factor.

    Whole factors (2, 4, 8, 1000, …) match within 3%; the small ones (GB vs GiB = 1.074, (N−1)/N)
    within 0.5%, so that they do not shadow each other.
    """
    def near(x, tol=0.03):
        return x > 0 and abs(ratio / x - 1) < tol

    for k, name in ((1e3, "1000"), (1e6, "a million"), (1e9, "1e9"), (1e12, "1e12")):
        if near(k) or near(1 / k):
            return (f"off by a factor of {name}: check the unit prefix (s vs ms vs us, B vs KB vs GB); "
                    "answers are in SI base units unless you pass a string such as '1.1 ms'")
    if near(8) or near(1 / 8):
        return "off by a factor of 8: bits vs bytes?"
    if near(2) or near(0.5):
        return ("off by a factor of 2: one-way vs bidirectional link bandwidth, 2 FLOPs per multiply-add, "
                "or 2 bytes per bf16 element?")
    if near(4) or near(0.25):
        return "off by a factor of 4: bytes per element (fp32 = 4, int8 = 1) or a second factor of 2?"
    for g in (2**30 / 1e9, (2**30 / 1e9) ** 2, 2**40 / 1e12):
        if near(g, 0.005) or near(1 / g, 0.005):
            return "off by ~7%: GB (1e9 bytes) vs GiB (2^30 bytes)?"
    for n in range(3, 65):
        if near((n - 1) / n, 0.002) or near(n / (n - 1), 0.002):
            return f"close: is a factor (N−1)/N missing or extra (N = {n})?"
    return None


def _check_number(q: Question, answer) -> tuple[bool, str]:
    value, problem = _as_number(q, answer)
    if problem:
        return False, problem
    want = float(q.compute())
    if _close(value, want, q):
        return True, "correct"
    ratio = value / want if want else float("inf")
    hint = _slip_hint(ratio) if value > 0 else "the answer should be positive"
    if hint is None:
        hint = "too high" if value > want else "too low"
        hint += f" (not within {q.rtol:.0%} of the expected value)" if q.accept is None else \
            " (outside the accepted range)"
    return False, f"incorrect — {hint}"


# --- formulas -------------------------------------------------------------------------------------


def _points(q: Question) -> list[dict[str, float]]:
    """Fixed sample points for `q` (seeded by the id, so output is deterministic)."""
    rng = np.random.default_rng(zlib.crc32(q.qid.encode()))
    pts = []
    for _ in range(_FORMULA_POINTS):
        # log-uniform integers: dims in the book are sizes, and products span many decades
        pts.append({v: float(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
                    for v, (lo, hi) in q.domains.items()})
    return pts


def _check_formula(q: Question, answer) -> tuple[bool, str]:
    if not callable(answer):
        return False, (f"incorrect — this answer is a formula: write a function of ({', '.join(q.variables)}), "
                       f"e.g. lambda {', '.join(q.variables)}: ...")
    try:
        params = inspect.signature(answer).parameters
    except (TypeError, ValueError):
        params = None
    if params is not None:
        names = [p for p, v in params.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
        missing = [v for v in q.variables if v not in names]
        has_var_kw = any(v.kind == v.VAR_KEYWORD for v in params.values())
        if missing and not has_var_kw:
            return False, (f"incorrect — the function must take the arguments ({', '.join(q.variables)}); "
                           f"missing {', '.join(missing)}")
    ref = q.compute()
    ratios = []
    for pt in _points(q):
        want = float(ref(**pt))
        kwargs = {k: v for k, v in pt.items() if params is None or k in params or has_var_kw}
        try:
            got = float(answer(**kwargs))
        except Exception as exc:
            return False, f"incorrect — your function raised {type(exc).__name__}: {exc}"
        if not math.isclose(got, want, rel_tol=max(_FORMULA_RTOL, q.formula_rtol)):
            ratios.append(got / want if want else float("inf"))
    if not ratios:
        return True, "correct"
    if max(ratios) - min(ratios) <= 1e-6 * abs(max(ratios)):
        hint = _slip_hint(ratios[0])
        if hint:
            return False, f"incorrect — {hint}"
        return False, "incorrect — off by a constant factor everywhere"
    return False, f"incorrect — differs from the expected formula at {len(ratios)} of {_FORMULA_POINTS} test points"


# --- choices and code -----------------------------------------------------------------------------


def _check_choice(q: Question, answer) -> tuple[bool, str]:
    if not isinstance(answer, str):
        return False, f"incorrect — answer with one of: {'; '.join(q.options)}"
    a = " ".join(answer.lower().split())
    if a not in [o.lower() for o in q.options]:
        return False, f"incorrect — answer with one of: {'; '.join(q.options)}"
    return (True, "correct") if a == q.compute().lower() else (False, "incorrect — not that option")


def _check_code(q: Question, answer) -> tuple[bool, str]:
    if not callable(answer):
        return False, "incorrect — this answer is a function; define it and pass the function itself"
    ref = q.compute()
    for i, args in enumerate(q.test_inputs):
        try:
            got = answer(*args)
        except Exception as exc:
            return False, f"incorrect — your function raised {type(exc).__name__} on test input {i + 1}: {exc}"
        want = ref(*args)
        if np.shape(got) != np.shape(want) or not np.allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6):
            return False, f"incorrect — wrong result on test input {i + 1} of {len(q.test_inputs)}"
    return True, "correct"
