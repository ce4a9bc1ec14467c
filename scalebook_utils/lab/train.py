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

Everything is deterministic for a given seed. CPU timings say nothing about interconnects, so nothing
here is timed: communication is taught through the compiled HLO and the cost model.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.hlo.text import HLO_NAME
from scalebook_utils.core.units import require_int
from scalebook_utils.core.training import planner as training
from scalebook_utils.lab.runtime import HloCollective, make_mesh, parse_hlo_collectives

CH5 = training.CH5

#: The two mesh axes of ch. 5: 'data' carries DP/FSDP (the book's X), 'model' carries TP (the book's Y).
AXES = ("data", "model")
STRATEGIES = training.STRATEGIES

#: Loss agreement (fp32) between a sharded run and the single-device run: |Δ| ≤ LOSS_RTOL · |loss|.
#: Sharding reorders reductions (a batch mean becomes per-shard sums plus an all-reduce), so the
#: float32 results differ by a few ulps per step: measured ≤ 2.7e-7 relative over 3 steps (MLP stack and
#: tiny transformer, every strategy and mesh in the tests, JAX 0.4.35 and 0.10.2).
LOSS_RTOL = 1e-5

_P = jax.sharding.PartitionSpec
_NS = jax.sharding.NamedSharding


def _dtype(dtype):
    return jnp.dtype(dtype)


def prng_key(key):
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.PRNGKey(int(key))
    return key


# --- the chapter's model: a stack of MLP blocks ---------------------------------------------------


def init_mlp_stack(L: int, D: int, F: int, key=0, dtype="float32") -> dict:
    """Weights of the chapter's simplified transformer: L blocks of W_in[D, F] and W_out[F, D].

    Returns {"layers": [{"W_in": [D, F], "W_out": [F, D]}, … L times]}. Entries are normal with std
    1/√fan_in (D for W_in, F for W_out), so activations stay O(1) through the residual stack.
    `key`: an int seed or a jax.random key. Book ch. 5, "the simplified layer".
    """
    L, D, F = (require_int(n, v) for n, v in (("L", L), ("D", D), ("F", F)))
    dt = _dtype(dtype)
    keys = jax.random.split(prng_key(key), 2 * L)
    layers = []
    for i in range(L):
        w_in = jax.random.normal(keys[2 * i], (D, F), jnp.float32) / math.sqrt(D)
        w_out = jax.random.normal(keys[2 * i + 1], (F, D), jnp.float32) / math.sqrt(F)
        layers.append({"W_in": w_in.astype(dt), "W_out": w_out.astype(dt)})
    return {"layers": layers}


def mlp_forward(params, x, constrain: Callable | None = None):
    """Out[B, D] of the MLP stack: per block x ← x + gelu(x ·_D W_in) ·_F W_out.

    Per block: Tmp[B, F] = In[B, D] ·_D W_in[D, F], Out[B, D] = gelu(Tmp) ·_F W_out[F, D] (the book's
    block, with a GELU and a residual added so that a deep stack trains). `constrain(x)` is applied to
    every block's input and to the final output: the activation sharding of the scheme (it pins In
    and Out to e.g. [B, D_Y] under TP); None for an unsharded run. FLOPs: 4·B·D·F per block forward.
    """
    c = constrain or (lambda a: a)
    for layer in params["layers"]:
        x = c(x)
        tmp = jax.nn.gelu(x @ layer["W_in"])          # tmp: [B, F]
        x = x + tmp @ layer["W_out"]                  # x: [B, D]
    return c(x)


def mlp_loss(params, batch, constrain: Callable | None = None):
    """Mean squared error of `mlp_forward(params, x)` against a fixed random target y; batch = (x, y)."""
    x, y = batch
    out = mlp_forward(params, x, constrain)
    return jnp.mean((out - y) ** 2)


def mlp_batch(B: int, D: int, seed: int = 0, dtype="float32"):
    """(x, y): a seeded input In[B, D] and target [B, D], both standard normal."""
    kx, ky = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 1))
    dt = _dtype(dtype)
    return (jax.random.normal(kx, (B, D), jnp.float32).astype(dt),
            jax.random.normal(ky, (B, D), jnp.float32).astype(dt))


# --- models that `train` accepts --------------------------------------------------------------------


def _leaf_name(path) -> str:
    """The last dict key of a pytree path ('W_in', 'wq', 'embedding')."""
    for entry in reversed(path):
        k = getattr(entry, "key", None)
        if isinstance(k, str):
            return k
    return ""


@dataclass(frozen=True)
class MLPStack:
    """The chapter's MLP stack (L blocks of D → F → D) trained on a batch of B tokens (book ch. 5 §9).

    Defaults are the chapter's CPU recipe: D = 64, F = 256, L = 4, B = 64 tokens.
    """

    L: int = 4
    D: int = 64
    F: int = 256
    B: int = 64
    dtype: str = "float32"

    kind = "mlp"

    @property
    def name(self) -> str:
        return f"MLP stack L={self.L} D={self.D} F={self.F} B={self.B}"

    @property
    def dims(self) -> dict:
        return {"B": self.B, "D": self.D, "F": self.F, "L": self.L}

    def init(self, seed: int):
        return init_mlp_stack(self.L, self.D, self.F, key=seed, dtype=self.dtype)

    def make_batch(self, seed: int):
        return mlp_batch(self.B, self.D, seed, self.dtype)

    def loss(self, params, batch, constrain=None):
        return mlp_loss(params, batch, constrain)

    def activation_spec(self, strategy: str):
        return {"dp": _P("data", None), "fsdp": _P("data", None), "tp": _P(None, "model"),
                "fsdp+tp": _P("data", "model")}[strategy]

    def batch_specs(self, strategy: str):
        a = self.activation_spec(strategy)
        return (a, a)

    def param_spec(self, name: str, shape, strategy: str, X: int = 1, Y: int = 1):
        fsdp, tp = strategy in ("fsdp", "fsdp+tp"), strategy in ("tp", "fsdp+tp")
        d_axis, f_axis = ("data" if fsdp else None), ("model" if tp else None)
        if name == "W_in":      # [D, F]
            return _P(d_axis, f_axis)
        if name == "W_out":     # [F, D]
            return _P(f_axis, d_axis)
        raise ValueError(f"unknown MLP parameter {name!r}")

    def divisibility(self, strategy: str, X: int, Y: int) -> list[tuple]:
        """(name, size, degree name, degree, why) for every size that `strategy` splits on an X×Y mesh."""
        out = []
        if strategy in ("dp", "fsdp", "fsdp+tp"):
            out.append(("B", self.B, "X", X, "the batch is sharded over 'data'"))
        if strategy in ("fsdp", "fsdp+tp"):
            out.append(("D", self.D, "X", X, "FSDP shards the weights' d_model over 'data'"))
        if strategy in ("tp", "fsdp+tp"):
            out.append(("F", self.F, "Y", Y, "TP shards the weights' d_ff over 'model'"))
            out.append(("D", self.D, "Y", Y, "TP shards the activations' d_model over 'model'"))
        return out


@dataclass(frozen=True)
class TinyTransformer:
    """`tinymodel`'s LLaMA-style decoder trained on a fixed batch of `batch` sequences of `seq_len`
    tokens (next-token cross-entropy). cfg None means `tinymodel.TINY`.

    Sharding rules by parameter name (leading axes of each array in tinymodel's layout):
      FSDP ('data'): the D dimension of every matrix — wq/wk/wv [D_X, ·, H], wo [N, H, D_X],
        w_gate/w_up/w_in [D_X, F], w_down/w_out [F, D_X], embedding [V, D_X], unembedding [D_X, V].
      TP ('model'): query heads wq [D, N_Y, H], wo [N_Y, H, D]; KV heads wk/wv [D, K_Y, H] when Y
        divides K, otherwise replicated (as GQA serving stacks do when TP exceeds the KV heads);
        MLP w_gate/w_up/w_in [D, F_Y], w_down/w_out [F_Y, D]; the embedding's D [V, D_Y] (its lookup
        then yields the book's TP activations In[B, D_Y]); the unembedding's vocabulary [D, V_Y].
      FSDP+TP: both on different dimensions; the embedding keeps D over 'data' only.
      Norm scales [D] are replicated. Tokens [batch, seq_len + 1] are sharded over 'data' (DP, FSDP,
      FSDP+TP) or replicated (TP).
    Only `tinymodel.init_params` and `tinymodel.loss` are used; `train` gathers the FSDP weights
    explicitly for this model (see its `gather_weights`). 8-way TP needs TINY (8 query heads); MICRO
    (4 heads) shards at most 4 ways over 'model'.
    """

    cfg: object = None
    batch: int = 8
    seq_len: int = 16

    kind = "transformer"

    def _cfg(self):
        if self.cfg is not None:
            return self.cfg
        from scalebook_utils.lab import tinymodel
        return tinymodel.TINY

    @property
    def name(self) -> str:
        c = self._cfg()
        return f"{c.name} L={c.L} D={c.D} F={c.F} N={c.N} K={c.K} H={c.H} V={c.V}, {self.batch}×{self.seq_len} tokens"

    @property
    def dims(self) -> dict:
        c = self._cfg()
        return {"B": self.batch * self.seq_len, "D": c.D, "F": c.F, "L": c.L, "N": c.N, "K": c.K, "H": c.H,
                "V": c.V}

    def init(self, seed: int):
        from scalebook_utils.lab import tinymodel
        return tinymodel.init_params(self._cfg(), key=seed)

    def make_batch(self, seed: int):
        c = self._cfg()
        k = jax.random.fold_in(jax.random.PRNGKey(seed), 2)
        return jax.random.randint(k, (self.batch, self.seq_len + 1), 0, c.V, dtype=jnp.int32)

    def loss(self, params, tokens, constrain=None):
        from scalebook_utils.lab import tinymodel
        return tinymodel.loss(params, tokens, self._cfg())

    def batch_specs(self, strategy: str):
        return _P(None, None) if strategy == "tp" else _P("data", None)

    def param_spec(self, name: str, shape, strategy: str, X: int = 1, Y: int = 1):
        fsdp, tp = strategy in ("fsdp", "fsdp+tp"), strategy in ("tp", "fsdp+tp")
        xa = "data" if fsdp else None
        ya = "model" if tp else None
        if name == "wq":
            return _P(xa, ya, None)
        if name in ("wk", "wv"):
            return _P(xa, ya if self._cfg().K % Y == 0 else None, None)
        if name == "wo":
            return _P(ya, None, xa)
        if name in ("w_gate", "w_up", "w_in"):
            return _P(xa, ya)
        if name in ("w_down", "w_out"):
            return _P(ya, xa)
        if name == "embedding":                      # [V, D]
            if fsdp:
                return _P(None, "data")
            return _P(None, "model" if tp else None)
        if name == "unembedding":                    # [D, V]
            return _P(xa, ya)
        if len(shape) == 1:                          # norm scales
            return _P(None)
        raise ValueError(f"no sharding rule for transformer parameter {name!r} of shape {tuple(shape)}")

    def divisibility(self, strategy: str, X: int, Y: int) -> list[tuple]:
        c = self._cfg()
        out = []
        if strategy != "tp":
            out.append(("batch", self.batch, "X", X, "the sequences are sharded over 'data'"))
        if strategy in ("fsdp", "fsdp+tp"):
            out.append(("D", c.D, "X", X, "FSDP shards every matrix's d_model over 'data'"))
        if strategy in ("tp", "fsdp+tp"):
            out.append(("N", c.N, "Y", Y, "TP shards the query heads over 'model'"))
            out.append(("F", c.F, "Y", Y, "TP shards d_ff over 'model'"))
            out.append(("V", c.V, "Y", Y, "TP shards the unembedding's vocabulary over 'model'"))
            if strategy == "tp":
                out.append(("D", c.D, "Y", Y, "TP shards the embedding's d_model over 'model'"))
        return out


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
    if hasattr(model, "N") and hasattr(model, "V"):   # a TransformerConfig
        return TinyTransformer(cfg=model)
    raise ValueError(f"model must be 'mlp', 'transformer' ('tiny'), 'micro', an MLPStack, a TinyTransformer or "
                     f"a TransformerConfig; got {model!r}")


# --- strategies and meshes ---------------------------------------------------------------------------


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return strategy


def default_mesh_shape(strategy: str, n_devices: int | None = None) -> tuple[int, int]:
    """(X, Y) for a strategy on all devices: dp/fsdp (N, 1), tp (1, N), fsdp+tp (N/2, 2)."""
    check_strategy(strategy)
    n = len(jax.devices("cpu")) if n_devices is None else require_int("n_devices", n_devices)
    if strategy in ("dp", "fsdp"):
        return (n, 1)
    if strategy == "tp":
        return (1, n)
    return (n // 2, 2) if n % 2 == 0 and n > 1 else (n, 1)


def check_mesh(strategy: str, mesh_shape, n_devices: int | None = None) -> tuple[int, int]:
    """Validate an (X, Y) = ('data', 'model') mesh for a strategy; returns it as ints.

    The mesh must use every device (X·Y = device count); DP and FSDP have no TP axis (Y = 1), TP has no
    data axis (X = 1), FSDP+TP takes any X·Y (the book's X and Y of the mixed scheme).
    """
    check_strategy(strategy)
    n = len(jax.devices("cpu")) if n_devices is None else n_devices
    try:
        X, Y = (int(s) for s in mesh_shape)
    except (TypeError, ValueError):
        raise ValueError(f"mesh_shape must be two positive integers (X, Y) for ('data', 'model'), "
                         f"got {mesh_shape!r}") from None
    if X < 1 or Y < 1 or (X, Y) != tuple(mesh_shape):
        raise ValueError(f"mesh_shape must be two positive integers (X, Y), got {mesh_shape!r}")
    if X * Y != n:
        raise ValueError(f"mesh {X}×{Y} has {X * Y} devices but JAX has {n} CPU devices; use a mesh whose "
                         f"product is {n}, e.g. {default_mesh_shape(strategy, n)} "
                         "(jaxlab.use_simulated_devices(n) sets the device count before JAX starts)")
    if strategy in ("dp", "fsdp") and Y != 1:
        raise ValueError(f"{strategy} has no tensor-parallel axis: use a mesh ({n}, 1), got {X}×{Y} "
                         "(for both, use strategy 'fsdp+tp')")
    if strategy == "tp" and X != 1:
        raise ValueError(f"tp has no data axis: use a mesh (1, {n}), got {X}×{Y} (for both, use 'fsdp+tp')")
    return X, Y


def _check_divisible(model, strategy, X, Y):
    bad = [f"{name} = {size} is not divisible by {dname} = {deg} ({why})"
           for name, size, dname, deg, why in model.divisibility(strategy, X, Y) if size % deg]
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
        return (f"{self.strategy} on {self.X}×{self.Y}: losses {', '.join(f'{v:.5f}' for v in self.losses)}{ref}; "
                f"{counts}; params/device {self.param_bytes_per_device:,} B "
                f"({self.param_fraction_per_device:.3g} of all)")


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


def train(model="mlp", strategy: str = "fsdp", mesh_shape=None, steps: int = 3, lr: float = 0.1, seed: int = 0,
          *, reference: bool = True, gather_weights: bool | None = None) -> TrainResult:
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
        lambda path, leaf: _NS(mesh, model.param_spec(_leaf_name(path), leaf.shape, strategy, X, Y)), params)
    bspecs = jax.tree_util.tree_map(lambda s: _NS(mesh, s), model.batch_specs(strategy),
                                    is_leaf=lambda s: isinstance(s, _P))
    constrain = None
    if isinstance(model, MLPStack):
        act = _NS(mesh, model.activation_spec(strategy))
        constrain = lambda a: jax.lax.with_sharding_constraint(a, act)  # noqa: E731
    gathered = None
    if gather_weights is None:
        gather_weights = isinstance(model, TinyTransformer)
    if gather_weights and strategy in ("fsdp", "fsdp+tp"):
        gathered = jax.tree_util.tree_map(lambda s: _NS(mesh, _without_axis(s.spec, "data")), pspecs)
    step = jax.jit(_sgd_step(model, lr, constrain, gathered), in_shardings=(pspecs, bspecs),
                   out_shardings=(pspecs, _NS(mesh, _P())))
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
        diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                   for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(ref_params)))
    return TrainResult(model.name, model.kind, model.dims, strategy, (X, Y), steps, float(lr), int(seed),
                       tuple(losses), ref_losses, tuple(parse_hlo_collectives(hlo, (X, Y), AXES)), per_device,
                       total, diff, itemsize, jax.__version__, hlo)


# --- the cost model against the compiled step ----------------------------------------------------------


#: The collectives ch. 5's cost model predicts, by family: 'gather' for all-gather; 'reduce' for all-reduce and
#: reduce-scatter (XLA:CPU lowers a reduce-scatter from automatic sharding to all-reduce + dynamic-slice; both
#: reduce the same input).
_FAMILY = {HLO_NAME["all_gather"]: "gather", HLO_NAME["all_reduce"]: "reduce", HLO_NAME["reduce_scatter"]: "reduce"}
_REDUCES = tuple(k for k, family in _FAMILY.items() if family == "reduce")


def _class(kind: str) -> str:
    """The family of a collective (`_FAMILY`); other kinds stand for themselves."""
    return _FAMILY.get(kind, kind)


def predicted_step(strategy: str, *, B: int, D: int, F: int, L: int, X: int, Y: int, bytes_per_element: float,
                   regather: bool = True) -> list[training.Collective]:
    """The collectives of one whole training step of an L-block MLP stack, from `training.step_collectives`.

    L × the per-layer list, except (1) collectives on an axis of one device (none happen) and (2) the
    first block's work for dIn, because the input data needs no gradient: its ReduceScatter_Y of dIn
    and (with `regather`) its backward AllGather_X of W_in, which the book re-gathers only to form dIn.
    """
    per_layer = training.step_collectives(strategy, B=B, D=D, F=F, X=X, Y=Y, bytes_per_element=bytes_per_element,
                                          regather=regather)
    size = {"X": X, "Y": Y}
    out = []
    for layer in range(L):
        for c in per_layer:
            if size[c.axis] == 1:
                continue
            if layer == 0 and (c.array == "dIn" or (c.array == "W_in" and c.phase == "backward")):
                continue
            out.append(c)
    return out


@dataclass(frozen=True)
class CollectiveRow:
    """One kind of transfer: (model kind, axis, full shape), how many the model predicts (lo…hi; lo < hi
    only where the model allows FSDP's backward re-gather or not) and how many XLA compiled."""

    kind: str
    axis: str
    shape: tuple[int, ...]
    arrays: tuple[str, ...]
    predicted_min: int
    predicted_max: int
    compiled: int
    compiled_kinds: tuple[str, ...]
    nbytes_each: float

    @property
    def ok(self) -> bool:
        return self.predicted_min <= self.compiled <= self.predicted_max


@dataclass(frozen=True)
class Comparison:
    """`compare_collectives`'s verdict for one run: rows, extras, bytes and `agree`.

    predicted_bytes: (min, max) total over the step; compiled_bytes: the matched compiled arrays' total;
    scalar_extras: compiled collectives of one element (loss reductions); unexplained: compiled
    collectives the model cannot account for; notes: which allowed differences were used.
    For a transformer run (`kind_only`), rows hold (kind class, axis) pairs with shape () and the
    number of compiled arrays of that class on that axis; bytes are not compared.
    """

    strategy: str
    mesh_shape: tuple[int, int]
    rows: tuple[CollectiveRow, ...]
    predicted_bytes: tuple[float, float]
    compiled_bytes: float
    scalar_extras: tuple[HloCollective, ...]
    unexplained: tuple[HloCollective, ...]
    notes: tuple[str, ...]
    kind_only: bool = False

    @property
    def agree(self) -> bool:
        return all(r.ok for r in self.rows) and not self.unexplained

    def table(self, notes: bool = True) -> str:
        """The rows as a text table; `notes=False` leaves out the list of allowed differences used."""
        head = f"{'model kind':<15}{'axis':<5}{'shape':<14}{'arrays':<16}{'predicted':>10}{'compiled':>9}  compiled as"
        lines = [f"{self.strategy} on {self.mesh_shape[0]}×{self.mesh_shape[1]} — agree: {self.agree}", head]
        for r in self.rows:
            pred = (f"{r.predicted_min}" if r.predicted_min == r.predicted_max else
                    f"≥ {r.predicted_min}" if r.predicted_max >= 10**9 else f"{r.predicted_min}–{r.predicted_max}")
            shape = "×".join(map(str, r.shape)) or "-"
            lines.append(f"{r.kind:<15}{r.axis:<5}{shape:<14}{','.join(r.arrays):<16}{pred:>10}{r.compiled:>9}  "
                         f"{', '.join(r.compiled_kinds) or '—'}{'' if r.ok else '   ✗'}")
        if not self.kind_only:
            lo, hi = self.predicted_bytes
            pb = f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}–{hi:,.0f}"
            lines.append(f"bytes: predicted {pb}, compiled {self.compiled_bytes:,.0f}")
        if self.scalar_extras:
            lines.append(f"+ {len(self.scalar_extras)} scalar all-reduce(s) (the loss)")
        for u in self.unexplained:
            lines.append(f"unexplained: {u}")
        if notes:
            lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def compare_collectives(result: TrainResult) -> Comparison:
    """Compare the collectives XLA compiled into `result`'s step with `training.step_collectives`.

    Agreement rule (MLP stack), deterministic:
    1. Prediction = `predicted_step` (L × the per-layer list of `training.step_collectives`, with
       bytes_per_element = the parameters' itemsize, 4 for fp32, minus the first block's dIn work).
       Keys are (class, axis, full shape) with class 'gather' (AllGather) or 'reduce' (AllReduce or
       ReduceScatter); the shape convention is `training.Collective`'s.
    2. Every compiled non-scalar collective must match a key, and for every key the compiled count
       lies between the prediction with `regather=False` and with `regather=True`: XLA may keep the
       weights it gathered in the forward pass for the backward pass instead of gathering again.
    3. Allowed differences, each explained in `notes` when used:
       - ReduceScatter compiled as AllReduce (+ dynamic-slice): XLA:CPU never emits reduce-scatter from
         automatic sharding; the all-reduce has the reduce-scatter's input shape and bytes.
       - Combined ops: XLA's combiner merges several all-reduces (e.g. every gradient, plus the loss)
         into one tuple-valued instruction; each array counts separately.
       - Scalar all-reduces (one element): the loss mean over a sharded batch is reduced across devices;
         the chapter's per-layer model leaves the loss out. Nothing else may be extra.
    Any all-to-all or collective-permute, or an op whose replica groups are not whole mesh axes, is
    unexplained. Collectives over groups of one device move nothing and are ignored.

    Transformer runs (`result.model_kind == 'transformer'`): the model is the MLP stack's, so only kinds
    are compared, per axis, as (class, axis) pairs taken from `training.step_collectives`:
    - every compiled non-scalar collective is a gather or reduce on a predicted (class, axis) — so DP
      gathers nothing over X, FSDP gathers (weights) and reduces (gradients) over X, TP moves nothing
      over X — and every predicted pair appears at least once, except the AllGather over Y: when XLA
      keeps the residual stream replicated over 'model', each block's ReduceScatter_Y and the next
      block's AllGather_Y are one AllReduce_Y (Megatron's form; ch. 3: AllReduce = ReduceScatter +
      AllGather), which the rule accepts and notes;
    - groups that are part of one axis are allowed (noted): GQA's attention reshapes the sharded query
      heads N into (K, G), which splits the 'model' axis (2 × 4 for K = 2 on 8 devices);
    - the transformer's extra small reductions (RMSNorm means and softmax statistics over a D- or
      V-sharded axis, [B, T] values) are reduces over Y and count with them. Bytes are not compared.
    """
    X, Y = result.mesh_shape
    comp = [c for c in result.collectives if c.axes != ()]       # groups of one device move nothing
    trivial = len(result.collectives) - len(comp)
    scalars = tuple(c for c in comp if c.is_scalar and c.kind in _REDUCES)
    comp = [c for c in comp if not (c.is_scalar and c.kind in _REDUCES)]
    notes = []
    if any(c.combined > 1 for c in result.collectives):
        k = len({c.name for c in result.collectives if c.combined > 1})
        notes.append(f"XLA combined arrays into {k} tuple-valued collective(s); each array is counted")
    if scalars:
        notes.append(f"{len(scalars)} scalar all-reduce(s) reduce the loss over the sharded batch")
    if trivial:
        notes.append(f"{trivial} collective(s) over groups of one device (no data moves) ignored")
    if result.model_kind == "transformer":
        return _compare_kinds(result, comp, scalars, notes)
    d = result.dims
    kw = dict(B=d["B"], D=d["D"], F=d["F"], L=d["L"], X=X, Y=Y, bytes_per_element=result.bytes_per_element)
    lo = predicted_step(result.strategy, regather=False, **kw)
    hi = predicted_step(result.strategy, regather=True, **kw)
    key = lambda kind, axis, shape: (_class(kind), axis, tuple(shape))  # noqa: E731
    lo_n = Counter(key(c.kind, c.axis, c.shape) for c in lo)
    hi_n = Counter(key(c.kind, c.axis, c.shape) for c in hi)
    info = {}
    for c in hi:
        k = key(c.kind, c.axis, c.shape)
        kinds, arrays, nb = info.get(k, (set(), set(), c.nbytes))
        info[k] = (kinds | {c.kind}, arrays | {c.array}, nb)
    matched, unexplained = {}, []
    for c in comp:
        k = key(c.kind, c.axis, c.shape)
        if k in hi_n and c.kind in _FAMILY and not c.subgroup:
            matched.setdefault(k, []).append(c)
        else:
            unexplained.append(c)
    rows = []
    for k in sorted(hi_n, key=lambda k: (k[1], k[0], k[2])):
        kinds, arrays, nb = info[k]
        got = matched.get(k, [])
        ck = tuple(sorted({c.kind for c in got}))
        rows.append(CollectiveRow("/".join(sorted(kinds)), k[1], k[2], tuple(sorted(arrays)), lo_n.get(k, 0),
                                  hi_n[k], len(got), ck, nb))
        if "reduce-scatter" in kinds and "all-reduce" in ck:
            notes.append(f"reduce-scatter of {'×'.join(map(str, k[2]))} over {k[1]} compiled as all-reduce "
                         "(+ dynamic-slice): XLA:CPU's form")
        if k[0] == "gather" and lo_n.get(k, 0) < hi_n[k] and got:
            n, m = len(got) - lo_n.get(k, 0), hi_n[k] - lo_n.get(k, 0)
            how = (" — the backward pass reuses the forward's gathered weights (regather=False)" if n == 0 else
                   " — every backward use gathers again (regather=True)" if n == m else "")
            notes.append(f"all-gather of {'×'.join(map(str, k[2]))} over {k[1]}: {n} of the {m} optional backward "
                         f"re-gathers compiled{how}")
    compiled_bytes = float(sum(c.nbytes for cs in matched.values() for c in cs))
    return Comparison(result.strategy, (X, Y), tuple(rows), (float(sum(c.nbytes for c in lo)),
                      float(sum(c.nbytes for c in hi))), compiled_bytes, scalars, tuple(unexplained),
                      tuple(notes))


@dataclass(frozen=True)
class _Compiled:
    """What `compare_collectives` reads of a run: enough to compare a step compiled outside `train`."""

    strategy: str
    mesh_shape: tuple[int, int]
    collectives: tuple[HloCollective, ...]
    dims: dict
    bytes_per_element: int
    model_kind: str = "mlp"


def compare_compiled(collectives, strategy: str, mesh_shape, *, B: int, D: int, F: int, L: int,
                     bytes_per_element: int = 4) -> Comparison:
    """`compare_collectives` for an MLP-stack step you jitted yourself (the notebook's visible step).

    collectives: `jaxlab.parse_hlo_collectives(hlo, (X, Y), axis_names)` of the compiled step, with the
    mesh axes named 'X'/'Y' (the book's letters) or 'data'/'model'; strategy: the scheme whose algorithm
    box (`training.step_collectives`, L blocks) it should match; B, D, F, L: the model's sizes;
    bytes_per_element: 4 for fp32. Same agreement rule as `compare_collectives`: a layout that is not the
    scheme's (an edited PartitionSpec) shows as rows that do not match or collectives left unexplained.
    Raises ValueError when the mesh does not fit the scheme (`check_mesh`: DP and FSDP need Y = 1, TP X = 1).
    """
    X, Y = check_mesh(strategy, mesh_shape, n_devices=math.prod(int(v) for v in mesh_shape))
    dims = {"B": int(B), "D": int(D), "F": int(F), "L": int(L)}
    return compare_collectives(_Compiled(strategy, (X, Y), tuple(collectives), dims, int(bytes_per_element)))


def _compare_kinds(result, comp, scalars, notes):
    """The transformer's kind-level rule (see `compare_collectives`)."""
    X, Y = result.mesh_shape
    size = {"X": X, "Y": Y}
    pred = {}
    for c in training.step_collectives(result.strategy, B=8 * X * Y, D=8 * X * Y, F=8 * X * Y, X=X, Y=Y):
        if size[c.axis] > 1:
            pred.setdefault((_class(c.kind), c.axis), set()).add(c.kind)
    optional = {("gather", "Y")} & set(pred)
    got, unexplained = {}, []
    for c in comp:
        k = (_class(c.kind), c.axis)
        if k in pred and c.kind in _FAMILY:
            got.setdefault(k, []).append(c)
        else:
            unexplained.append(c)
    rows = []
    for k in sorted(pred, key=lambda k: (k[1], k[0])):
        ops = got.get(k, [])
        ck = tuple(sorted({c.kind for c in ops}))
        rows.append(CollectiveRow("/".join(sorted(pred[k])), k[1], (), (), 0 if k in optional else 1, 10**9,
                                  len(ops), ck, 0.0))
        if "reduce-scatter" in pred[k] and "all-reduce" in ck and not (k[1] == "Y" and not got.get(("gather", "Y"))):
            notes.append(f"reduce-scatter over {k[1]} compiled as all-reduce (+ dynamic-slice): XLA:CPU's form")
        if k in optional and not ops:
            notes.append("no all-gather over Y: XLA kept the residual stream replicated over 'model', so each "
                         "block's ReduceScatter_Y and the next AllGather_Y are one AllReduce_Y (an AllReduce is a "
                         "ReduceScatter then an AllGather, book ch. 3)")
    sub = [c for cs in got.values() for c in cs if c.subgroup]
    if sub:
        sizes = sorted({c.group_size for c in sub})
        notes.append(f"{len(sub)} array(s) move within part of an axis (groups of {sizes} devices): attention "
                     "reshapes the sharded heads N into (K, G), splitting the axis")
    return Comparison(result.strategy, (X, Y), tuple(rows), (0.0, 0.0),
                      float(sum(c.nbytes for cs in got.values() for c in cs)), scalars, tuple(unexplained),
                      tuple(notes), kind_only=True)


__all__ = [
    "AXES", "STRATEGIES", "LOSS_RTOL", "init_mlp_stack", "mlp_forward", "mlp_loss", "mlp_batch", "MLPStack",
    "TinyTransformer", "check_strategy", "check_mesh", "default_mesh_shape", "TrainResult", "reference_run", "train",
    "predicted_step", "CollectiveRow", "Comparison", "compare_collectives", "compare_compiled",
]
