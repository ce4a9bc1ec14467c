"""Sharded matmuls: the four cases, their communication plans and the JAX program (book ch. 3).

The four cases (ch. 3, "Computation With Sharded Arrays"):
    1. the contracting dim is unsharded in both inputs → no communication
    2. one input is sharded on the contracting dim → AllGather it first (or: local matmul + AllReduce)
    3. both are sharded on the contracting dim along the same axes → local matmul, then AllReduce
       (or ReduceScatter when the target is sharded)
    4. both shard a non-contracting dim on the same axis → AllGather one input first

`plan` turns a matmul, a mesh and dim sizes into those steps with their bytes and their time on a
chip (collective times from `collectives.collective`), the local matmul's FLOPs and T_math, and the
output sharding. The notation itself (meshes, sharded arrays) is in `sharding`. Pure Python: the JAX
side (PartitionSpec, compiled HLO) lives in `jaxlab`.

This module (the public `sharded_matmul`) is the front door of four siblings, each importing only the
ones before it: `cases` (Matmul, parse_matmul, MatmulCase, classify), `comm` (CommStep, the collectives'
times, mesh_wraparound, the step builder), `plans` (MatmulPlan, plan) and `program` (HLO_NAME,
predicted_vs_compiled, matched_strategy, jax_program); the notation's names are re-exported too.
"""

from __future__ import annotations

from scalebook_utils.core.sharding.cases import Matmul, MatmulCase, classify, parse_matmul
from scalebook_utils.core.sharding.comm import CommStep, mesh_wraparound
from scalebook_utils.core.sharding.notation import (
    Mesh,
    ShardedArray,
    ShardingError,
    bytes_per_device,
    check,
    device_blocks,
    local_shape,
    parse_array,
    parse_mesh,
    replication,
    total_bytes,
)
from scalebook_utils.core.sharding.plans import MatmulPlan, plan
from scalebook_utils.core.sharding.program import HLO_NAME, jax_program, matched_strategy, predicted_vs_compiled

__all__ = [
    "ShardingError",
    "Mesh",
    "parse_mesh",
    "ShardedArray",
    "parse_array",
    "check",
    "local_shape",
    "bytes_per_device",
    "replication",
    "total_bytes",
    "device_blocks",
    "Matmul",
    "parse_matmul",
    "MatmulCase",
    "classify",
    "CommStep",
    "MatmulPlan",
    "plan",
    "mesh_wraparound",
    "predicted_vs_compiled",
    "matched_strategy",
    "jax_program",
    "HLO_NAME",
]
