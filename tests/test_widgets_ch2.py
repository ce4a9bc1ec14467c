"""Chapter-2 widgets: the slice calculator and the torus explorer (pure readouts, then the builders)."""

import re

import pytest

pytest.importorskip("ipywidgets")

from IPython.display import Image  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from scalebook_utils import topology, widgets  # noqa: E402
from scalebook_utils.views._kit import tpu_names  # noqa: E402

SLICE_LINE = re.compile(
    r"^slice calculator: (\S+) (\S+) → ([\d,]+) chips, ([\d,]+) hosts, ([\d,]+) TensorCores, "
    r"[\d.]+ [PET]?FLOP/s bf16, [\d.]+ [GTP]B HBM \| wraparound per axis: ((?:yes|no)(?:/(?:yes|no))*)"
    r" \| farthest pair: \d+ hops$"
)


def test_slice_readout_small_v5e():
    line = widgets.slice_readout("tpu-v5e", "4x4")
    m = SLICE_LINE.match(line)
    assert m, line
    assert line.startswith("slice calculator: tpu-v5e 4x4 → 16 chips, 2 hosts, 16 TensorCores")
    assert m.group(6) == "no/no" and line.endswith("farthest pair: 6 hops")


def test_slice_readout_book_pods():  # book ch. 2, Question 2
    v5e = widgets.slice_readout("v5e", "16x16")
    assert "256 chips, 32 hosts, 256 TensorCores, 50.4 PFLOP/s bf16, 4.1 TB HBM" in v5e and "yes/yes" in v5e
    v5p = widgets.slice_readout("tpu-v5p", "16x20x28")
    assert "8,960 chips, 2,240 hosts, 17,920 TensorCores, 4.11 EFLOP/s bf16, 860 TB HBM" in v5p
    assert SLICE_LINE.match(v5p) and "yes/yes/yes" in v5p


def test_slice_readout_agrees_with_topology_for_every_tpu_pod():
    for chip in tpu_names():
        p = topology.pod(chip)
        line = widgets.slice_readout(chip, "x".join(map(str, p.shape)))
        assert SLICE_LINE.match(line), line
        assert f"{p.n_chips:,} chips, {p.n_hosts:,} hosts, {p.n_tensorcores:,} TensorCores" in line


@pytest.mark.parametrize(
    "chip,shape,fragment",
    [
        ("tpu-v5e", "4xa", "not of the form"),
        ("tpu-v5e", "32x32", "does not fit"),
        ("tpu-v5e", "4x4x4", "2D torus"),
        ("h100", "4x4", "not a TPU"),
        ("tpu-v9", "4x4", "unknown chip"),
        ("tpu-v5e", "", "not of the form"),
    ],
)
def test_slice_readout_bad_input_is_a_message(chip, shape, fragment):
    line = widgets.slice_readout(chip, shape)
    assert line.startswith(widgets.SLICE_PREFIX) and "cannot build this slice" in line and fragment in line
    assert isinstance(widgets.render_slice(chip, shape), Figure)


def test_torus_readout_book_question_5_shape():
    line = widgets.torus_readout("tpu-v5e", "4x4", "0,0", "3,3")
    assert line == (
        "torus: tpu-v5e 4x4, (0, 0) → (3, 3): 6 hops without wraparound, 2 with | this slice "
        "(wraparound no/no): 6 hops | farthest pair: 6 without, 4 with"
    )


@pytest.mark.parametrize("n", [4, 8, 16])
def test_torus_readout_max_distance_n_minus_1_vs_n_over_2(n):
    line = widgets.torus_readout("tpu-v5e", f"{n}x1", "0,0", f"{n // 2},0")
    assert f"farthest pair: {n - 1} without, {n // 2} with" in line


def test_torus_readout_pod_has_wraparound_and_3d_pads_coordinates():
    assert "this slice (wraparound yes/yes): 2 hops" in widgets.torus_readout("tpu-v5e", "16x16", "0,0", "15,15")
    line = widgets.torus_readout("tpu-v5p", "4x4x8", "0,0", "3,3,7")
    assert "(0, 0, 0) → (3, 3, 7): 13 hops without wraparound, 3 with" in line


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("tpu-v5e", "4x4", "0,0", "4,4"), "outside"),
        (("tpu-v5e", "4x4", "a", "1,1"), "not of the form"),
        (("tpu-v5e", "4x", "0,0", "1,1"), "not of the form"),
    ],
)
def test_torus_readout_bad_input_is_a_message(args, fragment):
    line = widgets.torus_readout(*args)
    assert line.startswith(widgets.TORUS_PREFIX) and "cannot evaluate" in line and fragment in line
    assert isinstance(widgets.render_torus(*args), Figure)


def test_render_torus_has_two_panels():
    fig = widgets.render_torus("tpu-v5e", "4x4", "0,0", "3,3")
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 2 and "= 6 hops" in titles[0] and "= 2 hops" in titles[1]


def test_slice_calculator_builder():
    w = widgets.slice_calculator()
    assert w.readout() == widgets.slice_readout("tpu-v5e", "4x4")
    assert isinstance(w.snapshot(), Image)
    w.controls["chip"].value = "tpu-v5p"
    w.controls["shape"].value = "16x20x28"
    assert "8,960 chips, 2,240 hosts" in w.readout()
    assert "h100" not in w.controls["chip"].options  # TPUs only


def test_torus_explorer_builder():
    w = widgets.torus_explorer()
    assert w.readout().startswith("torus: tpu-v5e 4x4, (0, 0) → (3, 3): 6 hops")
    assert isinstance(w.snapshot(), Image)
    w.controls["shape"].value = "16x16"
    w.controls["dst"].value = "15,15"
    assert "2 with" in w.readout()
