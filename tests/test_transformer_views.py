"""Chapter 4 accounting views: readouts (book numbers), figures (labelled, the expected lines) and widgets."""

import pytest

pytest.importorskip("ipywidgets")

from figure_support import _draw, _is_message, _labelled, _legend  # noqa: E402
from IPython.display import Image  # noqa: E402

from scalebook_utils import transformer as tf  # noqa: E402
from scalebook_utils import transformer_views as V  # noqa: E402

# --- formatting -------------------------------------------------------------------------------------------


def test_formatting_helpers():
    assert V.format_count(70_553_706_496) == "70.6B" and V.format_count(2_216_960) == "2.22M"
    assert V.format_binary_bytes(327_680) == "320 KiB" and V.format_binary_bytes(2**33) == "8 GiB"
    assert V.format_binary_bytes(512) == "512 B"


# --- (1) the calculator -----------------------------------------------------------------------------------


def test_calculator_readout_llama3_70b():
    line = V.calculator_readout("llama3-70b", T=4096, B=1)
    assert line.startswith("calculator: llama3-70b, T=4096, B=1 → 70.6B params | 6·P = 4.23e11 FLOPs/token"), line
    assert "KV 320 KiB/token bf16, 160 KiB int8" in line
    n = V.calculator_numbers(tf.get_model("llama3-70b"), 4096)
    assert n["train"] == pytest.approx(tf.training_flops_per_token(tf.get_model("llama3-70b"), 4096))
    assert n["train_matmul"] == pytest.approx(6 * tf.matmul_params(tf.get_model("llama3-70b")))
    assert n["train_attention"] == pytest.approx(12 * 4096 * 64 * 128 * 80)  # 12·T·N·H·L
    assert sum(n["flops_parts"].values()) == pytest.approx(n["train"])
    assert f"(+{n['train_attention'] / n['train_matmul']:.1%})" in line


def test_calculator_book_ch4_question1():
    # ch4.q1: 17.4B params (exact count), 512 KiB of int8 KV cache per token
    line = V.calculator_readout("book-ch4", T=2048, B=8)
    assert "17.4B params" in line and "512 KiB int8" in line and "B=8" in line
    n = V.calculator_numbers(tf.get_model("book-ch4"), 2048, 8)
    assert n["step"] == pytest.approx(8 * 2048 * n["train"])


def test_calculator_moe_shows_activated_params():
    line = V.calculator_readout("deepseek-v3-like")
    assert "671B params (37.6B activated)" in line
    n = V.calculator_numbers(tf.get_model("deepseek-v3-like"))
    assert n["six_p"] == 6 * tf.param_count("deepseek-v3-like").activated


def test_calculator_config_overrides_and_custom():
    cfg = V.calculator_config("llama3-70b", K=1, D=8192)
    assert cfg.name == "llama3-70b with K=1" and cfg.K == 1 and cfg.D == 8192
    assert V.calculator_config("llama3-70b", D=8192) is tf.get_model("llama3-70b")
    assert V.calculator_config("llama3-8b", gated=False).name == "llama3-8b with gated=False"
    custom = V.calculator_config("custom", D=256, F=896, N=8, K=2, H=32, L=2, V=1000)
    assert (
        tf.param_count(custom).total
        == tf.param_count(tf.TransformerConfig("x", L=2, D=256, F=896, N=8, K=2, H=32, V=1000)).total
    )
    tied = V.calculator_config("custom", D=256, F=896, N=8, K=2, H=32, L=2, V=1000, tied=True)
    assert tf.param_count(tied).unembedding == 0


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"K": 7}, "K (KV heads) must divide N"),
        ({"D": 0}, "D must be a positive integer"),
        ({"L": -3}, "L must be a positive integer"),
        ({"T": 0}, "T must be a sequence of ≥ 1 tokens"),
        ({"B": 0}, "B must be a batch"),
    ],
)
def test_calculator_invalid_input_gives_a_line(kw, needle):
    T, B = kw.pop("T", 4096), kw.pop("B", 1)
    line = V.calculator_readout("llama3-70b", T, B, **kw)
    assert line.startswith("calculator: ") and "→ invalid: " in line and needle in line, line
    assert _is_message(V.render_calculator("llama3-70b", T, B, **kw))


def test_calculator_unknown_model_and_incomplete_custom():
    assert "invalid: unknown model 'gpt9'" in V.calculator_readout("gpt9")
    assert "missing" in V.calculator_readout("custom", D=512)


def test_render_calculator():
    fig = _draw(V.render_calculator("llama3-70b", 4096))
    ax1, ax2 = fig.axes
    for ax in (ax1, ax2):
        _labelled(ax)
    assert [t.get_text() for t in ax1.get_yticklabels()] == ["embedding", "attention", "MLP", "norms", "unembedding"]
    assert "dot-product attention" in [t.get_text() for t in ax2.get_yticklabels()]
    assert any(lbl.startswith("6·P = 4.23e11") for lbl in _legend(ax2))
    moe = _draw(V.render_calculator("deepseek-v3-like"))
    assert any("activated" in lbl for lbl in _legend(moe.axes[0]))


def test_calculator_widget_updates():
    w = V.calculator_widget()
    assert set(w.controls) == {"model", "D", "F", "N", "K", "H", "L", "V", "gated", "tied", "B", "T"}
    assert w.controls["T"].description == "T"  # the browser test moves the slider by this label
    first = w.last_readout
    assert first == V.calculator_readout("llama3-70b", 4096, 1)
    w.controls["T"].value = 2**20
    assert w.last_readout.startswith("calculator: llama3-70b, T=1048576, B=1 → ") and w.last_readout != first
    assert w.readout() == w.last_readout
    w.controls["K"].value = 7
    assert "invalid: K (KV heads) must divide N" in w.last_readout
    w.controls["K"].value = 1
    assert w.last_readout.startswith("calculator: llama3-70b with K=1, ")
    w.controls["model"].value = "book-ch4"  # a preset fills every box
    assert w.controls["D"].value == 4096 and w.controls["K"].value == 32
    assert w.last_readout.startswith("calculator: book-ch4, T=1048576, B=1 → 17.4B params"), w.last_readout
    w.controls["model"].value = "custom"
    w.controls["D"].value = 0
    assert w.last_readout.startswith("calculator: custom, ")
    assert "invalid: D must be a positive integer" in w.last_readout
    assert isinstance(w.snapshot(), Image)


def test_preset_fills_the_boxes_with_one_redraw(monkeypatch):
    w = V.calculator_widget()
    calls = []
    real = V.calculator_readout
    monkeypatch.setattr(V, "calculator_readout", lambda *a, **k: calls.append(a) or real(*a, **k))
    w.controls["model"].value = "llama3-8b"
    assert len(calls) == 1 and w.last_readout.startswith("calculator: llama3-8b, ")


# --- (2) remat -----------------------------------------------------------------------------------------------


def test_remat_book_numbers():
    rows = {r["policy"]: r for r in V.remat_rows()}
    assert [rows[p]["tensors"] for p in ("none", "big_matmuls", "block")] == [20, 7, 1]
    assert round(rows["none"]["bytes"] / 1e12) == 84 and round(rows["block"]["bytes"] / 1e12, 1) == 4.2
    assert rows["none"]["bytes"] == rows["none"]["bytes_true"]  # 2·20·BT·D·L, as activation_bytes
    assert rows["big_matmuls"]["true_tensors"] == 13  # Q, K, V, O, W_down: D each; W_gate, W_up: F = 4D each
    # without attention the multipliers are the book's 6 and 8
    flat = {r["policy"]: r["multiple"] - r["attention"] * (1 + (r["policy"] != "none") / 3) for r in V.remat_rows()}
    assert flat["none"] == pytest.approx(6) and flat["big_matmuls"] == pytest.approx(6)
    assert flat["block"] == pytest.approx(8)
    line = V.remat_readout()
    assert line.startswith("remat: BT=4M tokens, L=64, D=8192, T=4096 → save everything 20·D: 84 TB")
    assert "block remat 1·D: 4.2 TB, 8.50·P" in line and "~7·D: 29 TB (13·D at true widths: 55 TB)" in line


def test_render_remat():
    fig = _draw(V.render_remat())
    ax1, ax2 = fig.axes
    for ax in (ax1, ax2):
        _labelled(ax)
    texts = " ".join(t.get_text() for t in ax1.texts)
    assert "83.9 TB" in texts and "4.19 TB" in texts and "(13·D)" in texts
    assert any("6·P" in lbl for lbl in _legend(ax2)) and any("recomputed" in lbl for lbl in _legend(ax2))
    assert "8.50·P" in " ".join(t.get_text() for t in ax2.texts)


# --- (3) KV cache --------------------------------------------------------------------------------------------


def test_kv_book_8_gib():
    assert V.kv_bytes_per_sequence(8192, 64) == 2**33  # 2·S·L·K·H in int8, S = 8192, L = 64, KH = 8192
    line = V.kv_readout(8192)
    assert line == (
        "KV cache: S=8192, L=64, N·H=8192 → MHA (K=64) 8 GiB int8, 16 GiB bf16 | GQA (K=8) 1 GiB int8, "
        "2 GiB bf16 | MQA (K=1) 128 MiB int8, 256 MiB bf16"
    )
    assert "cannot evaluate" in V.kv_readout(8192, (7,))  # 7 does not divide 64
    assert "cannot evaluate" in V.kv_readout(0)


def test_render_kv_cache():
    fig = _draw(V.render_kv_cache())
    ax = fig.axes[0]
    _labelled(ax)
    labels = _legend(ax)
    assert len(labels) == 6 and {"MHA K = 64, bf16", "GQA K = 8, int8", "MQA K = 1, bf16"} <= set(labels)
    assert any("8 GiB" in t.get_text() for t in ax.texts)
    assert _is_message(V.render_kv_cache((7,)))


# --- (4) MoE ---------------------------------------------------------------------------------------------------


def test_moe_book_numbers():
    assert V.moe_coefficient("tpu-v5e", "int8") == pytest.approx(120, rel=0.002)
    line = V.moe_readout()
    assert line.startswith("MoE critical batch: tpu-v5e, int8 weights, bf16 FLOPs → B > 120·E/k tokens")
    assert "E=256, k=8 (DeepSeek)" in line and "(book, α = 240: 3,840)" in line
    assert V.moe_coefficient("tpu-v5e", "int8") * 32 == pytest.approx(
        tf.moe_critical_batch(tf.get_model("deepseek-v3-like"))
    )
    assert "cannot evaluate" in V.moe_readout(E=4, k=8)
    assert "cannot evaluate" in V.moe_readout("tpu-v99")


def test_render_moe_critical_batch():
    fig = _draw(V.render_moe_critical_batch())
    ax = fig.axes[0]
    _labelled(ax)
    labels = _legend(ax)
    assert "int8 weights: B > 120·E/k" in labels and "bf16 weights: B > 240·E/k" in labels
    assert any("DeepSeek-V3" in t.get_text() and "3,840" in t.get_text() for t in ax.texts)
    assert _is_message(V.render_moe_critical_batch("tpu-v99"))
