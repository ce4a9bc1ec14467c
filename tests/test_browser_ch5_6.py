"""Real-browser tests for chapters 5 and 6: JupyterLab in headless Debian Chromium, Run All, then work a widget.

Chapter 5: move the "B/N" slider of the central picture (T_math/T_comms against the batch per chip).
Chapter 6: move the planner's "slices" slider (more pods over DCN).
Helpers: ``tests/browser_support.py``. Screenshots: ``/tmp/browser-ch5-*.png``, ``/tmp/browser-ch6-*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_support as bs
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTER5 = "notebooks/05_training.ipynb"
CHAPTER6 = "notebooks/06_applied_training.ipynb"

pytestmark = bs.browser_marks()


@pytest.mark.timeout(300)
def test_chapter5_training_picture(repo_server, page):
    """Chapter 5: Run All, then move the central picture's B/N slider to its end (1e5 tokens per chip)."""
    from scalebook_utils import training_views as V

    assert (REPO / CHAPTER5).exists(), f"{CHAPTER5} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(page, repo_server, CHAPTER5, V.PICTURE_PREFIX, "B/N", name="ch5")
    # What the kernel prints is the readout of the pure function for the same inputs.
    assert before == V.picture_readout("tpu-v5p", "4x4x4", 30_000, 850), before
    assert bs.marker_value(after, "B/N") == "100000", after
    assert after == V.picture_readout("tpu-v5p", "4x4x4", 30_000, 1e5), after
    assert "→ FSDP+TP compute-bound" in before and "→ FSDP compute-bound" in after, (before, after)
    bs.log(f"chapter-5 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes


@pytest.mark.timeout(300)
def test_chapter6_planner_slices(repo_server, page):
    """Chapter 6: Run All, then move the planner's slices slider (4 → 16 pods over DCN) and see a new plan."""
    from scalebook_utils import training_views as V

    assert (REPO / CHAPTER6).exists(), f"{CHAPTER6} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(
        page, repo_server, CHAPTER6, V.PLANNER_PREFIX, "slices", name="ch6"
    )
    # the notebook opens the planner on Worked Problem 1's 4 pods (one pod is chapter 5's default view)
    assert before == V.planner_readout("llama3-70b", "tpu-v5p", slices=4, batch_tokens=4 * 2**20), before
    assert "slices=4" in before and "best: DP+ZeRO-1 1120 × TP 8 × 4 slices (DCN)" in before, before
    assert bs.marker_value(after, "slices") == "16", after
    assert after == V.planner_readout("llama3-70b", "tpu-v5p", 8960, 16, 4 * 2**20, 4096, True), after
    assert "× 16 slices (DCN)" in after, after
    bs.log(f"chapter-6 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes
