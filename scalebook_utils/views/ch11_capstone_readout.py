"""Views for chapter 11 (the capstone), the plan as one line: `capstone_readout` over the pure `capstone` core.

`capstone_readout` returns one deterministic line starting with ``capstone: `` (tests and the browser test wait
for it): the model, then the training side's headline (chip × count, layout, days at the achieved MFU, dollars,
the bound) and the serving side's (slice, largest batch, the best point under the latency cap). `plan_sides`
plans both sides (cached: the app asks again for every control change); one half failing leaves the other, and
bad input (an unknown name, a zero size, an MFU above 1) shows as text in its part of the line, never a
traceback. `budget_with` and `model_key` are the budget and model as the app and the figure pass them.
`capstone_views` (`ch11_conclusion`) re-exports the readout with the chapter's other views.

Book ch. 11 "Conclusions and Further Reading" over ch. 5–8 and ch. 12.
"""

from __future__ import annotations

import dataclasses
import functools

from scalebook_utils.core import capstone as cap
from scalebook_utils.core import transformer as tf
from scalebook_utils.views._kit import INPUT_ERRORS, error_text

__all__ = ["CAPSTONE_PREFIX", "budget_with", "model_key", "plan_sides", "capstone_readout"]

#: The browser test waits for this prefix; do not change it.
CAPSTONE_PREFIX = "capstone: "


def budget_with(budget: cap.Budget | None, fields: dict) -> cap.Budget:
    """`budget` with `fields` replaced (or a new Budget from `fields`); raises for bad values."""
    if budget is None:
        return cap.Budget(**fields)
    if not isinstance(budget, cap.Budget):
        raise TypeError(f"budget must be a capstone.Budget, got {type(budget).__name__}")
    return dataclasses.replace(budget, **fields) if fields else budget


def model_key(model):
    """A hashable stand-in for the model (a name, or a TransformerConfig, which is frozen)."""
    return model if isinstance(model, (str, tf.TransformerConfig)) else str(model)


@functools.lru_cache(maxsize=64)
def _train(model, chip, budget: cap.Budget) -> cap.TrainingSide:
    return cap.plan_training(model, chip, budget)


@functools.lru_cache(maxsize=64)
def _serve(model, chip, budget: cap.Budget) -> cap.ServingSide:
    return cap.plan_serving_side(model, chip, budget)


def plan_sides(model, train_chip, serve_chip, budget):
    """(training side or the exception, serving side or the exception): one half failing leaves the other."""
    out = []
    for fn, chip in ((_train, train_chip), (_serve, serve_chip)):
        try:
            out.append(fn(model_key(model), chip, budget))
        except INPUT_ERRORS as exc:
            out.append(exc)
    return tuple(out)


def _name(x) -> str:
    return getattr(x, "name", str(x))


def capstone_readout(
    model="llama3-70b", train_chip="tpu-v5p", serve_chip="tpu-v5e", budget: cap.Budget | None = None, **budget_fields
) -> str:
    """``capstone: llama3-70b | train tpu-v5p×8960: FSDP 2240 × TP 4, 44.7 days at 40% MFU, $40.3M, compute-bound
    | serve tpu-v5e int8: 4x2 (8 chips), B≤42, best ≤ 20 ms: B=256 on 128 chips, 501 tokens/s/chip``.

    `budget_fields` override fields of `budget` (e.g. ``train_chips=4096, mfu=0.45``). A side that cannot be
    planned says so in its part of the line (``train h100: error — …``); nothing raises."""
    try:
        b = budget_with(budget, budget_fields)
        name = tf.get_model(model).name
    except INPUT_ERRORS as exc:
        return f"{CAPSTONE_PREFIX}{_name(model)} → cannot plan: {error_text(exc)}"
    parts = []
    for side, chip, what in zip(
        plan_sides(model, train_chip, serve_chip, b), (train_chip, serve_chip), ("train", "serve")
    ):
        parts.append(
            f"{what} {_name(chip)}: error — {error_text(side)}" if isinstance(side, Exception) else side.headline()
        )
    return f"{CAPSTONE_PREFIX}{name} | " + " | ".join(parts)
