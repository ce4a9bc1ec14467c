import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scalebook_utils.hardware import CHIPS, get_chip

from scalebook_utils import roofline as rl

dims = st.integers(min_value=1, max_value=1 << 16)
modes = st.sampled_from(["bf16", "int8", "int8-weights"])
tpus = st.sampled_from([n for n in CHIPS if n.startswith("tpu")])


def test_basic_times_and_bounds():
    assert rl.t_math(1e12, 1e14) == pytest.approx(0.01)
    assert rl.t_comms(8.2e11, 8.2e11) == 1.0
    assert rl.lower_bound(1, 2) == 2 and rl.upper_bound(1, 2) == 3
    assert rl.intensity(100, 4) == 25


@given(B=dims, D=dims, F=dims, chip=tpus, mode=modes)
@settings(max_examples=200, deadline=None)
def test_roofline_bounds(B, D, F, chip, mode):
    r = rl.matmul_roofline(B, D, F, chip, mode)
    assert r.t_lower_s <= r.t_upper_s <= 2 * r.t_lower_s * (1 + 1e-12)
    assert r.achievable_flops_per_s <= r.peak_flops_per_s * (1 + 1e-12)
    assert r.compute_bound == (
        r.intensity >= get_chip(chip).peak_flops(rl.MATMUL_MODES[mode][2]) / get_chip(chip).hbm_bandwidth_bytes_per_s
    )


@given(D=dims, F=dims, chip=tpus, mode=modes)
@settings(max_examples=100, deadline=None)
def test_achievable_flops_monotone_in_B_and_capped(D, F, chip, mode):
    B = np.arange(1, 2049)
    curve = rl.achievable_flops_curve(B, D, F, chip, mode)
    peak = get_chip(chip).peak_flops(rl.MATMUL_MODES[mode][2])
    assert np.all(curve <= peak * (1 + 1e-12))
    assert np.all(np.diff(curve) >= -1e-9 * peak)


@given(D=st.integers(2048, 1 << 16), F=st.integers(2048, 1 << 16), mode=modes)
@settings(max_examples=100, deadline=None)
def test_crossover_is_where_math_equals_comms(D, F, mode):
    Bx = rl.crossover_batch(D, F, "tpu-v5e", mode)
    r = rl.matmul_roofline(Bx, D, F, "tpu-v5e", mode)
    assert r.t_math_s == pytest.approx(r.t_comms_s, rel=1e-9)
    # and the exact crossover is never below the B ≪ D, F estimate
    assert Bx >= rl.critical_batch("tpu-v5e", mode) * (1 - 1e-12)


def test_crossover_is_infinite_for_tiny_matmuls():
    assert rl.crossover_batch(128, 128, "tpu-v5e", "bf16") == float("inf")


@given(B=dims)
def test_intensity_approaches_B_for_bf16(B):
    assert rl.matmul_intensity(B, 1e9, 1e9, "bf16") == pytest.approx(B, rel=1e-3)


def test_attainable_flops_per_s_is_the_roofline():
    i = np.array([0.5, 240.0, 1e4])
    out = rl.attainable_flops_per_s(i, 1.97e14, 8.2e11)
    assert out[0] == pytest.approx(0.5 * 8.2e11) and out[2] == 1.97e14
    assert rl.attainable_flops_per_s(1.0, 10.0, 1.0) == 1.0


@given(D=st.floats(1, 1e6), W=st.floats(1e9, 1e12))
def test_two_chip_threshold_is_independent_of_B(D, W):
    a = rl.two_chip_roofline(1, D, 1024, 1.97e14, W)
    b = rl.two_chip_roofline(4096, D, 1024, 1.97e14, W)
    assert a.compute_bound == b.compute_bound == (D >= a.d_threshold)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(B=0, D=8, F=8), "B"),
        (dict(B=8, D=-1, F=8), "D"),
        (dict(B=8, D=8, F=0), "F"),
    ],
)
def test_bad_dimensions_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must be a positive number"):
        rl.matmul_roofline(**kwargs)
    with pytest.raises(ValueError, match=f"{name}"):
        rl.matmul_intensity(**kwargs)


def test_bad_mode_chip_and_dtype():
    with pytest.raises(ValueError, match="unknown matmul mode 'fp64'.*int8-weights"):
        rl.matmul_roofline(8, 8, 8, "tpu-v5e", "fp64")
    with pytest.raises(KeyError, match="tpu-v9"):
        rl.critical_batch("tpu-v9")
    with pytest.raises(ValueError, match="v100 has no bf16"):
        rl.matmul_roofline(8, 8, 8, "v100", "bf16")
    with pytest.raises(ValueError, match="B must contain only positive"):
        rl.achievable_flops_curve(np.array([1, 0]), 8, 8)


def test_exact_and_approximate_bytes():
    assert rl.matmul_bytes(4, 10, 20, "bf16") == 2 * 4 * 10 + 2 * 10 * 20 + 2 * 4 * 20
    assert rl.matmul_bytes(4, 10, 20, "int8-weights") == 2 * 4 * 10 + 10 * 20 + 2 * 4 * 20
    assert rl.matmul_bytes(4, 10, 20, "int8-weights", exact=False) == 200


def test_tile_intensity_and_dot_product():
    assert rl.tile_intensity(256, 256) == 128
    assert rl.dot_product_intensity(1) == pytest.approx(1 / 6)
    assert rl.dot_product_intensity_limit("fp32") == 0.25
    with pytest.raises(ValueError, match="bm"):
        rl.tile_intensity(0, 4)


# --- book ch. 9's worked example: the mock Transformer profile on a TPU v2-8 ----------------------------


def test_mock_profile_roofline_times():
    # ch. 9: 2·32·1024·8192·32768 FLOPs over 8 cores at 23e12 bf16 FLOPs/s each = 95.6 ms (measured 96 ms)
    assert rl.mock_ffw_time() == pytest.approx(2 * 32 * 1024 * 8192 * 32768 / (8 * 23e12))
    assert rl.mock_ffw_time() == pytest.approx(0.0956, rel=1e-3)
    assert rl.mock_ffw_time() / rl.MEASURED_FFW_S == pytest.approx(0.996, abs=1e-3)
    # the ReduceScatter moves one data shard bf16[32/4, 1024, 8192] = 128 MiB at 1.2e11 B/s: 1.12 ms (measured 1.13)
    assert rl.mock_reduce_scatter_bytes() == 8 * 1024 * 8192 * 2 == 128 * 2**20
    assert rl.mock_reduce_scatter_time() == pytest.approx(1.118e-3, rel=1e-3)
    assert rl.mock_reduce_scatter_time() / rl.MEASURED_REDUCE_SCATTER_S == pytest.approx(0.99, abs=0.005)
    # the Q projection: N·H = 32·256 = 8192 = F/4, so a quarter of the FFW matmul (23.9 ms)
    assert rl.mock_q_projection_time() == pytest.approx(rl.mock_ffw_time() / 4)


def test_mock_profile_is_what_the_registry_expects():
    from scalebook_utils.questions.registry import expected

    assert expected("ch9.e1") == rl.mock_ffw_time()
    assert expected("ch9.e2") == rl.mock_reduce_scatter_time()
    assert expected("ch9.iq1") == rl.mock_q_projection_time()


def test_has_matmul_peak_follows_the_modes_compute_dtype():
    """int8-weights computes in bf16 (ch1.q2), so a chip's bf16 peak decides it; a v100 has no bf16 peak."""
    assert rl.compute_dtype("int8-weights") == "bf16"
    assert rl.has_matmul_peak("h100", "bf16") and rl.has_matmul_peak("tpu-v5e", "int8-weights")
    assert not rl.has_matmul_peak("v100", "bf16") and not rl.has_matmul_peak("v100", "int8-weights")
    with pytest.raises(ValueError, match="unknown matmul mode 'fp4'"):
        rl.has_matmul_peak("h100", "fp4")
