"""One compact check line per notebook section, instead of a wall of `claim: True`.

A notebook section ends with a few comparisons of what the cell computed against the book or against
the package's reference, printed as one line that names what failed when something does:

    ok = Checks('ch. 5, "Data parallelism"')
    ok.close("α = C/W_ici", alpha, 2550, rtol=0.01)      # a number against the book's (relative tolerance)
    ok.equal("collectives", found, {"all-reduce": 1})    # exact equality (ints, strings, dicts, …)
    ok.true("loss matches single device", diff < 1e-5)   # a condition, with an optional detail
    ok                                                    # ✓ 3 of 3 agree (ch. 5, "Data parallelism")

A failure reads `✗ 2 of 3 agree (…) — failed: α = C/W_ici: got 2400, expected 2550 (±1%)`.
`Checks.line()` returns the line as a string; the object's repr is the line, so it is the natural last
expression of a cell. Pure Python: no jax, numpy optional (numpy scalars compare like floats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Checks", "Outcome"]


def _fmt(x: Any) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    if isinstance(x, float) or hasattr(x, "dtype"):
        try:
            v = float(x)
        except (TypeError, ValueError):
            return repr(x)
        return f"{v:.4g}"
    text = repr(x) if not isinstance(x, str) else x
    return text if len(text) <= 60 else text[:57] + "…"


@dataclass(frozen=True)
class Outcome:
    """One comparison: its name, whether it held, and a short 'got …, expected …' when it did not."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class Checks:
    """A list of named comparisons that prints as one line (see the module docstring).

    `title` names the reference, e.g. 'ch. 3, "AllGather"' or "against the unsharded product".
    `what` is the noun of the line ("agree" by default: "✓ 6 of 6 agree (…)").
    """

    title: str = ""
    what: str = "agree"
    outcomes: list[Outcome] = field(default_factory=list)

    def close(self, name: str, got: Any, want: Any, rtol: float = 1e-3, atol: float = 0.0) -> bool:
        """`got` within `rtol` (relative) or `atol` (absolute) of `want`. Raises on a negative tolerance."""
        if not (rtol >= 0 and atol >= 0):
            raise ValueError(f"rtol and atol must be ≥ 0, got rtol={rtol!r}, atol={atol!r}")
        try:
            g, w = float(got), float(want)
        except (TypeError, ValueError):
            return self._add(name, False, f"got {_fmt(got)}, expected a number near {_fmt(want)}")
        ok = math.isfinite(g) and abs(g - w) <= max(atol, rtol * abs(w))
        tol = f"±{rtol:.0%}" if rtol >= 0.01 else f"±{rtol:g} rel."
        if atol and not rtol:
            tol = f"±{atol:g}"
        return self._add(name, ok, f"got {_fmt(got)}, expected {_fmt(want)} ({tol})")

    def equal(self, name: str, got: Any, want: Any) -> bool:
        """`got == want` exactly (for counts, strings, shapes, dicts of collectives)."""
        try:
            ok = bool(got == want)
        except (TypeError, ValueError):  # e.g. comparing arrays: ambiguous truth value
            ok = False
        return self._add(name, ok, f"got {_fmt(got)}, expected {_fmt(want)}")

    def true(self, name: str, condition: Any, detail: str = "") -> bool:
        """`condition` holds; `detail` (e.g. the measured value) is shown only when it does not."""
        return self._add(name, bool(condition), detail)

    def _add(self, name: str, passed: bool, detail: str) -> bool:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.outcomes.append(Outcome(name, passed, "" if passed else detail))
        return passed

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]

    @property
    def ok(self) -> bool:
        """All comparisons held (and there was at least one)."""
        return bool(self.outcomes) and not self.failed

    def line(self) -> str:
        n, bad = len(self.outcomes), self.failed
        where = f" ({self.title})" if self.title else ""
        if n == 0:
            return f"✗ nothing was checked{where}"
        head = f"{'✓' if not bad else '✗'} {n - len(bad)} of {n} {self.what}{where}"
        if not bad:
            return head
        parts = [f"{o.name}: {o.detail}" if o.detail else o.name for o in bad]
        return head + " — failed: " + "; ".join(parts)

    def __repr__(self) -> str:
        return self.line()

    def __str__(self) -> str:
        return self.line()
