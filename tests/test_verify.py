"""The one-line section checks used by the notebooks (scalebook_utils.verify)."""

import pytest
from scalebook_utils.verify import Checks


def test_all_pass_is_one_line_with_the_count():
    ok = Checks('ch. 5, "Data parallelism"')
    assert ok.close("alpha", 2551.0, 2550, rtol=0.01)
    assert ok.equal("collectives", {"all-reduce": 1}, {"all-reduce": 1})
    assert ok.true("loss", 1e-7 < 1e-5)
    assert repr(ok) == '✓ 3 of 3 agree (ch. 5, "Data parallelism")'
    assert ok.ok


def test_a_failure_names_what_failed_and_both_values():
    ok = Checks("book")
    ok.close("alpha", 2400, 2550, rtol=0.01)
    ok.equal("kinds", ["all-gather"], ["reduce-scatter"])
    ok.true("fits", False, "90 GB > 80 GB")
    line = ok.line()
    assert line.startswith("✗ 0 of 3 agree (book) — failed: ")
    assert "alpha: got 2400, expected 2550 (±1%)" in line
    assert "fits: 90 GB > 80 GB" in line
    assert not ok.ok


def test_nan_and_non_numbers_fail_close():
    ok = Checks()
    assert not ok.close("nan", float("nan"), 1.0)
    assert not ok.close("text", "abc", 1.0)
    assert ok.line().startswith("✗ 0 of 2 agree — failed:")


def test_empty_checks_is_not_a_pass():
    assert not Checks("x").ok
    assert Checks("x").line() == "✗ nothing was checked (x)"


def test_bad_arguments_raise_clearly():
    with pytest.raises(ValueError, match="rtol"):
        Checks().close("a", 1, 1, rtol=-1)
    with pytest.raises(ValueError, match="name"):
        Checks().true("", True)


def test_arrays_compare_without_raising():
    np = pytest.importorskip("numpy")
    ok = Checks()
    assert ok.close("numpy scalar", np.float32(2.0), 2.0)
    assert not ok.equal("array", np.arange(3), np.arange(3))  # ambiguous truth: a failure, not a crash
