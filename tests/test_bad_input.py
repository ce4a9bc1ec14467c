"""Bad input to the public API gets a clear error naming the argument — never a silent number.

One case per row of the reliability report's Part A (../shared/reviews/reliability.md: every SILENT, UNCLEAR,
HANG and WRONG call, and the SILENT-DOC ones, whose meaning is documented). Each case is the report's call,
the exception it must raise and a fragment of the message that names the argument or says what is allowed.
If a fix regresses, the call returns a number again and its case fails.
"""

from __future__ import annotations

import math
import signal

import numpy as np
import pytest
from scalebook_utils.check import check
from scalebook_utils.errors import WrongTypeError

from scalebook_utils import (
    capstone,
    collectives,
    gpus,
    inference,
    questions,
    roofline,
    serving,
    sharded_matmul,
    sharding,
    topology,
    training,
    transformer,
    units,
)

nan, inf = math.nan, math.inf
V5E_2x2 = topology.make_slice("tpu-v5e", (2, 2))
SHAPES = {"I": 4096, "J": 4096, "K": 4096}
T8 = dict(n_chips=16)

# (id, call, exception, fragment of the message)
CASES = [
    # --- SILENT in the report --------------------------------------------------------------------------------
    ("parse_quantity overflow", lambda: units.parse_quantity("1e999 s"), ValueError, "not a finite number"),
    ("lower_bound negative", lambda: roofline.lower_bound(-1, nan), ValueError, "t_math_s must be a finite number ≥ 0"),
    ("lower_bound strings", lambda: roofline.lower_bound("a", "b"), TypeError, "t_math_s must be"),
    ("upper_bound negative", lambda: roofline.upper_bound(-3, -4), ValueError, "t_math_s must be a finite number ≥ 0"),
    (
        "attainable nan",
        lambda: roofline.attainable_flops_per_s(nan, 1e14, 1e11),
        ValueError,
        "intensity_flops_per_byte must be a positive number",
    ),
    (
        "attainable inf in array",
        lambda: roofline.attainable_flops_per_s([1, inf], 1e14, 1e11),
        ValueError,
        "intensity_flops_per_byte must contain only positive finite numbers",
    ),
    ("matmul_flops negative", lambda: roofline.matmul_flops(-1, 0, 5), ValueError, "B must be a positive number"),
    ("matmul_flops nan", lambda: roofline.matmul_flops(nan, 1, 1), ValueError, "B must be a positive number"),
    (
        "matmul_bytes negative D",
        lambda: roofline.matmul_bytes(8, -4096, 4096),
        ValueError,
        "D must be a positive number",
    ),
    ("matmul_io_bytes None", lambda: roofline.matmul_io_bytes(None, 1, 1), TypeError, "B must be a positive number"),
    (
        "matmul_intensity nan in array",
        lambda: roofline.matmul_intensity([1, nan], 4096, 4096),
        ValueError,
        "B must contain only positive finite numbers",
    ),
    ("matmul_roofline overflow", lambda: roofline.matmul_roofline(1e300, 1e300, 1e300), ValueError, "overflows"),
    (
        "matmul_roofline exact='no'",
        lambda: roofline.matmul_roofline(512, 8192, 8192, exact="no"),
        TypeError,
        "exact must be True or False",
    ),
    (
        "achievable curve nan/inf",
        lambda: roofline.achievable_flops_curve([1, nan, inf], 4096, 4096),
        ValueError,
        "B must contain only positive finite numbers",
    ),
    (
        "axis_distance outside axis",
        lambda: topology.axis_distance(0, 9, 4, True),
        ValueError,
        "y must be an integer from 0 to 3",
    ),
    (
        "all_reduce 4 axes on a 3D torus",
        lambda: collectives.all_reduce(1e9, (4, 4, 4, 4), "tpu-v5p"),
        ValueError,
        "3D torus",
    ),
    (
        "all_gather beyond the v5e pod",
        lambda: collectives.all_gather(1e9, (512,), "tpu-v5e"),
        ValueError,
        "more than one tpu-v5e pod (256 chips",
    ),
    (
        "all_reduce axis of 4 on a 2x2 slice",
        lambda: collectives.all_reduce(1e9, (4,), V5E_2x2),
        ValueError,
        "do not fit slice tpu-v5e 2x2",
    ),
    (
        "sharded matmul mesh beyond the pod",
        lambda: sharded_matmul.plan("A[I_X, J] *_J B[J, K]", {"X": 1024}, SHAPES, chip="tpu-v5e"),
        sharding.ShardingError,
        "more than one tpu-v5e pod",
    ),
    (
        "plan max_tp=0",
        lambda: training.plan("llama3-8b", 4e6, **T8, max_tp=0),
        ValueError,
        "max_tp must be an integer ≥ 1",
    ),
    ("plan remat=[]", lambda: training.plan("llama3-8b", 4e6, **T8, remat=[]), ValueError, "remat is empty"),
    (
        "plan zero_stages=()",
        lambda: training.plan("llama3-8b", 4e6, **T8, zero_stages=()),
        ValueError,
        "zero_stages is empty",
    ),
    (
        "plan negative grad_bytes",
        lambda: training.plan("llama3-8b", 4e6, **T8, grad_bytes=-1e12),
        ValueError,
        "grad_bytes must be a finite number of bytes ≥ 0",
    ),
    (
        "plan 1-token batch",
        lambda: training.plan("llama3-8b", 1, **T8),
        ValueError,
        "batch_tokens=1 is less than one sequence of seq_len=4096",
    ),
    (
        "plan beyond the pod",
        lambda: training.plan("llama3-8b", 4e6, n_chips=10**12),
        ValueError,
        "more than one tpu-v5p pod (8960 chips)",
    ),
    ("ici_axes X=0", lambda: training.ici_axes("tpu-v5p", X=0, Y=0), ValueError, "X must be an integer ≥ 1"),
    (
        "min_chips beyond the pod",
        lambda: inference.min_chips("llama3-405b", "tpu-v5e", B=1, S=1e12),
        ValueError,
        "more than one pod (256 chips)",
    ),
    (
        "max_batch fractional chips",
        lambda: inference.max_batch("llama3-70b", 8192, n_chips=16.5),
        ValueError,
        "n_chips must be an integer ≥ 1",
    ),
    (
        "plan_serving batches=[]",
        lambda: serving.plan_serving("llama3-70b", slice_=16, batches=[]),
        ValueError,
        "batches is empty",
    ),
    ("batch_grid 1e300", lambda: serving.batch_grid(1e300), ValueError, "B_max must be an integer from 1 to"),
    ("frontier slices=[]", lambda: serving.frontier("llama3-70b", slices=[]), ValueError, "slices is empty"),
    (
        "train_chip_count GPU 0",
        lambda: capstone.train_chip_count("h100", 0),
        ValueError,
        "train_chips must be an integer ≥ 1",
    ),
    (
        "dp_critical_batch k > E",
        lambda: gpus.dp_critical_batch("h100", E=4, k=8),
        ValueError,
        "k (experts active per token) must be at most E",
    ),
    (
        "question_ids chapter 99",
        lambda: questions.question_ids(chapter=99),
        ValueError,
        "chapter must be an integer from 1 to 12",
    ),
    (
        "question_ids chapter '1'",
        lambda: questions.question_ids(chapter="1"),
        TypeError,
        "chapter must be an integer from 1 to 12",
    ),
    # --- UNCLEAR in the report --------------------------------------------------------------------------------
    ("format_si string", lambda: units.format_si("abc"), TypeError, "value must be a real number"),
    ("format_bytes None", lambda: units.format_bytes(None), TypeError, "n (bytes) must be a real number"),
    ("upper_bound None", lambda: roofline.upper_bound(None, 1), TypeError, "t_math_s must be"),
    (
        "attainable string",
        lambda: roofline.attainable_flops_per_s("x", 1e14, 1e11),
        TypeError,
        "intensity_flops_per_byte must be a positive number",
    ),
    ("matmul_flops string", lambda: roofline.matmul_flops("abc", 1, 1), TypeError, "B must be a positive number"),
    (
        "matmul_intensity ['a']",
        lambda: roofline.matmul_intensity(["a"], 4096, 4096),
        TypeError,
        "B must be a positive number or an array",
    ),
    (
        "plan max_tp='8'",
        lambda: training.plan("llama3-8b", 4e6, **T8, max_tp="8"),
        TypeError,
        "max_tp must be an integer ≥ 1, got '8'",
    ),
    ("expected with a list id", lambda: questions.expected(["ch1.q2"]), TypeError, "a question id is a string"),
    ("check with a list id", lambda: check(["ch1.q2"], 120), TypeError, "a question id is a string"),
    # --- HANG in the report: refused at once ------------------------------------------------------------------
    (
        "device_blocks 4.3e9 devices",
        lambda: sharding.device_blocks("A[I_X, J_Y]", {"X": 65536, "Y": 65536}, (65536, 65536)),
        sharding.ShardingError,
        "more than the 4096",
    ),
    (
        "batch_grid per_octave 1e7",
        lambda: serving.batch_grid(2**20, per_octave=10**7),
        ValueError,
        "per_octave must be an integer from 1 to 64",
    ),
]


@pytest.fixture
def within_two_seconds():
    """The former hangs must answer at once: fail (instead of hanging the suite) after 2 s."""

    def alarm(*_):
        raise TimeoutError("no answer within 2 s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(2)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("call,exc,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_naming_the_argument(call, exc, fragment, within_two_seconds):
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value)


def test_wrong_types_are_type_errors_and_value_errors():
    # a caller that catches the package's ValueError for bad input also catches a wrong type
    for call in (lambda: units.format_si("abc"), lambda: training.plan("llama3-8b", 4e6, **T8, max_tp="8")):
        with pytest.raises(WrongTypeError):
            call()
        with pytest.raises(ValueError):
            call()


# --- the report's UNCLEAR rows that were valid input: now answered -------------------------------------------


def test_parse_mesh_accepts_numpy_integers():
    mesh = sharding.parse_mesh({"X": np.int64(2), "Y": np.int32(4)})
    assert mesh.sizes == (2, 4) and all(type(s) is int for s in mesh.sizes)
    assert sharding.local_shape("A[I_X, J_Y]", {"X": np.int64(2), "Y": 4}, (np.int64(8), 8)) == (4, 2)


def test_forward_flops_per_token_takes_a_preset_name():
    cfg = transformer.get_model("llama3-8b")
    assert transformer.forward_flops_per_token("llama3-8b") == transformer.forward_flops_per_token(cfg)
    assert transformer.training_flops("llama3-8b", 1e6, 4096) == transformer.training_flops(cfg, 1e6, 4096)
    assert transformer.kv_cache_bytes_per_token("llama3-8b") == transformer.kv_cache_bytes_per_token(cfg)


def test_plan_takes_one_remat_policy_or_zero_stage():
    one = training.plan("llama3-8b", 4e6, **T8, remat="none", zero_stages=3)
    listed = training.plan("llama3-8b", 4e6, **T8, remat=["none"], zero_stages=[3])
    assert one.estimates and [e.config for e in one.estimates] == [e.config for e in listed.estimates]
    assert {e.config.remat for e in one.estimates} == {"none"}


# --- the report's SILENT-DOC rows: the documented meaning holds and is in the docstring ----------------------


def test_documented_meanings():
    assert roofline.crossover_batch(1, 1) == inf
    assert "inf" in roofline.crossover_batch.__doc__
    assert topology.make_slice("tpu-v5e", (3, 5)).shape == (3, 5)
    assert "3×5" in topology.make_slice.__doc__
    assert serving.plan_serving("llama3-70b", slice_="3x5").n_chips == 15
    assert "3x5" in serving.plan_serving.__doc__
    assert serving.slice_shape("tpu-v5e", 12) == (12,)
    assert "one axis" in serving.slice_shape.__doc__
    # a mapping of sizes may name more dims than the array has: one dict of the model's sizes for every array
    assert sharding.local_shape("A[I_X, J_Y]", {"X": 2, "Y": 4}, {"I": 2, "J": 4, "K": 9}) == (1, 1)
    assert "may name more" in sharding.check.__doc__


# --- check(): the report's rows, fixed on main by the check.py rewrite (kept here as regressions) ------------


@pytest.mark.parametrize(
    "qid,answer,fragment",
    [
        ("ch1.e4a", "0.00101 tokens", "asks for seconds"),
        ("ch2.q2d", "4.096e12 tokens", "asks for bytes"),
        ("ch1.e2", "1e999", "not a finite number"),
        ("ch1.e1a", lambda N: "x", "your function returned 'x', not a number"),
        ("ch1.e1a", lambda N: np.ones(3), "not a number"),
    ],
    ids=[
        "tokens for seconds",
        "tokens for bytes",
        "overflowing string",
        "formula returns str",
        "formula returns array",
    ],
)
def test_check_rows_print_a_clear_verdict(qid, answer, fragment, capsys):
    check(qid, answer)
    out = capsys.readouterr().out
    assert out.startswith(f"{qid}: incorrect") and fragment in out


def test_check_accepts_a_one_element_array(capsys):
    # the report's WRONG row: a correct answer stored as a one-element array
    check("ch1.e2", np.array([float(questions.expected("ch1.e2"))]))
    assert capsys.readouterr().out == "ch1.e2: correct\n"


# --- the validators themselves -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "v,exc",
    [
        ("8", TypeError),
        (None, TypeError),
        (True, TypeError),
        (16.5, ValueError),
        (0, ValueError),
        (nan, ValueError),
        (inf, ValueError),
    ],
)
def test_require_int_names_the_argument(v, exc):
    with pytest.raises(exc, match="^n_chips must be an integer ≥ 1, got"):
        units.require_int("n_chips", v)


def test_require_int_accepts_numpy_and_integral_floats():
    assert units.require_int("n", np.int64(4)) == 4 and units.require_int("n", 16.0) == 16
    assert units.require_int("chapter", 12, 1, 12) == 12
    with pytest.raises(ValueError, match="from 1 to 12"):
        units.require_int("chapter", 13, 1, 12)


def test_require_positive_values_scalars_and_arrays():
    assert units.require_positive_values("B", 3) == 3.0
    np.testing.assert_array_equal(units.require_positive_values("B", [1, 2]), [1.0, 2.0])
    for bad, exc in (([], ValueError), ([1, 0], ValueError), (["1"], TypeError), ([True], TypeError)):
        with pytest.raises(exc, match="^B must"):
            units.require_positive_values("B", bad)
