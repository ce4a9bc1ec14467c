"""Chapter 2 — TPUs: the questions of "How to Think About TPUs" (book ch. 2).

Accept ranges come from the book's problem list; where the book's answer rounds (16e9 bytes for a
16 GiB array, 1.23e12 B/s for v4p HBM) the range covers both the book's value and ours.
"""

from __future__ import annotations

import dataclasses

from scalebook_utils.core import roofline as rl
from scalebook_utils.core import topology as topo
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.units import dtype_bytes
from scalebook_utils.questions.registry import add

V5E = "tpu-v5e"

#: ch2.q4: VMEM ↔ MXU bandwidth is about 22 × HBM bandwidth (book ch. 2, "The chip").
VMEM_OVER_HBM = 22
#: ch2.pq1: the v5p VPU — 8 sublanes × 128 lanes × 4 ALUs, one fp32 op per ALU per cycle, 1.75 GHz.
V5P_VPU_ALUS, V5P_CLOCK_HZ = 8 * 128 * 4, 1.75e9
#: ch2.q6: A is int8[128·1024, 128·1024] (exactly 2^34 bytes), gathered onto TPU{0,0} of a v5e 4×4.
Q6_N = 128 * 1024


def _q1() -> float:
    """200e9 bf16 parameters read once from the HBM of 32 v4p chips (in parallel)."""
    chip = get_chip("tpu-v4p")
    return 200e9 * dtype_bytes("bf16") / (32 * chip.hbm_bandwidth_bytes_per_s)


def _q4_time(B: float) -> float:
    return rl.matmul_roofline(B, 4096, 16384, chip=V5E, mode="int8").t_lower_s


def _vmem_v5e():
    """A v5e whose 'HBM' is VMEM: the same chip with 22× the bandwidth (ch2.q4, part 2)."""
    v5e = get_chip(V5E)
    return dataclasses.replace(
        v5e, name="tpu-v5e (VMEM)", hbm_bandwidth_bytes_per_s=VMEM_OVER_HBM * v5e.hbm_bandwidth_bytes_per_s
    )


def _q5() -> topo.Transfer:
    s = topo.make_slice(V5E, (4, 4))
    return topo.p2p_time(s, (0, 0), (3, 3), 8 * 128 * 8192 * dtype_bytes("bf16"))


def _q6_steps() -> dict[str, float]:
    """The four stages of moving A to TPU{0,0} and multiplying (ch2.q6), each at its own bottleneck."""
    v5e = get_chip(V5E)
    a_bytes = Q6_N * Q6_N * dtype_bytes("int8")
    s = topo.make_slice(V5E, (4, 4))
    return {
        # every chip copies its 1/16 of A from host DRAM over its own PCIe link, all 16 at once
        # (the problem uses ch. 2's "typical" 1.6e10 B/s; the table gives no v5e PCIe figure)
        "pcie": topo.pcie_time(V5E, a_bytes, n_links=s.n_chips, bandwidth_bytes_per_s=topo.TYPICAL_PCIE_BYTES_PER_S),
        # TPU{0,0} receives the other 15/16 over its 2 links (a corner of a slice without wraparound)
        "ici": topo.p2p_time(s, (3, 3), (0, 0), a_bytes * 15 / 16).bandwidth_s,
        "hbm": a_bytes / v5e.hbm_bandwidth_bytes_per_s,
        "flops": rl.t_math(2 * 8 * Q6_N * Q6_N, v5e.peak_flops("bf16")),
    }


add(
    "ch2.q1",
    "number",
    "Time to read a 200B-param bf16 model from the HBM of 32 TPU v4p chips",
    _q1,
    unit="s",
    accept=(0.0097, 0.01042),
)
add("ch2.q2a", "number", "Full TPU v5e pod: hosts", lambda: topo.pod("tpu-v5e").n_hosts, unit="count")
add(
    "ch2.q2b",
    "number",
    "Full v5e pod: TensorCores",
    lambda: topo.pod("tpu-v5e").n_tensorcores,
    unit="count",
    accept=(256, 256),
)
add(
    "ch2.q2c",
    "number",
    "Full v5e pod: bf16 FLOPs/s",
    lambda: topo.pod("tpu-v5e").peak_flops("bf16"),
    unit="FLOPs/s",
    accept=(4.947e16, 5.253e16),
)
add(
    "ch2.q2d",
    "number",
    "Full v5e pod: HBM bytes",
    lambda: topo.pod("tpu-v5e").hbm_bytes,
    unit="bytes",
    accept=(3.88e12, 4.399e12),
)
add("ch2.q2e", "number", "Full TPU v5p pod: hosts", lambda: topo.pod("tpu-v5p").n_hosts, unit="count")
add(
    "ch2.q2f",
    "number",
    "Full v5p pod: TensorCores",
    lambda: topo.pod("tpu-v5p").n_tensorcores,
    unit="count",
    accept=(17920, 17920),
)
add(
    "ch2.q2g",
    "number",
    "Full v5p pod: bf16 FLOPs/s",
    lambda: topo.pod("tpu-v5p").peak_flops("bf16"),
    unit="FLOPs/s",
    accept=(3.977e18, 4.223e18),
)
add(
    "ch2.q2h",
    "number",
    "Full v5p pod: HBM bytes",
    lambda: topo.pod("tpu-v5p").hbm_bytes,
    unit="bytes",
    accept=(8.342e14, 8.858e14),
)
add(
    "ch2.q3",
    "number",
    "Smallest batch that stays compute-bound streaming weights over PCIe into a TPU v6e",
    lambda: rl.critical_intensity(get_chip("tpu-v6e").peak_flops("bf16"), topo.TYPICAL_PCIE_BYTES_PER_S),
    unit="tokens",
    note="F = 4D and B ≪ D: bytes ≈ 2DF, FLOPs 2BDF, so the intensity is B. The problem states "
    "the typical 1.6e10 B/s, not the v6e table's 3.2e10.",
)
add(
    "ch2.q4a",
    "formula",
    "int8[B,4096]·int8[4096,16384] on a v5e, weights from HBM: time as a function of B",
    lambda: _q4_time,
    unit="s",
    variables=("B",),
)
add(
    "ch2.q4b",
    "number",
    "Same: batch above which it is compute-bound (weights from HBM)",
    lambda: rl.crossover_batch(4096, 16384, V5E, "int8"),
    unit="tokens",
    accept=(258.9, 275.1),
)
add(
    "ch2.q4c",
    "number",
    "Same: batch above which it is compute-bound when run out of VMEM (22 × HBM bandwidth)",
    lambda: rl.crossover_batch(4096, 16384, _vmem_v5e(), "int8"),
    unit="tokens",
    accept=(10.67, 11.33),
)
add(
    "ch2.q5a",
    "number",
    "v5e 4x4, TPU{0,0} → TPU{3,3}: time until the first byte arrives",
    lambda: _q5().latency_s,
    unit="s",
    accept=(5.82e-6, 6.18e-6),
)
add(
    "ch2.q5b",
    "number",
    "Same: time for the whole bf16[8,128,8192] transfer",
    lambda: _q5().seconds,
    unit="s",
    accept=(0.0001864, 0.0001999),
)
add(
    "ch2.q6a",
    "number",
    "Q6: PCIe step (all of A from host DRAM over 16 PCIe links)",
    lambda: _q6_steps()["pcie"],
    unit="s",
    accept=(0.06111, 0.06711),
)
add(
    "ch2.q6b",
    "number",
    "Q6: ICI step (TPU{0,0} receives 15/16 of A over 2 links)",
    lambda: _q6_steps()["ici"],
    unit="s",
    accept=(0.1619, 0.179),
)
add(
    "ch2.q6c",
    "number",
    "Q6: HBM step (read all of A at 8.2e11 B/s)",
    lambda: _q6_steps()["hbm"],
    unit="s",
    accept=(0.019, 0.02096),
)
add(
    "ch2.q6d",
    "number",
    "Q6: FLOPs step (2·8·(128·1024)² FLOPs at 1.97e14 FLOPs/s)",
    lambda: _q6_steps()["flops"],
    unit="s",
    accept=(0.0013, 0.001442),
)
add(
    "ch2.q6e",
    "number",
    "Q6: overall time estimate (the stages overlap, so the slowest one bounds it)",
    lambda: max(_q6_steps().values()),
    unit="s",
    accept=(0.15, 0.206),
)
add(
    "ch2.pq1",
    "number",
    "TPU v5p VPU fp32 FLOPs/s per TensorCore",
    lambda: V5P_VPU_ALUS * V5P_CLOCK_HZ,
    unit="FLOPs/s",
    accept=(6.79e12, 7.21e12),
)
