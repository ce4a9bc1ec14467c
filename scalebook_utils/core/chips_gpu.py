"""The GPUs: the book's (ch. 12, "How to Think About GPUs") and the ones beyond it, every number with its source.

One `ChipSpec` per GPU in SI units: dense peaks per compute dtype (FLOPs/s; half the spec sheets' "with
sparsity" figures), HBM (bytes) and its bandwidth (bytes/s), SMs, boost clock (Hz), SMEM per SM and L2
(bytes), one GPU's NVLink egress in one direction (bytes/s), GPUs per NVLink node and the node's scale-out
egress (bytes/s), and the Cloud price where the book gives one.

- `BOOK_GPUS`: V100, A100, H100, H200, B200, GB200 — ch. 12's spec and networking tables (ch. 1 for H100's
  peak and bandwidth), NVIDIA datasheets where the book gives no number;
- `DATASHEET_GPUS`: A100 40 GB (SXM), H100 PCIe, AMD MI300X — beyond the book (issue 17), from the vendors'
  datasheets, dense (not sparse) peaks.

`ChipSpec.notes` records where sources disagree and which number we keep. `hardware` collects both lists.
"""

from __future__ import annotations

from scalebook_utils.core.chip_spec import ChipSpec
from scalebook_utils.core.chips_tpu import CH8_PRICE  # the book's one price table (ch. 8) covers both kinds

CH1 = "book ch. 1 'Where does the time go?'"
CH12_MEM = "book ch. 12, spec table (memory and capacity)"
CH12_FLOPS = "book ch. 12, spec table (FLOPs and bandwidth)"
CH12_NET = "book ch. 12, node egress table / NVLink generations table"
A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column)"
H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (2022, H100 PCIe column; sparse figures / 2)"
MI300X_DS = "AMD Instinct MI300X accelerator datasheet (dense figures, 'with structured sparsity' / 2)"


def _gpu(
    name,
    generation,
    flops,
    hbm,
    hbm_bw,
    *,
    sms,
    clock,
    smem,
    l2,
    nvlink,
    node,
    node_egress,
    price=None,
    notes=(),
    sources=None,
    vendor="nvidia",
) -> ChipSpec:
    src = {
        "peak_flops_per_s": CH12_FLOPS,
        "hbm_bytes": CH12_MEM,
        "hbm_bandwidth_bytes_per_s": CH12_FLOPS,
        "sms": CH12_MEM,
        "clock_hz": CH12_MEM + " (boost clock)",
        "smem_bytes_per_sm": CH12_MEM,
        "l2_bytes": CH12_MEM,
        "nvlink_bandwidth_oneway_bytes_per_s": CH12_NET,
        "gpus_per_node": CH12_NET,
        "node_egress_bytes_per_s": CH12_NET,
    }
    src.update(sources or {})
    return ChipSpec(
        name=name,
        vendor=vendor,
        generation=generation,
        peak_flops_per_s=dict(flops),
        hbm_bytes=hbm,
        hbm_bandwidth_bytes_per_s=hbm_bw,
        sources=src,
        sms=sms,
        clock_hz=clock,
        smem_bytes_per_sm=smem,
        l2_bytes=l2,
        nvlink_bandwidth_oneway_bytes_per_s=nvlink,
        gpus_per_node=node,
        node_egress_bytes_per_s=node_egress,
        price_per_hour_usd=price,
        notes=tuple(notes),
    )


#: The book's GPUs, oldest first; `hardware.CHIPS` lists them after the TPUs.
BOOK_GPUS: tuple[ChipSpec, ...] = (
    _gpu(
        "v100",
        "Volta",
        {"fp16": 1.25e14},
        32e9,
        9.0e11,
        sms=80,
        clock=1.38e9,
        smem=96e3,
        l2=6e6,
        nvlink=1.5e11,
        node=8,
        node_egress=None,
        sources={
            "peak_flops_per_s": "NVIDIA V100 SXM2 datasheet (125 TFLOPS fp16 Tensor Core); book ch. 12 gives none",
            "nvlink_bandwidth_oneway_bytes_per_s": "NVIDIA V100 datasheet (NVLink 300 GB/s both directions)",
            "gpus_per_node": "NVIDIA DGX-1 (8 GPUs)",
            "node_egress_bytes_per_s": "not given",
        },
        notes=("V100 has no bf16 or int8 Tensor Core path; the book's table leaves these blank.",),
    ),
    _gpu(
        "a100",
        "Ampere",
        {"bf16": 3.1e14, "fp16": 3.1e14, "int8": 6.2e14},
        80e9,
        2.0e12,
        sms=108,
        clock=1.41e9,
        smem=192e3,
        l2=40e6,
        nvlink=3.0e11,
        node=8,
        node_egress=2.0e11,
        sources={"node_egress_bytes_per_s": "NVIDIA DGX A100 datasheet (8 × 200 Gb/s HDR InfiniBand)"},
        notes=("Datasheet bf16 is 312 TFLOP/s; the book's table rounds to 3.1e14, which we keep.",),
    ),
    _gpu(
        "h100",
        "Hopper",
        {"bf16": 9.89e14, "fp16": 9.89e14, "fp8": 1.979e15, "int8": 1.979e15},
        80e9,
        3.35e12,
        sms=132,
        clock=1.98e9,
        smem=256e3,
        l2=50e6,
        nvlink=4.5e11,
        node=8,
        node_egress=4.0e11,
        price=10.8,
        sources={
            "peak_flops_per_s": CH1 + " (1.979e15 'with sparsity' / 2); ch. 12 rounds to 9.9e14",
            "hbm_bandwidth_bytes_per_s": CH1 + " and ch. 12 text (3.35e12)",
            "price_per_hour_usd": CH8_PRICE,
        },
        notes=(
            "HBM bandwidth: 3.35e12 in ch. 1 and ch. 12's text; 3.4e12 in ch. 3 and ch. 12's table. We use 3.35e12.",
            "bf16: 9.89e14 dense (half the spec sheet's sparse 1.979e15); ch. 12 writes 990e12.",
        ),
    ),
    _gpu(
        "h200",
        "Hopper",
        {"bf16": 9.89e14, "fp16": 9.89e14, "fp8": 1.979e15, "int8": 1.979e15},
        141e9,
        4.8e12,
        sms=132,
        clock=1.98e9,
        smem=256e3,
        l2=50e6,
        nvlink=4.5e11,
        node=8,
        node_egress=4.0e11,
        price=10.0,
        sources={
            "peak_flops_per_s": "same Hopper die as H100 (book ch. 12 table: 9.9e14)",
            "price_per_hour_usd": "book ch. 12 (≈$10/h on GCP)",
        },
    ),
    _gpu(
        "b200",
        "Blackwell",
        {"bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9.0e15},
        192e9,
        8.0e12,
        sms=148,
        clock=None,
        smem=256e3,
        l2=126e6,
        nvlink=9.0e11,
        node=8,
        node_egress=4.0e11,
        sources={
            "peak_flops_per_s": "book ch. 12 text (2250e12 bf16); table 2.3e15",
            "clock_hz": "not given (ch. 12 table has '?'; ch12.q6 derives ≈1.86 GHz)",
        },
        notes=(
            "bf16: 2.3e15 in ch. 12's table, 2250e12 in its text and quizzes. We use 2.25e15.",
            "HBM bandwidth: ch. 12's text says 9 TB/s, its table and quizzes 8.0e12. We use 8.0e12.",
        ),
    ),
    _gpu(
        "gb200",
        "Blackwell (GB200 NVL72)",
        {"bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9.0e15},
        192e9,
        8.0e12,
        sms=148,
        clock=None,
        smem=256e3,
        l2=126e6,
        nvlink=9.0e11,
        node=72,
        node_egress=3.6e12,
        sources={
            "peak_flops_per_s": "book ch. 12 (GB200 = 2 × B200 + 1 Grace; per-GPU numbers as B200)",
            "clock_hz": "not given",
        },
        notes=("One GPU of a GB200 NVL72 rack: a 72-GPU NVLink domain, 8 GPUs per host (ch. 12, Appendix A).",),
    ),
)

#: Chips beyond the book that practitioners ask for (issue 17), every number from the vendor's datasheet.
DATASHEET_GPUS: tuple[ChipSpec, ...] = (
    _gpu(
        "a100-40gb",
        "Ampere",
        {"bf16": 3.12e14, "fp16": 3.12e14, "int8": 6.24e14},
        40e9,
        1.555e12,
        sms=108,
        clock=1.41e9,
        smem=192e3,
        l2=40e6,
        nvlink=3.0e11,
        node=8,
        node_egress=2.0e11,
        sources={
            "peak_flops_per_s": A100_DS + " (BF16/FP16 Tensor Core 312 TFLOPS, INT8 624 TOPS, dense)",
            "hbm_bytes": A100_DS + " (40 GB HBM2)",
            "hbm_bandwidth_bytes_per_s": A100_DS + " (1,555 GB/s)",
            "sms": "NVIDIA A100 whitepaper (108 SMs, as the 80 GB part)",
            "clock_hz": "NVIDIA A100 whitepaper (1410 MHz boost)",
            "smem_bytes_per_sm": "as a100 (book ch. 12: 192 KB L1/SMEM per SM)",
            "l2_bytes": "NVIDIA A100 whitepaper (40 MB)",
            "nvlink_bandwidth_oneway_bytes_per_s": A100_DS + " (NVLink 600 GB/s both directions)",
            "gpus_per_node": "NVIDIA DGX A100 320GB (8 × A100 40GB)",
            "node_egress_bytes_per_s": "NVIDIA DGX A100 datasheet (8 × 200 Gb/s HDR InfiniBand)",
        },
        notes=(
            "The 40 GB SXM4 part: same die and NVLink as `a100` (80 GB), less and slower HBM2.",
            "bf16 is the datasheet's 312 TFLOP/s; `a100` keeps the book's rounded 3.1e14.",
        ),
    ),
    _gpu(
        "h100-pcie",
        "Hopper (PCIe)",
        {"bf16": 7.56e14, "fp16": 7.56e14, "fp8": 1.513e15, "int8": 1.513e15},
        80e9,
        2.0e12,
        sms=114,
        clock=1.755e9,
        smem=256e3,
        l2=50e6,
        nvlink=3.0e11,
        node=2,
        node_egress=None,
        sources={
            "peak_flops_per_s": H100_DS + " (BF16 1,513 → 756 TFLOPS; FP8, INT8 3,026 → 1,513)",
            "hbm_bytes": H100_DS + " (80 GB HBM2e)",
            "hbm_bandwidth_bytes_per_s": H100_DS + " (2 TB/s)",
            "sms": "NVIDIA H100 whitepaper (114 SMs on the PCIe product)",
            "clock_hz": "NVIDIA H100 whitepaper (1755 MHz max boost, PCIe)",
            "smem_bytes_per_sm": "as h100 (book ch. 12: 256 KB L1/SMEM per SM)",
            "l2_bytes": "NVIDIA H100 whitepaper (50 MB)",
            "nvlink_bandwidth_oneway_bytes_per_s": H100_DS + " (NVLink bridge 600 GB/s both directions)",
            "gpus_per_node": H100_DS + " (an NVLink bridge joins 2 GPUs; the rest is PCIe Gen5, 128 GB/s)",
            "node_egress_bytes_per_s": "not given: PCIe servers differ in NICs",
        },
        notes=(
            "The NVLink domain is a bridged pair (gpus_per_node = 2); between pairs traffic goes over PCIe "
            "Gen5 (64 GB/s each way) and the server's NICs, which vary, so there is no cluster model.",
            "The newer datasheet replaces this column by H100 NVL (94 GB, 3.9 TB/s); this is the 80 GB PCIe card.",
        ),
    ),
    _gpu(
        "mi300x",
        "CDNA 3",
        {"bf16": 1.3074e15, "fp16": 1.3074e15, "fp8": 2.6149e15, "int8": 2.6149e15},
        192e9,
        5.3e12,
        sms=None,
        clock=2.1e9,
        smem=64e3,
        l2=256e6,
        nvlink=4.48e11,
        node=8,
        node_egress=4.0e11,
        vendor="amd",
        sources={
            "peak_flops_per_s": MI300X_DS + " (BF16/FP16 1307.4 TFLOPS; FP8, INT8 2614.9)",
            "hbm_bytes": MI300X_DS + " (192 GB HBM3)",
            "hbm_bandwidth_bytes_per_s": MI300X_DS + " (5.3 TB/s)",
            "sms": "none: 304 compute units, which are not NVIDIA SMs (see notes)",
            "clock_hz": MI300X_DS + " (2100 MHz peak engine clock)",
            "smem_bytes_per_sm": MI300X_DS + " / CDNA 3 whitepaper (64 KB LDS per CU)",
            "l2_bytes": MI300X_DS + " (256 MB AMD Infinity Cache, the last-level cache; L2 is 4 MB per XCD)",
            "nvlink_bandwidth_oneway_bytes_per_s": MI300X_DS + " (7 Infinity Fabric links × 128 GB/s both "
            "directions = 448 GB/s each way)",
            "gpus_per_node": "AMD Instinct MI300X Platform (8 GPUs, fully connected)",
            "node_egress_bytes_per_s": "Microsoft Azure ND MI300X v5 (8 × 400 Gb/s InfiniBand per VM); "
            "a deployment's figure, not AMD's",
        },
        notes=(
            "The 8 GPUs form a full mesh of Infinity Fabric links, not a switch: 448 GB/s is one GPU's total "
            "egress to its 7 peers (64 GB/s to any one of them).",
            "304 CUs × 64 stream processors: the book's SM arithmetic (4 × 32 FP32 cores) does not apply, so "
            "`sms` is None and gpus.sm_counts refuses it.",
            "Clusters (gpu_network.superpod): this switchless node under the book's InfiniBand fat tree; "
            "NVLink-only helpers (node_switch_bytes_per_s, nvlink_generation) refuse it.",
        ),
    ),
)
