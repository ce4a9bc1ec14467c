"""Chapter 12 — How to Think About GPUs, part 2: the collectives pop quizzes 1–3 and Quiz 4 (ids q13..q20).

Book ch. 12, "How Do Collectives Work on GPUs?": AllGather and AllToAll inside one 8×H100 node (T ≈ B/(W·N) per
GPU, (N − 1)/N for a ring), the sharded AllGather over a scalable unit (SU) of 32 nodes, the bytes in and out of
each level's switches, SHARP (in-network) AllReduce inside a node, across nodes and at the spine, and which level
of a 2-node AllGather bounds it. Every expected value is computed with `gpus` (`all_gather`, `all_to_all`,
`sharded_all_gather`, `su_all_gather_traffic`, `sharp_node_traffic`, `sharp_sharded_all_reduce`, the SuperPod)
and `hardware` (H100: 450 GB/s NVLink per GPU, 400 GB/s per node). Units: bytes, B/s, seconds. Registered after
`ch12` (Quizzes 1–3) and before `ch12_rooflines` (Quiz 5), in document order.

Choices where the book is loose (see PROBLEMS.md):
- q15b and q16c/q16f follow the book's own formulas as written (q15b without the (D − 1)/D factor that q15a
  keeps; q16c divides by a GPU's 450 GB/s); the formulas are compared to 1e-6.
"""

from __future__ import annotations

import math

from scalebook_utils.core.gpu import chips as gpus
from scalebook_utils.questions.ch12 import H100
from scalebook_utils.questions.registry import add

#: q13: the array AllGathered on one 8×H100 node (bf16)
Q13_B, Q13_F = 1024, 16_384
Q18_OPTIONS = ("yes", "no: the node switch must egress all B bytes, not B/Y")
Q20_OPTIONS = ("node (NVLink) level", "cross-node (IB) level")


def _su() -> gpus.Cluster:
    return gpus.superpod(H100, 1)


def q14(B, N, W, k=None):
    """AllToAll of B bytes over N GPUs of one node whose GPUs have W B/s each (k non-zero targets if ragged)."""
    return gpus.all_to_all(B, int(N), gpus.single_node(H100, nvlink_bandwidth=W), k=k).seconds


def q15a(D, F):
    """One SU, Y ≤ 8: the leaf level is the bottleneck, 2DF·31/(32·400e9)."""
    return gpus.sharded_all_gather(2 * D * F, 1, 256, _su())


def q15b(D, F, Y):
    """Y > 8: the book's 2DF/(Y·50 GB/s) (no (D − 1)/D factor)."""
    return gpus.sharded_all_gather(2 * D * F, int(Y), 256, _su(), exact=False)


def _q16(level: str, field: str):
    return lambda B, N=8, M=32: getattr(gpus.su_all_gather_traffic(B, M, N, H100)[level], field)


def _q17(field: str):
    return lambda B, N, W=450e9: getattr(gpus.sharp_node_traffic(B, N, W), field)


def q18a(D, F, Y, W):
    """SHARP AllReduce of bf16[D, F_Y]{U_X} inside one node whose GPUs have W B/s each."""
    return gpus.sharp_sharded_all_reduce(2 * D * F, int(Y), 8, gpus.single_node(H100, nvlink_bandwidth=W))[0]


def q18b() -> str:
    """Across nodes (2 nodes here), doubling Y inside the node (2 → 4) no longer halves the time: the scale-out
    term bytes/W_node · D_node/max(D_node, Y) does not depend on Y ≤ D_node."""
    small, big = (gpus.sharp_sharded_all_reduce(1.0, y, 16, H100)[0] for y in (2, 4))
    return Q18_OPTIONS[0] if math.isclose(big, small / 2) else Q18_OPTIONS[1]


def q19a() -> float:
    """Bandwidth of the spine-level SHARP AllReduce with Y = 256: bytes / T."""
    return 1.0 / gpus.sharp_sharded_all_reduce(1.0, 256, 1024, H100)[0]


def q20() -> dict[str, float]:
    return gpus.all_gather_bytes_per_level(1.0, H100, 16)


_BYTES = (1e3, 1e10)
_W = (1e10, 1e12)

# --- collectives pop quizzes ----------------------------------------------------------------------------

add(
    "ch12.q13",
    "number",
    "Pop Quiz 1: AllGather of bf16[B_X, F], B = 1024, F = 16,384 on an 8×H100 node",
    lambda: gpus.all_gather(2 * Q13_B * Q13_F, 8, H100).seconds,
    unit="s",
    note="33.6 MB · 7/(8 · 450 GB/s) = 65 µs.",
    ring=8,
)
add(
    "ch12.q14a",
    "formula",
    "Pop Quiz 2: AllToAll_{X→N}(bf16[B_X, N]) of B bytes over N GPUs with W B/s each",
    lambda: lambda B, N, W: q14(B, N, W),
    unit="s",
    variables=("B", "N", "W"),
    domains={"B": _BYTES, "N": (2.0, 8.0), "W": _W},
    note="B·(N − 1)/(W·N²) ≈ B/(W·N).",
)
add(
    "ch12.q14b",
    "formula",
    "Same when only 4 of the 8 entries of each row are non-padding (ragged)",
    lambda: lambda B, N, W: q14(B, N, W, k=N / 2),
    unit="s",
    variables=("B", "N", "W"),
    domains={"B": _BYTES, "N": (2.0, 8.0), "W": _W},
    note="min(k/N, 1)·B/(W·N) = B/(2·W·N) with half the targets non-zero (k = 4 of N = 8).",
)
add(
    "ch12.q15a",
    "formula",
    "Pop Quiz 3: one SU (256 GPUs), AllGather_X(bf16[D_X, F_Y]) with Y the inner axis: time "
    "for Y ≤ 8, as a function of D and F",
    lambda: q15a,
    unit="s",
    variables=("D", "F"),
)
add(
    "ch12.q15b",
    "formula",
    "Same for Y > 8, as a function of D, F and Y",
    lambda: q15b,
    unit="s",
    variables=("D", "F", "Y"),
    domains={"D": (128.0, 16384.0), "F": (128.0, 65536.0), "Y": (9.0, 128.0)},
    note="The book writes 2DF·256/(Y·12.8e12), i.e. without the (D − 1)/D = 31/32 of Y ≤ 8.",
)

# --- Quiz 4: collectives --------------------------------------------------------------------------------

_VB = {"B": _BYTES}
add(
    "ch12.q16a",
    "formula",
    "Quiz 4 Q1: one SU of M nodes × N GPUs, AllGather of B bytes: bytes into a node-level switch",
    lambda: _q16("node", "ingress_bytes"),
    unit="bytes",
    variables=("B",),
    domains=_VB,
)
add(
    "ch12.q16b",
    "formula",
    "Same: bytes out of a node-level switch",
    lambda: _q16("node", "egress_bytes"),
    unit="bytes",
    variables=("B", "N"),
    domains={"B": _BYTES, "N": (2.0, 72.0)},
)
add(
    "ch12.q16c",
    "formula",
    "Same: time at the node level (as written in the book)",
    lambda: _q16("node", "seconds"),
    unit="s",
    variables=("B",),
    domains=_VB,
    note="The book writes T = B·N/W_node = B/450e9, mixing node and GPU bandwidth.",
)
add(
    "ch12.q16d",
    "formula",
    "Same: bytes into the top (leaf) switch",
    lambda: _q16("leaf", "ingress_bytes"),
    unit="bytes",
    variables=("B",),
    domains=_VB,
)
add(
    "ch12.q16e",
    "formula",
    "Same: bytes out of the top switch",
    lambda: _q16("leaf", "egress_bytes"),
    unit="bytes",
    variables=("B", "M"),
    domains={"B": _BYTES, "M": (2.0, 32.0)},
)
add(
    "ch12.q16f",
    "formula",
    "Same: time at the top switch (400 GB/s per node)",
    lambda: _q16("leaf", "seconds"),
    unit="s",
    variables=("B", "M"),
    domains={"B": _BYTES, "M": (2.0, 32.0)},
)
add(
    "ch12.q17a",
    "formula",
    "Quiz 4 Q2: SHARP AllReduce of B bytes over N GPUs of one node: bytes into the switch",
    lambda: _q17("ingress_bytes"),
    unit="bytes",
    variables=("B", "N"),
    domains={"B": _BYTES, "N": (2.0, 72.0)},
)
add(
    "ch12.q17b",
    "formula",
    "Same: bytes out of the switch",
    lambda: _q17("egress_bytes"),
    unit="bytes",
    variables=("B", "N"),
    domains={"B": _BYTES, "N": (2.0, 72.0)},
)
add(
    "ch12.q17c",
    "formula",
    "Same: time, with W the per-GPU egress bandwidth",
    lambda: lambda B, W: gpus.sharp_node_traffic(B, 8, W).seconds,
    unit="s",
    variables=("B", "W"),
    domains={"B": _BYTES, "W": _W},
)
add(
    "ch12.q18a",
    "formula",
    "Quiz 4 Q3: bf16[D_X, F_Y] on one node: SHARP AllReduce(bf16[D, F_Y]{U_X}) time, W the per-GPU link bandwidth",
    lambda: q18a,
    unit="s",
    variables=("D", "F", "Y", "W"),
    domains={"D": (128.0, 16384.0), "F": (128.0, 65536.0), "Y": (1.0, 4.0), "W": _W},
    note="Y ≤ 4 at the test points: with Y = 8 on 8 GPUs the X axis has one member and there is nothing to reduce.",
)
add("ch12.q18b", "choice", "Same beyond one node: does the 1/Y saving carry over?", q18b, options=Q18_OPTIONS)
add(
    "ch12.q19a",
    "number",
    "Quiz 4 Q4: SHARP AllReduce of bf16[D, F_Y]{U_X} with Y = 256 (reduction at the spine): the AllReduce bandwidth",
    q19a,
    unit="B/s",
    accept=(6.208e12, 6.592e12),
    note="256 GPUs × 25 GB/s (Appendix B's per-GPU spine share) = 25.6 TB/s over 4 SUs. The book says '4 nodes'.",
)
add(
    "ch12.q19b",
    "formula",
    "Same: SHARP AllReduce time as a function of D and F",
    lambda: lambda D, F: gpus.sharp_sharded_all_reduce(2 * D * F, 256, 1024, H100)[0],
    unit="s",
    variables=("D", "F"),
)
add(
    "ch12.q20a",
    "number",
    "Quiz 4 Q5: AllGather over exactly 2 H100 nodes: effective node-level bandwidth 8·450e9/7",
    lambda: q20()["node"],
    unit="B/s",
    accept=(4.985e11, 5.295e11),
    ring=8,
)
add(
    "ch12.q20b",
    "number",
    "Same: effective cross-node bandwidth 2·400e9/(2 − 1)",
    lambda: q20()["leaf"],
    unit="B/s",
    accept=(7.76e11, 8.24e11),
)
add(
    "ch12.q20c",
    "choice",
    "Same: which level bounds it?",
    lambda: Q20_OPTIONS[0] if gpus.all_gather(1.0, 16, H100).bottleneck == "node" else Q20_OPTIONS[1],
    options=Q20_OPTIONS,
    note="Why DeepSeek V3's 2-way DP at the spine is cheap.",
)
