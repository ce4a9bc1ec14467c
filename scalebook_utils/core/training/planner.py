"""Training parallelism: the planner that ranks layouts of a whole training step (book ch. 5 and 6), and the
chapters' front door to ch. 5's closed-form costs.

Two layers of model:

1. The chapter's own model — the hardware ratios (`alpha`, `ici_bandwidth`, …), the compute-bound thresholds
   (`dp_min_batch_per_chip`, `tp_max_degree`, `mixed_min_batch_per_chip`, `fsdp_tp_degrees`, …), the per-layer
   MLP costs (`layer_costs`, `comms_ratio`, `step_collectives`), `bubble_fraction` and Adam/ZeRO memory
   (`training_memory`, `checkpoint_bytes`) — lives in `training_costs` (pure; the notation is in its
   docstring: B tokens, D, F, L; X data, Y TP, Z pipeline degrees; N = X·Y·Z; C; W_ici; M_X, M_Y; α = C/W_ici).
   Every public name of it, and `_tpu`, is re-exported here, so `training.alpha`, `training.layer_costs`, …
   work as before.
2. The planner, here: the same rules applied to a whole `TransformerConfig` — attention and MLP blocks,
   embeddings, MoE experts, pipeline bubbles, DCN across slices, Adam memory and activation checkpoints — to rank
   every configuration that fits a mesh and HBM by estimated step time. Its network-free parts (FLOPs, validity
   rules, memory) live in `training_layouts`, shared with the GPU planner (`gpu_training`, book ch. 12).

One entry point for both kinds of chip (issue 17): `plan(model, chip, n_chips=, batch_tokens=, seq_len=, …)`
ranks layouts and `evaluate_layout(model, chip, n_chips=, batch_tokens=, seq_len=, dp=, tp=, pp=, …)` estimates
one; a TPU gets ICI and DCN slices, a GPU an NVLink node and a fat tree (`gpu_training`). Both count memory as a
practitioner does by default (`training_layouts.MemoryOptions`: 16 B/param, activations per micro-batch and
tensor, 1F1B/interleaved/uneven pipelines) and as the book does with `conventions="book"`. The chapters' forms —
`plan(model, batch_tokens, chip, …)`, `evaluate(model, batch_tokens, Config(…), chip)` and `gpu_training`'s —
keep the book's conventions and numbers.

Overlap: like the book, communication on different axes and compute are assumed to overlap, so a step
takes max(T_math, T_comms on each axis) — a roofline (lower bound), not a simulation.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Iterable, Sequence

from scalebook_utils.core.training import schedules as PS
from scalebook_utils.core.training import layouts as TL
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
# book ch. 5's closed forms (training_costs), used below and re-exported for the chapters
from scalebook_utils.core.training.costs import (ACT_BYTES, ADAM_BYTES_PER_PARAM, OPTIMIZER_BYTES, PARAM_BYTES, STRATEGIES, Collective, LayerCosts, Memory, _tpu, all_comm_bound_batch, alpha, alpha_dcn, bubble_fraction, checkpoint_bytes, comms_ratio, dcn_bandwidth, dp_min_batch_per_chip, fsdp_min_batch_per_chip, fsdp_tp_degrees, ici_bandwidth, layer_costs, max_params_pure_dp, min_chips_for_memory, mixed_min_batch_per_chip, optimal_fsdp_degree, round_pow2, step_collectives, tp_max_degree, tp_min_F, training_memory, training_time, MemoryOptions, dp_bytes_per_param)
from scalebook_utils.core.training.layouts import CONVENTIONS, REMAT_POLICIES, CommLoad
from scalebook_utils.core.units import (format_bytes, format_si, format_time, is_int, require_bool, require_bytes, require_choices, require_int, require_positive)

CH5 = "book ch. 5 'How to Parallelize a Transformer for Training'"
CH6 = "book ch. 6 'Training LLaMA 3 on TPUs'"

__all__ = [
    # the planner (this module)
    "CH5", "CH6", "Config", "Estimate", "Plan", "REMAT_CHOICES", "evaluate", "evaluate_layout", "ici_axes", "plan",
    "CONVENTIONS", "REMAT_POLICIES", "MemoryOptions",
    # re-exported from training_costs (book ch. 5's closed forms)
    "STRATEGIES", "ADAM_BYTES_PER_PARAM", "PARAM_BYTES", "OPTIMIZER_BYTES", "ACT_BYTES",
    "ici_bandwidth", "dcn_bandwidth", "alpha", "alpha_dcn",
    "max_params_pure_dp", "dp_min_batch_per_chip", "fsdp_min_batch_per_chip", "tp_max_degree", "tp_min_F",
    "mixed_min_batch_per_chip", "optimal_fsdp_degree", "all_comm_bound_batch", "fsdp_tp_degrees",
    "min_chips_for_memory", "round_pow2", "training_time",
    "LayerCosts", "layer_costs", "comms_ratio", "Collective", "step_collectives", "bubble_fraction",
    "Memory", "checkpoint_bytes", "training_memory", "dp_bytes_per_param",
]


# --- the planner --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One way to lay out a training step: `slices` ICI slices joined by DCN (pure DP across them); inside a
    slice X data-parallel chips (ZeRO stage `zero`; 0 = plain DP, 3 = FSDP), Y-way TP, Z pipeline stages run by
    schedule `pipeline` ("gpipe", "1f1b", "interleaved" with `virtual_stages` chunks per device) over
    `microbatches` micro-batches per data shard, with `stage_layers` layers per (virtual) stage (None: even)."""

    X: int
    Y: int = 1
    Z: int = 1
    slices: int = 1
    zero: int = 3
    remat: str = "block"
    microbatches: int = 1
    pipeline: str = "1f1b"
    virtual_stages: int = 1
    stage_layers: tuple[int, ...] | None = None

    @property
    def chips(self) -> int:
        return self.X * self.Y * self.Z * self.slices

    @property
    def name(self) -> str:
        data = ("FSDP" if self.zero == 3 else "DP" if self.zero == 0 else f"DP+ZeRO-{self.zero}")
        parts = [f"{data} {self.X}"] if self.X > 1 else []
        if self.Y > 1:
            parts.append(f"TP {self.Y}")
        if self.Z > 1:
            parts.append(f"PP {self.Z}" + (f" interleaved ×{self.virtual_stages}" if self.virtual_stages > 1 else
                                           " GPipe" if self.pipeline == "gpipe" else "")
                         + (" uneven" if self.stage_layers is not None else ""))
        name = " × ".join(parts) or "1 chip"
        return f"{name} × {self.slices} slices (DCN)" if self.slices > 1 else name


@dataclass(frozen=True)
class Estimate:
    """A configuration's estimated step (seconds per step, per chip) and whether it is feasible.

    `reasons` are the sentences that make it infeasible (`reason` joins them); a layout that cannot run at all
    (degrees that do not multiply to the chips, TP that does not divide the heads, stages that do not cover the
    layers, micro-batches that do not divide the batch, a schedule it cannot run) has NaN times, MFU and memory —
    never a silent number. `memory` is the fullest chip's (under a pipeline: the fullest stage's, `worst_stage`).
    """

    config: Config
    feasible: bool
    reason: str
    t_math: float
    t_fsdp: float
    t_tp: float
    t_pp: float
    t_ep: float
    t_dcn: float
    bubble: float
    memory: Memory
    model_flops: float
    tokens_per_chip: float
    seq_shards: int
    chip: str
    peak_flops_per_s: float
    hardware_flops: float = math.nan
    reasons: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()
    conventions: str = "book"
    activation_parts: tuple[tuple[str, float], ...] = ()
    worst_stage: int = 0
    options_text: str = ""

    def __post_init__(self):
        if self.reasons is None:
            object.__setattr__(self, "reasons", tuple(r for r in self.reason.split("; ") if r))
        if self.hardware_flops != self.hardware_flops and self.t_math == self.t_math:
            # T_math · chips · C · (1 − bubble): the FLOPs executed, recompute included
            executed = self.t_math * self.config.chips * self.peak_flops_per_s * (1 - self.bubble)
            object.__setattr__(self, "hardware_flops", executed)

    @property
    def times(self) -> dict[str, float]:
        return {"compute": self.t_math, "DP/FSDP comms": self.t_fsdp, "TP comms": self.t_tp,
                "pipeline transfers": self.t_pp, "expert AllToAlls": self.t_ep, "DCN": self.t_dcn}

    @property
    def step_time(self) -> float:
        return max(self.times.values()) if self.t_math == self.t_math else math.nan

    step_s = step_time

    @property
    def bubble_fraction(self) -> float:
        """Idle fraction of the pipeline (0 without one); with uneven stages it includes their imbalance."""
        return self.bubble

    @property
    def memory_bytes_per_chip(self) -> float:
        return self.memory.total

    @property
    def memory_parts(self) -> dict[str, float]:
        """Bytes per chip: params, master, grads, optimizer, activations, gathered, and the activations by
        tensor family ("activations: attention", …) where the practitioner's convention counts them."""
        out = self.memory.as_dict()
        out.update({f"activations: {k}": v for k, v in self.activation_parts})
        return out

    @property
    def bound(self) -> str:
        """What sets the step time: 'compute' (with a pipeline: 'compute + pipeline bubble', since the idle
        stages are folded into T_math) or the name of the slowest communication; 'cannot run' for a layout
        that cannot run."""
        if self.step_time != self.step_time:
            return "cannot run"
        k = max(self.times, key=self.times.get)
        return "compute + pipeline bubble" if k == "compute" and self.bubble > 0 else k

    @property
    def compute_bound(self) -> bool:
        return self.bound.startswith("compute")

    @property
    def family(self) -> str:
        """'dp' (ZeRO 0–2), 'fsdp' (ZeRO-3), 'tp', 'dp+tp', 'fsdp+tp', or 'pp' (any layout with stages)."""
        c = self.config
        if c.Z > 1:
            return "pp"
        data = "fsdp" if c.zero == 3 else "dp"
        if c.Y > 1:
            return f"{data}+tp" if c.X > 1 else "tp"
        return data

    @property
    def mfu(self) -> float:
        """Roofline MFU: model FLOPs (≈ 6·P·tokens, no remat recompute) / (chips · C · step time).

        An upper bound: the step time assumes matmuls at peak and perfect overlap, so a compute-bound layout
        without remat or bubble reads 100%; real runs reach about 40–60% (the book's exercises assume 40–50%).
        """
        return self.model_flops / (self.config.chips * self.peak_flops_per_s * self.step_time)

    @property
    def hfu(self) -> float:
        """Roofline HFU: FLOPs executed, the remat recompute included, / (chips · C · step time) (≥ MFU)."""
        return self.hardware_flops / (self.config.chips * self.peak_flops_per_s * self.step_time)

    def summary(self) -> str:
        if not self.feasible:
            return f"{self.config.name}: infeasible — {self.reason}"
        return (f"{self.config.name} (ZeRO-{self.config.zero}, {self.config.remat} remat): "
                f"{format_time(self.step_time)}/step, MFU {self.mfu:.0%}, bound by {self.bound}, "
                f"{format_bytes(self.memory.total)}/{'GPU' if get_chip(self.chip).kind == 'gpu' else 'chip'}")

    def explain(self) -> str:
        """The estimate in sentences: the layout and schedule, step time, MFU and HFU, what bounds it, the
        memory per chip by part, and the conventions it counts with (or why it cannot run)."""
        c = self.config
        head = (f"{c.name} on {c.chips} × {self.chip} (ZeRO-{c.zero}, {c.remat} remat"
                + (f", {c.pipeline} schedule, m={c.microbatches} micro-batches" if c.Z > 1 or c.microbatches > 1
                   else "") + ")")
        if self.step_time != self.step_time:
            return f"{head} cannot run: " + "; ".join(self.reasons) + "."
        unit = "GPU" if get_chip(self.chip).kind == "gpu" else "chip"
        parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.memory.as_dict().items() if v)
        acts = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.activation_parts if v)
        text = (f"{head}: {format_time(self.step_time)} per step, roofline MFU {self.mfu:.1%}, HFU {self.hfu:.1%}, "
                f"bound by {self.bound}" + (f" (bubble {self.bubble:.1%})" if self.bubble else "") + ". "
                f"Memory per {unit}{f' (stage {self.worst_stage}, the fullest)' if c.Z > 1 else ''}: "
                f"{format_bytes(self.memory.total)} = {parts}" + (f"; activations: {acts}" if acts else "") + ".")
        if self.notes:
            text += " Note: " + "; ".join(self.notes) + "."
        if not self.feasible:
            text += " Infeasible: " + "; ".join(self.reasons) + "."
        text += (f" Conventions: {self.options_text}." if self.options_text else
                 " Conventions: the book's (10 B/param, activations of the whole batch, GPipe bubble).")
        return text


def ici_axes(chip, X: int, Y: int) -> tuple[int, int]:
    """(M_X, M_Y): hardware axes spanned by the data and TP shardings. Book ch. 5's simplification: TP on one
    axis (two if Y exceeds the longest axis), data parallelism on the rest; all axes when there is no TP.
    X and Y are positive integers (the data and TP degrees)."""
    spec = _tpu(chip)
    X, Y = require_int("X", X), require_int("Y", Y)
    n = spec.ici_torus_dims or 1
    if Y == 1:
        return n, 1
    longest = max(spec.pod_shape or (Y,))
    M_Y = 1 if Y <= longest else min(2, n)
    return max(n - M_Y, 1), M_Y


def evaluate(model, batch_tokens: float, config: Config, chip="tpu-v5p", *, seq_len: int = 4096,
             n_chips: int | None = None, allow_sequence_sharding: bool = True, grad_bytes: float = 0.0,
             dtype: str = "bf16") -> Estimate:
    """Estimate one configuration for `model` (a preset name or TransformerConfig) and a global batch of
    `batch_tokens` tokens in sequences of `seq_len`.

    Raises ValueError when the degrees do not multiply to `n_chips` (if given); returns an infeasible
    Estimate, with the reason, when the degrees do not divide the model (TP must divide N heads and F,
    PP must divide L), when the batch cannot give every data shard a token (more data shards than
    sequences needs sequence sharding, `seq_shards`; shards may be uneven, i.e. padded), or when the
    memory exceeds HBM.

    Per step and chip (L' = L/Z layers per stage, B_s = batch per slice, P parameters, P' = P/(Y·Z)):
      T_math = tokens · FLOPs/token (with remat) / (chips · C) / (1 − bubble)
      T_fsdp = 3 · 2P' / (W_ici · M_X) for FSDP (AllGather fwd + bwd, ReduceScatter), 2 · 2P' / (W M_X) for DP
      T_tp   = L' · 2 blocks · 12 · (B_s/X) · D / (W_ici · M_Y)   (the table's FSDP+TP row: 4BD/X forward +
               8BD/X backward per block, so backward/forward = 2 as for compute and the step's TP threshold is
               the forward one the book derives, Y < M_Y·F/α)
      T_dcn  = 2 · 2P / (chips per slice · W_dcn)                  (gradient AllReduce over DCN)
      T_ep   = MoE layers' 4 AllToAlls of k·(B_s/X)·D bf16, each ¼ of an AllGather (book ch. 4)
    """
    cfg = tf.get_model(model)
    spec = _tpu(chip)
    c = config
    _check_layout(c)
    if n_chips is not None and c.chips != n_chips:
        raise ValueError(f"degrees X·Y·Z·slices = {c.X}·{c.Y}·{c.Z}·{c.slices} = {c.chips} must equal the chip "
                         f"count {n_chips}")
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    grad_bytes = require_bytes("grad_bytes", grad_bytes)
    C = spec.peak_flops(dtype)
    reasons, seq_shards, tokens_per_shard = _reasons(cfg, c, batch_tokens, seq_len, allow_sequence_sharding)
    t_math, model_flops, bubble = _flops(cfg, batch_tokens, c, seq_len, C)
    times = _tpu_times(spec, cfg, c, TL.book_comm_load(cfg, c, tokens_per_shard))
    memory = _memory(cfg, c, batch_tokens, grad_bytes)
    reasons += _hbm_reasons(memory, spec)
    return Estimate(c, not reasons, "; ".join(reasons), t_math, *times, bubble, memory,
                    model_flops, batch_tokens / c.chips, seq_shards, spec.name, C)


def _tpu_times(spec: ChipSpec, cfg: tf.TransformerConfig, c: Config, load: CommLoad) -> tuple[float, ...]:
    """(T_fsdp, T_tp, T_pp, T_ep, T_dcn) on ICI and DCN for `load` (see `evaluate` for the formulas; the
    practitioner's load counts the busiest stage, its ZeRO collectives per micro-batch and v chunks)."""
    W = ici_bandwidth(spec)
    M_X, M_Y = ici_axes(spec, c.X, c.Y)
    T_s = load.tokens_per_shard
    t_fsdp = (load.dp_bytes + load.expert_bytes) / (W * M_X)
    t_tp = 0.0 if c.Y == 1 else load.tp_layers * 2 * 12 * T_s * cfg.D / (W * M_Y)
    t_pp = 0.0 if c.Z == 1 else load.pp_chunks * 2 * 2 * T_s * cfg.D / spec.ici_link_bandwidth_oneway_bytes_per_s
    ep = TL.ep_degree(cfg, c.X)
    t_ep = 0.0
    if cfg.is_moe and ep > 1:
        t_ep = load.moe_layers * 4 * ACT_BYTES * cfg.k * T_s * cfg.D * ep / (4 * W * M_X) / c.Y
    t_dcn = 0.0 if c.slices == 1 else load.dcn_bytes / dcn_bandwidth(spec)
    return t_fsdp, t_tp, t_pp, t_ep, t_dcn


# The chapters' names of the shared helpers (now public in `training_layouts`)
_check_layout, _reasons, _flops, _memory = TL.check_layout, TL.book_problems, TL.book_step_flops, TL.book_memory
_hbm_reasons, _ep_degree, _layers_per_stage, _layouts = TL.hbm_reasons, TL.ep_degree, TL.layers_per_stage, TL.layouts
_microbatches, _rank_key, _routed_expert_params = TL.pipeline_microbatches, TL.rank_key, TL.routed_expert_params
_remat_policy, _divisors = TL.remat_policy, TL.divisors


@dataclass(frozen=True)
class Plan:
    """Every configuration considered, fastest feasible first; `best` and `explain()` for the winner."""

    model: tf.TransformerConfig
    chip: str
    n_chips: int
    batch_tokens: float
    seq_len: int
    estimates: tuple[Estimate, ...]
    conventions: str = "book"
    options_text: str = ""

    @property
    def feasible(self) -> list[Estimate]:
        return [e for e in self.estimates if e.feasible]

    @property
    def best(self) -> Estimate:
        if not self.feasible:
            reasons = sorted({e.reason for e in self.estimates})[:3]
            raise ValueError(f"no configuration of {self.model.name} fits {self.n_chips} {self.chip} chips with a batch "
                             f"of {format_si(self.batch_tokens)} tokens; e.g. " + " | ".join(reasons))
        return self.feasible[0]

    def best_of(self, family: str) -> Estimate | None:
        """The fastest feasible estimate of one family (see `Estimate.family`), or None."""
        return next((e for e in self.feasible if e.family == family), None)

    def table(self, n: int = 10) -> list[dict]:
        rows = []
        for e in self.feasible[:n]:
            rows.append({"config": e.config.name, "zero": e.config.zero, "remat": e.config.remat,
                         "step_s": e.step_time, "mfu": e.mfu, "hfu": e.hfu, "bound": e.bound,
                         "memory_per_chip_bytes": e.memory.total, "tokens_per_chip": e.tokens_per_chip,
                         "pipeline": e.config.pipeline if e.config.Z > 1 else "", "microbatches": e.config.microbatches})
        return rows

    def explain(self) -> str:
        """Two or three sentences: the winner and what bounds it (the planner's own times), the chapter's
        rules of thumb at this batch per chip, and the best pure-FSDP alternative."""
        b = self.best
        spec = get_chip(self.chip)
        comms = {k: v for k, v in b.times.items() if k != "compute"}
        slowest = max(comms, key=comms.get)
        if b.compute_bound:
            why = (f"compute-bound (its slowest communication, {slowest}, needs {comms[slowest] / b.t_math:.0%} "
                   "of the compute time)" if comms[slowest] > 0 else "compute-bound (no communication)")
        else:
            why = f"bound by {b.bound} ({b.step_time / b.t_math:.2f}× the compute time)"
        unit = "GPU" if spec.kind == "gpu" else "chip"
        text = (f"{b.config.name} wins: {format_time(b.step_time)} per step at {b.mfu:.0%} MFU, {why}, "
                f"{format_bytes(b.memory.total)} per {unit}.")
        per_chip = self.batch_tokens / self.n_chips
        if spec.kind == "gpu":
            from scalebook_utils.core.gpu import training as gpu_training
            text += gpu_training.rules_of_thumb(self.model, spec, self.n_chips, b)
        else:
            n_axes = spec.ici_torus_dims or 1
            text += (f" Chapter 5's rules of thumb at {per_chip:.0f} tokens per chip: FSDP alone needs more than "
                     f"α/M_X = {dp_min_batch_per_chip(spec, n_axes):.0f}, FSDP+TP more than α²/(M_X·M_Y·F) = "
                     f"{mixed_min_batch_per_chip(self.model.F, spec, max(n_axes - 1, 1), 1):.0f}.")
        alt = self.best_of("fsdp")
        if alt is not None and alt is not b:
            text += f" Best pure FSDP: {alt.config.name}, {alt.step_time / b.step_time:.2f}× slower (bound by {alt.bound})."
        elif alt is None:
            fs = [e for e in self.estimates if e.family == "fsdp"]
            if fs:
                text += f" Pure FSDP is not an option here: {fs[0].reason}."
        if self.conventions == "practitioner":
            c, mb = b.config, self.batch_tokens / self.seq_len / (b.config.X * b.config.slices) / b.config.microbatches
            sched = (f"{c.pipeline} over {c.Z} stages" + (f" × {c.virtual_stages} virtual" if c.virtual_stages > 1
                     else "") + (f" (layers {_runs(c.stage_layers)})" if c.stage_layers else "")
                     + f", bubble {b.bubble:.0%}") if c.Z > 1 else "no pipeline"
            parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in b.memory.as_dict().items() if v)
            text += (f" The winner runs {c.microbatches} micro-batch{'es' if c.microbatches > 1 else ''} of "
                     f"{mb:g} sequence{'s' if mb != 1 else ''} per data shard, {sched}, "
                     f"{'no' if c.remat == 'none' else c.remat} recomputation (HFU {b.hfu:.0%}); per {unit}: {parts}. "
                     f"Defaults: {self.options_text}.")
        return text


REMAT_CHOICES = ("none", "big_matmuls", "block")


def _book_plan(model, batch_tokens: float, chip="tpu-v5p", *, n_chips: int | None = None, slices: int = 1,
         seq_len: int = 4096, max_tp: int = 64, max_pp: int = 16, zero_stages: Sequence[int] = (0, 1, 3),
         remat: Iterable = REMAT_CHOICES, microbatches_per_stage: int = 4, allow_sequence_sharding: bool = True,
         grad_bytes: float = 0.0, dtype: str = "bf16") -> Plan:
    """Enumerate the layouts of a training step and rank them by estimated step time (book ch. 5–6).

    `n_chips` per slice (default: the chip's full pod, 8960 for v5p) and `slices` joined by DCN. Every
    factorisation X·Y·Z = n_chips with Y ≤ max_tp, Z ≤ max_pp is tried with each ZeRO stage and remat policy;
    pipelines get `microbatches_per_stage`·Z microbatches (capped by the sequences per data shard).
    Infeasible layouts stay in the plan with their reason. ~10k estimates take well under a second.

    Arguments are checked first, each error naming the argument: n_chips is one slice, at most the chip's pod
    (more chips are `slices` joined by DCN); batch_tokens holds at least one sequence of seq_len tokens;
    max_tp, max_pp, microbatches_per_stage are integers ≥ 1; zero_stages (a stage or several of 0–3) and
    remat (a policy of REMAT_CHOICES, a number of checkpoints per layer, or several) must not be empty;
    grad_bytes is ≥ 0.
    """
    cfg = tf.get_model(model)
    spec = _tpu(chip)
    if n_chips is None:
        if spec.pod_chips is None:
            raise ValueError(f"{spec.name} has no pod size; pass n_chips")
        n_chips = spec.pod_chips
    if not is_int(n_chips) or n_chips < 1:
        raise ValueError(f"n_chips must be a positive integer, got {n_chips!r}")
    if spec.pod_chips is not None and n_chips > spec.pod_chips:
        raise ValueError(f"n_chips={n_chips} is more than one {spec.name} pod ({spec.pod_chips} chips); n_chips is "
                         "the chips of one ICI slice — join pods with slices=… (DCN, book ch. 5 'Scaling Across "
                         "Pods')")
    if not is_int(slices) or slices < 1:
        raise ValueError(f"slices must be a positive integer, got {slices!r}")
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    if batch_tokens < seq_len:
        raise ValueError(f"batch_tokens={batch_tokens:g} is less than one sequence of seq_len={seq_len:g} tokens; "
                         "a training batch is whole sequences (lower seq_len for short sequences)")
    max_tp = require_int("max_tp", max_tp)
    max_pp = require_int("max_pp", max_pp)
    microbatches_per_stage = require_int("microbatches_per_stage", microbatches_per_stage)
    grad_bytes = require_bytes("grad_bytes", grad_bytes)
    zero_stages = require_choices("zero_stages", zero_stages, "ZeRO stages (0 plain DP, 1, 2, 3 FSDP)", is_int)
    for z in zero_stages:
        require_int("each of zero_stages", z, 0, 3)
    remat = require_choices("remat", remat, f"remat policies ({', '.join(REMAT_CHOICES)}) or checkpoints per layer",
                            lambda r: isinstance(r, (str, int, float)))
    for r in remat:
        _remat_policy(r)
    estimates = []
    for X, Y, Z in _layouts(n_chips, max_tp, max_pp):
        mb = _microbatches(batch_tokens / slices, seq_len, X, Z, microbatches_per_stage)
        for zero in (zero_stages if X > 1 else (0,)):
            for r in remat:
                cfgn = Config(X=X, Y=Y, Z=Z, slices=slices, zero=zero, remat=r, microbatches=mb)
                estimates.append(evaluate(cfg, batch_tokens, cfgn, spec, seq_len=seq_len,
                                          allow_sequence_sharding=allow_sequence_sharding,
                                          grad_bytes=grad_bytes, dtype=dtype))
    estimates.sort(key=_rank_key)
    return Plan(cfg, spec.name, n_chips * slices, batch_tokens, seq_len, tuple(estimates))


# --- one entry point for TPUs and GPUs (issue 17) ---------------------------------------------------------

MEMORY_OPTIONS = tuple(f for f in MemoryOptions.__dataclass_fields__)


def plan(model, chip="tpu-v5p", *book_form, **options) -> Plan:
    """Rank the layouts of a training step on TPUs (ICI, DCN slices; book ch. 5–6) or GPUs (NVLink node, fat
    tree; ch. 12), chosen from the chip: `plan(model, chip, n_chips=, batch_tokens=, seq_len=, **options)`.

    `model`: a preset name or TransformerConfig; `chip`: a name or ChipSpec (unknown names list the close
    matches). `n_chips` is every chip (TPUs beyond one pod are split into DCN `slices`, default the fewest that
    fit). Every X·Y·Z layout (Y ≤ `max_tp`, default 64 on TPUs and one NVLink node on GPUs; Z ≤ `max_pp`,
    default 64) is tried with each ZeRO stage (`zero_stages`, default 0–3), remat policy (`remat`, default
    none, selective, full), schedule (`pipelines`, default 1F1B and interleaved with `virtual_stages` 2, 4 or 8
    chunks; "gpipe" on request; L that does not split evenly gets `balanced_stage_layers`) and number of
    micro-batches m (the divisors of a data shard's sequences: the fewest that fit without a pipeline, the most
    with one and ZeRO ≤ 1, all of them with ZeRO ≥ 2, where the collectives grow with m); each layout keeps its
    best m. Memory options (`MemoryOptions` fields: param_bytes, master_bytes, optimizer_bytes, grad_bytes,
    activation_bytes, logits_bytes, sequence_parallel, flash_attention) default to the practitioner's
    (stated in `explain()`); `conventions="book"` plans as the chapters do (`plan(model, batch_tokens, chip)`,
    `gpu_training.plan`), reproducing every book number.

    The chapters' form `plan(model, batch_tokens, chip="tpu-v5p", *, n_chips=None, slices=1, seq_len=4096,
    max_tp=64, max_pp=16, zero_stages=(0, 1, 3), remat=REMAT_CHOICES, microbatches_per_stage=4,
    allow_sequence_sharding=True, grad_bytes=0.0, dtype="bf16")` — a number as the second argument — is the
    book's TPU planner, unchanged (n_chips per slice, GPipe microbatches, 10 B/param).
    """
    if isinstance(chip, numbers.Real) and not isinstance(chip, bool):
        return _book_plan(model, chip, *book_form, **options)
    if book_form:
        raise TypeError("plan(model, chip, *, n_chips=, batch_tokens=, seq_len=, ...) takes the model and the chip "
                        "as its only positional arguments (the book's form is plan(model, batch_tokens, chip))")
    return _plan(model, chip, **options)


def _plan(model, chip, *, n_chips, batch_tokens, seq_len, conventions="practitioner", slices=None, max_tp=None,
          max_pp=None, zero_stages=None, remat=None, pipelines=("1f1b", "interleaved"), virtual_stages=(2, 4, 8),
          dtype="bf16", **options) -> Plan:
    cfg, spec, conventions = tf.get_model(model), get_chip(chip), _conventions(conventions)
    n_chips = require_int("n_chips", n_chips)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    slices = _slices(spec, n_chips, slices)
    if conventions == "book":
        kw = {k: v for k, v in (("max_tp", max_tp), ("max_pp", max_pp), ("zero_stages", zero_stages),
                                ("remat", remat)) if v is not None}
        if spec.kind == "gpu":
            from scalebook_utils.core.gpu import training as gpu_training
            if slices != 1:
                raise ValueError("GPU clusters are one fat tree: slices must be 1")
            p = gpu_training.plan(cfg, batch_tokens, spec, n_gpus=n_chips, seq_len=seq_len, dtype=dtype, **kw, **options)
        else:
            p = _book_plan(cfg, batch_tokens, spec, n_chips=n_chips // slices, slices=slices, seq_len=seq_len,
                           dtype=dtype, **kw, **options)
        return p
    st = _setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, options)
    max_tp = require_int("max_tp", max_tp if max_tp is not None else (spec.gpus_per_node if st.gpu else 64))
    max_pp = require_int("max_pp", 64 if max_pp is None else max_pp)
    zero_stages = require_choices("zero_stages", (0, 1, 2, 3) if zero_stages is None else zero_stages,
                                  "ZeRO stages (0 plain DP, 1, 2, 3 FSDP)", is_int)
    for z in zero_stages:
        require_int("each of zero_stages", z, 0, 3)
    remats = [TL.remat_name(r) for r in require_choices("remat", REMAT_POLICIES if remat is None else remat,
                                                        "remat policies (none, selective, full)",
                                                        lambda r: isinstance(r, str))]
    kinds = [TL.schedule_name(k) for k in require_choices("pipelines", pipelines, "schedules (gpipe, 1f1b, "
                                                          "interleaved)", lambda k: isinstance(k, str))]
    vs = [require_int("each of virtual_stages", v, 2) for v in require_choices("virtual_stages", virtual_stages,
                                                                               "chunks per device (≥ 2)", is_int)]
    estimates = []
    for X, Y, Z in TL.layouts(n_chips // slices, max_tp, max_pp):
        dp = X * slices
        first = Config(X=X, Y=Y, Z=Z, slices=slices, zero=0, remat=remats[0],
                       microbatches=TL.default_microbatches(batch_tokens, seq_len, dp, Z),
                       stage_layers=None if cfg.L % Z == 0 or Z > cfg.L else PS.balanced_stage_layers(cfg.L, Z))
        shape = TL.practitioner_shape(cfg, first, batch_tokens, seq_len)
        if shape.reasons:  # the degrees themselves cannot run (heads, batch split, too many stages): one entry
            estimates.append(_cannot_run(st, first, shape.reasons, shape.notes))
            continue
        for first_feasible, group in TL.layout_groups(cfg, first, batch_tokens, seq_len, zero_stages=zero_stages,
                                                      remats=remats, kinds=kinds, virtual_stages=vs):
            best = None
            for kw in group:
                e = _practitioner(st, Config(**kw))
                if best is None or (not e.feasible, _finite(e.step_time), kw["microbatches"]) < \
                        (not best.feasible, _finite(best.step_time), best.config.microbatches):
                    best = e
                if first_feasible and e.feasible:
                    break
            estimates.append(best)
    estimates.sort(key=TL.rank_key)
    return Plan(cfg, spec.name, n_chips, batch_tokens, seq_len, tuple(estimates), "practitioner",
                st.options.describe())


def evaluate_layout(model, chip, *, n_chips, batch_tokens, seq_len, dp, tp=1, pp=1, zero=1, remat="none",
                    microbatches=None, pipeline="1f1b", virtual_stages=1, stage_layers=None,
                    conventions="practitioner", slices=None, dtype="bf16", **options) -> Estimate:
    """Estimate the layout a user names: dp data shards (ZeRO stage `zero`; on TPUs split over DCN `slices`),
    tp-way TP, pp pipeline stages run by `pipeline` ("1f1b", "interleaved" with `virtual_stages` chunks per
    device, "gpipe") over `microbatches` micro-batches per data shard (None: one sequence each with a pipeline,
    1 without), `stage_layers` layers per stage (or per virtual stage; None: even), remat "none", "selective"
    or "full" (the book's names too). TPU or GPU from the chip; model and chip as in `plan`.

    Returns an `Estimate` (feasible, reasons, step_s, mfu, hfu, bubble_fraction, memory_bytes_per_chip,
    memory_parts, bound, explain()). A layout that cannot run — dp·tp·pp ≠ n_chips, TP that does not divide the
    query heads or F or does not fit the KV heads, stages that do not cover the layers, micro-batches that do not
    divide a data shard's sequences, a schedule the layout cannot run — is infeasible with its reasons and NaN
    numbers; one that runs but does not fit is infeasible with its numbers. Memory options and conventions as in
    `plan` (`conventions="book"`: the chapters' `evaluate` / `gpu_training.evaluate`, reproducing the book).
    """
    cfg, spec, conventions = tf.get_model(model), get_chip(chip), _conventions(conventions)
    n_chips = require_int("n_chips", n_chips)
    dp, tp, pp = (require_int(k, v) for k, v in (("dp", dp), ("tp", tp), ("pp", pp)))
    zero = require_int("zero", zero, 0, 3)
    v = require_int("virtual_stages", virtual_stages)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    kind = TL.schedule_name(pipeline)
    if conventions == "book" and not isinstance(remat, str):
        r = remat
        TL.remat_policy(r)
    else:
        r = TL.remat_name(remat)
    m = TL.default_microbatches(batch_tokens, seq_len, dp, pp) if microbatches is None else \
        require_int("microbatches", microbatches)
    layers = None if stage_layers is None else tuple(stage_layers) if hasattr(stage_layers, "__iter__") \
        else stage_layers
    slices = _slices(spec, n_chips, slices, dp)
    reasons = []
    if dp * tp * pp != n_chips:
        reasons.append(f"dp × tp × pp = {dp} × {tp} × {pp} = {dp * tp * pp} is not the {n_chips} chips")
    if dp % slices:
        reasons.append(f"dp={dp} does not split over {slices} DCN slices")
    c = Config(X=max(dp // slices, 1), Y=tp, Z=pp, slices=slices, zero=zero, remat=r, microbatches=m,
               pipeline=kind, virtual_stages=v, stage_layers=layers)
    if conventions == "book":
        if reasons or stage_layers is not None:
            return _cannot_run(_setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, {}, book=True), c,
                               reasons or ["uneven stage_layers are beyond the book's model; use conventions="
                                           "'practitioner'"], ())
        extra = sorted(set(options) - {"grad_bytes", "allow_sequence_sharding"})
        if extra:
            raise TypeError(f"conventions='book' counts memory the book's way: {', '.join(extra)} "
                            f"{'is' if len(extra) == 1 else 'are'} not among its options (grad_bytes, "
                            "allow_sequence_sharding)")
        r_book = TL.BOOK_REMAT.get(r, r) if isinstance(r, str) else r
        c = Config(X=c.X, Y=tp, Z=pp, slices=slices, zero=zero, remat=r_book, microbatches=m, pipeline=kind,
                   virtual_stages=v)
        if spec.kind == "gpu":
            from scalebook_utils.core.gpu import training as gpu_training
            return gpu_training.evaluate(cfg, batch_tokens, c, spec, seq_len=seq_len, dtype=dtype, **options)
        return evaluate(cfg, batch_tokens, c, spec, seq_len=seq_len, dtype=dtype, **options)
    st = _setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, options)
    if reasons:
        return _cannot_run(st, c, reasons, ())
    return _practitioner(st, c)


@dataclass(frozen=True)
class _Setting:
    """What every layout of one planning question shares: model, chip, batch, memory options, the network."""

    cfg: tf.TransformerConfig
    spec: ChipSpec
    terms: TL.ModelTerms | None
    batch_tokens: float
    seq_len: float
    C: float
    options: MemoryOptions
    gpu: bool
    cluster: object = None
    n: int = 0
    options_text: str = ""


def _setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, options, book=False) -> _Setting:
    unknown = sorted(set(options) - set(MEMORY_OPTIONS))
    if unknown:
        raise TypeError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; memory options: "
                        f"{', '.join(MEMORY_OPTIONS)}")
    gpu = spec.kind == "gpu"
    cluster = n = None
    if gpu:
        from scalebook_utils.core.gpu import training as gpu_training
        cluster = gpu_training.training_cluster(spec, n_chips)
        n = cluster.require_gpus(n_chips)
    else:
        _tpu(spec)
    for k in ("sequence_parallel", "flash_attention"):
        if k in options:
            require_bool(k, options[k])
    terms = None if book else TL.model_terms(cfg, float(seq_len))
    opts = MemoryOptions(**options)
    return _Setting(cfg, spec, terms, batch_tokens, seq_len, spec.peak_flops(dtype), opts, gpu, cluster, n or 0,
                    opts.describe())


def _practitioner(st: _Setting, c: Config) -> Estimate:
    """One layout under the practitioner's conventions (`training_layouts`), timed on the chip's network."""
    shape = TL.practitioner_shape(st.cfg, c, st.batch_tokens, st.seq_len)
    if shape.reasons:
        return _cannot_run(st, c, shape.reasons, shape.notes)
    t_math, model_flops, executed, bubble = TL.practitioner_flops(st.terms, c, shape, c.remat, st.C)
    memory, acts, worst = TL.practitioner_memory(st.terms, c, shape, c.remat, st.options)
    load = TL.practitioner_comm_load(st.terms, c, shape, st.options)
    if st.gpu:
        from scalebook_utils.core.gpu import training as gpu_training
        times = (*gpu_training.layout_times(st.cfg, c, load, st.n, st.cluster), 0.0)
    else:
        times = _tpu_times(st.spec, st.cfg, c, load)
    reasons = TL.hbm_reasons(memory, st.spec, "GPU" if st.gpu else "chip")
    return Estimate(c, not reasons, "; ".join(reasons), t_math, *times, bubble, memory, model_flops,
                    st.batch_tokens / c.chips, 1, st.spec.name, st.C, hardware_flops=executed, notes=shape.notes,
                    conventions="practitioner", activation_parts=tuple(acts.items()), worst_stage=worst,
                    options_text=st.options_text)


def _cannot_run(st: _Setting, c: Config, reasons, notes) -> Estimate:
    nan = math.nan
    return Estimate(c, False, "; ".join(reasons), nan, nan, nan, nan, nan, nan, nan, Memory(nan, nan, nan, nan),
                    nan, st.batch_tokens / c.chips, 1, st.spec.name, st.C, hardware_flops=nan, reasons=tuple(reasons),
                    notes=tuple(notes), conventions="book" if st.terms is None else "practitioner",
                    options_text="" if st.terms is None else st.options_text)


def _conventions(conventions) -> str:
    if conventions not in CONVENTIONS:
        raise ValueError(f"conventions must be one of {', '.join(CONVENTIONS)}, got {conventions!r}")
    return conventions


def _slices(spec: ChipSpec, n_chips: int, slices, dp: int | None = None) -> int:
    """DCN slices: 1 on GPUs and for TPUs within one pod; else the fewest that divide n_chips (and dp) into pods."""
    if slices is not None:
        slices = require_int("slices", slices)
        if spec.kind == "gpu" and slices != 1:
            raise ValueError("GPU clusters are one fat tree: slices must be 1")
        if n_chips % slices:
            raise ValueError(f"slices={slices} must divide n_chips={n_chips}")
        return slices
    pod = spec.pod_chips
    if spec.kind == "gpu" or pod is None or n_chips <= pod:
        return 1
    for s in range(math.ceil(n_chips / pod), n_chips + 1):
        if n_chips % s == 0 and (dp is None or dp % s == 0):
            return s
    return n_chips


def _runs(xs) -> str:
    """1, 1, 1, 2 → "1 ×3, 2" (a stage list in a sentence)."""
    out, i = [], 0
    while i < len(xs):
        j = i
        while j < len(xs) and xs[j] == xs[i]:
            j += 1
        out.append(f"{xs[i]}" + (f" ×{j - i}" if j - i > 1 else ""))
        i = j
    return ", ".join(out)


def _finite(x: float) -> float:
    return x if x == x else math.inf
