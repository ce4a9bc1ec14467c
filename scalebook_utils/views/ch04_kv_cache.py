"""Views for chapter 4 (Transformer math), the KV cache: a readout and a figure of the cache against context length.

`kv_readout` gives one line with the prefix ``KV cache: `` (the notebook waits for it): one sequence's KV cache
for several K (MHA: K = N, GQA: K < N, MQA: K = 1) in int8 and bf16. `render_kv_cache` draws it log-log against
the context length S, with the book's example marked (S = 8192, L = 64, K·H = 8192: 2·S·L·K·H = 8 GiB in int8)
and the HBM of some chips as lines. The bytes are `core.calculator.kv_bytes_per_sequence` (S · 2·L·K·H ·
bytes per value); `format_binary_bytes` writes them with binary prefixes, as KV caches are quoted (the
calculator's KV line uses it too). Bad input gives a readable line or a message figure, never an exception.
`transformer_views` (`ch04_transformers`) re-exports these names with the chapter's other views.

Book ch. 4 "All the Transformer Math You Need to Know", section "Key-Value (KV) caching".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from scalebook_utils.core.calculator import KV_EXAMPLE, kv_bytes_per_sequence
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import INPUT_ERRORS, PALETTE, error_text, format_number, message_figure, new_figure

__all__ = ["KV_PREFIX", "format_binary_bytes", "kv_readout", "render_kv_cache"]

#: The notebook waits for this prefix; do not change it.
KV_PREFIX = "KV cache: "


def format_binary_bytes(n: float) -> str:
    """Bytes with binary prefixes (KV caches are quoted that way): 327680 → '320 KiB', 2**33 → '8 GiB'."""
    for scale, unit in ((2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


# --- (3) KV cache -------------------------------------------------------------------------------------------

_ATTN_KIND = {1: "MQA"}


def _kv_label(K: int, N: int) -> str:
    return "MHA" if K == N else _ATTN_KIND.get(K, "GQA")


def kv_readout(
    S: float = 8192,
    Ks: Sequence[int] = (64, 8, 1),
    *,
    L: int = KV_EXAMPLE["L"],
    N: int = KV_EXAMPLE["N"],
    H: int = KV_EXAMPLE["H"],
) -> str:
    """``KV cache: S=8192, L=64, N·H=8192 → MHA (K=64) 8 GiB int8, 16 GiB bf16 | GQA (K=8) 1 GiB int8, … | MQA …``."""
    head = f"{KV_PREFIX}S={format_number(S) if isinstance(S, (int, float)) else S}, L={L}, N·H={N * H}"
    try:
        parts = [
            f"{_kv_label(K, N)} (K={K}) {format_binary_bytes(kv_bytes_per_sequence(S, K, L=L, N=N, H=H))} int8, "
            f"{format_binary_bytes(kv_bytes_per_sequence(S, K, L=L, N=N, H=H, dtype='bf16'))} bf16"
            for K in Ks
        ]
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    return f"{head} → " + " | ".join(parts)


def render_kv_cache(
    Ks: Sequence[int] = (64, 8, 1),
    *,
    L: int = KV_EXAMPLE["L"],
    N: int = KV_EXAMPLE["N"],
    H: int = KV_EXAMPLE["H"],
    S_range: tuple[float, float] = (512, 2**20),
    S_mark: float = 8192,
    chips: Sequence[str] = ("tpu-v5e", "h100"),
    ax=None,
) -> Figure:
    """Log-log KV-cache bytes of one sequence against S for each K (colour) in bf16 (solid) and int8 (dashed),
    the book's 8 GiB example (S = 8192, MHA, int8) marked, and the HBM of `chips` as horizontal lines."""
    try:
        lo, hi = S_range
        if not 1 <= lo < hi:
            raise ValueError(f"S_range must be 1 ≤ lo < hi, got {S_range}")
        S = np.logspace(math.log10(lo), math.log10(hi), 100)
        curves = {(K, d): S * kv_bytes_per_sequence(1, K, L=L, N=N, H=H, dtype=d) for K in Ks for d in ("bf16", "int8")}
        specs = [get_chip(c) for c in chips]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((9.0, 5.2), ax)
    for i, K in enumerate(Ks):
        c = PALETTE[i % len(PALETTE)]
        ax.plot(S, curves[(K, "bf16")], color=c, lw=2, label=f"{_kv_label(K, N)} K = {K}, bf16")
        ax.plot(S, curves[(K, "int8")], color=c, lw=1.6, ls="--", label=f"{_kv_label(K, N)} K = {K}, int8")
    for spec in specs:
        ax.axhline(spec.hbm_bytes, color="0.45", lw=1, ls=":")
        ax.text(
            lo * 1.1,
            spec.hbm_bytes * 1.08,
            f"{spec.name} HBM ({format_si(spec.hbm_bytes, 'B', 3)})",
            fontsize=7.5,
            ha="left",
            va="bottom",
            color="0.35",
        )
    if N in Ks and lo <= S_mark <= hi:
        v = kv_bytes_per_sequence(S_mark, N, L=L, N=N, H=H)
        ax.plot([S_mark], [v], "o", color="black", ms=7, zorder=6)
        note = (
            f"book: S = {format_number(S_mark)}, L = {L}, KH = {N * H:,}\n2·S·L·K·H = {format_binary_bytes(v)} (int8)"
        )
        ax.annotate(
            note,
            (S_mark, v),
            xytext=(25, -55),
            textcoords="offset points",
            fontsize=8,
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.6", "alpha": 0.95},
            arrowprops={"arrowstyle": "->", "color": "0.3"},
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v / 1024:.0f}k" if v >= 1024 else f"{v:.0f}"))
    ax.yaxis.set_major_locator(LogLocator(base=2, numticks=30))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda v, _p: format_binary_bytes(v) if v > 0 and round(math.log2(v)) % 2 == 0 else "")
    )
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("context length S (tokens, one sequence)")
    ax.set_ylabel("KV cache (bytes; 2·S·L·K·H × bytes per value)")
    ax.set_title(f"KV cache per sequence: L = {L}, N = {N}, H = {H} (MHA: K = N; GQA: K < N; MQA: K = 1)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2, framealpha=0.9)
    return fig
