"""topology: slices, pods, hops, transfer times — golden numbers from book ch. 2 and properties.

Each golden test names its chapter reference and the accept range from ../shared/book/PROBLEMS.md.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scalebook_utils.errors import UnknownNameError
from scalebook_utils.hardware import chip_names

from scalebook_utils import topology as T

BF16 = 2


def in_range(value, lo, hi):
    return lo <= value <= hi


# --- ch2.q2: pod details (book ch. 2, Worked Problems, Question 2) ----------------------------------


def test_ch2_q2_v5e_pod():
    p = T.pod("tpu-v5e")
    assert p.shape == (16, 16) and p.wraparound == (True, True)
    assert p.n_hosts == 32  # ch2.q2a: 256 chips / 8 per host
    assert p.n_tensorcores == 256  # ch2.q2b [256, 256]
    assert in_range(p.peak_flops("bf16"), 4.947e16, 5.253e16)  # ch2.q2c: book 5.1e16; 5.04e16 here
    assert in_range(p.hbm_bytes, 3.88e12, 4.399e12)  # ch2.q2d: book 4 TB


def test_ch2_q2_v5p_pod():
    p = T.pod("v5p")
    assert p.shape == (16, 20, 28) and p.n_chips == 8960
    assert p.n_hosts == 2240  # ch2.q2e: 8960 / 4 per host
    assert p.n_tensorcores == 17920  # ch2.q2f [17920, 17920]
    assert in_range(p.peak_flops(), 3.977e18, 4.223e18)  # ch2.q2g: book 4.1e18 (≈4 exaFLOPs/s)
    assert in_range(p.hbm_bytes, 8.342e14, 8.858e14)  # ch2.q2h: book 860 TB
    assert p.hbm_bandwidth_bytes_per_s == pytest.approx(8960 * 2.8e12)


def test_other_pods_and_hosts():
    assert T.pod("tpu-v4p").n_chips == 4096 and T.pod("tpu-v4p").n_hosts == 1024
    assert T.pod("tpu-v6e").peak_flops() == pytest.approx(256 * 9.2e14)
    assert T.pod("tpu7x").shape == (4, 4, 576) and all(T.pod("tpu7x").wraparound)
    # ch2.q6: a v5e 4×4 spans 2 hosts of 4×2 chips; a slice smaller than a host still needs one
    assert T.make_slice("v5e", (4, 4)).n_hosts == 2
    assert T.make_slice("v5e", (2, 2)).n_hosts == 1
    assert T.make_slice("v5p", "2x2x1").n_hosts == 1


# --- wraparound rules (book ch. 2, "TPU Networking") ------------------------------------------------


@pytest.mark.parametrize(
    "chip, shape, wrap",
    [
        ("tpu-v5e", (4, 4), (False, False)),  # ch2.q5: a 4×4 v5e slice has no wraparound
        ("tpu-v5e", (8, 16), (False, True)),  # "an 8×16 slice has wrap on the long axis"
        ("tpu-v5e", (16, 16), (True, True)),
        ("tpu-v6e", (16, 4), (True, False)),
        ("tpu-v5p", (2, 2, 1), (False,) * 3),  # smaller slices: no wraparound
        ("tpu-v5p", (2, 2, 2), (False,) * 3),
        ("tpu-v5p", (2, 2, 4), (False,) * 3),
        ("tpu-v5p", (2, 4, 4), (False,) * 3),  # not whole cubes (see the module docstring)
        ("tpu-v4p", (4, 4, 4), (True,) * 3),  # a full cube has wraparound (ch3.q2)
        ("tpu-v5p", (4, 4, 8), (True,) * 3),
        ("tpu7x", (4, 4, 8), (True,) * 3),
    ],
)
def test_wraparound_rules(chip, shape, wrap):
    assert T.make_slice(chip, shape).wraparound == wrap


def test_short_shapes_are_padded_and_strings_parse():
    s = T.make_slice("v5p", (2, 2))
    assert s.shape == (2, 2, 1) and s.ndim == 3
    assert T.make_slice("v5e", "8x16").shape == (8, 16)
    assert T.make_slice("v5e", "16×8").wraparound == (True, False)
    # any orientation that fits the pod is accepted
    assert T.make_slice("v5p", (28, 16, 20)).n_chips == 8960


def test_shape_text_is_the_inverse_of_parse_shape():
    """The one 'x'-joined shape text the views, the ch. 8 numbers and the capstone print."""
    from scalebook_utils import applied_inference
    from scalebook_utils.core.capstone import text

    assert T.shape_text((4, 2)) == "4x2" and T.shape_text((8,)) == "8" and T.shape_text([16, 20, 28]) == "16x20x28"
    for shape in ((4, 4), (2, 2, 1), (16,)):
        assert T.parse_shape(T.shape_text(shape)) == shape
    assert T.make_slice("v5e", "4x8").name == "tpu-v5e 4x8"
    assert applied_inference.shape_text is text.shape_text is T.shape_text


def test_wraparound_override():
    s = T.make_slice("v5e", (4, 4), wraparound=True)
    assert s.wraparound == (True, True)
    assert T.max_hops(s) == 4 and T.max_hops(T.make_slice("v5e", (4, 4))) == 6


# --- hops --------------------------------------------------------------------------------------------


def test_hops_with_and_without_wraparound():
    s = T.make_slice("v5e", (4, 4))
    assert T.hop_distance(s, (0, 0), (3, 3)) == 6  # ch2.q5: 6 hops
    assert T.hop_distance(T.pod("v5e"), (0, 0), (15, 15)) == 2  # wraparound: 1 + 1
    assert T.max_hops(T.pod("v5e")) == 16 and T.max_hops(T.pod("v5p")) == 8 + 10 + 14
    assert T.ring_hops(16, True) == 8 and T.ring_hops(16, False) == 15 and T.ring_hops(1, True) == 0
    assert s.links((0, 0)) == 2 and s.links((1, 0)) == 3 and s.links((1, 1)) == 4
    assert T.pod("v5e").links((0, 0)) == 4 and T.pod("v5p").links((0, 0, 0)) == 6


def _slices():
    shape = st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple)
    return shape.flatmap(
        lambda sh: st.tuples(st.just(sh), st.lists(st.booleans(), min_size=len(sh), max_size=len(sh)).map(tuple))
    )


def _coord(shape):
    return st.tuples(*(st.integers(0, n - 1) for n in shape))


@given(data=st.data(), sw=_slices())
@settings(max_examples=200, deadline=None)
def test_hop_distance_is_a_metric_and_wrap_never_increases_it(data, sw):
    shape, wrap = sw
    s = T.Slice("tpu-v5p", shape, wrap)
    line = T.Slice("tpu-v5p", shape, (False,) * len(shape))
    ring = T.Slice("tpu-v5p", shape, (True,) * len(shape))
    a, b, c = (data.draw(_coord(shape)) for _ in range(3))
    d = T.hop_distance
    assert d(s, a, b) == d(s, b, a) >= 0
    assert (d(s, a, b) == 0) == (a == b)
    assert d(s, a, c) <= d(s, a, b) + d(s, b, c)
    assert d(ring, a, b) <= d(s, a, b) <= d(line, a, b)
    assert d(s, a, b) <= T.max_hops(s)


# --- a shortest route (book ch. 2, "TPU Networking"; plots.torus_figure draws it) ----------------------

TORUS_SHAPES = [(4, 4), (2, 4), (8, 16), (16, 16), (4, 4, 8), (1, 5), (3,)]


@pytest.mark.parametrize("shape", TORUS_SHAPES)
@pytest.mark.parametrize("wrap", [False, True])
def test_torus_path_is_shortest_and_matches_hop_distance(shape, wrap):
    chip = "tpu-v5p" if len(shape) == 3 else "tpu-v5e"
    s = T.Slice(chip, shape + (1,) * (2 - len(shape)) if len(shape) < 2 else shape, wrap)
    coords = list(itertools.product(*(range(n) for n in s.shape)))[:: max(1, len(list(s.coords())) // 12)]
    for a, b in itertools.product(coords[:6], coords[-6:]):
        path = T.torus_path(s.shape, wrap, a, b)
        assert path[0] == a and path[-1] == b
        assert len(path) - 1 == T.hop_distance(s, a, b)
        for p, q in zip(path[:-1], path[1:]):  # each step is one ICI link (neighbour or wraparound)
            changed = [i for i in range(s.ndim) if p[i] != q[i]]
            assert len(changed) == 1
            i = changed[0]
            step = abs(p[i] - q[i])
            assert step == 1 or (wrap and step == s.shape[i] - 1)


@given(sw=_slices(), data=st.data())
@settings(max_examples=100, deadline=None)
def test_torus_path_never_exceeds_the_diameter_and_goes_axis_by_axis(sw, data):
    shape, wrap = sw
    s = T.Slice("tpu-v5p", shape, wrap)
    a, b = data.draw(_coord(shape)), data.draw(_coord(shape))
    path = T.torus_path(shape, wrap, a, b)
    assert len(path) - 1 <= T.max_hops(s)
    axes = [next(i for i in range(len(shape)) if p[i] != q[i]) for p, q in zip(path[:-1], path[1:])]
    assert axes == sorted(axes)  # dimension order: axis 0 first, then 1, then 2


def test_torus_path_book_example_and_numpy_bools():
    # ch. 2: corner to corner of a 4×4 is 6 hops without wraparound, 2 with it (one wrap step per axis)
    assert len(T.torus_path((4, 4), False, (0, 0), (3, 3))) - 1 == 6
    assert T.torus_path((4, 4), True, (0, 0), (3, 3)) == [(0, 0), (3, 0), (3, 3)]
    assert T.torus_path((4, 4), np.bool_(True), (0, 0), (3, 3)) == [(0, 0), (3, 0), (3, 3)]
    assert T.torus_path((4, 4), np.array([True, False]), (0, 0), (3, 3)) == [(0, 0), (3, 0), (3, 1), (3, 2), (3, 3)]
    # ties go forward: on a ring of 4, 0 → 2 is 2 hops either way
    assert T.torus_path((4,), True, (0,), (2,)) == [(0,), (1,), (2,)]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (((4, 4), True, (0, 0), (4, 0)), "dst \\(4, 0\\) is not a chip"),
        (((4, 4), True, (0,), (1, 1)), "src \\(0,\\) is not a chip"),
        (((4, 4), (True,), (0, 0), (1, 1)), "wraparound has 1"),
        (((4, 4, 4, 4), True, (0,) * 4, (1,) * 4), "1 to 3"),
        (((0, 4), True, (0, 0), (0, 1)), "positive"),
    ],
)
def test_torus_route_args_names_the_bad_argument(args, fragment):
    with pytest.raises(ValueError, match=fragment):
        T.torus_route_args(*args)
    with pytest.raises(ValueError, match=fragment):
        T.torus_path(*args)


def test_torus_route_args_normalises():
    assert T.torus_route_args([4.0, 2], True, [0, 1], (3, 0)) == ((4, 2), (True, True), (0, 1), (3, 0))
    assert T.torus_route_args((4, 2), [1, 0], (0, 1), (3, 0))[1] == (True, False)


# --- transfers (book ch. 2, Questions 5 and 6) ------------------------------------------------------


def test_ch2_q5_point_to_point():
    s = T.make_slice("tpu-v5e", (4, 4))
    t = T.p2p_time(s, (0, 0), (3, 3), BF16 * 8 * 128 * 8192)
    assert t.hops == 6 and t.ports == 2
    assert in_range(t.latency_s, 5.82e-6, 6.18e-6)  # ch2.q5a: 6 µs to the first byte
    assert in_range(t.seconds, 1.864e-4, 1.999e-4)  # ch2.q5b: book 194 µs (188 + 6); 192 µs here
    assert t.bandwidth_s == pytest.approx(186.4e-6, rel=1e-3)  # older text: 188 µs, bandwidth only


def test_ch2_q6_steps():
    A = 2**34  # int8[128·1024, 128·1024] = 16 GiB
    s = T.make_slice("tpu-v5e", (4, 4))
    pcie = T.pcie_time("tpu-v5e", A, n_links=16, bandwidth_bytes_per_s=T.TYPICAL_PCIE_BYTES_PER_S)
    assert in_range(pcie, 0.06111, 0.06711)  # ch2.q6a: book 63 ms with A ≈ 16e9 B
    ici = T.gather_to_chip(s, (0, 0), A)
    assert ici.ports == 2 and ici.n_bytes == pytest.approx(15 / 16 * A)
    assert in_range(ici.bandwidth_s, 0.1619, 0.179)  # ch2.q6b: book 167 ms with 15e9 B
    assert in_range(T.hbm_time("tpu-v5e", A), 0.019, 0.02096)  # ch2.q6c: book ≈20 ms
    # with the book's rounded sizes the book's own numbers come back
    assert T.pcie_time("v6e", 16e9, 16, bandwidth_bytes_per_s=1.6e10) == pytest.approx(0.0625)
    assert T.gather_to_chip(s, (0, 0), 16e9).bandwidth_s == pytest.approx(0.1667, rel=1e-3)


def test_p2p_details():
    s = T.make_slice("v5e", (4, 4))
    assert T.p2p_time(s, (1, 1), (1, 1), 1e6).seconds == 0
    assert T.p2p_time(s, (1, 1), (2, 2), 9e10, ports=4).bandwidth_s == pytest.approx(0.5)
    assert T.p2p_time(s, (0, 0), (0, 1), 0).seconds == pytest.approx(1e-6)


def test_pcie_dcn_hbm():
    assert T.pcie_time("tpu-v6e", 3.2e10) == pytest.approx(1.0)
    assert T.pcie_time("tpu-v5p", 1.6e10, n_links=4) == pytest.approx(0.25)
    assert T.dcn_time("tpu-v5e", 3.125e9) == pytest.approx(1.0)
    assert T.dcn_time("tpu-v5p", 6.25e9 * 8, n_chips=8) == pytest.approx(1.0)
    assert T.hbm_time("tpu-v5e", 8.2e11, n_chips=2) == pytest.approx(0.5)
    h = T.bandwidth_hierarchy("tpu-v5e")
    assert list(h) == ["vmem", "hbm", "ici", "pcie", "dcn"] and h["pcie"] is None
    assert h["vmem"] == pytest.approx(22 * 8.2e11)
    known = [v for v in T.bandwidth_hierarchy("tpu-v5p").values() if v is not None]
    assert known == sorted(known, reverse=True)  # HBM > ICI > PCIe > DCN (ch. 2)


# --- errors ------------------------------------------------------------------------------------------


def test_clear_errors():
    with pytest.raises(ValueError, match=r"does not fit .* pod of shape \(16, 16\)"):
        T.make_slice("v5e", (32, 4))
    with pytest.raises(ValueError, match="2D torus"):
        T.make_slice("v5e", (4, 4, 4))
    with pytest.raises(ValueError, match="positive integers"):
        T.make_slice("v5e", (0, 4))
    with pytest.raises(UnknownNameError, match="known chips"):
        T.make_slice("tpu-v9", (4, 4))
    with pytest.raises(ValueError, match="not a TPU"):
        T.make_slice("h100", (8,))
    with pytest.raises(ValueError, match="not a TPU"):
        T.Slice("a100", (2, 2), (False, False))
    s = T.make_slice("v5e", (4, 4))
    with pytest.raises(ValueError, match="outside slice"):
        T.hop_distance(s, (0, 0), (4, 0))
    with pytest.raises(ValueError, match="2 integers"):
        T.hop_distance(s, (0, 0), (1, 1, 1))
    with pytest.raises(ValueError, match="no PCIe bandwidth"):
        T.pcie_time("tpu-v5e", 1e9)
    with pytest.raises(ValueError, match="n_bytes"):
        T.p2p_time(s, (0, 0), (1, 1), -1)
    with pytest.raises(ValueError, match="ports"):
        T.p2p_time(s, (0, 0), (1, 1), 1, ports=0)
    with pytest.raises(ValueError, match="one bool per axis"):
        T.Slice("v5e", (4, 4), (True,))
    with pytest.raises(ValueError, match="n "):
        T.ring_hops(0, True)


@pytest.mark.parametrize("chip", chip_names("tpu"))
def test_every_tpu_has_a_pod(chip):
    p = T.pod(chip)
    assert p.n_chips == math.prod(p.shape) and p.n_hosts >= 1 and p.n_tensorcores >= p.n_chips
