"""Real-browser tests: JupyterLab in headless Debian Chromium, Run All, then drive a widget slider.

Needs ``/usr/bin/chromium`` (CI installs it via ``.ci/run``); skipped only when it is missing.
Helpers live in ``tests/browser_support.py``. Screenshots: ``/tmp/browser-*.png``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import browser_support as bs

REPO = Path(__file__).resolve().parents[1]
CHAPTER1 = "notebooks/01_rooflines.ipynb"
MARKER = "roofline explorer: B="

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.access(bs.CHROMIUM, os.X_OK),
        reason=f"{bs.CHROMIUM} is missing (install Debian's 'chromium' package; .ci/run does)",
    ),
]


@pytest.fixture
def page():
    with bs.chromium_page() as p:
        yield p


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


@pytest.fixture
def repo_server():
    with bs.lab_server(REPO) as server:
        yield server


def _check_markers(before: str, after: str) -> None:
    assert before.startswith(MARKER) and after.startswith(MARKER)
    b0, b1 = bs.marker_value(before), bs.marker_value(after)
    assert b0 and b1 and b0 != b1, (before, after)


@pytest.mark.timeout(180)
def test_browser_harness_slider(harness_server, page):
    """The harness on a generated one-widget notebook served from a temp root dir."""
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(
        page, harness_server, "harness.ipynb", MARKER, "B", name="harness"
    )
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
    before, after = bs.run_notebook_and_drive_slider(
        page, repo_server, CHAPTER1, MARKER, "B", name="ch1"
    )
    _check_markers(before, after)
    bs.log(f"chapter-1 test body took {time.monotonic() - t0:.1f}s")
    # Running the notebook in the browser must not write it back (autosave is off in the harness).
    assert page.scalebook_writes == [], page.scalebook_writes
