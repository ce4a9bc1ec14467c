import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalebook_utils import units


@pytest.mark.parametrize(
    "text,value,base",
    [
        ("194 us", 194e-6, "s"),
        ("1.01 ms", 1.01e-3, "s"),
        ("2 s", 2.0, "s"),
        ("3µs", 3e-6, "s"),
        ("1.3 GB", 1.3e9, "B"),
        ("2 GiB", 2 * 2**30, "B"),
        ("16 bits", 2.0, "B"),
        ("8 Gb", 1e9, "B"),
        ("197 TFLOP/s", 1.97e14, "FLOP/s"),
        ("4.5e10 B/s", 4.5e10, "B/s"),
        ("400 Gbps", 50e9, "B/s"),
        ("240", 240.0, ""),
        ("2e12 FLOPs", 2e12, "FLOP"),
        ("1.5 KiB", 1536.0, "B"),
    ],
)
def test_parse_quantity(text, value, base):
    v, b = units.parse_quantity(text)
    assert b == base and v == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("bad", ["", "fast", "12 parsecs", "1.2.3 s", "GB 12"])
def test_parse_quantity_rejects_with_a_helpful_message(bad):
    with pytest.raises(ValueError, match="unit|quantity"):
        units.parse_quantity(bad)


@pytest.mark.parametrize(
    "value,unit,text",
    [
        (1.97e14, "FLOP/s", "197 TFLOP/s"),
        (1.01e-3, "s", "1.01 ms"),
        (1.94e-4, "s", "194 us"),
        (1.3e9, "B", "1.3 GB"),
        (240.0, "", "240"),
        (0.0, "s", "0 s"),
    ],
)
def test_format_si(value, unit, text):
    assert units.format_si(value, unit) == text


@given(st.floats(min_value=1e-12, max_value=1e18, allow_nan=False))
def test_format_then_parse_round_trips_seconds(x):
    text = units.format_si(x, "s", digits=12)
    value, base = units.parse_quantity(text.replace(" ", " "))
    assert base == "s" and value == pytest.approx(x, rel=1e-9)


def test_dtype_bytes():
    assert units.dtype_bytes("bf16") == 2 and units.dtype_bytes("bfloat16") == 2
    assert units.dtype_bytes("int8") == 1 and units.dtype_bytes("int4") == 0.5 and units.dtype_bytes("fp32") == 4
    with pytest.raises(ValueError, match="unknown dtype 'int3'.*bf16"):
        units.dtype_bytes("int3")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "8", None, True])
def test_require_positive_names_the_argument(bad):
    with pytest.raises(ValueError, match="^D must be a positive number"):
        units.require_positive(B=8, D=bad)


@pytest.mark.parametrize(
    "kwargs, bad, says",
    [
        (dict(minimum=1), 0, "must be a finite number ≥ 1, got 0"),
        (dict(above=0, maximum=1), 1.5, r"must be a finite number in \(0, 1\], got 1.5"),
        (dict(minimum=0, maximum=1), -0.1, r"must be a finite number in \[0, 1\], got -0.1"),
        (dict(minimum=1), True, "must be a finite number ≥ 1, got True"),
    ],
)
def test_require_number_says_the_range(kwargs, bad, says):
    with pytest.raises(ValueError, match="^x " + says):
        units.require_number("x", bad, **kwargs)
    assert units.require_number("x", 1, **kwargs) == 1.0  # 1 is inside every one of these ranges (an edge of each)


def test_require_positive_accepts_numpy_scalars():
    import numpy as np

    units.require_positive(B=np.int64(3), D=np.float32(2.5))
    assert math.isclose(units.GiB / units.GB, 1.073741824)


def test_parse_clock_frequencies():
    # ch. 12 asks for clocks ("≈ 2.1 GHz"); the checker must read them
    assert units.parse_quantity("2.1 GHz") == (pytest.approx(2.1e9), "Hz")
    assert units.parse_quantity("1980 MHz") == (pytest.approx(1.98e9), "Hz")
