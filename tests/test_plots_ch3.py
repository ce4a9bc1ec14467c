"""Chapter-3 figures: device blocks of a sharded array, collective time vs bytes."""

import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scalebook_utils import collectives, hardware, plots, sharding


def _draw(fig):
    FigureCanvasAgg(fig).draw()
    return fig


def test_blocks_fully_sharded():
    fig = _draw(plots.sharding_blocks_figure("A[I_X, J_Y]", "{X: 2, Y: 4}", (64, 64)))
    ax = fig.axes[0]
    assert len(ax.patches) == 8
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == sorted(f"d{i}" for i in range(8))
    assert "8 distinct shards, each on 1 device" in ax.get_title()


def test_blocks_replicated_and_positions():
    fig = _draw(plots.sharding_blocks_figure("A[I, J_X]", "{X: 2, Y: 2, Z: 2}", {"I": 64, "J": 64}))
    ax = fig.axes[0]
    assert len(ax.patches) == 2 and "each on 4 devices" in ax.get_title()
    # device 0..3 (x = 0) hold columns [0, 32); 4..7 the rest
    left = min(ax.patches, key=lambda p: p.get_x())
    assert left.get_x() == 0 and left.get_width() == 32
    assert any("d0,1" in t.get_text() for t in ax.texts)


def test_blocks_cover_the_array_once_per_shard():
    for spec in ("A[I_XY, J]", "A[I_Y, J_X]", "A[I, J]"):
        fig = plots.sharding_blocks_figure(spec, "{X: 2, Y: 4}", (64, 32))
        area = sum(p.get_width() * p.get_height() for p in fig.axes[0].patches)
        assert area == 64 * 32, spec


def test_blocks_invalid_raises_sharding_error():
    with pytest.raises(sharding.ShardingError):
        plots.sharding_blocks_figure("A[I_X, J_X]", "{X: 2, Y: 4}", (64, 64))


def test_knee_is_where_terms_meet():
    knee = plots.collective_knee_bytes("all_gather", "tpu-v5e", (16,))
    c = collectives.all_gather(knee, (16,), "tpu-v5e")
    assert math.isclose(c.latency_s, c.bandwidth_s, rel_tol=1e-9)
    assert math.isclose(knee, 720e3, rel_tol=1e-6)  # 8 hops × 1 µs × 9e10 B/s
    assert plots.collective_knee_bytes("ppermute", "tpu-v5e", None) == pytest.approx(45e3)  # book: ~45 kB


def test_collective_time_figure_shape():
    fig = _draw(plots.collective_time_figure("all_gather", "tpu-v5e", (16,), True, n_bytes=1e6))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    x, y = ax.get_lines()[0].get_data()
    assert np.all(np.diff(y) >= -1e-18)  # monotone in bytes
    assert math.isclose(y[0], 8e-6)  # flat latency floor: 8 hops × 1 µs
    fig2 = plots.collective_time_figure("all_gather", "tpu-v5e", (4,), False, ax=ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert fig2 is fig and len(texts) == 3  # two curves and the starred size
    assert "knee 720 kB" in texts[0] and texts[1].startswith("this size: 1 MB") and "knee 180 kB" in texts[2]
    assert not ax.texts  # knees live in the legend: no labels to overlap
    _draw(plots.collective_time_figure("ppermute", "tpu-v6e", None))
    assert isinstance(plots.collective_time_figure("all_to_all", "tpu-v5p", (4, 4)), Figure)


def test_allgather_axes_figure_only_real_axes():
    """Review ch3 [16]: no 64-chip axis on v5e/v6e, a v5e/v6e axis of 4 is a line, no duplicate panels."""
    from scalebook_utils import topology

    fig = _draw(plots.allgather_axes_figure())
    assert len(fig.axes) == 2
    for rows in plots.ALLGATHER_AXES.values():
        for x, wrap, where in rows:
            chip = {"v5e": "tpu-v5e", "v4p": "tpu-v4p", "v6e": "tpu-v6e", "v5p": "tpu-v5p"}[where[:3]]
            spec = hardware.get_chip(chip)
            assert x <= max(spec.pod_shape)
            pad = (x,) + (1,) * (spec.ici_torus_dims - 1) if not wrap or spec.ici_torus_dims == 2 else (x,) * 3
            assert topology.default_wraparound(chip, pad)[0] == wrap, (x, wrap, where)
    curves = [tuple(ln.get_ydata()) for ax in fig.axes for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(curves) == len(set(curves)) == 7  # every line differs from every other


def test_allgather_axes_figure_panel_chip_from_data():
    """Each default panel is drawn on a chip of its link bandwidth (not found in the title); own panels name theirs."""
    fig = plots.allgather_axes_figure()
    last = [ax.get_lines()[0].get_ydata()[-1] for ax in fig.axes]  # 1 GB over an axis of 4, no wrap
    assert last[0] == pytest.approx(2 * last[1])  # 45 vs 90 GB/s links
    rows = {"mine": [(16, True, "an axis")]}
    v5e, v5p = (plots.allgather_axes_figure(axes=rows, chips={"mine": c}) for c in ("tpu-v5e", "tpu-v5p"))
    assert v5e.axes[0].get_lines()[0].get_ydata()[-1] == pytest.approx(2 * v5p.axes[0].get_lines()[0].get_ydata()[-1])
    assert plots.allgather_axes_figure(axes=rows).axes[0].get_title() == "mine"
