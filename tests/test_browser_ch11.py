"""Real-browser test for the chapter-11 capstone rendered as an app: Voilà serves
``notebooks/11_conclusion.ipynb`` (outputs only, no code cells) to headless Debian Chromium; the test waits
for the plan's readout, checks that no code is on the page and that the two plans stand side by side, then
switches the training chip to a GPU and waits for both panes and the readout to follow.

Helpers: ``tests/browser_support.py`` (Chromium), ``tests/voila_support.py`` (the Voilà server).
Screenshots: ``/tmp/browser-ch11-*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import browser_support as bs
import pytest
import voila_support as vs

REPO = Path(__file__).resolve().parents[1]
CAPSTONE = REPO / "notebooks" / "11_conclusion.ipynb"

pytestmark = bs.browser_marks()

READOUT = ".scalebook-capstone-readout"
TRAIN_PANE = ".scalebook-train-pane"
SERVE_PANE = ".scalebook-serve-pane"


def _text(page, selector: str) -> str:
    loc = page.locator(selector)
    return loc.first.inner_text() if loc.count() else ""


def _select(page, description: str, value: str) -> None:
    """Choose `value` in the ipywidgets Dropdown whose label is `description` (a <select> in Voilà)."""
    label = page.locator(".widget-label", has_text=bs._label_re(description))
    box = page.locator(".widget-dropdown").filter(has=label).locator("select")
    assert box.count() == 1, f"expected one dropdown described {description!r}, found {box.count()}"
    box.scroll_into_view_if_needed(timeout=10_000)
    box.select_option(value)


@pytest.mark.timeout(300)
def test_capstone_renders_as_app_and_replans(page):
    from scalebook_utils import capstone_views as CV

    assert CAPSTONE.exists(), f"{CAPSTONE} is missing"
    with vs.voila_server(CAPSTONE, REPO) as server:
        try:
            t0 = time.monotonic()
            page.goto(server.app_url(), timeout=120_000)
            before = bs.wait_until(
                lambda: (t := _text(page, READOUT)).startswith(CV.CAPSTONE_PREFIX) and t,
                150,
                "the capstone readout to appear",
            )
            bs.log(f"capstone rendered after {time.monotonic() - t0:.1f}s: {before!r}")
            page.locator(TRAIN_PANE).first.scroll_into_view_if_needed(timeout=10_000)
            bs.screenshot(page, "ch11-1-rendered")

            # What the kernel shows is the pure readout for the default inputs.
            assert before.strip() == CV.capstone_readout(), before
            # An app, not a notebook: no code, no prompts, no tracebacks.
            body = page.locator("body").inner_text()
            for code in ("import ", "from scalebook_utils", "plan_app(", "Traceback"):
                assert code not in body, f"{code!r} is visible in the Voilà page"
            assert page.locator(".jp-InputPrompt").count() == 0
            # Both plans, side by side, each with its reasons.
            train, serve = page.locator(TRAIN_PANE).first, page.locator(SERVE_PANE).first
            tb, sb = train.bounding_box(), serve.bounding_box()
            assert tb and sb and tb["x"] + tb["width"] <= sb["x"] + 1, (tb, sb)
            assert abs(tb["y"] - sb["y"]) < 40, (tb, sb)
            assert "FSDP 2240 × TP 4" in train.inner_text(), train.inner_text()
            assert "4x2" in serve.inner_text(), serve.inner_text()

            # Re-plan training on GPUs: the readout and the training pane follow.
            _select(page, CV.TRAIN_CHIP_LABEL, "h100")
            after = bs.wait_until(
                lambda: (t := _text(page, READOUT)) != before and "h100" in t and t, 60, "the readout to name h100"
            )
            bs.log(f"re-planned after {time.monotonic() - t0:.1f}s: {after!r}")
            bs.wait_until(lambda: "h100" in train.inner_text(), 30, "the training pane to show the H100 plan")
            train.scroll_into_view_if_needed(timeout=10_000)
            bs.screenshot(page, "ch11-2-h100")
            assert after.strip() == CV.capstone_readout(train_chip="h100"), after
            assert "FSDP 2240 × TP 4" not in train.inner_text()
            assert page.scalebook_writes == [], page.scalebook_writes
            problems = [p for p in page.scalebook_problems if "ERR_FAILED" not in p]
            bs.log(f"{len(page.scalebook_problems)} console error(s) ({len(problems)} other than blocked CDN fonts)")
        except BaseException:
            bs.screenshot(page, "ch11-failure")
            bs.log(f"voila log tail:\n{server.log_tail(40)}")
            raise
