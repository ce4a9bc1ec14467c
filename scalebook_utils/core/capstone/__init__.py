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

The halves live in this folder, each importing only the ones before it: `text` (how numbers are written),
`budget` (`Budget`), `layouts` (the layout table), `training` (`plan_training`, its reasons as small rules),
`serving` (`plan_serving_side`); this front door (the public name `capstone`) re-exports their names and
joins the halves (`ModelPlan`, `plan_model`).
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.capstone import serving as _serving_half
from scalebook_utils.core.capstone import training as _training_half
from scalebook_utils.core.capstone.budget import Budget
from scalebook_utils.core.capstone.layouts import TIE, LayoutRow, layout_rows
from scalebook_utils.core.capstone.serving import ServingSide, plan_serving_side
from scalebook_utils.core.capstone.text import (
    chips_text,
    days_text,
    ms_text,
    number_text,
    slice_text,
    tokens_per_s_text,
    usd_text,
)
from scalebook_utils.core.capstone.training import (
    DEFAULT_GPU_TRAIN_CHIPS,
    MAX_GPU_TRAIN_CHIPS,
    TrainingSide,
    plan_training,
    train_chip_count,
)
from scalebook_utils.core.units import format_count

__all__ = [
    "Budget",
    "TrainingSide",
    "LayoutRow",
    "layout_rows",
    "TIE",
    "ServingSide",
    "ModelPlan",
    "plan_model",
    "plan_training",
    "plan_serving_side",
    "train_chip_count",
    "DEFAULT_GPU_TRAIN_CHIPS",
    "MAX_GPU_TRAIN_CHIPS",
    "clear_caches",
    "usd_text",
    "number_text",
    "days_text",
    "ms_text",
    "chips_text",
    "slice_text",
    "tokens_per_s_text",
]


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
    return ModelPlan(
        cfg.name,
        tf.param_count(cfg).total,
        budget,
        plan_training(cfg, train_chip, budget),
        plan_serving_side(cfg, serve_chip, budget),
    )


def clear_caches() -> None:
    """Forget the cached training and serving plans (an app redraw reuses them; a cold-start benchmark must not)."""
    _training_half.clear_cache()
    _serving_half.clear_cache()
