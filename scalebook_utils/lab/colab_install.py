"""The install step of every notebook's setup cell, for runtimes without scalebook (Colab, Kaggle).

It runs before scalebook is installed, so it cannot be imported from here: `tools/stamp_colab.py` copies the
source of `install_scalebook` (between the markers below) into each notebook's setup cell, with the stamped
source and the runtime requirements (pyproject `dependencies`) as data, and tests/test_colab_stamp.py checks
that every cell holds this exact text. Standard library only.

Behaviour (issue 15): `$SCALEBOOK_SOURCE` overrides the stamped source; with neither, one sentence says what to
set. When every requirement is already installed at a version that satisfies it (Colab, Kaggle), pip runs with
`--no-deps`, so nothing preinstalled changes and no restart is needed. pip's output is captured; a source that
does not exist or an offline runtime gives one sentence naming the fix. Returns None on success, else that
sentence: the cell raises it as an exception whose `_render_traceback_` (IPython's hook) shows only that
sentence, which stops Run All without a traceback.
"""


# --- install_scalebook: begin (copied into notebooks by tools/stamp_colab.py) ---
def install_scalebook(source, requires, run=None):
    import importlib
    import importlib.metadata as md
    import os
    import re
    import subprocess
    import sys

    source = os.environ.get("SCALEBOOK_SOURCE") or source
    if not source:
        return (
            "scalebook is not installed and this notebook names no source: set the SCALEBOOK_SOURCE environment "
            "variable (e.g. %env SCALEBOOK_SOURCE=git+https://github.com/ORG/REPO@TAG) and run this cell again."
        )

    def have(req):  # "name>=1.2.3": installed at that version or newer?
        name, low = req.split(">=")
        try:
            got = [int(x) for x in re.findall(r"\d+", md.version(name))[:3]]
        except md.PackageNotFoundError:
            return False
        return got >= [int(x) for x in low.split(".")]

    no_deps = all(have(r) for r in requires)
    cmd = [sys.executable, "-m", "pip", "install", "-q", *(["--no-deps"] if no_deps else []), f"scalebook @ {source}"]
    p = (run or subprocess.run)(cmd, capture_output=True, text=True)
    out = (p.stdout or "") + (p.stderr or "")
    if p.returncode and re.search(
        r"Could not resolve host|Temporary failure in name resolution|Network is unreachable"
        r"|Failed to establish a new connection|NewConnectionError",
        out,
    ):
        return (
            f"pip could not reach the network to install scalebook from {source}: turn this runtime's internet "
            "on (Kaggle: Settings → Internet) and run this cell again."
        )
    if p.returncode:
        last = [line for line in out.splitlines() if line.strip()][-1:] or ["(no output)"]
        return (
            f"pip could not install scalebook from {source} (pip: {last[0].strip()}): check that this repository "
            "and tag exist, or set SCALEBOOK_SOURCE to one that does, and run this cell again."
        )
    importlib.invalidate_caches()
    if not no_deps and {r.split(">=")[0] for r in requires} & set(sys.modules):
        print("scalebook installed some of its requirements; restart the session and run this cell again.")
    return None


# --- install_scalebook: end ---


def function_source() -> str:
    """The text between the markers above: what the stamping tool writes into each setup cell."""
    from pathlib import Path

    text = Path(__file__).read_text()
    begin = text.index("# --- install_scalebook: begin")
    begin = text.index("\n", begin) + 1
    end = text.index("# --- install_scalebook: end ---")
    return text[begin:end]
