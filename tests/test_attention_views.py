"""Chapter 4 attention views: share of the FLOPs, arithmetic intensity, flash attention (book numbers, figures, widgets)."""

import math

import pytest

pytest.importorskip("ipywidgets")


from figure_support import _draw, _is_message, _labelled, _legend  # noqa: E402

from scalebook_utils import attention_views as V  # noqa: E402
from scalebook_utils import transformer as tf  # noqa: E402

# --- (1) attention's share ----------------------------------------------------------------------------------


def test_attention_share_is_T_over_8D():
    for D in (2048, 8192):
        cfg = V._mha(D)
        for T in (1024, 8 * D):
            assert tf.attention_to_matmul_flops_ratio(cfg, T) == pytest.approx(T / (8 * D))
    line = V.attention_share_readout("book-ch4", 4096)
    assert line.startswith("attention share: book-ch4 at T=4096 → attention / layer matmuls 0.125")
    assert "= 1 at T≈32,768" in line and "= QKVO projections at T≈8,192 (ch4.q5)" in line  # 8D and 2D
    assert "1 at 8D = 65,536" in V.attention_share_readout("llama3-70b")  # the book's "about 64K for D ≈ 8k"
    assert "cannot evaluate" in V.attention_share_readout("gpt9")


def test_render_attention_share():
    fig = _draw(V.render_attention_share((2048, 4096, 8192, 16384), "llama3-70b"))
    ax = fig.axes[0]
    _labelled(ax)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = _legend(ax)
    assert sum(lbl.startswith("D = ") for lbl in labels) == 4 and any(lbl.startswith("llama3-70b") for lbl in labels)
    assert any("T = 8D" in lbl for lbl in labels) and any("T = 2D (ch4.q5)" in lbl for lbl in labels)
    assert "8D = 65,536" in " ".join(labels)
    # one circle at (8D, 1) and one triangle at (2D, 1/4) per D
    circles = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and len(ln.get_xdata()) == 1]
    assert sorted(float(ln.get_xdata()[0]) for ln in circles) == [16384, 32768, 65536, 131072]
    assert all(float(ln.get_ydata()[0]) == pytest.approx(1) for ln in circles)
    assert _is_message(V.render_attention_share(model="gpt9"))


# --- (2) attention intensity (ch4.q4) -------------------------------------------------------------------------


def test_intensity_readout_v5e():
    line = V.intensity_readout("tpu-v5e")
    assert line.startswith("attention intensity: tpu-v5e, critical 240 FLOPs/byte (bf16) → prefill")
    assert "T > 480 (G=1), 300 (G=4), 270 (G=8), 255 (G=16)" in line
    assert "memory-bound at any S" in line
    assert V.prefill_threshold(240, 1) == 480 and V.prefill_threshold(240, 8) == 270
    assert "cannot evaluate" in V.intensity_readout("v100")  # no bf16 peak
    assert "cannot evaluate" in V.intensity_readout("tpu-v99")


def test_intensity_decode_can_be_compute_bound_for_huge_G():
    line = V.intensity_readout("tpu-v5e", (1, 512))
    assert "G=1: never" in line and "G=512: S > 453" in line  # α·512/(512 − α), α = 240.2


def test_render_attention_intensity_and_widget():
    fig = _draw(V.render_attention_intensity("tpu-v5e"))
    ax1, ax2 = fig.axes
    for ax in (ax1, ax2):
        _labelled(ax)
        assert any("critical intensity 240" in lbl for lbl in _legend(ax))
        assert sum(lbl.startswith("G = ") for lbl in _legend(ax)) == 4
    assert _is_message(V.render_attention_intensity("v100"))
    w = V.intensity_widget()
    assert w.last_readout == V.intensity_readout("tpu-v5e")
    w.controls["chip"].value = "tpu-v6e"
    assert w.last_readout.startswith("attention intensity: tpu-v6e, critical 575 ")
    assert "v100" not in w.controls["chip"].options


# --- (3) flash attention -----------------------------------------------------------------------------------------


def test_flash_readout_converges():
    last = V.flash_readout()
    assert last.startswith("flash attention: S=64, chunk=16, step=4/4 (keys 48–63) → M=")
    err = float(last.split("softmax(q·Kᵀ/√H)·V| = ")[1].split(" ")[0])
    assert err < 1e-14
    mid = V.flash_readout(2)
    assert "step=2/4 (keys 16–31)" in mid and float(mid.split("·V| = ")[1].split(" ")[0]) > 1e-3
    prefix = float(mid.split("vs keys 0–31 only: ")[1])
    assert prefix < 1e-14  # every step is exact for the keys it has seen
    assert "cannot evaluate" in V.flash_readout(5) and "cannot evaluate" in V.flash_readout(chunk=0)


def test_render_flash():
    fig = _draw(V.render_flash(2))
    assert len(fig.axes) == 4
    for ax in fig.axes:
        _labelled(ax)
    ax1, ax2, ax3, ax4 = fig.axes
    assert "running max M" in _legend(ax1) and "chunk 2 (this step)" in _legend(ax1)
    assert any(lbl.startswith("naive Σ exp") for lbl in _legend(ax2))
    assert ax4.get_yscale() == "log"
    assert _is_message(V.render_flash(9))


def test_flash_widget_updates():
    w = V.flash_widget()
    assert w.last_readout == V.flash_readout(4, 16)
    w.controls["step"].value = 1
    assert "step=1/4 (keys 0–15)" in w.last_readout
    w.controls["chunk"].value = 4
    assert w.controls["step"].max == 16 and "chunk=4, step=16/16" in w.last_readout
    w.controls["chunk"].value = 32
    assert w.controls["step"].max == 2 and "chunk=32, step=2/2" in w.last_readout
    assert math.isfinite(float(w.last_readout.split("M=")[1].split(",")[0]))
