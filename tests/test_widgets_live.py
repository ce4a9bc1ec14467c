"""In-place widget updates (widgets.LiveFigure): a slider step shows what a fresh render shows.

A step keeps the figure's layout and, where the view names the parts a control moves, redraws only those over
the kept background. These tests step real widgets and compare the PNG the view emitted with the same figure
drawn whole, pixel by pixel, and the stepped figure with a fresh render by content (readout, line data, texts).
No timings here: speed is measured by `make bench` (benchmarks/widget_steps.py).
"""

import contextlib
import io

import numpy as np
import pytest

pytest.importorskip("ipywidgets")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from PIL import Image  # noqa: E402

from scalebook_utils import applied_inference_views as aiv  # noqa: E402
from scalebook_utils import capstone_views as cv  # noqa: E402
from scalebook_utils import gpu_views as gv  # noqa: E402
from scalebook_utils import inference_views as iv  # noqa: E402
from scalebook_utils import training_views as trv  # noqa: E402
from scalebook_utils import widgets  # noqa: E402
from scalebook_utils.views import _kit as widgets_kit  # noqa: E402
from scalebook_utils.views import live_parts  # noqa: E402


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(int)


def _full_draw(fig: Figure) -> np.ndarray:
    """`fig` drawn whole, with the positions it has (the kept layout), at its dpi."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).astype(int)


def _differs(a: np.ndarray, b: np.ndarray) -> float:
    """Share of pixels that differ visibly (any channel by more than 48 of 255); 1.0 for another size."""
    if a.shape != b.shape:
        return 1.0
    return float((np.abs(a - b).max(axis=2) > 48).mean())


def _content(fig: Figure) -> list:
    """What a figure shows, artist by artist: per Axes its title, labels, limits, line data and texts."""
    out = [sorted(t.get_text() for t in fig.texts)]
    for ax in fig.axes:
        out.append(
            (
                ax.get_title(),
                ax.get_xlabel(),
                ax.get_ylabel(),
                ax.get_xscale(),
                ax.get_yscale(),
                np.round(ax.get_xlim(), 9).tolist(),
                np.round(ax.get_ylim(), 9).tolist(),
                [
                    np.round(np.nan_to_num(np.asarray(ln.get_xydata(), float), nan=-12345.0), 9).tolist()
                    for ln in ax.lines
                ],
                sorted(t.get_text() for t in ax.texts),
                len(ax.patches),
                len(ax.collections),
            )
        )
    return out


def _quiet(fn):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn()


#: (builder, control, values): the blitted ones redraw only the moving parts after the first step.
STEPS = [
    (widgets.roofline_explorer, "B", [512, 4096, 1, 240, 1000]),
    (widgets.collective_cost_explorer, "n_bytes", [1e4, 1e9, 3e6]),
    (lambda: widgets.torus_explorer(chip="tpu-v5e", shape="4x4"), "dst", ["1,2", "3,0", "2,2"]),
    (trv.training_picture, "B", [200.0, 2000.0, 500.0]),
    (iv.step_time_widget, "B", [1, 64, 100]),
    (aiv.tp_check_widget, "B", [16, 200, 100]),
    (gv.gpu_collective_widget, "n_bytes", [1e6, 1e10, 3e8]),
    (aiv.disaggregation_widget, "decode", [1024, 4096, 128, 2048]),
    (gv.topology_explorer, "n_sus", [1, 8, 3, 6]),
    (trv.planner_widget, "slices", [2, 16, 4]),
]


@pytest.mark.parametrize("build,control,values", STEPS, ids=[f"{i}-{c}" for i, (_b, c, _v) in enumerate(STEPS)])
def test_a_step_shows_what_a_fresh_render_shows(build, control, values):
    w = _quiet(build)
    live = w.live_figure
    for v in values:
        _quiet(lambda v=v: setattr(w.controls[control], "value", v))
        assert w.last_readout == w.readout()
        fresh = w.render()
        assert _content(live.figure) == _content(fresh), f"{control}={v}"
        share = _differs(_pixels(w.last_png), _full_draw(live.figure))
        assert share < 0.002, f"{control}={v}: {share:.2%} of the pixels differ from a full draw"
    # one layout pass, one background without the moving parts (at most a second when another part starts moving)
    assert live.full_draws <= 3 and live.blits >= len(values) - 2, (live.full_draws, live.blits)


def test_the_capstone_figure_steps_like_a_full_draw():
    """The chapter-11 app draws through its own LiveFigure (cached PNGs); a serving-chip change redraws one side."""
    app = _quiet(cv.plan_app)
    live = app.live_figure
    for chip in ["h100", "tpu-v5p", "tpu-v6e", "tpu-v5e"]:
        cv._figure_png_cached.cache_clear()
        _quiet(lambda chip=chip: setattr(app.controls["serve_chip"], "value", chip))
        share = _differs(_pixels(app.last_png), _full_draw(live.figure))
        assert share < 0.002, f"serve_chip={chip}: {share:.2%} of the pixels differ from a full draw"
    assert live.blits >= 2, (live.full_draws, live.blits)


def _under_legend(y: float) -> Figure:
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    ax.bar([0, 1, 2], [0.5, 0.8, 0.3], color="#9ecae1", label="static bars")
    ax.plot([0, 2], [y, y], color="k", lw=6, label="moving line")  # passes under the legend at y ≈ 0.9
    ax.set_ylim(0, 1)
    ax.grid(True, axis="y")  # the grid sits over the bars and under the line (axisbelow="line")
    ax.legend(loc="upper center", framealpha=1.0)
    return fig


def test_a_static_legend_and_grid_over_a_moving_line_stay_on_top():
    """A full draw paints the legend over the line; blitting the line alone would cover the legend. The static
    parts painted over a moving one are kept in a layer composited each step: the step equals a full draw."""
    live = widgets.LiveFigure()
    for y in (0.1, 0.9, 0.6, 0.92):
        png = live.png(lambda y=y: _under_legend(y), key="k")
        diff = np.abs(_pixels(png) - _full_draw(live.figure)).max(axis=2)
        assert (diff > 8).sum() == 0, f"y={y}: {(diff > 8).sum()} pixels differ from a full draw"
    assert live.blits >= 1 and any(n[1] == "legend" for n in live._over), live._over


def _two_lines(y: float, title: str = "t") -> Figure:
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], gid="static")
    ax.plot([0.5], [y], "o", gid="moving")
    ax.set_ylim(-0.1, 1.1)
    ax.set_title(title)
    return fig


def test_blitting_redraws_only_the_moving_artist_and_matches_a_full_draw():
    live = widgets.LiveFigure()
    live.png(lambda: _two_lines(0.2), key="k")
    live.png(lambda: _two_lines(0.5), key="k")  # the dot moves: a background without it
    assert live.full_draws == 2 and live.blits == 0
    png = live.png(lambda: _two_lines(0.8), key="k")
    assert live.full_draws == 2 and live.blits == 1
    assert _differs(_pixels(png), _full_draw(live.figure)) < 0.002
    assert live.figure.axes[0].lines[1].get_ydata()[0] == 0.8
    again = live.png(lambda: _two_lines(0.2), key="k")
    assert live.blits == 2 and _differs(_pixels(png), _pixels(again)) > 0  # the dot moved


def test_a_wrong_key_shows_a_stale_background_and_the_pixel_check_catches_it():
    """The check the widget tests rely on can fail: a background restored under a part that changed (here: forced by
    telling the figure that nothing moves) keeps the old picture, and the pixel comparison sees it."""
    live = widgets.LiveFigure()
    live.png(lambda: _two_lines(0.2), key="same")
    live.png(lambda: _two_lines(0.5), key="same")
    live._sigs = {
        n: live_parts.part_sig(n, a) for n, a in live_parts.drawable_parts(_two_lines(0.2, title="x")).items()
    }
    live._moving, live._plan = set(), []  # stale: the dot will move but is not known to (nor drawn each step)
    png = live.png(lambda: _two_lines(0.2, title="x"), key="same")
    assert _differs(_pixels(png), _full_draw(live.figure)) > 0.0005


def test_a_new_key_or_another_figure_shape_draws_the_whole_figure():
    live = widgets.LiveFigure()
    live.png(lambda: _two_lines(0.2), key=1)
    live.png(lambda: _two_lines(0.3), key=2)
    assert live.full_draws == 2
    live.png(lambda: widgets_kit.message_figure("cannot draw: x"), key=2)
    assert live.full_draws == 3
    png = live.png(lambda: _two_lines(0.4))  # no key: always whole
    assert live.full_draws == 4 and png.startswith(b"\x89PNG")
    assert _pixels(png).shape[1] == round(4 * widgets.SCREEN_DPI)


def test_a_failing_render_gives_a_message_figure_not_an_exception():
    box = _quiet(widgets.roofline_explorer)

    def broken():
        raise RuntimeError("boom")

    png = widgets_kit.figure_png(box, broken, key="x")
    assert png.startswith(b"\x89PNG")
    assert "cannot draw: RuntimeError: boom" in box.live_figure.figure.texts[0].get_text()
