"""jaxpipeline: pipeline parallelism of book ch. 5 ("Pipelining") run for real, on simulated CPU devices.

The chapter shards the *layers* over Z stages: stage i holds layer i and hands its activations to
stage i + 1. This module runs that idea twice on a stack of single-matmul layers W[L, D, D]:

- `naive_pipeline_step`: the chapter's naive snippet (one batch, stage by stage, forward then backward),
  with its bugs fixed; one SGD step that must equal `reference_pipeline_step` on one device. Only one
  device works at a time: the bubble.
- `gpipe_forward`: a GPipe-style forward pass (Huang et al. 2019) over a 1-D mesh with `shard_map`, the
  batch split into M microbatches that `jax.lax.ppermute` passes from stage to stage, one hop per tick;
  it returns the schedule each stage actually ran and the compiled collective-permutes.

`pipeline_schedule(P, M)` is that schedule as a stage × tick grid, and `idle_fraction` of it is the
bubble (P − 1)/(M + P − 1) = `training.bubble_fraction(P, M)` — GPipe's formula; the book describes the
bubble in words only.

Typical use (notebook)::

    from scalebook_utils import jaxlab, jaxpipeline
    jaxlab.use_simulated_devices(8)                          # before JAX runs anything
    import jax
    W = jaxpipeline.init_pipeline_weights(8, 128)            # 8 layers x @ W_i: f32[8, 128, 128]
    x = jax.random.normal(jax.random.PRNGKey(0), (32, 128))  # x: f32[B, D]
    g = jaxpipeline.gpipe_forward(W, x, microbatches=4)
    print(g.schedule)                                        # stage × tick, −1 = idle

Nothing here is timed: simulated devices share this machine's cores and have no interconnect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.units import require_int
from scalebook_utils.lab import _compat
from scalebook_utils.lab.runtime import HloCollective, make_mesh, parse_hlo_collectives
from scalebook_utils.lab.train import prng_key

_P = jax.sharding.PartitionSpec
_NS = jax.sharding.NamedSharding


def init_pipeline_weights(n_layers: int, d_model: int, key=0, dtype="float32"):
    """Weights [n_layers, d_model, d_model] of a stack of single-matmul layers (book ch. 5 §Pipelining).

    Normal with std 1/√d_model: the chapter's snippet draws unscaled normals, which grow the
    activations by ~√d_model per layer; the scaling keeps them O(1) so an SGD step stays small.
    """
    n_layers, d_model = require_int("n_layers", n_layers), require_int("d_model", d_model)
    w = jax.random.normal(prng_key(key), (n_layers, d_model, d_model), jnp.float32) / math.sqrt(d_model)
    return w.astype(jnp.dtype(dtype))


def pipeline_layer(x, w):
    """One pipeline layer, as in the chapter's snippet: a single matmul x[B, D] @ w[D, D]."""
    return x @ w


def _pipeline_loss(y):
    return jnp.mean(y**2)  # the snippet's made-up loss: mean of squares of the last activation


def sequential_forward(weights, x):
    """The unsharded model: x through every layer in order (the answer the pipelines must give)."""
    for w in weights:
        x = pipeline_layer(x, w)
    return x


def reference_pipeline_step(weights, x, lr: float = 0.01):
    """(loss, new weights [L, D, D]) of one SGD step on one device: the naive pipeline's reference."""
    w = jnp.stack(list(weights))
    loss, g = jax.value_and_grad(lambda w: _pipeline_loss(sequential_forward(w, x)))(w)
    return loss, w - lr * g


def place_stages(weights, devices=None) -> list:
    """Stage i's weights on device i (`jax.device_put`): a Python list, one array per device."""
    devices = list(jax.devices("cpu") if devices is None else devices)
    weights = list(weights)
    if len(weights) > len(devices):
        raise ValueError(f"{len(weights)} stages need as many devices; there are {len(devices)}")
    return [jax.device_put(w, devices[i]) for i, w in enumerate(weights)]


def naive_pipeline_step(weights, x, lr: float = 0.01, devices=None):
    """One training step of the chapter's naive pipelining snippet, with its problems fixed.

    Layer i lives on device i (`place_stages`). Forward: the activation visits each device in turn
    (`jax.device_put` to device i, then layer i), keeping every layer's input. The loss (mean of
    squares) and its gradient are taken on the last device. Backward, in reverse: `jax.vjp` of layer i
    at its saved input gives dx and dW_i; W_i ← W_i − lr · dW_i builds a new array (JAX arrays are
    immutable: the snippet's in-place `weights[i] -= …` cannot work), and dx moves to device i − 1.
    Returns (loss, new weights as a list, stage i on device i). Only one device works at a time:
    the bubble the chapter warns about (idle fraction (P − 1)/P with one microbatch).
    Fixes to the snippet (book ch. 5 §Pipelining): per-stage weights are placed on their devices
    (the snippet leaves the stacked array on device 0), the update is functional, `jnp` is imported,
    and the reverse loop runs L−1 … 0 (an old version's `range(0, num_layers, -1)` never ran).
    """
    devices = list(jax.devices("cpu") if devices is None else devices)
    stages = place_stages(weights, devices)
    P = len(stages)
    inputs = []
    h = x
    for i in range(P):
        h = jax.device_put(h, devices[i])
        inputs.append(h)
        h = pipeline_layer(h, stages[i])
    loss, dy = jax.value_and_grad(_pipeline_loss)(h)
    new = [None] * P
    for i in reversed(range(P)):
        _, vjp = jax.vjp(pipeline_layer, inputs[i], stages[i])
        dx, dw = vjp(dy)
        new[i] = stages[i] - lr * dw
        if i > 0:
            dy = jax.device_put(dx, devices[i - 1])
    return loss, new


def pipeline_schedule(stages: int, microbatches: int) -> np.ndarray:
    """GPipe forward schedule: grid[s, t] = the microbatch stage s works on at tick t, or −1 (idle).

    P = stages, M = microbatches; stage s runs microbatch m at tick m + s, so the grid is
    P × (M + P − 1) and its idle fraction is (P − 1)/(M + P − 1) = `training.bubble_fraction(P, M)`
    (GPipe, Huang et al. 2019; the book describes the bubble only in words).
    """
    P = require_int("stages", stages)
    M = require_int("microbatches", microbatches)
    t = np.arange(M + P - 1)[None, :]
    s = np.arange(P)[:, None]
    m = t - s
    return np.where((m >= 0) & (m < M), m, -1)


def idle_fraction(schedule) -> float:
    """Fraction of (stage, tick) slots of a schedule grid that are idle (−1)."""
    g = np.asarray(schedule)
    return float((g < 0).sum() / g.size)


@dataclass(frozen=True)
class GPipeResult:
    """`gpipe_forward`'s output [B, D], the schedule each stage actually ran (grid as
    `pipeline_schedule`), and the compiled program's collectives (collective-permutes only)."""

    out: object
    schedule: np.ndarray
    collectives: tuple[HloCollective, ...]


def gpipe_forward(weights, x, microbatches: int, *, axis: str = "stage") -> GPipeResult:
    """GPipe-style forward pass: one layer per stage over a 1-D mesh of P = len(weights) CPU devices.

    x[B, D] is split into M microbatches of B/M rows. At tick t (M + P − 1 ticks) stage 0 takes
    microbatch t (if any), every stage applies its layer to what it holds, the last stage writes its
    result, and `jax.lax.ppermute` passes each stage's output to the next stage (one hop). Written
    with `shard_map`, so every collective is explicit: P − 1 sends per tick, each of B/M × D values.
    Each stage also carries the id of the microbatch it holds, so the returned schedule is what ran.
    The output equals `sequential_forward(weights, x)`; idle slots compute on zeros and are discarded.
    """
    W = jnp.asarray(weights)
    P = W.shape[0]
    M = require_int("microbatches", microbatches)
    B, D = x.shape
    if B % M:
        raise ValueError(f"batch B = {B} is not divisible into M = {M} microbatches")
    if len(jax.devices("cpu")) < P:
        raise ValueError(f"{P} stages need {P} devices; JAX has {len(jax.devices('cpu'))} CPU devices")
    mesh = make_mesh((P,), (axis,), cpu=True)
    b = B // M
    perm = [(i, i + 1) for i in range(P - 1)]
    T = M + P - 1

    def body(w, xs):  # w: [1, D, D] (this stage's layer); xs: [M, b, D]
        s = jax.lax.axis_index(axis)
        w = w[0]
        state = jnp.zeros((b, D), xs.dtype)
        state_id = jnp.full((), -1, jnp.int32)
        outs = jnp.zeros((M, b, D), xs.dtype)
        ids = []
        for t in range(T):
            fresh = xs[t] if t < M else jnp.zeros((b, D), xs.dtype)
            cur = jnp.where(s == 0, fresh, state)
            cur_id = jnp.where(s == 0, jnp.int32(t if t < M else -1), state_id)
            y = pipeline_layer(cur, w)
            if t >= P - 1:
                outs = outs.at[t - (P - 1)].set(jnp.where(s == P - 1, y, outs[t - (P - 1)]))
            ids.append(cur_id)
            state = jax.lax.ppermute(y, axis, perm)
            # ids travel as id + 1 so that "nothing received" (zeros) reads as idle (−1)
            state_id = jax.lax.ppermute(cur_id + 1, axis, perm) - 1
        return outs[None], jnp.stack(ids)[None]

    f = jax.jit(
        _compat.shard_map(body, mesh=mesh, in_specs=(_P(axis), _P()), out_specs=(_P(axis), _P(axis)), check=False)
    )
    Ws = jax.device_put(W, _NS(mesh, _P(axis)))
    xs = jax.device_put(x.reshape(M, b, D), _NS(mesh, _P()))
    hlo = f.lower(Ws, xs).compile().as_text()
    outs, ids = f(Ws, xs)
    out = outs[P - 1].reshape(B, D)
    return GPipeResult(out, np.asarray(ids), tuple(parse_hlo_collectives(hlo, (P,), (axis,))))


__all__ = [
    "init_pipeline_weights",
    "pipeline_layer",
    "sequential_forward",
    "reference_pipeline_step",
    "place_stages",
    "naive_pipeline_step",
    "pipeline_schedule",
    "idle_fraction",
    "GPipeResult",
    "gpipe_forward",
]
