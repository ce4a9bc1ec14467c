"""Chapter 9 in a real browser: XProf's trace viewer, opened on a trace written by the notebook's own cells, lists an
op of the profiled step by name.

The notebook's cells up to its `with jax.profiler.trace(...)` cell run in a fresh kernel in a temporary folder (so the
trace is the one a reader's run writes: the tiny model's training step, 3 steps, `StepTraceAnnotation("train")`).
XProf then serves that folder on 127.0.0.1 (`xprof_server.start`), headless Debian Chromium opens its trace viewer with
every non-loopback request aborted, and the test types the name of the op the project's parser found most expensive
into the viewer's "Find Events" box: the viewer must count its executions and show the name in its details panel.

XProf's front end loads offline: its page, Angular bundle and trace viewer are served by the XProf server. Only Google
Charts (www.gstatic.com, used by the overview page's charts) and a web font (fonts.googleapis.com) come from the
internet; both are aborted here and the trace viewer does not need them.

Skips when xprof is not installed (`pip install -e ".[profile]"`) or chromium is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "09_profiling.ipynb"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser_support as bs  # noqa: E402

from scalebook_utils import xprof_server  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(bs.CHROMIUM), reason="needs /usr/bin/chromium"),
    pytest.mark.skipif(
        xprof_server.find_xprof_python() is None, reason='xprof is not installed (pip install -e ".[profile]")'
    ),
]


def _run_notebook_until_trace(workdir: Path, monkeypatch) -> Path:
    """Execute the notebook's cells up to and including its `jax.profiler.trace` cell in `workdir`."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    cut = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "with jax.profiler.trace(" in c.source)
    nb.cells = nb.cells[: cut + 1]
    # the kernel imports this checkout's scalebook_utils
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}).execute()
    trace_dir = workdir / "profiles" / "ch09"
    assert list(trace_dir.rglob("*.xplane.pb")), f"the notebook wrote no trace under {trace_dir}"
    return trace_dir


def test_xprof_trace_viewer_lists_an_op_of_the_notebooks_trace(tmp_path, page, monkeypatch):
    from scalebook_utils import profiling as prof

    trace_dir = _run_notebook_until_trace(tmp_path, monkeypatch)
    trace = prof.load_trace(trace_dir)
    longest = max(trace.xla_ops(module=""), key=lambda e: e.duration_s)
    op = longest.hlo_op  # the op with the longest single execution, by our parser
    runs = sum(1 for e in trace.xla_ops(module="") if e.hlo_op == op)
    xp = xprof_server.start(trace_dir)
    try:
        assert xp.ok, xp.message
        run = xp.runs()[-1]
        host = (xp._get("hosts", run=run, tag="trace_viewer@") or [{}])[0].get("hostname", "")
        page.goto(
            f"{xp.url}data/plugin/profile/trace_viewer@?run={run}&tag=trace_viewer%40&host={host}&hosts={host}",
            timeout=120_000,
        )
        frame = None
        for _ in range(240):  # the viewer runs in an iframe and streams the trace in
            frame = next((f for f in page.frames if "trace_viewer_index.html" in f.url), None)
            if frame is not None and "python" in frame.inner_text("body"):  # the lane of the step annotations
                break
            page.wait_for_timeout(500)
        assert frame is not None and "python" in frame.inner_text("body"), "XProf's trace viewer did not load"
        page.wait_for_timeout(2000)
        box = frame.get_by_placeholder("Find Events...")
        box.click()
        box.type(op, delay=50)  # as a reader types it (the box searches as you type)
        box.press("Enter")
        found = None
        for _ in range(60):
            m = re.search(r"(\d+) of (\d+)", frame.inner_text("body"))
            if m and int(m.group(2)) > 0:
                found = int(m.group(2))
                break
            page.wait_for_timeout(500)
        bs.screenshot(page, "ch9-xprof-trace-viewer")
        assert found is not None and found >= runs, f"trace viewer found {found} events named {op!r}, want ≥ {runs}"
        frame.get_by_text("→", exact=True).first.click()  # select the first match: its details name it
        page.wait_for_timeout(1500)
        details = frame.inner_text("body")
        assert op in details, details[-600:]
        offline = [u for u in page.scalebook_blocked if "gstatic.com" not in u and "fonts.googleapis.com" not in u]
        assert not offline, f"XProf asked the internet for more than charts and fonts: {offline}"
    finally:
        xp.stop()
        shutil.rmtree(trace_dir, ignore_errors=True)
