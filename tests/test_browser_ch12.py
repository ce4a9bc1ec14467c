"""Real-browser test for chapter 12: JupyterLab in headless Debian Chromium, Run All, then move the topology
explorer's "SUs" slider (4 → 8 scalable units of DGX H100), then the roofline calculator's "B (tokens)" slider
(4M → 100M tokens).

Helpers: ``tests/browser_support.py``. Screenshots: ``/tmp/browser-ch12-*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_support as bs
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTER12 = "notebooks/12_gpus.ipynb"

pytestmark = bs.browser_marks()


@pytest.mark.timeout(300)
def test_chapter12_topology_explorer(repo_server, page):
    """Run All, then move the SUs slider to its end (8 SUs = 2048 GPUs) and see the readout follow."""
    from scalebook_utils import gpu_views as V

    assert (REPO / CHAPTER12).exists(), f"{CHAPTER12} is missing"
    t0 = time.monotonic()
    before, after = bs.run_notebook_and_drive_slider(
        page, repo_server, CHAPTER12, V.TOPOLOGY_PREFIX, "SUs", name="ch12"
    )
    # What the kernel prints is the readout of the pure function for the same inputs.
    assert before == V.topology_readout("h100", 4), before
    assert bs.marker_value(after, "SUs") == "8", after
    assert after == V.topology_readout("h100", 8), after
    assert "→ 2048 GPUs" in after and "spine: 2048 GPUs" in after, after

    # The roofline calculator on the same page: its batch slider to the end (10^8 tokens)
    first = bs.wait_marker(page, V.GPU_ROOFLINE_PREFIX, lambda ln: True, 30, "the roofline calculator's readout")
    assert first == V.gpu_roofline_readout("dp", "h100", 4e6, 8192, 28_672, 1024, True, 8), first
    bs.move_slider(page, "B (tokens)", V.GPU_ROOFLINE_PREFIX)
    moved = bs.wait_marker(
        page,
        V.GPU_ROOFLINE_PREFIX,
        lambda ln: bs.marker_value(ln, "B") not in (None, "4M"),
        30,
        "the roofline readout to show a new B",
    )
    assert moved == V.gpu_roofline_readout("dp", "h100", 1e8, 8192, 28_672, 1024, True, 8), moved
    bs.screenshot(page, "ch12-4-roofline")
    bs.log(f"chapter-12 test body took {time.monotonic() - t0:.1f}s")
    assert page.scalebook_writes == [], page.scalebook_writes
