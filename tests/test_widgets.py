"""Chapter-1 widgets: the pure readouts, and builders whose controls drive those readouts."""

import math
import re

import pytest

pytest.importorskip("ipywidgets")

import ipywidgets as W  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scalebook_utils.hardware import CHIPS  # noqa: E402

from scalebook_utils import roofline, widgets  # noqa: E402

READOUT = re.compile(
    r"^roofline explorer: B=(\d+) → (compute-bound|memory-bound) \| T_math=\S+ \S+ T_comms=\S+ \S+ "
    r"\| crossover B≈(\d+)$"
)


# --- explorer_readout -----------------------------------------------------------------------------


def test_explorer_readout_has_the_marker_format():
    line = widgets.explorer_readout("tpu-v5e", "bf16", 8192, 8192, 512)
    m = READOUT.match(line)
    assert m, line
    assert line.startswith(widgets.EXPLORER_PREFIX) and widgets.EXPLORER_PREFIX == "roofline explorer: B="
    assert m.group(1) == "512" and m.group(2) == "compute-bound"
    assert int(m.group(3)) == round(roofline.crossover_batch(8192, 8192, "tpu-v5e", "bf16"))
    r = roofline.matmul_roofline(512, 8192, 8192, "tpu-v5e", "bf16")
    assert "T_math=349 us" in line and r.t_math_s == pytest.approx(349e-6, rel=2e-3)
    assert "\n" not in line
    assert line == widgets.explorer_readout("tpu-v5e", "bf16", 8192, 8192, 512)  # deterministic


@pytest.mark.parametrize(
    "chip,mode,D,F",
    [
        ("tpu-v5e", "bf16", 8192, 8192),
        ("tpu-v5e", "int8", 4096, 4096),
        ("tpu-v5e", "int8-weights", 1024, 1024),
        ("h100", "bf16", 8192, 28672),
        ("tpu-v6e", "int8", 16384, 4096),
    ],
)
def test_explorer_readout_is_memory_bound_below_and_compute_bound_above_the_crossover(chip, mode, D, F):
    b_cross = roofline.crossover_batch(D, F, chip, mode)
    below = widgets.explorer_readout(chip, mode, D, F, math.floor(b_cross) - 1)
    above = widgets.explorer_readout(chip, mode, D, F, math.ceil(b_cross) + 1)
    assert "→ memory-bound" in below and "→ compute-bound" in above
    assert below != above
    assert f"crossover B≈{b_cross:.0f}" in below


def test_explorer_readout_changes_with_B():
    lines = {widgets.explorer_readout("tpu-v5e", "bf16", 8192, 8192, B) for B in (1, 64, 256, 1024, 4096)}
    assert len(lines) == 5


def test_explorer_readout_for_a_chip_without_the_dtype_is_a_message_not_an_exception():
    line = widgets.explorer_readout("v100", "bf16", 8192, 8192, 256)
    assert line.startswith("roofline explorer: B=256 → ")
    assert "v100 has no bf16 matmul peak" in line and "fp16" in line
    assert "no bf16" in widgets.explorer_readout("v100", "int8-weights", 8192, 8192, 256)


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("nope", "bf16", 8192, 8192, 8), "unknown chip"),
        (("tpu-v5e", "fp64", 8192, 8192, 8), "unknown matmul mode"),
        (("tpu-v5e", "bf16", 0, 8192, 8), "D must be a positive number"),
        (("tpu-v5e", "bf16", 8192, 8192, 0), "B must be a positive number"),
    ],
)
def test_explorer_readout_bad_inputs_are_readable(args, fragment):
    line = widgets.explorer_readout(*args)
    assert line.startswith(widgets.EXPLORER_PREFIX) and fragment in line


def test_explorer_readout_without_crossover():
    line = widgets.explorer_readout("tpu-v5e", "bf16", 128, 128, 64)
    assert "→ memory-bound" in line and "never compute-bound" in line


def test_render_explorer_returns_two_panels_or_a_message():
    fig = widgets.render_explorer("tpu-v5e", "bf16", 8192, 8192, 512)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert fig.axes[1].get_xlabel().startswith("time (")
    bad = widgets.render_explorer("v100", "bf16", 8192, 8192, 512)
    assert isinstance(bad, Figure) and "no bf16" in bad.texts[0].get_text()


def test_chips_for_mode():
    assert "v100" not in widgets.chips_for_mode("bf16")
    assert set(widgets.chips_for_mode("bf16")) == {n for n, c in CHIPS.items() if "bf16" in c.peak_flops_per_s}
    assert "fp32" not in widgets.EXPLORER_MODES and "int8-weights" in widgets.EXPLORER_MODES


def test_static_png():
    img = widgets.static_png(widgets.render_explorer("tpu-v5e", "bf16", 4096, 4096, 64), dpi=40)
    assert img.data.startswith(b"\x89PNG")


# --- the roofline explorer widget -------------------------------------------------------------------


@pytest.fixture(scope="module")
def explorer():
    return widgets.roofline_explorer(chip="tpu-v5e", mode="bf16", D=8192, F=8192, B=128)


def test_roofline_explorer_is_a_vbox_with_a_B_slider(explorer):
    assert isinstance(explorer, W.VBox)
    b = explorer.controls["B"]
    assert isinstance(b, W.IntSlider) and b.description == "B" and b.min == 1 and b.max >= 4096
    assert isinstance(explorer.output, W.Output) and explorer.output in explorer.children
    sliders = [w for w in _descendants(explorer) if isinstance(w, W.IntSlider) and w.description == "B"]
    assert len(sliders) == 1  # the browser test finds the slider by its description
    assert explorer.last_readout == widgets.explorer_readout("tpu-v5e", "bf16", 8192, 8192, 128)


def test_moving_the_B_slider_changes_the_readout(explorer):
    explorer.controls["B"].value = 128
    before = explorer.last_readout
    assert before.startswith("roofline explorer: B=128 → memory-bound")
    explorer.controls["B"].value = 1024
    after = explorer.last_readout
    assert after.startswith("roofline explorer: B=1024 → compute-bound")
    assert after == explorer.readout() == widgets.explorer_readout("tpu-v5e", "bf16", 8192, 8192, 1024)


def test_mode_dropdown_filters_chips_and_updates_the_readout(explorer):
    explorer.controls["B"].value = 256
    explorer.controls["mode"].value = "int8"
    chips = explorer.controls["chip"].options
    assert "v100" not in chips and "tpu-v5e" in chips
    assert explorer.controls["chip"].value == "tpu-v5e"  # kept when it supports the new mode
    assert explorer.last_readout == widgets.explorer_readout("tpu-v5e", "int8", 8192, 8192, 256)
    explorer.controls["chip"].value = "h100"
    assert explorer.last_readout == widgets.explorer_readout("h100", "int8", 8192, 8192, 256)
    explorer.controls["D"].value = 0  # a bad size is reported, not raised
    assert "D must be a positive number" in explorer.last_readout
    explorer.controls["D"].value = 8192
    explorer.controls["mode"].value = "bf16"


def test_snapshot_is_the_default_state_png(explorer):
    fresh = widgets.roofline_explorer(B=64)
    img = fresh.snapshot()
    assert img.data.startswith(b"\x89PNG") and img.data == fresh.last_png
    fresh.last_png = None  # nothing drawn (e.g. no view ran): snapshot renders the current state instead
    assert fresh.snapshot().data.startswith(b"\x89PNG")


def test_explorer_keeps_a_chip_without_the_dtype_and_explains():
    box = widgets.roofline_explorer(chip="v100", mode="bf16", B=64)
    assert box.controls["chip"].value == "v100"
    assert "v100 has no bf16 matmul peak" in box.last_readout


def _descendants(w):
    yield w
    for c in getattr(w, "children", ()):
        yield from _descendants(c)


# --- intensity placer ---------------------------------------------------------------------------------


def test_placer_readout():
    line = widgets.placer_readout("tpu-v5e", 0.5)
    assert line.startswith("placer: intensity=0.5 FLOPs/byte → memory-bound at 410 GFLOP/s (0.208% of peak)")
    assert "critical intensity 240" in line
    assert "→ compute-bound at 197 TFLOP/s" in widgets.placer_readout("tpu-v5e", 1000)
    assert "fp16" in widgets.placer_readout("v100", 10)  # the V100's only dtype
    assert "cannot evaluate" in widgets.placer_readout("tpu-v5e", -1)


def test_placer_presets_are_the_book_intensities():
    p = widgets.PLACER_PRESETS
    assert p["dot product, N=1e6 (bf16)"] == pytest.approx(0.5, rel=1e-5)
    assert p["elementwise add x+y (bf16)"] == pytest.approx(1 / 6)
    for B in (64, 256, 1024):  # BDF/(BD + DF + BF), ≈ B only while B ≪ D, F
        assert p[f"matmul B={B}, D=F=8192 (bf16)"] == pytest.approx(B * 8192 / (2 * B + 8192))
    assert p["matmul B=64, D=F=8192 (bf16)"] == pytest.approx(64, rel=0.02)


def test_intensity_placer_preset_drives_slider_and_readout():
    box = widgets.intensity_placer(chip="tpu-v5e", intensity=0.5)
    assert box.last_readout == widgets.placer_readout("tpu-v5e", 0.5)
    box.controls["preset"].value = "matmul B=256, D=F=8192 (bf16)"  # intensity ≈ 241, just over v5e's 240
    assert box.controls["intensity"].value == pytest.approx(widgets.PLACER_PRESETS["matmul B=256, D=F=8192 (bf16)"])
    assert "→ compute-bound at 197 TFLOP/s (100% of peak)" in box.last_readout
    box.controls["chip"].value = "tpu-v6e"
    assert box.last_readout.endswith("(critical intensity 575)")
    assert "memory-bound" in box.last_readout


def test_intensity_placer_accepts_extra_chips():
    cpu = roofline.get_chip("tpu-v5e")
    box = widgets.intensity_placer(chip="mine", extra_chips={"mine": cpu})
    assert box.controls["chip"].value == "mine" and "tpu-v5e" in box.last_readout


# --- two-chip explorer ----------------------------------------------------------------------------------


def test_two_chip_readout():
    assert widgets.two_chip_readout(8192).startswith("two-chip: D=8192 → communication-bound (threshold D≈8756)")
    assert widgets.two_chip_readout(16384).startswith("two-chip: D=16384 → compute-bound (threshold D≈8756)")
    # B does not move the threshold; the link bandwidth does (D* = 2C/W).
    assert "threshold D≈8756" in widgets.two_chip_readout(8192, B=8)
    assert "threshold D≈4378" in widgets.two_chip_readout(8192, 9e10)
    assert "cannot evaluate" in widgets.two_chip_readout(0)


def test_two_chip_explorer_sliders_drive_the_readout():
    box = widgets.two_chip_explorer()
    assert box.last_readout.startswith("two-chip: D=8192 → communication-bound")
    box.controls["W"].value = 9e10
    assert box.last_readout.startswith("two-chip: D=8192 → compute-bound (threshold D≈4378)")
    box.controls["D"].value = 4096
    assert box.last_readout.startswith("two-chip: D=4096 → communication-bound")
    assert box.last_readout == box.readout()
    assert isinstance(widgets.render_two_chip(4096), Figure)


def test_a_view_never_raises_even_if_drawing_fails(monkeypatch):
    from scalebook_utils.views import ch01_rooflines  # the builder looks its render up here, not on the façade

    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(ch01_rooflines, "render_explorer", broken)
    box = widgets.roofline_explorer(B=512)  # the initial view runs here
    assert calls, "the patched render was not the one the view drew with"
    assert box.last_readout == widgets.explorer_readout("tpu-v5e", "bf16", 8192, 8192, 512)
    assert box.last_png.startswith(b"\x89PNG")  # a picture of the error message instead
    box.controls["B"].value = 64
    assert box.last_readout.startswith("roofline explorer: B=64 → memory-bound")


def test_show_displays_one_output_with_the_live_widget_and_its_png(monkeypatch):
    import base64

    from scalebook_utils import widgets as wmod

    box = wmod.roofline_explorer()
    shown = []
    from scalebook_utils.views import _kit  # show() lives in the views kit: patch its display

    monkeypatch.setattr(_kit, "display", lambda obj, raw=False: shown.append((obj, raw)))
    wmod.show(box)
    assert len(shown) == 1
    bundle, raw = shown[0]
    assert raw is True
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == box.model_id
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")


def test_the_facades_re_export_each_chapter_modules_public_names():
    """`widgets` and `plots` define nothing: each public name of the ch. 1-3 view modules is on one of them."""
    from scalebook_utils import plots
    from scalebook_utils.views import (
        ch01_figures,
        ch01_roofline_plots,
        ch01_rooflines,
        ch02_systolic,
        ch02_tpus,
        ch03_collectives,
        ch03_sharding,
    )

    for mod in (
        ch01_figures,
        ch01_roofline_plots,
        ch01_rooflines,
        ch02_systolic,
        ch02_tpus,
        ch03_collectives,
        ch03_sharding,
    ):
        for name in mod.__all__:
            facade = widgets if name in widgets.__all__ else plots
            assert name in facade.__all__, f"{mod.__name__}.{name} is in neither façade's __all__"
            assert getattr(facade, name) is getattr(mod, name), f"{facade.__name__}.{name}"
    for facade in (widgets, plots):
        own = sorted(n for n, v in vars(facade).items() if getattr(v, "__module__", None) == facade.__name__)
        assert own == [], f"{facade.__name__} defines {own}: a façade only re-exports"
        assert all(hasattr(facade, n) for n in facade.__all__)
