"""jaxlab: the JAX side of scalebook — runtime detection, simulated devices, timing, cost analysis,
and an empirical roofline of the machine you are on.

It is the front module of `lab/` (every module there imports jax; JAX version differences live only in
`lab/_compat.py`). Everything it measures is returned in SI base units: seconds, FLOPs, bytes, FLOPs/s, bytes/s.

The namespace has three parts, each its own module, all re-exported here (`jaxlab.X` for every X):
`lab/devices.py` (runtime detection, simulated devices, meshes, `time_fn`), `lab/calibrate.py` (the
roofline constants measured, predict vs measure) and `lab/sharded.py` (ch. 3's sharded programs); this
module adds what reads a compiled program (`cost_analysis`, `compiled_hlo_text`, `hlo_collectives`).
The parts import `devices`, never this door.

Book chapters:
- ch. 1 (rooflines): `calibrate` measures this machine's peak FLOPs/s and memory bandwidth — the two
  constants of the roofline model — and `predict_vs_measure` compares the roofline prediction
  T_lower = max(2·B·D·F / C, bytes / W) with measured matmul times.
- ch. 3, 5, 10 (sharding, training, JAX): `use_simulated_devices` gives 8 CPU devices for meshes;
  `make_mesh` / `shard_map` work on every supported JAX; `cost_analysis` / `compiled_hlo_text`
  show what XLA compiled (FLOPs are per device; which collectives appear), and
  `parse_hlo_collectives` reads each compiled collective's arrays, bytes and mesh axes (that HLO
  reader is the pure module `core/hlo/collectives.py`; jaxlab re-exports it).
- ch. 9 (profiling): `time_fn` is a best-of-N wall-clock timer that waits for the results.

Typical setup cell::

    from scalebook_utils import jaxlab
    jaxlab.use_simulated_devices(8)      # before anything else touches JAX
    print(jaxlab.describe_runtime())
"""

from __future__ import annotations

# The imports marked "kept" are names `jaxlab` held before its parts had their own modules (`jaxlab.np`, …;
# tests patch `jaxlab.jax.devices` and `jaxlab.sys.modules`): no `jaxlab.X` that worked before breaks.
import math  # noqa: F401  (kept)
import os  # noqa: F401  (kept)
import re  # noqa: F401  (kept)
import statistics  # noqa: F401  (kept)
import sys  # noqa: F401  (kept)
import time  # noqa: F401  (kept)
from collections.abc import Callable, Sequence  # noqa: F401  (kept: Sequence)
from dataclasses import dataclass, field  # noqa: F401  (kept)
from typing import NamedTuple  # noqa: F401  (kept)

import jax
import jax.numpy as jnp  # noqa: F401  (kept)
import numpy as np  # noqa: F401  (kept)

from scalebook_utils.core.hardware import ChipSpec, get_chip  # noqa: F401  (kept)
from scalebook_utils.core.hlo.collectives import (
    BOOK_LETTER,
    HLO_COLLECTIVES,
    HloCollective,
    count_hlo_collectives,
    parse_hlo_collectives,
    replica_groups,
    source_target_pairs,
)
from scalebook_utils.core.hlo.text import parse_module  # noqa: F401  (kept)
from scalebook_utils.core.roofline import matmul_roofline  # noqa: F401  (kept)
from scalebook_utils.core.units import canonical_dtype  # noqa: F401  (kept)
from scalebook_utils.lab import _compat
from scalebook_utils.lab._compat import SUPPORTED_JAX, all_gather_invariant, shard_map, use_mesh
from scalebook_utils.lab.calibrate import (
    Calibration,
    MatmulMeasurement,
    PredictionRow,
    calibrate,
    format_rows,
    measure_matmuls,
    median_ratio,
    predict_vs_measure,
)
from scalebook_utils.lab.devices import (
    DEVICE_KIND_PATTERNS,
    RuntimeInfo,
    chip_from_device_kind,
    describe_runtime,
    jnp_dtype,
    make_mesh,
    runtime,
    sharding_devices,
    shards_on_accelerators,
    time_fn,
    use_simulated_devices,
)
from scalebook_utils.lab.sharded import (
    SHARD_MAP_KINDS,
    book_matmul,
    book_spec,
    clear_compile_cache,
    collective_matmul,
    collective_matmul_fn,
    compile_matmul,
    partition_spec,
    predicted_vs_compiled,
    run_sharded_matmul,
    shard_map_demo,
    simulate_collective,
    spec_tuple,
)

# --- compiled programs ----------------------------------------------------------------------------


def _compiled(f: Callable, *args):
    return jax.jit(f).lower(*args).compile()


def cost_analysis(f: Callable, *args) -> dict[str, float]:
    """XLA's cost estimate of jit(f)(*args): `jax.jit(f).lower(*args).compile().cost_analysis()`.

    Normalised to one dict of floats on every JAX version; always has 'flops' and 'bytes accessed'
    (0.0 when the backend gives none). FLOPs and bytes are per device. On CPU, for X[m, k] @ W[k, n]
    'flops' is exactly 2·m·k·n (book ch. 1: A[256, 512] @ B[512, 1024] → 268,435,456; JAX 0.4.35 to
    0.11.2). On GPU, XLA adds a few FLOPs per output element for the epilogue (H200, JAX 0.11.2:
    f32[256,512] @ f32[512,1024] → 2mkn + 3·m·n; bf16 → 2mkn + 4·m·n), so compare with a tolerance there.
    """
    d = _compat.cost_analysis_dict(_compiled(f, *args))
    d.setdefault("flops", 0.0)
    d.setdefault("bytes accessed", 0.0)
    return d


def compiled_hlo_text(f: Callable, *args) -> str:
    """The optimised HLO that XLA compiled for jit(f)(*args) (look for all-reduce, all-gather, …)."""
    return _compiled(f, *args).as_text()


# HLO_COLLECTIVES, count_hlo_collectives, parse_hlo_collectives, HloCollective, replica_groups and
# BOOK_LETTER live in the pure module `core.hlo.collectives` (`compiled_collectives`, ch. 3, 5), re-exported above.


def hlo_collectives(f: Callable, *args) -> dict[str, int]:
    """How many of each collective op the compiled program contains, e.g. {'all-reduce': 1}.

    `count_hlo_collectives` of `compiled_hlo_text(f, *args)` as a plain dict: instructions
    (`all-reduce(`, `all-reduce-start(`), not their uses. Note: the CPU compiler never emits
    reduce-scatter from automatic sharding (all-reduce + dynamic-slice instead).
    """
    return dict(count_hlo_collectives(compiled_hlo_text(f, *args)))


__all__ = [
    "SUPPORTED_JAX",
    "RuntimeInfo",
    "runtime",
    "describe_runtime",
    "shards_on_accelerators",
    "chip_from_device_kind",
    "use_simulated_devices",
    "sharding_devices",
    "make_mesh",
    "shard_map",
    "use_mesh",
    "all_gather_invariant",
    "time_fn",
    "jnp_dtype",
    "cost_analysis",
    "compiled_hlo_text",
    "hlo_collectives",
    "HLO_COLLECTIVES",
    "count_hlo_collectives",
    "BOOK_LETTER",
    "HloCollective",
    "parse_hlo_collectives",
    "replica_groups",
    "source_target_pairs",
    "Calibration",
    "calibrate",
    "MatmulMeasurement",
    "measure_matmuls",
    "PredictionRow",
    "predict_vs_measure",
    "median_ratio",
    "format_rows",
    "book_spec",
    "book_matmul",
    "SHARD_MAP_KINDS",
    "shard_map_demo",
    "collective_matmul_fn",
    "collective_matmul",
    "DEVICE_KIND_PATTERNS",
    "partition_spec",
    "spec_tuple",
    "run_sharded_matmul",
    "predicted_vs_compiled",
    "compile_matmul",
    "clear_compile_cache",
    "simulate_collective",
]
