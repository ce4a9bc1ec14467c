"""A tiny LLaMA-style decoder in plain JAX, to check the accounting of book ch. 4 against XLA.

`transformer` counts parameters and FLOPs on paper; this module builds the same model as arrays and
lets XLA count: `component_counts` must equal `transformer.param_count` exactly, `flops_check`
compares the compiled program's `cost_analysis()['flops']` with `forward_flops_per_token` /
`training_flops_per_token`, and `train_flops_with_remat` shows block rematerialisation lifting a
training step from ≈ 6 to ≈ 8 · params · tokens (book ch. 4, "Gradient checkpointing"; XLA skips
recomputing each block's last matmul, which the backward never reads, so it is a little under 8).

The model (book ch. 4, "Transformer Accounting"; letters B, T, S, D, F, N, K, G = N/K, H, L, V):

- embedding E[V, D] (a lookup, no FLOPs), then L blocks, a final RMSNorm and the unembedding
  W_U[D, V] (E transposed when `cfg.tied_embeddings`);
- each block: x += Attn(norm₁(x)); x += MLP(norm₂(x)). RMSNorms have a scale vector of D and no bias;
  `cfg.norms_per_layer` = 2 keeps both, 1 keeps only the one before attention (the MLP then reads the
  raw residual), 0 none. `cfg.final_norm` adds one more norm before the unembedding;
- attention is grouped-query: W_Q[D, N, H], W_K[D, K, H], W_V[D, K, H], W_O[N, H, D]; query head
  n = k·G + g shares KV head k (the layout `jax.nn.dot_product_attention` uses);
- MLP: SwiGLU, (silu(x·W_gate) ⊙ x·W_up)·W_down with W_gate, W_up [D, F], W_down [F, D]; with
  `cfg.gated_mlp` False it is silu(x·W_in)·W_out (2 matrices);
- no biases and no positional encoding. RoPE (what LLaMA uses) has no parameters and costs
  O(B·T·(N+K)·H) = O(B·T·D) elementwise FLOPs, so leaving it out changes neither count the book makes
  (it would matter for what the model can learn about word order, which these checks do not need).

MoE and MLA configs are out of scope (ValueError). The layer loop is a Python loop, not `lax.scan`:
XLA's cost analysis counts a loop body once, not once per trip (checked on JAX 0.4.35 and 0.10.2), so
a scanned model would report about 1/L of its FLOPs. For the same reason `chunked_attention`, which
streams K/V with `lax.scan`, is checked for values here and never for FLOPs.

The namespace is three modules, all re-exported here: `lab/llama.py` (the model: config check,
parameters, block, `forward`, `loss`), `lab/attention.py` (naive, chunked and JAX attention, flash steps)
and this one (XLA's FLOPs against the book's: `flops_check`, `train_flops_with_remat`).

Units: parameters are elements; FLOPs are XLA's count (a multiply-add is 2; exp, log, rsqrt are
"transcendentals", a separate counter that `flops` leaves out). Everything is seeded.
"""

from __future__ import annotations

# The imports marked "kept" are names `tinymodel` held before its parts had their own modules: no
# `tinymodel.X` that worked before breaks.
import functools
import math  # noqa: F401  (kept)
import numbers
from dataclasses import dataclass
from typing import NamedTuple  # noqa: F401  (kept)

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401  (kept)

from scalebook_utils.core.transformer import (
    TransformerConfig,
    forward_flops_per_token,
    matmul_params,
    training_flops_per_token,
)
from scalebook_utils.lab import runtime as jaxlab
from scalebook_utils.lab.attention import (
    FlashStep,
    check_chunk,
    chunked_attention,
    flash_steps,
    jax_attention,
    naive_attention,
    softmax_row,
)
from scalebook_utils.lab.llama import (
    ATTENTION_KINDS,
    MICRO,
    REMAT_POLICIES,
    RMS_EPS,
    TINY,
    check_config,
    check_tokens,
    component_counts,
    count_params,
    forward,
    init_params,
    is_tracer,
    loss,
    remat_policy,
    rms_norm,
    sample_tokens,
)

# --- FLOPs: XLA's count against the book's ---------------------------------------------------------

#: XLA CPU flops per element of each elementwise piece, (forward, forward + backward). Pieces marked
#: "measured" were compiled alone between two matmuls with `jaxlab.cost_analysis` (JAX 0.4.35 and 0.10.2
#: agree to ±1); the others are counted by hand from the ops. exp, log and rsqrt are "transcendentals",
#: a separate XLA counter, so they add nothing here.
ELEMENTWISE_FLOPS = {
    "rms_norm": (4, 15),  # measured 4 / 13: x², mean, ×rsqrt, ×scale; + 2 for the scale's gradient
    "residual": (1, 1),  # x + f(x); the backward just passes the cotangent on
    "q_scale": (1, 2),  # q · 1/√H
    "softmax": (4, 13),  # measured: max, −max, Σ, ÷ (0.4.35: 12 with the backward)
    "causal_mask": (1, 2),  # select(mask, s, −∞) (0.4.35 counts ≈ 2 in the forward)
    "swiglu": (5, 23),  # measured: silu(a)·b = a·(1 / (1 + e^−a))·b
    "silu": (4, 16),  # measured
    "cross_entropy": (5, 10),  # measured: log_softmax over V, per logit, and picking the target
}


def elementwise_flops_estimate(
    cfg: TransformerConfig, B: int, T: int, kind: str = "forward", *, causal: bool = True
) -> float:
    """XLA-counted elementwise FLOPs of the tiny model, which the book's matmul formula leaves out.

    Per token and layer: norms_per_layer·c_norm·D + 2·c_res·D + c_q·N·H + (c_soft [+ c_mask])·S·N
    + c_act·F; per token once: final norm c_norm·D and, for training, the loss c_ce·V; constants from
    `ELEMENTWISE_FLOPS` (forward or forward + backward). S = T (naive attention scores every key).
    This is O(B·T·(D + F + S·N + V)) against the matmuls' O(B·T·params): a few per cent for MICRO.
    """
    check_config(cfg)
    if kind not in ("forward", "train"):
        raise ValueError(f"kind must be 'forward' or 'train', got {kind!r}")
    i = 0 if kind == "forward" else 1
    c = {k: v[i] for k, v in ELEMENTWISE_FLOPS.items()}
    act = c["swiglu"] if cfg.gated_mlp else c["silu"]
    soft = c["softmax"] + (c["causal_mask"] if causal else 0)
    per_layer = (
        cfg.norms_per_layer * c["rms_norm"] * cfg.D
        + 2 * c["residual"] * cfg.D
        + c["q_scale"] * cfg.N * cfg.H
        + soft * T * cfg.N
        + act * cfg.F
    )
    once = (c["rms_norm"] * cfg.D if cfg.final_norm else 0) + (c["cross_entropy"] * cfg.V if i else 0)
    return float(B * T * (cfg.L * per_layer + once))


@dataclass(frozen=True)
class FlopsCheck:
    """XLA's FLOP count of the compiled tiny model against the book's formula.

    measured: `cost_analysis()['flops']` of the jitted forward (kind "forward") or value_and_grad of the
    loss (kind "train"); predicted: B·T·forward_flops_per_token(cfg, T) or B·T·training_flops_per_token
    (naive attention scores all T×T pairs, so the formula's causal=False); ratio = measured / predicted;
    tolerance: the accepted ratio − 1 (see `flops_check`); elementwise: `elementwise_flops_estimate`;
    fine_ratio = measured / (predicted + elementwise), accepted within ±fine_tolerance.
    """

    cfg_name: str
    kind: str
    B: int
    T: int
    measured: float
    predicted: float
    tolerance: float
    elementwise: float
    fine_tolerance: float

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted

    @property
    def fine_ratio(self) -> float:
        return self.measured / (self.predicted + self.elementwise)

    @property
    def ok(self) -> bool:
        """1 ≤ ratio ≤ 1 + tolerance (XLA counts at least the matmuls, and little besides)."""
        return 1.0 <= self.ratio <= 1.0 + self.tolerance

    @property
    def fine_ok(self) -> bool:
        return abs(self.fine_ratio - 1.0) <= self.fine_tolerance

    def __str__(self) -> str:
        return (
            f"{self.cfg_name} {self.kind} B={self.B} T={self.T}: measured {self.measured:.4g} / predicted "
            f"{self.predicted:.4g} = {self.ratio:.4f} (≤ 1 + {self.tolerance:.3f}); with elementwise "
            f"{self.fine_ratio:.4f} (±{self.fine_tolerance})"
        )


#: |measured / (matmuls + elementwise estimate) − 1| accepted by `FlopsCheck.fine_ok`.
FINE_TOLERANCE = {"forward": 0.005, "train": 0.01}


def _cpu_specs(tree):
    """ShapeDtypeStructs placed on the first CPU device, so `jax.jit(...).lower` compiles for the CPU
    even on a GPU/TPU runtime (whose cost model adds epilogue FLOPs; see `jaxlab.cost_analysis`)."""
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(tuple(x.shape), x.dtype, sharding=cpu), tree)


def _cpu_flops(f, *args) -> float:
    """XLA's FLOP count of jit(f) for arguments shaped like `args`, compiled for a CPU device."""
    return float(jaxlab.cost_analysis(f, *_cpu_specs(args))["flops"])


def _abstract_inputs(cfg: TransformerConfig, B: int, T: int):
    params = jax.eval_shape(functools.partial(init_params, cfg))
    return params, jax.ShapeDtypeStruct((B, T), jnp.int32)


def _check_shape_args(B, T):
    for name, v in (("B", B), ("T", T)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def flops_check(cfg: TransformerConfig, B: int, T: int, kind: str = "forward") -> FlopsCheck:
    """Compile the causal tiny model with naive attention for a CPU device and compare XLA's FLOPs with
    the book's matmul count (book ch. 4, "rule of thumb": forward 2·params, training 6·params per token,
    plus 4·T·N·H·L resp. 12·T·N·H·L of attention; `transformer.forward_flops_per_token`).

    kind "forward": jit(forward) on tokens [B, T]; "train": jit(value_and_grad(loss)) on [B, T + 1]
    (the model sees T positions). The compiled count also holds the elementwise work (norms, softmax,
    SiLU, residual adds, the loss), so the ratio is a little above 1. Tolerance = 2 × the elementwise
    estimate / predicted: twice the expected excess, since the per-op constants shift a little with
    fusion and between XLA versions. `fine_ratio` adds the estimate itself and lands within
    `FINE_TOLERANCE` (0.5 % forward, 1 % train; observed ≤ 0.25 % on JAX 0.4.35 and 0.10.2).
    Nothing is executed: the inputs are abstract (shape and dtype only).
    """
    check_config(cfg)
    _check_shape_args(B, T)
    if kind not in ("forward", "train"):
        raise ValueError(f"kind must be 'forward' or 'train', got {kind!r}")
    if kind == "forward":
        params, tokens = _abstract_inputs(cfg, B, T)
        measured = _cpu_flops(lambda p, t: forward(p, t, cfg), params, tokens)
        predicted = forward_flops_per_token(cfg, T) * B * T
    else:
        params, tokens = _abstract_inputs(cfg, B, T + 1)
        measured = _cpu_flops(jax.value_and_grad(lambda p, t: loss(p, t, cfg)), params, tokens)
        predicted = training_flops_per_token(cfg, T) * B * T
    ew = elementwise_flops_estimate(cfg, B, T, kind)
    return FlopsCheck(
        cfg.name,
        kind,
        B,
        T,
        measured,
        float(predicted),
        tolerance=2 * ew / predicted,
        elementwise=ew,
        fine_tolerance=FINE_TOLERANCE[kind],
    )


@dataclass(frozen=True)
class RematFlops:
    """FLOPs of one training step under a rematerialisation policy (book ch. 4, "Gradient checkpointing").

    measured: XLA's count with forward and backward compiled as two programs (`jax.vjp`'s forward,
    then its pullback), so the recompute cannot be merged with the forward (see
    `train_flops_with_remat`); fused: the same step as ONE jitted value_and_grad, or None if not asked.
    predicted: B·T·training_flops_per_token(cfg, T, remat=policy), the transformer module's number.
    dropped: recompute FLOPs that the backward never uses: with "block", each block's last matmul
    (W_down / W_out, 2·B·T·D·F per layer), whose output only feeds the next block, whose input is
    saved anyway. adjusted = predicted − dropped. tolerance: accepted measured/adjusted − 1 (twice the
    estimated elementwise work, including the recomputed norms, softmax and SiLU).
    six_pt = 6·matmul_params·B·T, the book's "6 · params · tokens".
    """

    cfg_name: str
    policy: str
    B: int
    T: int
    measured: float
    predicted: float
    dropped: float
    tolerance: float
    six_pt: float
    fused: float | None = None

    @property
    def adjusted(self) -> float:
        return self.predicted - self.dropped

    @property
    def ratio(self) -> float:
        """measured / predicted (transformer module; "block" lands below 1 by dropped / predicted)."""
        return self.measured / self.predicted

    @property
    def adjusted_ratio(self) -> float:
        return self.measured / self.adjusted

    @property
    def ok(self) -> bool:
        return 1.0 <= self.adjusted_ratio <= 1.0 + self.tolerance

    @property
    def multiple(self) -> float:
        """measured / (matmul_params · tokens): ≈ 6 without remat, ≈ 8 with block remat (book ch. 4)."""
        return 6 * self.measured / self.six_pt

    def __str__(self) -> str:
        fused = "" if self.fused is None else f"; one jitted step: {6 * self.fused / self.six_pt:.3f}"
        return (
            f"{self.cfg_name} remat={self.policy} B={self.B} T={self.T}: {self.multiple:.3f} · params · tokens "
            f"(predicted {6 * self.predicted / self.six_pt:.3f}"
            + (f", adjusted {6 * self.adjusted / self.six_pt:.3f})" if self.dropped else ")")
            + fused
        )


def train_flops_with_remat(
    cfg: TransformerConfig, B: int, T: int, policy: str = "none", *, fused: bool = False
) -> RematFlops:
    """XLA's FLOPs for one training step of the tiny model under remat `policy`, and the book's.

    Policies (each block wrapped in `jax.checkpoint(prevent_cse=True)`): "none" saves everything;
    "big_matmuls" uses `checkpoint_policies.dots_with_no_batch_dims_saveable` (projection and MLP
    outputs saved; QKᵀ, softmax, PV and the elementwise ops recomputed, ≈ 4·B·T²·N·H·L extra);
    "block" uses `nothing_saveable` (only block inputs kept; the output head is checkpointed too), so
    the backward reruns the forward: ≈ 8 instead of 6 · params · tokens (book ch. 4).

    `measured` compiles forward and backward as two programs, so every recompute is counted. In ONE
    jitted value_and_grad (`fused=True` adds that count) XLA's CPU compiler partly undoes
    "big_matmuls": `prevent_cse` (on by default) puts the recompute's inputs behind an optimization
    barrier, but the CPU pipeline expands the barriers and then runs CSE once more after layout
    assignment, so recomputed attention matmuls, whose operands are the saved Q, K, V, become
    identical to the forward ones and are merged (JAX 0.10.2: all of them; 0.4.35: part). The block
    recompute survives: its first matmuls read norm outputs that XLA computes in differently shaped
    fusions in the forward and in the recompute, so nothing downstream is identical. A merged
    recompute also means the forward's attention probabilities stay alive until the backward, which is
    the memory the policy was meant to save.
    """
    check_config(cfg)
    _check_shape_args(B, T)
    remat_policy(policy)
    params, tokens = _abstract_inputs(cfg, B, T + 1)
    f = lambda p, t: loss(p, t, cfg, remat=policy)
    fwd = lambda p, t: jax.vjp(lambda q: f(q, t), p)
    _, pullback = jax.eval_shape(fwd, params, tokens)
    measured = _cpu_flops(fwd, params, tokens) + _cpu_flops(
        lambda pb, ct: pb(ct), pullback, jax.ShapeDtypeStruct((), jnp.float32)
    )
    one_step = _cpu_flops(jax.value_and_grad(f), params, tokens) if fused else None
    predicted = training_flops_per_token(cfg, T, remat=policy) * B * T
    dropped = 2.0 * B * T * cfg.L * cfg.D * cfg.F if policy == "block" else 0.0
    ew = elementwise_flops_estimate(cfg, B, T, "train")
    if policy != "none":
        ew += elementwise_flops_estimate(cfg, B, T, "forward")
    return RematFlops(
        cfg.name,
        policy,
        B,
        T,
        measured,
        float(predicted),
        dropped,
        tolerance=2 * ew / (predicted - dropped),
        six_pt=6.0 * matmul_params(cfg) * B * T,
        fused=one_step,
    )


__all__ = [
    "TINY",
    "MICRO",
    "ATTENTION_KINDS",
    "REMAT_POLICIES",
    "remat_policy",
    "check_config",
    "init_params",
    "count_params",
    "component_counts",
    "rms_norm",
    "naive_attention",
    "chunked_attention",
    "jax_attention",
    "check_chunk",
    "FlashStep",
    "flash_steps",
    "softmax_row",
    "forward",
    "loss",
    "sample_tokens",
    "ELEMENTWISE_FLOPS",
    "elementwise_flops_estimate",
    "FlopsCheck",
    "FINE_TOLERANCE",
    "flops_check",
    "RematFlops",
    "train_flops_with_remat",
    "RMS_EPS",
    "is_tracer",
    "check_tokens",
]
