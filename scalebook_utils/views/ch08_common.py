"""Chapter 8 views, shared part: the readout prefixes, the chapter's model (`BOOK_70B`), precisions, slices and
the labels and number formats its view modules share (`ch08_applied_inference`: prefill, disaggregation, the
book's roofline; `ch08_configs`: smallest slice and configurations; `ch08_tp`: the comm-bound check).

Book ch. 8 "Serving LLaMA 3-70B on TPUs". Imports `core` and `views._kit` only.
"""

from __future__ import annotations

from matplotlib.ticker import NullLocator

from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference.applied import BOOK_70B, BOOK_PRECISIONS, shape_text, slice_chips
from scalebook_utils.core.units import format_bytes
from scalebook_utils.views._kit import INPUT_ERRORS, error_text, format_number
from scalebook_utils.views._kit import log_axes as _log_scale

__all__ = [
    "SLICE_PREFIX",
    "CONFIG_PREFIX",
    "TP_PREFIX",
    "PREFILL_PREFIX",
    "DISAGG_PREFIX",
    "BOOK_CURVE_PREFIX",
    "BOOK_70B",
    "BOOK_PRECISIONS",
    "SLICES",
    "precision_label",
    "precision_meaning",
    "model_label",
    "slice_chips",
    "shape_text",
    "gb",
    "plain_log_axes",
    "fail_text",
    "safe_label",
    "safe_num",
]

#: Readout prefixes (browser tests wait for them; do not change).
SLICE_PREFIX = "smallest slice: "
CONFIG_PREFIX = "serving config: "
TP_PREFIX = "tp check: "
PREFILL_PREFIX = "prefill: "
DISAGG_PREFIX = "disaggregation: "
BOOK_CURVE_PREFIX = "book roofline: "

#: TPU v5e slices the chapter uses (power-of-two chip counts, the book's shapes).
SLICES = ("2x2", "4x2", "4x4", "4x8", "8x8", "8x16", "16x16")


def precision_label(precision) -> str:
    """The project's name of a precision mode, the same in every chapter: 'int8-weights' (int8 params and KV,
    bf16 FLOPs — what book ch. 8 calls "int8") stays 'int8-weights', never shortened to 'int8', which is the
    mode with int8 FLOPs too. For tick labels; readout heads and titles print `precision_meaning(...)` as well."""
    return inf.get_precision(precision).name


def precision_meaning(precision) -> str:
    """'int8-weights (int8 weights + KV, bf16 math)' (`inference.Precision.label`)."""
    return inf.get_precision(precision).label


def model_label(model) -> str:
    """'llama3-70b (70B params)' — the parameter count shows which rounding a number uses."""
    m = inf.served_model(model)
    return f"{m.name} ({m.params / 1e9:.4g}B params)"


def gb(x: float) -> str:
    return format_bytes(x)


def plain_log_axes(ax, *, x: bool = True, y: bool = True) -> None:
    """`inference_views`' log axes (plain labels), without minor ticks: they make constrained layout ~2× slower."""
    _log_scale(ax, x=x, y=y)
    for on, axis in ((x, ax.xaxis), (y, ax.yaxis)):
        if on:
            axis.set_minor_locator(NullLocator())


def fail_text(prefix_head: str, exc: BaseException) -> str:
    return f"{prefix_head} → cannot evaluate: {error_text(exc)}"


def safe_label(model) -> str:
    try:
        return model_label(model)
    except INPUT_ERRORS:
        return str(model)


def safe_num(x) -> str:
    try:
        return format_number(x)
    except INPUT_ERRORS:
        return repr(x)
