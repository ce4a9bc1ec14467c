"""Views for chapter 12 (GPUs): a topology explorer (node → scalable unit → pod) and a GPU collective-cost
widget, plus figures of the chapter's rooflines — readouts, figures and widgets over `gpus`.

The same three layers as `training_views` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets controls to
both (`widgets._attach` / `widgets._emit`). Bad input (an unknown GPU, more GPUs than the pod holds) gives a
readable line and a message figure, never an exception.

Book ch. 12 "How to Think About GPUs": "Networking", "How Do Collectives Work on GPUs?", "Rooflines for LLM
Scaling on GPUs".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure

from . import gpus as G
from .units import format_si, format_time
from .widgets import INPUT_ERRORS, _attach, _emit, _message_figure, error_text, plain_formatter

__all__ = [
    "TOPOLOGY_PREFIX", "GPU_COLLECTIVE_PREFIX", "CLUSTER_CHIPS",
    "topology_rows", "topology_readout", "render_topology", "topology_explorer",
    "gpu_collective_readout", "render_gpu_collective", "gpu_collective_widget",
    "render_dp_thresholds", "render_sharded_all_gather",
]

#: The topology explorer's readout starts with this prefix; do not change it.
TOPOLOGY_PREFIX = "gpu topology: "
#: The collective widget's readout starts with this prefix; do not change it.
GPU_COLLECTIVE_PREFIX = "gpu collective: "
#: GPUs the chapter builds clusters of (node egress known)
CLUSTER_CHIPS = ("h100", "h200", "b200", "gb200")
_LEVEL_COLORS = {"node": "#1f4e9c", "leaf": "#e6550d", "spine": "#31a354"}


def _bw(x: float) -> str:
    return format_si(x, "B/s", digits=3)


# --- topology explorer ------------------------------------------------------------------------------------


def topology_rows(chip: str = "h100", n_sus: int = 4) -> list[dict]:
    """One row per level: GPUs per unit, degree, switches per unit, per-GPU, cable and switch bandwidth, and the
    AllGather bandwidth D·W/(D − 1) of the level (book ch. 12 SuperPod tables)."""
    c = G.superpod(chip, n_sus)
    return [{"level": lv.name, "gpus": lv.gpus, "degree": lv.degree, "switches": lv.switches_per_unit,
             "switch_kind": lv.switch_kind, "per_gpu": lv.per_gpu_bytes_per_s, "child": lv.child_bytes_per_s,
             "cable": lv.cable_bytes_per_s, "switch": lv.switch_bytes_per_s,
             "collective": lv.collective_bytes_per_s} for lv in c.levels]


def topology_readout(chip: str = "h100", n_sus: int = 4) -> str:
    """``gpu topology: h100, SUs=4 → 1024 GPUs, 560 switches | node: 8 GPUs, 450 GB/s per GPU | …``."""
    head = f"{TOPOLOGY_PREFIX}{chip}, SUs={n_sus}"
    try:
        c = G.superpod(chip, n_sus)
        rows = topology_rows(chip, n_sus)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    parts = [f"{r['level']}: {r['gpus']} GPUs, {_bw(r['per_gpu'])} per GPU, cables {_bw(r['cable'])}, "
             f"AllGather {_bw(r['collective'])}" for r in rows]
    return f"{head} → {c.total_gpus} GPUs, {c.switch_count()} switches | " + " | ".join(parts)


def render_topology(chip: str = "h100", n_sus: int = 4) -> Figure:
    """Left: per-GPU bandwidth at each level (log scale). Right: cable vs switch bandwidth per unit."""
    try:
        rows = topology_rows(chip, n_sus)
        c = G.superpod(chip, n_sus)
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(11.5, 4.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    names = [f"{r['level']}\n({r['gpus']:,} GPUs, {r['switches']} {r['switch_kind']})" for r in rows]
    x = np.arange(len(rows))
    per_gpu = np.array([r["per_gpu"] for r in rows]) / 1e9
    ax1.bar(x, per_gpu, color=[_LEVEL_COLORS.get(r["level"], "0.5") for r in rows], width=0.6)
    for xi, v in zip(x, per_gpu):
        ax1.text(xi, v * 1.08, f"{v:,.0f} GB/s", ha="center", va="bottom", fontsize=9)
    ax1.set_yscale("log")
    ax1.set_ylim(per_gpu.min() / 2, per_gpu.max() * 4)
    ax1.yaxis.set_major_formatter(plain_formatter())
    ax1.set_xticks(x, names, fontsize=8)
    ax1.set_xlabel("network level")
    ax1.set_ylabel("bandwidth per GPU, one direction (GB/s)")
    ax1.set_title("What one GPU gets when all talk at once (Appendix B)", fontsize=10)
    ax1.grid(True, axis="y", alpha=0.3)
    cable = np.array([r["cable"] for r in rows]) / 1e12
    switch = np.array([r["switch"] for r in rows]) / 1e12
    ax2.bar(x - 0.18, cable, width=0.36, color="#6baed6", label="cables into one unit")
    ax2.bar(x + 0.18, switch, width=0.36, color="#fd8d3c", label="switch capacity per unit")
    for xi, a, b in zip(x, cable, switch):
        ax2.text(xi - 0.18, a, f"{a:.3g}", ha="center", va="bottom", fontsize=8)
        ax2.text(xi + 0.18, b, f"{b:.3g}", ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(x, [r["level"] for r in rows])
    ax2.set_xlabel("network level (unit: node, SU, pod)")
    ax2.set_ylabel("bandwidth per unit (TB/s)")
    ax2.set_title("Cables vs switches at each level (summary-table counting)", fontsize=10)
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"{c.name}: {c.total_gpus:,} GPUs, {c.switch_count():,} switches (book ch. 12, 'Networking')",
                 fontsize=11)
    return fig


def topology_explorer(chip: str = "h100", n_sus: int = 4) -> W.VBox:
    """GPU type and number of scalable units; prints `topology_readout` and draws `render_topology`."""
    chip_dd = W.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    su_sl = W.IntSlider(value=n_sus, min=1, max=8, description="SUs", continuous_update=False)  # 2 tiers
    box = W.VBox()

    def view(chip, n_sus):
        _emit(box, topology_readout(chip, n_sus), lambda: render_topology(chip, n_sus), key=(chip,))

    controls = {"chip": chip_dd, "n_sus": su_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, su_sl]), out]
    values = lambda: (chip_dd.value, su_sl.value)  # noqa: E731
    return _attach(box, controls, out, lambda: topology_readout(*values()), lambda: render_topology(*values()))


# --- collective cost --------------------------------------------------------------------------------------


def gpu_collective_readout(kind: str = "all_reduce", n_bytes: float = 1e9, n_gpus: int = 8, sharp: bool = False,
                           chip: str = "h100", n_sus: int = 4) -> str:
    """``gpu collective: all_reduce of 1 GB over 8 h100 GPUs (SHARP off) → 3.89 ms, 257 GB/s, bottleneck node``."""
    head = f"{GPU_COLLECTIVE_PREFIX}{kind} of {format_si(float(n_bytes), 'B', digits=3)} over {n_gpus} {chip} GPUs"
    try:
        c = G.as_cluster(chip, n_sus)
        cost = G.collective(kind, float(n_bytes), int(n_gpus), c, sharp=bool(sharp))
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    tag = " (SHARP on)" if sharp else " (SHARP off)" if cost.kind == "all_reduce" else ""
    return (f"{GPU_COLLECTIVE_PREFIX}{cost.kind} of {format_si(float(n_bytes), 'B', digits=3)} over {n_gpus} {chip} "
            f"GPUs{tag} → {format_time(cost.seconds)}, {_bw(cost.bandwidth)}, bottleneck {cost.bottleneck} | "
            f"{cost.note}")


def render_gpu_collective(kind: str = "all_reduce", n_bytes: float = 1e9, n_gpus: int = 8, sharp: bool = False,
                          chip: str = "h100", n_sus: int = 4) -> Figure:
    """Time of the collective against the number of GPUs (2 … the pod) for these bytes; for AllReduce with and
    without SHARP; node and SU boundaries marked, the current point starred. The pod has min(n_sus, max_sus) SUs."""
    try:
        c = G.as_cluster(chip, n_sus)
        kd = G.collective(kind, float(n_bytes), int(n_gpus), c, sharp=bool(sharp)).kind
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    ns = [2 ** i for i in range(1, int(math.log2(c.total_gpus)) + 1)]
    if c.total_gpus not in ns:
        ns.append(c.total_gpus)
    fig = Figure(figsize=(8.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    variants = [(False, "#1f4e9c")] + ([(True, "#e6550d")] if kd == "all_reduce" else [])
    for s, color in variants:
        t = [G.collective(kd, float(n_bytes), n, c, sharp=s).seconds * 1e3 for n in ns]
        label = kd + (" with SHARP" if s else " (ring / NCCL)" if kd == "all_reduce" else "")
        ax.plot(ns, t, "o-", color=color, lw=2, ms=4, label=label)
    cur = G.collective(kd, float(n_bytes), int(n_gpus), c, sharp=bool(sharp)).seconds * 1e3
    ax.plot([n_gpus], [cur], "*", color="#d62728", ms=15, zorder=5, label=f"current: {n_gpus} GPUs")
    for lv in c.levels[:-1]:
        ax.axvline(lv.gpus, color="0.5", ls="--", lw=1)
        unit = "SU" if lv.name == "leaf" else lv.name
        ax.text(lv.gpus * 1.05, 0.97, f"one {unit}\n({lv.gpus} GPUs)", fontsize=8, color="0.35", va="top",
                transform=ax.get_xaxis_transform())
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel(f"GPUs taking part ({chip}, contiguous)")
    ax.set_ylabel("time (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{kd} of {format_si(float(n_bytes), 'B', digits=3)} on a {c.name} (book ch. 12 cost model)",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def gpu_collective_widget(kind: str = "all_reduce", n_bytes: float = 1e9, n_gpus: int = 8, sharp: bool = False,
                          chip: str = "h100", n_sus: int = 4) -> W.VBox:
    """Collective kind, a bytes slider (log), the GPU count and a SHARP toggle; prints `gpu_collective_readout`."""
    kind_dd = W.Dropdown(options=list(G.KINDS), value=kind, description="collective")
    chip_dd = W.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    gpus_dd = W.Dropdown(options=[2 ** i for i in range(1, 11)], value=n_gpus, description="GPUs")
    sharp_cb = W.Checkbox(value=sharp, description="SHARP (AllReduce)")
    bytes_sl = W.FloatLogSlider(value=n_bytes, base=10, min=5, max=11, step=0.1, description="bytes",
                                readout_format=".3g", continuous_update=False, layout=W.Layout(width="60%"))
    box = W.VBox()

    def view(kind, n_bytes, n_gpus, sharp, chip):
        s = sharp and kind == "all_reduce"
        _emit(box, gpu_collective_readout(kind, n_bytes, n_gpus, s, chip, n_sus),
              lambda: render_gpu_collective(kind, n_bytes, n_gpus, s, chip, n_sus), key=(kind, n_gpus, s, chip))

    controls = {"kind": kind_dd, "n_bytes": bytes_sl, "n_gpus": gpus_dd, "sharp": sharp_cb, "chip": chip_dd}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([kind_dd, chip_dd]), W.HBox([gpus_dd, sharp_cb]), bytes_sl, out]

    def values():
        return (kind_dd.value, bytes_sl.value, gpus_dd.value, sharp_cb.value and kind_dd.value == "all_reduce",
                chip_dd.value, n_sus)

    return _attach(box, controls, out, lambda: gpu_collective_readout(*values()),
                   lambda: render_gpu_collective(*values()))


# --- roofline figures -------------------------------------------------------------------------------------


def render_dp_thresholds(chips: Sequence[str] = ("h100", "b200", "gb200"), tpu_value: float = 850.0) -> Figure:
    """Tokens per GPU that data parallelism needs, C/W, inside a node and across nodes, per GPU type
    (book ch. 12, "Data Parallelism" and Appendix A), with the TPU v5p's 850 (three ICI axes, ch. 5) for scale."""
    try:
        inside = [G.dp_critical_batch(c, across_nodes=False) for c in chips]
        across = [G.dp_critical_batch(c) for c in chips]
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(chips))
    ax.bar(x - 0.18, inside, 0.36, color="#1f4e9c", label="inside a node: C / W_gpu (NVLink)")
    ax.bar(x + 0.18, across, 0.36, color="#e6550d", label="across nodes: C / W_node (InfiniBand)")
    for xi, a, b in zip(x, inside, across):
        ax.text(xi - 0.18, a, f"{a:,.0f}", ha="center", va="bottom", fontsize=8)
        ax.text(xi + 0.18, b, f"{b:,.0f}", ha="center", va="bottom", fontsize=8)
    ax.axhline(tpu_value, color="0.4", ls="--", lw=1, label=f"TPU v5p, 3 ICI axes (ch. 5): {tpu_value:.0f}")
    ax.set_xticks(x, [c.upper() for c in chips])
    ax.set_xlabel("GPU (DGX node of 8; GB200: NVL72 rack of 72)")
    ax.set_ylabel("critical batch (tokens per GPU)")
    ax.set_title("Data parallelism is compute-bound above B/X = C/W (book ch. 12)", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def render_sharded_all_gather(D: int = 8192, F: int = 32_768, chip: str = "h100", n_sus: int = 4) -> Figure:
    """AllGather_X of bf16[D_X, F_Y] over the whole pod against the inner axis Y (book ch. 12 pop quiz 3 figure):
    flat while Y stays inside a node, then falling as 1/Y."""
    try:
        c = G.superpod(chip, n_sus)
        ys = [2 ** i for i in range(0, int(math.log2(c.total_gpus)))]
        t = [G.sharded_all_gather(2 * D * F, y, c.total_gpus, c) * 1e3 for y in ys]
    except INPUT_ERRORS as exc:
        return _message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(ys, t, "o-", color="#1f4e9c", lw=2)
    ax.axvline(c.gpus_per_node, color="0.5", ls="--", lw=1)
    ax.text(c.gpus_per_node * 1.1, max(t) * 0.9, "Y = one node", fontsize=8, color="0.35")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel("inner axis Y (GPUs)")
    ax.set_ylabel("AllGather_X time (ms)")
    ax.set_title(f"AllGather_X(bf16[D_X, F_Y]), D = {D}, F = {F}, {c.total_gpus} {chip} GPUs", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return fig
