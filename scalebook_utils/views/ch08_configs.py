"""Chapter 8 views, sections 1 and 2: what serving needs in memory (the smallest slice per precision:
`smallest_slice_rows` / `_text` / `_readout`, `render_memory_per_slice`) and latency and throughput per
configuration (`config_rows` / `_text` / `_readout`, `render_configs`). Re-exported by `ch08_applied_inference`
(`applied_inference_views`).

Book ch. 8 "Serving LLaMA 3-70B on TPUs".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference.applied import BOOK_CONFIGS, config_rows, smallest_slice_rows
from scalebook_utils.core.units import format_bytes, format_time
from scalebook_utils.views._kit import INPUT_ERRORS, PALETTE, error_text, format_number, format_rows, message_figure
from scalebook_utils.views.ch08_common import BOOK_70B, BOOK_PRECISIONS, CONFIG_PREFIX, SLICE_PREFIX, precision_label
from scalebook_utils.views.ch08_common import fail_text as _fail
from scalebook_utils.views.ch08_common import gb as _gb
from scalebook_utils.views.ch08_common import model_label as _label
from scalebook_utils.views.ch08_common import precision_meaning as _meaning
from scalebook_utils.views.ch08_common import safe_label as _safe_label
from scalebook_utils.views.ch08_common import safe_num as _safe_num

__all__ = [
    "smallest_slice_rows",
    "smallest_slice_text",
    "smallest_slice_readout",
    "render_memory_per_slice",
    "BOOK_CONFIGS",
    "config_rows",
    "config_text",
    "config_readout",
    "render_configs",
]


# --- 1. what serving needs in memory: the smallest slice per precision --------------------------------------


def smallest_slice_text(
    model=BOOK_70B, chip="tpu-v5e", S: float = 8192, precisions: Sequence = BOOK_PRECISIONS, *, doubled: bool = False
) -> str:
    """`smallest_slice_rows` as the book's table (rounded text, deterministic)."""
    cells = [
        {
            "precision": precision_label(r["precision"]),
            "params": _gb(r["weights"]),
            "KV/token": format_bytes(r["kv_per_token"]),
            "params ÷ HBM/chip": f"{r['weight_chips']:.3g}",
            "chips": str(r["chips"]),
            "slice": r["slice"],
            "HBM free for KV": _gb(r["free"]),
            f"{format_number(S)}-token caches": str(r["B_max"]),
        }
        for r in smallest_slice_rows(model, chip, S, precisions, doubled=doubled)
    ]
    return format_rows(cells)


def smallest_slice_readout(
    precision="bf16", model=BOOK_70B, chip="tpu-v5e", S: float = 8192, *, doubled: bool = False
) -> str:
    """``smallest slice: llama3-70b (70B params) in bf16, S=8192 → weights 140 GB = 8.75 chips → 16 chips (4x4) |
    116 GB free → 43 caches of 8192 tokens (2.68 GB each)``."""
    head = f"{SLICE_PREFIX}{_safe_label(model)} in {precision}, S={_safe_num(S)}"
    try:
        head = f"{SLICE_PREFIX}{_label(model)} in {_meaning(precision)}, S={format_number(S)}"
        r = smallest_slice_rows(model, chip, S, (precision,), doubled=doubled)[0]
        per_seq = inf.kv_cache_bytes(model, 1, S, precision)
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    how = "doubled: " if doubled else ""
    return (
        f"{head} → weights {_gb(r['weights'])} = {r['weight_chips']:.3g} chips → {how}{r['chips']} chips "
        f"({r['slice']}) | {_gb(r['free'])} free → {r['B_max']} caches of {format_number(S)} tokens "
        f"({_gb(per_seq)} each)"
    )


def render_memory_per_slice(
    model=BOOK_70B, chip="tpu-v5e", S: float = 8192, precisions: Sequence = BOOK_PRECISIONS
) -> Figure:
    """Stacked bars per precision, for the smallest slice and the doubled one: weights + the largest batch of
    S-token KV caches, against the slice's HBM (red tick). Book ch. 8 in-text questions 5 and 8."""
    try:
        small = smallest_slice_rows(model, chip, S, precisions)
        big = smallest_slice_rows(model, chip, S, precisions, doubled=True)
        name = _label(model)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(9.0, 4.6), layout="constrained")
    ax = fig.add_subplot()
    rows = [r for pair in zip(small, big) for r in pair]
    x = np.arange(len(rows)) + np.repeat(np.arange(len(small)) * 0.6, 2)
    w = np.array([r["weights"] for r in rows]) / 1e9
    kv = np.array([r["memory"] - r["weights"] for r in rows]) / 1e9
    ax.bar(x, w, width=0.8, color=PALETTE[0], label="weights")
    ax.bar(
        x,
        kv,
        width=0.8,
        bottom=w,
        color=PALETTE[1],
        alpha=0.85,
        label=f"KV caches at the largest batch ({format_number(S)} tokens each)",
    )
    for i, r in enumerate(rows):
        hbm = r["hbm"] / 1e9
        ax.hlines(hbm, x[i] - 0.45, x[i] + 0.45, color=PALETTE[4], lw=2.2, label="HBM of the slice" if i == 0 else None)
        ax.text(x[i], hbm * 1.02, f"B={r['B_max']}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [f"{precision_label(r['precision'])}\n{r['slice']} ({r['chips']})" for r in rows], fontsize=8.5)
    ax.set_ylim(0, max(r["hbm"] for r in rows) / 1e9 * 1.12)
    ax.set_xlabel("precision, slice (chips): smallest slice, then doubled")
    ax.set_ylabel("memory (GB)")
    ax.set_title(f"{name} on {get_chip(chip).name}: weights + KV caches fill the slice's HBM", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return fig


# --- 2. latency and throughput per configuration ------------------------------------------------------------


def config_text(
    model=BOOK_70B,
    chip="tpu-v5e",
    S: float = 8192,
    configs: Sequence = BOOK_CONFIGS,
    *,
    B: int | None = None,
    decode_len: float = 512,
) -> str:
    """`config_rows` as a table (rounded text)."""
    cells = [
        {
            "precision": precision_label(r["precision"]),
            "slice": f"{r['slice']} ({r['chips']})",
            "B": format_number(r["B"]),
            "ms/step at B=1": f"{r['min_latency'] * 1e3:.3g}",
            "ms/step at B": f"{r['latency'] * 1e3:.3g}",
            "tokens/s/chip": f"{r['tokens_per_s_per_chip']:.4g}",
            f"queries/s/chip ({format_number(decode_len)} tokens)": f"{r['queries_per_s_per_chip']:.3g}",
            "$/1M tokens": "-" if r["cost"] is None else f"{r['cost']:.3g}",
            "bound by": r["bound"],
        }
        for r in config_rows(model, chip, S, configs, B=B, decode_len=decode_len)
    ]
    return format_rows(cells)


def config_readout(
    precision="int8-weights",
    slice_="4x2",
    model=BOOK_70B,
    chip="tpu-v5e",
    S: float = 8192,
    B: int | None = None,
    decode_len: float = 512,
) -> str:
    """``serving config: llama3-70b (70B params) int8 on tpu-v5e 4x2, S=8192 → batch 1 … 43 fits | B=43:
    19.5 ms/step, 276.1 tokens/s/chip, 0.539 queries/s/chip (512-token answers), $1.21/1M tokens (weights-bound)``."""
    head = f"{CONFIG_PREFIX}{_safe_label(model)} {precision} on {chip} {slice_}, S={_safe_num(S)}"
    try:
        head = (
            f"{CONFIG_PREFIX}{_label(model)} {_meaning(precision)} on {get_chip(chip).name} {slice_}, "
            f"S={format_number(S)}"
        )
        r = config_rows(model, chip, S, ((precision, slice_),), B=B, decode_len=decode_len)[0]
    except INPUT_ERRORS as exc:
        return _fail(head, exc)
    cost = "" if r["cost"] is None else f", ${r['cost']:.3g}/1M tokens"
    return (
        f"{head} → batch 1 … {r['B_max']} fits | B={format_number(r['B'])}: {format_time(r['latency'])}/step, "
        f"{r['tokens_per_s_per_chip']:.4g} tokens/s/chip, {r['queries_per_s_per_chip']:.3g} queries/s/chip "
        f"({format_number(decode_len)}-token answers){cost} ({r['bound']}-bound)"
    )


_TERMS = (
    ("t_hbm_weights", "load weights (HBM)", PALETTE[0]),
    ("t_hbm_kv", "load KV caches (HBM)", PALETTE[1]),
    ("t_math", "matmul FLOPs (MLP, projections)", PALETTE[2]),
    ("t_math_attention", "attention FLOPs", PALETTE[3]),
    ("t_ici", "TP collectives (ICI)", "0.55"),
)


def render_configs(
    model=BOOK_70B, chip="tpu-v5e", S: float = 8192, configs: Sequence = BOOK_CONFIGS, *, B: int | None = None
) -> Figure:
    """Left: each term of the decode step (milliseconds) and the step itself (black tick) per configuration at batch
    B (default: the largest that fits). Right: tokens/s per chip, labelled with $/1M tokens."""
    try:
        rows = config_rows(model, chip, S, configs, B=B)
        name = _label(model)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1.8, 1])
    y = np.arange(len(rows))[::-1]
    h = 0.8 / len(_TERMS)
    for k, (attr, label, color) in enumerate(_TERMS):
        vals = np.array([getattr(r["step"], attr) for r in rows]) * 1e3
        ax.barh(y + 0.4 - h * (k + 0.5), vals, height=h, color=color, label=label)
    steps = np.array([r["latency"] for r in rows]) * 1e3
    ax.vlines(steps, y - 0.45, y + 0.45, color="k", lw=2, label="step time (KV + max(FLOPs, weights); ICI overlapped)")
    for yi, s in zip(y, steps):
        ax.text(s * 1.02, yi + 0.3, f"{s:.3g} ms", fontsize=8, va="center")
    labels = [f"{precision_label(r['precision'])} {r['slice']}\nB={format_number(r['B'])}" for r in rows]
    ax.set_yticks(y, labels, fontsize=8.5)
    ax.set_xlim(0, steps.max() * 1.25)
    ax.set_xlabel("time per decode step (ms)")
    ax.set_ylabel("configuration (precision, slice, batch)")
    ax.set_title(f"{name}, {format_number(S)}-token context: what each decode step spends its time on", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8)
    tput = np.array([r["tokens_per_s_per_chip"] for r in rows])
    ax2.barh(y, tput, height=0.6, color=PALETTE[0])
    for yi, r in zip(y, rows):
        money = "" if r["cost"] is None else f"  ${r['cost']:.3g}/1M"
        ax2.text(
            r["tokens_per_s_per_chip"] * 1.02, yi, f"{r['tokens_per_s_per_chip']:.0f}{money}", va="center", fontsize=8
        )
    ax2.set_yticks(y, labels, fontsize=8.5)
    ax2.set_xlim(0, tput.max() * 1.45)
    ax2.set_xlabel("throughput (tokens/s per chip)")
    ax2.set_ylabel("configuration")
    ax2.set_title("throughput and cost per million tokens", fontsize=10)
    ax2.grid(True, axis="x", alpha=0.3)
    return fig
