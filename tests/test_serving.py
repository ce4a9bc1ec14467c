"""The serving planner and the latency–throughput frontier (scalebook_utils.serving; book ch. 7–8)."""

import math

import pytest
from pytest import approx

from scalebook_utils import inference as I
from scalebook_utils import serving as S

V5E = "tpu-v5e"
L70 = I.served_model("llama3-70b", params=70e9)  # ch. 8's "70e9 parameters"


# --- slices and grids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, shape", [(1, (1,)), (4, (2, 2)), (8, (4, 2)), (16, (4, 4)), (32, (4, 8)), (128, (8, 16)), (12, (12,))]
)
def test_slice_shape_v5e(n, shape):
    assert S.slice_shape(V5E, n) == shape


def test_slice_shape_3d_torus():
    assert S.slice_shape("tpu-v5p", 64) == (4, 4, 4)
    assert S.slice_shape("tpu-v5p", 128) == (8, 4, 4)


def test_pow2_slices_stop_at_the_pod():
    assert S.pow2_slices(V5E, 5) == [8, 16, 32, 64, 128, 256]
    assert S.pow2_slices(V5E) == [2**k for k in range(9)]


@pytest.mark.parametrize("B_max", [1, 2, 7, 138, 1000])
def test_batch_grid_covers_1_to_max(B_max):
    g = S.batch_grid(B_max)
    assert g[0] == 1 and g[-1] == B_max and g == sorted(set(g))
    assert all(b2 / b1 <= 2 for b1, b2 in zip(g, g[1:]))  # never skips a doubling


# --- one slice ---------------------------------------------------------------------------------------------------


def test_plan_matches_the_cost_model_point_by_point():
    plan = S.plan_serving(L70, V5E, "4x4", "int8-weights", 8192)
    assert plan.n_chips == 16 and plan.shape == (4, 4)
    assert plan.B_max == I.max_batch(L70, 8192, V5E, 16, "int8-weights")
    for pt in plan.points:
        ref = I.decode_step(L70, pt.B, 8192, V5E, 16, "int8-weights", shape=(4, 4))
        assert pt.latency == approx(ref.step_time)
        assert pt.tokens_per_s_per_chip == approx(pt.B / (ref.step_time * 16))


def test_plan_book_ch8_int8_on_4x2_batch_32():
    # ch. 8 "Thinking about throughput": B = 32, 8k context, int8 params and KV on 4x2 → ≈ 235 tokens/s/chip
    # (PROBLEMS.md ch8.iq3b accepts [227.9, 242.1]); at B = 32 the ICI term is hidden (memory-bound)
    plan = S.plan_serving(L70, V5E, "4x2", "int8-weights", 8192, batches=[32])
    (pt,) = plan.points
    assert 227.9 <= pt.tokens_per_s_per_chip <= 242.1
    assert pt.bottleneck in ("weights", "kv")


def test_latency_rises_and_throughput_never_falls_with_batch():
    plan = S.plan_serving(L70, V5E, 16, "int8-weights", 8192)
    lat = [p.latency for p in plan.points]
    thr = [p.tokens_per_s_per_chip for p in plan.points]
    assert lat == sorted(lat) and all(b >= a * (1 - 1e-12) for a, b in zip(thr, thr[1:]))
    assert plan.min_latency.B == 1
    # the flat region: below B_crit the parameter matmuls are memory-bound and B = 1 costs the weight load
    assert plan.min_latency.step.t_hbm_weights > plan.min_latency.step.t_math
    assert plan.min_latency.latency >= 70e9 / (16 * 8.2e11)


def test_cost_per_million_tokens_uses_the_hourly_price():
    pt = S.plan_serving(L70, V5E, 16, "int8-weights", 8192, batches=[64]).points[0]
    expect = 1.2 / 3600 / pt.tokens_per_s_per_chip * 1e6  # v5e: $1.20 per chip-hour (ch. 8 cost table)
    assert pt.cost_per_million_tokens == approx(expect)
    pt2 = S.plan_serving(L70, V5E, 16, "int8-weights", 8192, batches=[64], price_per_hour_usd=2.4).points[0]
    assert pt2.cost_per_million_tokens == approx(2 * expect)


def test_best_under_picks_the_fastest_throughput_within_the_cap():
    plan = S.plan_serving(L70, V5E, 16, "int8-weights", 8192)
    best = plan.best_under(0.012)
    assert best.latency <= 0.012
    assert all(p.tokens_per_s_per_chip <= best.tokens_per_s_per_chip for p in plan.points if p.latency <= 0.012)
    assert plan.best_under(1e-4) is None


def test_default_slice_is_the_smallest_that_fits():
    plan = S.plan_serving(L70, V5E, None, "bf16", 8192)
    assert plan.n_chips == 16  # 140 GB of bf16 weights: 9 chips → the 4x4 (ch. 8)
    assert S.plan_serving(L70, V5E, None, "int4-weights", 8192).n_chips == 4


def test_explain_names_the_range_and_both_ends():
    text = S.plan_serving(L70, V5E, "4x4", "int8-weights", 8192).explain()
    assert "4x4" in text and "batches 1 … 138" in text and "lowest latency" in text and "most throughput" in text


# --- the frontier -------------------------------------------------------------------------------------------------


def test_pareto_points_are_not_dominated():
    f = S.frontier(L70, V5E, "int8-weights", 8192)
    pts = f.points
    assert len(pts) > len(f.pareto) > 1
    for p in f.pareto:
        assert not any(q.latency < p.latency and q.tokens_per_s_per_chip > p.tokens_per_s_per_chip for q in pts)
    lat = [p.latency for p in f.pareto]
    thr = [p.tokens_per_s_per_chip for p in f.pareto]
    assert lat == sorted(lat) and thr == sorted(thr)


def test_frontier_slices_start_at_the_smallest_fit():
    f = S.frontier(L70, V5E, "int8-weights", 8192)
    assert [p.n_chips for p in f.plans] == [8, 16, 32, 64, 128, 256]


def test_frontier_best_under_a_latency_cap_405b():
    # ch. 8 worked problem 3: LLaMA 3-405B, int8 weights, bf16 FLOPs, ≤ 15 ms per token
    f = S.frontier("llama3-405b", V5E, "int8-weights", 8192)
    best = f.best_under(15e-3)
    assert best is not None and best.latency <= 15e-3
    assert best.n_chips * 16e9 > 405e9  # the weights fit
    assert all(p.tokens_per_s_per_chip <= best.tokens_per_s_per_chip for p in f.points if p.latency <= 15e-3)


def test_frontier_smallest_slice_under_a_latency_cap_405b():
    # ch. 8 worked problem 3: 406 GB of int8 weights read in ≤ 15 ms need N ≥ 33 chips → the 64-chip 8x8
    f = S.frontier("llama3-405b", V5E, "int8-weights", 8192)
    plan = f.smallest_under(15e-3)
    assert plan.n_chips == 64 and plan.min_latency.latency <= 15e-3
    assert all(p.min_latency.latency > 15e-3 for p in f.plans if p.n_chips < 64)
    assert f.smallest_under(1e-6) is None


def test_int8_weights_improve_the_frontier_at_equal_latency():
    # ch. 7 latency–cost figure: quantized weights move the frontier up at a given latency
    bf = S.frontier(L70, V5E, "bf16", 8192).best_under(0.02)
    i8 = S.frontier(L70, V5E, "int8-weights", 8192).best_under(0.02)
    assert i8.tokens_per_s_per_chip > bf.tokens_per_s_per_chip


def test_flat_throughput_plateau_keeps_only_its_fastest_point():
    # past B_crit with the KV term, throughput is flat in B: equal up to rounding must not stay on the front
    f = S.frontier("llama3-405b", V5E, "int8-weights", 8192)
    thr = [p.tokens_per_s_per_chip for p in f.pareto]
    assert all(b > a * (1 + 1e-9) for a, b in zip(thr, thr[1:]))


def test_table_lists_the_pareto_points():
    f = S.frontier(L70, V5E, "int8-weights", 8192)
    assert len(f.table().splitlines()) == len(f.pareto) + 1


# --- the book's roofline generator ---------------------------------------------------------------------------------


def test_book_curve_max_batch_bug_is_about_4x():
    # ch. 8's code returns an index into range(1, 1024, 4) as a batch count: ≈ 4× too small
    fixed, book = S.book_roofline_curve(), S.book_roofline_curve(book_compat=True)
    assert (
        fixed.max_batch
        == I.max_batch(I.served_model(L70, kv_elements_per_token=2 * 128 * 8 * 80), 8192, V5E, 16, "int8-weights")
        == 138
    )
    assert book.max_batch == 34
    assert fixed.max_batch / book.max_batch == approx(4, rel=0.05)
    # latency at B = 1 is the 70 GB weight load over 16 chips, plus one sequence's KV: ≈ 5.4 ms (book: "5.5 ms")
    assert fixed.latency[0] == approx(70e9 / (16 * 8.2e11) + 8192 * 163840 / (16 * 8.2e11))
    assert fixed.latency[0] == approx(5.5e-3, rel=0.03)


def test_book_curve_agrees_with_decode_step_without_ici():
    curve = S.book_roofline_curve()
    m = I.served_model(L70, kv_elements_per_token=2 * 128 * 8 * 80)
    for b in (1, 32, 120, 138):
        ref = I.decode_step(m, b, 8192, V5E, 16, "int8-weights")
        model = ref.t_hbm_kv + max(ref.t_math, ref.t_hbm_weights)
        assert curve.latency[b - 1] == approx(model)


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(slice_=2), "does not fit"),  # bf16 70B on 2 chips
        (dict(slice_=512), "at most 256 chips"),
        (dict(slice_="4x4", batches=[0]), "batch must be a finite number ≥ 1"),
        (dict(slice_="4x4", batches=[10_000]), "does not fit"),
        (dict(slice_="4x4", S=0), "S (context) must be"),
        (dict(slice_="4x4", S=200_000, max_context=131072), "longer than the model's maximum context"),
        (dict(slice_="4y4"), "not of the form"),
        (dict(slice_="3x3x3"), "2D torus"),
        (dict(slice_="32x8"), "does not fit in a tpu-v5e pod"),
        (dict(slice_="4x4", precision="int3"), "allowed precisions"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, words):
    kw = dict(model=L70, chip=V5E, precision="bf16", S=8192) | kwargs
    with pytest.raises((ValueError, KeyError)) as e:
        S.plan_serving(kw.pop("model"), kw.pop("chip"), kw.pop("slice_"), kw.pop("precision"), kw.pop("S"), **kw)
    assert words in str(e.value)


def test_unknown_chip_and_model_names():
    with pytest.raises(Exception, match="tpu-v9"):
        S.plan_serving(L70, "tpu-v9", 16)
    with pytest.raises(Exception, match="no-such-model"):
        S.frontier("no-such-model", V5E)


def test_context_too_long_for_any_pod():
    with pytest.raises(ValueError):
        S.frontier(L70, V5E, "bf16", S=10**9)


def test_nonfinite_latency_cap():
    plan = S.plan_serving(L70, V5E, 16, "int8-weights", 8192)
    with pytest.raises(ValueError):
        plan.best_under(0)
    assert math.isfinite(plan.max_throughput.tokens_per_s_per_chip)


def test_ties_on_a_throughput_plateau_go_to_the_lower_latency():
    f = S.frontier(L70, V5E, "int8-weights", 8192)
    best = f.best_under(10e-3)
    same = [
        p for p in f.points if p.latency <= 10e-3 and p.tokens_per_s_per_chip >= best.tokens_per_s_per_chip * (1 - 1e-9)
    ]
    assert best.latency == min(p.latency for p in same)


def test_gpu_slices_stop_at_the_node():
    assert S.pow2_slices("gb200")[-1] == 64 and S.pow2_slices("h100")[-1] == 8
