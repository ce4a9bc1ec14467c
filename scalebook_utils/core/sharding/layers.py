"""A layer as a chain of sharded matmuls (book ch. 3, Question 7: In[B, D]·W_in[D, F] → H, H·W_out[F, D] → Out):
its time and what each device holds, from `matmul.plan` and `notation.bytes_per_device`.

- `layer_time`: Σ over the matmuls of the plan's T_math + T_comms (`MatmulPlan.t_upper`): the matmuls run one
  after another and nothing overlaps (an upper bound; HBM traffic is not counted).
- `layer_bytes_per_device`: bytes one device holds of the layer's input (the first matmul's left operand),
  every weight (each matmul's right operand) and its output (the last matmul's target), in `dtype`.

Matmuls in the book's notation, e.g. ("In[B, D_XY] ·_D W_in[D, F_XY] → H[B, F_XY]",
"H[B, F_XY] ·_F W_out[F_XY, D] → Out[B, D_XY]"); `shapes` maps every dim letter to its size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scalebook_utils.core.hardware import ChipSpec
from scalebook_utils.core.sharding.matmul import Matmul, parse_matmul, plan
from scalebook_utils.core.sharding.notation import Mesh, ShardingError, bytes_per_device, parse_array

__all__ = ["layer_time", "layer_bytes_per_device", "comm_seconds_at"]


def _chain(matmuls: Sequence[Matmul | str]) -> list[Matmul]:
    if isinstance(matmuls, (str, Matmul)) or not matmuls:
        raise ShardingError(f"a layer is a non-empty sequence of matmuls in the book's notation, got {matmuls!r}")
    return [parse_matmul(m) for m in matmuls]


def layer_time(
    matmuls: Sequence[Matmul | str],
    mesh: Mesh | str | Mapping,
    shapes: Mapping[str, int],
    dtype: str = "bf16",
    chip: str | ChipSpec = "tpu-v5e",
    wraparound: bool | Sequence[bool] | None = None,
) -> float:
    """Seconds of a layer run as its matmuls in order, nothing overlapped: Σ plan(m).t_upper = Σ (T_math + T_comms).

    Each matmul is planned as `plan(m, mesh, shapes, dtype, chip, wraparound)` (its collectives and its local
    FLOPs at the chip's peak). Book ch. 3, Question 7 (the book leaves the runtime as an exercise).
    """
    return sum(plan(m, mesh, shapes, dtype, chip, wraparound).t_upper for m in _chain(matmuls))


def layer_bytes_per_device(
    matmuls: Sequence[Matmul | str], mesh: Mesh | str | Mapping, shapes: Mapping[str, int], dtype: str = "bf16"
) -> float:
    """Bytes one device holds of the layer's input, weights and output (not the activations in between).

    Input: the first matmul's left operand; weights: each matmul's right operand; output: the last matmul's
    target, which must be given (`… → Out[B, D_XY]`). Each is `bytes_per_device(array, mesh, shapes, dtype)`.
    Book ch. 3, Question 7 (does the layer fit in 300 MB per chip?).
    """
    chain = _chain(matmuls)
    if chain[-1].out is None:
        raise ShardingError(f"the layer's last matmul {chain[-1].spec()} names no output (write '… → Out[…]')")
    arrays = (chain[0].a, *(m.b for m in chain), chain[-1].out)
    return sum(bytes_per_device(a, mesh, shapes, dtype) for a in arrays)


def comm_seconds_at(plan, dims: dict, base: dict, chip="tpu-v5e", *, wraparound: bool = False) -> float:
    """A plan's communication time at other sizes: each collective the plan found at dims `base` re-costed for
    the bytes of its input array at `dims` (bytes scale with the product of that array's dims; the sizes need not
    divide the mesh). Book ch. 3, Question 6 asks T_comms as a function of I, J, K. `plan` is a `MatmulPlan`."""
    from scalebook_utils.core import collectives as col

    mesh = plan.mesh
    total = 0.0
    for s in plan.steps:
        arr = parse_array(s.before)
        scale = math.prod(dims[d] for d in arr.dims) / math.prod(base[d] for d in arr.dims)
        sizes = tuple(mesh.size(a) for a in s.axes)
        total += col.collective(s.kind, s.n_bytes * scale, sizes, chip, wraparound=wraparound).seconds
    return total
