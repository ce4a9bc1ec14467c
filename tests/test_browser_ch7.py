"""Real-browser test for chapter 7: JupyterLab in headless Debian Chromium, Run All, then work a widget.

Move the batch slider "B" of the decode step-time widget to its end (B_max, the largest batch whose KV caches
fit beside the weights) and wait for the readout line to change. Helpers: ``tests/browser_support.py``.
Screenshots: ``/tmp/browser-ch7-*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_support as bs
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTER7 = "notebooks/07_inference.ipynb"

pytestmark = bs.browser_marks()


@pytest.mark.timeout(300)
def test_chapter7_step_time_batch(repo_server, page):
    """Chapter 7: Run All, then move the step-time widget's B slider from 32 to B_max = 138."""
    from scalebook_utils import inference_views as V

    assert (REPO / CHAPTER7).exists(), f"{CHAPTER7} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(page, repo_server, CHAPTER7, V.STEP_PREFIX, "B", name="ch7")
    # What the kernel prints is the readout of the pure function for the same inputs.
    args = ("llama3-70b", "tpu-v5e", "4x4", "int8-weights", 8192)
    assert before == V.step_time_readout(*args, 32), before
    assert bs.marker_value(after, "B") == "138", after
    assert after == V.step_time_readout(*args, 138), after
    assert "weights-bound" in before and "KV-bound" in after, (before, after)
    bs.log(f"chapter-7 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes
