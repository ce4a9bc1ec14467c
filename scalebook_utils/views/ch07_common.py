"""Chapter 7 views, shared part: the readout prefixes, the context lengths and colours the widgets use, and the
small helpers the chapter's view modules share (`ch07_inference`: step time; `ch07_kv`: KV cache; `ch07_frontier`:
frontier and context pareto; `ch07_figures`: static figures) — serving plans (`get_serving_plan`), the decode
step at a batch (`decode_at`), labels and number formats.

Book ch. 7 "All About Transformer Inference". Imports `core` and `views._kit` only.
"""

from __future__ import annotations

import contextlib
import functools

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import CHIPS, get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.core.topology import shape_text
from scalebook_utils.core.units import require_number
from scalebook_utils.views._kit import format_number

__all__ = [
    "STEP_PREFIX",
    "KV_PREFIX",
    "FRONTIER_PREFIX",
    "PARETO_PREFIX",
    "CONTEXTS",
    "COLORS",
    "format_value",
    "serving_chips",
    "slice_options",
    "get_serving_plan",
    "sig",
    "model_name",
    "shape_text",
    "plan_on",
    "cost_text",
    "model_options",
    "precision_text",
    "decode_at",
    "quiet",
    "contexts",
]

#: Tests, the notebook and the browser test wait for these prefixes; do not change them.
STEP_PREFIX = "decode step: "
KV_PREFIX = "KV cache: "
FRONTIER_PREFIX = "frontier: "
PARETO_PREFIX = "pareto: "

#: Context lengths the widgets offer (tokens).
CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
#: One colour per term of the step time (and the memory-/compute-bound bands), shared with `ch07_figures`.
COLORS = {
    "total": "black",
    "weights": "#1f4e9c",
    "kv": "#e6550d",
    "flops": "#31a354",
    "ici": "#7b3294",
    "mem": "#dceaf7",
    "compute": "#f4c7c3",
    "oom": "0.85",
}


# --- small helpers ----------------------------------------------------------------------------------------


def sig(x: float) -> str:
    """3 significant figures, never scientific notation for the sizes seen here: 8.651 → '8.65', 425.0 → '425'."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def format_value(v) -> str:
    """`format_number(v)` (8192.0 → '8192'), or repr(v) for what is not a number (a readout echoing bad input)."""
    try:
        return format_number(v)
    except (TypeError, ValueError):
        return repr(v)


def model_name(x) -> str:
    return getattr(x, "name", str(x))


def plan_on(plan: sv.ServingPlan) -> str:
    """'tpu-v5e 4x4' for a torus slice, '8 × h100' for one axis of chips."""
    return f"{plan.chip} {shape_text(plan.shape)}" if len(plan.shape) > 1 else f"{plan.n_chips} × {plan.chip}"


def cost_text(tokens_per_s_per_chip: float, chip) -> str:
    if get_chip(chip).price_per_hour_usd is None or tokens_per_s_per_chip <= 0:
        return ""
    return f" (${inf.cost_per_million_tokens(tokens_per_s_per_chip, chip):.3g}/1M tokens)"


def model_options(model) -> list[tuple[str, object]]:
    """(label, value) of the model presets, the caller's model first (a name, config or `ServedModel`)."""
    first = (model, model) if isinstance(model, str) else (f"{model_name(model)} (as given)", model)
    return [first, *((n, n) for n in tf.MODELS if n != model)]


def serving_chips() -> list[tuple[str, str]]:
    """(label, name) of every chip with a bf16 peak, the hourly price in the label where the book gives one."""
    out = []
    for name, c in CHIPS.items():
        if "bf16" in c.peak_flops_per_s:
            out.append((f"{name} (${c.price_per_hour_usd:g}/h)" if c.price_per_hour_usd else name, name))
    return out


def slice_options(chip="tpu-v5e") -> list[str]:
    """Slice shapes with a power-of-two chip count up to a pod (TPU) or a node (GPU): '1', '2', '2x2', '4x2', …"""
    return [shape_text(sv.slice_shape(chip, n)) for n in sv.pow2_slices(chip)]


def precision_text(x) -> str:
    """The precision of a plan or frontier with its meaning ('int8-weights (int8 weights + KV, bf16 math)')."""
    return x.precision_label or x.precision


@functools.lru_cache(maxsize=512)
def _plan_cached(model, chip, slice_, precision, S, max_context):
    return sv.plan_serving(model, chip, slice_, precision, S, max_context=max_context)


def get_serving_plan(
    model="llama3-70b", chip="tpu-v5e", slice_="4x4", precision="int8-weights", S=8192, *, max_context=None
) -> sv.ServingPlan:
    """`serving.plan_serving`, cached (the last 512 plans): the feasible batches 1 … B_max, B_crit and the slice
    shape."""
    slice_ = tuple(slice_) if isinstance(slice_, list) else slice_
    try:
        return _plan_cached(model, chip, slice_, precision, S, max_context)
    except TypeError as exc:  # an unhashable argument: compute without the cache (plan_serving validates it)
        if "unhashable" not in str(exc):
            raise
        return sv.plan_serving(model, chip, slice_, precision, S, max_context=max_context)


def decode_at(plan: sv.ServingPlan, model, precision, B, *, check_memory=True) -> inf.DecodeStep:
    """The decode step of `plan`'s slice at batch B; a batch that does not fit gives a reader's message."""
    require_number("B (batch)", B, minimum=1)
    if check_memory and B > plan.B_max:
        raise ValueError(
            f"B={format_value(B)} does not fit: at most {plan.B_max} sequences of {plan.S:g} tokens fit "
            f"beside the weights on {plan_on(plan)} in {plan.precision}"
        )
    return inf.decode_step(
        model, B, plan.S, plan.chip, plan.n_chips, precision, shape=plan.shape, check_memory=False, conventions="book"
    )


@contextlib.contextmanager
def quiet(box):
    """Control changes made inside draw nothing (the change that caused them redraws once, with final values)."""
    box.quiet = True
    try:
        yield
    finally:
        box.quiet = False


def contexts(S) -> list:
    return list(CONTEXTS) if S in CONTEXTS else sorted({*CONTEXTS, S}, key=lambda v: (not isinstance(v, int), v))
