"""What a capstone plan is given (book ch. 11): the chips, tokens, batch, MFU, deadline and money for training,
and the precision, context and latency cap for serving (`Budget`, validated on construction). Pure Python.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.units import is_int

__all__ = ["Budget"]


def _check_positive(name: str, v, *, integer: bool = False) -> None:
    ok = is_int(v) if integer else (isinstance(v, numbers.Real) and not isinstance(v, bool))
    if not ok or not math.isfinite(float(v)) or v <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {v!r}")


@dataclass(frozen=True)
class Budget:
    """What you have and what you want, in SI units (seconds, tokens, US dollars).

    train_chips: chips for training (None: the TPU's full pod — 8960 for v5p — or 1024 GPUs, 576 GB200s);
    train_tokens: tokens to train on (15e12, LLaMA 3); batch_tokens: the global batch in tokens (4·2^20, ch. 6);
    seq_len: training sequence length; mfu: the MFU you expect to *achieve* (0 < mfu ≤ 1; the days use
    min(mfu, the planner's roofline MFU)); max_days / max_usd: an optional deadline and training-money cap;
    serve_precision: a mode of `inference.PRECISIONS` ("bf16", "int8", "int8-weights", "int4-weights", "fp8");
    serve_context: tokens of context per sequence (S); max_latency: seconds per decode step (per token).
    """

    train_chips: int | None = None
    train_tokens: float = 15e12
    batch_tokens: float = 4 * 2**20
    seq_len: int = 4096
    mfu: float = 0.4
    max_days: float | None = None
    max_usd: float | None = None
    serve_precision: str = "int8"
    serve_context: float = 8192
    max_latency: float = 0.02

    def __post_init__(self):
        if self.train_chips is not None:
            _check_positive("train_chips", self.train_chips, integer=True)
        _check_positive("train_tokens", self.train_tokens)
        _check_positive("batch_tokens", self.batch_tokens)
        _check_positive("seq_len", self.seq_len, integer=True)
        if self.batch_tokens < self.seq_len:
            raise ValueError(
                f"batch_tokens ({self.batch_tokens:g}) must hold at least one sequence of seq_len={self.seq_len} tokens"
            )
        if not (isinstance(self.mfu, numbers.Real) and not isinstance(self.mfu, bool) and 0 < self.mfu <= 1):
            raise ValueError(
                f"mfu is the fraction of peak FLOPs you expect to achieve, 0 < mfu ≤ 1 (the book "
                f"assumes 0.4–0.5); got {self.mfu!r}"
            )
        for name in ("max_days", "max_usd"):
            v = getattr(self, name)
            if v is not None:
                _check_positive(f"{name} (None for no limit)", v)
        if not isinstance(self.serve_precision, str) or self.serve_precision.strip().lower() not in inf.PRECISIONS:
            raise ValueError(f"unknown serve_precision {self.serve_precision!r}; allowed: {', '.join(inf.PRECISIONS)}")
        _check_positive("serve_context", self.serve_context)
        if self.serve_context < 1:
            raise ValueError(f"serve_context must be at least 1 token, got {self.serve_context!r}")
        _check_positive("max_latency (seconds per decode step)", self.max_latency)
