"""Turning an answer into a record that another process can judge (DESIGN §4: produce here, judge elsewhere).

`check()` judges an answer in the kernel that holds it, for a learner on their own. A grader must not
trust that kernel: the student's code ran there and could have patched anything in it. So the answer is
split into two steps:

- `probe(spec, answer)` runs where the answer lives (the student's sandboxed kernel). It needs only a
  *spec* — what to evaluate, never the expected value — and returns a JSON-able record: the number or
  string as given, or, for a function, its outputs (or the error it raised) at the spec's test points
  or test inputs.
- `check.judge(qid, record)` runs in a process that never ran student code and compares the record with
  the registry's answer.

`check.verdict(qid, answer)` is `judge(qid, probe(spec_for(qid), answer))`, so a learner and the grader
get the same verdict from the same code. A record can only say what the answer *is*; no record can say
"correct". This module imports neither the registry nor jax (the grader's sandbox hides the registry).
"""

from __future__ import annotations

import inspect
import json
import numbers
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["encode_value", "decode_value", "probe", "record", "PROBE_DIR_ENV"]

#: The environment variable naming the folder with the grader's `spec.json` and the `answers.jsonl` it reads.
PROBE_DIR_ENV = "SCALEBOOK_PROBE_DIR"
#: At most this many characters of a repr or an error message go into a record.
_TEXT = 200
#: A function's output larger than this many elements is not recorded (every test input is small).
_MAX_ELEMENTS = 1 << 16


def _short(text: str) -> str:
    text = str(text)
    return text if len(text) <= _TEXT else text[: _TEXT - 1] + "…"


def encode_value(x):
    """JSON-able form of a test input or an output: arrays keep dtype and shape; ints, floats, strings as is."""
    if isinstance(x, np.ndarray) or type(x).__module__.startswith(("jax", "jaxlib")):
        a = np.asarray(x)
        if a.size > _MAX_ELEMENTS:
            raise ValueError(f"an array of {a.size} elements is too large to record")
        if a.dtype.kind not in "biuf":
            raise TypeError(f"an array of dtype {a.dtype} is not a numeric result")
        return {"array": a.astype(np.float64).ravel().tolist(), "shape": list(a.shape), "dtype": str(a.dtype)}
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (numbers.Integral, np.integer)):
        return int(x)
    if isinstance(x, (numbers.Real, np.floating)):
        return float(x)
    if isinstance(x, str):
        return x
    if isinstance(x, (tuple, list)):
        return {"tuple": [encode_value(v) for v in x]}
    raise TypeError(f"cannot record a {type(x).__name__}")


def decode_value(x):
    """Inverse of `encode_value` (arrays come back as numpy arrays of their dtype)."""
    if isinstance(x, dict) and "array" in x:
        return np.asarray(x["array"], dtype=np.float64).reshape(x["shape"]).astype(x["dtype"])
    if isinstance(x, dict) and "tuple" in x:
        return tuple(decode_value(v) for v in x["tuple"])
    return x


def _scalar(answer) -> dict:
    """A number or choice answer as given: the judge reads strings and rejects what is not a number."""
    if isinstance(answer, (bool, np.bool_)):
        return {"bool": bool(answer)}
    if isinstance(answer, str):
        return {"str": _short(answer) if len(answer) > 10_000 else answer}
    if isinstance(answer, np.ndarray) and answer.size == 1 and answer.dtype.kind in "biuf":
        answer = answer.reshape(()).item()
    if isinstance(answer, (numbers.Real, np.number)) and not isinstance(answer, complex):
        return {"num": float(answer)}
    return {"type": type(answer).__name__}


def _signature(answer) -> tuple[list[str] | None, bool]:
    try:
        params = inspect.signature(answer).parameters
    except (TypeError, ValueError):
        return None, False
    names = [p for p, v in params.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
    return names, any(v.kind == v.VAR_KEYWORD for v in params.values())


def _number_out(out) -> dict:
    if isinstance(out, np.ndarray) and out.size == 1:
        out = out.reshape(()).item()
    if isinstance(out, (bool, np.bool_)) or not isinstance(out, (numbers.Real, np.number)):
        try:  # a 0-d jax array
            if type(out).__module__.startswith(("jax", "jaxlib")) and np.asarray(out).size == 1:
                return {"num": float(np.asarray(out).reshape(()))}
        except Exception:  # noqa: BLE001 - whatever it is, it is not a number
            pass
        return {"returned": _short(repr(out))}
    return {"num": float(out)}


def _formula(spec: dict, answer) -> dict:
    names, var_kw = _signature(answer)
    rec = {"callable": True, "params": names, "var_kw": var_kw, "outputs": []}
    if names is not None and not var_kw and [v for v in spec["variables"] if v not in names]:
        return rec  # the judge names the missing arguments
    for pt in spec["points"]:
        kwargs = {k: v for k, v in pt.items() if names is None or k in names or var_kw}
        try:
            out = _number_out(answer(**kwargs))
        except Exception as exc:  # noqa: BLE001 - the student's function: its error is the record
            out = {"raised": _short(f"{type(exc).__name__}: {exc}")}
        rec["outputs"].append(out)
        if "num" not in out:
            break
    return rec


def _code(spec: dict, answer) -> dict:
    rec = {"callable": True, "outputs": []}
    for args in spec["inputs"]:
        args = decode_value(args)
        try:
            out = compiled_call(answer, args) if spec.get("compile") else {"value": encode_value(answer(*args))}
        except Exception as exc:  # noqa: BLE001
            out = {"raised": _short(f"{type(exc).__name__}: {exc}")}
        rec["outputs"].append(out)
        if "value" not in out:
            break
    return rec


def probe(spec: dict, answer) -> dict:
    """The record of `answer` for the question `spec` describes (see the module docstring).

    `spec`: {"qid", "kind"} and, for "formula", {"variables", "points"}; for "code", {"inputs"} (encoded).
    Never raises for a bad answer: what went wrong is part of the record.
    """
    kind = spec["kind"]
    if answer is Ellipsis or answer is None:
        return {"answered": False}
    if kind in ("number", "choice"):
        return _scalar(answer)
    if not callable(answer):
        return {"callable": False, "type": type(answer).__name__}
    if kind == "formula":
        return _formula(spec, answer)
    if kind == "code":
        return _code(spec, answer)
    raise ValueError(f"unknown question kind {kind!r} in spec for {spec.get('qid')!r}")


def record(qid: str, get_answer) -> None:
    """Grader side, inside the sandboxed kernel: probe the answer and append it to `answers.jsonl`.

    `get_answer` is a zero-argument function returning the answer variable (a NameError means the cell
    that defines it never ran: unanswered). The folder `$SCALEBOOK_PROBE_DIR` holds the grader's
    `spec.json` (read only) and receives `answers.jsonl`. Prints one line so the student sees it ran.
    """
    folder = Path(os.environ[PROBE_DIR_ENV])
    spec = json.loads((folder / "spec.json").read_text())[qid]
    try:
        answer = get_answer()
    except NameError:
        answer = None
    try:
        rec = probe(spec, answer)
    except Exception as exc:  # noqa: BLE001 - a broken answer object is still a (wrong) answer
        rec = {"error": _short(f"{type(exc).__name__}: {exc}")}
    line = json.dumps({"qid": qid, "record": rec}, allow_nan=True)
    with open(folder / "out" / "answers.jsonl", "a", encoding="utf-8") as f:
        f.write(line + "\n")
    print(f"{qid}: answer recorded (graded after the run)")


# --- a code answer as jax.jit compiles it (check's code questions) -----------------------------------

#: At most this many characters of a compiled program's HLO text go into a record.
MAX_HLO_CHARS = 400_000


def compiled_call(answer: Callable, args: tuple) -> dict:
    """Run `answer(*args)` as `jax.jit(answer)` with the non-array arguments static, for `probe`.

    Returns {"value": encoded result, "hlo": compiled HLO text, "out_spec": the result's PartitionSpec as a list
    (None when the result has no named sharding)}, {"untraceable": message} when JAX cannot
    trace the function (numpy on traced values, say), or {"raised": message}.
    """
    import jax  # only code questions need JAX (grading never imports it at module level)

    static = tuple(i for i, a in enumerate(args) if not isinstance(a, np.ndarray))
    jitted = jax.jit(answer, static_argnums=static)
    try:
        compiled = jitted.lower(*args).compile()
    except Exception as exc:  # noqa: BLE001 - e.g. TracerArrayConversionError for a numpy answer
        first = (str(exc).strip().splitlines() or [""])[0]
        return {"untraceable": _short(f"{type(exc).__name__}: {first}")}
    try:
        got = jitted(*args)
    except Exception as exc:  # noqa: BLE001
        return {"raised": _short(f"{type(exc).__name__}: {exc}")}
    spec = getattr(getattr(got, "sharding", None), "spec", None)
    out_spec = None
    if spec is not None:  # P('X', None) → ["X"]: one entry per dim (a tuple of axes joined), trailing Nones dropped
        out_spec = [None if d is None else "".join(d) if isinstance(d, tuple) else str(d) for d in spec]
        while out_spec and out_spec[-1] is None:
            out_spec.pop()
    return {"value": encode_value(got), "hlo": compiled.as_text()[:MAX_HLO_CHARS], "out_spec": out_spec}
