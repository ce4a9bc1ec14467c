"""One training layout and its estimate (book ch. 5–6): `Config` (X data × Y TP × Z pipeline chips per slice,
joined by DCN `slices`; ZeRO stage, remat, schedule, micro-batches), `Estimate` (step time, MFU and HFU, what
bounds it, memory per chip, `explain()`), and the book's estimate of one layout on TPUs (`evaluate`, with the ICI
and DCN times of `tpu_times`). Part of `training`, which re-exports `Config`, `Estimate`, `evaluate`, `ici_axes`.

Overlap: like the book, communication on different axes and compute are assumed to overlap, so a step
takes max(T_math, T_comms on each axis) — a roofline (lower bound), not a simulation. Letters and units as in
`training_costs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.training import layouts as TL
from scalebook_utils.core.training.costs import dcn_bandwidth, ici_bandwidth, tpu_spec
from scalebook_utils.core.training.zero_memory import ACT_BYTES, Memory
from scalebook_utils.core.units import format_bytes, format_time, require_bytes, require_int, require_positive

__all__ = ["Config", "Estimate", "evaluate", "ici_axes", "tpu_times"]


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
        data = "FSDP" if self.zero == 3 else "DP" if self.zero == 0 else f"DP+ZeRO-{self.zero}"
        parts = [f"{data} {self.X}"] if self.X > 1 else []
        if self.Y > 1:
            parts.append(f"TP {self.Y}")
        if self.Z > 1:
            parts.append(
                f"PP {self.Z}"
                + (
                    f" interleaved ×{self.virtual_stages}"
                    if self.virtual_stages > 1
                    else " GPipe"
                    if self.pipeline == "gpipe"
                    else ""
                )
                + (" uneven" if self.stage_layers is not None else "")
            )
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
        return {
            "compute": self.t_math,
            "DP/FSDP comms": self.t_fsdp,
            "TP comms": self.t_tp,
            "pipeline transfers": self.t_pp,
            "expert AllToAlls": self.t_ep,
            "DCN": self.t_dcn,
        }

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
        return (
            f"{self.config.name} (ZeRO-{self.config.zero}, {self.config.remat} remat): "
            f"{format_time(self.step_time)}/step, MFU {self.mfu:.0%}, bound by {self.bound}, "
            f"{format_bytes(self.memory.total)}/{'GPU' if get_chip(self.chip).kind == 'gpu' else 'chip'}"
        )

    def explain(self) -> str:
        """The estimate in sentences: the layout and schedule, step time, MFU and HFU, what bounds it, the
        memory per chip by part, and the conventions it counts with (or why it cannot run)."""
        c = self.config
        head = (
            f"{c.name} on {c.chips} × {self.chip} (ZeRO-{c.zero}, {c.remat} remat"
            + (f", {c.pipeline} schedule, m={c.microbatches} micro-batches" if c.Z > 1 or c.microbatches > 1 else "")
            + ")"
        )
        if self.step_time != self.step_time:
            return f"{head} cannot run: " + "; ".join(self.reasons) + "."
        unit = "GPU" if get_chip(self.chip).kind == "gpu" else "chip"
        parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.memory.as_dict().items() if v)
        acts = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.activation_parts if v)
        text = (
            f"{head}: {format_time(self.step_time)} per step, roofline MFU {self.mfu:.1%}, HFU {self.hfu:.1%}, "
            f"bound by {self.bound}" + (f" (bubble {self.bubble:.1%})" if self.bubble else "") + ". "
            f"Memory per {unit}{f' (stage {self.worst_stage}, the fullest)' if c.Z > 1 else ''}: "
            f"{format_bytes(self.memory.total)} = {parts}" + (f"; activations: {acts}" if acts else "") + "."
        )
        if self.notes:
            text += " Note: " + "; ".join(self.notes) + "."
        if not self.feasible:
            text += " Infeasible: " + "; ".join(self.reasons) + "."
        text += (
            f" Conventions: {self.options_text}."
            if self.options_text
            else " Conventions: the book's (10 B/param, activations of the whole batch, GPipe bubble)."
        )
        return text


def ici_axes(chip, X: int, Y: int) -> tuple[int, int]:
    """(M_X, M_Y): hardware axes spanned by the data and TP shardings. Book ch. 5's simplification: TP on one
    axis (two if Y exceeds the longest axis), data parallelism on the rest; all axes when there is no TP.
    X and Y are positive integers (the data and TP degrees)."""
    spec = tpu_spec(chip)
    X, Y = require_int("X", X), require_int("Y", Y)
    n = spec.ici_torus_dims or 1
    if Y == 1:
        return n, 1
    longest = max(spec.pod_shape or (Y,))
    M_Y = 1 if Y <= longest else min(2, n)
    return max(n - M_Y, 1), M_Y


def evaluate(
    model,
    batch_tokens: float,
    config: Config,
    chip="tpu-v5p",
    *,
    seq_len: int = 4096,
    n_chips: int | None = None,
    allow_sequence_sharding: bool = True,
    grad_bytes: float = 0.0,
    dtype: str = "bf16",
) -> Estimate:
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
    spec = tpu_spec(chip)
    c = config
    TL.check_layout(c)
    if n_chips is not None and c.chips != n_chips:
        raise ValueError(
            f"degrees X·Y·Z·slices = {c.X}·{c.Y}·{c.Z}·{c.slices} = {c.chips} must equal the chip count {n_chips}"
        )
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    grad_bytes = require_bytes("grad_bytes", grad_bytes)
    C = spec.peak_flops(dtype)
    reasons, seq_shards, tokens_per_shard = TL.book_problems(cfg, c, batch_tokens, seq_len, allow_sequence_sharding)
    t_math, model_flops, bubble = TL.book_step_flops(cfg, batch_tokens, c, seq_len, C)
    times = tpu_times(spec, cfg, c, TL.book_comm_load(cfg, c, tokens_per_shard))
    memory = TL.book_memory(cfg, c, batch_tokens, grad_bytes)
    reasons += TL.hbm_reasons(memory, spec)
    return Estimate(
        c,
        not reasons,
        "; ".join(reasons),
        t_math,
        *times,
        bubble,
        memory,
        model_flops,
        batch_tokens / c.chips,
        seq_shards,
        spec.name,
        C,
    )


def tpu_times(spec: ChipSpec, cfg: tf.TransformerConfig, c: Config, load: TL.CommLoad) -> tuple[float, ...]:
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
