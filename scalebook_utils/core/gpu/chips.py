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

This module holds the chip level ("What Is a GPU?": SMs, Tensor Cores, clocks, warps) and the rooflines
("Rooflines for LLM Scaling on GPUs"), and is the chapter's front door: the network lives in `gpu_network`
("Networking": NVLink, NVSwitch, InfiniBand fat trees, `Cluster`, `superpod`) and the collectives in
`gpu_collectives` ("How Do Collectives Work on GPUs?": `collective`, SHARP, the NCCL numbers); every public name
of both is re-exported here, so `gpus.superpod(...)` and `gpus.collective(...)` work as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core.gpu.collectives import (
    KINDS,
    MEASURED_AR_BUS_BANDWIDTH_58MB,
    MEASURED_AR_BUS_BANDWIDTH_PEAK,
    MEASURED_SHARP_AR_BANDWIDTH,
    NCCL_BASE_LATENCY_S,
    NCCL_NET_OVERHEAD_S,
    NCCL_NET_STEP_LATENCY_S,
    NCCL_NVLINK_STEP_LATENCY_S,
    GPUCollectiveCost,
    SwitchTraffic,
    all_gather,
    all_gather_bytes_per_level,
    all_reduce,
    all_to_all,
    bus_bandwidth,
    collective,
    nccl_latency,
    ragged_all_to_all_factor,
    reduce_scatter,
    sharded_all_gather,
    sharded_all_reduce_simple,
    sharp_node_traffic,
    sharp_sharded_all_reduce,
    su_all_gather_traffic,
)
from scalebook_utils.core.gpu.network import (
    CH12_APPB,
    CH12_NET,
    CLUSTER_CHIPS,
    IB_PORT_BYTES_PER_S,
    IB_SWITCH_PORTS,
    NICS_PER_NODE,
    NVLINK,
    NVSWITCH_PORTS,
    Cluster,
    NetworkLevel,
    NVLinkGeneration,
    as_cluster,
    fat_tree_switches,
    gpu_chip,
    max_sus,
    node_bandwidth,
    node_bisection_bandwidth,
    node_switch_bytes_per_s,
    nvlink_generation,
    single_node,
    su_bandwidths,
    superpod,
)
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import is_int, require_positive

CH12_SM = "book ch. 12, 'What Is a GPU?'"

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
    "v100": (1.25e9, 1.38e9),
    "a100": (1.10e9, 1.41e9),
    "h100": (1.59e9, 1.98e9),
    "h200": (1.59e9, 1.98e9),
}
#: the clocks the chapter uses to turn peak FLOPs/s into FLOPs per cycle per Tensor Core (ch. 12 text)
TENSOR_CORE_CLOCK_HZ: dict[str, float] = {"h100": 1.76e9, "h200": 1.76e9, "b200": 1.86e9, "gb200": 1.86e9}
#: Tensor Core bf16/fp16 FLOPs per cycle by generation, as the chapter lists them (H100's is ≈1065 exactly)
TENSOR_CORE_FLOPS_PER_CYCLE_BOOK = {"v100": 256, "a100": 512, "h100": 1024, "h200": 1024, "b200": 2048, "gb200": 2048}
#: Tensor Cores per SM where it is not one per subpartition: Volta has two per subpartition, 8 per SM (NVIDIA
#: V100 whitepaper: 640 Tensor Cores on 80 SMs, each 64 fp16 FMAs per cycle); Ampere onwards has 4 per SM.
TENSOR_CORES_PER_SM: dict[str, int] = {"v100": 8}
#: Blackwell's tensor memory per SM (book ch. 12): the accumulator no longer fits in registers or SMEM
TMEM_BYTES_PER_SM = {"b200": 256e3, "gb200": 256e3}
#: NVIDIA's fp32 vector FLOPs/s for a B200 (book ch. 12, Quiz 1 Q6; FMA counted as 2 FLOPs)
B200_VECTOR_FP32_FLOPS = 80e12
#: TPU v5p for comparison (book ch. 12 / ch. 2): VPU of 8 sublanes × 128 lanes × 4 ALUs per TensorCore
TPU_VPU_SUBLANES, TPU_VPU_LANES, TPU_VPU_ALUS = 8, 128, 4


@dataclass(frozen=True)
class SMCounts:
    """Whole-chip counts of one GPU's SM parts (book ch. 12, "What Is a GPU?" and its H100 vs v5p table).

    cuda_cores = SMs · 4 · 32 (H100: 16,896); warp_schedulers = SMs · 4 (H100: 528); tensor_cores = SMs · 4 from
    Ampere on (H100: 528) but SMs · 8 on Volta (V100: 640, two per subpartition; `TENSOR_CORES_PER_SM`);
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
    if s.sms is None:
        raise ValueError(f"{s.name} has no SM count: its compute units are not NVIDIA SMs (see its notes)")
    sub = s.sms * SUBPARTITIONS_PER_SM
    tensor_cores = s.sms * TENSOR_CORES_PER_SM.get(s.name, SUBPARTITIONS_PER_SM)
    return SMCounts(
        s.name,
        s.sms,
        sub * FP32_CORES_PER_SUBPARTITION,
        tensor_cores,
        sub,
        float(sub * REGISTERS_PER_SUBPARTITION * REGISTER_BYTES),
        s.sms * s.smem_bytes_per_sm,
        s.sms * TMEM_BYTES_PER_SM.get(s.name, 0.0),
        s.l2_bytes,
    )


def clock_hz(chip: str | ChipSpec = "h100", boost: bool = True) -> float:
    """The boost (or base) clock of `chip` in Hz from the ch. 12 spec table; ValueError where the book has none."""
    s = gpu_chip(chip)
    if s.name not in CLOCKS_HZ:
        raise ValueError(
            f"book ch. 12 gives no clock for {s.name} ('?'); pass clock_hz explicitly "
            f"(ch12.q6 derives ≈{implied_clock_hz():.3g} Hz for a B200)"
        )
    return CLOCKS_HZ[s.name][1 if boost else 0]


def vector_flops_per_s(
    chip: str | ChipSpec = "h100", clock: float | None = None, flops_per_core_per_cycle: float = 1
) -> float:
    """fp32 CUDA-core FLOPs/s = CUDA cores · clock · FLOPs per core per cycle.

    One op per cycle (ch12.q2): H100 at 1.98 GHz ≈ 33.5 TFLOP/s; NVIDIA counts an FMA as 2 (≈67 TFLOP/s).
    """
    clock = clock_hz(chip) if clock is None else clock
    require_positive(clock=clock, flops_per_core_per_cycle=flops_per_core_per_cycle)
    return sm_counts(chip).cuda_cores * clock * flops_per_core_per_cycle


def implied_clock_hz(
    chip: str | ChipSpec = "b200", vector_flops: float = B200_VECTOR_FP32_FLOPS, flops_per_core_per_cycle: float = 2
) -> float:
    """Clock implied by a vector FLOPs/s figure: flops / (CUDA cores · FLOPs per cycle). B200: 80e12/(18,944·2)
    ≈ 2.1 GHz (ch12.q6)."""
    require_positive(vector_flops=vector_flops, flops_per_core_per_cycle=flops_per_core_per_cycle)
    return vector_flops / (sm_counts(chip).cuda_cores * flops_per_core_per_cycle)


def vector_add_fp32(N: float) -> tuple[float, float]:
    """(FLOPs, bytes) of z = x + y over fp32[N] vectors: N adds and 12·N bytes (read 2 × 4N, write 4N), an
    arithmetic intensity of 1/12 (ch12.q7a–c)."""
    return N, 12 * N


def vector_add_time(N: float, chip: str | ChipSpec = "h100") -> float:
    """Roofline time of z = x + y over fp32[N] on the CUDA cores: max(N / vector FLOPs/s, 12·N / W_hbm) in
    seconds; memory-bound at any N (H100, N = 1024³: 12.9 GB / 3.35e12 B/s = 3.8 ms; ch12.q7d–f)."""
    flops, nbytes = vector_add_fp32(N)
    return max(flops / vector_flops_per_s(chip), nbytes / gpu_chip(chip).hbm_bandwidth_bytes_per_s)


def matmul_dtype(chip: str | ChipSpec = "h100") -> str:
    """The 16-bit Tensor Core dtype a chip's peak is quoted in: "bf16", or "fp16" on chips without bf16 (V100)."""
    peaks = gpu_chip(chip).peak_flops_per_s
    return "bf16" if "bf16" in peaks else "fp16"


def tensor_core_flops_per_cycle(
    chip: str | ChipSpec = "h100", dtype: str | None = None, clock: float | None = None, per_subpartition: bool = False
) -> float:
    """Peak / (Tensor Cores · clock): 16-bit FLOPs one Tensor Core does per cycle (`dtype` defaults to
    `matmul_dtype`: bf16, fp16 on V100). H100 at 1.76 GHz: 990e12/(528·1.76e9) ≈ 1065 (the book rounds to 1024);
    B200 at 1.86 GHz ≈ 2043 (≈2048). V100 has 8 Tensor Cores per SM: 125e12/(640·1.38e9) ≈ 142 per core (NVIDIA:
    64 FMAs = 128 FLOPs at its 1.53 GHz boost); per subpartition (two cores) ≈ 283, the book's "256".
    `per_subpartition` divides by SMs · 4 instead. Book ch. 12, "What Is a GPU?"."""
    s = gpu_chip(chip)
    clock = clock or TENSOR_CORE_CLOCK_HZ.get(s.name) or clock_hz(s)
    units = s.sms * SUBPARTITIONS_PER_SM if per_subpartition else sm_counts(s).tensor_cores
    return s.peak_flops(dtype or matmul_dtype(s)) / (units * clock)


def resident_warps(registers_per_thread: int = MAX_REGISTERS_PER_THREAD) -> int:
    """Warps an SM can keep resident when each thread uses `registers_per_thread` 32-bit registers:
    min(64, registers per SM / (32 · registers per thread)). 256 registers → 65,536/(32·256) = 8 (ch. 12)."""
    if not is_int(registers_per_thread) or not 1 <= registers_per_thread <= MAX_REGISTERS_PER_THREAD:
        raise ValueError(
            f"registers_per_thread must be an integer in 1..{MAX_REGISTERS_PER_THREAD}, got {registers_per_thread!r}"
        )
    per_sm = SUBPARTITIONS_PER_SM * REGISTERS_PER_SUBPARTITION
    return min(MAX_WARPS_PER_SM, per_sm // (WARP_SIZE * registers_per_thread))


def tpu_vpu_alus(chip: str | ChipSpec = "tpu-v5p") -> int:
    """Independent VPU ALUs of a TPU chip: TensorCores · 4 ALUs · 8 sublanes · 128 lanes (v5p: 8192; ch12.q1c)."""
    s = get_chip(chip)
    if s.kind != "tpu":
        raise ValueError(f"{s.name} is not a TPU")
    return s.tensorcores_per_chip * TPU_VPU_ALUS * TPU_VPU_SUBLANES * TPU_VPU_LANES


# The chapter's "Networking" and "How Do Collectives Work on GPUs?" come here in the book: they live in
# `gpu_network` and `gpu_collectives`, re-exported at the top of this module.


# --- rooflines for LLM scaling -------------------------------------------------------------------------------


def _link_bytes_per_s(s: ChipSpec, across_nodes: bool) -> float:
    """Node egress (across nodes) or NVLink egress of one GPU; ValueError naming the chip where none is known."""
    w = s.node_egress_bytes_per_s if across_nodes else s.nvlink_bandwidth_oneway_bytes_per_s
    if w is None:
        raise ValueError(
            f"no {'node egress' if across_nodes else 'NVLink'} bandwidth is known for {s.name} "
            f"({'pass egress= or across_nodes=False' if across_nodes else 'pass egress='})"
        )
    return w


def alpha(
    chip: str | ChipSpec = "h100", across_nodes: bool = True, dtype: str = "bf16", egress: float | None = None
) -> float:
    """α = C / W: FLOPs per byte of the collective bandwidth. W = node egress across nodes (H100: 990e12/400e9
    ≈ 2475), W_gpu inside a node (≈2200); `egress` overrides W (DeepSeek's H800: 300 GB/s → 3300)."""
    s = gpu_chip(chip)
    w = egress or _link_bytes_per_s(s, across_nodes)
    require_positive(egress=w)
    return s.peak_flops(dtype) / w


def dp_critical_batch(
    chip: str | ChipSpec = "h100",
    *,
    across_nodes: bool = True,
    E: int = 1,
    k: int = 1,
    n_nodes: int | None = None,
    sharp: bool = False,
    model_parallel: int = 1,
    egress: float | None = None,
) -> float:
    """Tokens per GPU above which data parallelism / ZeRO is compute-bound (book ch. 12, "Data Parallelism").

    B/X > (E/k) · C/W · ((X − 1)/X with `n_nodes` = X small) / 2 with SHARP (in theory) / max(1, M/D_node) when
    `model_parallel` = M ways of model sharding span M/D_node nodes (each brings its own egress). H100 across
    nodes ≈ 2475, in a node ≈ 2200, 2 nodes ≈ 1237; an MoE with E = 128, k = 4: 32 × 2475 ≈ 79,200.
    E, k > 0 with k ≤ E.
    """
    require_positive(E=E, k=k, model_parallel=model_parallel)
    if k > E:
        raise ValueError(
            f"k (experts active per token) must be at most E (experts), got k={k!r}, E={E!r}; a dense "
            "model is E = k = 1"
        )
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


def mlp_roofline(
    strategy: str,
    B: float,
    D: float,
    F: float,
    degree: int,
    chip: str | ChipSpec = "h100",
    *,
    across_nodes: bool = True,
    E: int = 1,
    k: int = 1,
) -> GPURoofline:
    """One MLP x[B,D]·W_in[D,F]·W_out[F,D] (bf16) on GPUs, `degree` ways of `strategy` (book ch. 12 rooflines):

    - "dp" (ZeRO/FSDP backward, E experts, k active): T_math = 8·k·B·D·F/(X·C), T_comms = 8·E·D·F/W;
    - "tp" (forward, AllGather + ReduceScatter of activations): T_math = 4·B·D·F/(Y·C), T_comms = 4·B·D/W;
    - "ep" (Z-way experts, 2 AllToAlls of [B, D, k]): T_math = 4·B·k·D·F/(Z·C),
      T_comms = 4·B·D·(Z − D_node)/(W_node·Z) · min(D_node·k/Z, 1).
    W is node egress `across_nodes`, else a GPU's NVLink egress.
    """
    for name, v in (("B", B), ("D", D), ("F", F), ("degree", degree), ("E", E), ("k", k)):
        require_positive(**{name: v})
    if strategy == "dp" and k > E:  # "ep" uses k alone (E is the dp rule's expert count)
        raise ValueError(f"k (experts active per token) must be at most E (experts), got k={k!r}, E={E!r}")
    s = gpu_chip(chip)
    C = s.peak_flops("bf16")
    W = _link_bytes_per_s(s, across_nodes)
    if strategy == "dp":
        return GPURoofline("dp", 8 * k * B * D * F / (degree * C), 8 * E * D * F / W)
    if strategy == "tp":
        return GPURoofline("tp", 4 * B * D * F / (degree * C), 4 * B * D / W)
    if strategy == "ep":
        Dn = s.gpus_per_node
        comms = (
            0.0
            if degree <= Dn
            else 4 * B * D * (degree - Dn) / (s.node_egress_bytes_per_s * degree) * min(Dn * k / degree, 1)
        )
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


def pipeline_comms_time(
    B: float, D: float, n_microbatches: int, n_stages: int, W: float, dtype_bytes: float = 2
) -> float:
    """Activation transfers of a pipeline: (N_MB + N_stages − 2) hops of bytes·B·D/(W·N_MB) each
    (book ch. 12, "Pipeline Parallelism": T = 2BD/(W·N_MB)·(N_MB + N_stages − 2) in bf16)."""
    require_positive(B=B, D=D, n_microbatches=n_microbatches, n_stages=n_stages, W=W, dtype_bytes=dtype_bytes)
    return dtype_bytes * B * D / (W * n_microbatches) * (n_microbatches + n_stages - 2)


__all__ = [
    "SMCounts",
    "sm_counts",
    "clock_hz",
    "vector_flops_per_s",
    "implied_clock_hz",
    "vector_add_fp32",
    "vector_add_time",
    "tensor_core_flops_per_cycle",
    "matmul_dtype",
    "TENSOR_CORES_PER_SM",
    "resident_warps",
    "tpu_vpu_alus",
    "gpu_chip",
    "NVLINK",
    "NVLinkGeneration",
    "nvlink_generation",
    "node_switch_bytes_per_s",
    "node_bandwidth",
    "node_bisection_bandwidth",
    "NetworkLevel",
    "Cluster",
    "superpod",
    "single_node",
    "max_sus",
    "as_cluster",
    "fat_tree_switches",
    "su_bandwidths",
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
    "bus_bandwidth",
    "alpha",
    "dp_critical_batch",
    "tp_max_degree",
    "tp_max_degree_two_level",
    "GPURoofline",
    "mlp_roofline",
    "ep_min_F",
    "pipeline_comms_time",
]
#: the constants of the two split-off modules, re-exported with the rest of their public names
__all__ += [
    "CH12_NET",
    "CH12_APPB",
    "CLUSTER_CHIPS",
    "NVSWITCH_PORTS",
    "IB_SWITCH_PORTS",
    "IB_PORT_BYTES_PER_S",
    "NICS_PER_NODE",
    "MEASURED_AR_BUS_BANDWIDTH_PEAK",
    "MEASURED_AR_BUS_BANDWIDTH_58MB",
    "MEASURED_SHARP_AR_BANDWIDTH",
    "NCCL_BASE_LATENCY_S",
    "NCCL_NVLINK_STEP_LATENCY_S",
    "NCCL_NET_STEP_LATENCY_S",
    "NCCL_NET_OVERHEAD_S",
    "nccl_latency",
]
