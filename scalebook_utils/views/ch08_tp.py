"""Chapter 8 views, section 3: which sharding — the comm-bound check for model parallelism (`tp_check`,
`tp_check_readout`, `render_tp_check`, `tp_check_widget`). Re-exported by `ch08_applied_inference`
(`applied_inference_views`).

Book ch. 8 "Serving LLaMA 3-70B on TPUs".
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference.applied import tp_check
from scalebook_utils.core.units import format_time
from scalebook_utils.views._kit import INPUT_ERRORS, PALETTE, attach, emit, error_text, format_number, message_figure
from scalebook_utils.views.ch08_common import BOOK_PRECISIONS, SLICES, TP_PREFIX
from scalebook_utils.views.ch08_common import plain_log_axes as _log_axes
from scalebook_utils.views.ch08_common import precision_meaning as _meaning
from scalebook_utils.views.ch08_common import safe_num as _safe_num

__all__ = ["tp_check", "tp_check_readout", "render_tp_check", "tp_check_widget"]


# --- 3. which sharding: the comm-bound check for model parallelism ---------------------------------------------


def _verdict(bound: bool) -> str:
    return "comm-bound" if bound else "OK"


def tp_check_readout(
    slice_="4x8", precision="bf16", B: float = 64, model="llama3-70b", chip="tpu-v5e", *, beta: float | None = None
) -> str:
    """``tp check: llama3-70b bf16 on tpu-v5e 4x8 (Y=32, M_Y=2), B=64 → large batch: Y ≤ F·M_Y/α_ici = 26.2 →
    comm-bound | small batch: Y ≤ F/(B·β) = 49.2 → OK | one matmul: T_math 4.77 us, T_hbm 17.9 us,
    T_ici 11.7 us → HBM bandwidth-bound``."""
    head = f"{TP_PREFIX}{model} {precision} on {chip} {slice_}"
    try:
        r = tp_check(model, chip, slice_, precision, B, beta=beta)
    except INPUT_ERRORS as exc:
        return f"{head}, B={_safe_num(B)} → cannot evaluate: {error_text(exc)}"
    t = r["times"]
    b = "β" if beta is None else f"β={format_number(beta)}"
    return (
        f"{TP_PREFIX}{r['model']} {_meaning(r['precision'])} on {r['chip']} {r['slice']} "
        f"(Y={r['Y']}, M_Y={r['M_Y']}), "
        f"B={format_number(B)} → large batch: Y ≤ F·M_Y/α_ici = {r['large_limit']:.3g} → "
        f"{_verdict(r['comm_bound_large'])} | small batch: Y ≤ F/(B·{b}) = {r['small_limit']:.3g} → "
        f"{_verdict(r['comm_bound_small'])} | one matmul: T_math {format_time(t.t_math)}, "
        f"T_hbm {format_time(t.t_hbm)}, T_ici {format_time(t.t_ici)} → {r['bound']}-bound"
    )


def render_tp_check(
    slice_="4x8",
    precision="bf16",
    B: float = 64,
    model="llama3-70b",
    chip="tpu-v5e",
    *,
    beta: float | None = None,
    B_range: tuple[float, float] = (1, 2048),
) -> Figure:
    """Left: the largest TP degree that is not communication-bound against the batch — F/(B·β) for memory-bound
    matmuls, F·M_Y/α_ici for compute-bound ones; the region above both is ICI-bound — with the slice's Y and the
    current B marked. Right: T_math, T_hbm and T_ici of one matmul against B at the slice's Y (microseconds)."""
    try:
        r = tp_check(model, chip, slice_, precision, B, beta=beta)
        Bs = np.geomspace(B_range[0], B_range[1], 200)
        small = np.array([inf.tp_limit_small_batch(tf.get_model(model).F, b, chip, precision, beta=beta) for b in Bs])
        cfg = tf.get_model(model)
        times = [inf.tp_matmul_times(b, cfg.D, cfg.F, r["Y"], chip, precision) for b in Bs]
    except INPUT_ERRORS as exc:
        return message_figure(f"cannot draw: {error_text(exc)}")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    large = r["large_limit"]
    env = np.maximum(small, large)
    top = max(env.max(), r["Y"]) * 4
    ax.fill_between(Bs, env, top, color=PALETTE[4], alpha=0.12, label="ICI-bound (T_ici above T_math and T_hbm)")
    b = beta if beta else round(inf.hbm_ici_beta(chip), 2)
    ax.plot(Bs, small, color=PALETTE[1], lw=2, label=f"memory-bound limit F/(B·β), β = {format_number(b)}")
    ax.axhline(large, color=PALETTE[2], lw=2, label=f"compute-bound limit F·M_Y/α_ici = {large:.3g} (M_Y = {r['M_Y']})")
    ax.axhline(r["Y"], color="k", lw=1.2, ls="--", label=f"this slice: Y = {r['Y']} ({r['slice']})")
    ax.axvline(B, color="0.4", lw=1)
    ax.plot([B], [r["Y"]], "o", color=PALETTE[4] if r["comm_bound_at_B"] else PALETTE[0], ms=8, zorder=5)
    _log_axes(ax)
    ax.set_xlim(*B_range)
    ax.set_ylim(1, top)
    ax.set_xlabel("batch B (sequences per decode step)")
    ax.set_ylabel("TP degree Y (chips)")
    # the setting goes in the figure's title, so the two panel titles stay short and never run into each other
    fig.suptitle(f"{r['model']} {_meaning(r['precision'])} on {r['chip']} {r['slice']}", fontsize=10)
    ax.set_title("largest TP degree Y before ICI dominates", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right", fontsize=7.5)
    for attr, label, color in (
        ("t_math", "T_math = 2BDF/(Y·C)", PALETTE[2]),
        ("t_hbm", "T_hbm = w·DF/(Y·W_hbm)", PALETTE[0]),
        ("t_ici", "T_ici = a·BD/W_ici", PALETTE[4]),
    ):
        ax2.plot(Bs, [getattr(t, attr) * 1e6 for t in times], color=color, lw=2, label=label)
    ax2.axvline(B, color="0.4", lw=1)
    _log_axes(ax2)
    ax2.set_xlim(*B_range)
    ax2.set_xlabel("batch B (sequences per decode step)")
    ax2.set_ylabel("time per matmul (µs)")
    # the verdict goes in the title: a text box beside the B line would sit on the curves
    ax2.set_title(
        f"one [B, D]·[D, F] matmul, F over Y = {r['Y']}: {r['bound']}-bound at B = {format_number(B)}", fontsize=9.5
    )
    ax2.grid(True, which="major", alpha=0.3)
    ax2.legend(loc="upper left", fontsize=8)
    return fig


def tp_check_widget(
    slice_: str = "4x8", precision: str = "bf16", B: int = 64, model: str = "llama3-70b", chip: str = "tpu-v5e"
) -> widgets.VBox:
    """Slice and precision dropdowns and a batch slider "B"; prints `tp_check_readout`."""
    slice_dd = widgets.Dropdown(
        options=list(SLICES) if slice_ in SLICES else [slice_, *SLICES], value=slice_, description="slice"
    )
    prec_dd = widgets.Dropdown(options=list(BOOK_PRECISIONS), value=precision, description="precision")
    b_sl = widgets.IntSlider(
        value=B, min=1, max=1024, description="B", continuous_update=False, layout=widgets.Layout(width="60%")
    )
    box = widgets.VBox()

    def view(slice_, precision, B):
        emit(
            box,
            tp_check_readout(slice_, precision, B, model, chip),
            lambda: render_tp_check(slice_, precision, B, model, chip),
            key=(slice_, precision),
        )

    controls = {"slice_": slice_dd, "precision": prec_dd, "B": b_sl}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([slice_dd, prec_dd]), b_sl, out]
    values = lambda: (slice_dd.value, prec_dd.value, b_sl.value)  # noqa: E731
    return attach(
        box,
        {"slice": slice_dd, "precision": prec_dd, "B": b_sl},
        out,
        lambda: tp_check_readout(*values(), model, chip),
        lambda: render_tp_check(*values(), model, chip),
    )
