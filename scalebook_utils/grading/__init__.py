"""Grading a submission (the public name `grading`): `check` records an answer in the student's kernel
(`check`, `answers`), the judge decides the verdict outside it, `sandbox` runs a submission under
bubblewrap, `runner` executes notebooks with nbval and builds results, `cli` is the `scalebook` command.

The runner's names (`grade`, `strip_solution`, `make_exercise`, `SubmissionResult`, …) are served from
here lazily, so `import scalebook_utils` does not load nbformat. No module here imports jax at module
level (a code question's probe imports `lab` when it runs).
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    """`grading.grade`, `from scalebook_utils.grading import strip_solution`: the runner's public names."""
    if not name.startswith("_"):
        runner = importlib.import_module("scalebook_utils.grading.runner")
        if name in runner.__all__:
            return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
