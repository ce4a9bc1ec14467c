"""Plan your model: a training plan and a serving plan side by side, each with its reasons (book ch. 11).

The book's conclusion asks the reader to put chapters 5–8 and 12 together: pick a model and the chips, and say
how to train it and how to serve it. This module does that with the package's own planners and nothing new in
the physics:

- training: `training.plan` (TPUs, book ch. 5–6) or `gpu_training.plan` (GPUs, ch. 12) ranks every layout of a
  step; the days to train are `training.training_time` = 6·P·tokens / (chips · C · MFU) at the MFU you expect to
  *achieve* (never above the planner's roofline MFU, which is an upper bound);
- serving: `serving.plan_serving` on the smallest slice that holds the weights and one context (ch. 7–8), and
  `serving.frontier` over every batch and slice for the best point under a latency cap.

`plan_model(model, train_chip, serve_chip, budget)` returns a `ModelPlan`; each side carries its headline
numbers and a tuple of short `reasons`; `ModelPlan.report()` prints both. Pure: no jax, matplotlib or ipywidgets.
"""

from __future__ import annotations

import functools
import math
import numbers
import re
from dataclasses import dataclass, field

from scalebook_utils.core.gpu import training as GT
from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.core.training import planner as T
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import format_bytes, format_count, format_time, is_int, require_int

__all__ = ["Budget", "TrainingSide", "LayoutRow", "layout_rows", "TIE", "ServingSide", "ModelPlan", "plan_model", "plan_training", "plan_serving_side",
           "train_chip_count", "DEFAULT_GPU_TRAIN_CHIPS", "MAX_GPU_TRAIN_CHIPS"]

#: GPUs a training plan uses when the budget gives no count (the ch. 12 planner's: a 4-SU SuperPod; GB200: one SU)
DEFAULT_GPU_TRAIN_CHIPS = GT.DEFAULT_N_GPUS_BY_CHIP
_DEFAULT_GPUS = GT.DEFAULT_N_GPUS
#: the most GPUs a training plan takes: a full-bisection fat tree of three tiers of 64-port InfiniBand switches,
#: 2·32³ (`gpus.fat_tree_switches`; ch. 12 needs the third, "core" tier from 4096 GPUs on). Our limit, not the book's.
MAX_GPU_TRAIN_CHIPS = 2 * (gpus.IB_SWITCH_PORTS // 2) ** 3
_DAY = 86_400.0


# --- the budget -----------------------------------------------------------------------------------------------


def _check_positive(name: str, v, *, integer: bool = False) -> None:
    ok = is_int(v) if integer else (isinstance(v, numbers.Real) and not isinstance(v, bool))
    if not ok or not math.isfinite(float(v)) or v <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {v!r}")


@dataclass(frozen=True)
class Budget:
    """What you have and what you want, in SI units (seconds, tokens, US dollars).

    train_chips: chips for training (None: the TPU's full pod — 8960 for v5p — or 1024 GPUs, 576 GB200s);
    train_tokens: tokens to train on (15e12, LLaMA 3); batch_tokens: the global batch in tokens (4·2^20, ch. 6);
    seq_len: training sequence length; mfu: the MFU you expect to *achieve* (0 < mfu ≤ 1; the days use
    min(mfu, the planner's roofline MFU)); max_days / max_usd: an optional deadline and training-money cap;
    serve_precision: a mode of `inference.PRECISIONS` ("bf16", "int8", "int8-weights", "int4-weights", "fp8");
    serve_context: tokens of context per sequence (S); max_latency: seconds per decode step (per token).
    """

    train_chips: int | None = None
    train_tokens: float = 15e12
    batch_tokens: float = 4 * 2**20
    seq_len: int = 4096
    mfu: float = 0.4
    max_days: float | None = None
    max_usd: float | None = None
    serve_precision: str = "int8"
    serve_context: float = 8192
    max_latency: float = 0.02

    def __post_init__(self):
        if self.train_chips is not None:
            _check_positive("train_chips", self.train_chips, integer=True)
        _check_positive("train_tokens", self.train_tokens)
        _check_positive("batch_tokens", self.batch_tokens)
        _check_positive("seq_len", self.seq_len, integer=True)
        if self.batch_tokens < self.seq_len:
            raise ValueError(f"batch_tokens ({self.batch_tokens:g}) must hold at least one sequence of seq_len="
                             f"{self.seq_len} tokens")
        if not (isinstance(self.mfu, numbers.Real) and not isinstance(self.mfu, bool) and 0 < self.mfu <= 1):
            raise ValueError(f"mfu is the fraction of peak FLOPs you expect to achieve, 0 < mfu ≤ 1 (the book "
                             f"assumes 0.4–0.5); got {self.mfu!r}")
        for name in ("max_days", "max_usd"):
            v = getattr(self, name)
            if v is not None:
                _check_positive(f"{name} (None for no limit)", v)
        if not isinstance(self.serve_precision, str) or self.serve_precision.strip().lower() not in inf.PRECISIONS:
            raise ValueError(f"unknown serve_precision {self.serve_precision!r}; allowed: {', '.join(inf.PRECISIONS)}")
        _check_positive("serve_context", self.serve_context)
        if self.serve_context < 1:
            raise ValueError(f"serve_context must be at least 1 token, got {self.serve_context!r}")
        _check_positive("max_latency (seconds per decode step)", self.max_latency)


# --- small formatting helpers ------------------------------------------------------------------------------------


def _usd(x: float) -> str:
    """$40.3M, $1.23k, $0.665."""
    return "$" + (format_count(x) if x >= 1000 else f"{x:.3g}")


def _n(x: float) -> str:
    """Counts: 8960 → '8,960'."""
    return f"{x:,.0f}"


def _days(seconds: float) -> str:
    """'44.7 days', '1,280 days' (no exponent), '5.2 hours', '12 minutes'."""
    d = seconds / _DAY
    if d >= 1000:
        return f"{d:,.0f} days"
    if d >= 1:
        return f"{d:.3g} days"
    return f"{seconds / 3600:.3g} hours" if seconds >= 3600 else f"{seconds / 60:.3g} minutes"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _shape(shape) -> str:
    return "x".join(map(str, shape))


def _chips(n: int, gpu: bool = False) -> str:
    """'1 chip', '8 chips', '1 GPU', '8 GPUs'."""
    unit = "GPU" if gpu else "chip"
    return f"{_n(n)} {unit}{'s' if n != 1 else ''}"


def _slice(n: int, shape, gpu: bool = False) -> str:
    """A TPU torus slice as the book names it, '4x2 (8 chips)'; one axis of chips or GPUs by its count."""
    return f"{_shape(shape)} ({_chips(n, gpu)})" if shape is not None and len(shape) > 1 else _chips(n, gpu)


def _sentences(text: str) -> list[str]:
    """Split planner prose into sentences (a period, a space, then a capital; 'ch. 5' stays whole)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.strip()) if s.strip()]


# --- training -------------------------------------------------------------------------------------------------------


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
            raise ValueError(f"a {spec.name} pod has {_n(pod)} chips; train_chips={_n(train_chips)} would span pods "
                             f"over DCN, which this plan does not model — use at most {_n(pod)}")
        return int(train_chips)
    if spec.kind != "gpu":
        raise ValueError(f"{spec.name} is neither a TPU nor a GPU; pick a training chip from hardware.chip_names()")
    n = int(train_chips) if train_chips is not None else DEFAULT_GPU_TRAIN_CHIPS.get(spec.name, _DEFAULT_GPUS)
    if n > MAX_GPU_TRAIN_CHIPS:
        raise ValueError(f"{_n(n)} {spec.name} GPUs need a fat tree of {len(gpus.fat_tree_switches(n))} switch tiers; "
                         f"ch. 12's networks go up to three tiers of 64-port switches, {_n(MAX_GPU_TRAIN_CHIPS)} GPUs "
                         "— use at most that many")
    return n


@functools.lru_cache(maxsize=32)
def _training_plan(cfg: tf.TransformerConfig, chip: str, n_chips: int, batch_tokens: float, seq_len: int) -> T.Plan:
    """The planner for a TPU (`training.plan`, ch. 5–6) or a GPU (`gpu_training.plan`, ch. 12), cached: an app
    redraw asks for the same plan again."""
    if get_chip(chip).kind == "tpu":
        return T.plan(cfg, batch_tokens, chip, n_chips=n_chips, seq_len=seq_len)
    return GT.plan(cfg, batch_tokens, chip, n_gpus=n_chips, seq_len=seq_len)


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
    mfu: float | None           # the MFU the days assume: min(budget.mfu, roofline_mfu)
    seconds: float | None
    chip_hours: float | None
    usd: float | None           # None when the chip has no price in the book
    meets_deadline: bool | None  # None when the budget sets no deadline (or nothing is feasible)
    meets_money: bool | None
    reasons: tuple[str, ...]
    estimate: T.Estimate | None = field(default=None, repr=False, compare=False)
    #: one `LayoutRow` per kind of layout the planner tried (the chosen one first): why the others lost
    layouts: tuple["LayoutRow", ...] = field(default=(), repr=False, compare=False)

    @property
    def days(self) -> float | None:
        return None if self.seconds is None else self.seconds / _DAY

    def headline(self) -> str:
        """One line: layout, step, bound, days (and money)."""
        if not self.feasible:
            return f"train {self.chip}×{self.n_chips}: no feasible layout — {self.reason}"
        money = f", {_usd(self.usd)}" if self.usd is not None else ""
        return (f"train {self.chip}×{self.n_chips}: {self.layout}, {_days(self.seconds)} at {self.mfu:.0%} MFU"
                f"{money}, {self.bound}")

    def _remat_note(self) -> str:
        """Why a compute-bound roofline MFU is below 100%: the recomputed FLOPs count in the step, not in 6PB."""
        remat = self.estimate.config.remat if self.estimate is not None else "none"
        if remat == "none":
            return ""
        return f"; {remat.replace('_', ' ')} remat redoes forward FLOPs that the step pays for and the MFU does not count"

    def lines(self) -> list[str]:
        """The headline numbers, one per line (no reasons)."""
        unit = "GPUs" if get_chip(self.chip).kind == "gpu" else "chips"
        head = (f"{_n(self.n_chips)} {self.chip} {unit}, {format_count(self.tokens)} tokens, batch {format_count(self.batch_tokens)} "
                f"tokens in {self.seq_len}-token sequences")
        if not self.feasible:
            return [head, f"no feasible layout: {self.reason}"]
        out = [head,
               f"layout: {self.layout}",
               f"step: {format_time(self.step_time)}, {self.bound}, roofline MFU {self.roofline_mfu:.0%} "
               f"(an upper bound: peak FLOPs, perfect overlap{self._remat_note()})",
               f"memory: {format_bytes(self.memory_per_chip)} of {format_bytes(self.hbm_per_chip)} HBM per "
               f"{'GPU' if get_chip(self.chip).kind == 'gpu' else 'chip'}",
               f"time: {_days(self.seconds)} at {self.mfu:.0%} MFU ({format_count(self.chip_hours)} chip-hours)"]
        if self.usd is not None:
            out.append(f"cost: {_usd(self.usd)} at {_usd(get_chip(self.chip).price_per_hour_usd)}/chip-hour")
        return out


#: step times within this factor of the best count as a tie (the estimates are not that precise)
TIE = 1.005


def _versus(e: T.Estimate, best: T.Estimate) -> str:
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
_FAMILY_NAMES = {"dp": "data parallelism (ZeRO-0…2)", "fsdp": "FSDP (ZeRO-3)", "dp+tp": "data + tensor",
                 "fsdp+tp": "FSDP + tensor", "tp": "tensor alone", "pp": "with a pipeline"}


def layout_rows(plan: T.Plan, best: T.Estimate | None) -> tuple[LayoutRow, ...]:
    """The chosen layout and, for every other kind, its fastest feasible member against it, or — when no member
    fits — the leanest member's reason (book ch. 5–6 and 12: memory, divisibility, the batch)."""
    rows = []
    for fam, kind in _FAMILY_NAMES.items():
        ok = [e for e in plan.feasible if e.family == fam]
        if ok:
            e = ok[0]
            if best is not None and e is best:
                rows.insert(0, LayoutRow(kind, e.config.name, "chosen", e.step_time,
                                         f"fastest: {format_time(e.step_time)}/step, {_bound_label(e)}"))
                continue
            vs, tie = _versus(e, best), e.step_time / best.step_time < TIE
            rest = "; ties go to the higher ZeRO stage, then the most communication headroom" if tie else ""
            rows.append(LayoutRow(kind, e.config.name, "tie" if tie else "slower", e.step_time,
                                  f"{vs.removeprefix('is ')}: {format_time(e.step_time)}/step, {_bound_label(e)}{rest}"))
            continue
        tried = [e for e in plan.estimates if e.family == fam]
        if tried:
            lean = min(tried, key=lambda e: e.memory.total)
            rows.append(LayoutRow(kind, lean.config.name, "does not fit", None, lean.reason))
    return tuple(rows)


#: the kinds of layout the alternatives compare (`Estimate.family` without the ZeRO stage)
_GROUPS = {"data parallelism alone": ("dp", "fsdp"), "data + tensor parallelism": ("dp+tp", "fsdp+tp"),
           "tensor parallelism alone": ("tp",), "a pipeline": ("pp",)}


def _bound_label(e: T.Estimate) -> str:
    if e.bound == "compute":
        return "compute-bound"
    return "compute-bound (with a pipeline bubble)" if e.compute_bound else f"bound by {e.bound}"


def _leanest(plan: T.Plan) -> T.Estimate:
    """The infeasible layout that needs the least memory per chip (its reason says what is missing)."""
    return min(plan.estimates, key=lambda e: e.memory.total)


def _training_reasons(cfg, spec: ChipSpec, n: int, budget: Budget, plan: T.Plan | None, best: T.Estimate | None,
                      mfu: float | None, seconds: float | None, usd: float | None) -> list[str]:
    P = tf.param_count(cfg).total
    state = T.ADAM_BYTES_PER_PARAM * P
    need = T.min_chips_for_memory(state, spec)
    unit = "GPU" if spec.kind == "gpu" else "chip"
    out = [f"Memory: bf16 weights + fp32 Adam take {T.ADAM_BYTES_PER_PARAM} bytes × {format_count(P)} "
           f"parameters = {format_bytes(state)}; at {format_bytes(spec.hbm_bytes)} of HBM per {unit} that needs at "
           f"least {_n(need)} {unit}{'s' if need > 1 else ''} before activations (book ch. 6), "
           f"and the plan has {_n(n)}."]
    if best is None:
        lean = _leanest(plan)
        out.append(f"Fit: no layout fits; the leanest, {lean.config.name}, {lean.reason}. Activation checkpoints grow "
                   "with the batch: more chips or a smaller batch may fit.")
        return out
    per_chip = budget.batch_tokens / n
    rules = [x for x in _sentences(plan.explain())[1:] if not x.lower().startswith("best pure")]
    line = "Batch: " + (" ".join(rules) if rules else f"{per_chip:,.0f} tokens per chip.")
    if spec.kind == "tpu":
        axes = spec.ici_torus_dims or 1
        fsdp = T.dp_min_batch_per_chip(spec, axes)
        mixed = T.mixed_min_batch_per_chip(cfg.F, spec, max(axes - 1, 1), 1)
        if per_chip > fsdp:
            line += f" {per_chip:,.0f} > {fsdp:.0f}: FSDP alone can be compute-bound."
        elif per_chip > mixed:
            line += (f" {per_chip:,.0f} is too few for FSDP alone but enough for FSDP+TP: mixing in tensor "
                     "parallelism keeps the step compute-bound.")
        else:
            line += f" {per_chip:,.0f} is below both: every FSDP/TP layout is communication-bound at this batch."
    out.append(line)
    comms = {k: v for k, v in best.times.items() if k != "compute" and v > 0}
    if best.compute_bound:
        if comms:
            k = max(comms, key=comms.get)
            out.append(f"Bound: {best.config.name} is compute-bound — its slowest communication ({k}) needs "
                       f"{comms[k] / best.t_math:.0%} of the FLOPs time and hides under it, so the roofline MFU is "
                       f"{best.mfu:.0%}; real runs reach 40–60%.")
        else:
            out.append(f"Bound: {best.config.name} is compute-bound with no communication at all "
                       f"(roofline MFU {best.mfu:.0%}).")
    else:
        out.append(f"Bound: {best.config.name} is bound by {best.bound}: {best.step_time / best.t_math:.2f}× the "
                   f"FLOPs time, so even the roofline MFU is only {best.mfu:.0%}.")
    if best.memory.total > 0:
        out[-1] += f" It uses {format_bytes(best.memory.total)} of {format_bytes(spec.hbm_bytes)} per {unit}."
    alts = []
    for families in _GROUPS.values():   # one alternative per group of kinds
        if best.family in families:
            continue
        e = next((e for e in plan.feasible if e.family in families), None)
        if e is not None:
            # named by its own kind, as in the layouts table: "FSDP + tensor (FSDP 128 × TP 2)", not its group's
            alts.append(f"{_FAMILY_NAMES[e.family]} ({e.config.name}) {_versus(e, best)}, {_bound_label(e)}")
    out.append("Alternatives: " + "; ".join(alts) + "." if alts else
               "Alternatives: no layout of another kind fits.")
    tok = format_count(budget.train_tokens)
    capped = f" (the roofline allows only {best.mfu:.0%})" if mfu < budget.mfu else ""
    line = f"Time: {tok} tokens take {_days(seconds)} at {mfu:.0%} MFU{capped}"
    if budget.max_days is not None:
        limit = budget.max_days * _DAY
        if seconds <= limit:
            line += f"; within the {budget.max_days:g}-day deadline"
        else:
            ratio = seconds / limit
            more = math.ceil(n * ratio)
            pods = " — more than a pod: slices over DCN" if spec.kind == "tpu" and more > (spec.pod_chips or more) else ""
            faster = f" or {mfu * ratio:.0%} MFU" if mfu * ratio <= best.mfu else ""
            line += (f"; over the {budget.max_days:g}-day deadline: need ≈ {ratio:.2g}× the chips "
                     f"(≈ {_n(more)}{pods}){faster}")
    out.append(line + ".")
    if usd is None:
        cap = f", so the {_usd(budget.max_usd)} cap cannot be checked" if budget.max_usd is not None else ""
        out.append(f"Money: {spec.name} has no hourly price in the book{cap}.")
    else:
        line = (f"Money: {format_count(seconds / 3600 * n)} chip-hours at "
                f"{_usd(spec.price_per_hour_usd)}/h = {_usd(usd)}")
        if budget.max_usd is not None:
            if usd <= budget.max_usd:
                line += f"; within the {_usd(budget.max_usd)} cap"
            else:
                line += (f"; over the {_usd(budget.max_usd)} cap by {usd / budget.max_usd:.2g}× — more chips do not "
                         "help (same chip-hours), fewer tokens, a smaller model or a higher MFU do")
        out.append(line + ".")
    return out


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
    common = dict(model=cfg.name, chip=spec.name, n_chips=n, params=P, tokens=budget.train_tokens,
                  batch_tokens=budget.batch_tokens, seq_len=budget.seq_len, hbm_per_chip=spec.hbm_bytes)
    if not plan.feasible:
        lean = _leanest(plan)
        reason = (f"no layout of {cfg.name} fits {_n(n)} × {spec.name} with a {format_count(budget.batch_tokens)}-token batch; "
                  f"the leanest, {lean.config.name}, {lean.reason}")
        reasons = _training_reasons(cfg, spec, n, budget, plan, None, None, None, None)
        return TrainingSide(**common, feasible=False, reason=reason, layout=None, step_time=None,
                            roofline_mfu=None, bound=None, memory_per_chip=None, mfu=None, seconds=None,
                            chip_hours=None, usd=None, meets_deadline=None, meets_money=None, reasons=tuple(reasons),
                            layouts=layout_rows(plan, None))
    best = plan.best
    mfu = min(budget.mfu, best.mfu)
    seconds = T.training_time(P, budget.train_tokens, n, spec, mfu)
    chip_hours = seconds / 3600 * n
    usd = None if spec.price_per_hour_usd is None else chip_hours * spec.price_per_hour_usd
    reasons = _training_reasons(cfg, spec, n, budget, plan, best, mfu, seconds, usd)
    return TrainingSide(**common, feasible=True, reason="", layout=best.config.name, step_time=best.step_time,
                        roofline_mfu=best.mfu, bound=_bound_label(best), memory_per_chip=best.memory.total, mfu=mfu,
                        seconds=seconds, chip_hours=chip_hours, usd=usd,
                        meets_deadline=None if budget.max_days is None else seconds <= budget.max_days * _DAY,
                        meets_money=None if budget.max_usd is None or usd is None else usd <= budget.max_usd,
                        reasons=tuple(reasons), estimate=best, layouts=layout_rows(plan, best))


# --- serving -----------------------------------------------------------------------------------------------------------

_BOUND_WORDS = {"weights": "weight loads from HBM", "kv": "KV-cache loads from HBM", "compute": "matmul FLOPs",
                "ici": "the model-parallel collectives"}


@functools.lru_cache(maxsize=64)
def _serving(m: inf.ServedModel, chip: str, precision: str, S: float):
    """(plan on the smallest slice, frontier), cached for app redraws."""
    return sv.plan_serving(m, chip, None, precision, S), sv.frontier(m, chip, precision, S)


def _point(pt: sv.ServingPoint, plan_shapes: dict[int, tuple[int, ...]]) -> str:
    where = _slice(pt.n_chips, plan_shapes.get(pt.n_chips), get_chip(pt.step.chip).kind == "gpu")
    return f"B={pt.B:g} on {where}: {_ms(pt.latency)}/step, {_tps(pt.tokens_per_s_per_chip)} tokens/s/chip"


def _tps(x: float) -> str:
    """Tokens/s: 501.3 → '501', 11.41 → '11.4'."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


@dataclass(frozen=True)
class ServingSide:
    """The serving half of a `ModelPlan`: the smallest slice that holds the weights and one context, its batch
    range and best throughput, and the frontier's best point under the latency cap. Seconds, bytes, US dollars."""

    model: str
    chip: str
    precision: str
    S: float
    max_latency: float
    feasible: bool
    reason: str
    weight_bytes: float
    hbm_per_chip: float
    n_chips: int | None
    shape: tuple[int, ...] | None
    B_max: int | None
    B_crit: float
    max_throughput: sv.ServingPoint | None   # on the smallest slice
    best: sv.ServingPoint | None             # over every batch and slice, step ≤ max_latency
    fastest: sv.ServingPoint | None          # the lowest step time anywhere
    reasons: tuple[str, ...]
    frontier: sv.Frontier | None = field(default=None, repr=False, compare=False)
    plan: sv.ServingPlan | None = field(default=None, repr=False, compare=False)
    served: inf.ServedModel | None = field(default=None, repr=False, compare=False)

    @property
    def meets_latency(self) -> bool:
        return self.best is not None

    def at_batch(self, B: int) -> sv.ServingPoint:
        """The smallest slice's point at batch B (ch8.iq3: B = 32 on v5e 4x2 ≈ 17 ms/step, ≈ 235 tokens/s/chip).
        Raises ValueError when nothing is served or B is outside 1 … B_max."""
        if not self.feasible:
            raise ValueError(f"nothing to evaluate: {self.reason}")
        return sv.plan_serving(self.served, self.chip, self.n_chips, self.precision, self.S, batches=[B]).points[0]

    def _prec(self) -> str:
        """The precision with its meaning: 'int8 (int8 weights + KV, int8 math)' (`inference.Precision.label`)."""
        try:
            return inf.precision_label(self.precision)
        except ValueError:  # an unknown name (UnknownNameError) is reported by `reason`
            return str(self.precision)

    def _shapes(self) -> dict[int, tuple[int, ...]]:
        return {} if self.frontier is None else {p.n_chips: p.shape for p in self.frontier.plans}

    def headline(self) -> str:
        if not self.feasible:
            return f"serve {self.chip} {self._prec()}: cannot serve — {self.reason}"
        cap = _ms(self.max_latency)
        gpu = get_chip(self.chip).kind == "gpu"
        tail = (f"best ≤ {cap}: B={self.best.B:g} on {_chips(self.best.n_chips, gpu)}, "
                f"{_tps(self.best.tokens_per_s_per_chip)} tokens/s/chip" if self.best else
                f"nothing ≤ {cap} (fastest {_ms(self.fastest.latency)})")
        return f"serve {self.chip} {self._prec()}: {_slice(self.n_chips, self.shape, gpu)}, B≤{self.B_max}, {tail}"

    def lines(self) -> list[str]:
        head = f"{self.chip}, {self._prec()}, {self.S:g}-token context, latency cap {_ms(self.max_latency)}/step"
        if not self.feasible:
            return [head, f"cannot serve: {self.reason}"]
        sh = self._shapes()
        top = self.max_throughput
        out = [head,
               f"smallest slice: {_slice(self.n_chips, self.shape, get_chip(self.chip).kind == 'gpu')}, "
               f"batches 1 … {self.B_max}",
               f"its best throughput: {_point(top, sh)}" + _cost(top)]
        if self.best is not None:
            out.append(f"best under {_ms(self.max_latency)}: {_point(self.best, sh)}" + _cost(self.best))
        else:
            out.append(f"no configuration meets {_ms(self.max_latency)}; the fastest is {_point(self.fastest, sh)}")
        return out


def _cost(pt: sv.ServingPoint) -> str:
    c = pt.cost_per_million_tokens
    return "" if c is None else f", {_usd(c)}/1M tokens"


def _serving_reasons(m: inf.ServedModel, spec: ChipSpec, prec: inf.Precision, S: float, budget: Budget,
                     plan: sv.ServingPlan, f: sv.Frontier, best, fastest) -> list[str]:
    w = m.weight_bytes(prec)
    kv = inf.kv_cache_bytes(m, 1, S, prec)
    sh = {p.n_chips: p.shape for p in f.plans}
    out = [f"Memory: {prec.name} weights take {prec.weight_bytes:g} byte{'s' if prec.weight_bytes > 1 else ''} × "
           f"{format_count(m.params)} parameters = {format_bytes(w)}, plus {format_bytes(kv)} for one "
           f"{S:g}-token KV cache; at {format_bytes(spec.hbm_bytes)} per chip the smallest power-of-two slice is "
           f"{_slice(plan.n_chips, plan.shape, spec.kind == 'gpu')} (book ch. 8)."]
    top = plan.max_throughput
    if plan.B_max < plan.B_crit:
        out.append(f"Batch: that slice holds {plan.B_max} caches of {S:g} tokens beside the weights, below "
                   f"B_crit ≈ {plan.B_crit:.0f} where the weight matmuls turn compute-bound, so its steps stream the "
                   f"weights from HBM; its best is {_point(top, sh)}.")
    else:
        out.append(f"Batch: that slice holds {plan.B_max} caches of {S:g} tokens, past B_crit ≈ {plan.B_crit:.0f} "
                   f"where the weight matmuls turn compute-bound; its best is {_point(top, sh)}.")
    cap = _ms(budget.max_latency)
    if best is not None:
        bigger = " — a bigger slice splits the weight and KV loads over more chips" if best.n_chips > plan.n_chips else ""
        out.append(f"Latency: under {cap}/step the best of every batch and slice is {_point(best, sh)}, bound by "
                   f"{_BOUND_WORDS[best.bottleneck]}{bigger}.")
    else:
        out.append(f"Latency: no configuration meets {cap}/step; the fastest is {_point(fastest, sh)}, bound by "
                   f"{_BOUND_WORDS[fastest.bottleneck]} — use a smaller precision or accept a longer step.")
    chosen = best or top
    if spec.price_per_hour_usd is None:
        out.append(f"Money: {spec.name} has no price in the book, so no $/1M tokens.")
    else:
        out.append(f"Money: at {_usd(spec.price_per_hour_usd)}/chip-hour that point costs "
                   f"{_usd(chosen.cost_per_million_tokens)} per million generated tokens (decode only).")
    return out


def plan_serving_side(model="llama3-70b", chip="tpu-v5e", budget: Budget = Budget()) -> ServingSide:
    """The serving half: the smallest slice that holds the weights and one `serve_context` cache
    (`serving.plan_serving(..., slice_=None)`), its batch range and most-throughput point, and the frontier's best
    point under `max_latency` (book ch. 7–8). GPUs are served inside one NVLink node: power-of-two slices up to 8
    GPUs (64 of a GB200 NVL72's 72).

    Raises for bad input (unknown names, a precision the chip has no matmul peak for); returns an infeasible side,
    with the reason, when the model does not fit a pod or node.

    Book ch. 8: LLaMA 3-70B in int8 on v5e with an 8k context → 4x2 (8 chips); B = 32 there ≈ 17 ms/step and
    ≈ 235 tokens/s/chip (ch8.iq3).
    """
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget, got {type(budget).__name__}")
    cfg = tf.get_model(model)
    spec = get_chip(chip)
    prec = inf.get_precision(budget.serve_precision)
    spec.peak_flops(prec.compute_dtype)  # a precision the chip cannot compute in is bad input: raise here
    m = inf.served_model(cfg)
    S = float(budget.serve_context)
    common = dict(model=cfg.name, chip=spec.name, precision=prec.name, S=S, max_latency=budget.max_latency,
                  weight_bytes=m.weight_bytes(prec), hbm_per_chip=spec.hbm_bytes,
                  B_crit=inf.critical_batch(spec, prec))
    need = inf.min_chips(m, spec, prec, B=1, S=S)
    top = spec.pod_chips or spec.gpus_per_node or 8
    if need > top:
        unit = f"one {spec.name} pod ({top} chips)" if spec.kind == "tpu" else f"one {top}-GPU NVLink node"
        reason = (f"{prec.name} weights ({format_bytes(m.weight_bytes(prec))}) and one {S:g}-token cache need "
                  f"{_chips(need, spec.kind == 'gpu')}, more than {unit}; use a smaller precision or a bigger chip")
        return ServingSide(**common, feasible=False, reason=reason, n_chips=None, shape=None, B_max=None,
                           max_throughput=None, best=None, fastest=None, reasons=(f"Memory: {reason}.",))
    plan, f = _serving(m, spec.name, prec.name, S)
    best = f.best_under(budget.max_latency)
    fastest = min(f.points, key=lambda p: p.latency)
    reasons = _serving_reasons(m, spec, prec, S, budget, plan, f, best, fastest)
    return ServingSide(**common, feasible=True, reason="", n_chips=plan.n_chips, shape=plan.shape, B_max=plan.B_max,
                       max_throughput=plan.max_throughput, best=best, fastest=fastest, reasons=tuple(reasons),
                       frontier=f, plan=plan, served=m)


# --- both ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelPlan:
    """A training plan and a serving plan for one model and budget (`plan_model`)."""

    model: str
    params: float
    budget: Budget
    training: TrainingSide
    serving: ServingSide

    def report(self) -> str:
        """Both sides as text, one after the other: headline numbers, then the reasons as bullets."""
        title = f"Plan for {self.model} ({format_count(self.params)} parameters)"
        out = [title, "=" * len(title)]
        for name, side in (("Training", self.training), ("Serving", self.serving)):
            lines = side.lines()
            out += ["", f"{name}: {lines[0]}"] + [f"  {x}" for x in lines[1:]] + ["  why:"]
            out += [f"  - {r}" for r in side.reasons]
        return "\n".join(out)


def plan_model(model="llama3-70b", train_chip="tpu-v5p", serve_chip="tpu-v5e", budget: Budget = Budget()) -> ModelPlan:
    """Plan training on `train_chip` and serving on `serve_chip` for `model` (a preset name of
    `transformer.MODELS` or a `TransformerConfig`) within `budget`. Book ch. 11 (conclusion), putting ch. 5–8 and
    ch. 12 together: see `plan_training` and `plan_serving_side` for each half."""
    cfg = tf.get_model(model)
    return ModelPlan(cfg.name, tf.param_count(cfg).total, budget, plan_training(cfg, train_chip, budget),
                     plan_serving_side(cfg, serve_chip, budget))
