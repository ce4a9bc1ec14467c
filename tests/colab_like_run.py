"""Run one notebook top to bottom with nbclient, in the Python that runs this script (the Colab-like venv).

Used by tests/test_colab_like.py; needs only nbclient/nbformat (Colab has both), never scalebook.
    python colab_like_run.py NOTEBOOK.ipynb OUT.ipynb  → prints one JSON line {ok, error, setup_s, total_s}
"""

import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def _seconds(cell) -> float | None:
    t = cell.metadata.get("execution", {})
    try:
        start = datetime.fromisoformat(t["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(t["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def main(src: str, out: str) -> None:
    nb = nbformat.read(src, as_version=4)
    # IPC sockets in a private folder, not TCP ports: notebooks run side by side (pytest -n 3), and kernels that
    # start at the same moment on TCP have stalled a widget cell for the whole cell timeout (tools/execute_notebooks.py
    # does the same)
    t0, error = time.perf_counter(), None
    with tempfile.TemporaryDirectory(prefix="sb-colab-kernel-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "k"))
        client = NotebookClient(nb, km=km, timeout=600, kernel_name="python3", record_timing=True,
                                resources={"metadata": {"path": str(Path(src).parent)}})
        try:
            client.execute()
        except CellExecutionError as e:
            error = str(e)[-3000:]
    total = time.perf_counter() - t0
    nbformat.write(nb, out)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    print(json.dumps({"ok": error is None, "error": error, "setup_s": _seconds(setup), "total_s": total}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
