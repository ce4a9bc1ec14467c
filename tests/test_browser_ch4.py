"""Real-browser test for chapter 4: JupyterLab in headless Debian Chromium, Run All, then work the calculator.

Move the parameter/FLOP/KV calculator's "T" slider (context length, 4096 → 1M tokens) and see its readout change.
Helpers: ``tests/browser_support.py``. Screenshots: ``/tmp/browser-ch4-*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_support as bs
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTER4 = "notebooks/04_transformers.ipynb"

pytestmark = bs.browser_marks()


@pytest.mark.timeout(300)
def test_chapter4_calculator(repo_server, page):
    """Chapter 4: Run All, then move the calculator's T slider to its end (2^20 tokens of context)."""
    from scalebook_utils import transformer_views as V

    assert (REPO / CHAPTER4).exists(), f"{CHAPTER4} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(page, repo_server, CHAPTER4, V.CALC_PREFIX, "T", name="ch4")
    # What the kernel prints is the readout of the pure function for the same inputs.
    assert before == V.calculator_readout("llama3-70b", 4096, 1), before
    assert "70.6B params" in before and "KV 320 KiB/token bf16" in before, before
    assert bs.marker_value(after, "T") == "1048576", after
    assert after == V.calculator_readout("llama3-70b", 2**20, 1), after
    bs.log(f"chapter-4 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes
