"""Views for chapter 4 (Transformer math), the MoE critical batch: a readout and a figure over `transformer`.

`moe_readout` gives one line with the prefix ``MoE critical batch: `` (the notebook waits for it) and
`render_moe_critical_batch` the log-log critical batch against the sparsity E/k: B_crit = c · E/k tokens, with
c = (C/W_hbm) · bytes_per_weight / 2 (`transformer.moe_coefficient`, re-exported here; 120 for int8 weights on a
TPU v5e, so DeepSeek-V3's E = 256, k = 8 needs 3840 tokens; book ch. 4, "Sparsity and Mixture-of-Experts",
ch4.q8). Bad input gives a readable line or a message figure, never an exception. `transformer_views`
(`ch04_transformers`) re-exports these names with the chapter's other views.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.transformer import moe_coefficient
from scalebook_utils.views._kit import INPUT_ERRORS, PALETTE, error_text, message_figure, new_figure, plain_formatter

__all__ = ["MOE_PREFIX", "moe_coefficient", "moe_readout", "render_moe_critical_batch"]

#: The notebook waits for this prefix; do not change it.
MOE_PREFIX = "MoE critical batch: "


def moe_readout(chip: str = "tpu-v5e", weight_dtype: str = "int8", E: int = 256, k: int = 8) -> str:
    """``MoE critical batch: tpu-v5e, int8 weights, bf16 FLOPs → B > 120·E/k tokens | E=256, k=8 (DeepSeek):
    3844 tokens (book, α = 240: 3840)``."""
    try:
        c = moe_coefficient(chip, weight_dtype)
        spec = get_chip(chip)
        if not (isinstance(E, int) and isinstance(k, int) and 1 <= k <= E):
            raise ValueError(f"need integers 1 ≤ k ≤ E, got E={E!r}, k={k!r}")
    except INPUT_ERRORS as exc:
        return f"{MOE_PREFIX}{chip}, {weight_dtype} weights → cannot evaluate: {error_text(exc)}"
    book = moe_coefficient(chip, weight_dtype, book_rounding=True) * E / k
    who = " (DeepSeek)" if (E, k) == (256, 8) else ""
    return (
        f"{MOE_PREFIX}{spec.name}, {weight_dtype} weights, bf16 FLOPs → B > {c:.0f}·E/k tokens | "
        f"E={E}, k={k}{who}: {c * E / k:,.0f} tokens (book, α = {round(spec.critical_intensity('bf16'))}: "
        f"{book:,.0f})"
    )


def render_moe_critical_batch(
    chip: str = "tpu-v5e",
    weight_dtypes: Sequence[str] = ("int8", "bf16"),
    *,
    ratios: tuple[float, float] = (1, 64),
    ax=None,
) -> Figure:
    """Log-log critical batch (tokens) against sparsity E/k for each weight dtype on `chip`; DeepSeek-V3
    (E = 256, k = 8: 3840 tokens with int8 weights on v5e) and the ch. 7 MoE (E = 16, k = 2) marked."""
    try:
        spec = get_chip(chip)
        coef = {d: moe_coefficient(spec.name, d) for d in weight_dtypes}
        lo, hi = ratios
        if not 1 <= lo < hi:
            raise ValueError(f"ratios must be 1 ≤ lo < hi, got {ratios}")
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((9.0, 5.0), ax)
    r = np.logspace(math.log2(lo), math.log2(hi), 100, base=2)
    for i, (d, c) in enumerate(coef.items()):
        ax.plot(r, c * r, color=PALETTE[i], lw=2, label=f"{d} weights: B > {c:.0f}·E/k")
        ax.plot([1], [c], "s", color=PALETTE[i], ms=6)
    first = next(iter(coef))
    book = moe_coefficient(spec.name, first, book_rounding=True)
    for E, k, who in ((256, 8, "DeepSeek-V3"), (16, 2, "ch. 7 MoE")):
        if lo <= E / k <= hi:
            v = coef[first] * E / k
            ax.plot([E / k], [v], "o", color="black", ms=7, zorder=6)
            ax.annotate(
                f"{who}: E = {E}, k = {k}, E/k = {E // k}\n{v:,.0f} tokens with {first} weights\n"
                f"(book, α = {round(spec.critical_intensity('bf16'))}: {book * E / k:,.0f})",
                (E / k, v),
                xytext=(-85, -80),
                textcoords="offset points",
                fontsize=8,
                arrowprops={"arrowstyle": "->", "color": "0.3"},
            )
    ax.plot([], [], "s", color="0.4", label="E/k = 1: the dense critical batch")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(lo / 1.08, hi * 1.08)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("sparsity E/k (experts per activated expert)")
    ax.set_ylabel("critical batch (tokens per step)")
    ax.set_title(
        f"MoE layer on {spec.name} (bf16 FLOPs): compute-bound when 2kBDF / (E·D·F·bytes) > "
        f"{spec.critical_intensity('bf16'):.0f}",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig
