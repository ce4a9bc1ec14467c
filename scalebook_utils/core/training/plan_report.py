"""The `Plan` a training planner returns (book ch. 5–6; ch. 12 on GPUs): every layout it considered, fastest
feasible first, and `explain()`, the report in words.

`best`, `best_of(family)` and `table(n)` read the ranked estimates; `explain()` says the winner and what bounds
it (the planner's own times: compute-bound when T_math ≥ every T_comms, else bound by the slowest axis), the
chapter's rules of thumb at this batch per chip (α/M_X for FSDP, α²/(M_X·M_Y·F) for FSDP + TP on TPUs; ch. 12's
on GPUs), the best pure-FSDP alternative, and with the practitioner's conventions the winner's micro-batches,
schedule, recomputation and memory per chip.

Letters as in `training_costs`: X data, Y TP, Z pipeline degrees per slice, F = d_ff, α = C / W_ici. Built by
`training.plan` (the TPU and unified searches) and `gpu_training.plan`; part of `training`, which re-exports
`Plan`. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training.costs import dp_min_batch_per_chip, mixed_min_batch_per_chip
from scalebook_utils.core.training.estimate import Estimate
from scalebook_utils.core.units import format_bytes, format_si, format_time

__all__ = ["Plan"]


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
            raise ValueError(
                f"no configuration of {self.model.name} fits {self.n_chips} {self.chip} chips with a "
                f"batch of {format_si(self.batch_tokens)} tokens; e.g. " + " | ".join(reasons)
            )
        return self.feasible[0]

    def best_of(self, family: str) -> Estimate | None:
        """The fastest feasible estimate of one family (see `Estimate.family`), or None."""
        return next((e for e in self.feasible if e.family == family), None)

    def table(self, n: int = 10) -> list[dict]:
        rows = []
        for e in self.feasible[:n]:
            rows.append(
                {
                    "config": e.config.name,
                    "zero": e.config.zero,
                    "remat": e.config.remat,
                    "step_s": e.step_time,
                    "mfu": e.mfu,
                    "hfu": e.hfu,
                    "bound": e.bound,
                    "memory_per_chip_bytes": e.memory.total,
                    "tokens_per_chip": e.tokens_per_chip,
                    "pipeline": e.config.pipeline if e.config.Z > 1 else "",
                    "microbatches": e.config.microbatches,
                }
            )
        return rows

    def explain(self) -> str:
        """Two or three sentences: the winner and what bounds it (the planner's own times), the chapter's
        rules of thumb at this batch per chip, and the best pure-FSDP alternative."""
        b = self.best
        spec = get_chip(self.chip)
        comms = {k: v for k, v in b.times.items() if k != "compute"}
        slowest = max(comms, key=comms.get)
        if b.compute_bound:
            why = (
                f"compute-bound (its slowest communication, {slowest}, needs {comms[slowest] / b.t_math:.0%} "
                "of the compute time)"
                if comms[slowest] > 0
                else "compute-bound (no communication)"
            )
        else:
            why = f"bound by {b.bound} ({b.step_time / b.t_math:.2f}× the compute time)"
        unit = "GPU" if spec.kind == "gpu" else "chip"
        text = (
            f"{b.config.name} wins: {format_time(b.step_time)} per step at {b.mfu:.0%} MFU, {why}, "
            f"{format_bytes(b.memory.total)} per {unit}."
        )
        per_chip = self.batch_tokens / self.n_chips
        if spec.kind == "gpu":
            from scalebook_utils.core.gpu import training as gpu_training

            text += gpu_training.rules_of_thumb(self.model, spec, self.n_chips, b)
        else:
            n_axes = spec.ici_torus_dims or 1
            text += (
                f" Chapter 5's rules of thumb at {per_chip:.0f} tokens per chip: FSDP alone needs more than "
                f"α/M_X = {dp_min_batch_per_chip(spec, n_axes):.0f}, FSDP+TP more than α²/(M_X·M_Y·F) = "
                f"{mixed_min_batch_per_chip(self.model.F, spec, max(n_axes - 1, 1), 1):.0f}."
            )
        alt = self.best_of("fsdp")
        if alt is not None and alt is not b:
            text += (
                f" Best pure FSDP: {alt.config.name}, {alt.step_time / b.step_time:.2f}× slower (bound by {alt.bound})."
            )
        elif alt is None:
            fs = [e for e in self.estimates if e.family == "fsdp"]
            if fs:
                text += f" Pure FSDP is not an option here: {fs[0].reason}."
        if self.conventions == "practitioner":
            c, mb = b.config, self.batch_tokens / self.seq_len / (b.config.X * b.config.slices) / b.config.microbatches
            sched = (
                (
                    f"{c.pipeline} over {c.Z} stages"
                    + (f" × {c.virtual_stages} virtual" if c.virtual_stages > 1 else "")
                    + (f" (layers {_runs(c.stage_layers)})" if c.stage_layers else "")
                    + f", bubble {b.bubble:.0%}"
                )
                if c.Z > 1
                else "no pipeline"
            )
            parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in b.memory.as_dict().items() if v)
            text += (
                f" The winner runs {c.microbatches} micro-batch{'es' if c.microbatches > 1 else ''} of "
                f"{mb:g} sequence{'s' if mb != 1 else ''} per data shard, {sched}, "
                f"{'no' if c.remat == 'none' else c.remat} recomputation (HFU {b.hfu:.0%}); per {unit}: {parts}. "
                f"Defaults: {self.options_text}."
            )
        return text


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
