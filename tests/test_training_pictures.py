"""core.training.pictures: the numbers behind chapter 5's pictures and tables, without matplotlib or ipywidgets.

The views' readouts built on them are tested in test_training_views.py (book numbers there too).
"""

import math
import subprocess
import sys

import numpy as np
import pytest

from scalebook_utils import training as T
from scalebook_utils import transformer as tf
from scalebook_utils.core.training import pictures as P


def test_importing_it_loads_no_view_library():
    code = (
        "import sys, scalebook_utils.core.training.pictures\n"
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'IPython', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_slice_info_counts_the_axes_dp_spreads_over():
    assert P.slice_info("tpu-v5p", "16x20x28") == ("tpu-v5p", (16, 20, 28), 8960, 3)
    assert P.slice_info("tpu-v5p", "4x4") == ("tpu-v5p", (4, 4, 1), 16, 2)  # padded to the 3-D torus
    assert P.slice_info("tpu-v5p", "1x1x1")[2:] == (1, 1)  # at least one axis
    with pytest.raises(ValueError, match="does not fit"):
        P.slice_info("tpu-v5e", "32x32")


def test_picture_ratios_and_thresholds_are_the_training_formulas():
    name, _, N, n = P.slice_info("tpu-v6e", "8x16")
    r = P.picture_ratios("tpu-v6e", "8x16", 28_672, 1200)
    assert set(r) == set(P.SCHEMES) and set(P.SCHEMES) <= set(T.STRATEGIES)
    for s in P.SCHEMES:
        assert r[s] == T.comms_ratio(s, 1200, 28_672, N, name, n_axes=n)
    th = P.picture_thresholds("tpu-v6e", "8x16", 28_672)
    assert th["fsdp"] == T.dp_min_batch_per_chip("tpu-v6e", 2) == pytest.approx(T.alpha("tpu-v6e") / 2)
    assert th["fsdp+tp"] == pytest.approx(T.alpha("tpu-v6e") ** 2 / 28_672)  # α²/(M_X·M_Y·F), M_X = M_Y = 1
    assert th["tp_max_Y"] == pytest.approx(28_672 / T.alpha("tpu-v6e"))  # F/α
    # at the FSDP threshold FSDP's T_math / T_comms is exactly 1
    assert P.picture_ratios("tpu-v6e", "8x16", 28_672, th["fsdp"])["fsdp"] == pytest.approx(1)


def test_rank_schemes_best_first_ties_to_the_simpler_scheme():
    assert P.rank_schemes({"dp": 0.5, "fsdp": 0.5, "tp": 3.0, "fsdp+tp": 2.0}) == ["tp", "fsdp+tp", "fsdp", "dp"]
    assert P.rank_schemes({s: 1.0 for s in ("tp", "fsdp+tp", "dp", "fsdp")}) == ["fsdp", "dp", "fsdp+tp", "tp"]
    assert P.rank_schemes({"dp": math.inf, "fsdp": 1.0}) == ["dp", "fsdp"]


def test_best_mixed_split_is_the_cheapest_divisor_split():
    B, D, F, N = 4e5, 8192, 32_768, 64
    X, Y, c = P.best_mixed_split(B, D, F, N, "tpu-v5p", 3)
    assert X * Y == N and 1 < X < N
    every = [
        T.layer_costs("fsdp+tp", B, D, F, N, X=x, Y=N // x, chip="tpu-v5p", M_X=2, M_Y=1, phase="step").t_comms
        for x in range(2, N)
        if N % x == 0
    ]
    assert c.t_comms == min(every)
    assert P.best_mixed_split(B, D, F, 7, "tpu-v5p", 1) is None  # a prime N has no mixed split


def test_step_time_curves_shapes_and_a_slice_without_a_mixed_split():
    c = P.step_time_curves("tpu-v5p", "16x16x16", 8192, 32_768, [4e5, 4e6])
    assert isinstance(c["B"], np.ndarray) and c["B"].tolist() == [4e5, 4e6]
    assert all(c[k].shape == (2,) for k in ("math", *P.SCHEMES))
    assert c["split"][0] == (256, 16)  # the book's interactive minimum
    assert c["fsdp+tp"][0] == P.best_mixed_split(4e5, 8192, 32_768, 4096, "tpu-v5p", 3)[2].t_comms
    line = P.step_time_curves("tpu-v5p", "7x1x1", 8192, 32_768, [1e5])  # N = 7: prime
    assert math.isnan(line["fsdp+tp"][0]) and line["split"] == [None] and math.isfinite(line["fsdp"][0])
    assert P.step_time_curves("tpu-v5p", "4x4x4", batches=[])["math"].shape == (0,)


def test_threshold_rows_are_the_training_thresholds_as_text():
    rows = P.threshold_rows(("tpu-v5e", "tpu7x"), F=28_672)
    assert [r["chip"] for r in rows] == ["tpu-v5e", "tpu7x"]
    for r in rows:
        n = 2 if r["chip"] == "tpu-v5e" else 3
        assert r["α = C/W_ici"] == f"{T.alpha(r['chip']):,.0f}" == r["DP/FSDP 1 axis"]
        assert r["all axes"] == f"{T.dp_min_batch_per_chip(r['chip'], n):,.0f} ({n})"
        assert r["FSDP+TP"] == f"{T.mixed_min_batch_per_chip(28_672, r['chip'], n - 1, 1):,.0f}"


def test_model_name():
    assert P.model_name("llama3-70b") == "llama3-70b"
    assert P.model_name(tf.get_model("llama3-8b")) == tf.get_model("llama3-8b").name
    assert P.model_name(None) == "None"
