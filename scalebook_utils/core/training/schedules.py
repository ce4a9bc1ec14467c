"""Pipeline schedules: GPipe, 1F1B and interleaved 1F1B — their bubble and the activations they hold.

Standard results, not the book's (book ch. 12, "Pipeline Parallelism", and ch. 5 name pipelines and the bubble
but derive neither schedule): with p stages, m microbatches and a forward and a backward pass of equal length per
microbatch and stage,

- GPipe (Huang et al. 2019: all forwards, then all backwards): bubble (p − 1)/(m + p − 1); stage 0 holds the
  activations of all m microbatches at once;
- 1F1B (PipeDream-Flush, Narayanan et al. 2021): the same bubble, (p − 1)/(m + p − 1), but a stage starts a
  backward as soon as it can, so stage 0 holds at most min(m, p) microbatches' activations;
- interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): each device holds v non-adjacent chunks of layers
  ("virtual stages"), so the fill and drain shrink by v: bubble (p − 1)/(v·m + p − 1), for v× the point-to-point
  transfers.

`simulate(kind, p, m, v)` *runs* each schedule — every device executes its list of forward/backward chunks in
order, each starting when its device is free and its input has arrived — and returns the timeline, so the
formulas above are checked against a simulation (tests/test_pipeline_schedules.py), not asserted.

Pipelines as they are run (issue 17; used by the training planner): `in_flight` — the micro-batches whose
activations a device holds at its peak under each schedule — and `step_time`, the makespan of stages of unequal
work (uneven `stage_layers`, the logits on the last stage), which is (m + p − 1)·W (v = 1) or (v·m + p − 1)·W/v
for equal stages. `simulate(..., durations=)` gives chunks unequal lengths, so it is checked against a run too.
`split_stages` checks a layout's layers per (virtual) stage and `balanced_stage_layers` proposes one.

Time unit: one chunk's forward (= one chunk's backward); a full stage's forward takes v units. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core.units import is_int, require_int

__all__ = [
    "SCHEDULES",
    "gpipe_bubble",
    "one_f_one_b_bubble",
    "interleaved_bubble",
    "bubble",
    "in_flight",
    "step_time",
    "balanced_stage_layers",
    "split_stages",
    "Op",
    "Timeline",
    "device_order",
    "simulate",
]

#: schedule names `simulate` and `bubble` accept
SCHEDULES = ("gpipe", "1f1b", "interleaved")


def _check(p, m, v=1) -> tuple[int, int, int]:
    """(p, m, v) as ints; an error naming the first that is not an integer ≥ 1 (`units.require_int`)."""
    return require_int("p (stages)", p), require_int("m (microbatches)", m), require_int("v (chunks per device)", v)


def gpipe_bubble(p: int, m: int) -> float:
    """Idle fraction of a GPipe step: (p − 1)/(m + p − 1) (Huang et al. 2019)."""
    p, m, _ = _check(p, m)
    return (p - 1) / (m + p - 1)


def one_f_one_b_bubble(p: int, m: int) -> float:
    """Idle fraction of 1F1B: the same (p − 1)/(m + p − 1) as GPipe (Narayanan et al. 2021); it saves memory,
    not time."""
    p, m, _ = _check(p, m)
    return (p - 1) / (m + p - 1)


def interleaved_bubble(p: int, m: int, v: int) -> float:
    """Idle fraction of interleaved 1F1B with v chunks per device: (p − 1)/(v·m + p − 1) (Megatron-LM,
    Narayanan et al. 2021). v = 1 is plain 1F1B."""
    p, m, v = _check(p, m, v)
    return (p - 1) / (v * m + p - 1)


def bubble(kind: str, p: int, m: int, v: int = 1) -> float:
    """The closed-form bubble of schedule `kind` ("gpipe", "1f1b", "interleaved")."""
    if kind == "gpipe":
        return gpipe_bubble(p, m)
    if kind == "1f1b":
        return one_f_one_b_bubble(p, m)
    if kind == "interleaved":
        return interleaved_bubble(p, m, v)
    raise ValueError(f"unknown schedule {kind!r}; known: {', '.join(SCHEDULES)}")


def in_flight(kind: str, p: int, m: int, v: int = 1, device: int | None = 0):
    """Micro-batches whose activations `device` holds at its peak, in full-stage micro-batches (a chunk's forward
    leaves 1/v of one until its backward): GPipe m (every forward runs before the first backward); 1F1B
    min(m, p − device) (its warm-up forwards, then one more); interleaved min(m·v, (p − device − 1)·2 + (v − 1)·p
    + 1)/v — stage 0 of p = 4, v = 2 holds 6.5 micro-batches where 1F1B holds 4 (Narayanan et al. 2021).
    Equal to `simulate(kind, p, m, v).peak_activations(device)` (tests/test_pipeline_schedules.py).
    `device=None`: the list for every device."""
    p, m, v = _check(p, m, v)
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; known: {', '.join(SCHEDULES)}")
    if device is not None:
        device = require_int("device", device, 0, p - 1)
    if kind == "gpipe":
        held = [float(m)] * p
    elif kind == "1f1b" or v == 1:
        held = [float(min(m, p - d)) for d in range(p)]
    else:
        held = [min(m * v, (p - d - 1) * 2 + (v - 1) * p + 1) / v for d in range(p)]
    return held if device is None else held[device]


def step_time(kind: str, work, m: int, v: int = 1) -> float:
    """Makespan of m micro-batches through a pipeline whose device d needs `work[d]` (forward + backward of all
    its chunks) per micro-batch; a roofline's lower bound, exact for equal stages.

    GPipe: (m − 1)·max_d W_d + Σ_d W_d (the forward phase, then the backward phase, each gated by the slowest
    stage). 1F1B and interleaved: max_d [m·W_d + Σ_{d' < d} W_d' / v] — device d runs its m micro-batches, and
    cannot start before the first one's forward has crossed the devices before it nor finish before the last
    one's backward has (in chunks of 1/v of their work). Equal stages (W_d = W): (m + p − 1)·W for GPipe and
    1F1B, (v·m + p − 1)·W/v interleaved — the bubbles above. Checked against `simulate(..., durations=)`.
    """
    work = [float(w) for w in work]
    if not work or min(work) < 0:
        raise ValueError(f"work must be one non-negative time per device, got {work!r}")
    _, m, v = _check(len(work), m, v)
    if kind == "gpipe":
        return (m - 1) * max(work) + sum(work)
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; known: {', '.join(SCHEDULES)}")
    v = v if kind == "interleaved" else 1
    before, best = 0.0, 0.0
    for w in work:
        best = max(best, m * w + before / v)
        before += w
    return best


def balanced_stage_layers(L: int, n: int) -> tuple[int, ...]:
    """L layers over n stages as evenly as possible, the shorter stages at both ends (the first holds the
    embedding, the last the logits): LLaMA 3 405B's 126 layers over 16 stages → 7, 8 × 14, 7 (Llama 3 paper,
    "Pipeline parallelism": one layer fewer on the first and the last stage)."""
    base, extra = divmod(L, n)
    out = [base + 1] * n
    ends = [i for pair in zip(range(n), reversed(range(n))) for i in pair]
    for i in list(dict.fromkeys(ends))[: n - extra]:
        out[i] = base
    return tuple(out)


def split_stages(L: int, p: int, v: int, stage_layers=None) -> tuple[tuple[int, ...] | None, list[str]]:
    """(layers of each virtual stage s = chunk·p + device, reasons) for p devices of v chunks each.

    `stage_layers`: None (L must split evenly into p·v chunks), p numbers (one per device, each split evenly over
    its v chunks) or p·v numbers (one per virtual stage; a chunk may be empty, e.g. an embedding-only chunk).
    They must be integers ≥ 0 that sum to L, with at least one layer on every device.
    """
    S = p * v
    if stage_layers is None:
        if L % S == 0:
            return (L // S,) * S, []
        hint = ", ".join(str(x) for x in balanced_stage_layers(L, S)[:3])
        return None, [
            f"L={L} layers do not split evenly into {S} {'virtual ' if v > 1 else ''}stages; pass "
            f"stage_layers (e.g. {hint}, … — fewer layers on the first and last stage)"
        ]
    try:
        given = [x if type(x) is int else int(x) if is_int(x) else None for x in stage_layers]
    except TypeError:
        return None, [f"stage_layers must be a list of layer counts, got {stage_layers!r}"]
    if any(x is None or x < 0 for x in given):
        return None, [f"stage_layers must be whole numbers of layers ≥ 0, got {list(stage_layers)!r}"]
    if len(given) == p and v > 1:
        if any(x % v for x in given):
            return None, [
                f"stage_layers per device {given} must each split into virtual_stages={v} chunks "
                f"(or give {S} numbers, one per virtual stage)"
            ]
        given = [given[s % p] // v for s in range(S)]
    if len(given) != S:
        return None, [
            f"stage_layers has {len(given)} entries; the layout has {p} stages"
            + (f" × {v} virtual stages = {S}" if v > 1 else "")
        ]
    if sum(given) != L:
        return None, [
            f"stage_layers sum to {sum(given)} layers, but the model has L={L}: the stages must cover "
            "every layer exactly once"
        ]
    empty = [d for d in range(p) if not any(given[c * p + d] for c in range(v))]
    if empty:
        return None, [f"pipeline stage{'s' if len(empty) > 1 else ''} {', '.join(map(str, empty))} would hold no layer"]
    return tuple(given), []


@dataclass(frozen=True)
class Op:
    """One unit of work: the forward ("F") or backward ("B") of microbatch `mb` through chunk `chunk` of a device
    (virtual stage chunk·p + device)."""

    kind: str
    mb: int
    chunk: int = 0


def device_order(kind: str, p: int, m: int, v: int = 1, device: int = 0) -> list[Op]:
    """The order in which `device` runs its forwards and backwards under schedule `kind`.

    GPipe: F0 … F(m−1), then B0 … B(m−1). 1F1B: p − device − 1 warm-up forwards, then one forward and one backward
    in turn, then the remaining backwards. Interleaved (m a multiple of p): microbatches go through the chunks in
    groups of p (Megatron-LM's order), warm-up (p − device − 1)·2 + (v − 1)·p forwards, then 1F1B.
    """
    p, m, v = _check(p, m, v)
    if kind == "gpipe":
        return [Op("F", i) for i in range(m)] + [Op("B", i) for i in range(m)]
    if kind == "1f1b":
        v = 1
    elif kind != "interleaved":
        raise ValueError(f"unknown schedule {kind!r}; known: {', '.join(SCHEDULES)}")
    elif m % p:
        raise ValueError(f"interleaved 1F1B needs m to be a multiple of p; got m = {m}, p = {p}")
    total = m * v

    def fwd(k):  # k-th forward of this device: groups of p microbatches, chunk by chunk
        group, r = divmod(k, p * v)
        return Op("F", group * p + r % p, r // p)

    def bwd(k):  # backwards visit the chunks in reverse
        group, r = divmod(k, p * v)
        return Op("B", group * p + r % p, v - 1 - r // p)

    warm = min(total, (p - device - 1) * 2 + (v - 1) * p if v > 1 else p - device - 1)
    order = [fwd(k) for k in range(warm)]
    f, b = warm, 0
    while b < total:
        if f < total:
            order.append(fwd(f))
            f += 1
        order.append(bwd(b))
        b += 1
    return order


@dataclass(frozen=True)
class Timeline:
    """A simulated schedule: `grid[d][t]` = the Op device d runs in time unit t, or None (idle)."""

    kind: str
    p: int
    m: int
    v: int
    grid: tuple[tuple[Op | None, ...], ...]

    @property
    def makespan(self) -> int:
        return len(self.grid[0])

    @property
    def bubble(self) -> float:
        """Idle fraction of all (device, time unit) slots."""
        idle = sum(op is None for row in self.grid for op in row)
        return idle / (self.p * self.makespan)

    def peak_activations(self, device: int = 0) -> float:
        """Most activations device `device` holds at once, in full-stage microbatches (a chunk's forward
        leaves 1/v of one until its backward runs). An op lasting several time units is counted once."""
        held = peak = 0
        prev = None
        for op in self.grid[device]:
            if op is not None and op != prev:
                held += 1 if op.kind == "F" else -1
                peak = max(peak, held)
            prev = op
        return peak / self.v


def simulate(kind: str, p: int, m: int, v: int = 1, durations=None) -> Timeline:
    """Run schedule `kind` on p devices: each device takes its `device_order` ops in turn; an op starts when its
    device is free and its input is ready (F of virtual stage s after F of s − 1; B of s after B of s + 1, the
    last stage's B after its own F). Every op takes one time unit, or `durations[s]` units (positive integers,
    one per virtual stage s = chunk·p + device) for stages of unequal work."""
    v = v if kind == "interleaved" else 1
    orders = [device_order(kind, p, m, v, d) for d in range(p)]
    S = p * v
    dur = [1] * S if durations is None else list(durations)
    if len(dur) != S or not all(is_int(x) and x >= 1 for x in dur):
        raise ValueError(f"durations must be {S} positive integers (one per virtual stage), got {durations!r}")
    done: dict[tuple[str, int, int], int] = {}  # (kind, mb, virtual stage) -> finish time
    pos, free = [0] * p, [0] * p
    rows: list[list[Op | None]] = [[] for _ in range(p)]
    remaining = sum(len(o) for o in orders)
    t = 0
    while remaining:
        for d in range(p):
            if pos[d] == len(orders[d]) or free[d] > t:
                continue
            op = orders[d][pos[d]]
            s = op.chunk * p + d
            dep = (
                (("F", op.mb, s - 1) if s > 0 else None)
                if op.kind == "F"
                else (("B", op.mb, s + 1) if s < S - 1 else ("F", op.mb, s))
            )
            if dep is not None and done.get(dep, t + 1) > t:
                continue
            rows[d].extend([None] * (t - len(rows[d])))
            rows[d].extend([op] * dur[s])
            done[(op.kind, op.mb, s)] = t + dur[s]
            free[d], pos[d] = t + dur[s], pos[d] + 1
            remaining -= 1
        t += 1
        if t > (4 * S * m + 4 * S) * max(dur):
            raise RuntimeError(f"{kind} schedule deadlocked (p = {p}, m = {m}, v = {v})")
    end = max(len(r) for r in rows)
    grid = tuple(tuple(r + [None] * (end - len(r))) for r in rows)
    return Timeline(kind, p, m, v, grid)
