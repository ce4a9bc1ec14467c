"""engine: a toy continuous-batching scheduler against static batching (book ch. 7, "Designing an Effective
Inference Engine" / "Continuous batching"). Pure Python.

Time is counted in generate steps; each step every occupied slot emits one token. A request (arrival step a,
n tokens to generate) occupies one of `slots` cache slots for n steps once admitted.
- static: wait until `slots` requests have arrived (or none are left), run the batch until its longest request
  finishes, then admit the next batch (the "batched prefill, then generate" engine);
- continuous: at every step, requests that finished free their slot and waiting requests are inserted at once
  (prefill + insert, as in JetStream's engine API).
Prefill time is left out (both policies pay it equally per request). Throughput = tokens / steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

POLICIES = ("static", "continuous")


@dataclass(frozen=True)
class BatchingRun:
    """Result of `simulate_batching`: steps until the last token, tokens generated, the step at which each
    request finished (input order), and tokens per step (= average occupied slots)."""

    policy: str
    slots: int
    steps: int
    tokens: int
    finish: tuple[int, ...]

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.steps

    @property
    def utilisation(self) -> float:
        """Fraction of slot-steps that produced a token."""
        return self.tokens / (self.steps * self.slots)


def simulate_batching(
    arrivals: Sequence[int], lengths: Sequence[int], slots: int, policy: str = "continuous"
) -> BatchingRun:
    """Run requests (arrival step, decode length ≥ 1) through `slots` slots under `policy` (see module doc).
    Requests are served first come, first served. ValueError on bad input."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise ValueError(f"slots must be a positive integer, got {slots!r}")
    if len(arrivals) != len(lengths) or not lengths:
        raise ValueError("arrivals and lengths must be non-empty and of equal length")
    if any(n < 1 for n in lengths) or any(a < 0 for a in arrivals):
        raise ValueError("lengths must be ≥ 1 and arrivals ≥ 0")
    order = sorted(range(len(lengths)), key=lambda i: (arrivals[i], i))
    finish = [0] * len(lengths)
    waiting, running, t = list(order), {}, 0  # running: request → tokens still to generate
    while waiting or running:
        arrived = [i for i in waiting if arrivals[i] <= t]
        if policy == "continuous":
            admit = arrived[: slots - len(running)]
        else:
            full = len(arrived) >= slots or len(arrived) == len(waiting)
            admit = arrived[:slots] if not running and full else []
        for i in admit:
            waiting.remove(i)
            running[i] = lengths[i]
        t += 1  # one generate step: every running slot emits a token
        for i in list(running):
            running[i] -= 1
            if running[i] == 0:
                finish[i] = t
                del running[i]
    return BatchingRun(policy, slots, t, sum(lengths), tuple(finish))
