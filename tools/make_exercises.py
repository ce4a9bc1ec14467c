#!/usr/bin/env python
"""Write exercises/NN_slug.ipynb from every solutions/NN_slug.ipynb (docs/conventions.md).

    python tools/make_exercises.py           # (re)write the exercises
    python tools/make_exercises.py --check   # exit 1 if an exercise differs from what would be written

The conversion is `scalebook_utils.grading.make_exercise`: answers between `### BEGIN SOLUTION` and
`### END SOLUTION` become `ch1_q2 = ...  # your answer here`, worked explanations (Markdown cells with
role "solution-text") are dropped, outputs are cleared except the check cells' reference outputs.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from scalebook_utils.grading import exercise_differences, make_exercise  # noqa: E402

NAME = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")


def _read(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbformat.read(str(path), as_version=4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if any exercise differs from its solution's conversion",
    )
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    solutions = sorted(p for p in (args.root / "solutions").glob("*.ipynb") if NAME.match(p.name))
    if not solutions:
        print(f"no solutions/NN_slug.ipynb under {args.root}", file=sys.stderr)
        return 1
    stale = []
    for sol in solutions:
        target = args.root / "exercises" / sol.name
        try:
            exercise = make_exercise(_read(sol))
        except ValueError as exc:
            print(f"{sol.relative_to(args.root)}: {exc}", file=sys.stderr)
            return 1
        if args.check:
            if not target.exists():
                stale.append(f"{target.relative_to(args.root)}: missing")
                continue
            diffs = exercise_differences(_read(target), exercise)
            stale += [f"{target.relative_to(args.root)}: {d}" for d in diffs[:10]]
        else:
            target.parent.mkdir(exist_ok=True)
            nbformat.write(exercise, str(target))
            print(f"wrote {target.relative_to(args.root)}")
    if args.check:
        known = {s.name for s in solutions}
        stale += [
            f"exercises/{p.name}: no solutions/{p.name}"
            for p in sorted((args.root / "exercises").glob("*.ipynb"))
            if p.name not in known
        ]
    if stale:
        print(
            "exercises/ differ from what tools/make_exercises.py writes from solutions/ "
            "(never edit exercises by hand; run `python tools/make_exercises.py`):",
            file=sys.stderr,
        )
        for line in stale:
            print("  " + line, file=sys.stderr)
        return 1
    if args.check:
        print(f"exercises up to date ({len(solutions)} checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
