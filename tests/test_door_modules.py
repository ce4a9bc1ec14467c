"""A door module that says it re-exports its parts re-exports every name of each part's `__all__`.

`lab/README.md`: "the door re-exports every part's names"; `jaxlab.X for every X` (`lab/runtime.py`), the same
for `jaxdecode` (`lab/decode.py`), `tinymodel` and `jaxtrain`; in core, `training_costs` re-exports every public
name of `zero_memory`, `training_layouts` every one of `memory`, and `jaxlab` the HLO reader
`core.hlo.collectives`; `hardware` re-exports `chip_spec`, `transformer` the config and the presets, `topology`
the torus geometry. (`inference` over its parts is checked in tests/test_inference.py.) Each part's `__all__` is
read when the test runs, so a name a part gains and its door does not expose fails here.

The core modules below list in `__all__` every function and class they define, so `import *` gives their public
names and not the helpers they import (`name_index`, `resolve_name`, `dataclass`).
"""

from __future__ import annotations

import importlib

import pytest

#: door (flat name) → its parts (modules under scalebook_utils), and whether importing them needs jax
DOORS = {
    "jaxlab": (["lab.devices", "lab.calibrate", "lab.sharded", "core.hlo.collectives"], True),
    "tinymodel": (["lab.llama", "lab.attention"], True),
    "jaxtrain": (["lab.train_models", "lab.train_collectives"], True),
    "jaxdecode": (["lab.kv_cache", "lab.decode_loop", "lab.decode_timing"], True),
    "training_costs": (["core.training.zero_memory"], False),
    "training_layouts": (["core.training.memory"], False),
    "hardware": (["core.chip_spec"], False),
    "transformer": (["core.transformer_config", "core.model_presets"], False),
    "topology": (["core.torus"], False),
}

CASES = [(door, part, jax) for door, (parts, jax) in DOORS.items() for part in parts]


@pytest.mark.parametrize(("door", "part", "needs_jax"), CASES, ids=[f"{d}-{p}" for d, p, _ in CASES])
def test_door_re_exports_every_name_of_its_part(door, part, needs_jax):
    if needs_jax:
        pytest.importorskip("jax")
    door_mod = importlib.import_module(f"scalebook_utils.{door}")
    part_mod = importlib.import_module(f"scalebook_utils.{part}")
    assert part_mod.__all__, f"{part} has an empty __all__"
    unreachable = [n for n in part_mod.__all__ if getattr(door_mod, n, None) is not getattr(part_mod, n)]
    assert not unreachable, f"{door} does not re-export {part}'s {unreachable}"
    unlisted = [n for n in part_mod.__all__ if n not in door_mod.__all__]
    assert not unlisted, f"{door}.__all__ lacks {part}'s {unlisted}"


LISTED = ["hardware", "transformer", "torus", "chip_spec", "model_presets", "transformer_config", "topology"]


@pytest.mark.parametrize("name", LISTED)
def test_core_module_lists_what_it_defines(name):
    mod = importlib.import_module(f"scalebook_utils.core.{name}")
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, f"{name}.__all__ names what it does not hold: {missing}"
    assert len(set(mod.__all__)) == len(mod.__all__), f"{name}.__all__ repeats a name"
    defined = [
        n
        for n, v in vars(mod).items()
        if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == mod.__name__
    ]
    unlisted = [n for n in defined if n not in mod.__all__]
    assert not unlisted, f"{name} defines {unlisted} outside its __all__"
    helpers = {"annotations", "dataclass", "name_index", "resolve_name", "require_int", "require_positive"}
    assert not helpers & set(mod.__all__), f"{name}.__all__ lists imported helpers"
