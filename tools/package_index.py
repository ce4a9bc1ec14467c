"""Write scalebook_utils/README.md: the five layers, their rule, and one table row per module (its public names
and its docstring's first paragraph, joined into one line), so the floor plan is readable in one page. `python tools/package_index.py` rewrites it;
`--check` exits 1 when it is out of date (tests/test_architecture.py runs the check).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "scalebook_utils"
README = PKG / "README.md"

HEAD = """# scalebook_utils — the floor plan

Five layers, one folder each. The rule is a folder rule, checked by `tests/test_architecture.py`:
`core` imports nothing heavy and no other layer; `lab` imports `core`; a chapter view imports `core`, the
kit and (inside functions) `lab`, never another chapter's view; `questions` imports `core` (and `lab` inside
functions); `grading` never imports jax at module level. No module imports another module's `_private` name.
The flat public names (`from scalebook_utils import training`) are one alias table in `__init__.py`.
Each folder's README.md says what lives there. This page is written by `tools/package_index.py`.
"""


def first_paragraph(path: Path) -> str:
    """The module docstring's first paragraph on one line (a `|` escaped for the table)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return text.replace("|", "\\|") or "(no docstring)"


def render() -> str:
    lines = [HEAD]
    aliases = {}
    sys.path.insert(0, str(ROOT))
    tree = ast.parse((PKG / "__init__.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_HOME":
            home = ast.literal_eval(node.value)
            for old, new in home.items():
                aliases.setdefault(new, []).append(old)
    for layer in ("core", "lab", "views", "questions", "grading"):
        lines += [f"\n## {layer}/\n", "| module | public name | what it is |", "|---|---|---|"]
        for path in sorted((PKG / layer).rglob("*.py")):
            rel = path.relative_to(PKG)
            dotted = ".".join(rel.with_suffix("").parts)
            dotted = dotted[: -len(".__init__")] if dotted.endswith(".__init__") else dotted
            names = ", ".join(f"`{a}`" for a in sorted(aliases.get(dotted, [])))
            lines.append(f"| `{rel.as_posix()}` | {names} | {first_paragraph(path)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        if not README.exists() or README.read_text() != text:
            print(f"{README.relative_to(ROOT)} is out of date: run python tools/package_index.py")
            sys.exit(1)
    else:
        README.write_text(text)
        print(f"wrote {README.relative_to(ROOT)}")
