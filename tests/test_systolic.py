"""The systolic-array simulator (book ch. 2, Appendix B): right product, right cycle count, visible fill and drain."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalebook_utils import systolic

dims = st.integers(min_value=1, max_value=7)


@settings(max_examples=60, deadline=None)
@given(M=dims, K=dims, N=dims, seed=st.integers(0, 2**32 - 1), load=st.booleans())
def test_result_equals_numpy_matmul(M, K, N, seed, load):
    rng = np.random.default_rng(seed)
    A = rng.integers(-9, 10, size=(M, K))
    B = rng.integers(-9, 10, size=(K, N))
    run = systolic.simulate(A, B, load_weights=load)
    assert np.array_equal(run.result, A @ B)  # small integers: exact in float64
    assert run.shape == (M, K, N)
    assert run.cycles == systolic.cycle_count(M, K, N, load) == len(run.snapshots)


@settings(max_examples=25, deadline=None)
@given(M=dims, K=dims, N=dims, seed=st.integers(0, 2**32 - 1))
def test_float_result_close_to_numpy(M, K, N, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    np.testing.assert_allclose(systolic.simulate(A, B).result, A @ B, rtol=1e-12, atol=1e-12)


def test_one_by_one():
    run = systolic.simulate([[3.0]], [[4.0]])
    assert run.result.tolist() == [[12.0]]
    assert run.cycles == 2 and run.load_cycles == 1 and run.compute_cycles == 1
    assert run.utilisation.tolist() == [0.0, 1.0]


def test_book_sized_example_2x3_at_3x3():
    A = np.arange(1, 7).reshape(2, 3)
    B = np.arange(9).reshape(3, 3)
    run = systolic.simulate(A, B)
    assert np.array_equal(run.result, A @ B)
    assert run.load_cycles == 3 and run.compute_cycles == 2 + 3 + 3 - 2 == 6
    # first output leaves the bottom of column 0 after K compute cycles
    assert run.first_output_cycle() == run.load_cycles + 3 - 1


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (2, 3, 3), (8, 4, 4), (5, 2, 7), (16, 3, 2)])
def test_cycle_count_formula(M, K, N):
    assert systolic.cycle_count(M, K, N) == K + M + K + N - 2
    assert systolic.cycle_count(M, K, N, load_weights=False) == M + K + N - 2
    run = systolic.simulate(np.ones((M, K)), np.ones((K, N)))
    assert run.cycles == systolic.cycle_count(M, K, N)


@pytest.mark.parametrize("M,K,N", [(2, 3, 3), (12, 4, 4), (3, 5, 2), (20, 3, 3)])
def test_fill_and_drain_are_visible(M, K, N):
    run = systolic.simulate(np.ones((M, K)), np.ones((K, N)))
    u = run.utilisation
    assert (u[: run.load_cycles] == 0).all()  # weights loading: no multiply-adds
    c = u[run.load_cycles :]
    peak = int(np.argmax(c))
    assert c[0] < c.max() and c[-1] < c.max() or c.size == 1
    assert (np.diff(c[: peak + 1]) >= 0).all()  # fill: rises
    assert (np.diff(c[peak:]) <= 0).all() or _plateau_then_fall(c[peak:])  # drain: falls
    assert c[0] == pytest.approx(1 / (K * N)) and c[-1] == pytest.approx(1 / (K * N))
    np.testing.assert_allclose(c, systolic.utilisation_curve(M, K, N))
    assert c.sum() * K * N == pytest.approx(M * K * N)  # every multiply-add happens exactly once
    assert run.mean_compute_utilisation == pytest.approx(c.mean())


def _plateau_then_fall(c):
    return (np.diff(c) <= 1e-12).all()


def test_full_utilisation_only_with_a_long_enough_batch():
    K = N = 4
    assert systolic.utilisation_curve(K + N - 1, K, N).max() == 1.0
    assert systolic.utilisation_curve(K + N - 2, K, N).max() < 1.0
    # a long stream amortises the bubble: mean utilisation → 1
    assert systolic.simulate(np.ones((60, K)), np.ones((K, N))).mean_compute_utilisation > 0.9


def test_snapshots_show_the_pipeline():
    A = np.arange(1, 7).reshape(2, 3)
    B = np.arange(9).reshape(3, 3)
    run = systolic.simulate(A, B)
    s_load = run.snapshots[0]
    assert s_load.phase == "load" and np.isnan(s_load.weights[1:]).all() and (s_load.weights[0] == B[2]).all()
    first = run.snapshots[run.load_cycles]
    assert first.phase == "compute" and first.n_active == 1 and first.active[0, 0]
    assert first.activation[0, 0] == A[0, 0] and first.psum[0, 0] == A[0, 0] * B[0, 0]
    assert np.isnan(first.feed[0, 0]) and first.feed[0, 1] == A[1, 0]  # A[0,0] has left the feeder
    # the skew: at compute cycle t cell (k, n) works on row m = t - k - n
    for s in run.snapshots[run.load_cycles :]:
        t = s.cycle - run.load_cycles
        for k, n in zip(*np.nonzero(s.active)):
            assert s.act_row[k, n] == t - k - n
    last = run.snapshots[-1]
    assert np.array_equal(last.outputs, A @ B) and np.isnan(last.feed).all()
    assert np.isnan(run.snapshots[run.load_cycles + 1].outputs).all()  # nothing out before K compute cycles


@pytest.mark.parametrize(
    "A,B,err,fragment",
    [
        (np.ones((2, 3)), np.ones((4, 2)), ValueError, "do not multiply"),
        (np.ones(3), np.ones((3, 2)), ValueError, "2-D"),
        (np.ones((2, 3, 1)), np.ones((3, 2)), ValueError, "2-D"),
        (np.ones((0, 3)), np.ones((3, 2)), ValueError, "empty"),
        (np.ones((2, 65)), np.ones((65, 2)), ValueError, "up to 64"),
        (np.array([["a", "b"]]), np.ones((2, 2)), TypeError, "numeric"),
        (np.array([[np.nan]]), np.ones((1, 1)), ValueError, "NaN"),
    ],
)
def test_bad_inputs_get_clear_errors(A, B, err, fragment):
    with pytest.raises(err, match=fragment):
        systolic.simulate(A, B)


@pytest.mark.parametrize("args", [(0, 1, 1), (1, -1, 1), (1, 1, 1.5)])
def test_cycle_count_rejects_bad_sizes(args):
    with pytest.raises(ValueError, match="positive integer"):
        systolic.cycle_count(*args)
