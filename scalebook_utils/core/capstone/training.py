"""The training half of a capstone plan (book ch. 11 over ch. 5–6 and 12): the chips (`train_chip_count`), the
planner's best layout (`training.plan` on TPUs, `gpu_training.plan` on GPUs), the days to train at the MFU you
expect to achieve — `training.training_time` = 6·P·tokens / (chips · C · MFU), MFU capped at the planner's roofline
MFU — the money, and the reasons: one small rule per reason (`TRAINING_RULES`: memory, batch, bound, alternatives,
time, money). `plan_training(model, chip, budget)` returns a `TrainingSide`. Pure Python.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.capstone.budget import Budget
from scalebook_utils.core.capstone.layouts import FAMILY_NAMES, LayoutRow, bound_label, layout_rows, leanest, versus
from scalebook_utils.core.capstone.text import DAY, days_text, number_text, sentences, usd_text
from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.gpu import training as GT
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.training import planner as training
from scalebook_utils.core.units import format_bytes, format_count, format_time, require_int

__all__ = [
    "TrainingSide",
    "plan_training",
    "train_chip_count",
    "training_reasons",
    "TRAINING_RULES",
    "DEFAULT_GPU_TRAIN_CHIPS",
    "MAX_GPU_TRAIN_CHIPS",
    "clear_cache",
]

#: GPUs a training plan uses when the budget gives no count (the ch. 12 planner's: a 4-SU SuperPod; GB200: one SU)
DEFAULT_GPU_TRAIN_CHIPS = GT.DEFAULT_N_GPUS_BY_CHIP
_DEFAULT_GPUS = GT.DEFAULT_N_GPUS
#: the most GPUs a training plan takes: a full-bisection fat tree of three tiers of 64-port InfiniBand switches,
#: 2·32³ (`gpus.fat_tree_switches`; ch. 12 needs the third, "core" tier from 4096 GPUs on). Our limit, not the book's.
MAX_GPU_TRAIN_CHIPS = 2 * (gpus.IB_SWITCH_PORTS // 2) ** 3


def train_chip_count(chip, train_chips: int | None = None) -> int:
    """The chips a training plan uses: `train_chips`, or the default (a TPU's full pod; 1024 GPUs, 576 GB200s).

    A TPU count beyond one pod raises: the plan is one ICI slice (several pods joined by DCN are ch. 5's
    "Scaling Across Pods", `training.plan(..., slices=)`). `train_chips` is an integer ≥ 1 when given."""
    spec = get_chip(chip)
    if train_chips is not None:
        train_chips = require_int("train_chips", train_chips)
    if spec.kind == "tpu":
        pod = spec.pod_chips
        if train_chips is None:
            return pod
        if pod is not None and train_chips > pod:
            raise ValueError(
                f"a {spec.name} pod has {number_text(pod)} chips; train_chips={number_text(train_chips)} "
                "would span pods over DCN, which this plan does not model — use at most "
                f"{number_text(pod)}"
            )
        return int(train_chips)
    if spec.kind != "gpu":
        raise ValueError(f"{spec.name} is neither a TPU nor a GPU; pick a training chip from hardware.chip_names()")
    n = int(train_chips) if train_chips is not None else DEFAULT_GPU_TRAIN_CHIPS.get(spec.name, _DEFAULT_GPUS)
    if n > MAX_GPU_TRAIN_CHIPS:
        raise ValueError(
            f"{number_text(n)} {spec.name} GPUs need a fat tree of {len(gpus.fat_tree_switches(n))} "
            "switch tiers; ch. 12's networks go up to three tiers of 64-port switches, "
            f"{number_text(MAX_GPU_TRAIN_CHIPS)} GPUs — use at most that many"
        )
    return n


@functools.lru_cache(maxsize=32)
def _training_plan(
    cfg: tf.TransformerConfig, chip: str, n_chips: int, batch_tokens: float, seq_len: int
) -> training.Plan:
    """The planner for a TPU (`training.plan`, ch. 5–6) or a GPU (`gpu_training.plan`, ch. 12), cached: an app
    redraw asks for the same plan again."""
    if get_chip(chip).kind == "tpu":
        return training.plan(cfg, batch_tokens, chip, n_chips=n_chips, seq_len=seq_len)
    return GT.plan(cfg, batch_tokens, chip, n_gpus=n_chips, seq_len=seq_len)


def clear_cache() -> None:
    """Forget the cached planner answers (`capstone.clear_caches`)."""
    _training_plan.cache_clear()


@dataclass(frozen=True)
class TrainingSide:
    """The training half of a `ModelPlan`. Times in seconds, memory in bytes, money in US dollars.

    When no layout fits, `feasible` is False, `reason` says why (the planner's reason for the layout that needs the
    least memory) and the layout fields are None; the memory reasons and the chip count are still there.
    """

    model: str
    chip: str
    n_chips: int
    params: float
    tokens: float
    batch_tokens: float
    seq_len: int
    feasible: bool
    reason: str
    layout: str | None
    step_time: float | None
    roofline_mfu: float | None
    bound: str | None
    memory_per_chip: float | None
    hbm_per_chip: float
    mfu: float | None  # the MFU the days assume: min(budget.mfu, roofline_mfu)
    seconds: float | None
    chip_hours: float | None
    usd: float | None  # None when the chip has no price in the book
    meets_deadline: bool | None  # None when the budget sets no deadline (or nothing is feasible)
    meets_money: bool | None
    reasons: tuple[str, ...]
    estimate: training.Estimate | None = field(default=None, repr=False, compare=False)
    #: one `LayoutRow` per kind of layout the planner tried (the chosen one first): why the others lost
    layouts: tuple[LayoutRow, ...] = field(default=(), repr=False, compare=False)

    @property
    def days(self) -> float | None:
        return None if self.seconds is None else self.seconds / DAY

    def headline(self) -> str:
        """One line: layout, step, bound, days (and money)."""
        if not self.feasible:
            return f"train {self.chip}×{self.n_chips}: no feasible layout — {self.reason}"
        money = f", {usd_text(self.usd)}" if self.usd is not None else ""
        return (
            f"train {self.chip}×{self.n_chips}: {self.layout}, {days_text(self.seconds)} at {self.mfu:.0%} MFU"
            f"{money}, {self.bound}"
        )

    def _remat_note(self) -> str:
        """Why a compute-bound roofline MFU is below 100%: the recomputed FLOPs count in the step, not in 6PB."""
        remat = self.estimate.config.remat if self.estimate is not None else "none"
        if remat == "none":
            return ""
        return (
            f"; {remat.replace('_', ' ')} remat redoes forward FLOPs that the step pays for and the MFU does not count"
        )

    def lines(self) -> list[str]:
        """The headline numbers, one per line (no reasons)."""
        unit = "GPUs" if get_chip(self.chip).kind == "gpu" else "chips"
        head = (
            f"{number_text(self.n_chips)} {self.chip} {unit}, {format_count(self.tokens)} tokens, "
            f"batch {format_count(self.batch_tokens)} tokens in {self.seq_len}-token sequences"
        )
        if not self.feasible:
            return [head, f"no feasible layout: {self.reason}"]
        out = [
            head,
            f"layout: {self.layout}",
            f"step: {format_time(self.step_time)}, {self.bound}, roofline MFU {self.roofline_mfu:.0%} "
            f"(an upper bound: peak FLOPs, perfect overlap{self._remat_note()})",
            f"memory: {format_bytes(self.memory_per_chip)} of {format_bytes(self.hbm_per_chip)} HBM per "
            f"{'GPU' if get_chip(self.chip).kind == 'gpu' else 'chip'}",
            f"time: {days_text(self.seconds)} at {self.mfu:.0%} MFU ({format_count(self.chip_hours)} chip-hours)",
        ]
        if self.usd is not None:
            out.append(f"cost: {usd_text(self.usd)} at {usd_text(get_chip(self.chip).price_per_hour_usd)}/chip-hour")
        return out


#: the kinds of layout the alternatives compare (`Estimate.family` without the ZeRO stage)
_GROUPS = {
    "data parallelism alone": ("dp", "fsdp"),
    "data + tensor parallelism": ("dp+tp", "fsdp+tp"),
    "tensor parallelism alone": ("tp",),
    "a pipeline": ("pp",),
}


@dataclass(frozen=True)
class _Facts:
    """What the training reasons read: the model, chip, count and budget, the planner's answer and, when a layout
    fits, the chosen estimate with its achieved MFU, seconds and money (None otherwise)."""

    cfg: tf.TransformerConfig
    spec: ChipSpec
    n: int
    budget: Budget
    plan: training.Plan
    best: training.Estimate | None
    mfu: float | None
    seconds: float | None
    usd: float | None

    @property
    def unit(self) -> str:
        return "GPU" if self.spec.kind == "gpu" else "chip"


def _memory_reason(f: _Facts) -> str:
    """Book ch. 6: bf16 weights + fp32 Adam are 10 bytes per parameter, before activations."""
    P = tf.param_count(f.cfg).total
    state = training.ADAM_BYTES_PER_PARAM * P
    need = training.min_chips_for_memory(state, f.spec)
    return (
        f"Memory: bf16 weights + fp32 Adam take {training.ADAM_BYTES_PER_PARAM} bytes × {format_count(P)} "
        f"parameters = {format_bytes(state)}; at {format_bytes(f.spec.hbm_bytes)} of HBM per {f.unit} that needs "
        f"at least {number_text(need)} {f.unit}{'s' if need > 1 else ''} before activations (book ch. 6), "
        f"and the plan has {number_text(f.n)}."
    )


def _fit_reason(f: _Facts) -> str:
    """No layout fits: the leanest one's reason."""
    lean = leanest(f.plan)
    return (
        f"Fit: no layout fits; the leanest, {lean.config.name}, {lean.reason}. Activation checkpoints grow "
        "with the batch: more chips or a smaller batch may fit."
    )


def _batch_reason(f: _Facts) -> str:
    """The planner's batch rules; on a TPU, the tokens per chip against FSDP's and FSDP+TP's compute-bound minimum
    (book ch. 5: B/chip > C/W_ici per axis)."""
    per_chip = f.budget.batch_tokens / f.n
    rules = [x for x in sentences(f.plan.explain())[1:] if not x.lower().startswith("best pure")]
    line = "Batch: " + (" ".join(rules) if rules else f"{per_chip:,.0f} tokens per chip.")
    if f.spec.kind != "tpu":
        return line
    axes = f.spec.ici_torus_dims or 1
    fsdp = training.dp_min_batch_per_chip(f.spec, axes)
    mixed = training.mixed_min_batch_per_chip(f.cfg.F, f.spec, max(axes - 1, 1), 1)
    if per_chip > fsdp:
        return line + f" {per_chip:,.0f} > {fsdp:.0f}: FSDP alone can be compute-bound."
    if per_chip > mixed:
        return line + (
            f" {per_chip:,.0f} is too few for FSDP alone but enough for FSDP+TP: mixing in tensor "
            "parallelism keeps the step compute-bound."
        )
    return line + f" {per_chip:,.0f} is below both: every FSDP/TP layout is communication-bound at this batch."


def _bound_reason(f: _Facts) -> str:
    """What bounds the chosen layout's step (its slowest communication against T_math), and its memory."""
    best = f.best
    comms = {k: v for k, v in best.times.items() if k != "compute" and v > 0}
    if not best.compute_bound:
        line = (
            f"Bound: {best.config.name} is bound by {best.bound}: {best.step_time / best.t_math:.2f}× the "
            f"FLOPs time, so even the roofline MFU is only {best.mfu:.0%}."
        )
    elif comms:
        k = max(comms, key=comms.get)
        line = (
            f"Bound: {best.config.name} is compute-bound — its slowest communication ({k}) needs "
            f"{comms[k] / best.t_math:.0%} of the FLOPs time and hides under it, so the roofline MFU is "
            f"{best.mfu:.0%}; real runs reach 40–60%."
        )
    else:
        line = f"Bound: {best.config.name} is compute-bound with no communication at all (roofline MFU {best.mfu:.0%})."
    if best.memory.total > 0:
        line += f" It uses {format_bytes(best.memory.total)} of {format_bytes(f.spec.hbm_bytes)} per {f.unit}."
    return line


def _alternatives_reason(f: _Facts) -> str:
    """The fastest feasible layout of each other group of kinds, against the chosen one."""
    alts = []
    for families in _GROUPS.values():  # one alternative per group of kinds
        if f.best.family in families:
            continue
        e = next((e for e in f.plan.feasible if e.family in families), None)
        if e is not None:
            # named by its own kind, as in the layouts table: "FSDP + tensor (FSDP 128 × TP 2)", not its group's
            alts.append(f"{FAMILY_NAMES[e.family]} ({e.config.name}) {versus(e, f.best)}, {bound_label(e)}")
    return "Alternatives: " + "; ".join(alts) + "." if alts else "Alternatives: no layout of another kind fits."


def _time_reason(f: _Facts) -> str:
    """The days at the achieved MFU; over a deadline, how many more chips (or how much more MFU) would meet it."""
    budget, mfu, seconds = f.budget, f.mfu, f.seconds
    capped = f" (the roofline allows only {f.best.mfu:.0%})" if mfu < budget.mfu else ""
    line = f"Time: {format_count(budget.train_tokens)} tokens take {days_text(seconds)} at {mfu:.0%} MFU{capped}"
    if budget.max_days is None:
        return line + "."
    limit = budget.max_days * DAY
    if seconds <= limit:
        return line + f"; within the {budget.max_days:g}-day deadline."
    ratio = seconds / limit
    more = math.ceil(f.n * ratio)
    pods = " — more than a pod: slices over DCN" if f.spec.kind == "tpu" and more > (f.spec.pod_chips or more) else ""
    faster = f" or {mfu * ratio:.0%} MFU" if mfu * ratio <= f.best.mfu else ""
    return line + (
        f"; over the {budget.max_days:g}-day deadline: need ≈ {ratio:.2g}× the chips "
        f"(≈ {number_text(more)}{pods}){faster}."
    )


def _money_reason(f: _Facts) -> str:
    """Chip-hours × the book's hourly price, against the money cap."""
    budget, usd, spec = f.budget, f.usd, f.spec
    if usd is None:
        cap = f", so the {usd_text(budget.max_usd)} cap cannot be checked" if budget.max_usd is not None else ""
        return f"Money: {spec.name} has no hourly price in the book{cap}."
    line = (
        f"Money: {format_count(f.seconds / 3600 * f.n)} chip-hours at "
        f"{usd_text(spec.price_per_hour_usd)}/h = {usd_text(usd)}"
    )
    if budget.max_usd is None:
        return line + "."
    if usd <= budget.max_usd:
        return line + f"; within the {usd_text(budget.max_usd)} cap."
    return line + (
        f"; over the {usd_text(budget.max_usd)} cap by {usd / budget.max_usd:.2g}× — more chips do not "
        "help (same chip-hours), fewer tokens, a smaller model or a higher MFU do."
    )


#: the training reasons, one rule each, in the order `ModelPlan.report` prints them (no layout fits: the first two)
TRAINING_RULES = (_memory_reason, _batch_reason, _bound_reason, _alternatives_reason, _time_reason, _money_reason)
_INFEASIBLE_RULES = (_memory_reason, _fit_reason)


def training_reasons(
    cfg,
    spec: ChipSpec,
    n: int,
    budget: Budget,
    plan: training.Plan,
    best: training.Estimate | None = None,
    mfu: float | None = None,
    seconds: float | None = None,
    usd: float | None = None,
) -> list[str]:
    """The training side's reasons, one sentence or two per rule (`TRAINING_RULES`; with no `best`, only memory and
    fit)."""
    f = _Facts(cfg, spec, n, budget, plan, best, mfu, seconds, usd)
    return [rule(f) for rule in (_INFEASIBLE_RULES if best is None else TRAINING_RULES)]


def plan_training(model="llama3-70b", chip="tpu-v5p", budget: Budget = Budget()) -> TrainingSide:
    """The training half: the planner's best layout for `budget` on `chip`, the days at the achieved MFU, the money,
    and the reasons. TPUs use `training.plan` (book ch. 5–6), GPUs `gpu_training.plan` (ch. 12).

    Raises for bad input (unknown model or chip, a chip count beyond a TPU pod or the GPU planner's cluster);
    returns an infeasible side, with the planner's reason, when no layout fits.

    Book ch. 6: LLaMA 3-70B, 8960 v5p, a 4·2^20-token batch → FSDP 2240 × TP 4 (the book's 2048 × 4 rounded to
    the pod), 15T tokens at 40% MFU ≈ 44 days (ch6.iq4).
    """
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget, got {type(budget).__name__}")
    cfg = tf.get_model(model)
    spec = get_chip(chip)
    n = train_chip_count(spec, budget.train_chips)
    plan = _training_plan(cfg, spec.name, n, float(budget.batch_tokens), int(budget.seq_len))
    n = plan.n_chips
    P = tf.param_count(cfg).total
    common = dict(
        model=cfg.name,
        chip=spec.name,
        n_chips=n,
        params=P,
        tokens=budget.train_tokens,
        batch_tokens=budget.batch_tokens,
        seq_len=budget.seq_len,
        hbm_per_chip=spec.hbm_bytes,
    )
    if not plan.feasible:
        lean = leanest(plan)
        reason = (
            f"no layout of {cfg.name} fits {number_text(n)} × {spec.name} with a "
            f"{format_count(budget.batch_tokens)}-token batch; the leanest, {lean.config.name}, {lean.reason}"
        )
        reasons = training_reasons(cfg, spec, n, budget, plan)
        return TrainingSide(
            **common,
            feasible=False,
            reason=reason,
            layout=None,
            step_time=None,
            roofline_mfu=None,
            bound=None,
            memory_per_chip=None,
            mfu=None,
            seconds=None,
            chip_hours=None,
            usd=None,
            meets_deadline=None,
            meets_money=None,
            reasons=tuple(reasons),
            layouts=layout_rows(plan, None),
        )
    best = plan.best
    mfu = min(budget.mfu, best.mfu)
    seconds = training.training_time(P, budget.train_tokens, n, spec, mfu)
    chip_hours = seconds / 3600 * n
    usd = None if spec.price_per_hour_usd is None else chip_hours * spec.price_per_hour_usd
    reasons = training_reasons(cfg, spec, n, budget, plan, best, mfu, seconds, usd)
    return TrainingSide(
        **common,
        feasible=True,
        reason="",
        layout=best.config.name,
        step_time=best.step_time,
        roofline_mfu=best.mfu,
        bound=bound_label(best),
        memory_per_chip=best.memory.total,
        mfu=mfu,
        seconds=seconds,
        chip_hours=chip_hours,
        usd=usd,
        meets_deadline=None if budget.max_days is None else seconds <= budget.max_days * DAY,
        meets_money=None if budget.max_usd is None or usd is None else usd <= budget.max_usd,
        reasons=tuple(reasons),
        estimate=best,
        layouts=layout_rows(plan, best),
    )
