"""Real-browser tests: JupyterLab in headless Debian Chromium, Run All, then work a widget control.

Needs ``/usr/bin/chromium`` (CI installs it via ``.ci/run``); skipped only when it is missing.
Helpers live in ``tests/browser_support.py``. Screenshots: ``/tmp/browser-*.png``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import browser_support as bs
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTER1 = "notebooks/01_rooflines.ipynb"
MARKER = "roofline explorer: B="

pytestmark = bs.browser_marks()


@pytest.fixture
def harness_root():
    d = Path(tempfile.mkdtemp(prefix="scalebook-harness-"))
    bs.write_harness_notebook(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def harness_server(harness_root):
    with bs.lab_server(harness_root) as server:  # stopped (killpg) however the test ends
        yield server


def _check_markers(before: str, after: str) -> None:
    assert before.startswith(MARKER) and after.startswith(MARKER)
    b0, b1 = bs.marker_value(before), bs.marker_value(after)
    assert b0 and b1 and b0 != b1, (before, after)


@pytest.mark.timeout(180)
def test_browser_harness_slider(harness_server, page):
    """The harness on a generated one-widget notebook served from a temp root dir."""
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(page, harness_server, "harness.ipynb", MARKER, "B", name="harness")
    _check_markers(before, after)
    assert before.startswith("roofline explorer: B=128 ")
    assert after.startswith("roofline explorer: B=1024 → compute-bound")
    bs.log(f"harness test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes


@pytest.mark.timeout(240)
def test_chapter1_roofline_explorer(repo_server, page):
    """Chapter 1: Run All in JupyterLab, then move the roofline explorer's B slider."""
    assert (REPO / CHAPTER1).exists(), f"{CHAPTER1} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(page, repo_server, CHAPTER1, MARKER, "B", name="ch1")
    _check_markers(before, after)
    bs.log(f"chapter-1 test body took {time.monotonic() - t0:.1f}s")
    # Running the notebook in the browser must not write it back (autosave is off in the harness).
    assert page.scalebook_writes == [], page.scalebook_writes


CHAPTER2 = "notebooks/02_tpus.ipynb"
SLICE_CALL = re.compile(r"""widgets\.slice_calculator\(\s*chip\s*=\s*"([^"]+)"\s*,\s*shape\s*=\s*"([^"]+)"\s*\)""")


def _slice_calculator_defaults() -> tuple[str, str]:
    """(chip, shape) that chapter 2 builds its slice calculator with, read from the notebook."""
    nb = json.loads((REPO / CHAPTER2).read_text())
    calls = [m.groups() for c in nb["cells"] if c["cell_type"] == "code"
             for m in SLICE_CALL.finditer("".join(c["source"]))]  # fmt: skip
    assert len(calls) == 1, f"expected one slice_calculator(chip=..., shape=...) call: {calls}"
    return calls[0]


@pytest.mark.timeout(240)
def test_chapter2_slice_calculator(repo_server, page):
    """Chapter 2: Run All in JupyterLab, then type a new shape into the slice calculator."""
    from scalebook_utils import topology, widgets

    assert (REPO / CHAPTER2).exists(), f"{CHAPTER2} is missing"
    chip, default_shape = _slice_calculator_defaults()
    new_shape = "8x16" if default_shape != "8x16" else "4x4"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_edit_text(
        page, repo_server, CHAPTER2, widgets.SLICE_PREFIX, "shape", new_shape, name="ch2"
    )
    # What the kernel prints is the readout of the pure function for the same inputs.
    assert before == widgets.slice_readout(chip, default_shape), before
    assert after == widgets.slice_readout(chip, new_shape), after
    assert before != after
    assert after.startswith(f"{widgets.SLICE_PREFIX}{chip} {new_shape} → ")
    n_chips = topology.make_slice(chip, new_shape).n_chips
    assert f" {n_chips:,} chips" in after and f" {n_chips:,} chips" not in before, (before, after)
    bs.log(f"chapter-2 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes


CHAPTER3 = "notebooks/03_sharding.ipynb"


@pytest.mark.timeout(300)
def test_chapter3_sharding_explorer(repo_server, page):
    """Chapter 3: Run All, then give the sharding explorer a new target sharding for C.

    The explorer must re-plan (a ppermute over XY to reach C[I, K_XY]) and re-compile on the
    kernel's 8 simulated devices, find the result equal to the unsharded product and XLA's
    collectives in agreement with the plan.
    """
    from scalebook_utils import widgets

    assert (REPO / CHAPTER3).exists(), f"{CHAPTER3} is missing"
    new_target = "C[I, K_XY]"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_edit_text(
        page, repo_server, CHAPTER3, widgets.SHARDING_PREFIX, "target", new_target, name="ch3"
    )
    assert "→ C[I, K_Y]" in before and "agree" in before, before
    assert f"→ {new_target}" in after, after
    assert "ppermute(XY)" in after and "ppermute" not in before, (before, after)
    assert "C == A·B: True" in after and "agree" in after, after
    bs.log(f"chapter-3 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes


SHOW_CELL = """\
from scalebook_utils import widgets
explorer = widgets.roofline_explorer(chip="tpu-v5e", mode="bf16", D=8192, F=8192, B=128)
widgets.show(explorer)
"""

_IMAGES = """() => Array.from(document.querySelectorAll('.jp-CodeCell')).map(c => ({
    widgets: c.querySelectorAll('.jp-OutputArea-output .widget-output, .jp-OutputArea-output .jupyter-widget-Output'
                                ).length,
    images: c.querySelectorAll('.jp-OutputArea-output img').length,
    text: (c.querySelector('.jp-OutputArea') || {innerText: ''}).innerText}))"""


@pytest.fixture
def show_root():
    import nbformat

    d = Path(tempfile.mkdtemp(prefix="scalebook-show-"))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("print('setup done')"), nbformat.v4.new_code_cell(SHOW_CELL)]
    nbformat.write(nb, d / "show.ipynb")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(240)
def test_widgets_show_draws_one_figure_per_widget_cell(show_root, page):
    """`widgets.show(w)` in JupyterLab: the cell shows the live widget and ONE picture (the widget's own), before
    and after a slider step; the static PNG in the same output is only for renderers without a kernel."""
    with bs.lab_server(show_root) as server:
        before, after = bs.run_notebook_and_drive_slider(page, server, "show.ipynb", MARKER, "B", name="show")
        _check_markers(before, after)
        cells = page.evaluate(_IMAGES)
        bs.log(f"show.ipynb cells after the step: {cells}")
        widget_cell = cells[-1]
        assert MARKER in widget_cell["text"] and widget_cell["widgets"] >= 1, cells
        assert widget_cell["images"] == 1, f"expected one figure in the widget cell, got {cells}"
        assert page.scalebook_writes == [], page.scalebook_writes
