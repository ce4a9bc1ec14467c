"""engine.simulate_batching: hand-worked schedules for static and continuous batching (book ch. 7 §3.9)."""

import pytest

from scalebook_utils import engine


def test_continuous_fills_freed_slots():
    # 2 slots; lengths 4, 1, 1, 1 all at step 0. Continuous: slot 2 serves the three short ones in steps 1-3.
    run = engine.simulate_batching([0, 0, 0, 0], [4, 1, 1, 1], 2, "continuous")
    assert run.finish == (4, 1, 2, 3) and run.steps == 4 and run.tokens == 7
    assert run.utilisation == pytest.approx(7 / 8)


def test_static_waits_for_the_longest():
    # Static: batch {4, 1} runs 4 steps, then {1, 1} runs 1 step.
    run = engine.simulate_batching([0, 0, 0, 0], [4, 1, 1, 1], 2, "static")
    assert run.finish == (4, 1, 5, 5) and run.steps == 5
    assert run.tokens_per_step == pytest.approx(7 / 5)


def test_static_waits_for_a_full_batch_and_idles():
    run = engine.simulate_batching([0, 3], [1, 1], 2, "static")
    assert run.finish == (4, 4) and run.steps == 4
    cont = engine.simulate_batching([0, 3], [1, 1], 2, "continuous")
    assert cont.finish == (1, 4)


@pytest.mark.parametrize("bad", [dict(slots=0), dict(policy="fifo"), dict(lengths=[0, 1])])
def test_bad_input(bad):
    kw = dict(arrivals=[0, 0], lengths=[1, 1], slots=1, policy="static") | bad
    with pytest.raises(ValueError):
        engine.simulate_batching(**kw)
