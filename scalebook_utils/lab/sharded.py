"""Sharded-matmul experiments (book ch. 3): what XLA compiles for a matmul in the book's notation, set against
the plan of the package's cost model (`sharding.plan`).

`compile_matmul(mesh, matmul)` runs `jaxlab.run_sharded_matmul` once per (mesh, matmul) on simulated CPU
devices and keeps the result, so the chapter 3 sharding explorer (`widgets.sharding_explorer`, which calls it
lazily) and the notebook's check cell compile each preset only once per kernel.
"""

from __future__ import annotations

from scalebook_utils.core import sharding as sh
from scalebook_utils.lab import runtime as jaxlab

__all__ = ["compile_matmul", "clear_compile_cache"]

#: (mesh in the book's notation, matmul spec) → what `compile_matmul` returned (one compile per pair)
_COMPILE_CACHE: dict = {}


def compile_matmul(mesh, matmul: str) -> dict:
    """What XLA compiles for `matmul` on simulated CPU devices, against `sharding.plan` (cached per mesh, matmul).

    `mesh`: the book's notation ("{X: 2, Y: 4}") or anything `sharding.parse_mesh` reads. Returns
    {'collectives': Counter of HLO kinds, 'result_matches': bool, 'dynamic_slices': int, 'agree': bool,
    'why': str (sharding.predicted_vs_compiled's explanation), 'plan': the plan at the compiled sizes,
    'strategy': the plan's strategy XLA's collectives match (sharding.matched_strategy: plan.strategy for the
    book's default, an alternative's name, or None)}. Needs jaxlab.use_simulated_devices(n ≥ mesh size)
    before JAX first ran.
    """
    key = (str(sh.parse_mesh(mesh)), sh.parse_matmul(matmul).spec())
    if key not in _COMPILE_CACHE:
        r = jaxlab.run_sharded_matmul(matmul, mesh)
        p = sh.plan(matmul, mesh, r["shapes"])
        ok, why = sh.predicted_vs_compiled(p, r["collectives"], r["hlo"])
        _COMPILE_CACHE[key] = dict(collectives=r["collectives"], result_matches=r["result_matches"],
                                   dynamic_slices=r["dynamic_slices"], agree=ok, why=why, plan=p,
                                   strategy=sh.matched_strategy(p, r["collectives"], r["hlo"]))
    return _COMPILE_CACHE[key]


def clear_compile_cache() -> None:
    """Forget every kept compile (the next `compile_matmul` compiles again)."""
    _COMPILE_CACHE.clear()
