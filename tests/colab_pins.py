"""Colab's preinstalled versions of what scalebook needs at run time: the one place they are written down.

Source: googlecolab/backend-info `pip-freeze*.txt` (CPU, GPU and TPU runtimes carry the same Jupyter stack), runtime
"2026.07" (commit ec53f93) and HEAD (a724079, 2026-08-19), as summarised in ../shared/reviews/colab.md §1. rich is
not in that summary; 13.7.1 is its version in the TPU freeze of 2024-07 (backend-info 005cad1), the newest freeze
read here, and later runtimes are not older. Refresh this table when backend-info changes.

`make test-colab` builds a venv holding exactly `COLAB_VENV` (tests/test_colab_like.py runs chapter notebooks over it,
installing scalebook from a git clone); `make test-colab-jax` runs the JAX-layer tests on `COLAB_JAX`.
`python tests/colab_pins.py` prints the pins for pip (`--jax`: only jax, jaxlib, numpy).
"""

import sys

#: The JAX of Colab's TPU runtime (jax and jaxlib; libtpu beside it). `make test` runs the JAX layer on it.
COLAB_JAX = "0.7.2"

#: Colab's versions of scalebook's runtime requirements (pyproject `dependencies`); a test asserts each is met.
#: numpy is 2.0.2 on 2026.07 and 2.1.3 at HEAD; both are checked.
COLAB_PINS: dict[str, tuple[str, ...]] = {
    "jax": (COLAB_JAX,),
    "numpy": ("2.0.2", "2.1.3"),
    "matplotlib": ("3.10.0",),
    "ipywidgets": ("7.7.1",),
    "nbformat": ("5.10.4", "5.11.1"),
    "rich": ("13.7.1",),
}

#: Kaggle's CPU/GPU images are built FROM Colab's and then pin ipywidgets 8.1.5 (Kaggle/docker-python
#: kaggle_requirements.txt); its TPU image installs jax[tpu] unpinned (0.7.2 when built).
KAGGLE_PINS: dict[str, tuple[str, ...]] = {"ipywidgets": ("8.1.5",), "jax": (COLAB_JAX,)}

#: The Colab-like preinstalled set of the local test (issue 15): Colab's Jupyter stack and scientific core on the
#: Python here, plus nbclient (0.10.4 on Colab) to drive the notebooks. No scalebook, no jupyterlab: Colab's classic
#: notebook 6.5.7 and widgetsnbextension 3.6.10 are pinned too, else pip resolves ipywidgets 7.7.1's
#: widgetsnbextension → notebook to notebook 7, which pulls jupyterlab in.
COLAB_VENV: tuple[str, ...] = (
    f"jax=={COLAB_JAX}",
    f"jaxlib=={COLAB_JAX}",
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "ipywidgets==7.7.1",
    "ipykernel==6.17.1",
    "ipython==7.34.0",
    "jupyter_client==7.4.9",
    "nbformat==5.10.4",
    "nbclient==0.10.4",
    "rich==13.7.1",
    "notebook==6.5.7",
    "widgetsnbextension==3.6.10",
    "jupyterlab_widgets==3.0.16",
    "traitlets==5.7.1",
    "tornado==6.5.7",
)

if __name__ == "__main__":  # pins for pip: all of COLAB_VENV, or only jax/jaxlib/numpy with --jax
    pins = (
        COLAB_VENV
        if sys.argv[1:] != ["--jax"]
        else [p for p in COLAB_VENV if p.split("==")[0] in ("jax", "jaxlib", "numpy")]
    )
    sys.stdout.write(" ".join(pins) + "\n")
