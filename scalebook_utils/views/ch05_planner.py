"""Views for chapter 5 (training), the planner: a readout, the top-N table, a figure and the planner widget.

`planner_readout` gives one line with the prefix ``planner: `` (the browser test waits for it): the best
configuration for a model, chip, chips per slice, slices over DCN, global batch and sequence length, with its
step time, MFU, what bounds it and its memory per chip. `planner_rows` / `planner_text` give the `n` fastest
feasible configurations as a table under `Plan.explain()`; `render_planner` draws the winner's time components
beside the best configuration of each family (DP, FSDP, TP, FSDP+TP, pipeline); `planner_widget` wires them to
ipywidgets controls (`_kit.attach`: ``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()``). The plan
itself is `training.plan`, cached by `training.cached_plan`. Bad input (an unknown model, no
feasible configuration) gives a readable line and a message figure, never an exception.

`training_views` (`ch05_training`) re-exports these names with the chapter's other views; chapter 6 opens the
same widget on its worked problems. Book ch. 5 "How to Parallelize a Transformer for Training" (the notebook's
"Putting it together: a planner": the chapter's data, fully-sharded, tensor and pipeline parallelism, and
scaling across pods over DCN, searched together).
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as training
from scalebook_utils.core.training.pictures import model_name
from scalebook_utils.core.units import format_bytes, format_si, format_time
from scalebook_utils.views._kit import (
    INPUT_ERRORS,
    attach,
    emit,
    error_text,
    format_number,
    format_rows,
    message_figure,
    tpu_names,
)

__all__ = ["PLANNER_PREFIX", "planner_readout", "planner_rows", "planner_text", "render_planner", "planner_widget"]

#: The browser tests wait for this prefix; do not change it.
PLANNER_PREFIX = "planner: "


# --- (3) the planner -----------------------------------------------------------------------------------


def _planner_head(model, chip, chips, slices, batch_tokens, seq_len) -> str:
    if chips in (None, 0):
        try:
            chips_s = str(get_chip(chip).pod_chips)
        except INPUT_ERRORS:
            chips_s = "pod"
    else:
        chips_s = format_number(chips)
    return (
        f"{PLANNER_PREFIX}{model_name(model)}, {getattr(chip, 'name', chip)}, chips={chips_s}, "
        f"slices={slices}, batch={format_si(float(batch_tokens), digits=3)} tokens, seq={seq_len}"
    )


def planner_readout(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
) -> str:
    """``planner: llama3-70b, tpu-v5p, chips=8960, slices=1, batch=4.19M tokens, seq=4096 → best: FSDP 2240 × TP 4 |
    442 ms/step | MFU 100% | bound by compute | 13.2 GB/chip``."""
    try:
        head = _planner_head(model, chip, chips, slices, batch_tokens, seq_len)
    except INPUT_ERRORS:  # a batch that is not a number: keep the line readable
        head = f"{PLANNER_PREFIX}{model_name(model)}, {getattr(chip, 'name', chip)}, chips={chips}, slices={slices}"
    try:
        p = training.cached_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
        b = p.best
    except INPUT_ERRORS as exc:
        return f"{head} → no plan: {error_text(exc)}"
    return (
        f"{head} → best: {b.config.name} | {format_time(b.step_time)}/step | MFU {b.mfu:.0%} | "
        f"bound by {b.bound} | {format_bytes(b.memory.total)}/chip"
    )


def planner_rows(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
    n: int = 6,
) -> list[dict[str, str]]:
    """The `n` fastest feasible configurations as text cells: config, ZeRO, remat, step, MFU, bound, memory/chip."""
    p = training.cached_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
    return [
        {
            "config": e.config.name,
            "ZeRO": str(e.config.zero),
            "remat": str(e.config.remat),
            "step": format_time(e.step_time),
            "MFU": f"{e.mfu:.0%}",
            "bound by": e.bound,
            "memory/chip": format_bytes(e.memory.total),
        }
        for e in p.feasible[:n]
    ]


def planner_text(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
    n: int = 6,
) -> str:
    """The lines the planner widget prints under its readout: `Plan.explain()` and the top-`n` table."""
    try:
        p = training.cached_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
        explain = p.explain()
    except INPUT_ERRORS as exc:
        return f"(no feasible configuration: {error_text(exc)})"
    return (
        explain
        + "\n\n"
        + format_rows(planner_rows(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding, n))
    )


#: The right panel's bars, keyed by `Estimate.family` (what `Plan.best_of` groups by); DP + TP and FSDP + TP
#: share one bar, so the bar shows the faster of the two.
_FAMILY_LABELS = {
    "dp": "DP, ZeRO-1/2",
    "fsdp": "FSDP",
    "tp": "TP",
    "dp+tp": "DP or FSDP + TP",
    "fsdp+tp": "DP or FSDP + TP",
    "pp": "with pipeline",
}


def render_planner(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
) -> Figure:
    """Left: the winner's time components (compute and each communication; the longest sets the step).
    Right: the step time of the best configuration of each family (DP, FSDP, TP, FSDP+TP, pipeline)."""
    try:
        p = training.cached_plan(model, chip, chips, slices, batch_tokens, seq_len, allow_sequence_sharding)
        b = p.best
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}", figsize=(10, 1.4))
    fig = Figure(figsize=(11.0, 4.0))  # fixed margins: constrained layout would double the widget's redraw time
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[1, 1.1])
    fig.subplots_adjust(left=0.115, right=0.99, bottom=0.13, top=0.86, wspace=0.42)
    times = {k: v for k, v in b.times.items() if v > 0 or k == "compute"}
    names = list(times)[::-1]
    vals = np.array([times[k] for k in names]) * 1e3
    colors = ["#54a24b" if k == "compute" else "#e45756" if k == b.bound else "#9ecae1" for k in names]
    ax1.barh(names, vals, color=colors)
    for y, v in enumerate(vals):
        ax1.text(v, y, f" {v:.3g} ms", va="center", fontsize=8)
    ax1.set_xlim(0, vals.max() * 1.3)
    ax1.set_xlabel("time per step (ms; they overlap, the longest sets the step)")
    ax1.set_title(
        f"winner: {b.config.name}\n{format_time(b.step_time)}/step, MFU {b.mfu:.0%}, bound by {b.bound}", fontsize=9
    )
    # one bar per label (`_FAMILY_LABELS`: DP + TP and FSDP + TP share one); p.feasible is ranked
    fam = [
        (k, next((e for e in p.feasible if _FAMILY_LABELS[e.family] == k), None))
        for k in dict.fromkeys(_FAMILY_LABELS.values())
    ]
    labels, steps, cols, notes = [], [], [], []
    for k, e in fam:
        labels.append(k)
        if e is None:
            steps.append(0.0)
            cols.append("0.8")
            why = next((x.reason for x in p.estimates if _FAMILY_LABELS[x.family] == k), None)
            if why is None:
                notes.append(" not tried: the planner keeps TP ≤ 64, PP ≤ 16")
            else:
                why = why.split("; ")[0]
                notes.append(" infeasible: " + (why if len(why) <= 50 else why[:48] + "…"))
        else:
            steps.append(e.step_time * 1e3)
            cols.append("#d62728" if e is b else "#1f4e9c")
            notes.append(f" {format_time(e.step_time)}, bound by {e.bound}\n {e.config.name}")
    labels, steps, cols, notes = labels[::-1], steps[::-1], cols[::-1], notes[::-1]
    ax2.barh(labels, steps, color=cols)
    top = max(steps) or 1.0
    for y, (v, t) in enumerate(zip(steps, notes)):
        ax2.text(v, y, t, va="center", fontsize=7)
    ax2.set_xlim(0, top * 2.2)
    ax2.set_xlabel("step time of the best configuration (ms)")
    ax2.set_title(
        f"best configuration of each family\n{p.model.name}, {format_si(p.batch_tokens, digits=3)} "
        f"tokens, {p.n_chips:,} {p.chip} chips",
        fontsize=9,
    )
    for a in (ax1, ax2):
        a.tick_params(axis="y", labelsize=8)
        a.grid(True, axis="x", alpha=0.3)
    return fig


_BATCH_CHOICES = [(f"{format_si(2.0**k, digits=3)} (2^{k})", 2**k) for k in range(17, 27)]


def planner_widget(
    model: str = "llama3-70b",
    chip: str = "tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: int = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
    *,
    n: int = 6,
) -> widgets.VBox:
    """Model, chip, chips per slice (default: the pod), a "slices" slider (DCN), global batch, sequence length and
    'allow sequence sharding'; prints `planner_readout`, `Plan.explain()` and the top-`n` table, draws `render_planner`."""
    spec = get_chip(chip)
    models = list(tf.MODELS)
    model_dd = widgets.Dropdown(
        options=models if model in models else [model] + models, value=model, description="model"
    )
    chip_dd = widgets.Dropdown(
        options=[c for c in tpu_names() if get_chip(c).pod_chips], value=spec.name, description="chip"
    )
    chips_box = widgets.BoundedIntText(value=int(chips or spec.pod_chips), min=1, max=10**6, description="chips/slice")
    slices_sl = widgets.IntSlider(value=slices, min=1, max=16, description="slices", continuous_update=False)
    batches = dict(_BATCH_CHOICES)
    if batch_tokens not in batches.values():
        batches = {format_si(float(batch_tokens), digits=3): int(batch_tokens)} | batches
    batch_dd = widgets.Dropdown(options=list(batches.items()), value=int(batch_tokens), description="batch")
    seq_dd = widgets.Dropdown(options=[1024, 2048, 4096, 8192, 16384, 32768], value=seq_len, description="seq len")
    seq_cb = widgets.Checkbox(value=allow_sequence_sharding, description="allow sequence sharding")

    def on_chip(change):  # registered before interactive_output: the chip's pod arrives with the chip
        chips_box.value = get_chip(change["new"]).pod_chips

    chip_dd.observe(on_chip, names="value")
    box = widgets.VBox()

    def view(model, chip, chips, slices, batch, seq, allow):
        emit(
            box,
            planner_readout(model, chip, chips, slices, batch, seq, allow),
            lambda: render_planner(model, chip, chips, slices, batch, seq, allow),
            key=(model, chip, chips, batch, seq, allow),
            lines=[planner_text(model, chip, chips, slices, batch, seq, allow, n)],
        )

    controls = {
        "model": model_dd,
        "chip": chip_dd,
        "chips": chips_box,
        "slices": slices_sl,
        "batch": batch_dd,
        "seq": seq_dd,
        "allow": seq_cb,
    }
    out = widgets.interactive_output(view, controls)
    box.children = [
        widgets.HBox([model_dd, chip_dd, chips_box]),
        widgets.HBox([batch_dd, seq_dd, seq_cb]),
        slices_sl,
        out,
    ]
    values = lambda: tuple(c.value for c in controls.values())  # noqa: E731
    return attach(box, controls, out, lambda: planner_readout(*values()), lambda: render_planner(*values()))
