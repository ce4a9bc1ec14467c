"""How the capstone writes its numbers (book ch. 11): money, counts, days, milliseconds, slices, tokens/s.

Shared by both sides of a plan and by the chapter's views (`views.ch11_conclusion` labels its figure with
`chips_text`, `slice_text` and `tokens_per_s_text`). Pure Python.
"""

from __future__ import annotations

import re

from scalebook_utils.core.topology import shape_text  # re-exported: a slice's shape as the book writes it
from scalebook_utils.core.units import format_count

__all__ = [
    "DAY",
    "usd_text",
    "number_text",
    "days_text",
    "ms_text",
    "shape_text",
    "chips_text",
    "slice_text",
    "tokens_per_s_text",
    "sentences",
]

#: seconds in a day
DAY = 86_400.0


def usd_text(x: float) -> str:
    """$40.3M, $1.23k, $0.665."""
    return "$" + (format_count(x) if x >= 1000 else f"{x:.3g}")


def number_text(x: float) -> str:
    """Counts: 8960 → '8,960'."""
    return f"{x:,.0f}"


def days_text(seconds: float) -> str:
    """'44.7 days', '1,280 days' (no exponent), '5.2 hours', '12 minutes'."""
    d = seconds / DAY
    if d >= 1000:
        return f"{d:,.0f} days"
    if d >= 1:
        return f"{d:.3g} days"
    return f"{seconds / 3600:.3g} hours" if seconds >= 3600 else f"{seconds / 60:.3g} minutes"


def ms_text(seconds: float) -> str:
    """Seconds as milliseconds: 0.0172 → '17.2 ms'."""
    return f"{seconds * 1e3:.3g} ms"


def chips_text(n: int, gpu: bool = False) -> str:
    """'1 chip', '8 chips', '1 GPU', '8 GPUs'."""
    unit = "GPU" if gpu else "chip"
    return f"{number_text(n)} {unit}{'s' if n != 1 else ''}"


def slice_text(n: int, shape, gpu: bool = False) -> str:
    """A TPU torus slice as the book names it, '4x2 (8 chips)'; one axis of chips or GPUs by its count."""
    return f"{shape_text(shape)} ({chips_text(n, gpu)})" if shape is not None and len(shape) > 1 else chips_text(n, gpu)


def sentences(text: str) -> list[str]:
    """Split planner prose into sentences (a period, a space, then a capital; 'ch. 5' stays whole)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.strip()) if s.strip()]


def tokens_per_s_text(x: float) -> str:
    """Tokens/s: 501.3 → '501', 11.41 → '11.4'."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"
