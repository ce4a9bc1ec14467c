"""Real-browser test for chapter 8: JupyterLab in headless Debian Chromium, Run All, then work a widget.

Move the disaggregation widget's "decode" slider (median answer length, 512 → 4096 tokens) and wait for its readout
to change: longer answers finish sequences less often, so fewer prefill servers are needed per generate server.
Helpers: ``tests/browser_support.py``. Screenshots: ``/tmp/browser-ch8-*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_support as bs
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTER8 = "notebooks/08_applied_inference.ipynb"

pytestmark = bs.browser_marks()


@pytest.mark.timeout(300)
def test_chapter8_disaggregation_decode_length(repo_server, page):
    """Chapter 8: Run All, then move the disaggregation widget's decode slider to its end (4096 tokens)."""
    from scalebook_utils import applied_inference_views as A

    assert (REPO / CHAPTER8).exists(), f"{CHAPTER8} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(page, repo_server, CHAPTER8, A.DISAGG_PREFIX, "decode", name="ch8")
    # What the kernel prints is the readout of the pure function for the same inputs.
    assert before == A.disaggregation_readout(8192, 512, 32, "4x4", "4x4", "bf16", 0.4), before
    assert bs.marker_value(after, "decode") == "4096", after
    assert after == A.disaggregation_readout(8192, 4096, 32, "4x4", "4x4", "bf16", 0.4), after
    ratio = lambda line: float(line.split(" prefill servers per generate server")[0].rsplit("| ", 1)[1])  # noqa: E731
    assert ratio(after) < ratio(before), (before, after)
    bs.log(f"chapter-8 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes
