"""The floor plan (DESIGN §2; scalebook_utils/__init__.py): five layers, one folder each, and folder rules.

    core/       imports no jax, matplotlib, ipywidgets or IPython, and nothing from the other layers
    lab/        imports core (and jax)
    views/      a chapter module imports core, the kit (`views._kit`, `views.live_*`), its own chapter's
                modules and, inside functions only, lab; never another chapter's view
    questions/  imports core; lab inside functions only (code questions)
    grading/    imports core and questions; never jax (lab inside functions only, for a code question's probe)

No module imports another module's `_private` name; no import cycle. The rules read the source (ast), so
they hold for every module, present and future, without a list of names.
"""

from __future__ import annotations

import ast
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "scalebook_utils"
ROOT = "scalebook_utils"
HEAVY = {"jax", "jaxlib", "matplotlib", "ipywidgets", "IPython"}
LAYERS = ("core", "lab", "views", "questions", "grading")
#: the view modules every chapter may share
KIT = {"views._kit", "views.live_figure", "views.live_parts", "views.live_layers"}


def _name(path: Path) -> str:
    """scalebook_utils/core/hlo/text.py → "core.hlo.text"; a package's __init__.py → the package."""
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_name(p) for p in PKG.rglob("*.py") if p != PKG / "__init__.py")


def _path(module: str) -> Path:
    path = PKG / (module.replace(".", "/") + ".py")
    return path if path.exists() else PKG / module.replace(".", "/") / "__init__.py"


def _imports(module: str, source: str | None = None):
    """(imported module, names, at module level?) for every import in `module` (or in `source`, read as it)."""
    tree = ast.parse(_path(module).read_text() if source is None else source)
    top = set(map(id, tree.body))  # module-level statements; `if TYPE_CHECKING:` imports never run, like lazy ones
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], id(node) in top
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative import {ast.unparse(node)} (the package uses absolute imports)"
            yield node.module, [a.name for a in node.names], id(node) in top


def _inner(target: str) -> str | None:
    """ "scalebook_utils.core.units" → "core.units"; other libraries → None."""
    return target[len(ROOT) + 1 :] if target.startswith(ROOT + ".") else (None if target != ROOT else "")


def _layer(module: str) -> str:
    return module.split(".")[0]


def _chapter(module: str) -> str | None:
    m = re.match(r"views\.(ch\d\d)_", module)
    return m.group(1) if m else None


def test_every_module_is_in_a_layer():
    assert {_layer(m) for m in MODULES} == set(LAYERS), sorted({_layer(m) for m in MODULES} - set(LAYERS))
    for layer in LAYERS:
        assert (PKG / layer / "README.md").is_file(), f"{layer}/ has no README.md saying what lives there"


def _violations(module: str, source: str | None = None) -> list[str]:
    layer, chapter, found = _layer(module), _chapter(module), []
    for target, names, at_top in _imports(module, source):
        head = target.split(".")[0]
        inner = _inner(target)
        if inner is None:
            if head in HEAVY and (layer == "core" or (layer in ("questions", "grading") and at_top)):
                found.append(f"imports {target}" + ("" if layer == "core" else " at module level"))
            continue
        # `from scalebook_utils.core import units`: the module named is core.units
        candidates = [f"{inner}.{n}".lstrip(".") for n in names] if names else [inner]
        for dep in [c for c in candidates if _path_exists(c)] or [inner]:
            other = _layer(dep) if dep else ""
            if dep == "" or other == "":
                found.append("imports the package root (use the module's own path)")
            elif layer == "core" and other != "core":
                found.append(f"core imports {dep}")
            elif layer == "lab" and other not in ("core", "lab"):
                found.append(f"lab imports {dep}")
            elif layer == "views":
                if other == "lab" and at_top:
                    found.append(f"a view imports {dep} at module level (import lab inside the function)")
                elif other in ("questions", "grading"):
                    found.append(f"a view imports {dep}")
                elif other == "views" and chapter and dep not in KIT and _chapter(dep) != chapter:
                    found.append(f"chapter view imports another chapter's view {dep}")
            elif layer == "questions" and (other in ("views", "grading") or (other == "lab" and at_top)):
                found.append(f"questions imports {dep}" + (" at module level" if other == "lab" else ""))
            elif layer == "grading" and (other == "views" or (other == "lab" and at_top)):
                found.append(f"grading imports {dep}" + (" at module level" if other == "lab" else ""))
        # a folder's own private module (`lab._compat`, `views._kit`) is shared on purpose; other `_names` are not
        private = [
            n
            for n in names
            if n.startswith("_")
            and not n.startswith("__")
            and not (
                _path_exists(f"{inner}.{n}")
                and inner.rpartition(".")[0] == module.rpartition(".")[0]
                or _path_exists(f"{inner}.{n}")
                and inner == module.rpartition(".")[0]
            )
        ]
        if private:
            found.append(f"imports private {private} from {target}")
    return found


def _path_exists(module: str) -> bool:
    return bool(module) and _path(module).exists()


@pytest.mark.parametrize("module", MODULES)
def test_module_keeps_its_layers_rules(module):
    assert not _violations(module), f"{module}: " + "; ".join(_violations(module))


def _module_aliases(module: str) -> dict[str, str]:
    """Local names bound to scalebook modules in `module` (`from scalebook_utils.core import units as u`)."""
    aliases = {}
    for node in ast.walk(ast.parse(_path(module).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and _inner(node.module) is not None:
            for a in node.names:
                dep = f"{_inner(node.module)}.{a.name}".lstrip(".")
                if _path_exists(dep):
                    aliases[a.asname or a.name] = dep
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and _inner(a.name):
                    aliases[a.asname] = _inner(a.name)
    return aliases


@pytest.mark.parametrize("module", MODULES)
def test_module_uses_no_other_modules_private_names(module):
    aliases = _module_aliases(module)
    reach = sorted(
        {
            f"{aliases[n.value.id]}.{n.attr}"
            for n in ast.walk(ast.parse(_path(module).read_text()))
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in aliases
            and n.attr.startswith("_")
            and not n.attr.startswith("__")
        }
    )
    assert not reach, f"{module} reaches into private names: {reach}"


def _graph() -> dict[str, set[str]]:
    """Module-level imports between the package's modules (what runs at import time)."""
    graph = {}
    for module in MODULES:
        deps = set()
        for target, names, at_top in _imports(module):
            inner = _inner(target)
            if not at_top or not inner:
                continue
            subs = [d for d in (f"{inner}.{n}" for n in names) if _path_exists(d)]
            deps |= set(subs) or {inner}  # (a parent package's __init__ always runs before its children: not an edge)
        graph[module] = deps - {module}
    return graph


def test_no_import_cycle_between_modules():
    graph, state, cycles = _graph(), {}, []

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for module in MODULES:
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c) for c in cycles)


@pytest.mark.parametrize("seed", [0, 1])
def test_every_module_imports_in_a_fresh_interpreter_in_any_order(seed):
    order = MODULES[:]
    random.Random(seed).shuffle(order)
    # A module whose optional library is absent here (the oldest-JAX venv has no matplotlib or ipywidgets) is
    # skipped; any other ImportError — a cycle's "partially initialized module" — fails the test.
    optional = sorted(HEAVY | {"nbformat", "psutil", "xprof", "PIL"})
    code = (
        f"import importlib\nskipped = 0\nfor m in {order!r}:\n"
        f"    try:\n        importlib.import_module('{ROOT}.' + m)\n"
        f"    except ModuleNotFoundError as e:\n"
        f"        if (e.name or '').split('.')[0] not in {optional!r}:\n            raise\n        skipped += 1\n"
        f"print('ok', skipped)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.stdout.split()[:1] == ["ok"], out.stderr[-2000:]


CORE = [m for m in MODULES if _layer(m) in ("core", "questions", "grading")]


def test_importing_the_core_loads_no_heavy_library():
    code = (
        "import sys, scalebook_utils, " + ", ".join(f"{ROOT}.{m}" for m in CORE) + "\n"
        f"print(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_rules_can_fail():
    """Each rule flags a module written to break it (a test that cannot fail proves nothing)."""
    assert _violations("core.zz_bad", "import matplotlib\nfrom scalebook_utils.views import plots\n") == [
        "imports matplotlib",
        "core imports views.plots",
    ]
    assert _violations(
        "views.ch99_bad",
        "from scalebook_utils.views import ch04_attention\n"
        "from scalebook_utils.lab import runtime\nfrom scalebook_utils.core.units import _private\n",
    ) == [
        "chapter view imports another chapter's view views.ch04_attention",
        "a view imports lab.runtime at module level (import lab inside the function)",
        "imports private ['_private'] from scalebook_utils.core.units",
    ]
    assert _violations("grading.zz_bad", "import jax\n") == ["imports jax at module level"]
    assert _violations("questions.zz_bad", "def f():\n    from scalebook_utils.lab import runtime\n") == []


def test_the_package_index_lists_every_module():
    """scalebook_utils/README.md (tools/package_index.py) is the one-page floor plan; it must not drift."""
    out = subprocess.run(
        [sys.executable, str(PKG.parent / "tools" / "package_index.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


#: "one book idea per module, readable top to bottom, ≤ ~500 lines" (DESIGN; issue 16), counted as the file is
#: formatted (ruff format), docstrings and comments included
MAX_LINES = 500


def _too_long(lines: dict[str, int]) -> dict[str, int]:
    return {module: n for module, n in sorted(lines.items()) if n > MAX_LINES}


def test_no_module_is_over_500_lines():
    lines = {m: len(_path(m).read_text().splitlines()) for m in MODULES}
    lines[ROOT] = len((PKG / "__init__.py").read_text().splitlines())
    assert not _too_long(lines), f"split these by idea (docs/conventions.md): {_too_long(lines)}"
    assert _too_long({"core.x": MAX_LINES, "core.y": MAX_LINES + 1}) == {"core.y": MAX_LINES + 1}


#: the book's one-letter symbols (ch. 1–12: batch, d_model, d_ff, sequence, layers, heads, KV heads, head dim, mesh
#: axes, vocab, bandwidth W, FLOPs/s C, GQA group G, experts E, …): a module alias must not reuse one
BOOK_LETTERS = frozenset("BDFTLNKHXYZVSIGWCEPM")


def _module_alias_clashes(source: str) -> list[str]:
    """`import x as T` / `from p import module as V` aliases that reuse a book letter (a name alias, e.g.
    `from jax.sharding import PartitionSpec as P`, is JAX's own spelling and not a module)."""
    import importlib.util

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name} as {a.asname}" for a in node.names if a.asname in BOOK_LETTERS]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if a.asname in BOOK_LETTERS:
                    try:
                        is_module = importlib.util.find_spec(f"{node.module}.{a.name}") is not None
                    except (ImportError, ValueError):
                        is_module = False
                    if is_module:
                        found.append(f"from {node.module} import {a.name} as {a.asname}")
    return found


def _notebook_code(path: Path) -> str:
    import json

    cells = json.loads(path.read_text())["cells"]
    code = ("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return "\n".join(
        "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!"))) for cell in code
    )


def test_no_module_alias_reuses_a_book_letter():
    """`T` is the sequence length in the book; `import … planner as T` beside it misleads (DESIGN: module aliases
    that do not reuse the book's letters). The package and every notebook, solution and exercise."""
    repo = PKG.parent
    sources = {m: _path(m).read_text() for m in MODULES}
    for folder in ("notebooks", "solutions", "exercises"):
        sources |= {str(p.relative_to(repo)): _notebook_code(p) for p in sorted((repo / folder).glob("*.ipynb"))}
    clashes = {name: c for name, src in sources.items() if (c := _module_alias_clashes(src))}
    assert not clashes, clashes
    assert _module_alias_clashes("from scalebook_utils.core.training import planner as T\nimport numpy as np\n") == [
        "from scalebook_utils.core.training import planner as T"
    ]
    assert _module_alias_clashes("from jax.sharding import PartitionSpec as P\n") == []
