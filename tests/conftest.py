"""Shared fixtures of the browser tests (tests/test_browser*.py): a headless chromium page and a JupyterLab
server over the repository. Both are stopped however the test ends."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def page():
    import browser_support as bs

    with bs.chromium_page() as p:
        yield p


@pytest.fixture
def repo_server():
    import browser_support as bs

    with bs.lab_server(REPO) as server:  # stopped (killpg) however the test ends
        yield server
