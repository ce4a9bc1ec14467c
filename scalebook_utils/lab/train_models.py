"""The models `jaxtrain.train` trains (book ch. 5) and the meshes it trains them on.

The chapter's MLP stack (L blocks of In[B, D] ·_D W_in[D, F] → gelu → ·_F W_out[F, D], with a residual;
`init_mlp_stack`, `mlp_forward`, `mlp_loss`, `mlp_batch`), `MLPStack` and `TinyTransformer` (what each
scheme shards, parameter by parameter), and the checks of a strategy and an (X, Y) = ('data', 'model')
mesh. Part of `jaxtrain` (re-exported by `lab/train.py`, whose docstring has the table of schemes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.training import planner as training
from scalebook_utils.core.units import require_int

#: The two mesh axes of ch. 5: 'data' carries DP/FSDP (the book's X), 'model' carries TP (the book's Y).
AXES = ("data", "model")
STRATEGIES = training.STRATEGIES

_P = jax.sharding.PartitionSpec


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
        tmp = jax.nn.gelu(x @ layer["W_in"])  # tmp: [B, F]
        x = x + tmp @ layer["W_out"]  # x: [B, D]
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
    return (
        jax.random.normal(kx, (B, D), jnp.float32).astype(dt),
        jax.random.normal(ky, (B, D), jnp.float32).astype(dt),
    )


# --- models that `train` accepts --------------------------------------------------------------------


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
        return {
            "dp": _P("data", None),
            "fsdp": _P("data", None),
            "tp": _P(None, "model"),
            "fsdp+tp": _P("data", "model"),
        }[strategy]

    def batch_specs(self, strategy: str):
        a = self.activation_spec(strategy)
        return (a, a)

    def param_spec(self, name: str, shape, strategy: str, X: int = 1, Y: int = 1):
        fsdp, tp = strategy in ("fsdp", "fsdp+tp"), strategy in ("tp", "fsdp+tp")
        d_axis, f_axis = ("data" if fsdp else None), ("model" if tp else None)
        if name == "W_in":  # [D, F]
            return _P(d_axis, f_axis)
        if name == "W_out":  # [F, D]
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
        return {"B": self.batch * self.seq_len, "D": c.D, "F": c.F, "L": c.L, "N": c.N, "K": c.K, "H": c.H, "V": c.V}

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
        if name == "embedding":  # [V, D]
            if fsdp:
                return _P(None, "data")
            return _P(None, "model" if tp else None)
        if name == "unembedding":  # [D, V]
            return _P(xa, ya)
        if len(shape) == 1:  # norm scales
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
        raise ValueError(
            f"mesh_shape must be two positive integers (X, Y) for ('data', 'model'), got {mesh_shape!r}"
        ) from None
    if X < 1 or Y < 1 or (X, Y) != tuple(mesh_shape):
        raise ValueError(f"mesh_shape must be two positive integers (X, Y), got {mesh_shape!r}")
    if X * Y != n:
        raise ValueError(
            f"mesh {X}×{Y} has {X * Y} devices but JAX has {n} CPU devices; use a mesh whose "
            f"product is {n}, e.g. {default_mesh_shape(strategy, n)} "
            "(jaxlab.use_simulated_devices(n) sets the device count before JAX starts)"
        )
    if strategy in ("dp", "fsdp") and Y != 1:
        raise ValueError(
            f"{strategy} has no tensor-parallel axis: use a mesh ({n}, 1), got {X}×{Y} "
            "(for both, use strategy 'fsdp+tp')"
        )
    if strategy == "tp" and X != 1:
        raise ValueError(f"tp has no data axis: use a mesh (1, {n}), got {X}×{Y} (for both, use 'fsdp+tp')")
    return X, Y


__all__ = [
    "AXES",
    "STRATEGIES",
    "prng_key",
    "init_mlp_stack",
    "mlp_forward",
    "mlp_loss",
    "mlp_batch",
    "MLPStack",
    "TinyTransformer",
    "check_strategy",
    "default_mesh_shape",
    "check_mesh",
]
