"""A GPU training planner: book ch. 12's rooflines applied to a whole training step (twin of `training.plan`).

The layouts, FLOPs, pipeline bubble, validity rules and memory are the TPU planner's (book ch. 5–6; shared
helpers in `training`); only the network differs. A cluster is one fat tree (`gpus.Cluster`: NVLink node,
InfiniBand leaf, spine), so there are no DCN slices. Ranks are laid out TP innermost (Y consecutive GPUs),
then the Z pipeline stages, then the X data shards outermost: the model-parallel group is M = Y·Z consecutive
GPUs, and a data-parallel collective has stride M.

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
- T_ep (MoE): see `_t_ep`.

A roofline like the TPU planner's: communication on different axes and compute overlap, a step takes the
max of the times (a lower bound, not a simulation).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.core.training import planner as T
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import is_int, require_positive

CH12 = "book ch. 12 'How to Think About GPUs', 'Rooflines for LLM Scaling on GPUs'"
#: default cluster sizes: a 4-SU DGX SuperPod (1024 GPUs); GB200 NVL72: one SU of 8 racks (576 GPUs)
DEFAULT_N_GPUS = 1024
DEFAULT_N_GPUS_BY_CHIP = {"gb200": 576}


def _gpu(chip) -> ChipSpec:
    """The ChipSpec of a GPU the chapter gives a cluster for; ValueError for TPUs and GPUs without node egress."""
    spec = get_chip(chip)  # UnknownNameError (a ValueError) for unknown names
    if spec.kind != "gpu":
        raise ValueError(f"{spec.name} is a TPU: use training.plan / training.evaluate (book ch. 5–6); "
                         "gpu_training plans GPU clusters (book ch. 12)")
    if spec.node_egress_bytes_per_s is None:
        raise ValueError(f"book ch. 12 gives no node egress (scale-out) figure for {spec.name}, so no cluster; "
                         "use h100, h200, b200, gb200 or a100")
    return spec


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or not is_int(v) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


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
    n = _positive_int("n_gpus", n_gpus)
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
    top = gpus.NetworkLevel("spine", n_sus, su.total_gpus, upper, "InfiniBand", leaf.cable_bytes_per_s,
                            leaf.per_gpu_bytes_per_s, upper * switch)
    return gpus.Cluster(f"{spec.name} fat tree ({n_sus} SUs, spine + core tiers)", spec.name, (node, leaf, top))


# --- communication per step (seconds per GPU) ------------------------------------------------------------


def _t_fsdp(cfg: tf.TransformerConfig, c: T.Config, n: int, cluster: gpus.Cluster) -> float:
    """Data-parallel collectives over X (stride M = Y·Z): n_coll × AllGather of the dense weights
    (2·(P − P_e) bytes, sharded M ways inside the data group), plus the expert gradients' AllReduce
    (2 × AllGather of 2·P_e bytes sharded ep·M ways) over the X/ep data shards that share an expert shard."""
    if c.X == 1:
        return 0.0
    M = c.Y * c.Z
    expert = T._routed_expert_params(cfg)
    dense = T.PARAM_BYTES * (tf.param_count(cfg).total - expert)
    if c.zero == 3:
        colls = 2 * c.microbatches + 1 if c.Z > 1 else 3
    else:
        colls = 2
    t = colls * gpus.sharded_all_gather(dense, M, n, cluster)
    ep = T._ep_degree(cfg, c.X)
    if expert and c.X > ep:
        t += 2 * gpus.sharded_all_gather(T.PARAM_BYTES * expert, ep * M, n, cluster)
    return t


def _t_tp(cfg: tf.TransformerConfig, c: T.Config, tokens_per_shard: float, cluster: gpus.Cluster) -> float:
    """L' · 2 blocks · 6 AllGathers of bf16[T_s, D] over Y GPUs, each 2·T_s·D/W (W = W_gpu in a node)."""
    if c.Y == 1:
        return 0.0
    one = gpus.collective("all_gather", T.ACT_BYTES * tokens_per_shard * cfg.D, c.Y, cluster, exact=False).seconds
    return T._layers_per_stage(cfg, c.Z) * 2 * 6 * one


def _per_gpu_bandwidth(group: int, cluster: gpus.Cluster) -> float:
    """W_gpu when a group of `group` consecutive GPUs fits in one node, else the GPU's NIC share W_node/D_node."""
    if group <= cluster.gpus_per_node:
        return cluster.gpu_bytes_per_s
    return cluster.node_bytes_per_s / cluster.gpus_per_node


def _t_pp(cfg: tf.TransformerConfig, c: T.Config, tokens_per_shard: float, cluster: gpus.Cluster) -> float:
    """Forward + backward activation transfers: 2 · 2·T_s·D/(W·m) · (m + Z − 2) (ch. 12, "Pipeline
    Parallelism"); W = W_gpu if the Y·Z group is in one node, else W_node/D_node (50 GB/s on DGX H100)."""
    if c.Z == 1:
        return 0.0
    W = _per_gpu_bandwidth(c.Y * c.Z, cluster)
    return 2 * gpus.pipeline_comms_time(tokens_per_shard, cfg.D, c.microbatches, c.Z, W, T.ACT_BYTES)


def _t_ep(cfg: tf.TransformerConfig, c: T.Config, tokens_per_shard: float, cluster: gpus.Cluster) -> float:
    """Expert AllToAlls (ep = gcd(X, E) ways over the data axis; ch. 12, "Expert Parallelism"):

    T_ep = (MoE layers / Z) · 4 · 2·k·(T_s/Y)·D·(ep − 1)/ep / W

    — 4 AllToAlls per MoE layer (dispatch and combine, forward and backward), each GPU sending its k routed
    copies of its T_s/Y tokens except the 1/ep that stay local; W = W_gpu if the ep·M GPUs of an EP group
    share a node, else the GPU's NIC share W_node/D_node (the book's B/(M·W_node) across M nodes).
    """
    ep = T._ep_degree(cfg, c.X)
    if not cfg.is_moe or ep == 1:
        return 0.0
    per_gpu = T.ACT_BYTES * cfg.k * tokens_per_shard / c.Y * cfg.D * (ep - 1) / ep
    W = _per_gpu_bandwidth(ep * c.Y * c.Z, cluster)
    return cfg.moe_layers / c.Z * 4 * per_gpu / W


# --- estimate and plan ---------------------------------------------------------------------------------


def evaluate(model, batch_tokens: float, config: T.Config, chip="h100", *, seq_len: int = 4096,
             n_gpus: int | None = None, allow_sequence_sharding: bool = True, grad_bytes: float = 0.0,
             dtype: str = "bf16", cluster: gpus.Cluster | None = None) -> T.Estimate:
    """Estimate one layout of a training step of `model` on GPUs (a `training.Estimate`; see the module
    docstring for the times). `config.slices` must be 1; X·Y·Z must equal `n_gpus` when given. The cluster
    defaults to `training_cluster(chip, X·Y·Z)`. Infeasible (with the reason) when the degrees do not divide
    the model, the batch cannot feed every data shard, or the memory per GPU exceeds HBM (80 GB on H100).
    Book ch. 12, "Rooflines for LLM Scaling on GPUs" (with ch. 5–6's FLOPs and memory).
    """
    cfg = tf.get_model(model)
    spec = _gpu(chip)
    c = config
    T._check_layout(c)
    if c.slices != 1:
        raise ValueError(f"GPU clusters are one fat tree; use n_gpus (got slices={c.slices})")
    if n_gpus is not None and c.chips != _positive_int("n_gpus", n_gpus):
        raise ValueError(f"degrees X·Y·Z = {c.X}·{c.Y}·{c.Z} = {c.chips} must equal n_gpus = {n_gpus}")
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    if cluster is None:
        cluster = training_cluster(spec, c.chips)
    elif cluster.chip != spec.name:
        raise ValueError(f"cluster {cluster.name!r} is built of {cluster.chip}, not {spec.name}")
    n = cluster.require_gpus(c.chips)
    C = spec.peak_flops(dtype)
    reasons, seq_shards, tokens_per_shard = T._reasons(cfg, c, batch_tokens, seq_len, allow_sequence_sharding)
    t_math, model_flops, bubble = T._flops(cfg, batch_tokens, c, seq_len, C)
    t_fsdp = _t_fsdp(cfg, c, n, cluster)
    t_tp = _t_tp(cfg, c, tokens_per_shard, cluster)
    t_pp = _t_pp(cfg, c, tokens_per_shard, cluster)
    t_ep = _t_ep(cfg, c, tokens_per_shard, cluster)
    memory = T._memory(cfg, c, batch_tokens, grad_bytes)
    reasons += T._hbm_reasons(memory, spec, "GPU")
    return T.Estimate(c, not reasons, "; ".join(reasons), t_math, t_fsdp, t_tp, t_pp, t_ep, 0.0, bubble, memory,
                      model_flops, batch_tokens / n, seq_shards, spec.name, C)


def plan(model, batch_tokens: float, chip="h100", *, n_gpus: int | None = None, seq_len: int = 4096,
         max_tp: int | None = None, max_pp: int = 16, zero_stages: Sequence[int] = (0, 1, 3),
         remat: Iterable = T.REMAT_CHOICES, microbatches_per_stage: int = 4, allow_sequence_sharding: bool = True,
         grad_bytes: float = 0.0, dtype: str = "bf16") -> T.Plan:
    """Enumerate the layouts X·Y·Z = n_gpus of a training step on a GPU cluster and rank them by step time
    (book ch. 12's rooflines; the TPU planner's enumeration, microbatches and order — see `training.plan`).

    n_gpus defaults to a 4-SU DGX SuperPod (1024 GPUs; 576 for GB200 NVL72); max_tp to the GPUs of one node
    (TP stays in NVLink, ch. 12 "TLDR"). The result's `explain()` quotes ch. 12's rules of thumb.
    """
    cfg = tf.get_model(model)
    spec = _gpu(chip)
    if n_gpus is None:
        n_gpus = DEFAULT_N_GPUS_BY_CHIP.get(spec.name, DEFAULT_N_GPUS)
    n = _positive_int("n_gpus", n_gpus)
    max_tp = _positive_int("max_tp", spec.gpus_per_node if max_tp is None else max_tp)
    max_pp = _positive_int("max_pp", max_pp)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    cluster = training_cluster(spec, n)
    remat = tuple(remat)
    estimates = []
    for X, Y, Z in T._layouts(n, max_tp, max_pp):
        mb = T._microbatches(batch_tokens, seq_len, X, Z, microbatches_per_stage)
        for zero in (zero_stages if X > 1 else (0,)):
            for r in remat:
                layout = T.Config(X=X, Y=Y, Z=Z, zero=zero, remat=r, microbatches=mb)
                estimates.append(evaluate(cfg, batch_tokens, layout, spec, seq_len=seq_len,
                                          allow_sequence_sharding=allow_sequence_sharding, grad_bytes=grad_bytes,
                                          dtype=dtype, cluster=cluster))
    estimates.sort(key=T._rank_key)
    return T.Plan(cfg, spec.name, n, batch_tokens, seq_len, tuple(estimates))


__all__ = ["training_cluster", "evaluate", "plan", "DEFAULT_N_GPUS", "DEFAULT_N_GPUS_BY_CHIP"]
