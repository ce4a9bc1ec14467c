"""Figures of chapter 1: labelled axes with units, and markers where the pure functions put them."""

import io
import math
import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402
from scalebook_utils.hardware import CHIPS  # noqa: E402

from scalebook_utils import plots, roofline  # noqa: E402

UNIT = re.compile(r"\((?:[^()]*?)(FLOP|OP|B/s|byte|tokens|s|µs|ms|elements)[^()]*\)")


def _by_gid(ax, gid):
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert found, f"no artist with gid {gid!r}"
    return found[0]


def _assert_labelled(ax, categorical: str = ""):
    """Both axes labelled with a unit, except a categorical axis ("x" or "y") whose ticks name the bars."""
    for which, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        if which == categorical:
            ticks = [t.get_text() for t in getattr(ax, f"get_{which}ticklabels")()]
            assert all(ticks) and ticks, f"categorical {which} axis without tick names"
            continue
        assert label.strip(), "axis without a label"
        assert UNIT.search(label), f"axis label without a unit: {label!r}"
    assert ax.get_title().strip()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    return buf.getvalue()


@pytest.fixture(scope="module")
def all_figures():
    return {
        "roofline": plots.roofline_figure(1.97e14, {"BW1": 8.2e11, "BW2": 1.64e12}, {"Algo 1": 60, "Algo 2": 600}),
        "achievable": plots.achievable_flops_figure(8192, 8192, "tpu-v5e", "bf16", B=512),
        "bars": plots.time_bars(3e-4, 1e-4),
        "measured": plots.measured_roofline_figure(2e11, 5e10, [(20, 3e10, "a"), (200, 1.8e11, "b")]),
        "two_chip": plots.two_chip_figure(D=8192),
        "critical_batch": plots.critical_batch_figure(),
    }


def test_every_figure_is_a_headless_figure_with_labelled_axes(all_figures):
    import matplotlib.pyplot as plt

    categorical = {"bars": "y", "critical_batch": "x"}
    for name, fig in all_figures.items():
        assert isinstance(fig, Figure), name
        for ax in fig.axes:
            _assert_labelled(ax, categorical.get(name, ""))
        assert _png(fig).startswith(b"\x89PNG"), name
    assert plt.get_fignums() == [], "builders must not register figures with pyplot"


def test_roofline_figure_is_log_log_with_three_regions_and_the_roofline_shape():
    peak, bws = 1.97e14, {"slow": 8.2e11, "fast": 1.64e12}
    fig = plots.roofline_figure(peak, bws, {"Algo 1": 60, "Algo 2": 600})
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert any("only at the slower" in s for s in labels) and "compute-bound" in labels
    for label, bw in bws.items():
        line = _by_gid(ax, f"roofline:{label}")
        x, y = line.get_data()
        np.testing.assert_allclose(y, np.minimum(peak, x * bw))
    assert _by_gid(ax, "algorithm:Algo 1").get_xdata()[0] == 60
    # One bandwidth: no yellow band.
    one = plots.roofline_figure(peak, {"HBM": 8.2e11}, {"dot": 0.5})
    assert not any("slower" in s for s in one.axes[0].get_legend_handles_labels()[1])


def test_roofline_figure_needs_a_bandwidth():
    with pytest.raises(ValueError, match="bandwidth"):
        plots.roofline_figure(1e14, {})


@pytest.mark.parametrize(
    "chip,mode,D,F",
    [
        ("tpu-v5e", "bf16", 8192, 8192),
        ("tpu-v5e", "int8-weights", 1024, 1024),
        ("h100", "int8", 4096, 16384),
        ("tpu-v6e", "bf16", 4096, 4096),
    ],
)
def test_achievable_figure_marks_the_crossover_at_crossover_batch(chip, mode, D, F):
    fig = plots.achievable_flops_figure(D, F, chip, mode, B=100, B_max=4096)
    ax = fig.axes[0]
    _assert_labelled(ax)
    expected = roofline.crossover_batch(D, F, chip, mode)
    x = _by_gid(ax, "crossover").get_xdata()
    assert x[0] == pytest.approx(expected) and x[1] == pytest.approx(expected)
    assert f"{expected:,.0f}" in " ".join(ax.get_legend_handles_labels()[1])
    # The current batch sits on the achievable curve.
    bx, by = (np.asarray(v)[0] for v in _by_gid(ax, "current-B").get_data())
    peak = CHIPS[chip].peak_flops(roofline.MATMUL_MODES[mode][2])
    scale, _ = plots.si_scale(peak)
    assert bx == 100
    assert by * scale == pytest.approx(roofline.achievable_flops_curve(np.array([100.0]), D, F, chip, mode)[0])
    # The curve never exceeds peak; the y axis is in the unit its label names.
    curve = [ln for ln in ax.get_lines() if ln.get_label().startswith("achievable")][0]
    assert np.max(curve.get_ydata()) * scale <= peak * (1 + 1e-9)
    assert ax.get_xscale() == "log"


def test_achievable_figure_without_crossover_says_so():
    assert math.isinf(roofline.crossover_batch(128, 128, "tpu-v5e", "bf16"))
    fig = plots.achievable_flops_figure(128, 128, "tpu-v5e", "bf16", B=64)
    ax = fig.axes[0]
    assert not [a for a in ax.get_children() if a.get_gid() == "crossover"]
    assert any("never compute-bound" in t.get_text() for t in ax.texts)


def test_achievable_figure_unknown_mode_or_dtype_raises_clearly():
    with pytest.raises(ValueError, match="unknown matmul mode"):
        plots.achievable_flops_figure(8192, 8192, "tpu-v5e", "fp64")
    with pytest.raises(ValueError, match="no bf16"):
        plots.achievable_flops_figure(8192, 8192, "v100", "bf16")


def test_time_bars_show_both_times_in_one_unit():
    fig = plots.time_bars(3.4e-4, 1.2e-4)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (µs)"
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == pytest.approx([120, 340])
    assert "compute-bound" in ax.get_title()
    assert "memory-bound" in plots.time_bars(1e-6, 2e-6).axes[0].get_title()


def test_measured_roofline_places_the_points():
    pts = [(20.0, 3e10, "64³"), (170.0, 1.7e11, "512³"), (680.0, 1.95e11, "2048³")]
    fig = plots.measured_roofline_figure(2e11, 5.5e10, pts)
    ax = fig.axes[0]
    offsets = _by_gid(ax, "measured").get_offsets()
    np.testing.assert_allclose(offsets, [(i, f) for i, f, _ in pts])
    x, y = _by_gid(ax, "calibrated-roofline").get_data()
    np.testing.assert_allclose(y, np.minimum(2e11, x * 5.5e10))
    assert {t.get_text() for t in ax.texts} >= {"64³", "512³", "2048³"}


def test_two_chip_figure_marks_the_d_threshold():
    fig = plots.two_chip_figure(B=512, F=4096, flops_per_s=1.97e14, link_bytes_per_s=4.5e10, D=16384)
    ax = fig.axes[0]
    x = _by_gid(ax, "d-threshold").get_xdata()
    assert x[0] == pytest.approx(2 * 1.97e14 / 4.5e10)
    assert 8755 < x[0] < 8756
    t_comms = [ln for ln in ax.get_lines() if "comms" in ln.get_label()][0].get_ydata()
    assert np.allclose(t_comms, 2 * 512 * 4096 / 4.5e10)
    _, ys = _by_gid(ax, "current-D").get_data()
    r = roofline.two_chip_roofline(512, 16384, 4096)
    assert sorted(ys) == pytest.approx(sorted([r.t_math_s, r.t_comms_s]))


def test_critical_batch_figure_bars_match_the_model():
    fig = plots.critical_batch_figure(["tpu-v5e", "h100", "v100"], modes=("bf16",))
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([roofline.critical_batch("tpu-v5e"), roofline.critical_batch("h100")])
    assert any("no bf16" in t.get_text() for t in ax.texts)  # v100 has no bf16 peak


def test_si_scale():
    assert plots.si_scale(1.97e14) == (1e12, "T")
    assert plots.si_scale(3e-5) == (1e-6, "µ")
    assert plots.si_scale(0) == (1.0, "")


def test_plain_tick_keeps_fractions_plain_formatter_rounds_them():
    """views._kit's two plain tick labels agree on whole numbers and below 1; only plain_tick keeps 1.5."""
    from scalebook_utils.views import _kit

    fmt = _kit.plain_formatter()
    for v, text in ((1000, "1,000"), (1, "1"), (0.5, "0.5"), (0.01, "0.01"), (0, ""), (-3, "")):
        assert _kit.plain_tick(v, None) == fmt(v, None) == text
    assert (_kit.plain_tick(1.5, None), fmt(1.5, None)) == ("1.5", "2")
