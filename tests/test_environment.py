"""environment.yml (conda-forge) lists the same packages with the same bounds as pyproject.toml.

conda itself cannot be installed on the CI machine, so the file is compared by parsing it. Packages that
conda-forge lacks (xprof) are in the file's `pip:` section, before the package itself (`-e .`).
"""

from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _split(req: str) -> tuple[str, str]:
    for i, ch in enumerate(req):
        if ch in "<>=!~ ":
            return req[:i].strip().lower(), req[i:].replace(" ", "")
    return req.strip().lower(), ""


def _pyproject_requirements() -> dict[str, str]:
    """The runtime set and every extra; an extra's bound replaces the runtime one (ipywidgets>=8.0 for JupyterLab)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    merged = dict(_split(r) for r in project["dependencies"])
    for extra in ("lab", "grade", "profile", "dev"):
        merged.update(_split(r) for r in project["optional-dependencies"][extra])
    return merged


def _pip_section() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(sections) == 1, sections
    return sections[0]


def _conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    deps += [d for d in _pip_section() if not d.startswith("-e")]
    return dict(_split(d) for d in deps if not d.startswith(("python", "pip")))


def test_environment_matches_pyproject():
    assert _conda_requirements() == _pyproject_requirements()


def test_environment_python_matches_requires_python():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == ["python" + project["requires-python"]]


def test_environment_installs_the_package_itself():
    assert _pip_section()[-1] == "-e ."


def test_every_extra_is_in_the_dev_extra():
    """`make test` / `make lab` install `.[dev]`: it must hold what lab, grade and profile need."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    runtime = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    for name in ("lab", "grade", "profile"):
        assert extras[name] and set(extras[name]) <= set(extras["dev"]) | runtime, name


def test_runtime_set_has_no_lab_or_grading_tools():
    """pip install scalebook on Colab must not pull a notebook front-end, a kernel or the grader's tools."""
    runtime = {_split(r)[0] for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert not runtime & {"jupyterlab", "voila", "nbval", "nbclient", "ipykernel", "tqdm", "xprof", "jupyter-server"}
