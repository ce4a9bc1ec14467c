"""Training layouts without the network: what the TPU planner (`training`, book ch. 5–6) and the GPU planner
(`gpu_training`, ch. 12) share — validity rules, FLOPs per step and per pipeline stage, memory per chip.

Letters as in `training_costs`: X data-parallel chips per slice (dp = X·slices), Y tensor parallelism (tp),
Z pipeline stages (pp), v virtual stages (chunks) per device, m micro-batches per data shard and step (gradient
accumulation and the pipeline's micro-batches are the same m), L layers, P parameters. A layout is any object
with the fields of `training.Config` (X, Y, Z, slices, zero, remat, microbatches, pipeline, virtual_stages,
stage_layers).

Two conventions:

- "book" (`book_problems`, `book_step_flops`, `book_memory`): the book's simplifications, so that every book
  number reproduces — bf16 weights + fp32 Adam moments = 10 B/param and no gradient bytes (ch. 5 "Data
  Parallelism"), activations of the whole global batch by the rule of thumb (20·D per token and layer, ch. 4)
  spread over all chips, the GPipe bubble, stages that divide L.
- "practitioner" (`practitioner_shape`, `practitioner_flops`, `practitioner_memory`, `practitioner_comm_load`, with
  `zero_memory.MemoryOptions` and `pipeline_schedules`' stages and schedules): memory as
  a mixed-precision Adam run counts it — bf16 weights (2 B/param) + fp32 master weights (4) + fp32 Adam m, v (8)
  + bf16 gradients (2) = 16 B/param before ZeRO (Rajbhandari et al. 2020 count 16 too, with fp16), each an
  option; activations per micro-batch and per tensor (attention, MLP, norms, logits; after Korthikanti et al.
  2022, with sequence parallelism and flash attention), times the micro-batches the schedule keeps in flight on
  each stage (`pipeline_schedules.in_flight`); uneven stages; 1F1B and interleaved bubbles.

Remat policies ("none", "selective", "full"), the per-layer terms, the activations and the memory per chip are in
`core/training/memory.py` (whose public names are re-exported here). Pure Python; numbers in SI units (bytes,
FLOPs, seconds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.errors import name_index, resolve_name
from scalebook_utils.core.hardware import ChipSpec
from scalebook_utils.core.training import schedules as ps

# remat policies, a model's terms, activations and memory per chip: re-exported as part of this module
from scalebook_utils.core.training.memory import (
    BOOK_REMAT,
    REMAT_ALIASES,
    REMAT_CHOICES,
    REMAT_POLICIES,
    ModelTerms,
    activation_parts,
    book_memory,
    device_params,
    ep_degree,
    logits_bytes_per_token,
    model_terms,
    practitioner_memory,
    remat_name,
    remat_policy,
    routed_expert_params,
)
from scalebook_utils.core.training.zero_memory import (
    PARAM_BYTES,
    Memory,
    MemoryOptions,
    checkpoint_bytes,
    dp_bytes_per_param,
    training_memory,
)
from scalebook_utils.core.units import format_bytes, require_int

__all__ = [
    "CONVENTIONS",
    "REMAT_POLICIES",
    "REMAT_ALIASES",
    "BOOK_REMAT",
    "SCHEDULE_ALIASES",
    "remat_name",
    "schedule_name",
    "ModelTerms",
    "model_terms",
    "activation_parts",
    "logits_bytes_per_token",
    "Shape",
    "practitioner_shape",
    "practitioner_flops",
    "practitioner_memory",
    "default_microbatches",
    "layout_groups",
    "CommLoad",
    "book_comm_load",
    "practitioner_comm_load",
    "check_layout",
    "remat_policy",
    "book_problems",
    "book_step_flops",
    "book_memory",
    "hbm_reasons",
    "ep_degree",
    "layers_per_stage",
    "divisors",
    "layouts",
    "pipeline_microbatches",
    "rank_key",
    "routed_expert_params",
    "REMAT_CHOICES",
    "device_params",
    # training_costs' memory names, which this module has always offered too
    "Memory",
    "MemoryOptions",
    "PARAM_BYTES",
    "checkpoint_bytes",
    "dp_bytes_per_param",
    "training_memory",
]

CONVENTIONS = ("practitioner", "book")
SCHEDULE_ALIASES = {
    "pipedream-flush": "1f1b",
    "one-f-one-b": "1f1b",
    "interleaved-1f1b": "interleaved",
    "1f1b-interleaved": "interleaved",
    "virtual": "interleaved",
}
_SCHEDULE_INDEX = name_index(ps.SCHEDULES, SCHEDULE_ALIASES)


def schedule_name(pipeline) -> str:
    """ "gpipe", "1f1b" or "interleaved" for `pipeline` or an alias; UnknownNameError listing the close matches."""
    return resolve_name(str(pipeline), _SCHEDULE_INDEX, "pipeline schedule", ps.SCHEDULES)


# --- the practitioner's layout: its shape, FLOPs and collectives ------------------------------------------


def default_microbatches(batch_tokens: float, seq_len: float, dp: int, pp: int) -> int:
    """m when none is given: with a pipeline, one sequence per micro-batch (the shard's sequences; the least
    bubble and memory); without, 1 (no gradient accumulation). 1 when the batch does not split into sequences."""
    per_shard = batch_tokens / seq_len / dp
    return int(per_shard) if pp > 1 and _whole(per_shard) and per_shard >= 1 else 1


def _whole(x: float) -> bool:
    return math.isfinite(x) and float(x).is_integer()


@dataclass(frozen=True)
class CommLoad:
    """What one chip's collectives move per step, before any network (the TPU and GPU planners turn it into
    seconds): dp_bytes — the dense data-parallel collectives, AllGather-equivalent bytes of this chip's share;
    expert_bytes — the routed experts' gradient AllReduce (0 when every data chip holds its own experts);
    tp_layers, moe_layers — the layers whose TP collectives and expert AllToAlls the busiest device runs;
    tokens_per_shard — tokens of a data shard per step; pp_chunks — activation transfers per micro-batch and
    device (v); dcn_bytes — the gradient AllReduce across DCN slices, per chip."""

    dp_bytes: float
    expert_bytes: float
    tp_layers: float
    moe_layers: float
    tokens_per_shard: float
    pp_chunks: int = 1
    dcn_bytes: float = 0.0


def book_comm_load(cfg: tf.TransformerConfig, c, tokens_per_shard: float, *, gpu: bool = False) -> CommLoad:
    """The book's collectives (ch. 5 for TPUs, ch. 12 for GPUs): P' = (P − P_e)/(Y·Z) weights per chip, DP
    2 collectives (one AllReduce) and FSDP 3 (AllGather forward and backward, ReduceScatter) — on GPUs with a
    pipeline 2m + 1 (weights gathered again per micro-batch, ch. 12); expert gradients 2 collectives of
    P_e/(ep·Y·Z); the DCN AllReduce 2 · 2P/(X·Y·Z); L/Z layers and MoE layers per stage."""
    P, E = tf.param_count(cfg).total, routed_expert_params(cfg)
    M, ep = c.Y * c.Z, ep_degree(cfg, c.X)
    dp = ex = 0.0
    if c.X > 1:
        colls = (2 * c.microbatches + 1 if gpu and c.Z > 1 else 3) if c.zero == 3 else 2
        dp = colls * PARAM_BYTES * (P - E) / M
        ex = 2 * PARAM_BYTES * E / (ep * M) if E and c.X > ep else 0.0
    return CommLoad(
        dp,
        ex,
        layers_per_stage(cfg, c.Z),
        cfg.moe_layers / c.Z,
        tokens_per_shard,
        1,
        2 * PARAM_BYTES * P / (c.X * c.Y * c.Z),
    )


def practitioner_comm_load(terms: ModelTerms, c, shape: Shape, options: MemoryOptions) -> CommLoad:
    """The practitioner's collectives for the busiest device: its stage's weights (embedding, head included) ÷ Y
    times `dp_bytes_per_param`(zero, m); its experts' gradients (2 × g bytes ÷ ep·Y); its layers; v chunks; the
    DCN AllReduce of its 1/X gradient share (2 × g bytes)."""
    cfg, Y, X, Z = terms.cfg, c.Y, c.X, c.Z
    ep = ep_degree(cfg, X)
    stage = [device_params(terms, d, Z, nd, nm) for d, (nd, nm) in enumerate(shape.device_layers)]
    p_dev = max(stage) / Y
    moe = max(nm for _, nm in shape.device_layers)
    g = options.grad_bytes or options.param_bytes
    dp = dp_bytes_per_param(c.zero, shape.m, options) * p_dev if X > 1 else 0.0
    ex = 2 * g * moe * terms.experts / (ep * Y) if (terms.experts and X > ep) else 0.0
    return CommLoad(
        dp,
        ex,
        max(nd + nm for nd, nm in shape.device_layers),
        moe,
        shape.tokens_per_shard,
        c.virtual_stages,
        2 * g * p_dev / X,
    )


@dataclass(frozen=True)
class Shape:
    """What a practitioner layout is, once checked: reasons it cannot run (empty: it can), the micro-batches m
    and their sequences, tokens per data shard, the layers of each virtual stage, and each device's (dense,
    MoE) layer counts."""

    reasons: tuple[str, ...]
    notes: tuple[str, ...] = ()
    m: int = 1
    mb_sequences: float = 1.0
    tokens_per_shard: float = 0.0
    chunks: tuple[int, ...] = ()
    device_layers: tuple[tuple[int, int], ...] = ()


def practitioner_shape(cfg: tf.TransformerConfig, c, batch_tokens: float, seq_len: float) -> Shape:
    """Check layout `c` for the practitioner's model. Reasons (sentences): TP must divide the N query heads and
    F (and F_expert), and TP and the K KV heads must divide one into the other (KV heads are replicated when TP > K:
    a note); the batch must be whole sequences that split evenly over the dp data shards and then into the m
    micro-batches (default: one sequence per micro-batch with a pipeline, one micro-batch without); the stages
    must cover the layers (`split_stages`); interleaving needs pp > 1, virtual_stages ≥ 2 and m a multiple of pp."""
    reasons, notes = _tp_problems(cfg, c.Y)
    reasons += _schedule_problems(c)
    Z = c.Z
    chunks, stage_reasons = ps.split_stages(cfg.L, Z, c.virtual_stages, c.stage_layers)
    reasons += stage_reasons
    dp, m = c.X * c.slices, c.microbatches
    per_shard = batch_tokens / seq_len / dp
    reasons += _batch_problems(c, batch_tokens, seq_len)
    if reasons or chunks is None:
        return Shape(tuple(reasons), tuple(notes))
    return Shape((), tuple(notes), int(m), per_shard / m, batch_tokens / dp, chunks, _device_layers(cfg, chunks, Z))


def _tp_problems(cfg: tf.TransformerConfig, Y: int) -> tuple[list[str], list[str]]:
    """(reasons, notes) of Y-way TP for the practitioner: the query heads, the KV heads, the MLP widths."""
    reasons, notes = [], []
    if Y > cfg.N or cfg.N % Y:
        reasons.append(f"TP {Y} must divide the N={cfg.N} query heads" + (" (it is beyond them)" if Y > cfg.N else ""))
    elif not cfg.is_mla and (cfg.K % Y if Y <= cfg.K else Y % cfg.K):
        reasons.append(f"TP {Y} and the K={cfg.K} KV heads must divide one into the other")
    elif not cfg.is_mla and Y > cfg.K:
        notes.append(f"KV heads replicated {Y // cfg.K}× (TP {Y} > K={cfg.K})")
    widths = [cfg.F] + ([cfg.F_expert] if cfg.is_moe and cfg.F_expert else [])
    if any(w % Y for w in widths):
        reasons.append(f"TP {Y} must divide F={'/'.join(map(str, widths))}")
    return reasons, notes


def _schedule_problems(c) -> list[str]:
    """Why layout `c`'s schedule cannot run: interleaving needs virtual_stages ≥ 2 (and they need it), a pipeline."""
    reasons, Z, v, kind = [], c.Z, c.virtual_stages, c.pipeline
    if kind == "interleaved" and v < 2:
        reasons.append("pipeline='interleaved' needs virtual_stages ≥ 2 (1 chunk per device is plain 1F1B)")
    elif v > 1 and kind != "interleaved":
        reasons.append(f"virtual_stages={v} needs pipeline='interleaved' (got {kind!r})")
    if Z == 1 and v > 1:
        reasons.append(f"virtual_stages={v} needs a pipeline (pp > 1)")
    return reasons


def _batch_problems(c, batch_tokens: float, seq_len: float) -> list[str]:
    """Why the batch does not feed layout `c`: whole sequences, split evenly over the data shards, then into m
    micro-batches (a multiple of pp when interleaved)."""
    reasons, Z, kind = [], c.Z, c.pipeline
    dp = c.X * c.slices
    seqs = batch_tokens / seq_len
    m = c.microbatches
    per_shard = seqs / dp
    if not _whole(seqs):
        reasons.append(f"batch_tokens={batch_tokens:g} is not a whole number of {seq_len:g}-token sequences")
    elif dp > seqs:
        reasons.append(f"dp={dp} data shards exceed the {seqs:g} sequences of the batch")
    elif not _whole(per_shard):
        reasons.append(f"the {seqs:g} sequences do not split evenly over dp={dp} data shards")
    else:
        if per_shard % m:
            reasons.append(f"{m} micro-batches do not divide the {per_shard:g} sequences of a data shard")
        if kind == "interleaved" and Z > 1 and m % Z:
            reasons.append(f"the interleaved schedule needs the micro-batches (m={m}) to be a multiple of pp={Z}")
    return reasons


def _device_layers(cfg: tf.TransformerConfig, chunks, Z: int) -> tuple[tuple[int, int], ...]:
    """Each of the Z devices' (dense, MoE) layer counts when virtual stage s (of `chunks` layers) runs on s mod Z."""
    dense_left = cfg.dense_layers
    device = [[0, 0] for _ in range(Z)]
    for s, n in enumerate(chunks):  # layers are assigned to virtual stages 0, 1, …, S − 1 in order
        dense = min(n, dense_left)
        dense_left -= dense
        device[s % Z][0] += dense
        device[s % Z][1] += n - dense
    return tuple((a, b) for a, b in device)


def practitioner_flops(terms: ModelTerms, c, shape: Shape, remat: str, C: float) -> tuple[float, float, float, float]:
    """(T_math, model FLOPs, executed FLOPs, bubble) of one step. Device d of a stage does, per micro-batch of
    t = mb_sequences·seq_len tokens, W_d = t · (Σ of its layers' FLOPs per token with the recompute, + the head on
    the last device) / (Y · C); T_math = `pipeline_schedules.step_time`(schedule, W, m, v). Model FLOPs leave the
    recompute out (MFU); executed FLOPs keep it (HFU). Bubble = 1 − (m · mean W_d) / T_math."""
    rd, rm = dict(terms.recompute_dense)[remat], dict(terms.recompute_moe)[remat]
    t = shape.mb_sequences * terms.seq_len
    per_device = [nd * (terms.flops_dense + rd) + nm * (terms.flops_moe + rm) for nd, nm in shape.device_layers]
    per_device[-1] += terms.head_flops
    work = [t * f / (c.Y * C) for f in per_device]
    t_math = ps.step_time(c.pipeline if c.Z > 1 else "1f1b", work, shape.m, c.virtual_stages)
    batch = shape.tokens_per_shard * c.X * c.slices
    executed = batch * sum(per_device)
    bubble = 1 - shape.m * sum(work) / len(work) / t_math if t_math > 0 else 0.0
    return t_math, batch * terms.model_flops_per_token, executed, max(bubble, 0.0)


def layout_groups(
    cfg: tf.TransformerConfig, c, batch_tokens: float, seq_len: float, *, zero_stages, remats, kinds, virtual_stages
) -> Iterator[tuple[bool, list[dict]]]:
    """The practitioner planner's candidates for the degrees of layout `c`: for each schedule (1F1B only without a
    pipeline; `kinds` and each of `virtual_stages` with one, up to L + 2 chunks — at most the first and the last
    empty, as in Llama 3; `ps.balanced_stage_layers` when L does not split evenly), ZeRO stage and remat policy,
    a group of `Config` keyword sets over m (the divisors of a data shard's sequences, multiples of pp when
    interleaved) and whether the group stops at its first feasible member. The
    planner keeps each group's fastest: without a pipeline the fewest micro-batches that fit (time does not fall
    with m); with one and ZeRO ≤ 1 only the most (time and memory both fall with m); with ZeRO ≥ 2 all of them
    (the collectives grow with m while the bubble shrinks)."""
    per_shard = int(batch_tokens / seq_len // (c.X * c.slices))
    counts = divisors(per_shard) if per_shard >= 1 else [1]
    Z = c.Z
    schedules = (
        [("1f1b", 1)]
        if Z == 1
        else [(k, 1) for k in kinds if k != "interleaved"]
        + [("interleaved", v) for v in virtual_stages if "interleaved" in kinds and Z * v <= cfg.L + 2]
    )
    for kind, v in schedules:
        S = Z * v
        layers = None if cfg.L % S == 0 else ps.balanced_stage_layers(cfg.L, S)
        ms = [m for m in counts if kind != "interleaved" or m % Z == 0]
        if not ms:
            continue
        for zero in zero_stages if c.X > 1 else (0,):
            here = ms[-1:] if Z > 1 and zero <= 1 else ms
            for r in remats:
                yield (
                    Z == 1,
                    [
                        dict(
                            X=c.X,
                            Y=c.Y,
                            Z=Z,
                            slices=c.slices,
                            zero=zero,
                            remat=r,
                            microbatches=m,
                            pipeline=kind,
                            virtual_stages=v,
                            stage_layers=layers,
                        )
                        for m in here
                    ],
                )


# --- the book's rules (shared by both planners; book ch. 5–6 and 12) -----------------------------------------


def check_layout(c) -> None:
    """ValueError (`units.require_int`) unless every degree of `c` (and its microbatch count) is an integer ≥ 1."""
    for name in ("X", "Y", "Z", "slices", "microbatches", "virtual_stages"):
        require_int(name, getattr(c, name, 1))


def book_problems(
    cfg: tf.TransformerConfig, c, batch_tokens: float, seq_len: float, allow_sequence_sharding: bool
) -> tuple[list[str], int, float]:
    """(reasons the layout cannot run, sequence shards, tokens per data shard) for a batch of `batch_tokens`.

    TP must divide the N heads and F, PP the L layers; each of the X data shards (a Y·Z group of chips) of a
    slice needs at least one token, and more shards than sequences needs sequence sharding (uneven shards
    are padded) into at most `seq_len` pieces. Book ch. 5–6.
    """
    B_s = batch_tokens / c.slices
    tokens_per_shard = B_s / c.X  # tokens each data shard (a Y·Z group of chips) processes
    sequences = B_s / seq_len
    seq_shards = 1
    reasons = []
    if cfg.N % c.Y or cfg.F % c.Y:
        reasons.append(f"TP degree {c.Y} must divide N={cfg.N} heads and F={cfg.F}")
    if cfg.L % c.Z:
        reasons.append(f"{c.Z} pipeline stages must divide L={cfg.L} layers")
    if getattr(c, "stage_layers", None) is not None:
        reasons.append("uneven stage_layers are beyond the book's model; use conventions='practitioner'")
    if tokens_per_shard < 1:
        reasons.append(f"{c.X}-way data parallelism leaves less than one token per shard (batch per slice {B_s:g})")
    elif c.X > sequences:
        seq_shards = math.ceil(c.X / max(sequences, 1))
        if not allow_sequence_sharding:
            reasons.append(
                f"{c.X}-way data parallelism exceeds the {sequences:g} sequences of the batch "
                "(sequence sharding not allowed)"
            )
        elif seq_shards > seq_len:
            reasons.append(f"{c.X}-way data parallelism needs {seq_shards} shards per sequence of {seq_len} tokens")
    return reasons, seq_shards, tokens_per_shard


def book_step_flops(
    cfg: tf.TransformerConfig, batch_tokens: float, c, seq_len: float, C: float
) -> tuple[float, float, float]:
    """(T_math, model FLOPs, bubble) of one step on `c.chips` chips of C FLOPs/s each:
    T_math = tokens · FLOPs/token (with the remat recompute) / (chips · C) / (1 − bubble), the bubble of the
    layout's schedule (`pipeline_schedules.bubble`; GPipe and 1F1B: (Z − 1)/(m + Z − 1)) over Z stages; model
    FLOPs leave the recompute out (for MFU)."""
    policy, _ = remat_policy(c.remat)
    flops_per_token = tf.training_flops_per_token(cfg, seq_len, causal=True, remat=policy)
    model_flops = batch_tokens * tf.training_flops_per_token(cfg, seq_len, causal=True)
    m = c.microbatches if c.Z > 1 else 1
    kind = getattr(c, "pipeline", "gpipe")
    bubble = ps.bubble(kind, c.Z, m, getattr(c, "virtual_stages", 1)) if c.Z > 1 else 0.0
    t_math = batch_tokens * flops_per_token / (c.chips * C) / (1 - bubble)
    return t_math, model_flops, bubble


def hbm_reasons(memory: Memory, spec: ChipSpec, unit: str = "chip") -> list[str]:
    """[the reason] when `memory` exceeds the chip's HBM, else []."""
    if memory.total > spec.hbm_bytes:
        return [f"needs {format_bytes(memory.total)} per {unit} > {format_bytes(spec.hbm_bytes)} HBM"]
    return []


def layers_per_stage(cfg: tf.TransformerConfig, Z: int) -> float:
    return cfg.L // Z if cfg.L % Z == 0 else cfg.L / Z


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def layouts(n: int, max_tp: int, max_pp: int) -> Iterator[tuple[int, int, int]]:
    """Every (X, Y, Z) with X·Y·Z = n, Y ≤ max_tp, Z ≤ max_pp (Y, then Z ascending)."""
    divs = divisors(n)
    for Y in (d for d in divs if d <= max_tp):
        for Z in (d for d in divs if d <= max_pp and (n // Y) % d == 0):
            yield n // (Y * Z), Y, Z


def pipeline_microbatches(batch_tokens: float, seq_len: float, X: int, Z: int, per_stage: int) -> int:
    """Microbatches of a Z-stage pipeline: per_stage·Z, capped by the sequences of a data shard (1 without PP)."""
    if Z == 1:
        return 1
    return min(per_stage * Z, max(int(batch_tokens / seq_len / X), 1))


def rank_key(e) -> tuple:
    """The planners' order. Ties (several layouts compute-bound) go first to the higher ZeRO stage — same
    speed, less memory, the book's "basically always use ZeRO-3" — then to the most communication headroom
    (the book's X_opt, which balances the FSDP and TP times), then to less memory."""
    t = e.step_time
    return (
        not e.feasible,
        float(f"{t:.9g}") if t == t else math.inf,
        -e.config.zero,
        max(e.t_fsdp, e.t_tp, e.t_pp, e.t_ep, e.t_dcn),
        e.memory.total,
    )
