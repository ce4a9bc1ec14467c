"""The pure core imports no jax, matplotlib, ipywidgets or IPython (DESIGN §2: pure core, thin shell)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "scalebook_utils"
# the modules allowed to import heavy UI/JAX libraries
SHELL = {"capstone_views", "live_figure", "collective_matmul", "sharding_figures", "jaxlab", "jaxdecode", "profiling", "profiling_views", "jaxprog", "jaxmulti", "gpu_views", "inference_views", "inference_figures", "applied_inference_views", "_compat", "plots", "widgets", "tinymodel", "jaxtrain", "jaxpipeline", "transformer_views",
         "attention_views", "training_views", "applied_training_views"}
HEAVY = {"jax", "jaxlib", "matplotlib", "ipywidgets", "IPython"}
def _module_name(path: Path) -> str:
    """scalebook_utils/questions/ch01.py → "questions.ch01"; a package's __init__.py → the package."""
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


CORE = sorted(_module_name(p) for p in PKG.rglob("*.py")
              if p != PKG / "__init__.py" and _module_name(p) not in SHELL)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", CORE)
def test_core_module_has_no_heavy_imports(module):
    path = PKG / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = PKG / module.replace(".", "/") / "__init__.py"
    assert not (_imports(path) & HEAVY)


def test_importing_the_core_loads_no_heavy_library():
    code = ("import sys, scalebook_utils, " + ", ".join(f"scalebook_utils.{m}" for m in CORE) + "\n"
            f"print(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_core_is_what_we_think():
    for expected in ("units", "hardware", "roofline", "questions", "check", "grading"):
        if (PKG / f"{expected}.py").exists():
            assert expected in CORE


# Front-door modules re-export the modules split out of them, so chapter code keeps one import per chapter.
FRONT_DOORS = {"gpus": ("gpu_network", "gpu_collectives"), "profiling": ("hlo",), "jaxprog": ("collective_matmul",), "training": ("training_costs",),
               "jaxlab": ("compiled_collectives",)}


@pytest.mark.parametrize("front,parts", sorted(FRONT_DOORS.items()))
def test_front_door_reexports_every_public_name(front, parts):
    import importlib

    if front in ("profiling", "jaxprog", "jaxlab"):
        pytest.importorskip("jax")
    door = importlib.import_module(f"scalebook_utils.{front}")
    for part in parts:
        mod = importlib.import_module(f"scalebook_utils.{part}")
        missing = [n for n in mod.__all__ if getattr(door, n, None) is not getattr(mod, n)]
        assert not missing, f"{front} does not re-export {part}.{missing}"
