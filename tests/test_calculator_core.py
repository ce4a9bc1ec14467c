"""Chapter 4's numbers live in core (core/calculator.py, public name `transformer_calculator`): computable without
matplotlib or ipywidgets, and the views show exactly these objects (tests/test_transformer_views.py, which
needs ipywidgets, checks the readouts built on them)."""

import subprocess
import sys

import pytest

from scalebook_utils import transformer as tf
from scalebook_utils import transformer_calculator as C
from scalebook_utils.core import calculator


def test_the_chapter_4_numbers_import_without_a_plotting_library():
    code = (
        "import sys; from scalebook_utils import transformer_calculator as C\n"
        "n = C.calculator_numbers(C.calculator_config('book-ch4'), 2048, 8)\n"
        "print(int(n['kv_int8']), int(C.kv_bytes_per_sequence(8192, 64)), len(C.remat_rows()),\n"
        "      sorted(m for m in ('matplotlib', 'ipywidgets', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(512 * 2**10), str(2**33), "3", "[]"]


def test_the_flat_name_is_the_core_module():
    assert C is calculator


def test_calculator_numbers_llama3_70b():
    cfg = tf.get_model("llama3-70b")
    n = C.calculator_numbers(cfg, 4096)
    assert n["params"].total == pytest.approx(70.6e9, rel=0.001) and n["P"] == n["params"].total  # dense
    assert n["six_p"] == 6 * n["P"]
    assert n["train_matmul"] == pytest.approx(6 * tf.matmul_params(cfg))
    assert n["train_attention"] == pytest.approx(12 * 4096 * 64 * 128 * 80)  # 12·T·N·H·L
    assert n["train"] == pytest.approx(tf.training_flops_per_token(cfg, 4096))
    assert sum(n["flops_parts"].values()) == pytest.approx(n["train"])
    assert n["train_attention"] / n["train_matmul"] == pytest.approx(0.077, abs=0.0005)  # the book's +7.7%
    assert (n["kv_bf16"], n["kv_int8"]) == (320 * 2**10, 160 * 2**10)  # 2·L·K·H = 2·80·8·128 per token


def test_calculator_numbers_book_ch4_and_moe():
    n = C.calculator_numbers(tf.get_model("book-ch4"), 2048, 8)  # ch4.q1: 17.4B params, 512 KiB int8 per token
    assert round(n["params"].total / 1e9, 1) == 17.4 and n["kv_int8"] == 512 * 2**10
    assert n["step"] == pytest.approx(8 * 2048 * n["train"])
    moe = C.calculator_numbers(tf.get_model("deepseek-v3-like"))
    assert moe["P"] == tf.param_count("deepseek-v3-like").activated < moe["params"].total
    assert moe["six_p"] == 6 * moe["P"]


def test_calculator_numbers_reject_bad_sizes():
    cfg = tf.get_model("llama3-8b")
    for kw in ({"B": 0}, {"T": 0.5}, {"B": True}):
        with pytest.raises(ValueError):
            C.calculator_numbers(cfg, **kw)


def test_calculator_config_overrides_and_custom():
    cfg = C.calculator_config("llama3-70b", K=1, D=8192)
    assert cfg.name == "llama3-70b with K=1" and cfg.K == 1 and cfg.D == 8192
    assert C.calculator_config("llama3-70b", D=8192) is tf.get_model("llama3-70b")  # nothing replaced
    custom = C.calculator_config(C.CUSTOM, D=256, F=896, N=8, K=2, H=32, L=2, V=1000)
    assert (
        tf.param_count(custom).total
        == tf.param_count(tf.TransformerConfig("x", L=2, D=256, F=896, N=8, K=2, H=32, V=1000)).total
    )
    assert (
        tf.param_count(C.calculator_config(C.CUSTOM, D=256, F=896, N=8, K=2, H=32, L=2, V=1000, tied=True)).unembedding
        == 0
    )


def test_remat_rows_book_numbers():
    rows = {r["policy"]: r for r in C.remat_rows()}
    assert [rows[p]["tensors"] for p in ("none", "big_matmuls", "block")] == [20, 7, 1]
    # book ch. 4: BT = 4M tokens, L = 64, D = 8192 → 84 TB saving everything, 4.2 TB with block remat
    assert round(rows["none"]["bytes"] / 1e12) == 84 and round(rows["block"]["bytes"] / 1e12, 1) == 4.2
    assert rows["none"]["bytes"] == 2 * 20 * 4e6 * 8192 * 64 == rows["none"]["bytes_true"]
    assert rows["big_matmuls"]["true_tensors"] == 13  # Q, K, V, O, W_down: D each; W_gate, W_up: 4D each
    flat = {p: r["multiple"] - r["attention"] * (1 + (p != "none") / 3) for p, r in rows.items()}
    assert flat == pytest.approx({"none": 6, "big_matmuls": 6, "block": 8})  # the book's 6·P and 8·P


def test_kv_bytes_per_sequence_book_numbers():
    assert C.kv_bytes_per_sequence(8192, 64) == 8 * 2**30  # 2·S·L·K·H, int8: S = 8192, L = 64, K·H = 8192
    assert C.kv_bytes_per_sequence(8192, 8) == 2**30  # GQA with K = 8: 8× less
    assert C.kv_bytes_per_sequence(8192, 1, dtype="bf16") == 2 * C.kv_bytes_per_sequence(8192, 1)
    m = tf.get_model("llama3-70b")
    assert C.kv_bytes_per_sequence(4096, m.K, L=m.L, N=m.N, H=m.H, dtype="bf16") == 4096 * tf.kv_cache_bytes_per_token(
        m, "bf16"
    )
    with pytest.raises(ValueError, match="S must be"):
        C.kv_bytes_per_sequence(0, 8)


def test_the_views_show_the_core_objects():
    pytest.importorskip("ipywidgets")
    from scalebook_utils import transformer_views as views

    for name in (
        "CUSTOM",
        "REMAT_EXAMPLE",
        "calculator_config",
        "calculator_numbers",
        "remat_rows",
        "kv_bytes_per_sequence",
    ):
        assert getattr(views, name) is getattr(calculator, name), name
    assert not hasattr(views, "kv_cache_bytes")  # the one-sequence form has its own name
