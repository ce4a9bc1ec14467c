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
import pkgutil

#: this folder's modules: `from scalebook_utils.grading import answers` imports that one module and no other
_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__))


def __getattr__(name: str):
    """`grading.grade`, `from scalebook_utils.grading import strip_solution`: the four modules' public names.

    Python's `from package import name` asks this hook before it imports a submodule, so a submodule's own name
    is answered by importing just it: otherwise the search below would import `runner` while one of the modules
    `runner` imports is still loading (an import cycle in a fresh interpreter)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if not name.startswith("_"):
        for part in ("exercises", "report", "graded_copy", "runner"):
            module = importlib.import_module(f"scalebook_utils.grading.{part}")
            if name in module.__all__:
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
