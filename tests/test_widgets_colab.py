"""Every widget builds and every control moves without error on Colab's ipywidgets 7.7.1 (in the Colab-like venv,
tests/colab_pins.py) and on this venv's ipywidgets 8 (issue 15, item 6). tests/widget_drive.py does the work."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = (ROOT / os.environ.get("SCALEBOOK_COLAB_VENV", ".venv-colab")).absolute()  # relative: to the repository root


def _drive(python: Path | str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(ROOT), MPLBACKEND="agg")
    p = subprocess.run(
        [str(python), str(ROOT / "tests" / "widget_drive.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _check(result: dict, major: str):
    assert result["ipywidgets"].startswith(major), result["ipywidgets"]
    assert not result["failures"], "\n".join(result["failures"])
    # every widget cell of the notebooks is among them (the chapter-1 to chapter-12 explorers)
    assert len(result["built"]) >= 20 and result["driven"] >= 100, result


@pytest.mark.slow
@pytest.mark.skipif(
    not (VENV / "bin" / "python").exists(), reason=f"no Colab-like venv at {VENV}: run `make test-colab`"
)
def test_every_widget_works_on_colabs_ipywidgets_7():
    _check(_drive(VENV / "bin" / "python"), "7.7.")


@pytest.mark.slow
def test_every_widget_works_on_ipywidgets_8():
    _check(_drive(sys.executable), "8.")


def test_the_driver_sees_callbacks_and_errors():
    """The check above can fail: the driver moves a slider through its observer and finds an error in an Output."""
    import ipywidgets as W
    import widget_drive as D

    seen = []
    slider = W.IntSlider(min=0, max=10, value=0)
    slider.observe(lambda change: seen.append(change["new"]), "value")
    assert D.drive(slider) and seen == [5]
    out = W.Output()
    out.outputs = ({"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []},)
    assert D.errors_in_outputs(W.VBox([out]))[0]["evalue"] == "boom"
