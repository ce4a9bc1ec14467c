"""Chapter 6's applied training numbers (book ch. 6, "Training LLaMA 3 on TPUs"), pure.

Where a model's parameters are (`param_breakdown`), days to train (`days_to_train`), memory per chip and the
fewest chips that hold it (`memory_per_chip`, `min_chips_for_model`), and the book's decision path from pure
FSDP to FSDP + TP (`decision_path`). Public name `applied_training`. The chapter 6 views
(`views.ch06_applied_training`, public name `applied_training_views`) draw and print these;
tests/test_applied_training_core.py checks them without matplotlib or ipywidgets.

Formulas (book ch. 6, LLaMA 3-70B on a v5p pod):
- parameters by part: FFW 3·L·D·F, attention L·(2DNH + 2DKH), vocab 2·V·D, norms (2L + 1)·D;
- days to train: 6 · P · tokens / (chips · C · MFU) / 86,400 s (`training.training_time`);
- memory per chip, everything sharded evenly: bf16 params 2·P, fp32 Adam state 8·P, activation checkpoints
  2·D·B·(checkpoints per layer)·L bytes (`training.checkpoint_bytes`), all divided by the chips;
- the decision path: tokens per chip B/N against α/M_X (FSDP) and α²/(M_X·M_Y·F) (FSDP + TP).

Notation as in `training_costs`: B tokens per batch, D, F, L, N, K, H, V of the model; P parameters; C the chip's
bf16 FLOPs/s; X data, Y tensor degrees; M_X, M_Y the ICI axes they span; α = C/W_ici. Bytes and seconds (SI).
"""

from __future__ import annotations

import math

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as training

__all__ = [
    "param_breakdown",
    "days_to_train",
    "memory_per_chip",
    "min_chips_for_model",
    "decision_path",
]


# --- parameters, days to train, memory (book ch. 6: counting parameters and FLOPs; memory) -----------------


def param_breakdown(model="llama3-70b") -> dict[str, int]:
    """Parameters by part, as book ch. 6 counts them: FFW (MLP), attention, vocab (embedding + output), norms."""
    pc = tf.param_count(tf.get_model(model))
    return {
        "FFW (MLP)": pc.mlp,
        "attention": pc.attention,
        "vocab (embed + unembed)": pc.embedding + pc.unembedding,
        "norms": pc.norms,
    }


def days_to_train(
    model="llama3-70b", tokens: float = 15e12, n_chips: float = 8960, chip="tpu-v5p", mfu: float = 0.4
) -> float:
    """Days to train on `n_chips`: 6 · params · tokens / (chips · C · MFU) (`training.training_time`), book ch. 6."""
    P = tf.param_count(tf.get_model(model)).total
    return training.training_time(P, tokens, n_chips, chip, mfu) / 86_400


def memory_per_chip(
    model="llama3-70b", batch_tokens: float = 4 * 2**20, n_chips: float = 8960, checkpoints_per_layer: float = 2
) -> dict[str, float]:
    """Bytes per chip when everything is spread evenly (book ch. 6): bf16 params (2/param), fp32 Adam (8/param),
    activation checkpoints 2·D·B·(checkpoints per layer)·L bytes (`training.checkpoint_bytes`)."""
    cfg = tf.get_model(model)
    P = tf.param_count(cfg).total
    m = training.training_memory(
        P,
        zero=3,
        X=n_chips,
        n_chips=n_chips,
        activation_bytes_total=training.checkpoint_bytes(cfg.D, cfg.L, batch_tokens, checkpoints_per_layer),
    )
    return {"params": m.params, "optimizer": m.optimizer, "activations": m.activations}


def min_chips_for_model(
    model="llama3-70b", batch_tokens: float = 4 * 2**20, checkpoints_per_layer: float = 2, chip="tpu-v5p"
) -> int:
    """The fewest chips whose HBM holds a model's params, Adam state and checkpoints: ceil(total / HBM) (book
    ch. 6), the total being `memory_per_chip` on one chip and the count `training.min_chips_for_memory`'s."""
    total = sum(memory_per_chip(model, batch_tokens, 1, checkpoints_per_layer).values())
    return training.min_chips_for_memory(total, chip)


# --- the decision path (book ch. 6: how to shard LLaMA 3-70B for training) ----------------------------------


def decision_path(
    model="llama3-70b",
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    chip="tpu-v5p",
    n_chips: int | None = None,
    checkpoints_per_layer: float = 2,
) -> list[dict]:
    """Book ch. 6's three steps, each evaluated by `training.evaluate` with `checkpoints_per_layer` checkpoints:

    1. pure FSDP over the batch only (sequence sharding not allowed) — more chips than sequences: infeasible;
    2. FSDP over batch and sequence — tokens per chip against α/M_X;
    3. FSDP + TP with the split the planner picks — tokens per chip against α²/(M_X·M_Y·F).
    Each row: step, config, feasible, tokens_per_chip, threshold (name, value), bound, verdict, step_s, mfu, estimate.
    """
    cfg = tf.get_model(model)
    spec = get_chip(chip)
    N = n_chips or spec.pod_chips
    n = spec.ici_torus_dims
    per_chip = batch_tokens / N
    rows = []

    def row(step, est, thr_name, thr):
        ok = est.feasible
        if not ok:
            verdict = f"infeasible: {est.reason}"
        else:
            above = per_chip > thr
            kind = "compute-bound" if est.compute_bound else "communication-bound"
            verdict = f"{kind} ({per_chip:.0f} {'>' if above else '<'} {thr:.0f})"
        rows.append(
            {
                "step": step,
                "config": est.config.name,
                "feasible": ok,
                "tokens_per_chip": per_chip,
                "threshold": (thr_name, thr),
                "bound": est.bound if ok else "-",
                "verdict": verdict,
                "step_s": est.step_time if ok else math.nan,
                "mfu": est.mfu if ok else math.nan,
                "estimate": est,
            }
        )

    fsdp = training.Config(X=N, remat=checkpoints_per_layer)
    sequences = batch_tokens / seq_len
    row(
        "pure FSDP, batch only",
        training.evaluate(cfg, batch_tokens, fsdp, spec, seq_len=seq_len, allow_sequence_sharding=False),
        "sequences",
        sequences,
    )
    row(
        "FSDP over batch and sequence",
        training.evaluate(cfg, batch_tokens, fsdp, spec, seq_len=seq_len),
        "α/M_X",
        training.dp_min_batch_per_chip(spec, n),
    )
    best = training.cached_plan(cfg, spec, N, 1, batch_tokens, seq_len, True).best_of("fsdp+tp")
    X, Y = (best.config.X, best.config.Y) if best else (N // 4, 4)
    M_X, M_Y = training.ici_axes(spec, X, Y)
    row(
        "FSDP + TP (planner's split)",
        training.evaluate(
            cfg, batch_tokens, training.Config(X=X, Y=Y, remat=checkpoints_per_layer), spec, seq_len=seq_len
        ),
        "α²/(M_X·M_Y·F)",
        training.mixed_min_batch_per_chip(cfg.F, spec, M_X, M_Y),
    )
    return rows
