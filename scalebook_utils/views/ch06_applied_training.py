"""Views for chapter 6 (applied training): LLaMA 3's parameters, days to train, memory per chip, the budget
widget and the book's decision path — readouts, figures and widgets over `training` and `transformer`.

The same three layers as `training_views` (DESIGN §3): a pure *readout* returning one deterministic line with
a fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets
controls to both. Bad input (an unknown model) gives a readable line and a message figure, never an
exception. The numbers it draws and prints (`param_breakdown`, `days_to_train`, `memory_per_chip`,
`min_chips_for_model`, `decision_path`) are computed in `core.training.applied` and re-exported here
(`applied_training_views.days_to_train`, … as before). What it shares with chapter 5 comes from below the views:
`model_name` from `core.training.pictures`, `format_rows` and the error handling from the views' kit
(`views._kit`); the chapter-5 planner widget itself stays in `training_views`.

Book ch. 6 "Training LLaMA 3 on TPUs".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip

# the numbers these views show (pure, in core; re-exported here)
from scalebook_utils.core.training.applied import (
    days_to_train,
    decision_path,
    memory_per_chip,
    min_chips_for_model,
    param_breakdown,
)
from scalebook_utils.core.training.pictures import model_name

# `applied_training_views.get_plan` is `training_views.get_plan`: one planner cache for chs. 5 and 6
from scalebook_utils.core.training.planner import cached_plan as get_plan  # noqa: F401
from scalebook_utils.core.units import format_bytes, format_si, format_time
from scalebook_utils.views._kit import (
    INPUT_ERRORS,
    attach,
    emit,
    error_text,
    format_rows,
    message_figure,
    new_figure,
    plain_formatter,
)

__all__ = [
    "BUDGET_PREFIX",
    "param_breakdown",
    "render_param_breakdown",
    "days_to_train",
    "render_days_to_train",
    "memory_per_chip",
    "min_chips_for_model",
    "render_memory_vs_checkpoints",
    "budget_readout",
    "render_budget",
    "budget_widget",
    "decision_path",
    "decision_path_text",
]

#: The budget widget's readout starts with this prefix; do not change it.
BUDGET_PREFIX = "training budget: "


def _count(n: float) -> str:
    """56.4e9 → '56.4 B', 1.32e6 → '1.32 M' (parameter counts, as the book writes them)."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def _share(x: float) -> str:
    return f"{x:.1%}" if x >= 0.01 else f"{100 * x:.2g}%"


def render_param_breakdown(models: Sequence[str] | str = ("llama3-70b", "llama3-405b")) -> Figure:
    """One panel per model: horizontal bars of each part's parameters (billions), labelled with count and share."""
    models = [models] if isinstance(models, (str, tf.TransformerConfig)) else list(models)
    try:
        data = {tf.get_model(m).name: param_breakdown(m) for m in models}
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    parts = list(next(iter(data.values())))
    fig = Figure(figsize=(5.2 * len(data), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(data), sharey=True))
    palette = ["#1f4e9c", "#e6550d", "#31a354", "#7b3294"]
    for i, (ax, (name, d)) in enumerate(zip(axes, data.items())):
        total = sum(d.values())
        ys = np.arange(len(parts))[::-1]
        vals = np.array([d[p] for p in parts]) / 1e9
        ax.barh(ys, vals, height=0.6, color=palette[i % len(palette)])
        for y, v, p in zip(ys, vals, parts):
            ax.text(v + vals.max() * 0.015, y, f"{_count(d[p])} ({_share(d[p] / total)})", va="center", fontsize=8)
        ax.set_yticks(ys, parts)
        ax.set_xlim(0, vals.max() * 1.45)
        ax.set_xlabel("parameters (billions)")
        ax.set_title(f"{name}: {_count(total)} parameters", fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(
        "Where the parameters are (book ch. 6): FFW 3·L·D·F, attention L·(2DNH + 2DKH), vocab 2·V·D, norms (2L + 1)·D",
        fontsize=10,
    )
    return fig


def render_days_to_train(
    model="llama3-70b",
    tokens: float = 15e12,
    chip="tpu-v5p",
    mfus: Sequence[float] = (0.2, 0.4, 0.6),
    *,
    chips: float | None = None,
    current_mfu: float | None = None,
    chips_range: tuple[float, float] = (256, 2**17),
    mfu_range: tuple[float, float] | None = None,
    slots: int = 0,
    ax=None,
) -> Figure:
    """Log-log days to train against the number of chips for several MFUs; the full pod and `chips` marked
    (and the curve of `current_mfu` drawn thicker).

    `mfu_range` (lo, hi): the y-axis spans the days of every MFU in it (not only `mfus`), so a widget's MFU
    slider keeps the axes still. `slots`: draw at least this many curves (empty, unlabelled ones fill up), so a
    step that adds or drops a curve keeps the same artists."""
    try:
        spec = get_chip(chip)
        name = tf.get_model(model).name
        n = np.logspace(math.log10(chips_range[0]), math.log10(chips_range[1]), 200)
        curves = {m: np.array([days_to_train(name, tokens, x, spec, m) for x in n]) for m in mfus}
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((8.5, 4.8), ax)
    shades = ["#9ecae1", "#3182bd", "#08519c", "#08306b"]
    for i, (m, d) in enumerate(curves.items()):
        cur = current_mfu is not None and math.isclose(m, current_mfu)
        ax.plot(
            n,
            d,
            lw=3.2 if cur else 2,
            color=shades[i % len(shades)],
            label=f"MFU {m:.0%}" + (" (current)" if cur else ""),
        )
    for _ in range(slots - len(curves)):
        ax.plot([], [])  # an empty slot (no legend entry)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(n[0], n[-1])
    if mfu_range is not None:  # days ∝ 1 / (chips · MFU): the extremes are the range's corners
        lo = days_to_train(name, tokens, n[-1], spec, max(mfu_range[1], *mfus))
        hi = days_to_train(name, tokens, n[0], spec, min(mfu_range[0], *mfus))
        ax.set_ylim(lo * (hi / lo) ** -0.05, hi * (hi / lo) ** 0.05)  # 5% margins in log space, as autoscale
    if spec.pod_chips and n[0] < spec.pod_chips < n[-1]:
        ax.axvline(spec.pod_chips, color="#d62728", lw=1.2, ls="--")
        low = min(c.min() for c in curves.values())
        ax.text(
            spec.pod_chips / 1.07,
            low * 1.1,
            f"full {spec.name} pod\n({spec.pod_chips:,} chips)",
            color="#d62728",
            fontsize=8,
            va="bottom",
            ha="right",
        )
        if chips is None:
            for i, m in enumerate(mfus):
                d = days_to_train(name, tokens, spec.pod_chips, spec, m)
                ax.plot([spec.pod_chips], [d], "o", color=shades[i % len(shades)], ms=5)
                ax.text(
                    spec.pod_chips * 1.1, d * 1.04, f"{d:.3g} days", fontsize=7.5, ha="left", va="bottom", color="0.15"
                )
    if chips is not None and n[0] <= chips <= n[-1]:
        for i, m in enumerate(mfus):
            ax.plot([chips], [days_to_train(name, tokens, chips, spec, m)], "o", color=shades[i % len(shades)], ms=6)
        for _ in range(slots - len(mfus)):
            ax.plot([], [])
        ax.axvline(chips, color="0.4", lw=1)
    for d in (7, 30, 365):
        ax.axhline(d, color="0.7", lw=0.8, ls=":")
        ax.text(
            n[0] * 1.05,
            d * 1.05,
            {7: "1 week", 30: "1 month", 365: "1 year"}[d],
            ha="left",
            va="bottom",
            fontsize=7,
            color="0.4",
        )
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel(f"number of {spec.name} chips")
    ax.set_ylabel("days to train")
    ax.set_title(f"{name} on {format_si(tokens, digits=3)} tokens: 6·P·tokens / (chips · C · MFU)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def render_memory_vs_checkpoints(
    model="llama3-70b",
    batch_tokens: float = 4 * 2**20,
    n_chips: int = 256,
    chip="tpu-v5p",
    checkpoints: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8),
    *,
    current: float | None = None,
    ax=None,
) -> Figure:
    """Stacked bars of memory per chip (params, optimizer, activation checkpoints) against checkpoints per
    layer on `n_chips` chips, with the chip's HBM as a line; bars over HBM are hatched. When every bar is
    under a quarter of HBM the axis zooms onto the bars and HBM is named in the legend instead (a line at
    96 GB would flatten 1 GB bars into the axis)."""
    try:
        spec = get_chip(chip)
        name = tf.get_model(model).name
        data = [memory_per_chip(name, batch_tokens, n_chips, k) for k in checkpoints]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig, ax = new_figure((8.5, 4.8), ax)
    x = np.arange(len(checkpoints))
    bottom = np.zeros(len(x))
    hbm = spec.hbm_bytes / 1e9
    for part, color in (("params", "#1f4e9c"), ("optimizer", "#9ecae1"), ("activations", "#e6550d")):
        v = np.array([d[part] for d in data]) / 1e9
        label = {
            "params": "params (bf16, 2 B each)",
            "optimizer": "Adam state (fp32, 8 B per param)",
            "activations": "activation checkpoints (bf16)",
        }[part]
        bars = ax.bar(x, v, bottom=bottom, color=color, label=label, width=0.7)
        for bar, tot in zip(bars, bottom + v):
            if part == "activations" and tot > hbm:
                bar.set_hatch("//")
                bar.set_edgecolor("#7f2704")
        bottom += v
    for xi, t in zip(x, bottom):
        ax.text(xi, t, f"{t:.3g} GB", ha="center", va="bottom", fontsize=8)
    zoom = bottom.max() < hbm / 4
    if zoom:  # HBM far above every bar: keep the bars readable, say where HBM is
        ax.plot(
            [],
            [],
            color="#d62728",
            lw=1.5,
            ls="--",
            label=f"HBM per chip ({hbm:.0f} GB, {hbm / bottom.max():.0f}× the tallest bar: off this scale)",
        )
    else:
        ax.axhline(hbm, color="#d62728", lw=1.5, ls="--", label=f"HBM per chip ({hbm:.0f} GB)")
    if current is not None and current in checkpoints:
        i = list(checkpoints).index(current)
        ax.annotate(
            "current", (i, bottom[i]), xytext=(0, 14), textcoords="offset points", ha="center", fontsize=8, color="0.3"
        )
    ax.set_xticks(x, [str(k) for k in checkpoints])
    ax.set_ylim(0, (bottom.max() * 1.35) if zoom else max(bottom.max(), hbm) * 1.18)
    ax.set_xlabel("activation checkpoints per layer (each D values per token, bf16)")
    ax.set_ylabel("memory per chip (GB)")
    ax.set_title(
        f"{name}, batch {format_si(batch_tokens, digits=3)} tokens on {n_chips:,} chips (everything sharded evenly)",
        fontsize=10,
    )
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def budget_readout(
    model="llama3-70b",
    tokens: float = 15e12,
    chips: int = 8960,
    mfu: float = 0.4,
    checkpoints_per_layer: int = 2,
    batch_tokens: float = 4 * 2**20,
    chip="tpu-v5p",
) -> str:
    """``training budget: llama3-70b, 15 T tokens, chips=8960, MFU=40% → 44.2 days | 6.35e+24 FLOPs | …``."""
    head = (
        f"{BUDGET_PREFIX}{model_name(model)}, {format_si(float(tokens), digits=3)} tokens, chips={chips}, MFU={mfu:.0%}"
    )
    try:
        spec = get_chip(chip)
        P = tf.param_count(tf.get_model(model)).total
        days = days_to_train(model, tokens, chips, spec, mfu)
        mem = memory_per_chip(model, batch_tokens, chips, checkpoints_per_layer)
        per_chip = sum(mem.values())
        need = min_chips_for_model(model, batch_tokens, checkpoints_per_layer, spec)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    fits = "fits" if per_chip <= spec.hbm_bytes else "does NOT fit"
    return (
        f"{head} → {days:.3g} days | {6 * P * tokens:.3g} FLOPs | {checkpoints_per_layer} checkpoints/layer: "
        f"{format_bytes(per_chip * chips)} in all, {format_bytes(per_chip)}/chip ({fits} in "
        f"{format_bytes(spec.hbm_bytes)}) | memory alone needs ≥ {need:,} chips"
    )


#: The budget widget's MFU slider range (the days axis spans it, so moving the slider only moves curves).
MFU_RANGE = (0.05, 1.0)


def render_budget(
    model="llama3-70b",
    tokens: float = 15e12,
    chips: int = 8960,
    mfu: float = 0.4,
    checkpoints_per_layer: int = 2,
    batch_tokens: float = 4 * 2**20,
    chip="tpu-v5p",
) -> Figure:
    """Days to train vs chips (current chips and MFU marked) beside memory per chip vs checkpoints per layer."""
    try:
        budget_line = budget_readout(model, tokens, chips, mfu, checkpoints_per_layer, batch_tokens, chip)
        if "cannot evaluate" in budget_line:
            raise ValueError(budget_line.split("cannot evaluate: ", 1)[1])
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(13.0, 4.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    mfus = sorted({0.2, 0.4, round(float(mfu), 2)} | {0.6})
    render_days_to_train(
        model,
        tokens,
        chip,
        mfus,
        chips=chips,
        current_mfu=round(float(mfu), 2),
        chips_range=(min(128, chips / 2), max(2**17, chips * 2)),
        mfu_range=MFU_RANGE,
        slots=4,
        ax=ax1,
    )
    ks = list(range(1, max(8, int(checkpoints_per_layer)) + 1))  # evenly spaced: every count up to the current
    render_memory_vs_checkpoints(model, batch_tokens, chips, chip, ks, current=checkpoints_per_layer, ax=ax2)
    return fig


def budget_widget(
    model: str = "llama3-70b",
    tokens: float = 15e12,
    chips: int = 8960,
    mfu: float = 0.4,
    checkpoints_per_layer: int = 2,
    batch_tokens: int = 4 * 2**20,
    chip: str = "tpu-v5p",
) -> widgets.VBox:
    """Model, training tokens, chips, an MFU slider and a checkpoints-per-layer slider; prints `budget_readout`."""
    models = list(tf.MODELS)
    model_dd = widgets.Dropdown(
        options=models if model in models else [model] + models, value=model, description="model"
    )
    tokens_dd = widgets.Dropdown(
        options=[("1T", 1e12), ("2T", 2e12), ("15T", 15e12), ("30T", 30e12)], value=tokens, description="tokens"
    )
    chips_box = widgets.BoundedIntText(value=chips, min=1, max=10**7, description="chips")
    mfu_sl = widgets.FloatSlider(
        value=mfu,
        min=MFU_RANGE[0],
        max=MFU_RANGE[1],
        step=0.05,
        description="MFU",
        readout_format=".0%",
        continuous_update=False,
    )
    ck_sl = widgets.IntSlider(
        value=checkpoints_per_layer, min=1, max=20, description="ckpt/layer", continuous_update=False
    )
    box = widgets.VBox()

    def view(model, tokens, chips, MFU, ckpt):
        emit(
            box,
            budget_readout(model, tokens, chips, MFU, ckpt, batch_tokens, chip),
            lambda: render_budget(model, tokens, chips, MFU, ckpt, batch_tokens, chip),
            key=(model, tokens, chips, ckpt),
        )

    controls = {"model": model_dd, "tokens": tokens_dd, "chips": chips_box, "MFU": mfu_sl, "ckpt": ck_sl}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([model_dd, tokens_dd, chips_box]), widgets.HBox([mfu_sl, ck_sl]), out]
    values = lambda: tuple(c.value for c in controls.values())  # noqa: E731
    return attach(
        box,
        controls,
        out,
        lambda: budget_readout(*values(), batch_tokens, chip),
        lambda: render_budget(*values(), batch_tokens, chip),
    )


# --- the decision path ------------------------------------------------------------------------------------


def decision_path_text(
    model="llama3-70b",
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    chip="tpu-v5p",
    n_chips: int | None = None,
    checkpoints_per_layer: float = 2,
) -> str:
    """`decision_path` as a fixed-width table (deterministic text: rounded numbers only)."""
    rows = decision_path(model, batch_tokens, seq_len, chip, n_chips, checkpoints_per_layer)
    cells = []
    for r in rows:
        name, thr = r["threshold"]
        cells.append(
            {
                "step": r["step"],
                "config": r["config"],
                "tokens/chip": f"{r['tokens_per_chip']:.0f}",
                "threshold": f"{name} = {thr:,.0f}",
                "step time": format_time(r["step_s"]) if r["feasible"] else "-",
                "MFU": f"{r['mfu']:.0%}" if r["feasible"] else "-",
                "verdict": r["verdict"] if r["feasible"] else "infeasible",
            }
        )
    text = format_rows(cells)
    reasons = [f"  {r['step']}: {r['estimate'].reason}" for r in rows if not r["feasible"]]
    return text + ("\nwhy infeasible:\n" + "\n".join(reasons) if reasons else "")
