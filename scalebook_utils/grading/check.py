"""check(qid, answer): one deterministic line saying whether an answer is right (DESIGN §4).

It prints rather than raises, so "Run All" goes on past a wrong answer:
    ch1.q2: correct
    ch1.q2: incorrect — off by a factor of 2: did you count int8 weights as 2 bytes?
    ch1.q2: not answered yet

Numbers may be given as floats in SI units, numpy scalars or one-element arrays, or strings with
units ("194 us", "1.3 GB", "44 d", "21.7%" for a fraction); a unit that contradicts the question's is
rejected with a line naming the expected unit. Formula answers are callables compared with the
reference at fixed pseudo-random points. Choice answers are matched by letter ("b"), by text (case,
spacing and ASCII spellings such as x for ×, <= for ≤ do not matter) or by a unique leading word ("TP").

Hints name only the slips a question declares (`Question.slips`, filled from its unit and wording by
`questions.default_slips`): a unit prefix, days vs seconds, bits vs bytes, bytes per bf16/fp32 element,
2 FLOPs per multiply-add, one-way vs bidirectional links (only for link and collective questions),
GB vs GiB (only where bytes are counted), a percentage for a fraction, and (N−1)/N for a ring
collective over the N devices the question declares. A miss within 10% reads "close, but not within …".
"""

from __future__ import annotations

import math
import re
import sys
import zlib
from typing import TYPE_CHECKING

import numpy as np

from scalebook_utils.core.units import parse_quantity
from scalebook_utils.grading.answers import decode_value, encode_value, probe

if TYPE_CHECKING:
    from scalebook_utils.questions import Question

_UNIT_BASE = {
    "s": "s",
    "bytes": "B",
    "B": "B",
    "B/s": "B/s",
    "bytes/s": "B/s",
    "Hz": "Hz",
    "FLOPs": "FLOP",
    "OPs": "FLOP",
    "FLOPs/s": "FLOP/s",
    "FLOPs/byte": "FLOP/B",
    "OPs/byte": "FLOP/B",
    "tokens": "",
    "count": "",
    "params": "",
    "": "",
}
_FORMULA_POINTS = 8
_FORMULA_RTOL = 1e-6


def check(qid: str, answer) -> None:
    """Print `qid: correct`, `qid: incorrect — hint`, or `qid: not answered yet`.

    Raises UnknownNameError only for an unknown `qid` (a typo in the notebook, not a wrong answer).
    Inside the grader's sandbox the registry is hidden: the line then says the answer is graded later.
    """
    try:
        line = verdict(qid, answer)[1]
    except ImportError:  # the grader's sandbox hides the answer registry; the grader judges elsewhere
        line = "graded after the run (the grader judges answers outside this kernel)"
    # one write call, so the notebook stores the line as one stream output
    sys.stdout.write(f"{qid}: {line}\n")


def _get_question(qid: str):
    from scalebook_utils.questions import get_question  # lazily: absent inside the grader's sandbox

    return get_question(qid)


def spec_for(qid: str) -> dict:
    """What the untrusted side needs to evaluate an answer to `qid` (answers.probe): never the expected value."""
    q = _get_question(qid)
    spec = {"qid": qid, "kind": q.kind}
    if q.kind == "formula":
        spec.update(variables=list(q.variables), points=_points(q))
    elif q.kind == "code":
        spec["inputs"] = [encode_value(tuple(args)) for args in q.test_inputs]
        spec["compile"] = q.compiled is not None
    return spec


def verdict(qid: str, answer) -> tuple[bool, str]:
    """(is_correct, message) for `answer` to `qid`; the message is what `check` prints after the id.

    The same two steps as the grader: probe the answer (answers.probe), then judge the record.
    """
    spec = spec_for(qid)
    try:
        rec = probe(spec, answer)
    except Exception as exc:  # a student's input must never crash the notebook
        return False, f"incorrect — could not check this answer ({type(exc).__name__}: {exc})"
    return judge(qid, rec)


def judge(qid: str, rec: dict) -> tuple[bool, str]:
    """(is_correct, message) for a record made by `answers.probe` (trusted side: uses the registry).

    A malformed record (from a tampered kernel) is a wrong answer with a plain message, never an exception.
    """
    q = _get_question(qid)
    if not isinstance(rec, dict):
        return False, "incorrect — no readable answer was recorded"
    if rec.get("answered") is False:
        return False, "not answered yet"
    try:
        if q.kind == "number":
            return _check_number(q, rec)
        if q.kind == "formula":
            return _check_formula(q, rec)
        if q.kind == "choice":
            return _check_choice(q, rec)
        if q.kind == "code":
            return _check_code(q, rec)
    except Exception as exc:  # noqa: BLE001 - a tampered record must not crash the judge
        return False, f"incorrect — could not check this answer ({type(exc).__name__}: {exc})"
    raise ValueError(f"question {qid} has unknown kind {q.kind!r}")


# --- numbers --------------------------------------------------------------------------------------


_DIMENSIONLESS = {"", "count", "params", "sequences", "ratio", "tokens"}
_UNIT_WORD = re.compile(r"^\s*[-+]?[\d.]+(?:[eE][-+]?\d+)?\s*([^\d\s].*?)?\s*$")


def _unit_name(q: Question) -> str:
    return {"s": "seconds", "B/s": "bytes/s", "": "a plain number"}.get(q.unit, q.unit)


def _as_number(q: Question, rec: dict) -> tuple[float | None, str | None]:
    if "bool" in rec:
        return None, "incorrect — expected a number, got a bool"
    if "str" in rec and isinstance(rec["str"], str):
        return _parse_text(q, rec["str"])
    if "num" in rec and isinstance(rec["num"], (int, float)) and not isinstance(rec["num"], bool):
        value = float(rec["num"])
        if not math.isfinite(value):
            return None, f"incorrect — the answer is {value}, not a finite number"
        return value, None
    got = rec.get("type", "something else")
    return None, f"incorrect — expected a number (e.g. 240 or '194 us'), got {got}"


def _parse_text(q: Question, text: str) -> tuple[float | None, str | None]:
    """A number with an optional unit ("1.1 ms", "44 d", "4096 tokens", "21.7%"), checked against q's unit."""
    want = _UNIT_BASE.get(q.unit, "")
    stripped = text.strip()
    if stripped.endswith("%"):  # a percentage: only for a dimensionless quantity (a fraction)
        if want:
            return None, f"incorrect — this asks for {_unit_name(q)}, but the answer is a percentage"
        value, problem = _parse_text(q, stripped[:-1])
        return (None, problem) if problem else (value / 100, None)
    try:
        value, base = parse_quantity(stripped)
    except ValueError as exc:
        return None, f"incorrect — {exc}"
    m = _UNIT_WORD.match(stripped)
    word = (m.group(1) or "") if m else ""
    if word.lower() in ("token", "tokens"):
        base = "tokens"
    if base == "tokens":
        if q.unit not in _DIMENSIONLESS:
            return None, f"incorrect — this asks for {_unit_name(q)}, but the answer is in tokens"
    elif base != want:
        given = base or "a plain number"
        return None, f"incorrect — this asks for {_unit_name(q)}, but the answer is in {given}"
    if not math.isfinite(value):
        return None, f"incorrect — {text!r} is not a finite number"
    return value, None


def _close(value: float, want: float, q: Question) -> bool:
    if q.accept is not None:
        lo, hi = q.accept
        return lo <= value <= hi or math.isclose(value, want, rel_tol=1e-9)
    return math.isclose(value, want, rel_tol=q.rtol)


#: slip → [(factor, what it means)]; each matches the ratio answer/expected or its inverse within 3 %
#: (GB vs GiB and (N−1)/N within 0.5 %: they are close to 1 and would otherwise shadow ordinary misses).
_FACTORS = {
    "bits": [(8.0, "bits vs bytes")],
    "bf16": [(2.0, "2 bytes per bf16 element (1 for int8)")],
    "fp32": [(4.0, "4 bytes per fp32 element (vs 1 for int8)")],
    "fma": [(2.0, "2 FLOPs per multiply-add")],
    "bidirectional": [(2.0, "one-way vs bidirectional link bandwidth")],
    "percent": [(100.0, "a percentage where a fraction is asked (write 0.25, or the string '25%')")],
    "time-unit": [
        (86400.0, "days vs seconds (1 day = 86,400 s; or write '44 days')"),
        (3600.0, "hours vs seconds (or write '3 h')"),
        (60.0, "minutes vs seconds"),
    ],
}
_GIB = (2**30 / 1e9, (2**30 / 1e9) ** 2, 2**40 / 1e12)


def _near(ratio: float, x: float, tol: float) -> bool:
    return ratio > 0 and (abs(ratio / x - 1) < tol or abs(ratio * x - 1) < tol)


def _slip_hint(ratio: float, q: Question) -> str | None:
    """Name a slip that `q` declares (Question.slips) when answer/expected is its telltale factor."""
    if "prefix" in q.slips:
        for k, name in ((1e3, "1000"), (1e6, "a million"), (1e9, "1e9"), (1e12, "1e12")):
            if _near(ratio, k, 0.03):
                if q.unit in _DIMENSIONLESS:
                    return f"off by a factor of {name}: thousands vs millions vs billions (k, M, B)?"
                return (
                    f"off by a factor of {name}: check the unit prefix (s vs ms vs us, B vs KB vs GB); "
                    "answers are in SI base units unless you pass a string such as '1.1 ms'"
                )
    reasons: dict[float, list[str]] = {}
    for slip in q.slips:
        for factor, why in _FACTORS.get(slip, ()):
            if _near(ratio, factor, 0.03):
                reasons.setdefault(factor, []).append(why)
    if reasons:
        factor, whys = max(reasons.items())
        return f"off by a factor of {factor:g}: " + ", or ".join(whys) + "?"
    if {"bf16", "fp32"} <= set(q.slips) and _near(ratio, 4.0, 0.03):
        return "off by a factor of 4: bytes per element (fp32 = 4, bf16 = 2, int8 = 1)?"
    if "gib" in q.slips and any(_near(ratio, g, 0.005) for g in _GIB):
        return "off by ~7%: GB (1e9 bytes) vs GiB (2^30 bytes)?"
    for slip in q.slips:
        if slip.startswith("ring:"):
            n = int(slip.split(":")[1])
            if _near(ratio, (n - 1) / n, 0.005):
                return f"close: a ring collective over N = {n} devices moves (N−1)/N of the data — missing or extra?"
    return None


def _miss_hint(value: float, want: float, q: Question) -> str:
    """No declared slip fits: say how far off (close, or the direction) — never a factor it cannot know."""
    ratio = value / want
    within = f"not within {q.rtol:.0%} of the expected value" if q.accept is None else "outside the accepted range"
    if 0.9 <= ratio <= 1.1:
        return f"close, but {within} ({abs(ratio - 1):.0%} off): check rounding and the inputs you used"
    return ("too high" if value > want else "too low") + f" ({within})"


def _check_number(q: Question, rec: dict) -> tuple[bool, str]:
    value, problem = _as_number(q, rec)
    if problem:
        return False, problem
    want = float(q.compute())
    if _close(value, want, q):
        return True, "correct"
    if want > 0 and value <= 0:
        return False, "incorrect — the answer should be positive"
    if want == 0:
        return False, "incorrect — " + ("too high" if value > want else "too low")
    hint = _slip_hint(value / want, q) or _miss_hint(value, want, q)
    return False, f"incorrect — {hint}"


# --- formulas -------------------------------------------------------------------------------------


def _points(q: Question) -> list[dict[str, float]]:
    """Fixed sample points for `q` (seeded by the id, so output is deterministic)."""
    rng = np.random.default_rng(zlib.crc32(q.qid.encode()))
    pts = []
    for _ in range(_FORMULA_POINTS):
        # log-uniform integers: dims in the book are sizes, and products span many decades
        pts.append(
            {v: float(round(math.exp(rng.uniform(math.log(lo), math.log(hi))))) for v, (lo, hi) in q.domains.items()}
        )
    return pts


def _check_formula(q: Question, rec: dict) -> tuple[bool, str]:
    if not rec.get("callable"):
        return False, (
            f"incorrect — this answer is a formula: write a function of ({', '.join(q.variables)}), "
            f"e.g. lambda {', '.join(q.variables)}: ..."
        )
    names, var_kw = rec.get("params"), rec.get("var_kw", False)
    if names is not None and not var_kw:
        missing = [v for v in q.variables if v not in names]
        if missing:
            return False, (
                f"incorrect — the function must take the arguments ({', '.join(q.variables)}); "
                f"missing {', '.join(missing)}"
            )
    ref = q.compute()
    outputs = rec.get("outputs", [])
    ratios = []
    for i, pt in enumerate(_points(q)):
        if i >= len(outputs):
            return False, "incorrect — the function was not evaluated at every test point"
        out = outputs[i]
        if "raised" in out:
            return False, f"incorrect — your function raised {out['raised']}"
        if "returned" in out:
            return False, f"incorrect — your function returned {out['returned']}, not a number"
        got, want = float(out["num"]), float(ref(**pt))
        if not math.isclose(got, want, rel_tol=max(_FORMULA_RTOL, q.formula_rtol)):
            ratios.append(got / want if want else float("inf"))
    if not ratios:
        return True, "correct"
    if max(ratios) - min(ratios) <= 1e-6 * abs(max(ratios)):
        hint = _slip_hint(ratios[0], q)
        if hint:
            return False, f"incorrect — {hint}"
        return False, "incorrect — off by a constant factor everywhere"
    return False, f"incorrect — differs from the expected formula at {len(ratios)} of {_FORMULA_POINTS} test points"


# --- choices and code -----------------------------------------------------------------------------


_ASCII = (
    ("×", "x"),
    ("·", "*"),
    ("≤", "<="),
    ("≥", ">="),
    ("→", "->"),
    ("−", "-"),
    ("–", "-"),
    ("—", "-"),
    ("’", "'"),
    ("“", '"'),
    ("”", '"'),
)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _plain(text: str) -> str:
    """Lower case, ASCII spellings of ×, ·, ≤, ≥, →, dashes; single spaces; no spaces around symbols."""
    t = str(text).lower()
    for uni, asc in _ASCII:
        t = t.replace(uni, asc)
    t = " ".join(t.split())
    return re.sub(r"\s*([\[\](),:;*<>=+/|-])\s*", r"\1", t)


def lettered_options(q: Question) -> str:
    """`(a) first option; (b) second …` — how a choice question lists its options."""
    return "; ".join(f"({_LETTERS[i]}) {o}" for i, o in enumerate(q.options))


def _choose(q: Question, answer: str) -> tuple[int | None, str | None]:
    """The option index `answer` names: a letter ("b", "(b)"), the text (ASCII spellings allowed), or the
    unique option whose leading word or prefix it is ("TP" for "TP: In[…]…", "no" for "no (…)")."""
    a = _plain(answer).strip()
    letter = re.fullmatch(r"\(?([a-z])\)?\.?", a)
    if letter and _LETTERS.index(letter.group(1)) < len(q.options):
        return _LETTERS.index(letter.group(1)), None
    opts = [_plain(o) for o in q.options]
    if a in opts:
        return opts.index(a), None
    if len(a) >= 2:
        lead = [i for i, o in enumerate(opts) if re.split(r"[\s:(,;]", o, maxsplit=1)[0] == a]
        if len(lead) == 1:
            return lead[0], None
        pre = [i for i, o in enumerate(opts) if o.startswith(a)]
        if len(pre) == 1:
            return pre[0], None
        if len(pre) > 1:
            return None, (
                "incorrect — that matches several options: "
                + "; ".join(f"({_LETTERS[i]}) {q.options[i]}" for i in pre)
                + " — answer with a letter"
            )
    return None, f"incorrect — answer with a letter or one of: {lettered_options(q)}"


def _check_choice(q: Question, rec: dict) -> tuple[bool, str]:
    answer = rec.get("str")
    if not isinstance(answer, str):
        return False, f"incorrect — answer with a letter or one of: {lettered_options(q)}"
    index, problem = _choose(q, answer)
    if problem:
        return False, problem
    return (True, "correct") if q.options[index] == q.compute() else (False, "incorrect — not that option")


def _check_code(q: Question, rec: dict) -> tuple[bool, str]:
    if not rec.get("callable"):
        return False, "incorrect — this answer is a function; define it and pass the function itself"
    ref = q.compute()
    outputs = rec.get("outputs", [])
    for i, args in enumerate(q.test_inputs):
        if i >= len(outputs):
            return False, f"incorrect — no result for test input {i + 1}"
        out = outputs[i]
        if "untraceable" in out:
            return False, (
                f"incorrect — jax.jit could not trace your function ({out['untraceable']}); the question "
                "asks for a JAX program: use jnp and jax.lax, and return the jax array"
            )
        if "raised" in out:
            return False, f"incorrect — your function raised {out['raised']} on test input {i + 1}"
        got = np.asarray(decode_value(out["value"]), dtype=np.float64)
        want = ref(*args)
        if np.shape(got) != np.shape(want) or not np.allclose(got, np.asarray(want), rtol=1e-5, atol=1e-6):
            return False, f"incorrect — wrong result on test input {i + 1} of {len(q.test_inputs)}"
        if q.compiled is not None:
            problem = compiled_problem(q.compiled, args, str(out.get("hlo", "")), out.get("out_spec", "?"))
            if problem:
                return False, f"incorrect — right values, but {problem} ({q.compiled.why})"
    return True, "correct"


def _spec_text(spec) -> str:
    return "P(" + ", ".join("None" if d is None else repr(d) for d in spec) + ")"


def _collective_problem(rule, args, kinds) -> str | None:
    found = ", ".join(f"{n} × {k}" for k, n in sorted(kinds.items())) or "no collective"
    for need in rule.value("require", args):
        if not any(kinds.get(k) for k in need.split("|")):
            return f"its compiled program has no {' or '.join(need.split('|'))} (found: {found})"
    forbid = rule.value("forbid", args)
    if "any" in forbid and kinds:
        return f"its compiled program communicates ({found}) where none is needed"
    bad = [k for k in forbid if k != "any" and kinds.get(k)]
    if bad:
        return f"its compiled program uses {', '.join(bad)} (found: {found})"
    return None


def _partition_problem(rule, args, module) -> str | None:
    parts = rule.value("partitions", args)
    if parts is not None and module.num_partitions != parts:
        return f"it is compiled for {module.num_partitions} device(s), not split over the {parts} the question asks for"
    return None


def _array_problem(rule, args, module) -> str | None:
    shape = rule.value("no_array_of", args)
    if shape is not None and tuple(shape) in {a.dims for a in module.shapes}:
        return f"it builds an array of shape {list(shape)}"
    shape = rule.value("no_gather_of", args)
    if shape is not None:
        for op in module.instructions:  # an async all-gather-start's type is (operands…, gathered outputs…)
            gathered = op.outputs[len(op.outputs) // 2 :] if op.async_half == "start" else op.outputs
            if op.collective == "all-gather" and tuple(shape) in {a.dims for a in gathered}:
                return f"it all-gathers the whole {list(shape)} array"
    return None


def _tile_problem(rule, args, module) -> str | None:
    from scalebook_utils.core.hlo.text import MATMUL_OPS

    dots = rule.value("min_dots", args)
    if dots is not None:
        n = sum(op.opcode in MATMUL_OPS for op in module.instructions)
        if n < dots:
            return f"its matmul is one piece ({n} dot), not {dots} tiles overlapped with the collective"
    return None


def _out_spec_problem(rule, args, out_spec) -> str | None:
    want_spec = rule.value("out_spec", args)
    if want_spec is not None:
        got_spec = tuple(out_spec) if isinstance(out_spec, list) else None
        if got_spec != tuple(want_spec):
            shown = _spec_text(got_spec) if got_spec is not None else "not a sharded array"
            return f"its result is {shown}, not {_spec_text(want_spec)} as the question's output sharding says"
    return None


def _direction_problem(rule, module) -> str | None:
    from scalebook_utils.core.hlo.collectives import source_target_pairs

    if rule.bidirectional:
        pairs = {p for op in module.instructions for p in source_target_pairs(op.attributes)}
        if not any((b, a) in pairs for a, b in pairs if a != b):
            return "its collective-permutes go one way round the ring only"
    return None


def compiled_problem(rule, args: tuple, hlo: str, out_spec="?") -> str | None:
    """What the compiled program `hlo` (and its result's sharding `out_spec`, a list as `answers.compiled_call`
    records it) lacks or has against `rule` (questions.Compiled), or None if it complies: the first problem of
    the checks in order (collectives, partitions, arrays, tiles, output sharding, ring direction)."""
    from scalebook_utils.core.hlo.collectives import count_hlo_collectives
    from scalebook_utils.core.hlo.text import parse_module

    if not hlo.strip():
        return "no compiled program was recorded"
    module = parse_module(hlo)
    checks = (
        lambda: _collective_problem(rule, args, count_hlo_collectives(hlo)),
        lambda: _partition_problem(rule, args, module),
        lambda: _array_problem(rule, args, module),
        lambda: _tile_problem(rule, args, module),
        lambda: _out_spec_problem(rule, args, out_spec),
        lambda: _direction_problem(rule, module),
    )
    return next((problem for check in checks if (problem := check()) is not None), None)
