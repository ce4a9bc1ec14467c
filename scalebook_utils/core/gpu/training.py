"""A GPU training planner: book ch. 12's rooflines applied to a whole training step (twin of `training.plan`).

The layouts, FLOPs, pipeline bubble, validity rules and memory are the TPU planner's (book ch. 5–6; shared
helpers in `training_layouts`); only the network differs (`layout_times`). `training.plan` and
`training.evaluate_layout` reach this network for a GPU chip (with the practitioner's conventions by default);
`plan` and `evaluate` here are the chapter's entry points, with the book's conventions. A cluster is one fat
tree (`gpus.Cluster`: NVLink node, InfiniBand leaf, spine), so there are no DCN slices. Ranks are laid out TP
innermost (Y consecutive GPUs), then the Z pipeline stages, then the X data shards outermost: the model-parallel
group is M = Y·Z consecutive GPUs, and a data-parallel collective has stride M.

Per step and GPU (C = peak FLOPs/s, W_gpu = NVLink egress per GPU, W_node = node egress, D_node = GPUs per node,
T_s = tokens per data shard = B/X, L' = L/Z layers per stage, P parameters, P_e of them routed experts):

- T_math, bubble, memory: as `training.evaluate` (remat recompute, GPipe bubble (Z − 1)/(m + Z − 1)).
- T_fsdp = n_coll · `gpus.sharded_all_gather`(2·(P − P_e), M): ZeRO 0–2 n_coll = 2 (one gradient AllReduce),
  ZeRO-3 3 (AllGather forward and backward, ReduceScatter) or, with a pipeline, 2m + 1 (the stage's weights
  are gathered again for every microbatch; ch. 12 "Pipeline Parallelism": PP is "bad with ZeRO-3"). Once M
  spans nodes each node carries 1/(M/D_node) of the array: the effective bandwidth is W_node·M/D_node
  (LLaMA-3 70B, TP 8 × PP 8 on H100: 8 × 400 GB/s = 3.2 TB/s, ch12.q22k).
- T_tp = L' · 2 blocks · 6 · `gpus.collective`("all_gather", 2·T_s·D, Y): AllGather + ReduceScatter forward,
  twice that backward — ch. 12's T_comms = 4·B·D/W per MLP forward (W = W_gpu = 450 GB/s in an H100 node).
- T_pp = 2 · `gpus.pipeline_comms_time`(T_s, D, m, Z, W), W = W_gpu when Y·Z ≤ D_node, else W_node/D_node.
- T_ep (MoE): see `layout_times`.

A roofline like the TPU planner's: communication on different axes and compute overlap, a step takes the
max of the times (a lower bound, not a simulation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.training import layouts as TL
from scalebook_utils.core.training import planner as training
from scalebook_utils.core.units import require_int, require_positive

CH12 = "book ch. 12 'How to Think About GPUs', 'Rooflines for LLM Scaling on GPUs'"
#: default cluster sizes: a 4-SU DGX SuperPod (1024 GPUs); GB200 NVL72: one SU of 8 racks (576 GPUs)
DEFAULT_N_GPUS = 1024
DEFAULT_N_GPUS_BY_CHIP = {"gb200": 576}


def _gpu(chip) -> ChipSpec:
    """The ChipSpec of a GPU the chapter gives a cluster for; ValueError for TPUs and GPUs without node egress."""
    spec = get_chip(chip)  # UnknownNameError (a ValueError) for unknown names
    if spec.kind != "gpu":
        raise ValueError(
            f"{spec.name} is a TPU: use training.plan / training.evaluate (book ch. 5–6); "
            "gpu_training plans GPU clusters (book ch. 12)"
        )
    if spec.node_egress_bytes_per_s is None:
        raise ValueError(
            f"book ch. 12 gives no node egress (scale-out) figure for {spec.name}, so no cluster; "
            "use h100, h200, b200, gb200 or a100"
        )
    return spec


def training_cluster(chip="h100", n_gpus: int = 1024) -> gpus.Cluster:
    """The smallest cluster that holds `n_gpus` GPUs of `chip` (book ch. 12, "Networking", Quiz 3).

    One NVLink node if n_gpus ≤ GPUs per node; else `gpus.superpod(chip, ⌈n/SU⌉)` while that two-tier pod
    exists (≤ `gpus.max_sus`: 8 SUs = 2048 H100s); beyond (4096 H100s in ch12.q22) a full-bisection fat tree
    with the same node and leaf levels and a top level joining ⌈n/SU⌉ SUs, each at its full uplink bandwidth
    (32 nodes × 400 GB/s = 12.8 TB/s per DGX H100 SU). That needs a core tier above the spine (ch12.q12,
    `gpus.fat_tree_switches`: 4096 GPUs → 128 leaf, 128 spine, 64 core switches); the top level counts the
    spine and core switches together and, at full bisection, gives each GPU W_node/D_node (50 GB/s).
    """
    spec = _gpu(chip)
    n = require_int("n_gpus", n_gpus)
    if n <= spec.gpus_per_node:
        return gpus.single_node(spec)
    su = gpus.superpod(spec, 1)
    n_sus = math.ceil(n / su.total_gpus)
    if n_sus <= gpus.max_sus(spec):
        return gpus.superpod(spec, n_sus)
    node, leaf = su.levels
    tiers = gpus.fat_tree_switches(n_sus * su.total_gpus)
    upper = sum(tiers[1:])
    switch = gpus.IB_SWITCH_PORTS * gpus.IB_PORT_BYTES_PER_S
    top = gpus.NetworkLevel(
        "spine",
        n_sus,
        su.total_gpus,
        upper,
        "InfiniBand",
        leaf.cable_bytes_per_s,
        leaf.per_gpu_bytes_per_s,
        upper * switch,
    )
    return gpus.Cluster(f"{spec.name} fat tree ({n_sus} SUs, spine + core tiers)", spec.name, (node, leaf, top))


# --- communication per step (seconds per GPU) ------------------------------------------------------------


def _per_gpu_bandwidth(group: int, cluster: gpus.Cluster) -> float:
    """W_gpu when a group of `group` consecutive GPUs fits in one node, else the GPU's NIC share W_node/D_node."""
    if group <= cluster.gpus_per_node:
        return cluster.gpu_bytes_per_s
    return cluster.node_bytes_per_s / cluster.gpus_per_node


def layout_times(
    cfg: tf.TransformerConfig, c: training.Config, load: TL.CommLoad, n: int, cluster: gpus.Cluster
) -> tuple[float, float, float, float]:
    """(T_fsdp, T_tp, T_pp, T_ep) of `load` (`training_layouts.CommLoad`) on a GPU cluster:

    - T_fsdp: the data-parallel collectives over X (stride M = Y·Z) as `gpus.sharded_all_gather` of load.dp_bytes
      per GPU (the book's n_coll × AllGather of 2·(P − P_e) bytes sharded M ways; once M spans nodes each node
      carries 1/(M/D_node) of the array, the effective bandwidth W_node·M/D_node — LLaMA-3 70B, TP 8 × PP 8 on
      H100: 8 × 400 GB/s = 3.2 TB/s, ch12.q22k), plus the expert gradients over ep·M GPUs.
    - T_tp = tp_layers · 2 blocks · 6 · `gpus.collective`("all_gather", 2·T_s·D, Y): AllGather + ReduceScatter
      forward, twice that backward — ch. 12's T_comms = 4·B·D/W per MLP forward (W_gpu = 450 GB/s on H100).
    - T_pp = v · 2 · `gpus.pipeline_comms_time`(T_s, D, m, Z, W), W = W_gpu when Y·Z ≤ D_node, else W_node/D_node.
    - T_ep (MoE): moe_layers · 4 · 2·k·(T_s/Y)·D·(ep − 1)/ep / W — 4 AllToAlls per MoE layer (dispatch and
      combine, forward and backward), each GPU sending its k routed copies of its T_s/Y tokens except the 1/ep
      that stay local; W = W_gpu if the ep·M GPUs of an EP group share a node, else the GPU's NIC share
      (the book's B/(M·W_node) across M nodes; ch. 12, "Expert Parallelism").
    """
    M, T_s = c.Y * c.Z, load.tokens_per_shard
    ep = TL.ep_degree(cfg, c.X)
    t_fsdp = gpus.sharded_all_gather(load.dp_bytes * M, M, n, cluster) if load.dp_bytes else 0.0
    if load.expert_bytes:
        t_fsdp += gpus.sharded_all_gather(load.expert_bytes * ep * M, ep * M, n, cluster)
    t_tp = 0.0
    if c.Y > 1:
        one = gpus.collective("all_gather", training.ACT_BYTES * T_s * cfg.D, c.Y, cluster, exact=False).seconds
        t_tp = load.tp_layers * 2 * 6 * one
    t_pp = 0.0
    if c.Z > 1:
        W = _per_gpu_bandwidth(M, cluster)
        t_pp = load.pp_chunks * 2 * gpus.pipeline_comms_time(T_s, cfg.D, c.microbatches, c.Z, W, training.ACT_BYTES)
    t_ep = 0.0
    if cfg.is_moe and ep > 1:
        per_gpu = training.ACT_BYTES * cfg.k * T_s / c.Y * cfg.D * (ep - 1) / ep
        t_ep = load.moe_layers * 4 * per_gpu / _per_gpu_bandwidth(ep * M, cluster)
    return t_fsdp, t_tp, t_pp, t_ep


# --- estimate and plan ---------------------------------------------------------------------------------


def evaluate(
    model,
    batch_tokens: float,
    config: training.Config,
    chip="h100",
    *,
    seq_len: int = 4096,
    n_gpus: int | None = None,
    allow_sequence_sharding: bool = True,
    grad_bytes: float = 0.0,
    dtype: str = "bf16",
    cluster: gpus.Cluster | None = None,
) -> training.Estimate:
    """Estimate one layout of a training step of `model` on GPUs (a `training.Estimate`; see the module
    docstring for the times). `config.slices` must be 1; X·Y·Z must equal `n_gpus` when given. The cluster
    defaults to `training_cluster(chip, X·Y·Z)`. Infeasible (with the reason) when the degrees do not divide
    the model, the batch cannot feed every data shard, or the memory per GPU exceeds HBM (80 GB on H100).
    Book ch. 12, "Rooflines for LLM Scaling on GPUs" (with ch. 5–6's FLOPs and memory).
    """
    cfg = tf.get_model(model)
    spec = _gpu(chip)
    c = config
    TL.check_layout(c)
    if c.slices != 1:
        raise ValueError(f"GPU clusters are one fat tree; use n_gpus (got slices={c.slices})")
    if n_gpus is not None and c.chips != require_int("n_gpus", n_gpus):
        raise ValueError(f"degrees X·Y·Z = {c.X}·{c.Y}·{c.Z} = {c.chips} must equal n_gpus = {n_gpus}")
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    if cluster is None:
        cluster = training_cluster(spec, c.chips)
    elif cluster.chip != spec.name:
        raise ValueError(f"cluster {cluster.name!r} is built of {cluster.chip}, not {spec.name}")
    n = cluster.require_gpus(c.chips)
    C = spec.peak_flops(dtype)
    reasons, seq_shards, tokens_per_shard = TL.book_problems(cfg, c, batch_tokens, seq_len, allow_sequence_sharding)
    t_math, model_flops, bubble = TL.book_step_flops(cfg, batch_tokens, c, seq_len, C)
    load = TL.book_comm_load(cfg, c, tokens_per_shard, gpu=True)
    t_fsdp, t_tp, t_pp, t_ep = layout_times(cfg, c, load, n, cluster)
    memory = TL.book_memory(cfg, c, batch_tokens, grad_bytes)
    reasons += TL.hbm_reasons(memory, spec, "GPU")
    return training.Estimate(
        c,
        not reasons,
        "; ".join(reasons),
        t_math,
        t_fsdp,
        t_tp,
        t_pp,
        t_ep,
        0.0,
        bubble,
        memory,
        model_flops,
        batch_tokens / n,
        seq_shards,
        spec.name,
        C,
    )


def plan(
    model,
    batch_tokens: float,
    chip="h100",
    *,
    n_gpus: int | None = None,
    seq_len: int = 4096,
    max_tp: int | None = None,
    max_pp: int = 16,
    zero_stages: Sequence[int] = (0, 1, 3),
    remat: Iterable = training.REMAT_CHOICES,
    microbatches_per_stage: int = 4,
    allow_sequence_sharding: bool = True,
    grad_bytes: float = 0.0,
    dtype: str = "bf16",
) -> training.Plan:
    """Enumerate the layouts X·Y·Z = n_gpus of a training step on a GPU cluster and rank them by step time
    (book ch. 12's rooflines; the TPU planner's enumeration, microbatches and order — see `training.plan`).

    n_gpus defaults to a 4-SU DGX SuperPod (1024 GPUs; 576 for GB200 NVL72); max_tp to the GPUs of one node
    (TP stays in NVLink, ch. 12 "TLDR"). The result's `explain()` quotes ch. 12's rules of thumb.
    """
    cfg = tf.get_model(model)
    spec = _gpu(chip)
    if n_gpus is None:
        n_gpus = DEFAULT_N_GPUS_BY_CHIP.get(spec.name, DEFAULT_N_GPUS)
    n = require_int("n_gpus", n_gpus)
    max_tp = require_int("max_tp", spec.gpus_per_node if max_tp is None else max_tp)
    max_pp = require_int("max_pp", max_pp)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    cluster = training_cluster(spec, n)
    remat = tuple(remat)
    estimates = []
    for X, Y, Z in TL.layouts(n, max_tp, max_pp):
        mb = TL.pipeline_microbatches(batch_tokens, seq_len, X, Z, microbatches_per_stage)
        for zero in zero_stages if X > 1 else (0,):
            for r in remat:
                layout = training.Config(X=X, Y=Y, Z=Z, zero=zero, remat=r, microbatches=mb)
                estimates.append(
                    evaluate(
                        cfg,
                        batch_tokens,
                        layout,
                        spec,
                        seq_len=seq_len,
                        allow_sequence_sharding=allow_sequence_sharding,
                        grad_bytes=grad_bytes,
                        dtype=dtype,
                        cluster=cluster,
                    )
                )
    estimates.sort(key=TL.rank_key)
    return training.Plan(cfg, spec.name, n, batch_tokens, seq_len, tuple(estimates))


def rules_of_thumb(model, chip, n_gpus: int, best: training.Estimate) -> str:
    """Book ch. 12's rules of thumb ("Rooflines for LLM Scaling on GPUs") for a plan's explanation: DP/ZeRO across
    nodes needs B/X > C/W_node tokens per GPU (H100: 2475), ÷ M/D_node when M = Y·Z ways of model parallelism span
    M/D_node nodes (`gpus.dp_critical_batch`); in one node C/W_gpu (2200). TP stays compute-bound up to
    Y < F·W_gpu/C ways inside a node (`gpus.tp_max_degree`, ≈ F/2200 on H100)."""
    spec, cfg = get_chip(chip), tf.get_model(model)
    node = spec.gpus_per_node
    M = best.config.Y * best.config.Z
    if n_gpus <= node:
        dp = f"DP/ZeRO inside one node needs more than C/W_gpu = {gpus.dp_critical_batch(spec, across_nodes=False):.0f}"
    else:
        dp = f"DP/ZeRO across nodes needs more than C/W_node = {gpus.dp_critical_batch(spec):.0f}"
        if M > node:
            dp += (
                f" (÷ {M / node:g} = {gpus.dp_critical_batch(spec, model_parallel=M):.0f} with the winner's "
                f"{M}-way model parallelism spanning {M / node:g} nodes)"
            )
    return (
        f" Chapter 12's rules of thumb at {best.tokens_per_chip:.0f} tokens per GPU: {dp}; TP inside a node "
        f"stays compute-bound up to F·W_gpu/C = {gpus.tp_max_degree(cfg.F, spec):.1f} ways."
    )


__all__ = [
    "training_cluster",
    "evaluate",
    "plan",
    "layout_times",
    "rules_of_thumb",
    "DEFAULT_N_GPUS",
    "DEFAULT_N_GPUS_BY_CHIP",
]
