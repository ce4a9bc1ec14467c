"""Chapter 11 — Conclusions: three "plan this model" exercises for the capstone (ids ch11.x1a … ch11.x3b).

The book's chapter 11 has no problems (thanks and a reading list), so these are the project's own and are not in
PROBLEMS.md. Each plans one side of LLaMA 3-70B with the arithmetic of chapters 6, 7–8 and 12, and each expected
value is computed with the same planners the capstone uses (`capstone`, `training`, `hardware`), so a learner
can answer by hand and then confirm with `capstone.plan_model`:

- x1 (training on H100s to a deadline, ch. 6 and 12): N ≥ 6·P·T/(C·MFU·t), rounded up to whole 8-GPU nodes; the
  money is chip-hours × the book's $/GPU-hour, which does not depend on N.
- x2 (serving in bf16 on TPU v5e, ch. 7–8): the smallest power-of-two slice holding the weights and one 8k
  cache, the largest batch whose caches fill the rest, and the throughput per chip there.
- x3 (layouts on 4096 H100s, ch. 12): which kind of layout wins, and by how much it beats the fastest one
  without a pipeline.
"""

from __future__ import annotations

import math

from scalebook_utils.core import capstone
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as training
from scalebook_utils.questions.registry import add

MODEL = "llama3-70b"
#: x1: train on H100s, 15T tokens at 45% MFU, within 30 days; whole DGX nodes of 8
X1_CHIP, X1_TOKENS, X1_MFU, X1_DAYS, X1_NODE = "h100", 15e12, 0.45, 30, 8
#: x2: serve in bf16 (bf16 weights, KV cache and math) on TPU v5e with an 8192-token context
X2_CHIP, X2_PRECISION, X2_CONTEXT = "tpu-v5e", "bf16", 8192
#: x3: the capstone's default GPU run: 4096 H100s, a 4·2^20-token batch of 4096-token sequences, 45% MFU
X3_CHIP, X3_GPUS, X3_MFU = "h100", 4096, 0.45
#: x3a: answer with one of these keys (`training.Estimate.family`)
X3_OPTIONS = ("dp", "fsdp", "dp+tp", "fsdp+tp", "tp", "pp")


def _params() -> int:
    return tf.param_count(tf.get_model(MODEL)).total


def x1_gpus() -> float:
    """Fewest H100s, in whole 8-GPU nodes, that train in X1_DAYS: ceil(6·P·T/(C·MFU·t) / 8) · 8."""
    spec = get_chip(X1_CHIP)
    n = 6 * _params() * X1_TOKENS / (spec.peak_flops("bf16") * X1_MFU * X1_DAYS * 86_400)
    return float(math.ceil(n / X1_NODE) * X1_NODE)


def x1_usd() -> float:
    """The run's cost at x1_gpus(): chip-hours · the book's H100 $/hour."""
    spec = get_chip(X1_CHIP)
    n = int(x1_gpus())
    return training.training_time(_params(), X1_TOKENS, n, spec, X1_MFU) / 3600 * n * spec.price_per_hour_usd


def _x2():
    budget = capstone.Budget(serve_precision=X2_PRECISION, serve_context=X2_CONTEXT)
    return capstone.plan_serving_side(MODEL, X2_CHIP, budget)


def _x3():
    return capstone.plan_training(MODEL, X3_CHIP, capstone.Budget(train_chips=X3_GPUS, mfu=X3_MFU))


def x3_ratio() -> float:
    """Step time of the fastest layout without a pipeline over the chosen one's."""
    side = _x3()
    others = [r.step_time for r in side.layouts if r.step_time is not None and r.kind != "with a pipeline"]
    return min(others) / side.step_time


add(
    "ch11.x1a",
    "number",
    "Plan 1: fewest H100s, in whole 8-GPU nodes, to train LLaMA 3-70B on 15T tokens in 30 days "
    "at 45% MFU (6·P·T FLOPs, C = 9.89e14 bf16 FLOPs/s)",
    x1_gpus,
    unit="count",
    rtol=0.01,
)
add(
    "ch11.x1b",
    "number",
    "Plan 1: what that run costs in US dollars at the book's H100 price per GPU-hour",
    x1_usd,
    unit="",
    rtol=0.02,
)
add(
    "ch11.x2a",
    "number",
    "Plan 2: chips in the smallest TPU v5e slice (a power of two) that holds LLaMA 3-70B's bf16 "
    "weights plus one 8192-token bf16 KV cache",
    lambda: float(_x2().n_chips),
    unit="count",
    rtol=0.001,
)
add(
    "ch11.x2b",
    "number",
    "Plan 2: the largest batch on that slice: 8192-token caches filling the HBM the weights leave",
    lambda: float(_x2().B_max),
    unit="sequences",
    rtol=0.03,
)
add(
    "ch11.x2c",
    "number",
    "Plan 2: decode throughput per chip at that batch (tokens/s/chip): B / (T_KV + max(T_math, T_weights)) / chips",
    lambda: _x2().at_batch(_x2().B_max).tokens_per_s_per_chip,
    unit="tokens/s",
    rtol=0.05,
)
add(
    "ch11.x3a",
    "choice",
    "Plan 3: LLaMA 3-70B on 4096 H100s, 4M-token batch: which kind of layout does the "
    "planner choose (a key of X3_OPTIONS)?",
    lambda: _x3().estimate.family,
    options=X3_OPTIONS,
)
add(
    "ch11.x3b",
    "number",
    "Plan 3: how many times longer the fastest layout without a pipeline takes per step",
    x3_ratio,
    unit="ratio",
    rtol=0.03,
)
