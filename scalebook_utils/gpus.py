"""GPUs: streaming multiprocessors, NVLink nodes, InfiniBand fat trees, collectives and rooflines (book ch. 12).

Everything here is closed-form arithmetic over `hardware.ChipSpec` (the GPU entries: SMs, clocks, SMEM, L2,
HBM, NVLink per GPU, node egress) plus the chapter's networking tables. SI units throughout: bytes, bytes/s,
FLOPs/s, Hz, seconds. Symbols follow the chapter:

- N = GPUs taking part, W_gpu = one GPU's NVLink egress (one direction), W_node = one node's scale-out
  egress (8 × 400 Gb/s NICs = 400 GB/s on DGX H100/B200), D_node = GPUs per NVLink domain;
- a fat tree has levels i = node, leaf, spine: each *unit* of level i joins D_i children; a child of the
  node level is one GPU, of the leaf level one node, of the spine level one scalable unit (SU);
- C = peak FLOPs/s per GPU, α = C / W (tokens per GPU a parallelism needs to stay compute-bound).

Book ch. 12, "How to Think About GPUs": "What Is a GPU?", "Networking", "How Do Collectives Work on GPUs?",
"Rooflines for LLM Scaling on GPUs", Appendices A and B. Bandwidth conventions (the chapter mixes them; see
`NetworkLevel`): link and cable numbers are per direction; "switch bandwidth" is the summary table's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import UnknownNameError
from .hardware import ChipSpec, get_chip
from .units import is_int, require_bytes, require_positive

CH12_SM = "book ch. 12, 'What Is a GPU?'"
CH12_NET = "book ch. 12, 'Networking'"
CH12_APPB = "book ch. 12, Appendix B"

# --- the streaming multiprocessor ---------------------------------------------------------------------------

#: Per SM, every generation the chapter covers: 4 subpartitions, each with a Tensor Core, a warp scheduler,
#: 32 fp32 CUDA cores and 16,384 32-bit registers (book ch. 12, "What Is a GPU?").
SUBPARTITIONS_PER_SM = 4
FP32_CORES_PER_SUBPARTITION = 32
REGISTERS_PER_SUBPARTITION = 16_384
REGISTER_BYTES = 4
WARP_SIZE = 32
MAX_WARPS_PER_SM = 64
MAX_REGISTERS_PER_THREAD = 256

#: (base, boost) clocks in Hz, book ch. 12 spec table; B200 has none there ("?").
CLOCKS_HZ: dict[str, tuple[float, float]] = {
    "v100": (1.25e9, 1.38e9), "a100": (1.10e9, 1.41e9), "h100": (1.59e9, 1.98e9), "h200": (1.59e9, 1.98e9)}
#: the clocks the chapter uses to turn peak FLOPs/s into FLOPs per cycle per Tensor Core (ch. 12 text)
TENSOR_CORE_CLOCK_HZ: dict[str, float] = {"h100": 1.76e9, "h200": 1.76e9, "b200": 1.86e9, "gb200": 1.86e9}
#: Tensor Core bf16/fp16 FLOPs per cycle by generation, as the chapter lists them (H100's is ≈1065 exactly)
TENSOR_CORE_FLOPS_PER_CYCLE_BOOK = {"v100": 256, "a100": 512, "h100": 1024, "h200": 1024, "b200": 2048, "gb200": 2048}
#: Blackwell's tensor memory per SM (book ch. 12): the accumulator no longer fits in registers or SMEM
TMEM_BYTES_PER_SM = {"b200": 256e3, "gb200": 256e3}
#: NVIDIA's fp32 vector FLOPs/s for a B200 (book ch. 12, Quiz 1 Q6; FMA counted as 2 FLOPs)
B200_VECTOR_FP32_FLOPS = 80e12
#: TPU v5p for comparison (book ch. 12 / ch. 2): VPU of 8 sublanes × 128 lanes × 4 ALUs per TensorCore
TPU_VPU_SUBLANES, TPU_VPU_LANES, TPU_VPU_ALUS = 8, 128, 4


def gpu_chip(chip: str | ChipSpec) -> ChipSpec:
    """`hardware.get_chip` restricted to GPUs: a TPU or unknown name raises UnknownNameError listing the GPUs."""
    spec = get_chip(chip)
    if spec.kind != "gpu":
        from .hardware import chip_names
        raise UnknownNameError(f"{spec.name} is not a GPU; GPUs: {', '.join(chip_names('gpu'))} (book ch. 12)")
    return spec


@dataclass(frozen=True)
class SMCounts:
    """Whole-chip counts of one GPU's SM parts (book ch. 12, "What Is a GPU?" and its H100 vs v5p table).

    cuda_cores = SMs · 4 · 32 (H100: 16,896); tensor_cores = warp_schedulers = SMs · 4 (H100: 528);
    register_bytes = SMs · 4 · 16,384 · 4 B (256 KiB per SM; H100: 34.6 MB); smem_bytes = SMs · SMEM/SM.
    """

    chip: str
    sms: int
    cuda_cores: int
    tensor_cores: int
    warp_schedulers: int
    register_bytes: float
    smem_bytes: float
    tmem_bytes: float
    l2_bytes: float

    @property
    def onchip_bytes(self) -> float:
        """SMEM + registers (+ TMEM): the fast memory next to the cores (ch12.q5c, compared with TPU VMEM)."""
        return self.smem_bytes + self.register_bytes + self.tmem_bytes


def sm_counts(chip: str | ChipSpec = "h100") -> SMCounts:
    """SM, CUDA core, Tensor Core, register and SMEM totals for `chip` (ch12.q1, ch12.q5)."""
    s = gpu_chip(chip)
    sub = s.sms * SUBPARTITIONS_PER_SM
    return SMCounts(s.name, s.sms, sub * FP32_CORES_PER_SUBPARTITION, sub, sub,
                    float(sub * REGISTERS_PER_SUBPARTITION * REGISTER_BYTES), s.sms * s.smem_bytes_per_sm,
                    s.sms * TMEM_BYTES_PER_SM.get(s.name, 0.0), s.l2_bytes)


def clock_hz(chip: str | ChipSpec = "h100", boost: bool = True) -> float:
    """The boost (or base) clock of `chip` in Hz from the ch. 12 spec table; ValueError where the book has none."""
    s = gpu_chip(chip)
    if s.name not in CLOCKS_HZ:
        raise ValueError(f"book ch. 12 gives no clock for {s.name} ('?'); pass clock_hz explicitly "
                         f"(ch12.q6 derives ≈{implied_clock_hz():.3g} Hz for a B200)")
    return CLOCKS_HZ[s.name][1 if boost else 0]


def vector_flops_per_s(chip: str | ChipSpec = "h100", clock: float | None = None,
                       flops_per_core_per_cycle: float = 1) -> float:
    """fp32 CUDA-core FLOPs/s = CUDA cores · clock · FLOPs per core per cycle.

    One op per cycle (ch12.q2): H100 at 1.98 GHz ≈ 33.5 TFLOP/s; NVIDIA counts an FMA as 2 (≈67 TFLOP/s).
    """
    clock = clock_hz(chip) if clock is None else clock
    require_positive(clock=clock, flops_per_core_per_cycle=flops_per_core_per_cycle)
    return sm_counts(chip).cuda_cores * clock * flops_per_core_per_cycle


def implied_clock_hz(chip: str | ChipSpec = "b200", vector_flops: float = B200_VECTOR_FP32_FLOPS,
                     flops_per_core_per_cycle: float = 2) -> float:
    """Clock implied by a vector FLOPs/s figure: flops / (CUDA cores · FLOPs per cycle). B200: 80e12/(18,944·2)
    ≈ 2.1 GHz (ch12.q6)."""
    require_positive(vector_flops=vector_flops, flops_per_core_per_cycle=flops_per_core_per_cycle)
    return vector_flops / (sm_counts(chip).cuda_cores * flops_per_core_per_cycle)


def tensor_core_flops_per_cycle(chip: str | ChipSpec = "h100", dtype: str = "bf16",
                                clock: float | None = None) -> float:
    """Peak / (SMs · 4 · clock): bf16 FLOPs one Tensor Core does per cycle. H100 at 1.76 GHz: 990e12/(528·1.76e9)
    ≈ 1065 (the book rounds to 1024); B200 at 1.86 GHz ≈ 2043 (≈2048). Book ch. 12, "What Is a GPU?"."""
    s = gpu_chip(chip)
    clock = clock or TENSOR_CORE_CLOCK_HZ.get(s.name) or clock_hz(s)
    return s.peak_flops(dtype) / (s.sms * SUBPARTITIONS_PER_SM * clock)


def resident_warps(registers_per_thread: int = MAX_REGISTERS_PER_THREAD) -> int:
    """Warps an SM can keep resident when each thread uses `registers_per_thread` 32-bit registers:
    min(64, registers per SM / (32 · registers per thread)). 256 registers → 65,536/(32·256) = 8 (ch. 12)."""
    if not is_int(registers_per_thread) or not 1 <= registers_per_thread <= MAX_REGISTERS_PER_THREAD:
        raise ValueError(f"registers_per_thread must be an integer in 1..{MAX_REGISTERS_PER_THREAD}, "
                         f"got {registers_per_thread!r}")
    per_sm = SUBPARTITIONS_PER_SM * REGISTERS_PER_SUBPARTITION
    return min(MAX_WARPS_PER_SM, per_sm // (WARP_SIZE * registers_per_thread))


def tpu_vpu_alus(chip: str | ChipSpec = "tpu-v5p") -> int:
    """Independent VPU ALUs of a TPU chip: TensorCores · 4 ALUs · 8 sublanes · 128 lanes (v5p: 8192; ch12.q1c)."""
    s = get_chip(chip)
    if s.kind != "tpu":
        raise ValueError(f"{s.name} is not a TPU")
    return s.tensorcores_per_chip * TPU_VPU_ALUS * TPU_VPU_SUBLANES * TPU_VPU_LANES


# --- NVLink and the fat tree --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NVLinkGeneration:
    """One row of the chapter's NVLink table: per-link bandwidth (one direction), links per GPU, node size."""

    nvlink: str
    nvswitch: str
    gpu_generation: str
    link_bytes_per_s: float
    links_per_gpu: int
    node_gpus: tuple[int, ...]
    nvswitches_per_node: tuple[int, ...]

    @property
    def gpu_bytes_per_s(self) -> float:
        """GPU-to-GPU bandwidth in the node: links · per-link bandwidth (Hopper: 18 · 25 GB/s = 450 GB/s)."""
        return self.links_per_gpu * self.link_bytes_per_s


NVLINK: dict[str, NVLinkGeneration] = {
    "Ampere": NVLinkGeneration("3.0", "2.0", "Ampere", 25e9, 12, (8,), (6,)),
    "Hopper": NVLinkGeneration("4.0", "3.0", "Hopper", 25e9, 18, (8,), (4,)),
    "Blackwell": NVLinkGeneration("5.0", "4.0", "Blackwell", 50e9, 18, (8, 72), (2, 18)),
}
NVSWITCH_PORTS = 64           # NVLink ports per NVSwitch (book ch. 12, "At the node level")
IB_SWITCH_PORTS = 64          # NDR InfiniBand switch ports ("Beyond the node level")
IB_PORT_BYTES_PER_S = 50e9    # 400 Gb/s NDR per port and cable, per direction
NICS_PER_NODE = 8             # one 400 Gb/s ConnectX-7 NIC per GPU on a DGX H100 / B200


def nvlink_generation(chip: str | ChipSpec) -> NVLinkGeneration:
    """The NVLink generation of a GPU (by architecture); ValueError for Volta (not in the chapter's table)."""
    s = gpu_chip(chip)
    arch = s.generation.split()[0]
    if arch not in NVLINK:
        raise ValueError(f"book ch. 12's NVLink table has no row for {s.name} ({s.generation}); "
                         f"rows: {', '.join(NVLINK)}")
    return NVLINK[arch]


def node_switch_bytes_per_s(chip: str | ChipSpec = "h100") -> float:
    """NVSwitch capacity of one node: switches · 64 ports · per-port bandwidth (H100: 4·64·25 GB/s = 6.4 TB/s)."""
    g = nvlink_generation(chip)
    return g.nvswitches_per_node[-1 if gpu_chip(chip).gpus_per_node > 8 else 0] * NVSWITCH_PORTS * g.link_bytes_per_s


def node_bandwidth(chip: str | ChipSpec = "h100") -> float:
    """Total GPU-side bandwidth of one node, min(GPUs · W_gpu, switch capacity): 8 · 450 GB/s = 3.6 TB/s
    (switches give 6.4 TB/s, so the node is GPU-limited; ch12.q8)."""
    s = gpu_chip(chip)
    return min(s.gpus_per_node * s.nvlink_bandwidth_oneway_bytes_per_s, node_switch_bytes_per_s(s))


def node_bisection_bandwidth(chip: str | ChipSpec = "h100") -> float:
    """Bisection bandwidth of one NVLink node, both directions: (GPUs/2) · W_gpu · 2 (H100: 3.6 TB/s; ch12.q9)."""
    s = gpu_chip(chip)
    return s.gpus_per_node // 2 * s.nvlink_bandwidth_oneway_bytes_per_s * 2


@dataclass(frozen=True)
class NetworkLevel:
    """One level of a GPU cluster: units of `degree` children, each child with `child_bytes_per_s` into it.

    - gpus_per_child S_{i−1}: 1 at the node level, a node's GPUs at the leaf, an SU's GPUs at the spine;
    - child_bytes_per_s W_link,i (one direction, cables): a GPU's NVLink egress, a node's IB egress, an SU's
      uplinks; per_gpu_bytes_per_s: the share of one GPU when every GPU talks at once (Appendix B: 450, 50 and
      25 GB/s on DGX H100 — the spine figure is limited by the switches counted at 1.6 TB/s each);
    - switch_bytes_per_s: switch capacity per unit as the chapter's summary table counts it (6.4, 25.6, 51.2 TB/s).
    """

    name: str
    degree: int
    gpus_per_child: int
    switches_per_unit: int
    switch_kind: str
    child_bytes_per_s: float
    per_gpu_bytes_per_s: float
    switch_bytes_per_s: float

    @property
    def gpus(self) -> int:
        """GPUs under one unit of this level."""
        return self.degree * self.gpus_per_child

    @property
    def cable_bytes_per_s(self) -> float:
        """Bandwidth of all children's links into one unit (node 3.6, SU 12.8, pod 51.2 TB/s on DGX H100)."""
        return self.degree * self.child_bytes_per_s

    @property
    def collective_bytes_per_s(self) -> float:
        """AllGather/ReduceScatter bandwidth of this level, D·W_link/(D − 1) (node 514, leaf 413 GB/s, spine
        17.1 TB/s); book ch. 12, "Cross-node collectives"."""
        return math.inf if self.degree == 1 else self.degree * self.child_bytes_per_s / (self.degree - 1)


@dataclass(frozen=True)
class Cluster:
    """A GPU cluster as a fat tree of `levels` (node first). `total_gpus` = the top level's GPUs."""

    name: str
    chip: str
    levels: tuple[NetworkLevel, ...]

    @property
    def total_gpus(self) -> int:
        return self.levels[-1].gpus

    @property
    def node(self) -> NetworkLevel:
        return self.levels[0]

    @property
    def gpus_per_node(self) -> int:
        return self.levels[0].gpus

    @property
    def gpu_bytes_per_s(self) -> float:
        """W_gpu: one GPU's NVLink egress."""
        return self.levels[0].child_bytes_per_s

    @property
    def node_bytes_per_s(self) -> float:
        """W_node: one node's scale-out egress (math.inf for a single node)."""
        return self.levels[1].child_bytes_per_s if len(self.levels) > 1 else math.inf

    def level(self, name: str) -> NetworkLevel:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise UnknownNameError(f"no level {name!r} in {self.name}; levels: {', '.join(lv.name for lv in self.levels)}")

    def switch_count(self) -> int:
        """Switches of every kind in the cluster (DGX H100 SuperPod, 1024 GPUs: 512 + 32 + 16 = 560)."""
        total, units = 0, 1
        for lv in reversed(self.levels):
            total += units * lv.switches_per_unit
            units *= lv.degree
        return total

    def require_gpus(self, n_gpus: int) -> int:
        if not is_int(n_gpus) or n_gpus < 1:
            raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
        if n_gpus > self.total_gpus:
            raise ValueError(f"{n_gpus} GPUs is more than {self.name} holds ({self.total_gpus}); "
                             f"build a bigger one with superpod(chip, n_sus=...)")
        return int(n_gpus)

    def spanned(self, n_gpus: int) -> list[tuple[NetworkLevel, int]]:
        """(level, children used D_i) for every level a group of `n_gpus` contiguous GPUs crosses."""
        n = self.require_gpus(n_gpus)
        out = []
        for lv in self.levels:
            used = min(lv.degree, math.ceil(n / lv.gpus_per_child))
            if used > 1:
                out.append((lv, used))
        return out


def _ib_switch_bytes_per_s(per_direction: bool = False) -> float:
    """One 64-port NDR switch: 64 · 50 GB/s = 3.2 TB/s (Quiz 3's count); Appendix B counts 1.6 TB/s."""
    return IB_SWITCH_PORTS * IB_PORT_BYTES_PER_S / (2 if per_direction else 1)


def superpod(chip: str | ChipSpec = "h100", n_sus: int = 4, *, nodes_per_su: int = 32) -> Cluster:
    """A DGX SuperPod of `n_sus` scalable units (book ch. 12, "Beyond the node level" and Appendix B).

    DGX H100/B200: 8-GPU nodes (4 resp. 2 NVSwitches), 8 × 400 Gb/s NICs per node (400 GB/s), SU = 32 nodes
    under 8 leaf switches, SUs joined by 4 spine switches per SU (16 for the 1024-GPU pod), full bisection.
    Two tiers of 64-port switches stop at 8 SUs (2048 GPUs, ch12.q12); more SUs raise ValueError.
    GB200 NVL72: 72-GPU NVLink nodes with 3.6 TB/s of egress each, 8 racks (576 GPUs) per SU-like unit
    (`nodes_per_su` 8 by default for it).
    """
    s = gpu_chip(chip)
    if not is_int(n_sus) or n_sus < 1:
        raise ValueError(f"n_sus must be a positive integer (scalable units), got {n_sus!r}")
    if s.node_egress_bytes_per_s is None:
        raise ValueError(f"no node egress known for {s.name}; the chapter's clusters are H100, H200, B200, GB200")
    g = nvlink_generation(s)
    D = s.gpus_per_node
    if D > 8 and nodes_per_su == 32:
        nodes_per_su = 8
    switches = g.nvswitches_per_node[-1 if D > 8 else 0]
    node = NetworkLevel("node", D, 1, switches, "NVSwitch", s.nvlink_bandwidth_oneway_bytes_per_s,
                        s.nvlink_bandwidth_oneway_bytes_per_s, switches * NVSWITCH_PORTS * g.link_bytes_per_s)
    node_w = s.node_egress_bytes_per_s
    leaf_switches = math.ceil(D * nodes_per_su * IB_PORT_BYTES_PER_S * 2 / _ib_switch_bytes_per_s())
    leaf = NetworkLevel("leaf", nodes_per_su, D, leaf_switches, "InfiniBand", node_w, node_w / D,
                        leaf_switches * _ib_switch_bytes_per_s())
    levels = [node, leaf]
    if n_sus * leaf_switches > IB_SWITCH_PORTS:
        raise ValueError(f"{n_sus} SUs need {n_sus * leaf_switches} leaf switches, more than one "
                         f"{IB_SWITCH_PORTS}-port spine switch can reach: a two-tier pod stops at {IB_SWITCH_PORTS // leaf_switches} SUs "
                         f"(larger pods add a core tier: see fat_tree_switches)")
    if n_sus > 1:
        su_w = nodes_per_su * node_w
        spine_switches = math.ceil(n_sus * su_w / _ib_switch_bytes_per_s())
        per_gpu = spine_switches * _ib_switch_bytes_per_s(per_direction=True) / (n_sus * leaf.gpus)
        levels.append(NetworkLevel("spine", n_sus, leaf.gpus, spine_switches, "InfiniBand", su_w,
                                   min(per_gpu, node_w / D), spine_switches * _ib_switch_bytes_per_s()))
    return Cluster(f"{s.name} SuperPod ({n_sus} SU{'s' if n_sus > 1 else ''})", s.name, tuple(levels))


def single_node(chip: str | ChipSpec = "h100") -> Cluster:
    """One NVLink node as a cluster of one level (8 GPUs; 72 for GB200 NVL72)."""
    return Cluster(f"{gpu_chip(chip).name} node", gpu_chip(chip).name, superpod(chip, 1).levels[:1])


def max_sus(chip: str | ChipSpec = "h100") -> int:
    """Most SUs a two-tier pod of 64-port switches joins: ports / leaf switches per SU (DGX H100: 8; GB200: 3)."""
    return max(1, IB_SWITCH_PORTS // superpod(chip, 1).level("leaf").switches_per_unit)


def as_cluster(system, n_sus: int = 4) -> Cluster:
    """A Cluster, or a GPU name → a SuperPod of min(n_sus, max_sus) SUs (1024 GPUs for DGX H100/B200)."""
    return system if isinstance(system, Cluster) else superpod(system, min(n_sus, max_sus(system)))


def fat_tree_switches(n_gpus: int, ports: int = IB_SWITCH_PORTS) -> tuple[int, ...]:
    """Switches per tier (leaf, spine, core, …) of a full-bisection IB fat tree for `n_gpus` NIC ports.

    Every tier below the top uses half its ports down and half up; the top uses all of them down, so t tiers
    reach 2·(ports/2)^t ports. 1024 GPUs → (32, 16); 2048 → (64, 32); 4096 → (128, 128, 64) (ch12.q12: the
    4096-GPU design needs a core tier).
    """
    if not is_int(n_gpus) or n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
    if not is_int(ports) or ports < 4 or ports % 2:
        raise ValueError(f"ports must be an even integer ≥ 4, got {ports!r}")
    half = ports // 2
    tiers = 1
    while 2 * half ** tiers < n_gpus:
        tiers += 1
    return tuple(math.ceil(n_gpus / half) for _ in range(tiers - 1)) + (math.ceil(n_gpus / ports),)


def su_bandwidths(chip: str | ChipSpec = "h100", n_sus: int = 4) -> dict[str, float]:
    """Quiz 3's accounting: node egress into the leaves, leaf bandwidth per SU, and spine switch capacity
    (16 switches × 3.2 TB/s = 51.2 TB/s for 1024 GPUs; Appendix B counts half that per direction)."""
    c = superpod(chip, n_sus)
    out = {"node": c.node_bytes_per_s, "leaf_per_su": c.level("leaf").cable_bytes_per_s}
    if n_sus > 1:
        out["spine_switches"] = c.level("spine").switch_bytes_per_s
    return out


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

    @property
    def bandwidth(self) -> float:
        return self.n_bytes / self.seconds if self.seconds else math.inf


def _kind(kind: str) -> str:
    key = str(kind).lower().replace("-", "").replace("_", "").replace(" ", "")
    table = {"allgather": "all_gather", "reducescatter": "reduce_scatter", "allreduce": "all_reduce",
             "alltoall": "all_to_all", "psum": "all_reduce"}
    if key not in table:
        raise ValueError(f"unknown collective {kind!r}; known kinds: {', '.join(KINDS)}")
    return table[key]


def _gather_levels(n_bytes: float, n_gpus: int, c: Cluster, exact: bool, Y: int = 1) -> tuple[float, str]:
    """Book ch. 12's tree rule: T = bytes · max_i (D_i − 1)/(D_i · W_link,i · max(1, Y/S_{i−1}))."""
    best, where = 0.0, c.node.name
    for lv, used in c.spanned(n_gpus):
        if lv.gpus <= Y:       # the X axis (stride Y) has one member per unit here: this level carries nothing
            continue
        frac = (used - 1) / used if exact else 1.0
        t = n_bytes * frac / (lv.child_bytes_per_s * max(1.0, Y / lv.gpus_per_child))
        if t > best:
            best, where = t, lv.name
    return best, where


def collective(kind: str, n_bytes: float, n_gpus: int, system="h100", *, sharp: bool = False,
               exact: bool = True, k: float | None = None) -> GPUCollectiveCost:
    """Bandwidth-bound time of a collective over `n_gpus` contiguous GPUs of `system` (a Cluster or GPU name).

    n_bytes is the whole array (gathered size for AllGather, one GPU's unreduced array for ReduceScatter and
    AllReduce, the total for AllToAll). Book ch. 12, "How Do Collectives Work on GPUs?":

    - AllGather / ReduceScatter: T = bytes · max_i (D_i − 1)/(D_i · W_link,i) over the levels crossed; in a node
      bytes·(N − 1)/(N·W_gpu); across DGX H100 nodes ≈ bytes/413 GB/s. `exact=False` drops (D − 1)/D.
    - AllReduce: 2 × that; with `sharp` (in-network reduction) bytes · max_i 1/W_link,i (bytes/W_gpu in a node).
    - AllToAll: in a node bytes·(N − 1)/(N²·W_gpu); across M nodes bytes·(M − 1)/(M²·W_node). A ragged
      AllToAll with at most `k` non-zero targets of N multiplies by min(k/N, 1) (the book's approximation).
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
    return GPUCollectiveCost(kd, n_bytes, n, t, where, sharp, note)


def all_gather(n_bytes: float, n_gpus: int, system="h100", exact: bool = True) -> GPUCollectiveCost:
    """AllGather of an array of `n_bytes` over `n_gpus` GPUs (see `collective`). H100 node, 8 GPUs:
    bf16[4096, 65536] (537 MB) → 537e6 · 7/(8 · 450e9) ≈ 1.04 ms (ch12.q10)."""
    return collective("all_gather", n_bytes, n_gpus, system, exact=exact)


def reduce_scatter(n_bytes: float, n_gpus: int, system="h100", exact: bool = True) -> GPUCollectiveCost:
    """ReduceScatter: the same cost as AllGather (book ch. 12)."""
    return collective("reduce_scatter", n_bytes, n_gpus, system, exact=exact)


def all_reduce(n_bytes: float, n_gpus: int, system="h100", sharp: bool = False,
               exact: bool = True) -> GPUCollectiveCost:
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
    return {lv.name: used * lv.child_bytes_per_s / (used - 1)
            for lv, used in c.spanned(n_gpus or c.total_gpus)}


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
        if lv.gpus <= Y:       # X (stride Y) has one member per unit of this level: nothing crosses it
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
    return {"node": SwitchTraffic(n_bytes, n_bytes * N, n_bytes / s.nvlink_bandwidth_oneway_bytes_per_s),
            "leaf": SwitchTraffic(n_bytes, n_bytes * (M - 1), n_bytes * (M - 1) / (M * s.node_egress_bytes_per_s))}


def sharp_node_traffic(n_bytes: float, N: int, W: float) -> SwitchTraffic:
    """Quiz 4 Q2: SHARP AllReduce of B bytes over N GPUs through one switch: each GPU sends B(N − 1)/N + B/N = B
    and receives as much, so the switch takes in B·N and sends B·N; time B/W."""
    require_positive(n_bytes=n_bytes, N=N, W=W)
    return SwitchTraffic(n_bytes * N, n_bytes * N, n_bytes / W)


#: NCCL measurements quoted by the chapter (8×H100, "Intra-node collectives")
MEASURED_AR_BUS_BANDWIDTH_PEAK = 370e9     # AllReduce bus bandwidth, ~10 GB messages, SHARP off
MEASURED_AR_BUS_BANDWIDTH_58MB = 150e9     # the LLaMA-3 70B MLP shard bf16[8192, 3584]
MEASURED_SHARP_AR_BANDWIDTH = 480e9        # with SHARP (NCCL 2.27.5): ≈ +30%, not the predicted +75%


def bus_bandwidth(n_bytes: float, n_gpus: int, seconds: float) -> float:
    """NCCL's AllReduce 'bus bandwidth' 2 · bytes · (N − 1)/(N · runtime) (book ch. 12)."""
    require_positive(n_bytes=n_bytes, n_gpus=n_gpus, seconds=seconds)
    return 2 * n_bytes * (n_gpus - 1) / (n_gpus * seconds)


# --- rooflines for LLM scaling -------------------------------------------------------------------------------


def alpha(chip: str | ChipSpec = "h100", across_nodes: bool = True, dtype: str = "bf16",
          egress: float | None = None) -> float:
    """α = C / W: FLOPs per byte of the collective bandwidth. W = node egress across nodes (H100: 990e12/400e9
    ≈ 2475), W_gpu inside a node (≈2200); `egress` overrides W (DeepSeek's H800: 300 GB/s → 3300)."""
    s = gpu_chip(chip)
    w = egress or (s.node_egress_bytes_per_s if across_nodes else s.nvlink_bandwidth_oneway_bytes_per_s)
    require_positive(egress=w)
    return s.peak_flops(dtype) / w


def dp_critical_batch(chip: str | ChipSpec = "h100", *, across_nodes: bool = True, E: int = 1, k: int = 1,
                      n_nodes: int | None = None, sharp: bool = False, model_parallel: int = 1,
                      egress: float | None = None) -> float:
    """Tokens per GPU above which data parallelism / ZeRO is compute-bound (book ch. 12, "Data Parallelism").

    B/X > (E/k) · C/W · ((X − 1)/X with `n_nodes` = X small) / 2 with SHARP (in theory) / max(1, M/D_node) when
    `model_parallel` = M ways of model sharding span M/D_node nodes (each brings its own egress). H100 across
    nodes ≈ 2475, in a node ≈ 2200, 2 nodes ≈ 1237; an MoE with E = 128, k = 4: 32 × 2475 ≈ 79,200.
    """
    require_positive(E=E, k=k, model_parallel=model_parallel)
    a = alpha(chip, across_nodes, egress=egress) * E / k
    if n_nodes is not None:
        if not is_int(n_nodes) or n_nodes < 1:
            raise ValueError(f"n_nodes must be a positive integer, got {n_nodes!r}")
        a *= (n_nodes - 1) / n_nodes
    if sharp:
        a /= 2
    return a / max(1.0, model_parallel / gpu_chip(chip).gpus_per_node)


def tp_max_degree(F: float, chip: str | ChipSpec = "h100", across_nodes: bool = False) -> float:
    """Largest TP degree Y that stays compute-bound: Y < F · W / C (F/2200 in an H100 node, F/2475 across)."""
    require_positive(F=F)
    return F / alpha(chip, across_nodes)


def tp_max_degree_two_level(F: float, chip: str | ChipSpec = "h100") -> float:
    """TP past one node (the extra nodes add egress): F > α_node · (Y − D_node) → Y < D_node + F/α_node
    (LLaMA-3, F = 28,000: ≈ 19-way in theory; book ch. 12, "Tensor Parallelism")."""
    require_positive(F=F)
    return gpu_chip(chip).gpus_per_node + F / alpha(chip, True)


@dataclass(frozen=True)
class GPURoofline:
    """T_math and T_comms of one MLP layer under a parallelism on GPUs (seconds)."""

    strategy: str
    t_math: float
    t_comms: float

    @property
    def bound(self) -> str:
        return "compute-bound" if self.t_math >= self.t_comms else "communication-bound"

    @property
    def ratio(self) -> float:
        return self.t_comms / self.t_math


def mlp_roofline(strategy: str, B: float, D: float, F: float, degree: int, chip: str | ChipSpec = "h100", *,
                 across_nodes: bool = True, E: int = 1, k: int = 1) -> GPURoofline:
    """One MLP x[B,D]·W_in[D,F]·W_out[F,D] (bf16) on GPUs, `degree` ways of `strategy` (book ch. 12 rooflines):

    - "dp" (ZeRO/FSDP backward, E experts, k active): T_math = 8·k·B·D·F/(X·C), T_comms = 8·E·D·F/W;
    - "tp" (forward, AllGather + ReduceScatter of activations): T_math = 4·B·D·F/(Y·C), T_comms = 4·B·D/W;
    - "ep" (Z-way experts, 2 AllToAlls of [B, D, k]): T_math = 4·B·k·D·F/(Z·C),
      T_comms = 4·B·D·(Z − D_node)/(W_node·Z) · min(D_node·k/Z, 1).
    W is node egress `across_nodes`, else a GPU's NVLink egress.
    """
    for name, v in (("B", B), ("D", D), ("F", F), ("degree", degree), ("E", E), ("k", k)):
        require_positive(**{name: v})
    s = gpu_chip(chip)
    C = s.peak_flops("bf16")
    W = s.node_egress_bytes_per_s if across_nodes else s.nvlink_bandwidth_oneway_bytes_per_s
    if strategy == "dp":
        return GPURoofline("dp", 8 * k * B * D * F / (degree * C), 8 * E * D * F / W)
    if strategy == "tp":
        return GPURoofline("tp", 4 * B * D * F / (degree * C), 4 * B * D / W)
    if strategy == "ep":
        Dn = s.gpus_per_node
        comms = 0.0 if degree <= Dn else \
            4 * B * D * (degree - Dn) / (s.node_egress_bytes_per_s * degree) * min(Dn * k / degree, 1)
        return GPURoofline("ep", 4 * B * k * D * F / (degree * C), comms)
    raise ValueError(f"unknown strategy {strategy!r}; known: dp, tp, ep (pipeline: pipeline_comms_time)")


def ep_min_F(Z: int, k: int, chip: str | ChipSpec = "h100") -> float:
    """Smallest expert width F for Z-way expert parallelism across nodes to stay compute-bound:
    F > α_node · (Z − D_node)/k · min(D_node·k/Z, 1) → 8·α_node·(Z − 8)/Z ≈ 8·α_node when Z ≫ k
    (≈19,800 on H100; book ch. 12, "Expert Parallelism")."""
    require_positive(Z=Z, k=k)
    Dn = gpu_chip(chip).gpus_per_node
    if Z <= Dn:
        return 0.0
    return alpha(chip, True) * (Z - Dn) / k * min(Dn * k / Z, 1)


def pipeline_comms_time(B: float, D: float, n_microbatches: int, n_stages: int, W: float,
                        dtype_bytes: float = 2) -> float:
    """Activation transfers of a pipeline: (N_MB + N_stages − 2) hops of bytes·B·D/(W·N_MB) each
    (book ch. 12, "Pipeline Parallelism": T = 2BD/(W·N_MB)·(N_MB + N_stages − 2) in bf16)."""
    require_positive(B=B, D=D, n_microbatches=n_microbatches, n_stages=n_stages, W=W, dtype_bytes=dtype_bytes)
    return dtype_bytes * B * D / (W * n_microbatches) * (n_microbatches + n_stages - 2)


__all__ = [
    "SMCounts", "sm_counts", "clock_hz", "vector_flops_per_s", "implied_clock_hz", "tensor_core_flops_per_cycle",
    "resident_warps", "tpu_vpu_alus", "gpu_chip",
    "NVLINK", "NVLinkGeneration", "nvlink_generation", "node_switch_bytes_per_s", "node_bandwidth",
    "node_bisection_bandwidth", "NetworkLevel", "Cluster", "superpod", "single_node", "max_sus", "as_cluster",
    "fat_tree_switches", "su_bandwidths",
    "KINDS", "GPUCollectiveCost", "collective", "all_gather", "reduce_scatter", "all_reduce", "all_to_all",
    "ragged_all_to_all_factor", "all_gather_bytes_per_level", "sharded_all_gather", "sharp_sharded_all_reduce",
    "sharded_all_reduce_simple", "SwitchTraffic", "su_all_gather_traffic", "sharp_node_traffic", "bus_bandwidth",
    "alpha", "dp_critical_batch", "tp_max_degree", "tp_max_degree_two_level", "GPURoofline", "mlp_roofline",
    "ep_min_F", "pipeline_comms_time",
]
