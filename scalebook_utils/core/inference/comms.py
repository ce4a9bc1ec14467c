"""Tensor-parallel communication of one decode step or one prefill: which collectives, how many bytes, how long,
and whether they hide behind the matmuls (book ch. 7 "Distributing Inference Over Multiple Accelerators" and
Appendix C; ch. 12 "How Do Collectives Work on GPUs?"). `inference.decode_step` and `inference.prefill_time`
call `tp_comm`; it is public so a lesson can print the term on its own.

With 1D model parallelism over Y = n_chips (Megatron), every layer moves the [tokens, D] activation
(tokens = B in decode, B·T in prefill; a = bytes per activation element) twice: around attention and around
the MLP. Two conventions:

- "book": ch. 7's rule on every chip. Four collectives per layer (AllGather in, ReduceScatter out, twice), each
  max(T_hop·hops, a·tokens·D/(W·M_Y)) (Appendix C: the hop latency is a floor, not an addend), overlapped with
  the matmuls (step = max(matmuls + attention, comms), as ch. 7 compares T_ICI with T_HBM). W is a TPU axis's
  bidirectional ICI bandwidth, or a GPU's NVLink egress; a GPU group larger than one NVLink node moves at
  ch. 12's fat-tree rule bytes · max_i 1/W_link,i (`gpu_collectives.collective(..., exact=False)`): the node
  egress, 8× slower per GPU on a DGX H100.
- "practice" (default): TPUs as in the book (XLA's collective matmuls are what the book assumes; pass
  overlap=False for the serial bound). GPUs as NCCL-based servers run TP: two AllReduces per layer (after the
  attention output projection and after the MLP), each α + a·tokens·D·2(Y − 1)/(Y·W) with NCCL's own
  latency α (`gpu_collectives.nccl_latency`: 15 µs for 8 H100s) and, across nodes, ch. 12's fat-tree
  bandwidth; they are not overlapped (the next layer waits for the sum), so step = matmuls + attention + comms.

A GPU group that spans nodes is refused with a reason when the GPU has no node egress figure (V100, H100 PCIe)
or when it is larger than the two-tier SuperPod the chapter builds. SI units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core.errors import UnknownNameError
from scalebook_utils.core.gpu import collectives as gc
from scalebook_utils.core.gpu.network import max_sus, superpod
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import require_int, require_positive

#: the conventions `conventions=` accepts in the inference cost model
CONVENTIONS = ("practice", "book")

#: collectives per layer under 1D model parallelism: AllGather + ReduceScatter around attention and the MLP
#: (ch. 7: T_ICI = 2BD/W_ici per collective in bf16) — the book's count
BOOK_COLLECTIVES_PER_LAYER = 4
#: NCCL tensor parallelism: one AllReduce after attention's W_O and one after the MLP's W_out
GPU_ALL_REDUCES_PER_LAYER = 2


def check_conventions(conventions: str) -> str:
    """'practice' or 'book' (case-insensitive; 'practitioner' is an alias); UnknownNameError lists the names."""
    key = str(conventions).strip().lower()
    key = {"practitioner": "practice"}.get(key, key)
    if key not in CONVENTIONS:
        raise UnknownNameError(f"unknown conventions {conventions!r}; allowed: {', '.join(CONVENTIONS)}")
    return key


def axis_bandwidth(chip="tpu-v5e") -> float:
    """W of one model-parallel axis, bytes/s: a TPU's bidirectional ICI link (2 × one way, ch. 2; 9e10 on a v5e),
    else a GPU's NVLink egress (ch. 12). ValueError when the chip has neither (model parallelism needs one)."""
    c = get_chip(chip)
    if c.ici_link_bandwidth_bidi_bytes_per_s is not None:
        return c.ici_link_bandwidth_bidi_bytes_per_s
    if c.nvlink_bandwidth_oneway_bytes_per_s is not None:
        return c.nvlink_bandwidth_oneway_bytes_per_s
    raise ValueError(f"{c.name} has no ICI/NVLink bandwidth; model parallelism needs one")


@dataclass(frozen=True)
class TPComm:
    """The model-parallel collectives of one pass over all L layers.

    count: collectives in the pass; bytes_each: the activation each moves; bandwidth_s / latency_s: per
    collective; combine: "max" (ch. 7 Appendix C: the latency is a floor) or "sum" (NCCL's α + bytes/β);
    overlapped: True when the pass hides them behind the matmuls; network: what carries them. Seconds, bytes.
    """

    kind: str
    count: int
    bytes_each: float
    bandwidth_s: float
    latency_s: float
    combine: str
    overlapped: bool
    network: str

    @property
    def per_collective_s(self) -> float:
        """max(latency, bandwidth) or latency + bandwidth, per `combine`."""
        if self.combine == "max":
            return max(self.latency_s, self.bandwidth_s)
        return self.latency_s + self.bandwidth_s

    @property
    def seconds(self) -> float:
        """count · per_collective_s: the whole pass's communication time."""
        return self.count * self.per_collective_s

    @property
    def latency_total_s(self) -> float:
        """count · latency_s: the latency share (under "max" the floor the pass cannot go below)."""
        return self.count * self.latency_s


NO_COMM = TPComm("none", 0, 0.0, 0.0, 0.0, "max", True, "none")


def _gpu_nodes(c: ChipSpec, n: int) -> int:
    D = c.gpus_per_node or n
    return math.ceil(n / D)


def _gpu_cluster(c: ChipSpec, n: int):
    """The SuperPod a group of n GPUs spanning nodes runs in; ValueError with the reason when there is none."""
    D = c.gpus_per_node
    if c.node_egress_bytes_per_s is None:
        raise ValueError(
            f"{n} × {c.name} span {_gpu_nodes(c, n)} NVLink domains of {D} GPUs, and {c.name} has no "
            f"node egress figure: model parallelism across nodes cannot be costed; use n_chips ≤ {D}"
        )
    su = superpod(c, 1).total_gpus
    top = max_sus(c)
    if n > top * su:
        raise ValueError(
            f"{n} × {c.name} is more than the largest two-tier SuperPod the book builds "
            f"({top * su} GPUs); model parallelism that wide is not costed"
        )
    return superpod(c, min(top, math.ceil(n / su)))


def tp_comm(
    D: float,
    L: int,
    tokens: float,
    chip="tpu-v5e",
    n_chips: int = 1,
    activation_bytes: float = 2.0,
    *,
    conventions: str = "practice",
    ici_axes: int = 1,
    hops: float | None = None,
    overlap: bool | None = None,
) -> TPComm:
    """The TP collectives of one pass over `tokens` tokens on `n_chips`-way model parallelism (see the module).

    TPU, both conventions: 4·L × max(T_hop·hops, a·tokens·D/(W_ici·M_Y)), hops defaulting to the ring's
    ici_axes·n^(1/ici_axes)/2, overlapped. GPU, "book": the same count with W = NVLink egress (node egress
    across nodes), no latency, overlapped. GPU, "practice": 2·L × (α_NCCL + 2·a·tokens·D·(Y − 1)/(Y·W)),
    serial. `overlap` overrides whether the pass hides them (None: the convention's). One chip: no comms.
    Book ch. 7 "Distributing Inference", Appendix C; ch. 12 "How Do Collectives Work on GPUs?".
    """
    conv = check_conventions(conventions)
    require_positive(D=D, tokens=tokens, activation_bytes=activation_bytes)
    require_int("L", L)
    require_int("n_chips", n_chips)
    require_int("ici_axes", ici_axes)
    if overlap is not None and not isinstance(overlap, bool):
        raise ValueError(f"overlap must be True, False or None (the convention's), got {overlap!r}")
    c = get_chip(chip)
    if n_chips == 1:
        return NO_COMM
    nbytes = tokens * D * activation_bytes
    if c.kind != "gpu":
        W = c.ici_link_bandwidth_bidi_bytes_per_s
        if W is None:
            raise ValueError(f"{c.name} has no ICI bandwidth; model parallelism needs one")
        h = ici_axes * n_chips ** (1 / ici_axes) / 2 if hops is None else hops
        return TPComm(
            "all_gather+reduce_scatter",
            BOOK_COLLECTIVES_PER_LAYER * L,
            nbytes,
            nbytes / (W * ici_axes),
            (c.ici_hop_latency_s or 0.0) * h,
            "max",
            True if overlap is None else overlap,
            "ICI",
        )
    if c.nvlink_bandwidth_oneway_bytes_per_s is None:
        raise ValueError(f"{c.name} has no NVLink bandwidth; model parallelism needs one")
    nodes = _gpu_nodes(c, n_chips)
    W = c.nvlink_bandwidth_oneway_bytes_per_s
    network = "NVLink" if nodes == 1 else f"NVLink + InfiniBand ({nodes} nodes)"
    if conv == "book":
        if nodes == 1:
            bw = nbytes / (W * ici_axes)
        else:
            bw = gc.collective("all_gather", nbytes, n_chips, _gpu_cluster(c, n_chips), exact=False).seconds
        return TPComm(
            "all_gather+reduce_scatter",
            BOOK_COLLECTIVES_PER_LAYER * L,
            nbytes,
            bw,
            0.0,
            "max",
            True if overlap is None else overlap,
            network,
        )
    if nodes == 1:
        bw = 2 * nbytes * (n_chips - 1) / (n_chips * W)
    else:
        bw = gc.collective("all_reduce", nbytes, n_chips, _gpu_cluster(c, n_chips)).seconds
    lat = gc.nccl_latency("all_reduce", n_chips, c.gpus_per_node or n_chips)
    return TPComm(
        "all_reduce",
        GPU_ALL_REDUCES_PER_LAYER * L,
        nbytes,
        bw,
        lat,
        "sum",
        False if overlap is None else overlap,
        network,
    )
