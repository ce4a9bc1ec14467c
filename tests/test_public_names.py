"""The public names survive the move into layer folders (issue 16 item 3).

Every `from scalebook_utils import X`, `import scalebook_utils.X` and `from scalebook_utils.X import Y` that
the notebooks, solutions, exercises, README, tools, benchmarks and tests use is read from those files (ast over
their code), and each must resolve; each old flat name is the same module object as its new home; using
them raises no warning. Nothing is listed by hand, so a new notebook import is checked the day it appears.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import scalebook_utils

REPO = Path(__file__).resolve().parents[1]
ROOT = "scalebook_utils"


def _sources():
    """(where, python source) for every code cell and python file that uses the package from outside it."""
    for folder in ("notebooks", "solutions", "exercises"):
        for nb in sorted((REPO / folder).glob("*.ipynb")):
            for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
                if cell["cell_type"] == "code":
                    src = "".join(cell["source"])
                    yield (
                        f"{folder}/{nb.name}[{i}]",
                        "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines()),
                    )
    for path in [
        *sorted((REPO / "tests").glob("*.py")),
        *sorted((REPO / "tools").glob("*.py")),
        *sorted((REPO / "benchmarks").glob("*.py")),
    ]:
        yield str(path.relative_to(REPO)), path.read_text()
    readme = (REPO / "README.md").read_text()
    for j, block in enumerate(re.findall(r"```python\n(.*?)```", readme, re.S)):
        yield f"README.md python block {j}", block


def _uses():
    """{(module, attribute or None)}: the package modules and the names read from them."""
    uses = set()
    for _where, src in _sources():
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        aliases = {}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and (node.module == ROOT or node.module.startswith(ROOT + "."))
            ):
                for a in node.names:
                    if node.module == ROOT:
                        uses.add(
                            (f"{ROOT}.{a.name}" if a.name != "check" else ROOT, None if a.name != "check" else "check")
                        )
                        if a.name != "check":
                            aliases[a.asname or a.name] = f"{ROOT}.{a.name}"
                    else:
                        uses.add((node.module, a.name))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(ROOT + "."):
                        uses.add((a.name, None))
                        if a.asname:
                            aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                uses.add((aliases[node.value.id], node.attr))
    return sorted(uses, key=lambda u: (u[0], u[1] or ""))


USES = _uses()


def test_the_scan_finds_the_chapter_imports():
    """The reader is not empty-handed: the chapter notebooks' best-known names are among what it found."""
    modules = {m for m, _ in USES}
    assert {f"{ROOT}.widgets", f"{ROOT}.jaxlab", f"{ROOT}.training", f"{ROOT}.hardware"} <= modules
    assert (f"{ROOT}.widgets", "show") in USES and len(USES) > 200


@pytest.mark.parametrize("module,name", USES, ids=[f"{m}:{n}" for m, n in USES])
def test_every_name_used_outside_the_package_resolves(module, name):
    if any(heavy in module for heavy in ("jax", "lab.", "profiling", "tinymodel", "views")) or module.endswith(
        tuple(f".{old}" for old, new in scalebook_utils._HOME.items() if new.startswith(("lab", "views")))
    ):
        pytest.importorskip("jax")
        pytest.importorskip("matplotlib")
    mod = importlib.import_module(module)
    if name is not None and not (module.endswith(".xprof_server") and name == "xprof"):
        if not hasattr(mod, name) and hasattr(mod, "__path__"):  # `from package import submodule`
            importlib.import_module(f"{module}.{name}")
        assert hasattr(mod, name), f"{module} has no {name!r} (used outside the package)"


@pytest.mark.parametrize("old,new", sorted(scalebook_utils._HOME.items()))
def test_each_old_name_is_the_same_module_as_its_home(old, new):
    if new.startswith(("lab", "views")) and old != "colab_install":
        pytest.importorskip("jax")
        pytest.importorskip("matplotlib")
    home = importlib.import_module(f"{ROOT}.{new}")
    assert importlib.import_module(f"{ROOT}.{old}") is home
    assert getattr(scalebook_utils, old) is home
    assert home.__spec__.name == home.__name__ == f"{ROOT}.{new}"  # the module still names its home


def test_the_old_names_import_without_warnings_in_a_fresh_interpreter():
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import scalebook_utils.hardware, scalebook_utils.units, scalebook_utils.check\n"
        "from scalebook_utils import training, sharding, questions, grading, check\n"
        "from scalebook_utils.sharding import plan\n"
        "assert callable(check) and sharding.plan is plan\n"
        "import sys; print(sorted(m for m in ('jax', 'matplotlib', 'ipywidgets', 'nbformat') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
