"""Views for chapter 12 (GPUs), "Rooflines for LLM Scaling on GPUs": the data-parallel critical batch, the roofline
calculator and the pipeline schedules, over `gpus` and `pipeline_schedules`.

`render_dp_thresholds` draws the tokens per GPU that data parallelism needs, C/W (FLOPs/s over bytes/s), inside a
node (NVLink) and across nodes (InfiniBand) per GPU type, with the TPU v5p's 850 for scale (book ch. 12, "Data
Parallelism" and Appendix A). `gpu_roofline_readout` gives one line with the prefix ``gpu roofline: `` (the
notebook waits for it): T_math and T_comms of one MLP layer (B tokens, D, F; data, tensor or expert parallelism
of a degree, k experts per token) and which bound wins; `render_gpu_roofline` draws both against the degree and
`gpu_roofline_widget` wires the controls to both (`_kit.attach` / `_kit.emit`). `render_pipeline_schedules`
draws GPipe, 1F1B and interleaved 1F1B for p devices and m microbatches with their bubbles ("Pipelines: the
transfers and the bubble"). Bad input gives a readable line and a message figure, never an exception.
`gpu_views` (`ch12_gpus`) re-exports these names with the chapter's other views.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.gpu.network import CLUSTER_CHIPS
from scalebook_utils.core.training import schedules as PS
from scalebook_utils.core.training.costs import dp_min_batch_per_chip
from scalebook_utils.core.units import format_count, format_time
from scalebook_utils.views._kit import INPUT_ERRORS, attach, emit, error_text, message_figure, plain_formatter

__all__ = [
    "render_dp_thresholds",
    "GPU_ROOFLINE_PREFIX",
    "gpu_roofline_readout",
    "render_gpu_roofline",
    "gpu_roofline_widget",
    "render_pipeline_schedules",
]

#: The roofline calculator's readout starts with this prefix; do not change it.
GPU_ROOFLINE_PREFIX = "gpu roofline: "


# --- the data-parallel critical batch ---------------------------------------------------------------------


def render_dp_thresholds(chips: Sequence[str] = ("h100", "b200", "gb200"), tpu_value: float | None = None) -> Figure:
    """Tokens per GPU that data parallelism needs, C/W, inside a node and across nodes, per GPU type
    (book ch. 12, "Data Parallelism" and Appendix A), with the TPU v5p's for scale (`tpu_value`, default
    `training_costs.dp_min_batch_per_chip("tpu-v5p", M_X=3)`: 850 tokens per chip over three ICI axes, ch. 5)."""
    try:
        if tpu_value is None:
            tpu_value = dp_min_batch_per_chip("tpu-v5p", M_X=3)
        inside = [gpus.dp_critical_batch(c, across_nodes=False) for c in chips]
        across = [gpus.dp_critical_batch(c) for c in chips]
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
        r = gpus.mlp_roofline(
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
            gpus.mlp_roofline(strategy, float(B), D, F, n, chip, across_nodes=bool(across_nodes), k=kk)
            for n in _DEGREES
        ]
        cur = gpus.mlp_roofline(strategy, float(B), D, F, int(degree), chip, across_nodes=bool(across_nodes), k=kk)
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
) -> widgets.VBox:
    """Parallelism (dp/tp/ep), GPU, batch (tokens, log slider), D, F, degree, experts per token k and where the
    collective runs; prints `gpu_roofline_readout` and draws `render_gpu_roofline`."""
    strat_dd = widgets.Dropdown(
        options=[("data (dp)", "dp"), ("tensor (tp)", "tp"), ("expert (ep)", "ep")],
        value=strategy,
        description="parallelism",
    )
    chip_dd = widgets.Dropdown(options=list(CLUSTER_CHIPS), value=chip, description="GPU")
    deg_dd = widgets.Dropdown(options=list(_DEGREES), value=degree, description="degree")
    across_cb = widgets.Checkbox(value=across_nodes, description="across nodes")
    B_sl = widgets.FloatLogSlider(
        value=B,
        base=10,
        min=3,
        max=8,
        step=0.1,
        description="B (tokens)",
        readout_format=".3g",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    D_dd = widgets.Dropdown(options=[4096, 8192, 16384], value=D, description="D")
    F_dd = widgets.Dropdown(options=[2048, 8192, 16384, 28672, 53248], value=F, description="F")
    k_dd = widgets.Dropdown(options=[1, 2, 4, 8], value=k, description="k (ep)")
    box = widgets.VBox()

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
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([strat_dd, chip_dd, deg_dd]), widgets.HBox([D_dd, F_dd, k_dd, across_cb]), B_sl, out]

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
