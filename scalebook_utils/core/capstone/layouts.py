"""The training layouts a capstone plan compares (book ch. 5–6 and 12): one row per kind of layout the planner
tried — the chosen one, ties, slower ones and those that do not fit, each with why (`layout_rows`) — and the
words for a layout's bound and its step against the chosen one. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core.training import planner as training
from scalebook_utils.core.units import format_time

__all__ = ["TIE", "LayoutRow", "layout_rows", "FAMILY_NAMES", "versus", "bound_label", "leanest"]

#: step times within this factor of the best count as a tie (the estimates are not that precise)
TIE = 1.005


def versus(e: training.Estimate, best: training.Estimate) -> str:
    """`e`'s step against the chosen one: "ties with it (within 0.5%)" or "1.12× slower"."""
    r = e.step_time / best.step_time
    return "ties with it (within 0.5%)" if r < TIE else f"is {r:.2f}× slower"


@dataclass(frozen=True)
class LayoutRow:
    """One kind of layout the training planner tried: its fastest member, or why none fits.

    `verdict` is "chosen", "tie", "slower" or "does not fit"; `why` says it in words (the step ratio and the
    bound, or the memory/divisibility reason of the leanest member that failed)."""

    kind: str
    layout: str
    verdict: str
    step_time: float | None
    why: str


#: the layout kinds the table lists, in order (`Estimate.family`)
FAMILY_NAMES = {
    "dp": "data parallelism (ZeRO-0…2)",
    "fsdp": "FSDP (ZeRO-3)",
    "dp+tp": "data + tensor",
    "fsdp+tp": "FSDP + tensor",
    "tp": "tensor alone",
    "pp": "with a pipeline",
}


def layout_rows(plan: training.Plan, best: training.Estimate | None) -> tuple[LayoutRow, ...]:
    """The chosen layout and, for every other kind, its fastest feasible member against it, or — when no member
    fits — the leanest member's reason (book ch. 5–6 and 12: memory, divisibility, the batch)."""
    rows = []
    for fam, kind in FAMILY_NAMES.items():
        ok = [e for e in plan.feasible if e.family == fam]
        if ok:
            e = ok[0]
            if best is not None and e is best:
                rows.insert(
                    0,
                    LayoutRow(
                        kind,
                        e.config.name,
                        "chosen",
                        e.step_time,
                        f"fastest: {format_time(e.step_time)}/step, {bound_label(e)}",
                    ),
                )
                continue
            vs, tie = versus(e, best), e.step_time / best.step_time < TIE
            rest = "; ties go to the higher ZeRO stage, then the most communication headroom" if tie else ""
            rows.append(
                LayoutRow(
                    kind,
                    e.config.name,
                    "tie" if tie else "slower",
                    e.step_time,
                    f"{vs.removeprefix('is ')}: {format_time(e.step_time)}/step, {bound_label(e)}{rest}",
                )
            )
            continue
        tried = [e for e in plan.estimates if e.family == fam]
        if tried:
            lean = min(tried, key=lambda e: e.memory.total)
            rows.append(LayoutRow(kind, lean.config.name, "does not fit", None, lean.reason))
    return tuple(rows)


def bound_label(e: training.Estimate) -> str:
    """'compute-bound', 'compute-bound (with a pipeline bubble)' or 'bound by <the slowest communication>'."""
    if e.bound == "compute":
        return "compute-bound"
    return "compute-bound (with a pipeline bubble)" if e.compute_bound else f"bound by {e.bound}"


def leanest(plan: training.Plan) -> training.Estimate:
    """The infeasible layout that needs the least memory per chip (its reason says what is missing)."""
    return min(plan.estimates, key=lambda e: e.memory.total)
