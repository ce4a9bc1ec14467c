"""The book's TPU chips (book ch. 2, "How to Think About TPUs"), every number with its source.

One `ChipSpec` per generation — v3, v4p, v5p, v5e, v6e, TPU7x — in SI units: dense bf16 and int8 peaks
(FLOPs/s, OPs/s), HBM (bytes) and its bandwidth (bytes/s), the one-way bandwidth of one ICI link, the torus
(2D or 3D), pod and host shapes (chips), PCIe and DCN bandwidth per chip, ≈1 µs per ICI hop, TensorCores and
the MXU side, and the Cloud price (book ch. 8) where the book gives one.

Sources: ch. 2's "TPU specs" tables (chips, ICI, PCIe/DCN), with ch. 1 where it differs; `ChipSpec.notes`
records where versions of the book disagree and which number we keep. `hardware.CHIPS` collects `TPUS`.
"""

from __future__ import annotations

from scalebook_utils.core.chip_spec import ChipSpec

CH2_CHIPS = "book ch. 2, TPU specs table (chips)"
CH2_ICI = "book ch. 2, TPU specs table (ICI, one-way per link)"
CH2_PCIE = "book ch. 2, PCIe/DCN table (per TPU)"
CH2_TEXT = "book ch. 2, text ('How to Think About TPUs')"
CH8_PRICE = "book ch. 8, Cloud prices (Feb 2025)"


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


#: The book's TPUs, oldest first (ch. 2's table order); `hardware.CHIPS` lists them before the GPUs.
TPUS: tuple[ChipSpec, ...] = (
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
)
