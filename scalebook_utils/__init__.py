"""scalebook_utils — the package behind the scalebook notebooks, in five layers (one folder each):

    core/       pure Python + numpy: units, chips, rooflines, collectives, sharding, transformer, training,
                inference, GPUs, the HLO reader. Never jax, matplotlib, ipywidgets or IPython.
    lab/        everything that imports jax (devices, sharded programs, the tiny model, profiling); imports core.
    views/      matplotlib + ipywidgets, one module per chapter over the shared kit; imports core, lab lazily.
    questions/  the answer registry (one module per chapter); imports core, lab lazily for code questions.
    grading/    `check` in the student's kernel, the judge, the sandbox, the grader CLI; never imports jax
                at module level.

Each folder's README.md says what lives there and what it may import (tests/test_architecture.py checks).

The chapter-facing names stay flat: `from scalebook_utils import training`, `scalebook_utils.hardware`,
`import scalebook_utils.jaxlab`. `_HOME` maps each to its module in the layers; both the attribute access
and the submodule import return the same module object (no copy, no warning). Importing this package loads
no jax or matplotlib: a name's module is imported when the name is first used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import TYPE_CHECKING

#: public flat name → module under scalebook_utils (the one alias table; tests/test_public_names.py pins it)
_HOME = {
    # core: pure
    "units": "core.units",
    "errors": "core.errors",
    "hardware": "core.hardware",
    "roofline": "core.roofline",
    "systolic": "core.systolic",
    "topology": "core.topology",
    "collectives": "core.collectives",
    "transformer": "core.transformer",
    "transformer_calculator": "core.calculator",
    "capstone": "core.capstone",
    "verify": "core.verify",
    "sharding": "core.sharding",
    "sharded_matmul": "core.sharding.matmul",
    "training": "core.training.planner",
    "training_costs": "core.training.costs",
    "pipeline_schedules": "core.training.schedules",
    "training_layouts": "core.training.layouts",
    "published_runs": "core.training.published_runs",
    "applied_training": "core.training.applied",
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
    # lab: jax
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
    # views: matplotlib + ipywidgets
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
    # grading (`check` the module; the package attribute `check` is the function, below)
    "answers": "grading.answers",
    "sandbox": "grading.sandbox",
    "cli": "grading.cli",
}


def __getattr__(name: str):
    """`scalebook_utils.training`, `from scalebook_utils import training`: the module at its new home (PEP 562)."""
    if name in _HOME:
        return importlib.import_module(f"{__name__}.{_HOME[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import scalebook_utils.hardware`, `from scalebook_utils.units import x`: the same module object as its home."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, old = fullname.rpartition(".")
        if head == __name__ and old in _HOME:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(f"{__name__}.{_HOME[spec.name.rpartition('.')[2]]}")
        self.home_specs[module.__name__] = module.__spec__
        return module

    def get_code(self, fullname):
        """`python -m scalebook_utils.jaxmulti …`: run the home module's code (runpy asks the loader for it)."""
        home = importlib.util.find_spec(f"{__name__}.{_HOME[fullname.rpartition('.')[2]]}")
        return home.loader.get_code(home.name)

    def exec_module(self, module):
        """Nothing to run (the home module ran when it was imported); undo the import system's `__spec__`
        stamp so the module still names its home (`module.__spec__.name == module.__name__`)."""
        module.__spec__ = self.home_specs[module.__name__]


if not any(type(f).__name__ == "_Alias" and getattr(f, "package", None) == __name__ for f in sys.meta_path):
    _finder = _Alias()
    _finder.package, _finder.home_specs = __name__, {}
    sys.meta_path.insert(0, _finder)

# `from scalebook_utils import check` is the function; `scalebook_utils.check` the module's old dotted name.
_check_module = importlib.import_module(f"{__name__}.grading.check")

sys.modules.setdefault(f"{__name__}.check", _check_module)
check = _check_module.check

if TYPE_CHECKING:  # for type checkers and IDEs, which do not follow __getattr__
    from scalebook_utils.core import (  # noqa: F401  # noqa: F401
        capstone,
        collectives,
        errors,
        hardware,
        roofline,
        systolic,
        topology,
        transformer,
        units,
        verify,
    )
    from scalebook_utils.core.gpu import chips as gpus  # noqa: F401
    from scalebook_utils.core.inference import costs as inference  # noqa: F401
    from scalebook_utils.core.training import planner as training  # noqa: F401

__all__ = ["check", *sorted(_HOME)]
__version__ = "0.1.0"
