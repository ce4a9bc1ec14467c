"""environment.yml (conda-forge) lists the same packages with the same bounds as pyproject.toml.

conda itself cannot be installed on the CI machine, so the file is compared by parsing it.
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
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["dev"])
    return dict(_split(r) for r in reqs)


def _conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    return dict(_split(d) for d in deps if not d.startswith(("python", "pip")))


def test_environment_matches_pyproject():
    assert _conda_requirements() == _pyproject_requirements()


def test_environment_python_matches_requires_python():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == ["python" + project["requires-python"]]


def test_environment_installs_the_package_itself():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip_sections == [["-e ."]]
