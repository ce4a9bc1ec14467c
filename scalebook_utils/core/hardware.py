"""Hardware: the chips of the book, every number with its source.

`ChipSpec` is a frozen dataclass in SI units (FLOPs/s, bytes, bytes/s, Hz, s); field names carry the
unit. `CHIPS` maps the lower-case names used everywhere in scalebook to the book's chips, `DATASHEET_CHIPS`
holds the chips beyond the book (`ALL_CHIPS` both); `get_chip(name)` looks one up in either, ignoring case,
separators and common spellings, and lists the close matches and the known names when it cannot.

Sources (cited per field in `ChipSpec.sources`):
- TPU numbers: book ch. 2, "TPU specs" tables (chips, ICI, PCIe/DCN), with ch. 1 where it differs.
- GPU numbers: book ch. 12, spec and networking tables; NVIDIA datasheets where the book gives none.
- Chips beyond the book (A100 40 GB, H100 PCIe, AMD MI300X): the vendor datasheets, dense (not sparse) peaks.
Where versions of the book disagree, `ChipSpec.notes` records the alternatives and why we chose.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scalebook_utils.core.errors import name_index, resolve_name
from scalebook_utils.core.units import canonical_dtype

CH1 = "book ch. 1 'Where does the time go?'"
CH2_CHIPS = "book ch. 2, TPU specs table (chips)"
CH2_ICI = "book ch. 2, TPU specs table (ICI, one-way per link)"
CH2_PCIE = "book ch. 2, PCIe/DCN table (per TPU)"
CH2_TEXT = "book ch. 2, text ('How to Think About TPUs')"
CH12_MEM = "book ch. 12, spec table (memory and capacity)"
CH12_FLOPS = "book ch. 12, spec table (FLOPs and bandwidth)"
CH12_NET = "book ch. 12, node egress table / NVLink generations table"
CH8_PRICE = "book ch. 8, Cloud prices (Feb 2025)"
A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column)"
H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (2022, H100 PCIe column; sparse figures / 2)"
MI300X_DS = "AMD Instinct MI300X accelerator datasheet (dense figures, 'with structured sparsity' / 2)"


class FrozenMap(Mapping):
    """A read-only, hashable mapping (a ChipSpec's dtype → FLOPs/s table, its sources): assignment raises.

    >>> m = FrozenMap({"bf16": 1.97e14}); m["bf16"] = 0
    Traceback (most recent call last):
    TypeError: 'FrozenMap' object does not support item assignment
    """

    __slots__ = ("_items",)

    def __init__(self, items=()):
        object.__setattr__(self, "_items", dict(items))

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self):
        return FrozenMap, (self._items,)


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator chip (a TPU chip or one GPU), all quantities in SI units.

    `peak_flops_per_s` maps a compute dtype ("bf16", "int8", "fp8", "fp16", "fp4") to dense peak
    FLOPs/s (OPs/s for integers). A dtype the chip has no fast path for is absent; `peak_flops`
    raises a clear error for it.

    Read-only all the way down: the dataclass is frozen, its mappings are `FrozenMap`s (a dict given
    is copied into one), so no assignment can change a chip under every later calculation; specs are
    hashable. Derive a variant with `dataclasses.replace(spec, peak_flops_per_s={...})`.
    """

    name: str
    vendor: str  # "google", "nvidia" or "amd"
    generation: str
    peak_flops_per_s: Mapping[str, float]
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    sources: Mapping[str, str]
    # TPU interconnect
    ici_link_bandwidth_oneway_bytes_per_s: float | None = None
    ici_torus_dims: int | None = None  # 2 (2D torus) or 3 (3D torus)
    pod_shape: tuple[int, ...] | None = None
    host_shape: tuple[int, ...] | None = None
    pcie_bandwidth_bytes_per_s: float | None = None
    dcn_bandwidth_bytes_per_s: float | None = None
    ici_hop_latency_s: float | None = None
    tensorcores_per_chip: int | None = None
    mxu_size: int | None = None
    vmem_bytes: float | None = None
    # GPU
    sms: int | None = None
    clock_hz: float | None = None
    smem_bytes_per_sm: float | None = None
    l2_bytes: float | None = None
    nvlink_bandwidth_oneway_bytes_per_s: float | None = None  # per-GPU egress inside the NVLink domain
    gpus_per_node: int | None = None
    node_egress_bytes_per_s: float | None = None
    # money
    price_per_hour_usd: float | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self):
        for name in ("peak_flops_per_s", "sources"):
            object.__setattr__(self, name, FrozenMap(getattr(self, name)))
        for name in ("pod_shape", "host_shape", "notes"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    # --- derived quantities ------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """ "tpu", "gpu", or "measured" (a spec calibrated on this machine by jaxlab.calibrate)."""
        return "tpu" if self.vendor == "google" else "measured" if self.vendor == "measured" else "gpu"

    @property
    def supported_dtypes(self) -> tuple[str, ...]:
        return tuple(self.peak_flops_per_s)

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOPs/s (OPs/s) for matmuls computed in `dtype`."""
        d = canonical_dtype(dtype)
        if d not in self.peak_flops_per_s:
            raise ValueError(
                f"{self.name} has no {d} matmul peak; supported compute dtypes on {self.name}: "
                f"{', '.join(self.supported_dtypes)}"
            )
        return self.peak_flops_per_s[d]

    @property
    def ici_link_bandwidth_bidi_bytes_per_s(self) -> float | None:
        """Both directions of one ICI link together (book ch. 2: 'bidi' = 2 × one-way)."""
        w = self.ici_link_bandwidth_oneway_bytes_per_s
        return None if w is None else 2 * w

    @property
    def pod_chips(self) -> int | None:
        return None if self.pod_shape is None else math.prod(self.pod_shape)

    def critical_intensity(self, dtype: str = "bf16") -> float:
        """α_hbm = peak FLOPs/s ÷ HBM bytes/s, in FLOPs per byte (v5e bf16: ≈240; book ch. 1)."""
        return self.peak_flops(dtype) / self.hbm_bandwidth_bytes_per_s


def _tpu(
    name,
    generation,
    bf16,
    int8,
    hbm,
    hbm_bw,
    ici,
    dims,
    pod,
    host,
    *,
    pcie=1.6e10,
    dcn=6.25e9,
    pcie_src=CH2_PCIE + " ('typical')",
    dcn_src=CH2_PCIE + " ('typical')",
    cores=None,
    mxu=128,
    vmem=None,
    price=None,
    notes=(),
    extra_sources=None,
) -> ChipSpec:
    sources = {
        "peak_flops_per_s": CH2_CHIPS,
        "hbm_bytes": CH2_CHIPS,
        "hbm_bandwidth_bytes_per_s": CH2_CHIPS,
        "ici_link_bandwidth_oneway_bytes_per_s": CH2_ICI,
        "pod_shape": CH2_CHIPS,
        "ici_torus_dims": "book ch. 2 'Networking' (2D torus: v2, v3, v5e, v6e; 3D: v4, v5p; TPU7x from its "
        "4x4x576 pod shape)",
        "host_shape": CH2_CHIPS,
        "pcie_bandwidth_bytes_per_s": pcie_src,
        "dcn_bandwidth_bytes_per_s": dcn_src,
        "ici_hop_latency_s": CH2_TEXT + " (≈1 µs per hop)",
        "tensorcores_per_chip": CH2_TEXT,
        "mxu_size": CH2_TEXT + " (128×128 before v6e, 256×256 from v6e)",
    }
    if vmem is not None:
        sources["vmem_bytes"] = CH2_TEXT + " (128 MiB)"
    if price is not None:
        sources["price_per_hour_usd"] = CH8_PRICE
    sources.update(extra_sources or {})
    return ChipSpec(
        name=name,
        vendor="google",
        generation=generation,
        peak_flops_per_s={"bf16": bf16, "int8": int8},
        hbm_bytes=hbm,
        hbm_bandwidth_bytes_per_s=hbm_bw,
        sources=sources,
        ici_link_bandwidth_oneway_bytes_per_s=ici,
        ici_torus_dims=dims,
        pod_shape=pod,
        host_shape=host,
        pcie_bandwidth_bytes_per_s=pcie,
        dcn_bandwidth_bytes_per_s=dcn,
        ici_hop_latency_s=1e-6,
        tensorcores_per_chip=cores,
        mxu_size=mxu,
        vmem_bytes=vmem,
        price_per_hour_usd=price,
        notes=tuple(notes),
    )


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


_TPUS = [
    _tpu(
        "tpu-v3",
        "v3",
        1.4e14,
        1.4e14,
        32e9,
        9.0e11,
        1.0e11,
        2,
        (32, 32),
        (4, 2),
        cores=2,
        notes=(
            "Two TensorCores per chip that act as separate devices (book ch. 2).",
            "The book's table lists int8 = bf16 for v3 (no int8 speedup).",
        ),
    ),
    _tpu(
        "tpu-v4p",
        "v4p",
        2.75e14,
        2.75e14,
        32e9,
        1.2e12,
        4.5e10,
        3,
        (16, 16, 16),
        (2, 2, 1),
        cores=2,
        notes=(
            "HBM bandwidth: the ch. 2 table says 1.2e12 B/s, the answer to ch2.q1 uses 1.23e12; we keep the "
            "table value and the checker accepts both.",
            "PCIe: ch. 2 text gives 16 GB/s each way for v4; we keep the 'typical' 1.6e10.",
        ),
    ),
    _tpu(
        "tpu-v5p",
        "v5p",
        4.59e14,
        9.18e14,
        96e9,
        2.8e12,
        9.0e10,
        3,
        (16, 20, 28),
        (2, 2, 1),
        cores=2,
        vmem=128 * 2**20,
        price=4.2,
        notes=(
            "HBM bandwidth: current text 2.8e12 B/s; older text 2.5e12. We use 2.8e12.",
            "ICI: the first version (Feb 2025) said 1e11 per axis; later versions 9e10 one-way. We use 9e10.",
            "bf16 peak also written 4.6e14 in places; the table's 4.59e14 is used.",
            "VMEM: 128 MiB (ch. 2 / ch. 12 table); ch. 12 elsewhere says about 120 MB.",
        ),
    ),
    _tpu(
        "tpu-v5e",
        "v5e",
        1.97e14,
        3.94e14,
        16e9,
        8.2e11,
        4.5e10,
        2,
        (16, 16),
        (4, 2),
        pcie=None,
        dcn=3.125e9,
        pcie_src="book ch. 2 gives no v5e PCIe number",
        dcn_src=CH2_PCIE,
        cores=1,
        vmem=128 * 2**20,
        price=1.2,
        notes=(
            "HBM bandwidth: current text 8.2e11 B/s; the Feb 2025 version used 8.1e11 (critical batch 243 "
            "instead of 240). We use 8.2e11.",
            "HBM capacity: the tables say 16 GB (decimal, used in the book's sums); ch. 2's text says 16 GiB.",
        ),
    ),
    _tpu(
        "tpu-v6e",
        "v6e",
        9.2e14,
        1.84e15,
        32e9,
        1.6e12,
        9.0e10,
        2,
        (16, 16),
        (4, 2),
        pcie=3.2e10,
        dcn=12.5e9,
        pcie_src=CH2_PCIE,
        dcn_src=CH2_PCIE,
        cores=1,
        mxu=256,
        notes=("bf16 peak: ch. 1 says 9.1e14, ch. 2's table 9.20e14. We use 9.2e14; ch1.e4b uses ch. 1's 9.1e14.",),
    ),
    _tpu(
        "tpu7x",
        "TPU7x (Ironwood)",
        2.30e15,
        4.61e15,
        192e9,
        7.4e12,
        9.0e10,
        3,
        (4, 4, 576),
        (2, 2, 1),
        pcie=None,
        dcn=12.5e9,
        pcie_src="book ch. 2 gives no TPU7x PCIe number",
        dcn_src=CH2_PCIE,
        cores=2,
        mxu=256,
        notes=(
            "Only in the current version of ch. 2. TPU v7 drops megacore for a fast link between its two cores.",
            "MXU size 256 assumed as for v6e (the book states 256×256 only for v6e).",
            "The int8 column of ch. 2's table is what we store for the low-precision peak.",
        ),
    ),
]

_GPUS = [
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
]

#: Chips beyond the book that practitioners ask for (issue 17), every number from the vendor's datasheet.
_DATASHEET_GPUS = [
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
]

#: Every chip of the book, by its scalebook name (what the notebooks and figures iterate over).
CHIPS: dict[str, ChipSpec] = {c.name: c for c in _TPUS + _GPUS}
#: Chips beyond the book, from vendor datasheets: A100 40 GB (SXM), H100 PCIe, AMD MI300X.
DATASHEET_CHIPS: dict[str, ChipSpec] = {c.name: c for c in _DATASHEET_GPUS}
#: Every chip `get_chip` knows: the book's and the datasheet ones.
ALL_CHIPS: dict[str, ChipSpec] = CHIPS | DATASHEET_CHIPS

#: other spellings (compared after `errors.squash_name`: case, separators, a leading vendor name are ignored)
CHIP_ALIASES = {
    "v3": "tpu-v3",
    "v4": "tpu-v4p",
    "v4p": "tpu-v4p",
    "tpu-v4": "tpu-v4p",
    "v5p": "tpu-v5p",
    "v5e": "tpu-v5e",
    "v5litepod": "tpu-v5e",
    "v6e": "tpu-v6e",
    "trillium": "tpu-v6e",
    "tpu-v7x": "tpu7x",
    "v7x": "tpu7x",
    "ironwood": "tpu7x",
    "tpu-v7": "tpu7x",
    "v100-sxm2": "v100",
    "v100-32gb": "v100",
    "a100-80gb": "a100",
    "a100-sxm": "a100",
    "a100-sxm4": "a100",
    "a100-sxm4-80gb": "a100",
    "a100-80gb-sxm": "a100",
    "a100-sxm-80gb": "a100",
    "a100-40gb-sxm": "a100-40gb",
    "a100-sxm4-40gb": "a100-40gb",
    "a100-sxm-40gb": "a100-40gb",
    "h100-sxm": "h100",
    "h100-sxm5": "h100",
    "h100-80gb": "h100",
    "h100-sxm-80gb": "h100",
    "h100-sxm5-80gb": "h100",
    "h100-80gb-pcie": "h100-pcie",
    "h100-pcie-80gb": "h100-pcie",
    "h200-sxm": "h200",
    "h200-141gb": "h200",
    "b200-sxm": "b200",
    "gb200-nvl72": "gb200",
    "instinct-mi300x": "mi300x",
}


def get_chip(name: str | ChipSpec) -> ChipSpec:
    """Look up a chip by name: case, separators, a vendor prefix and common spellings are ignored ("v5e",
    "H100 SXM5", "h100-sxm", "a100-80gb", "AMD Instinct MI300X"; `CHIP_ALIASES`).

    Raises UnknownNameError (a KeyError) listing the close matches and the known names when `name` is unknown.
    """
    if isinstance(name, ChipSpec):
        return name
    return ALL_CHIPS[resolve_name(name, _CHIP_INDEX, "chip", ALL_CHIPS)]


def chip_names(kind: str | None = None, *, datasheet: bool = False) -> list[str]:
    """Names of the book's chips (`CHIPS`), or only "tpu" or "gpu" ones; `datasheet=True` adds the chips
    beyond the book (`DATASHEET_CHIPS`)."""
    if kind not in (None, "tpu", "gpu"):
        raise ValueError(f"kind must be 'tpu', 'gpu' or None, got {kind!r}")
    chips = ALL_CHIPS if datasheet else CHIPS
    return [n for n, c in chips.items() if kind is None or c.kind == kind]


_CHIP_INDEX = name_index(ALL_CHIPS, CHIP_ALIASES)


# --- the bandwidth hierarchy of one chip (book ch. 2; ch. 12 for GPUs) ------------------------------

#: VMEM ↔ MXU bandwidth as a multiple of HBM bandwidth (book ch. 2, "What Is a TPU?": about 22×, stated for v5e).
VMEM_TO_HBM_RATIO = 22


def bandwidth_channels(chip: ChipSpec | str, dtype: str = "bf16") -> list[tuple[str, float | None, str]]:
    """(channel, bytes/s or None, note) from fastest to slowest: VMEM, HBM, ICI, PCIe, DCN (TPUs) —
    NVLink and node egress for GPUs. None means the book gives no number for this chip.

    VMEM = `VMEM_TO_HBM_RATIO` × HBM (only for chips with a VMEM size); ICI is one link, one way; node egress
    is the node's egress ÷ GPUs per node. Divide the chip's `dtype` peak by each to get that channel's critical
    intensity C/W (book ch. 2, "Key Takeaways"). `dtype` is accepted for the figure that draws C/W; the
    bandwidths do not depend on it.
    """
    spec = get_chip(chip)
    rows: list[tuple[str, float | None, str]] = []
    if spec.vmem_bytes is not None:
        rows.append(("VMEM", VMEM_TO_HBM_RATIO * spec.hbm_bandwidth_bytes_per_s, f"≈{VMEM_TO_HBM_RATIO}× HBM"))
    rows.append(("HBM", spec.hbm_bandwidth_bytes_per_s, "per chip"))
    if spec.kind == "tpu":
        rows.append(("ICI", spec.ici_link_bandwidth_oneway_bytes_per_s, "one link, one way"))
        rows.append(("PCIe", spec.pcie_bandwidth_bytes_per_s, "per chip, host ↔ chip"))
        rows.append(("DCN", spec.dcn_bandwidth_bytes_per_s, "egress per chip"))
    else:
        rows.append(("NVLink", spec.nvlink_bandwidth_oneway_bytes_per_s, "per GPU, one way"))
        egress = spec.node_egress_bytes_per_s
        per_gpu = egress / spec.gpus_per_node if egress and spec.gpus_per_node else None
        rows.append(("node egress", per_gpu, "per GPU"))
    return rows
