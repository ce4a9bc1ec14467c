"""Views for chapter 12 (GPUs), "How Do Collectives Work on GPUs?": the collective-cost widget and the sharded
AllGather figure, over `gpus`.

`gpu_collective_readout` gives one line with the prefix ``gpu collective: `` (the notebook waits for it): the
time of an AllGather, ReduceScatter, AllReduce or AllToAll of a number of bytes over N GPUs of a SuperPod, its
bytes per second, for an AllReduce NCCL's bus bandwidth 2·bytes·(N − 1)/(N·time), and the bottleneck level.
`render_gpu_collective` draws the time against N (2 … the pod; with and without SHARP for an AllReduce), and
`gpu_collective_widget` wires the controls to both (`_kit.attach` / `_kit.emit`). `render_sharded_all_gather` is
the pop-quiz figure AllGather_X(bf16[D_X, F_Y]) against the inner axis Y: flat while Y stays inside a node, then
falling as 1/Y. Bad input gives a readable line and a message figure, never an exception. `gpu_views`
(`ch12_gpus`) re-exports these names with the chapter's other views.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter

from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.gpu.network import CLUSTER_CHIPS
from scalebook_utils.core.units import format_si, format_time
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, message_figure, plain_formatter
from scalebook_utils.views.ch12_networks import bandwidth_text

__all__ = [
    "GPU_COLLECTIVE_PREFIX",
    "gpu_collective_readout",
    "render_gpu_collective",
    "gpu_collective_widget",
    "render_sharded_all_gather",
]

#: The collective widget's readout starts with this prefix; do not change it.
GPU_COLLECTIVE_PREFIX = "gpu collective: "


def gpu_collective_readout(
    kind: str = "all_reduce",
    n_bytes: float = 1e9,
    n_gpus: int = 8,
    sharp: bool = False,
    chip: str = "h100",
    n_sus: int = 4,
) -> str:
    """``gpu collective: all_reduce of 1 GB over 8 h100 GPUs (SHARP off) → 3.89 ms, 257 GB/s of bytes per second
    = bus bandwidth 450 GB/s, bottleneck node | …`` (bus bandwidth 2·bytes·(N − 1)/(N·time), NCCL's, AllReduce only)."""
    head = f"{GPU_COLLECTIVE_PREFIX}{kind} of {format_si(float(n_bytes), 'B', digits=3)} over {n_gpus} {chip} GPUs"
    try:
        c = gpus.as_cluster(chip, n_sus)
        cost = gpus.collective(kind, float(n_bytes), int(n_gpus), c, sharp=bool(sharp))
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    tag = " (SHARP on)" if sharp else " (SHARP off)" if cost.kind == "all_reduce" else ""
    # bytes/time is not NCCL's "bus bandwidth" (the chapter's measured 370 GB/s): for an AllReduce print both
    bus = (
        f" = bus bandwidth {bandwidth_text(gpus.bus_bandwidth(float(n_bytes), int(n_gpus), cost.seconds))}"
        if cost.kind == "all_reduce"
        else ""
    )
    return (
        f"{GPU_COLLECTIVE_PREFIX}{cost.kind} of {format_si(float(n_bytes), 'B', digits=3)} over {n_gpus} {chip} "
        f"GPUs{tag} → {format_time(cost.seconds)}, {bandwidth_text(cost.bandwidth)} of bytes per second{bus}, "
        f"bottleneck {cost.bottleneck} | {cost.note}"
    )


def render_gpu_collective(
    kind: str = "all_reduce",
    n_bytes: float = 1e9,
    n_gpus: int = 8,
    sharp: bool = False,
    chip: str = "h100",
    n_sus: int = 4,
) -> Figure:
    """Time of the collective against the number of GPUs (2 … the pod) for these bytes; for AllReduce with and
    without SHARP; node and SU boundaries marked, the current point starred. The pod has min(n_sus, max_sus) SUs."""
    try:
        c = gpus.as_cluster(chip, n_sus)
        kd = gpus.collective(kind, float(n_bytes), int(n_gpus), c, sharp=bool(sharp)).kind
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    ns = [2**i for i in range(1, int(math.log2(c.total_gpus)) + 1)]
    if c.total_gpus not in ns:
        ns.append(c.total_gpus)
    fig = Figure(figsize=(8.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    variants = [(False, "#1f4e9c")] + ([(True, "#e6550d")] if kd == "all_reduce" else [])
    for s, color in variants:
        t = [gpus.collective(kd, float(n_bytes), n, c, sharp=s).seconds * 1e3 for n in ns]
        label = kd + (" with SHARP" if s else " (ring / NCCL)" if kd == "all_reduce" else "")
        ax.plot(ns, t, "o-", color=color, lw=2, ms=4, label=label)
    cur = gpus.collective(kd, float(n_bytes), int(n_gpus), c, sharp=bool(sharp)).seconds * 1e3
    ax.plot([n_gpus], [cur], "*", color="#d62728", ms=15, zorder=5, label=f"current: {n_gpus} GPUs")
    for lv in c.levels[:-1]:
        ax.axvline(lv.gpus, color="0.5", ls="--", lw=1)
        unit = "SU" if lv.name == "leaf" else lv.name
        ax.text(
            lv.gpus * 1.05,
            0.97,
            f"one {unit}\n({lv.gpus} GPUs)",
            fontsize=8,
            color="0.35",
            va="top",
            transform=ax.get_xaxis_transform(),
        )
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel(f"GPUs taking part ({chip}, contiguous)")
    ax.set_ylabel("time (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(
        f"{kd} of {format_si(float(n_bytes), 'B', digits=3)} on a {c.name} (book ch. 12 cost model)", fontsize=10
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def gpu_collective_widget(
    kind: str = "all_reduce",
    n_bytes: float = 1e9,
    n_gpus: int = 8,
    sharp: bool = False,
    chip: str = "h100",
    n_sus: int = 4,
) -> widgets.VBox:
    """Collective kind, a bytes slider (log), the GPU count and a SHARP toggle; prints `gpu_collective_readout`."""
    kind_dd = widgets.Dropdown(options=list(gpus.KINDS), value=kind, description="collective")
    chip_dd = widgets.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    gpus_dd = widgets.Dropdown(options=[2**i for i in range(1, 11)], value=n_gpus, description="GPUs")
    sharp_cb = widgets.Checkbox(value=sharp, description="SHARP (AllReduce)")
    bytes_sl = widgets.FloatLogSlider(
        value=n_bytes,
        base=10,
        min=5,
        max=11,
        step=0.1,
        description="bytes",
        readout_format=".3g",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    box = widgets.VBox()

    def view(kind, n_bytes, n_gpus, sharp, chip):
        s = sharp and kind == "all_reduce"
        emit(
            box,
            gpu_collective_readout(kind, n_bytes, n_gpus, s, chip, n_sus),
            lambda: render_gpu_collective(kind, n_bytes, n_gpus, s, chip, n_sus),
            key=(kind, n_gpus, s, chip),
        )

    controls = {"kind": kind_dd, "n_bytes": bytes_sl, "n_gpus": gpus_dd, "sharp": sharp_cb, "chip": chip_dd}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([kind_dd, chip_dd]), widgets.HBox([gpus_dd, sharp_cb]), bytes_sl, out]

    def values():
        return (
            kind_dd.value,
            bytes_sl.value,
            gpus_dd.value,
            sharp_cb.value and kind_dd.value == "all_reduce",
            chip_dd.value,
            n_sus,
        )

    return attach(
        box, controls, out, lambda: gpu_collective_readout(*values()), lambda: render_gpu_collective(*values())
    )


# --- the sharded AllGather (pop quiz) ---------------------------------------------------------------------


def render_sharded_all_gather(D: int = 8192, F: int = 32_768, chip: str = "h100", n_sus: int = 4) -> Figure:
    """AllGather_X of bf16[D_X, F_Y] over the whole pod against the inner axis Y (book ch. 12 pop quiz 3 figure):
    flat while Y stays inside a node, then falling as 1/Y."""
    try:
        c = gpus.superpod(chip, n_sus)
        ys = [2**i for i in range(0, int(math.log2(c.total_gpus)))]
        t = [gpus.sharded_all_gather(2 * D * F, y, c.total_gpus, c) * 1e3 for y in ys]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(ys, t, "o-", color="#1f4e9c", lw=2)
    ax.axvline(c.gpus_per_node, color="0.5", ls="--", lw=1)
    ax.text(
        c.gpus_per_node / 1.08, max(t) * 0.8, "Y = one node", fontsize=8, color="0.35", ha="right"
    )  # below the flat part
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("inner axis Y (GPUs)")
    ax.set_ylabel("AllGather_X time (ms)")
    where = "one SU" if n_sus == 1 else f"{n_sus} SUs"
    ax.set_title(f"AllGather_X(bf16[D_X, F_Y]), D = {D}, F = {F}, {c.total_gpus} {chip} GPUs ({where})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return fig
