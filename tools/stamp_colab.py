"""Stamp the install source into every chapter notebook, with its "Open in Colab" link and the README's table.

    python tools/stamp_colab.py                                   # source from `git remote get-url origin` + tag/commit
    python tools/stamp_colab.py git+https://github.com/ORG/REPO@v1.0
    python tools/stamp_colab.py none                              # no source: the setup cell says what to set
    make colab SOURCE=git+https://github.com/ORG/REPO@v1.0

Idempotent, and it touches only (issue 15):
- notebook metadata `metadata.scalebook` = {source, repo, ref, colab} (source None when nothing is stamped);
- the install block of the setup cell (the first code cell): from `try:` (or a legacy `SCALEBOOK_SOURCE = …` line
  above it) to the `import scalebook_utils` that ends its `except ImportError:` branch. It holds the source and the
  runtime requirements as data and `scalebook_utils/colab_install.py`'s `install_scalebook`, verbatim;
- one markdown cell at the top, id `colab-link`, holding the Colab badge (removed when nothing is stamped);
- the README's table between `<!-- colab-links: begin -->` and `<!-- colab-links: end -->`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scalebook_utils.colab_install import function_source  # noqa: E402  (stdlib-only module)

LINK_CELL_ID = "colab-link"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
README_BEGIN, README_END = "<!-- colab-links: begin -->", "<!-- colab-links: end -->"
_GITHUB = re.compile(r"^git\+https://github\.com/(?P<repo>[\w.-]+/[\w.-]+?)(?:\.git)?@(?P<ref>[\w./-]+)$")


class StampError(ValueError):
    """A source the tool cannot stamp; the message says what to pass instead."""


def parse_source(source: str) -> dict:
    """'git+https://github.com/ORG/REPO@REF' → {source, repo: 'ORG/REPO', ref: 'REF'}; 'none' → {source: None}."""
    if source.strip().lower() in ("none", ""):
        return {"source": None, "repo": None, "ref": None}
    m = _GITHUB.match(source.strip())
    if not m or re.search(r"YOUR-ORG|PLACEHOLDER|\bORG/REPO\b", source, re.I):
        raise StampError(
            f"cannot stamp {source!r}: pass SOURCE=git+https://github.com/ORG/REPO@TAG "
            "(a GitHub repository pinned to a tag or commit), or SOURCE=none"
        )
    return {"source": source.strip(), "repo": m["repo"], "ref": m["ref"]}


def source_from_git(root: Path = ROOT) -> str:
    """git+https://github.com/ORG/REPO@REF from the `origin` remote and HEAD's tag (else its commit)."""

    def git(*args):
        p = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else ""

    url = git("remote", "get-url", "origin")
    m = re.match(
        r"^(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)([\w.-]+/[\w.-]+?)(?:\.git)?/?$", url
    )
    if not m:
        raise StampError(
            f"the origin remote ({url or 'none'}) is not a GitHub repository: pass the source, "
            "e.g. make colab SOURCE=git+https://github.com/ORG/REPO@TAG (or SOURCE=none)"
        )
    ref = git("describe", "--tags", "--exact-match", "HEAD") or git("rev-parse", "HEAD")
    return f"git+https://github.com/{m[1]}@{ref}"


def runtime_requirements(root: Path = ROOT) -> tuple[str, ...]:
    reqs = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    return tuple(r.replace(" ", "") for r in reqs)


def colab_url(repo: str, ref: str, name: str) -> str:
    return f"https://colab.research.google.com/github/{repo}/blob/{ref}/notebooks/{name}"


def install_block(stamp: dict, requires: tuple[str, ...]) -> list[str]:
    """The lines of the setup cell's install block (from `try:` to `    import scalebook_utils`)."""
    fn = ["    " + line if line else "" for line in function_source().rstrip("\n").split("\n")]
    return [
        "try:",
        "    import scalebook_utils  # noqa: F401 - only asks whether it is installed",
        "except ImportError:  # not installed here (Colab, Kaggle): install it. Block written by tools/stamp_colab.py",
        f"    SCALEBOOK_SOURCE = {stamp['source']!r}  # $SCALEBOOK_SOURCE overrides",
        f"    SCALEBOOK_REQUIRES = {requires!r}",
        *fn,
        "    if (_msg := install_scalebook(SCALEBOOK_SOURCE, SCALEBOOK_REQUIRES)):  # stop here with that one sentence",
        "        raise type(\"ScalebookSetupError\", (RuntimeError,), {\"_render_traceback_\": lambda e: [str(e)]})(_msg) from None",
        "    import scalebook_utils  # noqa: F401 - installed now",
    ]


def _block_span(lines: list[str]) -> tuple[int, int]:
    """(start, end) of the install block in a setup cell's lines, end exclusive; ValueError if there is none."""
    start = next(i for i, line in enumerate(lines) if line.startswith(("SCALEBOOK_SOURCE", "try:")))
    if lines[start].startswith("SCALEBOOK_SOURCE") and not lines[start + 1].startswith("try:"):
        raise ValueError("SCALEBOOK_SOURCE line not followed by try:")
    exc = next(i for i in range(start, len(lines)) if lines[i].startswith("except ImportError"))
    end = next(i for i in range(exc, len(lines)) if lines[i].startswith("    import scalebook_utils"))
    return start, end + 1


def setup_cell(nb):
    return next(c for c in nb.cells if c.cell_type == "code")


def stamp_notebook(path: Path, stamp: dict, requires: tuple[str, ...]) -> bool:
    """Stamp one notebook in place; returns whether it changed."""
    nb = nbformat.read(str(path), as_version=4)
    before = nbformat.writes(nb)
    cell = setup_cell(nb)
    lines = cell.source.split("\n")
    try:
        start, end = _block_span(lines)
    except (StopIteration, ValueError, IndexError):
        raise StampError(
            f"{path.name}: its first code cell has no install block (`try:` / `    import scalebook_utils`"
            " / `except ImportError:` … `    import scalebook_utils`); restore it, then stamp again"
        ) from None
    cell.source = "\n".join(lines[:start] + install_block(stamp, requires) + lines[end:])
    meta = {
        "source": stamp["source"],
        "repo": stamp["repo"],
        "ref": stamp["ref"],
        "colab": colab_url(stamp["repo"], stamp["ref"], path.name) if stamp["source"] else None,
    }
    nb.metadata["scalebook"] = meta
    nb.cells = [c for c in nb.cells if c.get("id") != LINK_CELL_ID]
    if meta["colab"]:
        link = nbformat.v4.new_markdown_cell(f"[![Open In Colab]({BADGE})]({meta['colab']})", id=LINK_CELL_ID)
        nb.cells.insert(0, link)
    after = nbformat.writes(nb)
    if after != before:
        nbformat.write(nb, str(path))
    return after != before


def readme_table(stamp: dict, names: list[str]) -> str:
    if not stamp["source"]:
        return (
            "No install source is stamped in this checkout, so there are no Colab links yet: a maintainer runs "
            "`make colab SOURCE=git+https://github.com/ORG/REPO@TAG` (or plain `make colab` in a clone whose "
            "`origin` is on GitHub), which writes the links here and into each notebook."
        )
    rows = ["| notebook | open |", "|---|---|"]
    rows += [f"| `{n}` | [![Open In Colab]({BADGE})]({colab_url(stamp['repo'], stamp['ref'], n)}) |" for n in names]
    return f"Installs scalebook from `{stamp['source']}`.\n\n" + "\n".join(rows)


def stamp_readme(readme: Path, stamp: dict, names: list[str]) -> bool:
    text = readme.read_text()
    if README_BEGIN not in text:
        raise StampError(f"{readme} has no {README_BEGIN} … {README_END} block to fill")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_BEGIN}\n{readme_table(stamp, names)}\n{README_END}{tail}"
    if new != text:
        readme.write_text(new)
    return new != text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", nargs="?", help="git+https://github.com/ORG/REPO@REF, or none (default: from git)")
    ap.add_argument("--root", type=Path, default=ROOT)
    args = ap.parse_args(argv)
    try:
        stamp = parse_source(args.source if args.source is not None else source_from_git(args.root))
    except StampError as e:
        print(f"stamp_colab: {e}", file=sys.stderr)
        return 2
    requires = runtime_requirements(args.root)
    paths = sorted((args.root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    try:
        changed = [p.name for p in paths if stamp_notebook(p, stamp, requires)]
        if stamp_readme(args.root / "README.md", stamp, [p.name for p in paths]):
            changed.append("README.md")
    except StampError as e:
        print(f"stamp_colab: {e}", file=sys.stderr)
        return 2
    print(
        f"stamped {stamp['source'] or 'no source'} into {len(paths)} notebooks; changed: {', '.join(changed) or 'nothing'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
