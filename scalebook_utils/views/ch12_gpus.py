"""Views for chapter 12 (GPUs): a topology explorer (node → scalable unit → pod) and a GPU collective-cost
widget, plus figures of the chapter's rooflines — readouts, figures and widgets over `gpus`.

The same three layers as `training_views` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets controls to
both (`_kit.attach` / `_kit.emit`). Bad input (an unknown GPU, more GPUs than the pod holds) gives a
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
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import LogLocator, NullFormatter

from scalebook_utils.core.gpu import chips as G
from scalebook_utils.core.training import schedules as PS
from scalebook_utils.core.units import format_count, format_si, format_time
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, message_figure, plain_formatter

__all__ = [
    "TOPOLOGY_PREFIX",
    "GPU_COLLECTIVE_PREFIX",
    "CLUSTER_CHIPS",
    "topology_rows",
    "topology_readout",
    "render_topology",
    "topology_explorer",
    "gpu_collective_readout",
    "render_gpu_collective",
    "gpu_collective_widget",
    "render_dp_thresholds",
    "render_sharded_all_gather",
    "GPU_ROOFLINE_PREFIX",
    "gpu_roofline_readout",
    "render_gpu_roofline",
    "gpu_roofline_widget",
    "render_pipeline_schedules",
]

#: The topology explorer's readout starts with this prefix; do not change it.
TOPOLOGY_PREFIX = "gpu topology: "
#: The collective widget's readout starts with this prefix; do not change it.
GPU_COLLECTIVE_PREFIX = "gpu collective: "
#: The roofline calculator's readout starts with this prefix; do not change it.
GPU_ROOFLINE_PREFIX = "gpu roofline: "
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
        c = G.superpod(chip, n_sus)
        rows = topology_rows(chip, n_sus)
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    parts = [
        f"{r['level']}: {r['gpus']} GPUs, {_bw(r['per_gpu'])} per GPU, cables {_bw(r['cable'])}, "
        f"AllGather {_bw(r['collective'])}"
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
        c = G.superpod(chip, n_sus)
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


def topology_explorer(chip: str = "h100", n_sus: int = 4) -> W.VBox:
    """GPU type and number of scalable units; prints `topology_readout` and draws `render_topology`."""
    chip_dd = W.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    su_sl = W.IntSlider(value=n_sus, min=1, max=8, description="SUs", continuous_update=False)  # 2 tiers
    box = W.VBox()

    def view(chip, n_sus):  # the axes hold every pod up to the slider's end: a step moves the bars
        emit(box, topology_readout(chip, n_sus), lambda: render_topology(chip, n_sus, max_sus=su_sl.max), key=(chip,))

    controls = {"chip": chip_dd, "n_sus": su_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, su_sl]), out]
    values = lambda: (chip_dd.value, su_sl.value)  # noqa: E731
    return attach(
        box, controls, out, lambda: topology_readout(*values()), lambda: render_topology(*values(), max_sus=su_sl.max)
    )


# --- collective cost --------------------------------------------------------------------------------------


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
        c = G.as_cluster(chip, n_sus)
        cost = G.collective(kind, float(n_bytes), int(n_gpus), c, sharp=bool(sharp))
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    tag = " (SHARP on)" if sharp else " (SHARP off)" if cost.kind == "all_reduce" else ""
    # bytes/time is not NCCL's "bus bandwidth" (the chapter's measured 370 GB/s): for an AllReduce print both
    bus = (
        f" = bus bandwidth {_bw(G.bus_bandwidth(float(n_bytes), int(n_gpus), cost.seconds))}"
        if cost.kind == "all_reduce"
        else ""
    )
    return (
        f"{GPU_COLLECTIVE_PREFIX}{cost.kind} of {format_si(float(n_bytes), 'B', digits=3)} over {n_gpus} {chip} "
        f"GPUs{tag} → {format_time(cost.seconds)}, {_bw(cost.bandwidth)} of bytes per second{bus}, "
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
        c = G.as_cluster(chip, n_sus)
        kd = G.collective(kind, float(n_bytes), int(n_gpus), c, sharp=bool(sharp)).kind
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    ns = [2**i for i in range(1, int(math.log2(c.total_gpus)) + 1)]
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
) -> W.VBox:
    """Collective kind, a bytes slider (log), the GPU count and a SHARP toggle; prints `gpu_collective_readout`."""
    kind_dd = W.Dropdown(options=list(G.KINDS), value=kind, description="collective")
    chip_dd = W.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    gpus_dd = W.Dropdown(options=[2**i for i in range(1, 11)], value=n_gpus, description="GPUs")
    sharp_cb = W.Checkbox(value=sharp, description="SHARP (AllReduce)")
    bytes_sl = W.FloatLogSlider(
        value=n_bytes,
        base=10,
        min=5,
        max=11,
        step=0.1,
        description="bytes",
        readout_format=".3g",
        continuous_update=False,
        layout=W.Layout(width="60%"),
    )
    box = W.VBox()

    def view(kind, n_bytes, n_gpus, sharp, chip):
        s = sharp and kind == "all_reduce"
        emit(
            box,
            gpu_collective_readout(kind, n_bytes, n_gpus, s, chip, n_sus),
            lambda: render_gpu_collective(kind, n_bytes, n_gpus, s, chip, n_sus),
            key=(kind, n_gpus, s, chip),
        )

    controls = {"kind": kind_dd, "n_bytes": bytes_sl, "n_gpus": gpus_dd, "sharp": sharp_cb, "chip": chip_dd}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([kind_dd, chip_dd]), W.HBox([gpus_dd, sharp_cb]), bytes_sl, out]

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


# --- roofline figures -------------------------------------------------------------------------------------


def render_dp_thresholds(chips: Sequence[str] = ("h100", "b200", "gb200"), tpu_value: float = 850.0) -> Figure:
    """Tokens per GPU that data parallelism needs, C/W, inside a node and across nodes, per GPU type
    (book ch. 12, "Data Parallelism" and Appendix A), with the TPU v5p's 850 (three ICI axes, ch. 5) for scale."""
    try:
        inside = [G.dp_critical_batch(c, across_nodes=False) for c in chips]
        across = [G.dp_critical_batch(c) for c in chips]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
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
        ys = [2**i for i in range(0, int(math.log2(c.total_gpus)))]
        t = [G.sharded_all_gather(2 * D * F, y, c.total_gpus, c) * 1e3 for y in ys]
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


# --- the roofline calculator ------------------------------------------------------------------------------

_STRATEGY_NAMES = {"dp": "data (ZeRO/FSDP)", "tp": "tensor", "ep": "expert"}
_DEGREES = tuple(2**i for i in range(0, 13))


def gpu_roofline_readout(
    strategy: str = "dp",
    chip: str = "h100",
    B: float = 4e6,
    D: int = 8192,
    F: int = 28_672,
    degree: int = 1024,
    across_nodes: bool = True,
    k: int = 1,
) -> str:
    """``gpu roofline: dp 1024-way on h100 across nodes, B=4M tokens, D=8192, F=28672 → compute-bound | …``:
    `gpus.mlp_roofline` for one MLP layer (book ch. 12, "Rooflines for LLM Scaling on GPUs")."""
    where = "across nodes" if across_nodes else "in a node"
    head = (
        f"{GPU_ROOFLINE_PREFIX}{strategy} {degree}-way on {chip} {where}, B={format_count(float(B))}"
        f" tokens, D={D}, F={F}" + (f", k={k}" if strategy == "ep" else "")
    )
    try:
        r = G.mlp_roofline(
            strategy,
            float(B),
            D,
            F,
            int(degree),
            chip,
            across_nodes=bool(across_nodes),
            k=int(k) if strategy == "ep" else 1,
        )
    except INPUT_ERRORS as exc:
        return f"{head} → cannot evaluate: {error_text(exc)}"
    return (
        f"{head} → {r.bound} | T_math {format_time(r.t_math)}, T_comms {format_time(r.t_comms)} "
        f"(comms/math {r.ratio:.2f})"
    )


def render_gpu_roofline(
    strategy: str = "dp",
    chip: str = "h100",
    B: float = 4e6,
    D: int = 8192,
    F: int = 28_672,
    degree: int = 1024,
    across_nodes: bool = True,
    k: int = 1,
) -> Figure:
    """T_math and T_comms of one MLP layer against the parallelism degree (log–log), the current degree starred;
    compute-bound where T_math ≥ T_comms (shaded)."""
    kk = int(k) if strategy == "ep" else 1
    try:
        rs = [
            G.mlp_roofline(strategy, float(B), D, F, n, chip, across_nodes=bool(across_nodes), k=kk) for n in _DEGREES
        ]
        cur = G.mlp_roofline(strategy, float(B), D, F, int(degree), chip, across_nodes=bool(across_nodes), k=kk)
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(8.5, 4.4), layout="constrained")
    ax = fig.add_subplot()
    tm = np.array([r.t_math for r in rs]) * 1e3
    tc = np.array([r.t_comms for r in rs]) * 1e3
    ax.plot(_DEGREES, tm, "o-", color="#54a24b", lw=2, ms=4, label="T_math (FLOPs / C)")
    ax.plot(_DEGREES, np.where(tc > 0, tc, np.nan), "s-", color="#e45756", lw=2, ms=4, label="T_comms (bytes / W)")
    ok = [n for n, a, b in zip(_DEGREES, tm, tc) if a >= b]
    if ok:  # compute-bound degrees: one shaded span
        ax.axvspan(min(ok) / 1.4, max(ok) * 1.4, color="#54a24b", alpha=0.08, lw=0, label="compute-bound")
    y = max(cur.t_math, cur.t_comms) * 1e3
    ax.plot([degree], [y], "*", color="#d62728", ms=15, zorder=5, label=f"current: {degree}-way, {cur.bound}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.set_xlabel(f"{_STRATEGY_NAMES.get(strategy, strategy)} parallelism degree (GPUs)")
    ax.set_ylabel("time per MLP layer (ms)")
    where = "across nodes (W_node)" if across_nodes else "in a node (W_gpu)"
    ax.set_title(
        f"{chip}: {strategy} roofline {where}, B = {format_count(float(B))} tokens, D = {D}, "
        f"F = {F}" + (f", k = {kk}" if strategy == "ep" else "") + " (book ch. 12)",
        fontsize=10,
    )
    ax.set_xlim(_DEGREES[0] / 1.4, _DEGREES[-1] * 1.4)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def gpu_roofline_widget(
    strategy: str = "dp",
    chip: str = "h100",
    B: float = 4e6,
    D: int = 8192,
    F: int = 28_672,
    degree: int = 1024,
    across_nodes: bool = True,
    k: int = 8,
) -> W.VBox:
    """Parallelism (dp/tp/ep), GPU, batch (tokens, log slider), D, F, degree, experts per token k and where the
    collective runs; prints `gpu_roofline_readout` and draws `render_gpu_roofline`."""
    strat_dd = W.Dropdown(
        options=[("data (dp)", "dp"), ("tensor (tp)", "tp"), ("expert (ep)", "ep")],
        value=strategy,
        description="parallelism",
    )
    chip_dd = W.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    deg_dd = W.Dropdown(options=list(_DEGREES), value=degree, description="degree")
    across_cb = W.Checkbox(value=across_nodes, description="across nodes")
    B_sl = W.FloatLogSlider(
        value=B,
        base=10,
        min=3,
        max=8,
        step=0.1,
        description="B (tokens)",
        readout_format=".3g",
        continuous_update=False,
        layout=W.Layout(width="60%"),
    )
    D_dd = W.Dropdown(options=[4096, 8192, 16384], value=D, description="D")
    F_dd = W.Dropdown(options=[2048, 8192, 16384, 28672, 53248], value=F, description="F")
    k_dd = W.Dropdown(options=[1, 2, 4, 8], value=k, description="k (ep)")
    box = W.VBox()

    def view(strategy, chip, B, D, F, degree, across_nodes, k):
        emit(
            box,
            gpu_roofline_readout(strategy, chip, B, D, F, degree, across_nodes, k),
            lambda: render_gpu_roofline(strategy, chip, B, D, F, degree, across_nodes, k),
        )

    controls = {
        "strategy": strat_dd,
        "chip": chip_dd,
        "B": B_sl,
        "D": D_dd,
        "F": F_dd,
        "degree": deg_dd,
        "across_nodes": across_cb,
        "k": k_dd,
    }
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([strat_dd, chip_dd, deg_dd]), W.HBox([D_dd, F_dd, k_dd, across_cb]), B_sl, out]

    def values():
        return tuple(c.value for c in controls.values())

    return attach(box, controls, out, lambda: gpu_roofline_readout(*values()), lambda: render_gpu_roofline(*values()))


# --- pipeline schedules -----------------------------------------------------------------------------------


def render_pipeline_schedules(p: int = 4, m: int = 8, v: int = 2) -> Figure:
    """GPipe, 1F1B and interleaved 1F1B (v chunks per device) for p devices and m microbatches, simulated by
    `pipeline_schedules.simulate`: device × time, forwards light and backwards dark (the number is the
    microbatch), idle slots grey. Each title gives the simulated bubble, the formula's and stage 0's peak
    activations (in microbatches)."""
    try:
        tls = [PS.simulate(kind, p, m, vv) for kind, vv in (("gpipe", 1), ("1f1b", 1), ("interleaved", v))]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    span = max(t.makespan / t.v for t in tls)  # in full-stage forwards
    fig = Figure(figsize=(12.0, 1.0 + 3 * (0.45 * p + 0.55)), layout="constrained")
    axes = fig.subplots(3, 1, sharex=True)
    names = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": f"interleaved 1F1B, v = {v}"}
    for ax, t in zip(axes, tls):
        unit = 1.0 / t.v  # one chunk's time, in full-stage forwards
        for d, row in enumerate(t.grid):
            for s, op in enumerate(row):
                if op is None:
                    ax.add_patch(_rect(s * unit, d, unit, "0.92", hatch="///"))
                    continue
                base = "#9ecae1" if op.kind == "F" else "#08519c"
                if op.chunk % 2:  # odd chunks of an interleaved schedule
                    base = "#fdae6b" if op.kind == "F" else "#a63603"
                ax.add_patch(_rect(s * unit, d, unit, base))
                if unit >= 0.5 and m <= 16:  # room for the microbatch number
                    ax.text(
                        (s + 0.5) * unit,
                        d + 0.5,
                        str(op.mb),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if op.kind == "F" else "white",
                    )
        ax.set_xlim(0, span)
        ax.set_ylim(p, 0)
        ax.set_yticks(np.arange(p) + 0.5, [str(d) for d in range(p)])
        ax.set_ylabel("device")
        formula = PS.bubble(t.kind, p, m, t.v)
        ax.set_title(
            f"{names[t.kind]}: bubble {t.bubble:.1%} (formula {formula:.1%}), stage 0 holds "
            f"{t.peak_activations(0):g} microbatches of activations",
            fontsize=9,
            loc="left",
        )
    axes[-1].set_xlabel("time (one unit = one stage's forward of one microbatch; a backward takes as long)")
    handles = [
        Patch(color="#9ecae1", label="forward"),
        Patch(color="#08519c", label="backward"),
        Patch(facecolor="0.92", hatch="///", edgecolor="0.6", label="idle (bubble)"),
    ]
    if v > 1:
        handles[2:2] = [
            Patch(color="#fdae6b", label="forward, odd chunk"),
            Patch(color="#a63603", label="backward, odd chunk"),
        ]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"Pipeline schedules on {p} devices, {m} microbatches (standard results; simulated)", fontsize=11)
    return fig


def _rect(x, y, w, color, hatch=None):
    return Rectangle((x, y), w, 1, facecolor=color, edgecolor="white" if hatch is None else "0.7", lw=0.6, hatch=hatch)
