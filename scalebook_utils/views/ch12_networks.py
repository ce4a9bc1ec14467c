"""Views for chapter 12 (GPUs), "Networking": the topology explorer, node → scalable unit (SU) → pod, over `gpus`.

`topology_readout` gives one line with the prefix ``gpu topology: `` (the notebook waits for it): per level its
GPUs, the bandwidth one GPU gets when all talk at once, the cables into one unit and the level's AllGather
bandwidth D·W/(D − 1) (bytes/s; book ch. 12 SuperPod tables, Appendix B). `render_topology` draws the per-GPU
bandwidth per level (log scale) next to cable vs switch bandwidth per unit; `topology_explorer` wires a GPU
dropdown and an SUs slider to both (`_kit.attach` / `_kit.emit`). Bad input (an unknown GPU, zero SUs) gives a
readable line and a message figure, never an exception. Also the chapter's bandwidth text (`bandwidth_text`),
which the other ch. 12 views share, and its cluster GPUs (`CLUSTER_CHIPS`, re-exported from `gpu_network`).
`gpu_views` (`ch12_gpus`) re-exports these names with the chapter's other views.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.gpu.network import CLUSTER_CHIPS
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, message_figure, plain_formatter

__all__ = [
    "TOPOLOGY_PREFIX",
    "CLUSTER_CHIPS",
    "bandwidth_text",
    "topology_rows",
    "topology_readout",
    "render_topology",
    "topology_explorer",
]

#: The topology explorer's readout starts with this prefix; do not change it.
TOPOLOGY_PREFIX = "gpu topology: "
_LEVEL_COLORS = {"node": "#1f4e9c", "leaf": "#e6550d", "spine": "#31a354"}


def bandwidth_text(x: float) -> str:
    """Bytes per second as text, three significant digits (``450 GB/s``)."""
    return format_si(x, "B/s", digits=3)


def topology_rows(chip: str = "h100", n_sus: int = 4) -> list[dict]:
    """One row per level: GPUs per unit, degree, switches per unit, per-GPU, cable and switch bandwidth, and the
    AllGather bandwidth D·W/(D − 1) of the level (book ch. 12 SuperPod tables)."""
    c = gpus.superpod(chip, n_sus)
    return [
        {
            "level": lv.name,
            "gpus": lv.gpus,
            "degree": lv.degree,
            "switches": lv.switches_per_unit,
            "switch_kind": lv.switch_kind,
            "per_gpu": lv.per_gpu_bytes_per_s,
            "child": lv.child_bytes_per_s,
            "cable": lv.cable_bytes_per_s,
            "switch": lv.switch_bytes_per_s,
            "collective": lv.collective_bytes_per_s,
        }
        for lv in c.levels
    ]


def topology_readout(chip: str = "h100", n_sus: int = 4) -> str:
    """``gpu topology: h100, SUs=4 → 1024 GPUs, 560 switches | node: 8 GPUs, 450 GB/s per GPU | …``."""
    head = f"{TOPOLOGY_PREFIX}{chip}, SUs={n_sus}"
    try:
        c = gpus.superpod(chip, n_sus)
        rows = topology_rows(chip, n_sus)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    parts = [
        f"{r['level']}: {r['gpus']} GPUs, {bandwidth_text(r['per_gpu'])} per GPU, cables {bandwidth_text(r['cable'])}, "
        f"AllGather {bandwidth_text(r['collective'])}"
        for r in rows
    ]
    return f"{head} → {c.total_gpus} GPUs, {c.switch_count()} switches | " + " | ".join(parts)


def _span_rows(chip, n_sus: int, max_sus: int | None) -> list[dict]:
    """`topology_rows` of the largest pod from `n_sus` up to `max_sus` SUs that the chip builds (this pod's if none)."""
    for n in range(max(max_sus or n_sus, n_sus), n_sus, -1):
        try:
            return topology_rows(chip, n)
        except INPUT_ERRORS:
            continue
    return topology_rows(chip, n_sus)


def render_topology(chip: str = "h100", n_sus: int = 4, *, max_sus: int | None = None) -> Figure:
    """Left: per-GPU bandwidth at each level (log scale). Right: cable vs switch bandwidth per unit.

    `max_sus`: the axes hold every pod up to that many SUs — its levels (a one-SU pod has no spine: its slot is
    empty) and bandwidths — so a widget's SUs slider moves the bars, not the axes. Default: this pod alone."""
    try:
        rows = topology_rows(chip, n_sus)
        c = gpus.superpod(chip, n_sus)
        span = _span_rows(chip, n_sus, max_sus)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    have = {r["level"]: r for r in rows}
    slots = [have.get(r["level"]) for r in span]  # None: a level this pod does not have
    fig = Figure(figsize=(11.5, 4.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    names = [
        f"{r['level']}\n({r['gpus']:,} GPUs, {r['switches']} {r['switch_kind']})"
        if r is not None
        else f"{s['level']}\n(none with {n_sus} SU)"
        for r, s in zip(slots, span)
    ]
    x = np.arange(len(span))
    per_gpu = np.array([(r or s)["per_gpu"] for r, s in zip(slots, span)]) / 1e9
    bars = ax1.bar(x, per_gpu, color=[_LEVEL_COLORS.get(s["level"], "0.5") for s in span], width=0.6)
    for xi, v, r, bar in zip(x, per_gpu, slots, bars):
        bar.set_visible(r is not None)
        ax1.text(xi, v * 1.08, f"{v:,.0f} GB/s" if r is not None else "", ha="center", va="bottom", fontsize=9)
    ax1.set_yscale("log")
    span_gpu = np.array([s["per_gpu"] for s in span]) / 1e9
    ax1.set_ylim(span_gpu.min() / 2, span_gpu.max() * 4)
    ax1.yaxis.set_major_formatter(plain_formatter())
    ax1.set_xticks(x, names, fontsize=8)
    ax1.set_xlabel("network level")
    ax1.set_ylabel("bandwidth per GPU, one direction (GB/s)")
    ax1.set_title("What one GPU gets when all talk at once (Appendix B)", fontsize=10)
    ax1.grid(True, axis="y", alpha=0.3)
    cable = np.array([r["cable"] if r is not None else 0.0 for r in slots]) / 1e12
    switch = np.array([r["switch"] if r is not None else 0.0 for r in slots]) / 1e12
    ax2.bar(x - 0.18, cable, width=0.36, color="#6baed6", label="cables into one unit")
    ax2.bar(x + 0.18, switch, width=0.36, color="#fd8d3c", label="switch capacity per unit")
    for xi, a, b, r in zip(x, cable, switch, slots):
        ax2.text(xi - 0.18, a, f"{a:.3g}" if r is not None else "", ha="center", va="bottom", fontsize=8)
        ax2.text(xi + 0.18, b, f"{b:.3g}" if r is not None else "", ha="center", va="bottom", fontsize=8)
    top = max(max(s["cable"], s["switch"]) for s in span) / 1e12
    ax2.set_ylim(0, top * 1.1)
    ax2.set_xticks(x, [s["level"] for s in span])
    ax2.set_xlabel("network level (unit: node, SU, pod)")
    ax2.set_ylabel("bandwidth per unit (TB/s)")
    ax2.set_title("Cables vs switches at each level (summary-table counting)", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend(fontsize=8, loc="upper left")
    fig.suptitle(
        f"{c.name}: {c.total_gpus:,} GPUs, {c.switch_count():,} switches (book ch. 12, 'Networking')", fontsize=11
    )
    return fig


def topology_explorer(chip: str = "h100", n_sus: int = 4) -> widgets.VBox:
    """GPU type and number of scalable units; prints `topology_readout` and draws `render_topology`."""
    chip_dd = widgets.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    su_sl = widgets.IntSlider(value=n_sus, min=1, max=8, description="SUs", continuous_update=False)  # 2 tiers
    box = widgets.VBox()

    def view(chip, n_sus):  # the axes hold every pod up to the slider's end: a step moves the bars
        emit(box, topology_readout(chip, n_sus), lambda: render_topology(chip, n_sus, max_sus=su_sl.max), key=(chip,))

    controls = {"chip": chip_dd, "n_sus": su_sl}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([chip_dd, su_sl]), out]
    values = lambda: (chip_dd.value, su_sl.value)  # noqa: E731
    return attach(
        box, controls, out, lambda: topology_readout(*values()), lambda: render_topology(*values(), max_sus=su_sl.max)
    )
