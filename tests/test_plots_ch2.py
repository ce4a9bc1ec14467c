"""Chapter-2 figures: the systolic frame, the torus with its shortest route, the bandwidth hierarchy."""

import io

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402
from scalebook_utils.hardware import chip_names  # noqa: E402

from scalebook_utils import plots, systolic, topology  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=50)
    assert buf.getvalue()[:4] == b"\x89PNG"
    return buf.getvalue()


def _gids(ax, prefix):
    return [a for a in ax.get_children() if (a.get_gid() or "").startswith(prefix)]


@pytest.fixture(scope="module")
def run():
    return systolic.simulate(np.arange(1, 7).reshape(2, 3), np.arange(9).reshape(3, 3))


@pytest.mark.parametrize("cycle", range(9))
def test_systolic_frame_every_cycle(run, cycle):
    fig = plots.systolic_frame_figure(run, cycle)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    grid, util = fig.axes
    busy = _gids(grid, "cell:")
    assert len(busy) == 9
    assert sum(a.get_gid().endswith(":busy") for a in busy) == run.snapshots[cycle].n_active
    assert f"cycle {cycle} (of cycles 0–8)" in grid.get_title()  # 9 cycles, numbered 0..8
    key = grid.get_legend()  # the colour key: busy / loaded / waiting / finished
    assert key is not None and any("busy" in t.get_text() for t in key.get_texts())
    assert "cycle" in util.get_xlabel() and "(%)" in util.get_ylabel()
    _png(fig)


def test_systolic_frame_rejects_cycles_outside_the_run(run):
    for bad in (-1, run.cycles):
        with pytest.raises(ValueError, match="cycle must be in"):
            plots.systolic_frame_figure(run, bad)


def test_utilisation_figure_has_one_bar_per_cycle(run):
    fig = plots.systolic_utilisation_figure(run)
    ax = fig.axes[0]
    assert len(ax.patches) >= run.cycles
    heights = [p.get_height() for p in ax.containers[0]]
    np.testing.assert_allclose(heights, run.utilisation * 100)


def test_the_moved_pure_functions_are_still_plots_names():
    """torus_path and bandwidth_channels live in core (tests in test_topology.py, test_hardware.py); plots re-exports."""
    from scalebook_utils import hardware

    assert plots.torus_path is topology.torus_path
    assert plots.bandwidth_channels is hardware.bandwidth_channels
    assert plots.VMEM_TO_HBM_RATIO == hardware.VMEM_TO_HBM_RATIO == 22


def test_torus_figure_book_example_4x4():
    no = plots.torus_figure((4, 4), False, (0, 0), (3, 3)).axes[0]
    yes = plots.torus_figure((4, 4), True, (0, 0), (3, 3)).axes[0]
    assert "= 6 hops" in no.get_title() and "= 2 hops" in yes.get_title()
    assert "farthest pair in this slice: 6 hops" in no.get_title()
    assert "farthest pair in this slice: 4 hops" in yes.get_title()
    assert not _gids(no, "wrap-link")  # the stubs: one collection, a segment per stub
    assert sum(len(a.get_segments()) for a in _gids(yes, "wrap-link")) == 16
    assert len(_gids(no, "path")) == 6 and len(_gids(yes, "path-wrap")) == 4  # two wrap steps, two stubs each
    assert "chip index" in no.get_xlabel() and "chip index" in no.get_ylabel()


def test_torus_figure_3d_says_which_plane():
    fig = plots.torus_figure((4, 4, 8), True, (0, 1, 2), (3, 2, 6))
    t = fig.axes[0].get_title()
    assert "plane axis 2 = 2" in t and "4 of the hops run along axis 2" in t
    _png(fig)


@pytest.mark.parametrize(
    "args,fragment",
    [
        (((4, 4), True, (0, 0), (4, 0)), "not a chip"),
        (((4, 4), (True,), (0, 0), (1, 1)), "wraparound has 1"),
        (((4, 4, 4, 4), True, (0,) * 4, (1,) * 4), "1 to 3"),
        (((0, 4), True, (0, 0), (0, 1)), "positive"),
    ],
)
def test_torus_figure_bad_input(args, fragment):
    with pytest.raises(ValueError, match=fragment):
        plots.torus_figure(*args)


@pytest.mark.parametrize("chip", chip_names("tpu") + ["h100"])
def test_bandwidth_hierarchy_figure(chip):
    fig = plots.bandwidth_hierarchy_figure(chip)
    ax = fig.axes[0]
    rows = plots.bandwidth_channels(chip)
    bars = _gids(ax, "channel:")
    assert len(bars) == sum(1 for _, bw, _ in rows if bw)
    widths = [b.get_width() for b in bars]
    assert widths == sorted(widths, reverse=True)  # fastest first
    assert ax.get_xscale() == "log" and "B/s" in ax.get_xlabel() or "bytes/s" in ax.get_xlabel()
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "C/W" in texts and "FLOPs/byte" in texts
    _png(fig)


def test_bandwidth_hierarchy_v5e_numbers():
    rows = {name: bw for name, bw, _ in plots.bandwidth_channels("tpu-v5e")}
    assert rows["VMEM"] == pytest.approx(22 * 8.2e11) and rows["HBM"] == 8.2e11
    assert rows["ICI"] == 4.5e10 and rows["PCIe"] is None and rows["DCN"] == 3.125e9
    texts = " ".join(t.get_text() for t in plots.bandwidth_hierarchy_figure("tpu-v5e").axes[0].texts)
    assert "C/W_HBM = 240 FLOPs/byte" in texts and "C/W_VMEM = 10.9 FLOPs/byte" in texts and "no number" in texts
    # the one-way link and the bidirectional W_ici of chapters 3 and 5 carry different names (4,378 vs 2,189)
    assert "C/W_link = 4,378 FLOPs/byte" in texts and "α_ici = C/W_ici = 2,189" in texts
    assert "VMEM" not in {n for n, _, _ in plots.bandwidth_channels("tpu-v6e")}  # the book gives v6e no VMEM size
