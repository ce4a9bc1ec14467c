"""Views for chapter 4 (Transformer math), gradient checkpointing: a readout and a figure of memory against FLOPs.

`remat_readout` gives one line with the prefix ``remat: `` (the notebook waits for it) and `render_remat` the
figure: per checkpointing policy ("none": save everything, "big_matmuls": save the big matmul outputs,
"block": block remat), the saved activations 2·n·BT·D·L bytes in bf16 with the book's tensor counts n = 20 / 7 / 1
of D per token and layer (the true-width count of "big matmuls" as an outline), and the training FLOPs per token
in units of matmul params P, stacked: 6 (forward + backward matmuls), attention 12·T·N·H·L / P, recompute. The
numbers are `core.calculator.remat_rows`'s; the book's example (`REMAT_EXAMPLE`: BT = 4M tokens, L = 64,
D = 8192) gives 84 TB / 4.2 TB and 6 → 8 · P. Bad input gives a readable line or a message figure, never an
exception. `transformer_views` (`ch04_transformers`) re-exports these names with the chapter's other views.

Book ch. 4 "All the Transformer Math You Need to Know", section "Gradient checkpointing".
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.calculator import REMAT_EXAMPLE, remat_rows
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import INPUT_ERRORS, PALETTE, error_text, format_number, message_figure

__all__ = ["REMAT_PREFIX", "remat_readout", "render_remat"]

#: The notebook waits for this prefix; do not change it.
REMAT_PREFIX = "remat: "


# --- (2) gradient checkpointing -----------------------------------------------------------------------------

_POLICY_LABELS = {"none": "save everything", "big_matmuls": "save the big matmul outputs", "block": "block remat"}


def remat_readout(cfg: tf.TransformerConfig = REMAT_EXAMPLE, tokens: float = 4e6, seq_len: float = 4096) -> str:
    """``remat: BT=4M tokens, L=64, D=8192, T=4096 → save everything 20·D: 84 TB, 6.37·P | save the big matmul
    outputs ~7·D: 29 TB (13·D at true widths: 55 TB), 6.50·P | block remat 1·D: 4.2 TB, 8.50·P`` (memory in bf16
    with the book's tensor counts, and the true-width count where it differs; FLOPs per token / matmul params)."""
    try:
        rows = remat_rows(cfg, tokens, seq_len)
    except INPUT_ERRORS as exc:
        return f"{REMAT_PREFIX}{getattr(cfg, 'name', cfg)} → cannot evaluate: {error_text(exc)}"

    def true_width(r):  # the book's "≈ 7 tensors" are 13·D wide when F = 4D (the figure's hatched bar)
        if math.isclose(r["bytes_true"], r["bytes"]):
            return ""
        return f" ({r['true_tensors']:.3g}·D at true widths: {format_si(r['bytes_true'], 'B', 2)})"

    parts = [
        f"{_POLICY_LABELS[r['policy']]} {'~' if r['policy'] == 'big_matmuls' else ''}{r['tensors']}·D: "
        f"{format_si(r['bytes'], 'B', 2)}{true_width(r)}, {r['multiple']:.2f}·P"
        for r in rows
    ]
    return (
        f"{REMAT_PREFIX}BT={format_si(tokens, digits=3).replace(' ', '')} tokens, L={cfg.L}, D={cfg.D}, "
        f"T={format_number(seq_len)} → " + " | ".join(parts)
    )


def render_remat(cfg: tf.TransformerConfig = REMAT_EXAMPLE, tokens: float = 4e6, seq_len: float = 4096) -> Figure:
    """Left: activation memory (TB, bf16) per policy with the book's tensor counts (the true-width count of
    "big matmuls" as an outline). Right: training FLOPs per token / matmul params, stacked: 6 (forward +
    backward matmuls), attention, recompute; the book's 6 and 8 as lines."""
    try:
        rows = remat_rows(cfg, tokens, seq_len)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(11.5, 4.4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    x = np.arange(len(rows))
    labels = [
        f"{_POLICY_LABELS[r['policy']]}\n({'≈' if r['policy'] == 'big_matmuls' else ''}{r['tensors']}·D per "
        f"token-layer)"
        for r in rows
    ]
    tb = np.array([r["bytes"] for r in rows]) / 1e12
    true_tb = np.array([r["bytes_true"] for r in rows]) / 1e12
    ax1.bar(x, tb, width=0.6, color=[PALETTE[4], PALETTE[1], PALETTE[2]])
    handles = [Patch(color="0.55", label="book's count: n tensors of D per token and layer")]
    diff = ~np.isclose(true_tb, tb)
    if diff.any():
        ax1.bar(x[diff], true_tb[diff], width=0.6, fill=False, hatch="//", edgecolor="0.35", lw=1)
        handles.append(
            Patch(
                fill=False,
                hatch="//",
                edgecolor="0.35",
                label=f"at true widths (F-wide outputs count F/D = {cfg.F / cfg.D:g} each)",
            )
        )
        for xi in x[diff]:
            ax1.text(
                xi,
                true_tb[xi],
                f"{true_tb[xi]:.3g} TB ({rows[xi]['true_tensors']:.0f}·D)",
                ha="center",
                va="bottom",
                fontsize=8,
                color="0.3",
            )
    for xi, v in zip(x, tb):
        inside = bool(diff[xi])  # under a true-width outline: label inside the bar
        ax1.text(
            xi,
            v / 2 if inside else v,
            f"{v:.3g} TB",
            ha="center",
            va="center" if inside else "bottom",
            fontsize=9,
            fontweight="bold",
            color="white" if inside else "black",
        )
    ax1.set_xticks(x, labels, fontsize=8)
    ax1.set_ylim(0, max(tb.max(), true_tb.max()) * 1.15)
    ax1.set_ylabel("saved activations (TB, bf16)")
    ax1.set_xlabel("checkpointing policy (what the forward pass keeps)")
    ax1.set_title(
        f"memory: 2·n·BT·D·L bytes, BT = {format_si(tokens, digits=3)}, L = {cfg.L}, D = {cfg.D:,}", fontsize=10
    )
    ax1.grid(True, axis="y", alpha=0.3)
    ax1.legend(handles=handles, loc="upper right", fontsize=8)

    bottom = np.zeros(len(rows))
    attn_label = f"dot-product attention (12·T·N·H·L, T = {format_number(seq_len)})"
    for key, color, label in (
        ("matmul", PALETTE[0], "matmuls forward + backward (6·P)"),
        ("attention", "#9ecae1", attn_label),
        ("recompute", PALETTE[4], "recomputed in the backward pass"),
    ):
        v = np.array([r[key] for r in rows])
        ax2.bar(x, v, bottom=bottom, width=0.6, color=color, label=label)
        bottom += v
    for xi, t in zip(x, bottom):
        ax2.text(xi, t + 0.08, f"{t:.2f}·P", ha="center", va="bottom", fontsize=9)
    for y in (6, 8):
        ax2.axhline(y, color="0.25", lw=1, ls=":")
    ax2.plot([], [], ls=":", color="0.25", label="the book's 6·P and 8·P per token")
    ax2.set_xticks(x, labels, fontsize=8)
    ax2.set_ylim(0, bottom.max() * 1.35)
    ax2.set_ylabel("training FLOPs per token / matmul params P")
    ax2.set_xlabel("checkpointing policy (what the forward pass keeps)")
    ax2.set_title("compute: block remat reruns the forward pass (+2·P)", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend(loc="upper left", fontsize=8)
    fig.suptitle("Gradient checkpointing trades memory for FLOPs (book ch. 4)", fontsize=10)
    return fig
