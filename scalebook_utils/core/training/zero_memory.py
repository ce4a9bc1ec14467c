"""Adam/ZeRO memory per chip, in closed form (book ch. 5 "Data Parallelism", "FSDP"; ch. 6 "Training LLaMA 3 on
TPUs"): the bytes a training run keeps per parameter and per chip, and the bytes its data-parallel collectives move.

Notation as in `training_costs`: X chips of data parallelism, `model_shards` = Y·Z (TP × pipeline); P parameters;
D = d_model, L layers; bytes per chip in SI units (B).

What it holds:

- the book's byte counts: bf16 parameters (`PARAM_BYTES` = 2) + fp32 Adam m, v (`OPTIMIZER_BYTES` = 8) =
  `ADAM_BYTES_PER_PARAM` = 10 B/param, bf16 activations (`ACT_BYTES` = 2);
- `Memory` (bytes per chip by part), `checkpoint_bytes` (activation checkpoints: per_layer·D·tokens·L·bytes, ch. 6)
  and `training_memory` (ZeRO-1 shards the optimizer over X, ZeRO-2 also the gradients, ZeRO-3 the parameters);
- memory as practitioners count it, for the planner's default conventions (issue 17): `MemoryOptions` (bf16
  weights + fp32 master + fp32 Adam m, v + bf16 gradients = 16 B/param, each an option) and the bytes the
  data-parallel collectives move per ZeRO stage and micro-batch (`dp_bytes_per_param`).

Pure Python. `training_costs` re-exports every public name here (and `training_layouts`, `training` their
memory names), so `training.training_memory`, `training_layouts.MemoryOptions`, … work as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core.units import format_bytes, require_bytes, require_positive

__all__ = [
    "ADAM_BYTES_PER_PARAM",
    "PARAM_BYTES",
    "OPTIMIZER_BYTES",
    "ACT_BYTES",
    "Memory",
    "checkpoint_bytes",
    "training_memory",
    "MemoryOptions",
    "dp_bytes_per_param",
]

#: bf16 parameters (2) + fp32 Adam first and second moments (8): book ch. 5 "Data Parallelism"
ADAM_BYTES_PER_PARAM = 10
PARAM_BYTES, OPTIMIZER_BYTES = 2, 8
ACT_BYTES = 2  # bf16 activations


# --- the book's memory: Adam and ZeRO (ch. 5), activation checkpoints (ch. 6) ---------------------------


@dataclass(frozen=True)
class Memory:
    """Bytes per chip: parameters, gradients, optimizer state, activation checkpoints, FSDP's gathered layer, and
    the optimizer's fp32 master weights (0 in the book's 10 bytes/param; `zero_memory.MemoryOptions`)."""

    params: float
    grads: float
    optimizer: float
    activations: float
    gathered: float = 0.0
    master: float = 0.0

    PARTS = ("params", "master", "grads", "optimizer", "activations", "gathered")

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.gathered + self.master

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in self.PARTS}

    def describe(self) -> str:
        parts = ", ".join(f"{k} {format_bytes(getattr(self, k))}" for k in self.PARTS if getattr(self, k))
        return f"{format_bytes(self.total)} per chip ({parts})"


def checkpoint_bytes(D: float, L: float, tokens: float, per_layer: float, dtype_bytes: float = ACT_BYTES) -> float:
    """Activation checkpoints: per_layer tensors of width D per token and layer: per_layer·D·tokens·L·bytes.

    Book ch. 6: 2 per layer (layer input and after attention) → 2·D·B·2·L bytes in bf16.
    """
    require_positive(D=D, L=L, tokens=tokens, per_layer=per_layer)
    return per_layer * D * tokens * L * dtype_bytes


def training_memory(
    params: float,
    *,
    zero: int = 3,
    X: int = 1,
    model_shards: int = 1,
    activation_bytes_total: float = 0.0,
    n_chips: int = 1,
    grad_bytes: float = 0.0,
    gathered_bytes: float = 0.0,
) -> Memory:
    """Per-chip memory of Adam training with ZeRO stage `zero` over X data-parallel chips.

    ZeRO-1 shards the optimizer state over X, ZeRO-2 also the gradients, ZeRO-3 (FSDP) also the parameters
    (book ch. 5 "FSDP"); `model_shards` (TP × PP) divides everything. bf16 params (2 B), fp32 Adam moments
    (8 B); gradients cost `grad_bytes` per parameter — 0 by default, as the book's 10 bytes/param does.
    Activations are spread evenly over all `n_chips`.
    """
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0 (plain DP), 1, 2 or 3 (FSDP), got {zero!r}")
    require_positive(params=params, X=X, model_shards=model_shards, n_chips=n_chips)
    p = params / model_shards
    return Memory(
        params=PARAM_BYTES * p / (X if zero >= 3 else 1),
        grads=grad_bytes * p / (X if zero >= 2 else 1),
        optimizer=OPTIMIZER_BYTES * p / (X if zero >= 1 else 1),
        activations=activation_bytes_total / n_chips,
        gathered=gathered_bytes,
    )


# --- memory as practitioners count it (issue 17; the planners use it through training_layouts) -------------


@dataclass(frozen=True)
class MemoryOptions:
    """Bytes a mixed-precision Adam run keeps (defaults: the practitioner's 16 B/param before ZeRO).

    param_bytes: the working weights (bf16); master_bytes: the optimizer's fp32 copy (0: none, as the book);
    optimizer_bytes: Adam's m and v (2 × fp32); grad_bytes: gradients (bf16; 4 for fp32 accumulation, 0 as the
    book). activation_bytes per saved element (bf16), logits_bytes per logit (fp32 for the loss).
    sequence_parallel: with TP, the D-wide tensors (norm inputs and outputs) are sharded over the TP group too
    (Korthikanti et al. 2022); else replicated. flash_attention: the attention probabilities are never stored
    (only the fp32 log-sum-exp per head); else N·S per token are (non-causal kernels store the full matrix).
    """

    param_bytes: float = 2.0
    master_bytes: float = 4.0
    optimizer_bytes: float = 8.0
    grad_bytes: float = 2.0
    activation_bytes: float = 2.0
    logits_bytes: float = 4.0
    sequence_parallel: bool = True
    flash_attention: bool = True

    def __post_init__(self):
        for f in ("param_bytes", "master_bytes", "optimizer_bytes", "grad_bytes", "activation_bytes", "logits_bytes"):
            require_bytes(f, getattr(self, f))
        require_positive(param_bytes=self.param_bytes, activation_bytes=self.activation_bytes)

    @property
    def bytes_per_param(self) -> float:
        return self.param_bytes + self.master_bytes + self.optimizer_bytes + self.grad_bytes

    def describe(self) -> str:
        parts = [
            f"weights {self.param_bytes:g}",
            f"fp32 master {self.master_bytes:g}" if self.master_bytes else "no master copy",
            f"Adam m, v {self.optimizer_bytes:g}",
            f"gradients {self.grad_bytes:g}",
        ]
        return (
            f"memory counted as a practitioner does: {' + '.join(parts)} = {self.bytes_per_param:g} B/param "
            f"before ZeRO; activations per micro-batch and tensor in {self.activation_bytes:g}-byte elements"
            f"{', sequence-parallel' if self.sequence_parallel else ''}"
            f"{', flash attention' if self.flash_attention else ', attention probabilities stored'}, "
            f"logits in {self.logits_bytes:g} B (conventions='book' gives the book's 10 B/param instead)"
        )


def dp_bytes_per_param(zero: int, m: int, options: MemoryOptions) -> float:
    """Bytes per (model-sharded) parameter the data-parallel collectives move per step, in AllGather-equivalents
    (an AllReduce is a ReduceScatter + an AllGather; ch. 3): ZeRO-0 one gradient AllReduce (2·g); ZeRO-1 a
    ReduceScatter of gradients and an AllGather of weights (g + w); ZeRO-2 a ReduceScatter per micro-batch
    (m·g + w); ZeRO-3 weights gathered for every micro-batch's forward and backward, gradients scattered per
    micro-batch (2m·w + m·g). w = weight bytes, g = gradient bytes (w when gradients are not counted)."""
    w = options.param_bytes
    g = options.grad_bytes or w
    return {0: 2 * g, 1: g + w, 2: m * g + w, 3: m * (2 * w + g)}[zero]
