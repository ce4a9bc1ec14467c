"""collectives: golden numbers from book ch. 3 and properties of the ICI cost model.

Accept ranges are those of ../shared/book/PROBLEMS.md; each test names its chapter reference.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scalebook_utils.errors import UnknownNameError
from scalebook_utils.hardware import chip_names
from scalebook_utils.topology import make_slice

from scalebook_utils import collectives as C

BF16 = 2


def in_range(value, lo, hi):
    return lo <= value <= hi


# --- ch3 pop quiz 3 (book ch. 3, "A Deeper Dive…", AllGather time on v5e {X: 8, Y: 4}) --------------


def test_ch3_pq3a_bandwidth_bound_no_wraparound():
    V = BF16 * 2048 * 8192  # the gathered [E, F]
    c = C.all_gather(V, 4, "tpu-v5e", wraparound=False)
    assert in_range(c.seconds, 5.432e-4, 5.768e-4)  # ch3.pq3a: 560 µs (3 one-way hops); 559 µs here
    assert c.regime == "bandwidth"
    ideal = C.all_gather(V, 4, "tpu-v5e", wraparound=True)
    assert ideal.seconds == pytest.approx(373e-6, rel=0.01)  # the book's "ideal" bidirectional ≈377 µs
    # the wraparound rule of ch. 2 decides it: an axis of 4 on v5e does not wrap
    assert make_slice("tpu-v5e", (8, 4)).wraparound == (False, False)


def test_ch3_pq3b_latency_bound():
    V = BF16 * 256 * 256  # 32 kB per shard (< 45 kB): latency-bound
    c = C.all_gather(V, 4, "tpu-v5e", wraparound=False)
    assert c.regime == "latency"
    assert c.seconds == pytest.approx(3e-6)  # ch3.pq3b: 3 hops × 1 µs (book: measured ≈8 µs)
    assert c.bandwidth_s < c.latency_s


# --- ch3.q2, ch3.q3 (v4p 4×4×4, every axis wraps, W_bidi = 9e10) ------------------------------------

B, D = 1024, 4096


def test_ch3_q2a_allgather_x():
    c = C.all_gather(BF16 * B * D / 4, 4, "tpu-v4p")  # [B_X, D_Y] → [B, D_Y]
    assert in_range(c.seconds, 2.231e-5, 2.369e-5)  # ch3.q2a: 23 µs
    assert c.regime == "bandwidth"


def test_ch3_q2b_allgather_xy():
    c = C.all_gather(BF16 * B * D, (4, 4), "tpu-v4p")  # [B_X, D_Y] → [B, D], two axes' links
    assert in_range(c.seconds, 4.462e-5, 4.738e-5)  # ch3.q2b: 46 µs


def test_ch3_q2c_allreduce_z():
    c = C.all_reduce(BF16 * B * D / 16, 4, "tpu-v4p")  # [B_X, D_Y]{U_Z}: 2·V/W_bidi
    assert c.seconds == pytest.approx(11.65e-6, rel=1e-3)  # ch3.q2c: 2 × 524288 B / 9e10 ≈ 11.7 µs


def test_ch3_q2d_q2e_fun_facts():
    xz = C.all_gather(BF16 * B * D / 4, (4, 4), "tpu-v4p")  # [B_XZ, D_Y] → [B, D_Y]
    assert in_range(xz.seconds, 1.115e-5, 1.185e-5)  # ch3.q2d: book 11.5 µs
    xyz = C.all_gather(BF16 * B * D, (4, 4, 4), "tpu-v4p")  # [B_XZ, D_Y] → [B, D]
    assert in_range(xyz.seconds, 3.007e-5, 3.193e-5)  # ch3.q2e: book 31 µs


def test_ch3_q3_latency_bound():
    c = C.all_gather(BF16 * 128, 4, "tpu-v4p")  # 256 bytes
    assert c.regime == "latency"
    assert c.seconds == pytest.approx(2e-6)  # ch3.q3: ⌊4/2⌋ = 2 hops × 1 µs
    assert C.all_gather(BF16 * 128, 4, "tpu-v4p", latency=False).seconds == pytest.approx(256 / 9e10)


def test_latency_threshold_about_45kB_per_shard_on_v5e():
    # ch. 3: one-way hop of 4.5e10 B/s × 1 µs = 45 kB; a bidirectional ring of X sends V/X each way per hop
    X = 16
    shard = 45e3
    c = C.all_gather(shard * X, X, "tpu-v5e")
    assert c.bandwidth_s == pytest.approx(c.latency_s, rel=1e-9)


# --- ch3.q10 (ring counting) and the AllToAll rule ---------------------------------------------------


def test_ch3_q10_ring_counts():
    N, Dv = 64, 8
    ag_uni = C.ring_scalars_per_link("all_gather", N, Dv)
    a2a_uni = C.ring_scalars_per_link("all_to_all", N, Dv)
    assert ag_uni == pytest.approx(N**2 * (1 - 1 / Dv))  # ch3.q10a
    assert C.ring_scalars_per_link("reduce_scatter", N, Dv) == ag_uni
    assert a2a_uni == pytest.approx(N**2 / 2 * (1 - 1 / Dv))  # ch3.q10b
    assert in_range(a2a_uni / ag_uni, 0.485, 0.515)  # ch3.q10c: 1/2
    ag_bi = C.ring_scalars_per_link("all_gather", N, Dv, bidirectional=True)
    assert in_range(ag_uni / ag_bi, 1.94, 2.06)  # ch3.q10d: 2
    inf = math.inf
    a2a_speedup = C.ring_scalars_per_link("all_to_all", N, inf) / C.ring_scalars_per_link(
        "all_to_all", N, inf, bidirectional=True
    )
    assert in_range(a2a_speedup, 3.88, 4.12)  # ch3.q10e: 4 (large D)
    ratio_bi = C.ring_scalars_per_link("all_to_all", N, inf, bidirectional=True) / C.ring_scalars_per_link(
        "all_gather", N, inf, bidirectional=True
    )
    assert in_range(ratio_bi, 0.2425, 0.2575)  # ch3.q10f: 1/4
    # exact finite-D counts approach the limits
    a2a_bi_8 = C.ring_scalars_per_link("all_to_all", N, 8, bidirectional=True)
    assert a2a_bi_8 == pytest.approx(N**2 / 8)
    assert C.ring_scalars_per_link("all_reduce", N, Dv) == 2 * ag_uni


def test_all_to_all_quarter_of_all_gather_on_a_ring():
    # ch. 3 summary table: AllToAll = AllGather / 4 on a bidirectional ring
    V = 1e9
    for X in (4, 8, 16):
        assert C.all_to_all(V, X, "tpu-v5p").seconds == pytest.approx(C.all_gather(V, X, "tpu-v5p").seconds / 4)
    # N-D: V·max(A, B)/(4·N·W_bidi)
    c = C.all_to_all(V, (4, 8), "tpu-v5p")
    assert c.seconds == pytest.approx(V * 8 / (4 * 32 * 1.8e11))
    # without wraparound: twice the ring; one-way ring: V(X−1)/(2·X·W_one)
    assert C.all_to_all(V, 8, "tpu-v5p", wraparound=False).seconds == pytest.approx(
        2 * C.all_to_all(V, 8, "tpu-v5p").seconds
    )
    assert C.all_to_all(V, 8, "tpu-v5p", bidirectional=False).seconds == pytest.approx(V * 7 / (16 * 9e10))
    # each device sends ≈ V/4 on a bidirectional ring (ch. 3 derivation)
    assert C.all_to_all(V, 16, "tpu-v5p").bytes_per_device == pytest.approx(V / 4)


def test_summary_table_relations():
    V = 3e8
    ag = C.all_gather(V, 8, "tpu-v6e")
    assert ag.seconds == pytest.approx(V / 1.8e11)  # bytes / bidirectional ICI BW
    assert C.all_gather(V, (8, 8), "tpu-v6e").seconds == pytest.approx(V / (2 * 1.8e11))
    assert C.reduce_scatter(V, 8, "tpu-v6e").seconds == ag.seconds
    assert C.all_reduce(V, 8, "tpu-v6e").seconds == pytest.approx(2 * ag.seconds)
    # bandwidth-bound AllGather does not depend on the axis size (ch. 3, "What Have We Learned?")
    assert C.all_gather(V, 16, "tpu-v6e").seconds == pytest.approx(ag.seconds)
    # axes of size 1 take no part
    assert C.all_gather(V, (8, 1), "tpu-v6e").seconds == ag.seconds
    assert C.all_gather(V, 1, "tpu-v6e").seconds == 0


def test_ppermute_and_dispatch():
    p = C.ppermute(9e6, "tpu-v5p")
    assert p.seconds == pytest.approx(1e-4) and p.regime == "bandwidth"
    assert C.ppermute(100, "tpu-v5p", hops=3).seconds == pytest.approx(3e-6)
    assert C.collective("ppermute", 9e6, None, "tpu-v5p").seconds == p.seconds
    for name, fn in [
        ("AllGather", C.all_gather),
        ("all-gather", C.all_gather),
        ("psum", C.all_reduce),
        ("psum_scatter", C.reduce_scatter),
        ("all_to_all", C.all_to_all),
        ("reduce_scatter", C.reduce_scatter),
    ]:
        assert C.collective(name, 1e6, (4, 2), "tpu-v5e", wraparound=False) == fn(
            1e6, (4, 2), "tpu-v5e", wraparound=False
        )
    assert set(C.KINDS) == {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "ppermute"}


def test_slice_is_accepted_for_chip():
    assert C.all_gather(1e6, 4, make_slice("v5e", (4, 4))).chip == "tpu-v5e"


# --- errors ------------------------------------------------------------------------------------------


def test_clear_errors():
    with pytest.raises(ValueError, match="axis_sizes"):
        C.all_gather(1e6, 0, "tpu-v5e")
    with pytest.raises(ValueError, match="axis_sizes"):
        C.all_gather(1e6, (4, 0), "tpu-v5e")
    with pytest.raises(ValueError, match="one bool per axis"):
        C.all_gather(1e6, (4, 4), "tpu-v5e", wraparound=(True,))
    with pytest.raises(ValueError, match="n_bytes"):
        C.all_reduce(-1, 4, "tpu-v5e")
    with pytest.raises(ValueError, match="not a TPU"):
        C.all_gather(1e6, 8, "h100")
    with pytest.raises(UnknownNameError):
        C.all_gather(1e6, 8, "tpu-v99")
    with pytest.raises(ValueError, match="known kinds: all_gather, reduce_scatter"):
        C.collective("broadcast", 1e6, 4, "tpu-v5e")
    with pytest.raises(ValueError, match="axis_sizes is required"):
        C.collective("all_gather", 1e6, None, "tpu-v5e")
    with pytest.raises(ValueError, match="hops"):
        C.ppermute(1e6, "tpu-v5e", hops=-1)
    with pytest.raises(ValueError, match="D must be"):
        C.ring_scalars_per_link("all_gather", 8, 0)


# --- properties --------------------------------------------------------------------------------------

tpus = st.sampled_from(chip_names("tpu"))


@st.composite
def chip_axes(draw):
    """A TPU chip and axis sizes that fit it (≤ its torus dims of axes longer than 1, ≤ one pod of devices)."""
    from scalebook_utils.hardware import get_chip

    chip = draw(tpus)
    spec = get_chip(chip)
    axes = draw(st.lists(st.integers(1, 32), min_size=1, max_size=3))
    while sum(x > 1 for x in axes) > spec.ici_torus_dims or math.prod(axes) > spec.pod_chips:
        axes[axes.index(max(axes))] = 1  # shrink the longest axis until the shape fits
    return chip, tuple(axes)


nbytes = st.floats(0, 1e11, allow_nan=False)
kinds = st.sampled_from(["all_gather", "reduce_scatter", "all_reduce", "all_to_all"])


@given(V=nbytes, chip_and_axes=chip_axes(), data=st.data(), latency=st.booleans())
@settings(max_examples=200, deadline=None)
def test_reduce_scatter_plus_all_gather_is_all_reduce(V, chip_and_axes, data, latency):
    chip, axes = chip_and_axes
    wrap = data.draw(st.lists(st.booleans(), min_size=len(axes), max_size=len(axes)).map(tuple))
    rs = C.reduce_scatter(V, axes, chip, wrap, latency=latency)
    ag = C.all_gather(V, axes, chip, wrap, latency=latency)
    ar = C.all_reduce(V, axes, chip, wrap, latency=latency)
    assert rs.seconds + ag.seconds == pytest.approx(ar.seconds, rel=1e-12, abs=1e-18)
    assert rs.bytes_per_device + ag.bytes_per_device == pytest.approx(ar.bytes_per_device, rel=1e-12, abs=1e-9)


@given(V1=nbytes, V2=nbytes, chip_and_axes=chip_axes(), kind=kinds, wrap=st.booleans(), bidi=st.booleans())
@settings(max_examples=200, deadline=None)
def test_cost_is_monotone_in_bytes(V1, V2, chip_and_axes, kind, wrap, bidi):
    chip, axes = chip_and_axes
    lo, hi = sorted((V1, V2))
    a = C.collective(kind, lo, axes, chip, wraparound=wrap, bidirectional=bidi)
    b = C.collective(kind, hi, axes, chip, wraparound=wrap, bidirectional=bidi)
    assert a.seconds <= b.seconds * (1 + 1e-12)
    assert a.bandwidth_s <= b.bandwidth_s * (1 + 1e-12)


@given(V=nbytes, chip_and_axes=chip_axes(), kind=kinds, data=st.data(), latency=st.booleans())
@settings(max_examples=200, deadline=None)
def test_no_wraparound_is_never_cheaper(V, chip_and_axes, kind, data, latency):
    chip, axes = chip_and_axes
    wrap = data.draw(st.lists(st.booleans(), min_size=len(axes), max_size=len(axes)).map(tuple))
    ring = C.collective(kind, V, axes, chip, wraparound=True, latency=latency)
    mixed = C.collective(kind, V, axes, chip, wraparound=wrap, latency=latency)
    line = C.collective(kind, V, axes, chip, wraparound=False, latency=latency)
    assert ring.seconds <= mixed.seconds * (1 + 1e-12) + 1e-18
    assert mixed.seconds <= line.seconds * (1 + 1e-12) + 1e-18
    oneway = C.collective(kind, V, axes, chip, wraparound=True, bidirectional=False, latency=latency)
    assert ring.seconds <= oneway.seconds * (1 + 1e-12) + 1e-18


@given(V=st.floats(1, 1e11), chip_and_axes=chip_axes(), kind=kinds)
@settings(max_examples=100, deadline=None)
def test_regime_and_terms_are_consistent(V, chip_and_axes, kind):
    chip, axes = chip_and_axes
    c = C.collective(kind, V, axes, chip)
    assert c.seconds == max(c.bandwidth_s, c.latency_s)
    assert c.regime == ("latency" if c.latency_s > c.bandwidth_s else "bandwidth")
    assert c.bytes_per_device <= 2 * V


def test_axis_note_says_which_axes_are_real_by_ch2s_rule():
    """An axis longer than the pod's longest side does not exist; a wraparound ch. 2's rule does not give is a
    "what if"; an axis the rule builds has no note (the collective-cost explorer's readout prints it)."""
    assert C.axis_note("tpu-v5e", 16, True) == ""  # the v5e pod side wraps
    assert C.axis_note("tpu-v5e", 4, False) == ""  # a v5e axis under 16 is a line
    assert C.axis_note("tpu-v5e", 4, True) == "a tpu-v5e axis of 4 has no wraparound by ch. 2's rule"
    assert C.axis_note("tpu-v5e", 16, False) == "a tpu-v5e axis of 16 has wraparound by ch. 2's rule"
    assert C.axis_note("tpu-v5e", 64, True) == "no tpu-v5e axis has 64 chips (pod 16×16)"
    # 3-D chips: an axis that is a multiple of 4 wraps in whole 4×4×4 cubes (the v5p cube's wrapped axes of
    # 4 and 16 are real) and not in a thinner slice (4×2×1); any other axis never wraps
    assert C.axis_note("tpu-v5p", 4, True) == C.axis_note("tpu-v5p", 16, True) == ""
    assert C.axis_note("tpu-v5p", 4, False) == C.axis_note("tpu-v5p", 6, False) == ""
    assert C.axis_note("tpu-v5p", 6, True) == "a tpu-v5p axis of 6 has no wraparound by ch. 2's rule"


def test_axes_by_link_bandwidth_groups_real_axes_by_link():
    """ch. 3's figure table: ch. 2's axes per one-way link bandwidth, wraparound by ch. 2's rule, one per size."""
    g45, g90 = C.axes_by_link_bandwidth()
    assert (g45.link_bytes_per_s, g45.chips) == (45e9, ("tpu-v5e", "tpu-v4p"))
    assert (g90.link_bytes_per_s, g90.chips) == (90e9, ("tpu-v6e", "tpu-v5p"))
    assert g45.axes == (
        (4, False, "v5e 4×4: no wrap below 16"),
        (4, True, "v4p 4×4×4 cube"),
        (16, True, "v5e pod side; v4p 16×16×16"),
    )
    assert [a[:2] for a in g90.axes] == [(4, False), (4, True), (16, True), (28, True)]
    assert g90.axes[-1][2] == "v5p pod's long axis"
    for g in (g45, g90):  # every axis is one the cost model calls real on some chip of its group
        assert all(any(C.axis_note(c, n, w) == "" for c in g.chips) for n, w, _ in g.axes)
    (v3,) = C.axes_by_link_bandwidth(("tpu-v3",))  # a 32×32 pod: its 4×4 has no wrap below 32
    assert v3.axes == ((4, False, "v3 4×4: no wrap below 32"), (32, True, "v3 pod side"))
    (g,) = C.axes_by_link_bandwidth(("tpu7x",))  # no 16×16×16 in a 4×4×576 pod
    assert [a[0] for a in g.axes] == [4, 576]
    with pytest.raises(ValueError, match="not a TPU"):
        C.axes_by_link_bandwidth(("h100",))
