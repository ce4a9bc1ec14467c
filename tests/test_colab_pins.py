"""Offline: Colab's (and Kaggle's) preinstalled versions satisfy every runtime requirement of scalebook, so
`pip install scalebook` there installs only scalebook itself (no upgrade, no restart prompt)."""

from pathlib import Path

import pytest
import tomllib
from colab_pins import COLAB_JAX, COLAB_PINS, COLAB_VENV, KAGGLE_PINS
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]


@pytest.mark.parametrize("req", RUNTIME, ids=str)
def test_colab_satisfies_every_runtime_requirement(req):
    assert req.name in COLAB_PINS, f"{req.name} is a runtime requirement but Colab's pin for it is not recorded"
    for version in COLAB_PINS[req.name]:
        assert req.specifier.contains(version), f"Colab's {req.name} {version} does not satisfy {req}"


@pytest.mark.parametrize("name", sorted(KAGGLE_PINS))
def test_kaggle_satisfies_the_runtime_requirements_it_pins(name):
    req = next(r for r in RUNTIME if r.name == name)
    assert all(req.specifier.contains(v) for v in KAGGLE_PINS[name])


def test_jax_has_no_upper_bound():
    """An upper bound on jax would let pip replace the TPU runtime's jax/jaxlib."""
    jax = next(r for r in RUNTIME if r.name == "jax")
    assert all(s.operator in (">=", ">") for s in jax.specifier)
    assert not any(r.name == "jaxlib" for r in RUNTIME)


def test_runtime_bounds_are_plain_lower_bounds():
    """The setup cell checks installed versions with the standard library only, which reads `name>=X.Y`."""
    for req in RUNTIME:
        assert not req.extras and not req.marker and [s.operator for s in req.specifier] == [">="], str(req)


def test_the_requirement_check_rejects_an_older_pin():
    """The check above can fail: ipywidgets>=8.0 (the old requirement) is not met by Colab's 7.7.1."""
    assert not Requirement("ipywidgets>=8.0").specifier.contains(COLAB_PINS["ipywidgets"][0])


def test_colab_venv_pins_the_colab_jax():
    assert f"jax=={COLAB_JAX}" in COLAB_VENV and f"jaxlib=={COLAB_JAX}" in COLAB_VENV
