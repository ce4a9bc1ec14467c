"""jaxtrain: the parallelism schemes of book ch. 5 run for real, on simulated CPU devices.

`training` predicts which collectives each scheme needs and how many bytes they move; this module
trains the chapter's MLP stack (and `tinymodel`'s small LLaMA) under each scheme with `jax.jit` and
automatic sharding, reads the collectives XLA compiled into the step (`jaxlab.parse_hlo_collectives`),
and compares the two. The chapter's pipelining runs in `jaxpipeline`.

Letters follow the book: B tokens in the batch (all of it, not per device), D = d_model, F = d_ff,
L layers; X = devices along the mesh axis 'data' (DP/FSDP), Y = along 'model' (TP).

Schemes (book ch. 5, "What Do We Mean By Scaling?"; PartitionSpecs as the chapter's CPU recipe):

| strategy  | activations In[B, D] | W_in[D, F]         | W_out[F, D]        | mesh (X, Y) |
|-----------|----------------------|--------------------|--------------------|-------------|
| "dp"      | P('data', None)      | replicated         | replicated         | (N, 1)      |
| "fsdp"    | P('data', None)      | P('data', None)    | P(None, 'data')    | (N, 1)      |
| "tp"      | P(None, 'model')     | P(None, 'model')   | P('model', None)   | (1, N)      |
| "fsdp+tp" | P('data', 'model')   | P('data', 'model') | P('model', 'data') | (X, Y)      |

The transformer (`TinyTransformer`, built from `tinymodel.init_params` and `tinymodel.loss`) is trained
the same way with per-parameter sharding rules; its collectives are compared by kind only.

Typical use (notebook)::

    from scalebook_utils import jaxlab, jaxtrain
    jaxlab.use_simulated_devices(8)                  # before JAX runs anything
    r = jaxtrain.train("mlp", "fsdp", (8, 1))
    print(r.losses, r.reference_losses)              # equal to a few parts in 10⁷
    print(jaxtrain.compare_collectives(r).agree)     # True
    print(jaxtrain.compare_collectives(r).table())

The namespace is three modules, all re-exported here: `lab/train_models.py` (the MLP stack, `MLPStack`,
`TinyTransformer`, strategy and mesh checks), `lab/train_collectives.py` (the cost model against the compiled
step) and this one (the sharded SGD step: `train`, `reference_run`, `TrainResult`).

Everything is deterministic for a given seed. CPU timings say nothing about interconnects, so nothing
here is timed: communication is taught through the compiled HLO and the cost model.
"""

from __future__ import annotations

# The imports marked "kept" are names `jaxtrain` held before its parts had their own modules: no
# `jaxtrain.X` that worked before breaks.
import functools
import math  # noqa: F401  (kept)
from collections import Counter
from collections.abc import Callable  # noqa: F401  (kept)
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp  # noqa: F401  (kept)
import numpy as np

from scalebook_utils.core.hlo.collectives import HloCollective, parse_hlo_collectives
from scalebook_utils.core.hlo.text import HLO_NAME  # noqa: F401  (kept)
from scalebook_utils.core.training import planner as training
from scalebook_utils.core.units import require_int
from scalebook_utils.lab.devices import make_mesh
from scalebook_utils.lab.train_collectives import (
    CollectiveRow,
    Comparison,
    compare_collectives,
    compare_compiled,
    predicted_step,
)
from scalebook_utils.lab.train_models import (
    AXES,
    STRATEGIES,
    MLPStack,
    TinyTransformer,
    check_mesh,
    check_strategy,
    default_mesh_shape,
    init_mlp_stack,
    mlp_batch,
    mlp_forward,
    mlp_loss,
    prng_key,
)

CH5 = training.CH5

#: Loss agreement (fp32) between a sharded run and the single-device run: |Δ| ≤ LOSS_RTOL · |loss|.
#: Sharding reorders reductions (a batch mean becomes per-shard sums plus an all-reduce), so the
#: float32 results differ by a few ulps per step: measured ≤ 2.7e-7 relative over 3 steps (MLP stack and
#: tiny transformer, every strategy and mesh in the tests, JAX 0.4.35 and 0.10.2).
LOSS_RTOL = 1e-5

_P = jax.sharding.PartitionSpec
_NS = jax.sharding.NamedSharding


def _leaf_name(path) -> str:
    """The last dict key of a pytree path ('W_in', 'wq', 'embedding')."""
    for entry in reversed(path):
        k = getattr(entry, "key", None)
        if isinstance(k, str):
            return k
    return ""


def _as_model(model):
    if isinstance(model, (MLPStack, TinyTransformer)):
        return model
    if model in ("mlp", None):
        return MLPStack()
    if model in ("transformer", "tiny"):
        return TinyTransformer()
    if model == "micro":
        from scalebook_utils.lab import tinymodel

        return TinyTransformer(cfg=tinymodel.MICRO)
    if hasattr(model, "N") and hasattr(model, "V"):  # a TransformerConfig
        return TinyTransformer(cfg=model)
    raise ValueError(
        f"model must be 'mlp', 'transformer' ('tiny'), 'micro', an MLPStack, a TinyTransformer or "
        f"a TransformerConfig; got {model!r}"
    )


def _check_divisible(model, strategy, X, Y):
    bad = [
        f"{name} = {size} is not divisible by {dname} = {deg} ({why})"
        for name, size, dname, deg, why in model.divisibility(strategy, X, Y)
        if size % deg
    ]
    if bad:
        raise ValueError(f"{strategy} on a {X}×{Y} mesh cannot shard {model.name}: " + "; ".join(bad))


# --- training under a strategy -----------------------------------------------------------------------


@dataclass(frozen=True)
class TrainResult:
    """What one sharded training run did (see `train`).

    losses / reference_losses: the loss before each SGD step, sharded and on one device (fp32);
    collectives: the compiled step's collectives (`parse_hlo_collectives`); param_bytes_per_device:
    Σ over parameters of the bytes device 0 holds (`addressable_shards[0].data.nbytes`);
    param_bytes_total: the unsharded parameter bytes; max_param_diff: max |Δ| between the final
    parameters of the two runs; hlo: the compiled step's text.
    """

    model: str
    model_kind: str
    dims: dict
    strategy: str
    mesh_shape: tuple[int, int]
    steps: int
    lr: float
    seed: int
    losses: tuple[float, ...]
    reference_losses: tuple[float, ...] | None
    collectives: tuple[HloCollective, ...]
    param_bytes_per_device: int
    param_bytes_total: int
    max_param_diff: float | None
    bytes_per_element: int
    jax_version: str
    hlo: str = field(default="", repr=False, compare=False)

    @property
    def X(self) -> int:
        return self.mesh_shape[0]

    @property
    def Y(self) -> int:
        return self.mesh_shape[1]

    @property
    def max_loss_rel_diff(self) -> float:
        """max over steps of |loss − reference| / |reference| (nan without a reference run)."""
        if not self.reference_losses:
            return float("nan")
        return max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(self.losses, self.reference_losses))

    def losses_match(self, rtol: float = LOSS_RTOL) -> bool:
        """Every step's loss equals the single-device loss within `rtol` (relative)."""
        return bool(self.reference_losses) and self.max_loss_rel_diff <= rtol

    def collective_counts(self) -> Counter:
        """Counter of HLO collective kinds (one per array moved; scalars included)."""
        return Counter(c.kind for c in self.collectives)

    @property
    def param_fraction_per_device(self) -> float:
        """Parameter bytes on one device / all parameter bytes (1 for DP, 1/X for FSDP, 1/Y for TP…)."""
        return self.param_bytes_per_device / self.param_bytes_total

    def summary(self) -> str:
        counts = ", ".join(f"{k} ×{v}" for k, v in sorted(self.collective_counts().items())) or "no collectives"
        ref = "" if not self.reference_losses else f" (single device: max rel. diff {self.max_loss_rel_diff:.1e})"
        return (
            f"{self.strategy} on {self.X}×{self.Y}: losses {', '.join(f'{v:.5f}' for v in self.losses)}{ref}; "
            f"{counts}; params/device {self.param_bytes_per_device:,} B "
            f"({self.param_fraction_per_device:.3g} of all)"
        )


def _sgd_step(model, lr, constrain, gathered=None):
    """p ← p − lr·∂loss/∂p. `gathered`: shardings the weights are used in (FSDP's just-in-time gather)."""

    def loss_fn(p, batch):
        if gathered is not None:
            p = jax.tree_util.tree_map(jax.lax.with_sharding_constraint, p, gathered)
        return model.loss(p, batch, constrain)

    def step(params, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss

    return step


def _without_axis(spec, axis: str):
    """A PartitionSpec with `axis` removed from every dimension (the layout after gathering over it)."""
    out = []
    for e in spec:
        if isinstance(e, tuple):
            rest = tuple(a for a in e if a != axis)
            out.append(rest if len(rest) > 1 else (rest[0] if rest else None))
        else:
            out.append(None if e == axis else e)
    return _P(*out)


def reference_run(model="mlp", steps: int = 3, lr: float = 0.1, seed: int = 0):
    """(losses, final params) of the same SGD run on a single CPU device, nothing sharded.

    Cached per (model, steps, lr, seed): every strategy compares with the same run.
    """
    return _reference_run(_as_model(model), require_int("steps", steps), float(lr), int(seed))


@functools.lru_cache(maxsize=8)
def _reference_run(model, steps, lr, seed):
    cpu = jax.devices("cpu")[0]
    params = jax.device_put(model.init(seed), cpu)
    batch = jax.device_put(model.make_batch(seed), cpu)
    step = jax.jit(_sgd_step(model, lr, None))
    losses = []
    for _ in range(steps):
        params, loss = step(params, batch)
        losses.append(float(loss))
    return tuple(losses), params


def train(
    model="mlp",
    strategy: str = "fsdp",
    mesh_shape=None,
    steps: int = 3,
    lr: float = 0.1,
    seed: int = 0,
    *,
    reference: bool = True,
    gather_weights: bool | None = None,
) -> TrainResult:
    """Train `model` for `steps` SGD steps under `strategy` on a ('data', 'model') mesh of CPU devices.

    model: "mlp" (the chapter's MLP stack, `MLPStack()`), "transformer"/"tiny" (`tinymodel.TINY`),
    "micro", or an `MLPStack` / `TinyTransformer` / `TransformerConfig`. mesh_shape: (X, Y) with
    X·Y = the CPU device count (default `default_mesh_shape(strategy)`). The step is
    `jax.jit(step, in_shardings=…, out_shardings=…)`: parameters keep the scheme's sharding before and
    after the update (p ← p − lr·∂loss/∂p), the batch is sharded as the scheme says, and XLA's
    automatic partitioner (GSPMD / Shardy) inserts the collectives — nothing is placed by hand.
    With `reference`, the same run on one device gives `reference_losses` and `max_param_diff`.
    The batch is the same every step (the model memorises it, so the loss falls).

    gather_weights: use every weight inside the step in its layout gathered over 'data'
    (`with_sharding_constraint` to the spec without 'data'): FSDP's "gather just in time", stated
    explicitly; gradients then flow back to the sharded weights as reductions over 'data'. Default
    (None): on for the transformer, off for the MLP stack. The MLP stack pins its activations at every
    block (In and Out of the scheme), which is enough for XLA to find the book's algorithm by itself.
    `tinymodel.loss` has no activation constraints, and left alone XLA's propagation shards attention
    activations across 'data' under FSDP+TP and reshuffles them with all-to-alls (seen on JAX 0.10.2).
    Only FSDP strategies are affected.
    Raises ValueError for an unknown strategy, a mesh that does not use every device or does not fit the
    strategy, and sizes that the degrees do not divide.
    """
    check_strategy(strategy)
    model = _as_model(model)
    steps = require_int("steps", steps)
    X, Y = check_mesh(strategy, default_mesh_shape(strategy) if mesh_shape is None else mesh_shape)
    _check_divisible(model, strategy, X, Y)
    mesh = make_mesh((X, Y), AXES, cpu=True)

    params = model.init(seed)
    batch = model.make_batch(seed)
    pspecs = jax.tree_util.tree_map_with_path(
        lambda path, leaf: _NS(mesh, model.param_spec(_leaf_name(path), leaf.shape, strategy, X, Y)), params
    )
    bspecs = jax.tree_util.tree_map(
        lambda s: _NS(mesh, s), model.batch_specs(strategy), is_leaf=lambda s: isinstance(s, _P)
    )
    constrain = None
    if isinstance(model, MLPStack):
        act = _NS(mesh, model.activation_spec(strategy))
        constrain = lambda a: jax.lax.with_sharding_constraint(a, act)  # noqa: E731
    gathered = None
    if gather_weights is None:
        gather_weights = isinstance(model, TinyTransformer)
    if gather_weights and strategy in ("fsdp", "fsdp+tp"):
        gathered = jax.tree_util.tree_map(lambda s: _NS(mesh, _without_axis(s.spec, "data")), pspecs)
    step = jax.jit(
        _sgd_step(model, lr, constrain, gathered),
        in_shardings=(pspecs, bspecs),
        out_shardings=(pspecs, _NS(mesh, _P())),
    )
    params = jax.device_put(params, pspecs)
    batch = jax.device_put(batch, bspecs)
    hlo = step.lower(params, batch).compile().as_text()
    leaves = jax.tree_util.tree_leaves(params)
    per_device = int(sum(a.addressable_shards[0].data.nbytes for a in leaves))
    total = int(sum(a.size * a.dtype.itemsize for a in leaves))
    itemsize = int(leaves[0].dtype.itemsize)
    losses = []
    for _ in range(steps):
        params, loss = step(params, batch)
        losses.append(float(loss))
    ref_losses, diff = None, None
    if reference:
        ref_losses, ref_params = reference_run(model, steps, lr, seed)
        diff = max(
            float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
            for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(ref_params))
        )
    return TrainResult(
        model.name,
        model.kind,
        model.dims,
        strategy,
        (X, Y),
        steps,
        float(lr),
        int(seed),
        tuple(losses),
        ref_losses,
        tuple(parse_hlo_collectives(hlo, (X, Y), AXES)),
        per_device,
        total,
        diff,
        itemsize,
        jax.__version__,
        hlo,
    )


__all__ = [
    "AXES",
    "STRATEGIES",
    "LOSS_RTOL",
    "init_mlp_stack",
    "mlp_forward",
    "mlp_loss",
    "mlp_batch",
    "MLPStack",
    "TinyTransformer",
    "check_strategy",
    "check_mesh",
    "default_mesh_shape",
    "TrainResult",
    "reference_run",
    "train",
    "predicted_step",
    "CollectiveRow",
    "Comparison",
    "compare_collectives",
    "compare_compiled",
    "prng_key",
]
