"""What a training layout keeps in memory (book ch. 4–6): remat policies, a model's per-layer terms, the
activations of one token by tensor family, and the bytes per chip under the book's and the practitioner's
conventions. Part of `training_layouts`, which re-exports every public name here.

Remat policies: "none", "selective" (keep the outputs of the big matmuls, recompute norms, activation functions
and the attention core — the book's "big_matmuls"; Megatron's "selective" recomputes only the attention core,
which under flash attention is "none"), "full" (keep each block's input, recompute the block — the book's
"block").

- The book's memory (`book_memory`): bf16 weights + fp32 Adam moments = 10 B/param, no gradient bytes (ch. 5
  "Data Parallelism"), activations of the whole global batch by the rule of thumb (20·D per token and layer,
  ch. 4) spread over all chips.
- The practitioner's (`practitioner_memory`, with `zero_memory.MemoryOptions`): 16 B/param before ZeRO, each
  part an option; activations per micro-batch and per tensor (`activation_parts`: attention, MLP, norms, logits;
  after Korthikanti et al. 2022) times the micro-batches in flight on each stage (`pipeline_schedules.in_flight`).

Letters as in `training_costs`: X data-parallel chips, Y TP, Z pipeline stages, L layers, P parameters.
Pure Python; numbers in SI units (bytes, FLOPs).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.errors import name_index, resolve_name
from scalebook_utils.core.training import schedules as ps
from scalebook_utils.core.training.zero_memory import (
    PARAM_BYTES,
    Memory,
    MemoryOptions,
    checkpoint_bytes,
    training_memory,
)
from scalebook_utils.core.units import require_positive

__all__ = [
    "REMAT_POLICIES",
    "REMAT_ALIASES",
    "BOOK_REMAT",
    "REMAT_CHOICES",
    "remat_name",
    "remat_policy",
    "ModelTerms",
    "model_terms",
    "activation_parts",
    "logits_bytes_per_token",
    "device_params",
    "practitioner_memory",
    "book_memory",
    "ep_degree",
    "routed_expert_params",
]

REMAT_POLICIES = ("none", "selective", "full")
#: other names of the policies (compared after `errors.squash_name`): the book's (ch. 4), JAX's checkpoint policies
REMAT_ALIASES = {
    "big_matmuls": "selective",
    "block": "full",
    "no-remat": "none",
    "dots_saveable": "selective",
    "nothing_saveable": "full",
    "checkpoint": "full",
}
#: the book's name of each policy (transformer.REMAT_TENSORS_PER_LAYER)
BOOK_REMAT = {"none": "none", "selective": "big_matmuls", "full": "block"}
#: the book's policies (ch. 4), the chapters' planners' default (`training.plan(model, batch_tokens, chip)`)
REMAT_CHOICES = ("none", "big_matmuls", "block")
_REMAT_INDEX = name_index(REMAT_POLICIES, REMAT_ALIASES)


def remat_name(remat) -> str:
    """The common name ("none", "selective", "full") of a remat policy or one of its aliases (the book's
    "big_matmuls", "block"); UnknownNameError listing the close matches."""
    if not isinstance(remat, str):
        raise ValueError(
            f"remat must be one of {', '.join(REMAT_POLICIES)} (or the book's big_matmuls, block), "
            f"got {remat!r}; a number of checkpoints per layer needs conventions='book'"
        )
    return resolve_name(remat, _REMAT_INDEX, "remat policy", REMAT_POLICIES)


def remat_policy(remat) -> tuple[str, float | None]:
    """A policy name of transformer.REMAT_TENSORS_PER_LAYER (or its common name: "selective", "full"), or a
    number of D-wide checkpoints per layer (book ch. 6: 2, with the FLOPs of block remat)."""
    if isinstance(remat, str):
        name = BOOK_REMAT.get(remat, remat)
        if name not in tf.REMAT_TENSORS_PER_LAYER:
            raise ValueError(
                f"policy must be one of {', '.join(tf.REMAT_TENSORS_PER_LAYER)} (or "
                f"{', '.join(REMAT_POLICIES[1:])}); got {remat!r}"
            )
        return name, None
    require_positive(checkpoints_per_layer=remat)
    return "block", float(remat)


# --- a model's terms and the activations of one token ---------------------------------------------------


@dataclass(frozen=True)
class ModelTerms:
    """Per-layer parameters and FLOPs of one model at one sequence length (elements; FLOPs per token).

    dense_layer / moe_layer: a layer's parameters outside the routed experts (attention, norms, a dense MLP or
    the shared experts and router); experts: one MoE layer's routed experts; embedding (with positions) on the
    first stage, head (unembedding — a copy when tied — and the final norm) on the last. flops_*: a layer's
    training FLOPs per token (3 × forward, causal attention); recompute_*: the extra forward FLOPs of a remat
    policy; head_flops: 6·D·V. Their sum over layers is `transformer.training_flops_per_token(causal=True)`.
    """

    cfg: tf.TransformerConfig
    seq_len: float
    dense_layer: float
    moe_layer: float
    experts: float
    embedding: float
    head: float
    flops_dense: float
    flops_moe: float
    recompute_dense: tuple[tuple[str, float], ...]
    recompute_moe: tuple[tuple[str, float], ...]
    head_flops: float
    model_flops_per_token: float


@functools.lru_cache(maxsize=256)
def model_terms(cfg: tf.TransformerConfig, seq_len: float) -> ModelTerms:
    """The `ModelTerms` of `cfg` (cached: a planner asks for them once per layout)."""
    pc = tf.param_count(cfg)
    L, D = cfg.L, cfg.D
    final = D * (2 if cfg.norm_bias else 1) if cfg.final_norm else 0
    per_layer = pc.attention / L + (pc.norms - final) / L
    dense_mlp = cfg.mlp_matrices * D * cfg.F + ((cfg.mlp_matrices - 1) * cfg.F + D if cfg.linear_bias else 0)
    experts = cfg.E * cfg.mlp_matrices * D * (cfg.F_expert or cfg.F) if cfg.is_moe else 0.0
    moe_rest = (pc.mlp - cfg.dense_layers * dense_mlp) / cfg.moe_layers - experts if cfg.is_moe else 0.0
    proj = tf.projection_flops(cfg, 1) / L  # 2 · attention matmul params of one layer
    core = tf.attention_flops(cfg, 1, seq_len, causal=True) / L  # QKᵀ and PV of one layer, per token
    mlp_dense = 2 * cfg.mlp_matrices * D * cfg.F
    mlp_moe = (tf.mlp_flops(cfg, 1) - cfg.dense_layers * mlp_dense) / cfg.moe_layers if cfg.is_moe else 0.0
    fwd_dense, fwd_moe = proj + mlp_dense + core, proj + mlp_moe + core

    def rec(fwd):
        return (("none", 0.0), ("selective", core), ("full", fwd))

    return ModelTerms(
        cfg,
        seq_len,
        per_layer + dense_mlp,
        per_layer + moe_rest,
        experts,
        float(pc.embedding),
        float(cfg.V * D + final),
        3 * fwd_dense,
        3 * fwd_moe,
        rec(fwd_dense),
        rec(fwd_moe),
        6.0 * D * cfg.V,
        tf.training_flops_per_token(cfg, seq_len, causal=True),
    )


def activation_parts(
    cfg: tf.TransformerConfig,
    remat: str,
    *,
    tp: int = 1,
    seq_len: float = 4096,
    options: MemoryOptions = MemoryOptions(),
) -> dict[str, float]:
    """Saved activation bytes per token and layer on one chip of a `tp`-way TP group, by tensor family.

    none — norms: the two norm inputs (2·D); attention: the QKV input (D), Q (N·H), K and V (2·K·H; replicated
    when TP > K), the attention output (N·H), the fp32 log-sum-exp (N) or, without flash attention, the
    probabilities (N·S); mlp: its input (D) and the hidden activations (gated 3·F: gate, up, their product;
    ungated 2·F; MoE k·F_expert + shared, averaged over layers). selective — the big matmul outputs only
    (`transformer.activation_elements_per_token_per_layer(cfg, "big_matmuls")`: Q, K, V, O; the MLP's hidden
    outputs and its output). full — checkpoints: the block input (D). D-wide tensors are ÷ tp only with
    sequence parallelism; head-wide ones ÷ tp always. Korthikanti et al. 2022 (their 34·s·b·h + 5·a·s²·b bytes
    for GPT with dropout is this without flash attention, plus dropout masks, which LLMs today do not keep).
    """
    a, Y = options.activation_bytes, tp
    d = cfg.D / Y if options.sequence_parallel else cfg.D
    H, N = cfg.H, cfg.N
    if cfg.is_mla:
        q = k = N * (H + cfg.rope_head_dim) / Y
        v = N * H / Y
        latents = cfg.kv_lora_rank + cfg.rope_head_dim + cfg.q_lora_rank
    else:
        q, k, latents = N * H / Y, max(cfg.K / Y, 1) * H, 0.0
        v = k
    g = cfg.mlp_matrices - 1
    width = cfg.dense_layers * cfg.F
    if cfg.is_moe:
        width += cfg.moe_layers * (cfg.k + cfg.n_shared) * (cfg.F_expert or cfg.F)
    hidden = width / cfg.L / Y
    if remat == "full":
        return {"checkpoints": d * a}
    if remat == "selective":
        return {"attention": (q + k + v + d) * a, "mlp": (g * hidden + d) * a}
    if remat != "none":
        raise ValueError(f"remat must be one of {', '.join(REMAT_POLICIES)}, got {remat!r}")
    probs = N / Y * 4 if options.flash_attention else N / Y * seq_len * a
    return {
        "attention": (d + q + k + v + q + latents) * a + probs,
        "mlp": (d + (g + 1) * hidden) * a,
        "norms": 2 * d * a,
    }


def logits_bytes_per_token(cfg: tf.TransformerConfig, tp: int = 1, options: MemoryOptions = MemoryOptions()) -> float:
    """The logits of one token on one chip: V/tp (vocabulary-parallel) × logits_bytes (fp32 for the loss)."""
    return cfg.V / tp * options.logits_bytes


# --- memory per chip ----------------------------------------------------------------------------------


def device_params(terms: ModelTerms, d: int, Z: int, dense_layers: int, moe_layers: int) -> float:
    """Parameters (elements) outside the routed experts on pipeline device d of Z holding `dense_layers` dense
    and `moe_layers` MoE layers: their layers, the embedding on device 0, the head on the last."""
    return (
        dense_layers * terms.dense_layer
        + moe_layers * terms.moe_layer
        + (terms.embedding if d == 0 else 0.0)
        + (terms.head if d == Z - 1 else 0.0)
    )


def practitioner_memory(
    terms: ModelTerms, c, shape, remat: str, options: MemoryOptions
) -> tuple[Memory, dict[str, float], int]:
    """(Memory of the fullest device, its activations by tensor family, that device's stage index).

    Per device d: its layers' parameters (+ the embedding on stage 0, the head on the last stage) ÷ Y; the
    routed experts ÷ (ep·Y) and never ZeRO-sharded; weights ÷ X under ZeRO-3, master weights and Adam states ÷ X
    from ZeRO-1, gradients ÷ X from ZeRO-2 (ZeRO, Rajbhandari et al. 2020); ZeRO-3 also holds 2 gathered layers.
    Activations: `in_flight` micro-batches × t tokens × the device's layers × `activation_parts`; full remat adds
    one layer's "none" activations (the recompute's working set), the last stage the logits of its micro-batches
    in flight (all m under GPipe, else 1). `shape` is the layout's `training_layouts.Shape`."""
    cfg, Y, X, Z, o = terms.cfg, c.Y, c.X, c.Z, options
    ep = ep_degree(cfg, X)
    parts = activation_parts(cfg, remat, tp=Y, seq_len=terms.seq_len, options=o)
    per_layer = sum(parts.values())
    work_set = (
        sum(activation_parts(cfg, "none", tp=Y, seq_len=terms.seq_len, options=o).values()) if remat == "full" else 0.0
    )
    t = shape.mb_sequences * terms.seq_len
    kind = c.pipeline if Z > 1 else "1f1b"
    held = ps.in_flight(kind, Z, shape.m, c.virtual_stages, None)
    logits = logits_bytes_per_token(cfg, Y, o) * t * (shape.m if kind == "gpipe" else 1)
    z1, z2, z3 = (X if c.zero >= 1 else 1), (X if c.zero >= 2 else 1), (X if c.zero >= 3 else 1)
    per_param = o.param_bytes / z3 + o.grad_bytes / z2 + (o.optimizer_bytes + o.master_bytes) / z1
    per_expert = o.param_bytes + o.grad_bytes + o.optimizer_bytes + o.master_bytes
    gathered = 2 * o.param_bytes * max(terms.dense_layer, terms.moe_layer) / Y if (c.zero == 3 and X > 1) else 0.0
    worst, top = 0, -1.0
    for d, (nd, nm) in enumerate(shape.device_layers):  # the fullest device; its parts are built below
        dense = device_params(terms, d, Z, nd, nm)
        total = (
            per_param * dense / Y
            + per_expert * nm * terms.experts / (ep * Y)
            + gathered
            + held[d] * t * (nd + nm) * per_layer
            + work_set * t
            + (logits if d == Z - 1 else 0.0)
        )
        if total > top:
            worst, top = d, total
    nd, nm = shape.device_layers[worst]
    dense = device_params(terms, worst, Z, nd, nm)
    p, ex = dense / Y, nm * terms.experts / (ep * Y)
    acts = {k: x * held[worst] * t * (nd + nm) for k, x in parts.items()}
    if work_set:
        acts["recompute working set"] = work_set * t
    if worst == Z - 1:
        acts["logits"] = logits
    mem = Memory(
        params=o.param_bytes * (p / z3 + ex),
        grads=o.grad_bytes * (p / z2 + ex),
        optimizer=o.optimizer_bytes * (p / z1 + ex),
        activations=sum(acts.values()),
        gathered=gathered,
        master=o.master_bytes * (p / z1 + ex),
    )
    return mem, acts, worst


def book_memory(cfg: tf.TransformerConfig, c, batch_tokens: float, grad_bytes: float) -> Memory:
    """Bytes per chip of layout `c`: `training_memory` of the dense parameters (ZeRO over X, TP × PP shards),
    the routed experts sharded over ep·Y·Z chips, the activations of the remat policy (or checkpoints) spread
    over all chips, and under FSDP the AllGathered layer being used (2 layers' worth, ÷ Y). Book ch. 5–6."""
    policy, ckpt = remat_policy(c.remat)
    pc = tf.param_count(cfg)
    P, expert = pc.total, routed_expert_params(cfg)
    if ckpt is None:
        act_total = tf.activation_bytes(cfg, batch_tokens, policy)
    else:
        act_total = checkpoint_bytes(cfg.D, cfg.L, batch_tokens, ckpt)
    layer_params = (P - pc.embedding - pc.unembedding) / cfg.L
    gathered = 2 * PARAM_BYTES * layer_params / c.Y if (c.zero == 3 and c.X > 1) else 0.0
    dense = training_memory(
        P - expert,
        zero=c.zero,
        X=c.X,
        model_shards=c.Y * c.Z,
        activation_bytes_total=act_total,
        n_chips=c.chips,
        grad_bytes=grad_bytes,
        gathered_bytes=gathered,
    )
    if expert:
        ex = training_memory(expert, zero=0, model_shards=ep_degree(cfg, c.X) * c.Y * c.Z, grad_bytes=grad_bytes)
        dense = replace(
            dense,
            params=dense.params + ex.params,
            grads=dense.grads + ex.grads,
            optimizer=dense.optimizer + ex.optimizer,
        )
    return dense


def ep_degree(cfg: tf.TransformerConfig, X: int) -> int:
    """Expert parallelism over the data axis: ep = gcd(X, E) ways (1 for a dense model)."""
    return math.gcd(X, cfg.E) if cfg.is_moe else 1


def routed_expert_params(cfg: tf.TransformerConfig) -> int:
    if not cfg.is_moe:
        return 0
    width = cfg.F_expert or cfg.F
    return cfg.moe_layers * cfg.E * cfg.mlp_matrices * cfg.D * width
