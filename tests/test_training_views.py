"""Chapter 5 views: readouts, figures and widgets over `training` (pure readouts first, then builders)."""

import numpy as np
import pytest

pytest.importorskip("ipywidgets")

from figure_support import _draw, _is_message, _labelled  # noqa: E402
from IPython.display import Image  # noqa: E402

from scalebook_utils import training as T  # noqa: E402
from scalebook_utils import training_views as V  # noqa: E402

# --- (1) the central picture ------------------------------------------------------------------------------


def test_the_numbers_come_from_core():
    """The pure functions live in core.training.pictures (tested there without ipywidgets); the names stay here."""
    from scalebook_utils import applied_training_views as AV
    from scalebook_utils.core.training import pictures

    for name in (
        "SCHEMES",
        "slice_info",
        "picture_ratios",
        "picture_thresholds",
        "step_time_curves",
        "threshold_rows",
    ):
        assert getattr(V, name) is getattr(pictures, name), name
    assert AV.get_plan is V.get_plan is T.cached_plan  # one cache of planner runs for chapters 5 and 6


def test_slice_info():
    assert V.slice_info("tpu-v5p", "16x20x28") == ("tpu-v5p", (16, 20, 28), 8960, 3)
    assert V.slice_info("tpu-v5p", "4x4") == ("tpu-v5p", (4, 4, 1), 16, 2)
    assert V.slice_info("tpu-v5e", "16x16")[2:] == (256, 2)
    with pytest.raises(ValueError):
        V.slice_info("tpu-v5p", "four by four")


def test_picture_readout_book_numbers():
    line = V.picture_readout("tpu-v5p", "4x4x4", 30_000, 850)
    assert line.startswith("training picture: B/N=850 on tpu-v5p 4x4x4 (N=64, 3 axes), F=30000 → "), line
    # at α/M_X = 850 FSDP (and DP) sit exactly at ratio 1; the mixed scheme is compute-bound (sqrt(850·30000·2)/2550)
    assert "FSDP+TP compute-bound (ratio 2.8)" in line and "| FSDP 1.0 |" in line and "| DP 1.0 |" in line
    assert "TP 0.18" in line  # F / (N α) = 30000 / (64 · 2550)
    assert "α/M_X=850" in line and "α²/(M_X·M_Y·F)=108" in line
    pod = V.picture_readout("tpu-v5p", "16x20x28", 28_672, 468)
    assert "FSDP+TP compute-bound" in pod and "| FSDP 0.55 |" in pod and "α²/(M_X·M_Y·F)=113" in pod


def test_picture_readout_regimes():
    assert "FSDP+TP communication-bound" in V.picture_readout("tpu-v5p", "4x4x4", 30_000, 50)
    big = V.picture_readout("tpu-v5p", "4x4x4", 30_000, 20_000)
    # past X_opt = N the best mixed split is pure FSDP over all 3 axes: the two curves meet
    assert "→ FSDP compute-bound (ratio 23.5)" in big and "FSDP+TP 23.5" in big


def test_picture_ratios_match_comms_ratio():
    r = V.picture_ratios("tpu-v5p", "16x16x16", 32_768, 99.2)
    assert r["fsdp+tp"] == pytest.approx(T.comms_ratio("fsdp+tp", 99.2, 32_768, 4096, "tpu-v5p", n_axes=3))
    assert r["fsdp+tp"] == pytest.approx(1, rel=0.01)  # ch5.e7: B/N > 99
    assert r["dp"] == r["fsdp"]
    th = V.picture_thresholds("tpu-v5p", "16x16x16", 32_768)
    assert th["fsdp"] == pytest.approx(850) and th["fsdp+tp"] == pytest.approx(2550**2 / (2 * 32_768))


@pytest.mark.parametrize(
    "shape,needle", [("abc", "not of the form"), ("4x4x4x4", "3D torus"), ("64x64x64", "does not fit")]
)
def test_picture_bad_shape_gives_a_line(shape, needle):
    line = V.picture_readout("tpu-v5p", shape, 30_000, 850)
    assert line.startswith("training picture: B/N=850") and "cannot evaluate" in line and needle in line, line
    assert _is_message(V.render_picture("tpu-v5p", shape, 30_000, 850))


def test_picture_unknown_chip_and_gpu():
    assert "cannot evaluate" in V.picture_readout("tpu-v99", "4x4", 30_000, 850)
    assert "not a TPU" in V.picture_readout("h100", "4x4", 30_000, 850)


def test_render_picture_lines_and_labels():
    fig = _draw(V.render_picture("tpu-v5p", "4x4x4", 30_000, 850))
    ax = fig.axes[0]
    _labelled(ax)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    # FSDP, DP, TP, FSDP+TP, current B/N — every legend entry names a line that is drawn (no dotted phantom)
    assert len(labels) == 5, labels
    drawn = {ln.get_label(): ln for ln in ax.get_lines()}
    mixed = next(ln for lbl, ln in drawn.items() if lbl.startswith("FSDP+TP"))
    fsdp = next(ln for lbl, ln in drawn.items() if lbl.startswith("FSDP ("))
    ym, yf = np.asarray(mixed.get_ydata(), float), np.asarray(fsdp.get_ydata(), float)
    assert np.isfinite(ym).sum() > 50  # the mixed curve is visible …
    assert np.all(ym[np.isfinite(ym)] >= yf[np.isfinite(ym)] * (1 - 1e-9))  # … and never below FSDP
    assert np.isnan(ym[-1])  # past B/N = F·M_X·M_Y/3² it *is* FSDP's line
    assert any(lbl.startswith("FSDP (") for lbl in labels) and any(lbl.startswith("TP,") for lbl in labels)
    assert "current B/N = 850" in labels
    assert any(ln.get_ydata()[0] == 1 for ln in ax.get_lines() if len(ln.get_ydata()) == 2)  # ratio-1 line
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "= 850" in texts and "= 108" in texts  # both thresholds marked


def test_training_picture_widget_updates():
    w = V.training_picture()
    assert set(w.controls) >= {"chip", "shape", "F", "B"}
    assert w.controls["B"].description == "B/N"  # the browser test moves the slider by this label
    first = w.last_readout
    assert first == V.picture_readout("tpu-v5p", "4x4x4", 30_000, 850)
    w.controls["B"].value = 100
    assert w.last_readout.startswith("training picture: B/N=100 ") and w.last_readout != first
    assert w.readout() == w.last_readout
    w.controls["shape"].value = "not a shape"
    assert "cannot evaluate" in w.last_readout
    w.controls["pod"].click()
    assert w.controls["shape"].value == "16x20x28" and "N=8960" in w.last_readout
    assert isinstance(w.snapshot(), Image)


# --- (2) step time ------------------------------------------------------------------------------------------


def test_step_time_curves_and_book_crossing():
    c = V.step_time_curves("tpu-v5p", "16x16x16", 8192, 32_768, [4e5, 4e6])
    # DP and FSDP communication does not depend on the batch; FSDP = 1.5 × DP (12DF vs 8DF)
    assert c["dp"][0] == pytest.approx(c["dp"][1]) and c["fsdp"][0] == pytest.approx(1.5 * c["dp"][0])
    assert c["math"][1] == pytest.approx(10 * c["math"][0])
    assert c["split"][0] == (256, 16)  # the book's interactive minimum: FSDP = 256, TP = 16
    line = V.step_time_readout("tpu-v5p", "16x16x16", 8192, 32_768, 4e5)
    assert line.startswith("step time: B=400 k on tpu-v5p 16x16x16 (N=4096)") and "comm-bound below B≈406 k" in line
    assert "FSDP+TP (X=256, Y=16)" in line and "communication-bound" in line


def test_render_step_time():
    fig = _draw(V.render_step_time("tpu-v5p", "16x16x16", 8192, 32_768, B=4e5))
    ax = fig.axes[0]
    _labelled(ax)
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 7, labels  # 4 schemes, T_math, the all-comm-bound batch, current B
    assert sum(lbl.startswith("comms:") for lbl in labels) == 4
    assert _is_message(V.render_step_time("tpu-v5p", "nope"))


# --- (3) the planner ------------------------------------------------------------------------------------------


def test_planner_readout_book_pick():
    line = V.planner_readout("llama3-70b", "tpu-v5p", None, 1, 4 * 2**20, 4096, True)
    assert line.startswith("planner: llama3-70b, tpu-v5p, chips=8960, slices=1, batch=4.19 M tokens, seq=4096 → best: ")
    assert "FSDP 2240 × TP 4" in line and "bound by compute" in line and "ms/step" in line
    text = V.planner_text()
    assert "468" in text and "113" in text and "850" in text  # Plan.explain() names both thresholds
    assert len(V.planner_rows(n=4)) == 4


def test_planner_bad_inputs_give_a_line():
    assert "no plan: unknown model 'llama9'" in V.planner_readout("llama9")
    assert "no plan:" in V.planner_readout("llama3-70b", "tpu-v5e")  # 16 GB HBM: nothing fits on 256 chips
    assert "no plan:" in V.planner_readout("llama3-70b", "h100")
    assert _is_message(V.render_planner("llama9"))
    assert V.planner_text("llama9").startswith("(no feasible configuration")


def test_render_planner_two_panels():
    fig = _draw(V.render_planner())
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_title()
    assert "winner: FSDP 2240 × TP 4" in fig.axes[0].get_title()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][-1] == "compute"


def test_render_planner_family_bar_holds_a_dp_zero1_tp_winner():
    # 70B on 4 v5p pods: DP+ZeRO-1 1120 × TP 8 wins; the "DP or FSDP + TP" bar must show it (the winner's red),
    # not only the best ZeRO-3 layout of that family
    fig = _draw(V.render_planner(slices=4))
    ax = fig.axes[1]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    bar = ax.patches[labels.index("DP or FSDP + TP")]
    assert bar.get_width() == pytest.approx(V.get_plan(slices=4).best.step_time * 1e3)
    assert any("DP+ZeRO-1 1120 × TP 8" in t.get_text() for t in ax.texts)


def test_planner_widget_updates_and_is_fast():

    w = V.planner_widget()
    assert w.last_readout == V.planner_readout()
    w.controls["slices"].value = 2
    assert "slices=2" in w.last_readout and "× 2 slices (DCN)" in w.last_readout
    w.controls["model"].value = "llama3-8b"
    assert w.last_readout.startswith("planner: llama3-8b")
    w.controls["chip"].value = "tpu-v5e"
    assert w.controls["chips"].value == 256  # the new chip's pod
    assert isinstance(w.snapshot(), Image)


def test_threshold_rows():
    rows = {r["chip"]: r for r in V.threshold_rows(("tpu-v5p", "tpu-v5e"), F=28_672)}
    assert rows["tpu-v5p"]["α = C/W_ici"] == "2,550" and rows["tpu-v5p"]["all axes"] == "850 (3)"
    assert rows["tpu-v5p"]["FSDP+TP"] == "113" and rows["tpu-v5p"]["DCN tokens/slice"] == "73,440"
    assert rows["tpu-v5p"]["FSDP pod batch"] == "7.62 M"  # ch5.e2: 7.6M tokens per pod
    text = V.format_rows(list(rows.values()))
    assert text.splitlines()[0].startswith("chip") and len(text.splitlines()) == 4


def test_format_rows_empty():
    assert V.format_rows([]) == "(no rows)"


# --- (5) pipelining ----------------------------------------------------------------------------------------


def _gpipe_grid(P, M):
    """The GPipe forward schedule (stage s runs microbatch m at step m + s; −1 idle), as jaxpipeline builds it."""
    t, s = np.arange(M + P - 1)[None, :], np.arange(P)[:, None]
    return np.where((t - s >= 0) & (t - s < M), t - s, -1)


@pytest.mark.parametrize("P,M", [(8, 4), (8, 1), (4, 16)])
def test_render_pipeline_schedule(P, M):
    grid = _gpipe_grid(P, M)
    fig = _draw(V.render_pipeline_schedule(grid))
    ax, cbar = fig.axes  # the grid and the microbatch colorbar
    assert ax.get_xlabel() == "time step" and ax.get_ylabel() == "pipeline stage"
    title = ax.get_title(loc="left")  # left-aligned: the legend sits on the right
    assert cbar.get_ylabel() == "microbatch id"
    idle = [p for p in ax.patches if p.get_hatch()]
    assert len(idle) == int((grid < 0).sum())  # one shaded slot per idle (stage, step)
    assert title.startswith("Pipeline schedule") and f"{T.bubble_fraction(P, M):.0%} idle" in title
    assert ax.get_ylim() == (P, 0)  # stage 0 on top
    assert [t.get_text() for t in ax.texts] == [str(m) for m in grid[grid >= 0]]  # ids, row by row
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["idle (bubble)"]


def test_render_pipeline_schedule_bad_input_gives_a_message():
    assert _is_message(V.render_pipeline_schedule(np.zeros(3)))
    assert _is_message(V.render_pipeline_schedule([[0.5, 1.0]]))
