"""Grading a submission (the public name `grading`): `check` records an answer in the student's kernel
(`check`, `answers`), the judge decides the verdict outside it, `sandbox` runs a submission under
bubblewrap, `runner` executes notebooks with nbval (one run: `nbval_run`) and builds results, `cli` is the
`scalebook` command.

The public names of `exercises` (`make_exercise`, `strip_solution`, cell metadata), `report` (`SubmissionResult`,
JSON/CSV/table) `graded_copy` (`build_graded_copy`, `load_reference`, …) and `runner` (`grade`) are served from here lazily, so
`import scalebook_utils` does not load nbformat. No module here imports jax at module
level (a code question's probe imports `lab` when it runs).
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    """`grading.grade`, `from scalebook_utils.grading import strip_solution`: the three modules' public names."""
    if not name.startswith("_"):
        for part in ("exercises", "report", "graded_copy", "runner"):
            module = importlib.import_module(f"scalebook_utils.grading.{part}")
            if name in module.__all__:
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
