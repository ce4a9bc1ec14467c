"""The views' shared kit: what every chapter's view module may import (tests/test_architecture.py: `views._kit`).

- `INPUT_ERRORS`, `error_text`: what a readout or render catches from bad input, and the readable line it shows
  instead of a traceback (DESIGN §3: a view never raises).
- `format_number`, `format_rows`: numbers and text tables in readouts (512 → '512', rows → a fixed-width table).
- `plain_formatter`: log-axis tick labels as plain numbers (matplotlib).

Chapter modules share through this module's public names, never through another chapter's `_names`.
(The widget plumbing `widgets._attach`, `_emit`, `_message_figure` moves here in a later step.)
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.ticker import FuncFormatter

__all__ = ["INPUT_ERRORS", "error_text", "format_number", "format_rows", "plain_formatter"]

#: what a readout or render catches from bad input and turns into a message (never a traceback in a widget)
INPUT_ERRORS = (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError)


def error_text(exc: BaseException) -> str:
    """The readable part of a caught `INPUT_ERRORS` exception (a KeyError's message without its quotes)."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def format_number(x) -> str:
    """512 → '512', 8192.0 → '8192', 0.5 → '0.5', 851.138 → '851.1'."""
    x = float(x)
    return f"{x:.0f}" if x.is_integer() else f"{x:.4g}"


def format_rows(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """Rows of text cells as a fixed-width table (header, rule, one line per row); no rows → '(no rows)'."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0])
    width = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    line = lambda r: "  ".join(str(r.get(c, "")).ljust(width[c]) for c in cols).rstrip()  # noqa: E731
    return "\n".join([line({c: c for c in cols}), "  ".join("-" * width[c] for c in cols)] + [line(r) for r in rows])


def plain_formatter() -> FuncFormatter:
    """Log-axis tick labels as plain numbers: 1000 → '1,000', 0.5 → '0.5', nothing at or below 0."""
    def fmt(v, _p):
        if v <= 0:
            return ""
        return f"{v:,.0f}" if v >= 1 else f"{v:g}"
    return FuncFormatter(fmt)
