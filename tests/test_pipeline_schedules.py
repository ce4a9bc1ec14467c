"""pipeline_schedules: the closed-form bubbles agree with a simulation of each schedule; 1F1B holds fewer
activations than GPipe; bad input is named."""

import pytest
from pytest import approx

from scalebook_utils import pipeline_schedules as ps


@pytest.mark.parametrize("p,m", [(2, 2), (4, 4), (4, 8), (4, 12), (8, 16), (3, 9)])
@pytest.mark.parametrize("kind,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 3)])
def test_simulated_bubble_is_the_formula(kind, v, p, m):
    t = ps.simulate(kind, p, m, v)
    assert t.bubble == approx(ps.bubble(kind, p, m, v))
    # every device runs each of its m·v forwards and backwards exactly once
    for row in t.grid:
        ops = [op for op in row if op is not None]
        assert len(ops) == 2 * m * t.v == len(set(ops))


def test_formulas_by_hand():
    assert ps.gpipe_bubble(4, 8) == approx(3 / 11)
    assert ps.one_f_one_b_bubble(4, 8) == ps.gpipe_bubble(4, 8)
    assert ps.interleaved_bubble(4, 8, 2) == approx(3 / 19)
    assert ps.interleaved_bubble(4, 8, 1) == ps.gpipe_bubble(4, 8)


@pytest.mark.parametrize("p,m", [(4, 8), (8, 32)])
def test_1f1b_holds_fewer_activations_than_gpipe(p, m):
    assert ps.simulate("gpipe", p, m).peak_activations(0) == m
    assert ps.simulate("1f1b", p, m).peak_activations(0) == min(p, m)
    # interleaving keeps 1F1B's bound up to the extra warm-up chunks: ((p−1)·2 + (v−1)·p + 1)/v
    assert ps.simulate("interleaved", p, m, 2).peak_activations(0) == approx(((p - 1) * 2 + p + 1) / 2)


def test_dependencies_hold_in_the_timeline():
    t = ps.simulate("interleaved", 4, 8, 2)
    when = {(op.kind, op.mb, op.chunk * t.p + d): s for d, row in enumerate(t.grid) for s, op in enumerate(row) if op}
    S = t.p * t.v
    for (k, mb, s), time in when.items():
        if k == "F" and s > 0:
            assert when[("F", mb, s - 1)] < time
        if k == "B":
            assert when[("B", mb, s + 1) if s < S - 1 else ("F", mb, s)] < time


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="multiple of p"):
        ps.simulate("interleaved", 4, 6, 2)
    with pytest.raises(ValueError, match="unknown schedule"):
        ps.bubble("zero-bubble", 4, 8)
    with pytest.raises(ValueError, match="m \\(microbatches\\) must be an integer ≥ 1, got 0"):
        ps.gpipe_bubble(4, 0)


# --- pipelines as they are run (issue 17) ------------------------------------------------------------------


@pytest.mark.parametrize("p,m", [(4, 8), (8, 16), (4, 4), (3, 9)])
@pytest.mark.parametrize("kind,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 3)])
def test_in_flight_is_the_simulated_peak_on_every_device(kind, v, p, m):
    t = ps.simulate(kind, p, m, v)
    assert ps.in_flight(kind, p, m, v, None) == [approx(t.peak_activations(d)) for d in range(p)]


@pytest.mark.parametrize(
    "durations", [(1, 2, 2, 1), (2, 3, 3, 2), (1, 1, 1, 3), (3, 1, 1, 1), (1, 3, 1, 2), (1, 1, 1, 1)]
)
@pytest.mark.parametrize("kind,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_step_time_of_unequal_stages_against_a_run(kind, v, durations):
    """GPipe: exact; 1F1B and interleaved: a lower bound (a roofline's side), exact for equal stages and within 5%."""
    p, m = 4, 8
    dur = [durations[s % p] for s in range(p * v)]
    run = ps.simulate(kind, p, m, v, durations=dur).makespan
    work = [2 * sum(dur[c * p + d] for c in range(v)) for d in range(p)]  # forward + backward of each chunk
    formula = ps.step_time(kind, work, m, v)
    assert formula <= run + 1e-9 and formula == approx(run, rel=0.05)
    if kind == "gpipe" or len(set(durations)) == 1:
        assert formula == run


def test_stage_splits():
    assert ps.balanced_stage_layers(126, 16) == (7,) + (8,) * 14 + (7,)
    assert ps.balanced_stage_layers(8, 4) == (2, 2, 2, 2)
    assert ps.balanced_stage_layers(126, 128) == (0,) + (1,) * 126 + (0,)  # Llama 3: embedding-only first chunk
    assert ps.split_stages(8, 2, 2, [4, 4]) == ((2, 2, 2, 2), [])  # per device, split into v chunks
    chunks, why = ps.split_stages(8, 2, 1, [3, 4])
    assert chunks is None and "sum to 7 layers" in why[0]
    assert "would hold no layer" in ps.split_stages(4, 2, 2, [0, 2, 0, 2])[1][0]
    with pytest.raises(ValueError, match="durations must be 4 positive integers"):
        ps.simulate("1f1b", 4, 8, durations=(1, 2))
