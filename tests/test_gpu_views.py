"""Chapter 12 views: the topology explorer, the GPU collective widget and the roofline figures (`gpu_views`)."""

import pytest

pytest.importorskip("ipywidgets")

from figure_support import _draw, _is_message, _labelled, _legend  # noqa: E402
from IPython.display import Image  # noqa: E402

from scalebook_utils import gpu_views as V  # noqa: E402


def test_topology_readout_book_numbers():
    line = V.topology_readout("h100", 4)
    assert line.startswith("gpu topology: h100, SUs=4 → 1024 GPUs, 560 switches | node: 8 GPUs, 450 GB/s per GPU")
    assert "leaf: 256 GPUs, 50 GB/s per GPU, cables 12.8 TB/s, AllGather 413 GB/s" in line
    assert "spine: 1024 GPUs, 25 GB/s per GPU, cables 51.2 TB/s" in line
    assert V.topology_readout("h100", 1).startswith("gpu topology: h100, SUs=1 → 256 GPUs")
    assert "cannot evaluate" in V.topology_readout("tpu-v5e", 4)
    assert "cannot evaluate: n_sus" in V.topology_readout("h100", 0)


def test_topology_rows():
    rows = V.topology_rows("b200", 2)
    assert [r["level"] for r in rows] == ["node", "leaf", "spine"]
    assert rows[0]["per_gpu"] == 900e9 and rows[1]["child"] == 400e9


def test_topology_figure():
    fig = _draw(V.render_topology("h100", 4))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        _labelled(ax)
    assert len(fig.axes[0].patches) == 3 and len(fig.axes[1].patches) == 6
    assert "560 switches" in fig._suptitle.get_text()
    assert _is_message(V.render_topology("nope"))


def test_topology_figure_holds_every_pod_up_to_max_sus():
    """With max_sus (what the widget passes: its slider's end) the axes and the level slots are the same for every
    pod size, so a slider step moves bars and labels, not axes; a one-SU pod's spine slot is empty."""
    figs = {n: _draw(V.render_topology("h100", n, max_sus=8)) for n in (1, 4, 8)}
    for fig in figs.values():
        assert [ax.get_ylim() for ax in fig.axes] == [ax.get_ylim() for ax in figs[8].axes]
        assert len(fig.axes[0].patches) == 3 and len(fig.axes[1].patches) == 6
    one = figs[1].axes[0]
    assert [p.get_visible() for p in one.patches] == [True, True, False]
    assert one.get_xticklabels()[2].get_text() == "spine\n(none with 1 SU)"
    assert figs[8].axes[1].get_ylim()[1] >= 102.4  # the 8-SU pod's spine: 102.4 TB/s of cables
    assert "1,024 GPUs" in figs[4].axes[0].get_xticklabels()[2].get_text()
    alone = _draw(V.render_topology("h100", 1))  # no max_sus: this pod alone, as before
    assert len(alone.axes[0].patches) == 2 and alone.axes[1].get_ylim()[1] < 40


def test_topology_widget_updates():
    w = V.topology_explorer()
    first = w.last_readout
    assert first == V.topology_readout("h100", 4) == w.readout()
    w.controls["n_sus"].value = 8
    assert "2048 GPUs" in w.last_readout and w.last_readout != first
    w.controls["chip"].value = "gb200"
    assert w.last_readout.startswith("gpu topology: gb200, SUs=8")
    assert isinstance(w.snapshot(), Image)


def test_gpu_collective_readout():
    line = V.gpu_collective_readout("all_gather", 2 * 4096 * 65536, 8)
    assert line.startswith("gpu collective: all_gather of 537 MB over 8 h100 GPUs → 1.04 ms")
    assert "bottleneck node" in line
    sharp = V.gpu_collective_readout("all_reduce", 1e9, 1024, sharp=True)
    assert "(SHARP on)" in sharp and "400 GB/s" in sharp and "bottleneck leaf" in sharp
    off = V.gpu_collective_readout("all_reduce", 1e9, 8)
    assert "(SHARP off)" in off and "3.89 ms, 257 GB/s of bytes per second = bus bandwidth 450 GB/s" in off, off
    assert "bus bandwidth" not in line  # only an AllReduce has NCCL's bus bandwidth
    assert "cannot evaluate" in V.gpu_collective_readout("all_gather", 1e9, 4096)
    assert "cannot evaluate: unknown collective" in V.gpu_collective_readout("gossip", 1e9, 8)
    assert "cannot evaluate: SHARP" in V.gpu_collective_readout("all_gather", 1e9, 8, sharp=True)


def test_gpu_collective_figure():
    fig = _draw(V.render_gpu_collective("all_reduce", 1e9, 16, True))
    ax = fig.axes[0]
    _labelled(ax)
    labels = _legend(ax)
    assert any("SHARP" in lbl for lbl in labels) and any("current" in lbl for lbl in labels)
    assert any("one node" in t.get_text() for t in ax.texts)
    fig = _draw(V.render_gpu_collective("all_to_all", 1e8, 64))
    assert not any("SHARP" in lbl for lbl in _legend(fig.axes[0]))
    assert _is_message(V.render_gpu_collective("all_gather", 1e9, 3000))


def test_gpu_collective_widget_updates():
    w = V.gpu_collective_widget()
    first = w.last_readout
    assert first.startswith("gpu collective: all_reduce of 1 GB over 8 h100 GPUs (SHARP off)")
    w.controls["sharp"].value = True
    assert "(SHARP on)" in w.last_readout
    w.controls["n_gpus"].value = 64
    assert "over 64 h100 GPUs" in w.last_readout and "bottleneck leaf" in w.last_readout
    w.controls["kind"].value = "all_gather"  # SHARP is ignored for kinds other than AllReduce
    assert w.last_readout.startswith("gpu collective: all_gather") and "cannot" not in w.last_readout
    assert w.readout() == w.last_readout
    w.controls["chip"].value = "gb200"  # a 72-GPU NVLink node: 64 GPUs stay inside it
    assert "over 64 gb200 GPUs" in w.last_readout and "bottleneck node" in w.last_readout


def test_roofline_figures():
    fig = _draw(V.render_dp_thresholds())
    ax = fig.axes[0]
    _labelled(ax)
    assert len(ax.patches) == 6 and any("2,472" in t.get_text() for t in ax.texts)
    fig = _draw(V.render_sharded_all_gather())
    _labelled(fig.axes[0])
    assert _is_message(V.render_dp_thresholds(("tpu-v5e",)))


def test_gpu_roofline_readout_matches_the_pure_function():
    from scalebook_utils import gpus

    r = gpus.mlp_roofline("dp", 4e6, 8192, 28_672, 1024, "h100")
    line = V.gpu_roofline_readout("dp", "h100", 4e6, 8192, 28_672, 1024, True)
    assert line.startswith("gpu roofline: dp 1024-way on h100 across nodes, B=4M tokens, D=8192, F=28672 → ")
    assert r.bound in line and f"comms/math {r.ratio:.2f}" in line
    # tensor parallelism 32-way inside a node is past F·W/C ≈ 13: communication-bound
    assert "communication-bound" in V.gpu_roofline_readout("tp", "h100", 8192, 8192, 28_672, 32, False)
    assert ", k=8 →" in V.gpu_roofline_readout("ep", "h100", 4e6, 8192, 28_672, 64, True, 8)
    assert "cannot evaluate: unknown strategy" in V.gpu_roofline_readout("pp")
    assert "cannot evaluate" in V.gpu_roofline_readout("dp", "tpu-v5e")


def test_gpu_roofline_figure_and_widget():
    fig = _draw(V.render_gpu_roofline("tp", "h100", 8192, 8192, 28_672, 8, False))
    ax = fig.axes[0]
    _labelled(ax)
    _legend(ax)
    assert len(ax.lines) == 3  # T_math, T_comms, the current point
    assert _is_message(V.render_gpu_roofline("dp", "nope"))
    w = V.gpu_roofline_widget()
    assert w.last_readout == V.gpu_roofline_readout("dp", "h100", 4e6, 8192, 28_672, 1024, True, 8) == w.readout()
    w.controls["degree"].value = 4096
    assert "dp 4096-way" in w.last_readout and "communication-bound" in w.last_readout
    w.controls["strategy"].value = "ep"
    assert w.last_readout.startswith("gpu roofline: ep 4096-way") and ", k=8" in w.last_readout
    assert isinstance(w.snapshot(), Image)


def test_pipeline_schedules_figure():
    fig = _draw(V.render_pipeline_schedules(4, 8, 2))
    assert len(fig.axes) == 3
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("GPipe: bubble 27.3% (formula 27.3%)") and "holds 8 microbatches" in titles[0]
    assert titles[1].startswith("1F1B: bubble 27.3%") and "holds 4 microbatches" in titles[1]
    assert titles[2].startswith("interleaved 1F1B, v = 2: bubble 15.8% (formula 15.8%)")
    assert _is_message(V.render_pipeline_schedules(4, 6, 4))  # m not a multiple of p
