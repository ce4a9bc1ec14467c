"""Collectives on GPUs: AllGather, ReduceScatter, AllReduce and AllToAll in and across nodes (book ch. 12,
"How Do Collectives Work on GPUs?").

Bandwidth-bound times over a `gpu_network.Cluster` (or a GPU name → its SuperPod): the fat-tree rule
T = bytes · max_i (D_i − 1)/(D_i · W_link,i) over the levels a group of GPUs crosses; AllReduce as twice that,
or bytes · max_i 1/W_link,i with SHARP in-network reduction; AllToAll, ragged too; the variants for an array
also sharded over an inner axis Y (Pop Quiz 3, Quiz 4); the bytes through a switch during a collective (Quiz 4
Q1–Q2); and the NCCL measurements and "bus bandwidth" the chapter quotes. `gpus` re-exports every public name.
SI units throughout: bytes, bytes/s, seconds. Symbols follow the chapter:

- N = GPUs taking part, W_gpu = one GPU's NVLink egress, W_node = one node's scale-out egress;
- level i of the fat tree (node, leaf, spine) joins D_i children of S_{i−1} GPUs each over links of W_link,i
  (see `gpu_network.NetworkLevel`).

Book ch. 12, "How Do Collectives Work on GPUs?" ("Intra-node collectives", "Cross-node collectives", the pop
quizzes and Quiz 4) and Appendix B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core.gpu.network import Cluster, as_cluster, gpu_chip
from scalebook_utils.core.hardware import ChipSpec
from scalebook_utils.core.units import is_int, require_bytes, require_positive

# --- collectives --------------------------------------------------------------------------------------------

KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


@dataclass(frozen=True)
class GPUCollectiveCost:
    """Modelled time of one collective on GPUs; `bandwidth` = n_bytes / seconds; `bottleneck` the level."""

    kind: str
    n_bytes: float
    n_gpus: int
    seconds: float
    bottleneck: str
    sharp: bool
    note: str
    latency_s: float = 0.0  # the NCCL latency included in `seconds` (0 unless collective(..., latency=True))

    @property
    def bandwidth(self) -> float:
        return self.n_bytes / self.seconds if self.seconds else math.inf


def _kind(kind: str) -> str:
    key = str(kind).lower().replace("-", "").replace("_", "").replace(" ", "")
    table = {
        "allgather": "all_gather",
        "reducescatter": "reduce_scatter",
        "allreduce": "all_reduce",
        "alltoall": "all_to_all",
        "psum": "all_reduce",
    }
    if key not in table:
        raise ValueError(f"unknown collective {kind!r}; known kinds: {', '.join(KINDS)}")
    return table[key]


def _gather_levels(n_bytes: float, n_gpus: int, c: Cluster, exact: bool, Y: int = 1) -> tuple[float, str]:
    """Book ch. 12's tree rule: T = bytes · max_i (D_i − 1)/(D_i · W_link,i · max(1, Y/S_{i−1}))."""
    best, where = 0.0, c.node.name
    for lv, used in c.spanned(n_gpus):
        if lv.gpus <= Y:  # the X axis (stride Y) has one member per unit here: this level carries nothing
            continue
        frac = (used - 1) / used if exact else 1.0
        t = n_bytes * frac / (lv.child_bytes_per_s * max(1.0, Y / lv.gpus_per_child))
        if t > best:
            best, where = t, lv.name
    return best, where


def collective(
    kind: str,
    n_bytes: float,
    n_gpus: int,
    system="h100",
    *,
    sharp: bool = False,
    exact: bool = True,
    k: float | None = None,
    latency: bool = False,
) -> GPUCollectiveCost:
    """Bandwidth-bound time of a collective over `n_gpus` contiguous GPUs of `system` (a Cluster or GPU name).

    n_bytes is the whole array (gathered size for AllGather, one GPU's unreduced array for ReduceScatter and
    AllReduce, the total for AllToAll). Book ch. 12, "How Do Collectives Work on GPUs?":

    - AllGather / ReduceScatter: T = bytes · max_i (D_i − 1)/(D_i · W_link,i) over the levels crossed; in a node
      bytes·(N − 1)/(N·W_gpu); across DGX H100 nodes ≈ bytes/413 GB/s. `exact=False` drops (D − 1)/D.
    - AllReduce: 2 × that; with `sharp` (in-network reduction) bytes · max_i 1/W_link,i (bytes/W_gpu in a node).
    - AllToAll: in a node bytes·(N − 1)/(N²·W_gpu); across M nodes bytes·(M − 1)/(M²·W_node). A ragged
      AllToAll with at most `k` non-zero targets of N multiplies by min(k/N, 1) (the book's approximation).

    The chapter's times are bandwidth only. `latency=True` adds NCCL's latency α (`nccl_latency`, an AllReduce,
    AllGather or ReduceScatter; not the book's) in the α + bytes/β form NCCL itself uses: what small messages,
    such as decode's activations, cost.
    """
    kd = _kind(kind)
    n_bytes = require_bytes("n_bytes", n_bytes)
    c = as_cluster(system)
    n = c.require_gpus(n_gpus)
    if sharp and kd != "all_reduce":
        raise ValueError("SHARP (in-network reduction) applies to AllReduce here; the chapter models no other")
    if n == 1:
        return GPUCollectiveCost(kd, n_bytes, 1, 0.0, "none", sharp, "one GPU: nothing to move")
    if kd in ("all_gather", "reduce_scatter"):
        t, where = _gather_levels(n_bytes, n, c, exact)
        note = "bytes · max_i (D_i − 1)/(D_i · W_link,i)"
    elif kd == "all_reduce" and not sharp:
        t, where = _gather_levels(n_bytes, n, c, exact)
        t, note = 2 * t, "2 × (ReduceScatter = AllGather)"
    elif kd == "all_reduce":
        levels = c.spanned(n)
        times = [(n_bytes / lv.child_bytes_per_s, lv.name) for lv, _ in levels]
        t, where = max(times)
        note = "SHARP: bytes · max_i 1/W_link,i (no (N − 1)/N, no factor 2)"
    else:
        D = c.gpus_per_node
        if n <= D:
            t, where = n_bytes * (n - 1) / (c.gpu_bytes_per_s * n * n), "node"
            note = "bytes·(N − 1)/(N²·W_gpu)"
        else:
            M = math.ceil(n / D)
            t, where = n_bytes * (M - 1) / (M * M * c.node_bytes_per_s), "leaf" if M <= c.levels[1].degree else "spine"
            note = "bytes·(M − 1)/(M²·W_node), M = nodes"
        if k is not None:
            require_positive(k=k)
            t = min(k / n, 1.0) * n_bytes / ((c.gpu_bytes_per_s * n) if n <= D else (c.node_bytes_per_s * M))
            note = "ragged: min(k/N, 1) · bytes/(W·N)" if n <= D else "ragged: min(k/N, 1) · bytes/(W_node·M)"
    lat = 0.0
    if latency:
        lat = nccl_latency(kd, n, c.gpus_per_node)
        note += f" + NCCL latency {lat * 1e6:.3g} µs"
    return GPUCollectiveCost(kd, n_bytes, n, t + lat, where, sharp, note, lat)


def all_gather(n_bytes: float, n_gpus: int, system="h100", exact: bool = True) -> GPUCollectiveCost:
    """AllGather of an array of `n_bytes` over `n_gpus` GPUs (see `collective`). H100 node, 8 GPUs:
    bf16[4096, 65536] (537 MB) → 537e6 · 7/(8 · 450e9) ≈ 1.04 ms (ch12.q10)."""
    return collective("all_gather", n_bytes, n_gpus, system, exact=exact)


def reduce_scatter(n_bytes: float, n_gpus: int, system="h100", exact: bool = True) -> GPUCollectiveCost:
    """ReduceScatter: the same cost as AllGather (book ch. 12)."""
    return collective("reduce_scatter", n_bytes, n_gpus, system, exact=exact)


def all_reduce(
    n_bytes: float, n_gpus: int, system="h100", sharp: bool = False, exact: bool = True
) -> GPUCollectiveCost:
    """AllReduce: 2 × AllGather, or bytes/W per level with SHARP in-network reduction (book ch. 12)."""
    return collective("all_reduce", n_bytes, n_gpus, system, sharp=sharp, exact=exact)


def all_to_all(n_bytes: float, n_gpus: int, system="h100", k: float | None = None) -> GPUCollectiveCost:
    """AllToAll (optionally ragged with ≤ k non-zero targets): bytes·(N − 1)/(N²·W_gpu) in a node."""
    return collective("all_to_all", n_bytes, n_gpus, system, k=k)


def ragged_all_to_all_factor(Z: int, K: int) -> float:
    """Expected share of a full AllToAll's traffic when each token picks K of Z targets at random:
    (1 − ((Z − 1)/Z)^K) · (Z − 1)/Z (book ch. 12, "Intra-node collectives"); ≈ min(K/Z, 1) · (Z − 1)/Z."""
    require_positive(Z=Z, K=K)
    return (1 - ((Z - 1) / Z) ** K) * (Z - 1) / Z


def all_gather_bytes_per_level(n_bytes: float, system="h100", n_gpus: int | None = None) -> dict[str, float]:
    """AllGather bandwidth of each level crossed, D_i · W_link,i/(D_i − 1) (514 GB/s, 413 GB/s, 17.1 TB/s)."""
    c = as_cluster(system)
    return {lv.name: used * lv.child_bytes_per_s / (used - 1) for lv, used in c.spanned(n_gpus or c.total_gpus)}


def sharded_all_gather(n_bytes: float, Y: int, n_gpus: int, system="h100", exact: bool = True) -> float:
    """AllGather_X of an array also sharded over an inner axis Y (book ch. 12, Pop Quiz 3):
    T = bytes · max_i (D_i − 1)/(D_i · W_link,i · max(1, Y/S_{i−1})) over the levels whose units hold more than
    Y GPUs: once Y spans whole children of a level, each child carries only 1/(Y/S) of the data.
    One H100 SU: 2DF·31/(32·400e9) for Y ≤ 8."""
    if not is_int(Y) or Y < 1:
        raise ValueError(f"Y must be a positive integer (the inner axis), got {Y!r}")
    n_bytes = require_bytes("n_bytes", n_bytes)
    return _gather_levels(n_bytes, n_gpus, as_cluster(system), exact, Y)[0]


def sharp_sharded_all_reduce(n_bytes: float, Y: int, n_gpus: int, system="h100") -> tuple[float, str]:
    """(seconds, bottleneck level) of a SHARP AllReduce_X(A[I_Y, J]{U_X}) over `n_gpus` GPUs:
    T = bytes · max_i 1/(W_gpu,i · max(Y, S_{i−1})) over the levels whose units hold more than Y GPUs (the
    X axis, stride Y, crosses only those), W_gpu,i the per-GPU bandwidth of level i (Appendix B: 450, 50,
    25 GB/s). In a node: bytes/(W_gpu · min(Y, 8)); Y = 256 reduces at the spine at
    256 · 25 GB/s = 6.4 TB/s (ch12.q18, ch12.q19)."""
    if not is_int(Y) or Y < 1:
        raise ValueError(f"Y must be a positive integer (the inner axis), got {Y!r}")
    n_bytes = require_bytes("n_bytes", n_bytes)
    c = as_cluster(system)
    if Y > c.total_gpus:
        raise ValueError(f"Y = {Y} is more GPUs than {c.name} holds ({c.total_gpus})")
    best = (0.0, "none")
    for lv, _ in c.spanned(n_gpus):
        if lv.gpus <= Y:  # X (stride Y) has one member per unit of this level: nothing crosses it
            continue
        y = max(Y, lv.gpus_per_child)
        best = max(best, (n_bytes / (lv.per_gpu_bytes_per_s * y), lv.name))
    return best


def sharded_all_reduce_simple(n_bytes: float, Y: int, system="h100") -> float:
    """The chapter's two-level form: max(bytes/W_gpu · 1/min(Y, D_node), bytes/W_node · D_node/max(D_node, Y))."""
    c = as_cluster(system)
    D = c.gpus_per_node
    return max(n_bytes / c.gpu_bytes_per_s / min(Y, D), n_bytes / c.node_bytes_per_s * D / max(D, Y))


@dataclass(frozen=True)
class SwitchTraffic:
    """Bytes into and out of a switch during a collective, and the time they imply."""

    ingress_bytes: float
    egress_bytes: float
    seconds: float


def su_all_gather_traffic(n_bytes: float, M: int, N: int, chip: str | ChipSpec = "h100") -> dict[str, SwitchTraffic]:
    """Quiz 4 Q1: an AllGather of B bytes inside one SU of M nodes × N GPUs.

    Node switch: in B (every shard once), out B·N (each GPU receives all of it); time B/W_gpu as the book
    writes it. Leaf (top) switch: in B, out B·(M − 1) (each node receives the other nodes' shards); time
    B·(M − 1)/(M · W_node).
    """
    require_positive(n_bytes=n_bytes, M=M, N=N)
    s = gpu_chip(chip)
    return {
        "node": SwitchTraffic(n_bytes, n_bytes * N, n_bytes / s.nvlink_bandwidth_oneway_bytes_per_s),
        "leaf": SwitchTraffic(n_bytes, n_bytes * (M - 1), n_bytes * (M - 1) / (M * s.node_egress_bytes_per_s)),
    }


def sharp_node_traffic(n_bytes: float, N: int, W: float) -> SwitchTraffic:
    """Quiz 4 Q2: SHARP AllReduce of B bytes over N GPUs through one switch: each GPU sends B(N − 1)/N + B/N = B
    and receives as much, so the switch takes in B·N and sends B·N; time B/W."""
    require_positive(n_bytes=n_bytes, N=N, W=W)
    return SwitchTraffic(n_bytes * N, n_bytes * N, n_bytes / W)


#: NCCL measurements quoted by the chapter (8×H100, "Intra-node collectives")
MEASURED_AR_BUS_BANDWIDTH_PEAK = 370e9  # AllReduce bus bandwidth, ~10 GB messages, SHARP off
MEASURED_AR_BUS_BANDWIDTH_58MB = 150e9  # the LLaMA-3 70B MLP shard bf16[8192, 3584]
MEASURED_SHARP_AR_BANDWIDTH = 480e9  # with SHARP (NCCL 2.27.5): ≈ +30%, not the predicted +75%


#: NCCL's own latency model (NVIDIA/nccl v2.20.3, src/graph/tuning.cc, "Latencies in us"): the ring algorithm
#: with the LL protocol, which NCCL picks for small messages. Not in the book (its GPU collectives are
#: bandwidth only). A base latency per call, then one per ring step: over NVLink, over the network, and at least
#: the network post overhead for the in-node steps of a ring that leaves the node (1 µs on x86).
NCCL_BASE_LATENCY_S = 6.6e-6  # baseLat[Ring][LL]
NCCL_NVLINK_STEP_LATENCY_S = 0.6e-6  # hwLat[NVLINK][Ring][LL]
NCCL_NET_STEP_LATENCY_S = 2.7e-6  # hwLat[NET][Ring][LL]
NCCL_NET_OVERHEAD_S = 1.0e-6  # getNetOverhead() on x86


def nccl_latency(kind: str, n_gpus: int, gpus_per_node: int = 8) -> float:
    """α of one ring collective over `n_gpus` GPUs (seconds), as NCCL 2.20's tuner models it (not the book's):

        α = base + (steps − inter)·t_intra + inter·t_net,
        AllReduce: steps = 2(N − 1), inter = 2·nodes (0 in one node); AllGather/ReduceScatter: N − 1, nodes − 1;
        t_intra = 0.6 µs over NVLink in one node, max(0.6, 1.0) µs once the ring crosses nodes; t_net = 2.7 µs.

    8 H100 in a node: AllReduce 6.6 + 14·0.6 = 15.0 µs, AllGather 6.6 + 7·0.6 = 10.8 µs; 4 GPUs: AllReduce
    10.2 µs; 16 GPUs on 2 nodes: AllReduce 6.6 + 26·1.0 + 4·2.7 = 43.4 µs. One GPU: 0.
    """
    kd = _kind(kind)
    if kd == "all_to_all":
        raise ValueError("NCCL's ring latency model covers AllReduce, AllGather and ReduceScatter, not AllToAll")
    if not is_int(n_gpus) or n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
    if not is_int(gpus_per_node) or gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be a positive integer, got {gpus_per_node!r}")
    if n_gpus == 1:
        return 0.0
    nodes = math.ceil(n_gpus / gpus_per_node)
    if kd == "all_reduce":
        steps, inter = 2 * (n_gpus - 1), (2 * nodes if nodes > 1 else 0)
    else:
        steps, inter = n_gpus - 1, nodes - 1
    intra = NCCL_NVLINK_STEP_LATENCY_S if nodes == 1 else max(NCCL_NVLINK_STEP_LATENCY_S, NCCL_NET_OVERHEAD_S)
    return NCCL_BASE_LATENCY_S + (steps - inter) * intra + inter * NCCL_NET_STEP_LATENCY_S


def bus_bandwidth(n_bytes: float, n_gpus: int, seconds: float) -> float:
    """NCCL's AllReduce 'bus bandwidth' 2 · bytes · (N − 1)/(N · runtime) (book ch. 12)."""
    require_positive(n_bytes=n_bytes, n_gpus=n_gpus, seconds=seconds)
    return 2 * n_bytes * (n_gpus - 1) / (n_gpus * seconds)


__all__ = [
    "KINDS",
    "GPUCollectiveCost",
    "collective",
    "all_gather",
    "reduce_scatter",
    "all_reduce",
    "all_to_all",
    "ragged_all_to_all_factor",
    "all_gather_bytes_per_level",
    "sharded_all_gather",
    "sharp_sharded_all_reduce",
    "sharded_all_reduce_simple",
    "SwitchTraffic",
    "su_all_gather_traffic",
    "sharp_node_traffic",
    "MEASURED_AR_BUS_BANDWIDTH_PEAK",
    "MEASURED_AR_BUS_BANDWIDTH_58MB",
    "MEASURED_SHARP_AR_BANDWIDTH",
    "bus_bandwidth",
    "NCCL_BASE_LATENCY_S",
    "NCCL_NVLINK_STEP_LATENCY_S",
    "NCCL_NET_STEP_LATENCY_S",
    "NCCL_NET_OVERHEAD_S",
    "nccl_latency",
]
