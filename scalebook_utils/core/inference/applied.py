"""Chapter 8's applied inference numbers (book ch. 8, "Serving LLaMA 3-70B on TPUs"), pure: the chapter's model
(`BOOK_70B`), the smallest slice that serves it at each precision (`smallest_slice_rows`), the book's serving
configurations (`config_rows`), the tensor-parallel check of in-text question 9 (`tp_check`) and the
disaggregated prefill/generate split (`disaggregation`, and its curve over prompt lengths). The chapter 8 views
draw these; a test can check them without matplotlib.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as SV
from scalebook_utils.core.topology import shape_text
from scalebook_utils.core.units import require_number

#: the precisions chapter 8 compares (bf16, int8 and int4 weights)
BOOK_PRECISIONS = ("bf16", "int8-weights", "int4-weights")
_POINT_ERRORS = (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError)  # what a curve point may raise


def slice_chips(chip, slice_) -> tuple[int, tuple[int, ...]]:
    """(chips, shape) of a slice given as "4x4", (4, 4) or a chip count; ValueError beyond one pod."""
    return SV.parse_slice(chip, slice_)


#: LLaMA 3-70B as ch. 8 counts it: 70e9 parameters (the preset's architecture and KV size).
BOOK_70B = inf.served_model("llama3-70b", params=70e9)


def smallest_slice_rows(
    model=BOOK_70B, chip="tpu-v5e", S: float = 8192, precisions: Sequence = BOOK_PRECISIONS, *, doubled: bool = False
) -> list[dict]:
    """Per precision (book ch. 8 in-text questions 5–8): weight bytes, KV bytes per token, weights ÷ HBM per chip,
    the smallest power-of-two slice that holds the weights (`inference.min_chips`, KV ignored), doubled when
    `doubled`, the HBM left for KV caches (`free_hbm`) and how many S-token caches fit (`max_batch`).
    Numbers are floats/ints in SI units; keys: precision, weights, kv_per_token, weight_chips, chips, slice,
    free, B_max, memory (weights + B_max caches), hbm (the slice's HBM)."""
    c, m = get_chip(chip), inf.served_model(model)
    rows = []
    for p in precisions:
        n = inf.min_chips(m, c, p) * (2 if doubled else 1)
        _n, shape = slice_chips(c, n)
        b = inf.max_batch(m, S, c, n, p)
        rows.append(
            {
                "precision": inf.get_precision(p).name,
                "weights": m.weight_bytes(p),
                "kv_per_token": m.kv_bytes_per_token(p),
                "weight_chips": m.weight_bytes(p) / c.hbm_bytes,
                "chips": n,
                "slice": shape_text(shape),
                "free": inf.free_hbm(m, c, n, p),
                "B_max": b,
                "memory": inf.inference_memory(m, b, S, p),
                "hbm": n * c.hbm_bytes,
            }
        )
    return rows


#: (precision, slice) pairs of ch. 8 "Thinking about throughput": each precision on its smallest slice and doubled.
BOOK_CONFIGS = (
    ("bf16", "4x4"),
    ("int8-weights", "4x2"),
    ("int4-weights", "2x2"),
    ("bf16", "4x8"),
    ("int8-weights", "4x4"),
    ("int4-weights", "4x2"),
)


def _point(model, chip, slice_, precision, S, B):
    """(plan, the ServingPoint at batch B — the largest that fits, HBM full, when B is None)."""
    if B is None:
        plan = SV.plan_serving(model, chip, slice_, precision, S)
        return plan, plan.points[-1]  # the batch grid ends at B_max
    plan = SV.plan_serving(model, chip, slice_, precision, S, batches=[B])
    return plan, plan.points[0]


def config_rows(
    model=BOOK_70B,
    chip="tpu-v5e",
    S: float = 8192,
    configs: Sequence = BOOK_CONFIGS,
    *,
    B: int | None = None,
    decode_len: float = 512,
) -> list[dict]:
    """One row per (precision, slice) from `serving.plan_serving`: feasible batches, the lowest latency (B = 1),
    and at batch B (default: the largest that fits) the step time, tokens/s/chip, queries/s/chip for
    `decode_len`-token answers and $ per million tokens. Keys: precision, slice, chips, B_max, B, min_latency,
    latency, tokens_per_s_per_chip, queries_per_s_per_chip, cost, bound, step (the `DecodeStep`)."""
    rows = []
    for precision, slice_ in configs:
        plan, pt = _point(model, chip, slice_, precision, S, B)
        rows.append(
            {
                "precision": plan.precision,
                "slice": shape_text(plan.shape),
                "chips": plan.n_chips,
                "B_max": plan.B_max,
                "B": pt.B,
                "min_latency": plan.min_latency.latency,
                "latency": pt.latency,
                "tokens_per_s_per_chip": pt.tokens_per_s_per_chip,
                "queries_per_s_per_chip": pt.step.queries_per_s_per_chip(decode_len),
                "cost": pt.cost_per_million_tokens,
                "bound": pt.bottleneck,
                "step": pt.step,
            }
        )
    return rows


def tp_check(
    model="llama3-70b", chip="tpu-v5e", slice_="4x8", precision="bf16", B: float = 64, *, beta: float | None = None
) -> dict:
    """Ch. 8 in-text question 9 on a slice used as one model-parallel axis of Y = all its chips, spanning M_Y
    torus axes (the dims longer than 1):

    - large batch (compute-bound matmuls): comm-bound when Y > F·M_Y/α_ici (`tp_limit_large_batch`);
    - small batch (memory-bound): comm-bound when Y > F/(B·β) (`tp_limit_small_batch`; β the chip's W_hbm/W_ici
      unless `beta`, the book uses 8);
    - one [B, D]·[D, F] matmul with F sharded Y ways: T_math, T_hbm, T_ici (`tp_matmul_times`, one ICI axis
      as the book writes it) and which one bounds it.

    Returns a dict: model, chip, precision, slice, Y, M_Y, B, B_crit, large_limit, small_limit, times, bound,
    comm_bound_large, comm_bound_small, comm_bound_at_B (T_ici above both other terms)."""
    cfg, c, p = tf.get_model(model), get_chip(chip), inf.get_precision(precision)
    Y, shape = slice_chips(c, slice_)
    M_Y = max(1, sum(1 for d in shape if d > 1))
    large = inf.tp_limit_large_batch(cfg.F, c, p, M_Y=M_Y)
    small = inf.tp_limit_small_batch(cfg.F, B, c, p, beta=beta)
    t = inf.tp_matmul_times(B, cfg.D, cfg.F, Y, c, p)
    return {
        "model": cfg.name,
        "chip": c.name,
        "precision": p.name,
        "slice": shape_text(shape),
        "Y": Y,
        "M_Y": M_Y,
        "B": B,
        "B_crit": inf.critical_batch(c, p),
        "large_limit": large,
        "small_limit": small,
        "times": t,
        "bound": t.bottleneck,
        "comm_bound_large": Y > large,
        "comm_bound_small": Y > small,
        "comm_bound_at_B": t.bottleneck == "ICI",
    }


@dataclass(frozen=True)
class Disaggregation:
    """Prefill servers against generate servers (book ch. 8 "What about prefill?", in-text questions 11–12).

    prefill: `inference.Prefill` of one prompt on the prefill slice; point: the `serving.ServingPoint` of the
    generate slice at batch B with `context` tokens of KV per sequence (prompt + decode/2, the mean context while
    answering); ratio: prefill servers per generate server (`prefill_servers_per_generate_server`); eviction:
    `kv_eviction_rate` (KV tokens freed per step, bytes/s); kv_in_bytes_per_s: the new prompts' KV a generate
    server takes in from prefill servers (eviction.sequences_per_step · prompt tokens · KV bytes per token /
    step time)."""

    prompt: int
    decode: int
    B: int
    context: float
    prefill_chips: int
    generate_chips: int
    prefill: inf.Prefill
    point: SV.ServingPoint
    ratio: float
    eviction: inf.KVEviction
    kv_in_bytes_per_s: float

    @property
    def prefill_per_s(self) -> float:
        """Prompts one prefill server finishes per second."""
        return 1 / self.prefill.time

    @property
    def finished_per_s(self) -> float:
        """Sequences one generate server finishes per second: B / (step time · decode steps)."""
        return self.B / (self.point.latency * self.decode)

    @property
    def chip_ratio(self) -> float:
        """Prefill chips per generate chip."""
        return self.ratio * self.prefill_chips / self.generate_chips


def disaggregation(
    prompt: int = 8192,
    decode: int = 512,
    B: int = 32,
    prefill_slice="4x4",
    generate_slice="4x4",
    precision="bf16",
    mfu: float = 0.4,
    model=BOOK_70B,
    chip="tpu-v5e",
) -> Disaggregation:
    """Evaluate disaggregated serving: one prompt's prefill on `prefill_slice` (`inference.prefill_time`), the
    generate step of B sequences on `generate_slice` (`serving.plan_serving`, context prompt + decode/2), the
    balance of the two pools and the KV traffic. Raises ValueError when the batch does not fit."""
    for name, v in (("prompt", prompt), ("decode", decode), ("B", B)):
        require_number(name, v, minimum=1)
    c = get_chip(chip)
    n_pre, _ = slice_chips(c, prefill_slice)
    ctx = prompt + decode / 2
    plan = SV.plan_serving(model, c, generate_slice, precision, ctx, batches=[B])
    pt = plan.points[0]
    pf = inf.prefill_time(model, prompt, c, n_pre, precision, mfu=mfu, conventions="book")
    kv_tok = inf.served_model(model).kv_bytes_per_token(precision)
    ev = inf.kv_eviction_rate(B, prompt, decode, kv_bytes_per_token=kv_tok, step_time=pt.latency)
    return Disaggregation(
        prompt=prompt,
        decode=decode,
        B=B,
        context=ctx,
        prefill_chips=n_pre,
        generate_chips=plan.n_chips,
        prefill=pf,
        point=pt,
        ratio=inf.prefill_servers_per_generate_server(pf.time, pt.latency, B, decode),
        eviction=ev,
        kv_in_bytes_per_s=ev.sequences_per_step * prompt * kv_tok / pt.latency,
    )


#: prompt lengths (tokens) the disaggregation figure's curves are drawn at
DISAGG_PROMPTS = tuple(int(t) for t in np.unique(np.geomspace(256, 32768, 36).round().astype(int)))


def disaggregation_curve(decode, B, prefill_slice, generate_slice, precision, mfu, model, chip) -> tuple:
    """Prefill servers per generate server at each of `DISAGG_PROMPTS` (NaN where B sequences do not fit)."""
    try:
        return disaggregation_curve_cached(decode, B, prefill_slice, generate_slice, precision, mfu, model, chip)
    except TypeError:  # an unhashable argument (a ChipSpec, a dict model): computed each time
        return disaggregation_curve_cached.__wrapped__(
            decode, B, prefill_slice, generate_slice, precision, mfu, model, chip
        )


@functools.lru_cache(maxsize=256)
def disaggregation_curve_cached(decode, B, prefill_slice, generate_slice, precision, mfu, model, chip) -> tuple:
    """`disaggregation_curve`, cached on its (frozen) arguments: a slider step redraws up to six such curves."""
    ys = []
    for t in DISAGG_PROMPTS:
        try:
            ys.append(disaggregation(t, decode, B, prefill_slice, generate_slice, precision, mfu, model, chip).ratio)
        except _POINT_ERRORS:
            ys.append(np.nan)
    return tuple(ys)


__all__ = [
    "BOOK_70B",
    "BOOK_PRECISIONS",
    "BOOK_CONFIGS",
    "slice_chips",
    "shape_text",
    "smallest_slice_rows",
    "config_rows",
    "tp_check",
    "Disaggregation",
    "disaggregation",
    "DISAGG_PROMPTS",
    "disaggregation_curve",
]
