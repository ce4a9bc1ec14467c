"""One-off migration (issue 16): move the flat package into layer folders and rewrite its imports.

`python tools/layers_move.py move`    git mv every flat module to its layer (the table below), once.
`python tools/layers_move.py imports` rewrite every relative import in scalebook_utils/** written for the
                                       flat layout (`from .hardware import X`, `from . import training as T`)
                                       to the absolute new home; rerunnable (used after merging branches
                                       that were written against the flat layout).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "scalebook_utils"

#: old flat module → new dotted home under scalebook_utils (the same table as scalebook_utils/__init__.py's _HOME)
MOVES = {
    "units": "core.units",
    "errors": "core.errors",
    "hardware": "core.hardware",
    "roofline": "core.roofline",
    "systolic": "core.systolic",
    "topology": "core.topology",
    "collectives": "core.collectives",
    "transformer": "core.transformer",
    "capstone": "core.capstone",
    "verify": "core.verify",
    "sharding": "core.sharding",
    "sharded_matmul": "core.sharding.matmul",
    "training": "core.training.planner",
    "training_costs": "core.training.costs",
    "pipeline_schedules": "core.training.schedules",
    "training_layouts": "core.training.layouts",
    "published_runs": "core.training.published_runs",
    "inference": "core.inference.costs",
    "inference_comms": "core.inference.comms",
    "applied_inference": "core.inference.applied",
    "serving": "core.inference.serving",
    "engine": "core.inference.engine",
    "published_inference": "core.inference.published",
    "gpus": "core.gpu.chips",
    "gpu_network": "core.gpu.network",
    "gpu_collectives": "core.gpu.collectives",
    "gpu_training": "core.gpu.training",
    "hlo": "core.hlo.text",
    "compiled_collectives": "core.hlo.collectives",
    "_compat": "lab._compat",
    "jaxlab": "lab.runtime",
    "tinymodel": "lab.tinymodel",
    "jaxtrain": "lab.train",
    "jaxpipeline": "lab.pipeline",
    "jaxdecode": "lab.decode",
    "profiling": "lab.profiling",
    "jaxprog": "lab.jaxprog",
    "collective_matmul": "lab.collective_matmul",
    "jaxmulti": "lab.multiprocess",
    "xprof_server": "lab.xprof_server",
    "colab_install": "lab.colab_install",
    "widgets": "views.widgets",
    "plots": "views.plots",
    "live_figure": "views.live_figure",
    "transformer_views": "views.ch04_transformers",
    "attention_views": "views.ch04_attention",
    "training_views": "views.ch05_training",
    "applied_training_views": "views.ch06_applied_training",
    "inference_views": "views.ch07_inference",
    "inference_figures": "views.ch07_figures",
    "applied_inference_views": "views.ch08_applied_inference",
    "profiling_views": "views.ch09_profiling",
    "sharding_figures": "views.ch10_sharding",
    "capstone_views": "views.ch11_conclusion",
    "gpu_views": "views.ch12_gpus",
    "check": "grading.check",
    "answers": "grading.answers",
    "sandbox": "grading.sandbox",
    "grading": "grading.runner",
    "cli": "grading.cli",
}
#: names importable from the flat package that are not modules moved above
KEEP = {"questions", "__version__"}


def move() -> None:
    for old, new in MOVES.items():
        src = PKG / f"{old}.py"
        dst = PKG / (new.replace(".", "/") + ".py")
        if not src.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        for folder in [dst.parent, *dst.parent.parents]:
            if folder == PKG:
                break
            (folder / "__init__.py").touch()
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)


def _flat_target(node: ast.ImportFrom, file: Path) -> list[str]:
    """The absolute import lines that replace one flat-layout relative import."""
    in_questions = file.parent.name == "questions" and file.parent.parent == PKG
    level = node.level - (1 if in_questions else 0)  # questions/* sat one level down already
    mod = node.module or ""
    if in_questions and node.level == 1:  # `from . import add` / `from .ch07 import x`: the registry
        base = "scalebook_utils.questions" + (f".{mod}" if mod else "")
        return [f"from {base} import {_names(node.names)}"]
    if level != 1:
        raise SystemExit(f"{file}: unexpected relative import level {node.level}: {ast.unparse(node)}")
    if mod:
        head, _, rest = mod.partition(".")
        if head in MOVES:
            return [f"from scalebook_utils.{MOVES[head]}{'.' + rest if rest else ''} import {_names(node.names)}"]
        return [f"from scalebook_utils.{mod} import {_names(node.names)}"]
    lines = []
    for alias in node.names:  # `from . import training as T, units`
        asname = f" as {alias.asname}" if alias.asname else ""
        if alias.name in MOVES:
            parent, _, leaf = MOVES[alias.name].rpartition(".")
            as_ = asname or (f" as {alias.name}" if leaf != alias.name else "")
            lines.append(f"from scalebook_utils.{parent} import {leaf}{as_}")
        else:
            lines.append(f"from scalebook_utils import {alias.name}{asname}")
    return lines


def _names(names: list[ast.alias]) -> str:
    text = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in names)
    return f"({text})" if len(text) > 80 else text


def rewrite(file: Path) -> bool:
    source = file.read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            edits.append(node)
    if not edits:
        return False
    for node in sorted(edits, key=lambda n: n.lineno, reverse=True):
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        tail = lines[node.end_lineno - 1][node.end_col_offset :].rstrip("\n")
        comment = tail.strip() if tail.strip().startswith("#") else ""
        new = [indent + text for text in _flat_target(node, file)]
        if comment:
            new[-1] += "  " + comment
        lines[node.lineno - 1 : node.end_lineno] = [t + "\n" for t in new]
    file.write_text("".join(lines))
    return True


def rewrite_all() -> None:
    for file in sorted(PKG.rglob("*.py")):
        if file == PKG / "__init__.py":
            continue
        if rewrite(file):
            print("rewrote", file.relative_to(ROOT))


if __name__ == "__main__":
    {"move": move, "imports": rewrite_all}[sys.argv[1]]()
