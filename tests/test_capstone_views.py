"""Chapter 11 capstone views: the readout line, the figure and the one-widget app (controls driven in Python)."""

import pytest

pytest.importorskip("ipywidgets")

import ipywidgets as W  # noqa: E402
from figure_support import _draw, _labelled  # noqa: E402
from IPython.display import Image  # noqa: E402

from scalebook_utils import capstone as C  # noqa: E402
from scalebook_utils import capstone_views as V  # noqa: E402
from scalebook_utils.views import ch11_capstone_figure as VF  # noqa: E402

DEFAULT = (
    "capstone: llama3-70b | train tpu-v5p×8960: FSDP 2240 × TP 4, 44.7 days at 40% MFU, $40.3M, compute-bound"
    " | serve tpu-v5e int8 (int8 weights + KV, int8 math): 4x2 (8 chips), B≤42, best ≤ 20 ms: B=256 on 128 chips, 501 tokens/s/chip"
)


# --- the readout --------------------------------------------------------------------------------------------------


def test_default_readout():
    line = V.capstone_readout()
    assert line == DEFAULT, line
    assert line.startswith(V.CAPSTONE_PREFIX)
    p = C.plan_model()
    assert line == f"capstone: llama3-70b | {p.training.headline()} | {p.serving.headline()}"
    assert V.capstone_readout("llama3-70b", "tpu-v5p", "tpu-v5e", C.Budget()) == line


def test_gpu_readout():
    line = V.capstone_readout(train_chip="h100", train_chips=4096, mfu=0.45, serve_chip="h100")
    # ch12.q22d: 15T tokens at 45% MFU on 4096 H100s ≈ 40 days; compute-bound with TP 8
    assert line.startswith(
        "capstone: llama3-70b | train h100×4096: DP+ZeRO-1 256 × TP 8 × PP 2, 40.3 days at 45% MFU"
    ), line
    assert (
        "compute-bound" in line
        and "| serve h100 int8 (int8 weights + KV, int8 math): 1 GPU, B≤7, best ≤ 20 ms: B=" in line
    )
    assert "train h100×1024: " in V.capstone_readout(train_chip="h100")  # the default: a 4-SU SuperPod


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(model="nope"), "capstone: nope → cannot plan: unknown model 'nope'"),
        (dict(mfu=1.5), "capstone: llama3-70b → cannot plan: mfu is the fraction"),
        (dict(train_tokens=-1), "cannot plan: train_tokens must be a positive number"),
        (dict(budget="cheap"), "cannot plan: budget must be a capstone.Budget"),
        (dict(train_chip="tpu-v9"), "| train tpu-v9: error — unknown chip 'tpu-v9'"),
        (dict(train_chip="v100"), "| train v100: error — book ch. 12 gives no node egress"),
        (dict(train_chips=9000), "| train tpu-v5p: error — a tpu-v5p pod has 8,960 chips"),
        (dict(serve_chip="v100"), "| serve v100: error — v100 has no int8 matmul peak"),
    ],
)
def test_bad_input_gives_an_error_line(kwargs, needle):
    line = V.capstone_readout(**kwargs)
    assert line.startswith(V.CAPSTONE_PREFIX) and needle in line, line


def test_one_bad_side_keeps_the_other():
    line = V.capstone_readout(serve_chip="v100")
    assert "train tpu-v5p×8960: FSDP 2240 × TP 4" in line and "serve v100: error" in line
    line = V.capstone_readout(model="llama3-405b", train_chips=64)
    assert "no feasible layout" in line and "serve tpu-v5e int8 (int8 weights + KV, int8 math): 4x8 (32 chips)" in line


# --- the figure ------------------------------------------------------------------------------------------------------


def test_figure_default():
    fig = _draw(V.capstone_figure())
    train, serve = fig.axes
    _labelled(train)
    _labelled(serve)
    assert "(ms)" in train.get_xlabel() and "(ms)" in serve.get_xlabel() and "tokens/s" in serve.get_ylabel()
    assert [t.get_text() for t in train.get_yticklabels()] == ["TP comms", "DP/FSDP comms", "compute"]
    assert "FSDP 2240 × TP 4" in train.get_title()
    marks = [t.get_text() for t in serve.get_legend().get_texts()]  # the markers' key, the same for every plan
    assert marks == ["Pareto frontier", "latency cap 20 ms", "smallest slice's best", "chosen (best under the cap)"]
    assert serve.artists[0].get_title().get_text() == "tpu-v5e slices"
    slices = [t.get_text() for a in serve.artists for t in a.get_texts()]  # the slice key, one colour per slice
    assert slices[0] == "4x2 (8 chips)" and slices[-1] == "16x16 (256 chips)" and len(slices) == len(set(slices))
    assert len(serve.collections) == 1 and len(serve.collections[0].get_offsets()) > len(slices)  # every batch
    (numbers,) = [t.get_text() for t in serve.texts]  # the two marked points' numbers, next to the markers' key
    assert numbers == "★ B=256 on 128 chips,\n   501 tokens/s/chip\n◆ B=42 on 8 chips", numbers
    assert serve.get_xscale() == serve.get_yscale() == "log"


def test_serving_axes_ticks():
    assert VF._log_ticks(2.06, 32.5) == [5.0, 10.0, 20.0]  # 1, 2, 5 per decade over a few decades
    assert VF._log_ticks(0.012, 2843.0) == [0.1, 1.0, 10.0, 100.0, 1000.0]  # decades alone over more than four


def test_figure_gpu_and_errors():
    fig = _draw(V.capstone_figure(train_chip="h100", serve_chip="h100"))
    assert "h100" in fig.axes[0].get_title()
    assert fig.axes[1].artists[0].get_title().get_text() == "h100 slices"  # the serving chip heads the slice key
    assert [t.get_text() for t in fig.axes[1].artists[0].get_texts()] == ["1 GPU", "2 GPUs", "4 GPUs", "8 GPUs"]
    bad = _draw(V.capstone_figure(model="nope"))
    assert any("cannot plan: unknown model" in t.get_text() for ax in bad.axes for t in ax.texts)
    half = _draw(V.capstone_figure(serve_chip="v100"))
    assert half.axes[0].get_title() and any("serving: cannot plan" in t.get_text() for t in half.axes[1].texts)


# --- the app -------------------------------------------------------------------------------------------------------------


def _descendants(w):
    yield w
    for c in getattr(w, "children", ()):
        yield from _descendants(c)


@pytest.fixture(scope="module")
def app():
    return V.plan_app()


def test_app_is_one_widget(app):
    assert isinstance(app, W.VBox)
    inside = list(_descendants(app))
    for c in app.controls.values():
        assert any(c is w for w in inside)
    train, serve = app.panes
    assert V.TRAIN_PANE_CLASS in train._dom_classes and V.SERVE_PANE_CLASS in serve._dom_classes
    row = next(w for w in inside if isinstance(w, W.HBox) and list(w.children) == [train, serve])
    assert row is not None  # side by side
    readout = next(w for w in inside if V.READOUT_CLASS in w._dom_classes)
    assert V.capstone_readout() in readout.value
    assert app.controls["train_chip"].description == V.TRAIN_CHIP_LABEL
    assert app.controls["mfu"].continuous_update is False


def test_app_default_state(app):
    assert app.last_readout == DEFAULT == app.readout()
    train, serve = (p.value for p in app.panes)
    assert "Training plan" in train and "FSDP 2240 × TP 4" in train and "<b>Why</b>" in train
    assert train.count("<li>") >= 10
    assert "Serving plan" in serve and "4x2 (8 chips)" in serve and "B_crit ≈ 240" in serve
    assert app.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert isinstance(app.snapshot(), Image)


def test_app_follows_its_controls():
    app = V.plan_app()
    c = app.controls
    c["mfu"].value = 0.5
    assert "35.7 days at 50% MFU" in app.last_readout and "50% MFU" in app.panes[0].value
    png = app.image.value
    c["train_chip"].value = "h100"
    assert app.last_readout == V.capstone_readout(train_chip="h100", mfu=0.5)
    assert "h100" in app.panes[0].value and "FSDP 2240 × TP 4" not in app.panes[0].value
    assert app.image.value != png
    c["serve_chip"].value = "h100"
    assert "1 GPU" in app.panes[1].value
    c["max_latency"].value = 1.0
    assert "no configuration meets 1 ms" in app.panes[1].value
    c["train_chips"].value = 512
    assert "train h100×512: " in app.last_readout
    c["max_days"].value = 30
    assert "over the 30-day deadline" in app.panes[0].value
    assert app.last_update_s < 3, app.last_update_s  # ≈ 0.3 s here; cached plans + one PNG


def test_app_custom_model_and_bad_values():
    app = V.plan_app()
    c = app.controls
    custom = next(w for w in _descendants(app) if isinstance(w, W.HBox) and c["L"] in w.children)
    assert custom.layout.display == "none"
    c["model"].value = V.CUSTOM
    assert custom.layout.display == ""
    assert c["L"].value == 80 and c["D"].value == 8192  # starts from the preset that was selected
    assert app.last_readout.startswith("capstone: custom | train tpu-v5p×8960: FSDP 2240 × TP 4")
    c["L"].value = 4
    assert app.last_readout.startswith("capstone: custom | ") and "FSDP 2240 × TP 4" not in app.last_readout
    c["K"].value = 3  # 3 KV heads do not divide N = 64
    assert "cannot plan: K (KV heads) must divide N" in app.last_readout
    assert "cannot plan" in app.panes[0].value and "cannot plan" in app.panes[1].value
    c["K"].value = 8
    c["tokens"].value = -1
    assert "train_tokens must be a positive number" in app.panes[0].value
    c["tokens"].value = 15
    c["model"].value = "llama3-8b"
    assert custom.layout.display == "none" and app.last_readout.startswith("capstone: llama3-8b | ")


def test_two_controls_in_a_row_both_show():
    """Two quick changes (MFU, then precision) both reach the readout; how fast is `make bench`'s capstone section."""
    app = V.plan_app()
    app.controls["mfu"].value = 0.45
    app.controls["precision"].value = "bf16"
    assert "bf16" in app.last_readout and "45% MFU" in app.last_readout
