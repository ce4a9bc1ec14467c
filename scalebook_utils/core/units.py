"""Units: SI prefixes, dtype sizes, formatting and parsing of quantities.

Every quantity in scalebook is a plain float in SI base units — seconds, bytes, bytes/s, FLOPs,
FLOPs/s (book front matter, "Units"). This module converts between those floats and the strings a
person reads or types ("197 TFLOP/s", "194 us", "1.3 GB").

Decimal prefixes (k, M, G, T, P, E = 1e3 … 1e18) are the book's default; binary prefixes (KiB, MiB,
GiB, TiB) are accepted when parsing because students write them, and the checker uses the
difference between the two (a factor of 1.074 for G) to recognise a GB/GiB slip.
"""

from __future__ import annotations

import math
import numbers
import re

from scalebook_utils.core.errors import WrongTypeError

# --- prefixes -------------------------------------------------------------------------------------

SI_PREFIXES: dict[str, float] = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "m": 1e-3,
    "u": 1e-6,
    "µ": 1e-6,
    "μ": 1e-6,
    "n": 1e-9,
    "p": 1e-12,
}
BINARY_PREFIXES: dict[str, float] = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12
KiB, MiB, GiB, TiB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
US, MS = 1e-6, 1e-3

# --- dtypes ---------------------------------------------------------------------------------------

#: Bytes per element (book front matter: bf16 = 2, fp32 = 4, int8/fp8 = 1, int4 = 1/2).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "f32": 4.0,
    "float32": 4.0,
    "bf16": 2.0,
    "bfloat16": 2.0,
    "fp16": 2.0,
    "f16": 2.0,
    "float16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "i8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}
_CANONICAL = {"f32": "fp32", "float32": "fp32", "bfloat16": "bf16", "f16": "fp16", "float16": "fp16", "i8": "int8"}


def canonical_dtype(dtype: str) -> str:
    """Return the canonical short name of `dtype` ("bfloat16" → "bf16"), or raise ValueError."""
    if not isinstance(dtype, str) or dtype.lower() not in DTYPE_BYTES:
        known = ", ".join(sorted({_CANONICAL.get(k, k) for k in DTYPE_BYTES}))
        raise ValueError(f"unknown dtype {dtype!r}; known dtypes: {known}")
    d = dtype.lower()
    return _CANONICAL.get(d, d)


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of `dtype` (e.g. 2.0 for "bf16", 0.5 for "int4")."""
    return DTYPE_BYTES[canonical_dtype(dtype)]


# --- validation -----------------------------------------------------------------------------------
#
# One family for the whole package: bad input raises an error that names the argument and says what is
# allowed — never a silent number. A value of the wrong type (a string, None, a list where a number
# belongs) raises `WrongTypeError` (a TypeError that is also a ValueError); a number outside the allowed
# range (nan, inf, negative, fractional where an integer belongs) raises ValueError.


def _real(v) -> float | None:
    """`v` as a float if it is a real number (numpy scalars and 0-d arrays included, bool excluded), else None."""
    if isinstance(v, (bool, str, bytes)):
        return None
    if isinstance(v, numbers.Real):
        return float(v)
    if getattr(v, "ndim", None) == 0 and getattr(getattr(v, "dtype", None), "kind", "") in "iuf":
        return float(v)
    return None


def require_number(
    name: str,
    v,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    finite: bool = True,
) -> float:
    """`v` as a float; WrongTypeError unless it is a real number, ValueError naming `name` unless it is finite
    (when `finite`), ≥ `minimum`, > `above` and ≤ `maximum`.

    >>> require_number("t_math_s", -1, minimum=0)
    Traceback (most recent call last):
    ValueError: t_math_s must be a finite number ≥ 0, got -1
    """
    what = "a finite number" if finite else "a number"
    if maximum is not None and (minimum is None) != (above is None):  # a range reads as one: "in (0, 1]"
        low, bracket = (minimum, "[") if above is None else (above, "(")
        what += f" in {bracket}{low:g}, {maximum:g}]"
    else:
        if minimum is not None:
            what += f" ≥ {minimum:g}"
        if above is not None:
            what += f" > {above:g}"
        if maximum is not None:
            what += f" ≤ {maximum:g}"
    x = _real(v)
    if x is None:
        raise WrongTypeError(f"{name} must be {what}, got {v!r}")
    bad = (
        math.isnan(x)
        or (finite and math.isinf(x))
        or (minimum is not None and x < minimum)
        or (above is not None and x <= above)
        or (maximum is not None and x > maximum)
    )
    if bad:
        raise ValueError(f"{name} must be {what}, got {v!r}")
    return x


def require_finite(name: str, v) -> float:
    """`v` as a float; an error naming `name` unless it is a finite real number (any sign)."""
    return require_number(name, v)


def require_positive(**values: float) -> None:
    """Raise an error naming the first argument that is not a finite real number > 0.

    >>> require_positive(B=8, D=0)
    Traceback (most recent call last):
    ValueError: D must be a positive number, got 0
    """
    for name, v in values.items():
        x = _real(v)
        if x is None:
            raise WrongTypeError(f"{name} must be a positive number, got {v!r}")
        if not (math.isfinite(x) and x > 0):
            raise ValueError(f"{name} must be a positive number, got {v!r}")


def is_int(v) -> bool:
    """True for an integer that is not a bool (numpy integers included)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def require_int(name: str, v, minimum: int | None = 1, maximum: int | None = None) -> int:
    """`v` as an int; an error naming `name` unless it is an integer in [minimum, maximum].

    Python and numpy integers are integers; so is a float with an integral value (16.0, what arithmetic
    such as 2**k / 2 gives); 16.5, a string or a bool is not.

    >>> require_int("max_tp", "8")
    Traceback (most recent call last):
    scalebook_utils.errors.WrongTypeError: max_tp must be an integer ≥ 1, got '8'
    """
    what = "an integer"
    if minimum is not None and maximum is not None:
        what += f" from {minimum} to {maximum}"
    elif minimum is not None:
        what += f" ≥ {minimum}"
    elif maximum is not None:
        what += f" ≤ {maximum}"
    if is_int(v):
        n = int(v)
    else:
        x = _real(v)
        if x is None:
            raise WrongTypeError(f"{name} must be {what}, got {v!r}")
        if not (math.isfinite(x) and x.is_integer()):
            raise ValueError(f"{name} must be {what}, got {v!r}")
        n = int(x)
    if (minimum is not None and n < minimum) or (maximum is not None and n > maximum):
        raise ValueError(f"{name} must be {what}, got {v!r}")
    return n


def require_bool(name: str, v) -> bool:
    """`v` as a bool; WrongTypeError naming `name` unless it is True or False (numpy bools too): a truthy
    string such as 'no' is not a flag."""
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return bool(v)
    raise WrongTypeError(f"{name} must be True or False, got {v!r}")


def require_choices(name: str, v, what: str, single=None) -> tuple:
    """`v` as a non-empty tuple of choices. One choice (`single(v)` true, e.g. a string) becomes a 1-tuple;
    something that is not a list raises WrongTypeError and an empty list ValueError, both naming `name` and
    saying what to give (`what`, e.g. "batch sizes")."""
    if single is not None and single(v) and not isinstance(v, bool):
        return (v,)
    if isinstance(v, (str, bytes, bool)) or not hasattr(v, "__iter__"):
        raise WrongTypeError(f"{name} must be a list of {what}, got {v!r}")
    out = tuple(v)
    if not out:
        raise ValueError(f"{name} is empty: give at least one of the {what}")
    return out


def require_bytes(name: str, v) -> float:
    """`v` as a float number of bytes; an error naming `name` unless it is finite and ≥ 0."""
    x = _real(v)
    if x is None:
        raise WrongTypeError(f"{name} must be a finite number of bytes ≥ 0, got {v!r}")
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{name} must be a finite number of bytes ≥ 0, got {v!r}")
    return x


def require_positive_values(name: str, v):
    """`v` as a float (scalar) or a float numpy array (array-like); an error naming `name` unless every entry is
    a finite number > 0. For the functions that take a number or an array of them (batch sizes, intensities)."""
    x = _real(v)
    if x is not None:
        require_positive(**{name: v})
        return x
    import numpy as np  # only array inputs need numpy

    if v is None or isinstance(v, (str, bytes, bool, dict, set)):
        raise WrongTypeError(f"{name} must be a positive number or an array of them, got {v!r}")
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise WrongTypeError(f"{name} must be a positive number or an array of them, got {v!r}") from None
    if a.dtype.kind != "f" or np.asarray(v).dtype.kind not in "iuf":
        raise WrongTypeError(f"{name} must be a positive number or an array of them, got {v!r}")
    if a.size == 0:
        raise ValueError(f"{name} must be a positive number or a non-empty array of them, got {v!r}")
    if not np.all(np.isfinite(a) & (a > 0)):
        bad = float(a[~(np.isfinite(a) & (a > 0))].ravel()[0])
        raise ValueError(f"{name} must contain only positive finite numbers, got {bad!r} in {v!r}")
    return float(a) if a.ndim == 0 else a


# --- formatting -----------------------------------------------------------------------------------

_FORMAT_PREFIXES = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_SMALL_PREFIXES = [(1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p")]


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """Format `value` with an SI prefix and `digits` significant figures.

    >>> format_si(1.97e14, "FLOP/s")
    '197 TFLOP/s'
    >>> format_si(1.01e-3, "s")
    '1.01 ms'

    `value` must be a real number; inf and nan are written as 'inf s' / 'nan s' (a bound that is never
    reached, say), anything else that is not a number raises an error naming `value`.
    """
    x = _real(value)
    if x is None:
        raise WrongTypeError(f"value must be a real number to format, got {value!r}")
    if not is_int(digits) or digits < 1:
        raise ValueError(f"digits must be a positive integer (significant figures), got {digits!r}")
    if value == 0 or not math.isfinite(x):
        return f"{value:g} {unit}".strip()
    a = abs(value)
    table = _FORMAT_PREFIXES if a >= 1 else _SMALL_PREFIXES
    for scale, prefix in table:  # noqa: B007 - the loop's last (scale, prefix) is the one used below
        if a >= scale * (1 - 1e-12):
            break
    else:
        scale, prefix = table[-1]
    return f"{value / scale:.{digits}g} {prefix}{unit}".strip()


def _format(name: str, value, unit: str) -> str:
    if _real(value) is None:
        raise WrongTypeError(f"{name} must be a real number to format, got {value!r}")
    return format_si(value, unit)


def format_time(seconds: float) -> str:
    """'1.01 ms', '194 us', '2.5 s'."""
    return _format("seconds", seconds, "s")


def format_bytes(n: float) -> str:
    """Decimal bytes: '1.3 GB'."""
    return _format("n (bytes)", n, "B")


def format_flops(rate: float) -> str:
    """A FLOPs/s rate: '197 TFLOP/s'."""
    return _format("rate (FLOP/s)", rate, "FLOP/s")


def format_count(n: float) -> str:
    """Counts (parameters, tokens, chip-hours) as the book writes them: 70553706496 → '70.6B', 15e12 → '15T',
    4194304 → '4.19M', 512 → '512'."""
    if _real(n) is None:
        raise WrongTypeError(f"n must be a real number to format, got {n!r}")
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


# --- parsing --------------------------------------------------------------------------------------

#: Base units understood by `parse_quantity`, mapped to (canonical unit, factor).
_BASE_UNITS: dict[str, tuple[str, float]] = {
    "s": ("s", 1.0),
    "sec": ("s", 1.0),
    "second": ("s", 1.0),
    "seconds": ("s", 1.0),
    "B": ("B", 1.0),
    "byte": ("B", 1.0),
    "bytes": ("B", 1.0),
    "b": ("B", 1 / 8),
    "bit": ("B", 1 / 8),
    "bits": ("B", 1 / 8),
    "B/s": ("B/s", 1.0),
    "Bps": ("B/s", 1.0),
    "bytes/s": ("B/s", 1.0),
    "bit/s": ("B/s", 1 / 8),
    "bps": ("B/s", 1 / 8),
    "b/s": ("B/s", 1 / 8),
    "FLOP": ("FLOP", 1.0),
    "FLOPs": ("FLOP", 1.0),
    "FLOPS": ("FLOP", 1.0),
    "flop": ("FLOP", 1.0),
    "flops": ("FLOP", 1.0),
    "OP": ("FLOP", 1.0),
    "OPs": ("FLOP", 1.0),
    "FLOP/s": ("FLOP/s", 1.0),
    "FLOPs/s": ("FLOP/s", 1.0),
    "flop/s": ("FLOP/s", 1.0),
    "flops/s": ("FLOP/s", 1.0),
    "OP/s": ("FLOP/s", 1.0),
    "OPs/s": ("FLOP/s", 1.0),
    "FLOPs/byte": ("FLOP/B", 1.0),
    "FLOP/B": ("FLOP/B", 1.0),
    "OPs/byte": ("FLOP/B", 1.0),
    "Hz": ("Hz", 1.0),
    "hz": ("Hz", 1.0),
    "tokens": ("", 1.0),
    "token": ("", 1.0),
    "": ("", 1.0),
}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_QTY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµμ/]*)\s*$")
_TIME_WORDS = {
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
    "ps": 1e-12,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "days": 86400.0,
    "day": 86400.0,
}


def parse_quantity(text: str) -> tuple[float, str]:
    """Parse "194 us", "1.3 GB", "2 GiB", "197 TFLOP/s" into (value in SI base units, base unit).

    >>> parse_quantity("194 us")
    (0.000194, 's')
    >>> parse_quantity("1.5 KiB")
    (1536.0, 'B')

    Raises ValueError with the accepted forms when the text cannot be read.
    """
    m = _QTY.match(str(text))
    if not m:
        raise ValueError(
            f"cannot read {text!r} as a quantity; write a number and a unit, e.g. '194 us', '1.3 GB', '197 TFLOP/s'"
        )
    number, unit = float(m.group(1)), m.group(2)
    if not math.isfinite(number):
        raise ValueError(
            f"cannot read {text!r} as a quantity: {m.group(1)} is not a finite number (it overflows a float)"
        )
    if unit in _TIME_WORDS:
        return number * _TIME_WORDS[unit], "s"
    if unit in _BASE_UNITS:
        base, f = _BASE_UNITS[unit]
        return number * f, base
    for prefix, scale in list(BINARY_PREFIXES.items()) + list(SI_PREFIXES.items()):
        if prefix and unit.startswith(prefix) and unit[len(prefix) :] in _BASE_UNITS:
            base, f = _BASE_UNITS[unit[len(prefix) :]]
            if base == "":
                break
            return number * scale * f, base
    raise ValueError(
        f"unknown unit {unit!r} in {text!r}; use s/ms/us, B/KB/MB/GB (or KiB/MiB/GiB), B/s, FLOPs, "
        "FLOP/s, Hz with an SI prefix (k, M, G, T, P)"
    )
