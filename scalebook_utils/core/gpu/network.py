"""GPU networking: NVLink/NVSwitch nodes and InfiniBand fat trees (book ch. 12, "Networking").

The network the chapter's collectives run over, as closed-form arithmetic over `hardware.ChipSpec` (NVLink per
GPU, GPUs per node, node egress) and the chapter's networking tables: the NVLink generations (per-link
bandwidth, links per GPU, NVSwitches per node), one node's switch, GPU-side and bisection bandwidth, a DGX
SuperPod (or GB200 NVL72 cluster) as a fat tree of `NetworkLevel`s (node → leaf → spine) with its switch counts,
and the switches a full-bisection fat tree of any size needs. `gpu_chip` (a GPU by name) lives here because
every GPU function needs it and this is the bottom of the chapter's modules. `gpus` re-exports every public
name. SI units throughout: bytes, bytes/s, seconds. Symbols follow the chapter:

- W_gpu = one GPU's NVLink egress (one direction), W_node = one node's scale-out egress (8 × 400 Gb/s NICs =
  400 GB/s on DGX H100/B200), D_node = GPUs per NVLink domain;
- a fat tree has levels i = node, leaf, spine: each *unit* of level i joins D_i children; a child of the
  node level is one GPU, of the leaf level one node, of the spine level one scalable unit (SU).

Book ch. 12, "Networking" ("At the node level", "Beyond the node level", Quizzes 2 and 3) and Appendix B.
Bandwidth conventions (the chapter mixes them; see `NetworkLevel`): link and cable numbers are per direction;
"switch bandwidth" is the summary table's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scalebook_utils.core.errors import UnknownNameError
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import is_int

CH12_NET = "book ch. 12, 'Networking'"
CH12_APPB = "book ch. 12, Appendix B"


# --- GPUs by name -------------------------------------------------------------------------------------------


def gpu_chip(chip: str | ChipSpec) -> ChipSpec:
    """`hardware.get_chip` restricted to GPUs: a TPU or unknown name raises UnknownNameError listing the GPUs."""
    spec = get_chip(chip)
    if spec.kind != "gpu":
        from scalebook_utils.core.hardware import chip_names

        raise UnknownNameError(f"{spec.name} is not a GPU; GPUs: {', '.join(chip_names('gpu'))} (book ch. 12)")
    return spec


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
NVSWITCH_PORTS = 64  # NVLink ports per NVSwitch (book ch. 12, "At the node level")
IB_SWITCH_PORTS = 64  # NDR InfiniBand switch ports ("Beyond the node level")
IB_PORT_BYTES_PER_S = 50e9  # 400 Gb/s NDR per port and cable, per direction
NICS_PER_NODE = 8  # one 400 Gb/s ConnectX-7 NIC per GPU on a DGX H100 / B200
#: GPUs the chapter builds clusters of (Hopper and Blackwell: NVLink nodes with a known scale-out egress)
CLUSTER_CHIPS = ("h100", "h200", "b200", "gb200")


def nvlink_generation(chip: str | ChipSpec) -> NVLinkGeneration:
    """The NVLink generation of a GPU (by architecture); ValueError for Volta (not in the chapter's table)."""
    s = gpu_chip(chip)
    arch = s.generation.split()[0]
    if arch not in NVLINK:
        raise ValueError(
            f"book ch. 12's NVLink table has no row for {s.name} ({s.generation}); rows: {', '.join(NVLINK)}"
        )
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
            raise ValueError(
                f"{n_gpus} GPUs is more than {self.name} holds ({self.total_gpus}); "
                f"build a bigger one with superpod(chip, n_sus=...)"
            )
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
    (`nodes_per_su` 8 by default for it). Beyond the book, an AMD MI300X node is a switchless Infinity Fabric
    mesh (448 GB/s per GPU) under the same InfiniBand fat tree (8 × 400 Gb/s NICs per node).
    """
    s = gpu_chip(chip)
    if not is_int(n_sus) or n_sus < 1:
        raise ValueError(f"n_sus must be a positive integer (scalable units), got {n_sus!r}")
    if s.node_egress_bytes_per_s is None:
        raise ValueError(f"no node egress known for {s.name}; the chapter's clusters are H100, H200, B200, GB200")
    D = s.gpus_per_node
    if D > 8 and nodes_per_su == 32:
        nodes_per_su = 8
    W = s.nvlink_bandwidth_oneway_bytes_per_s
    if s.vendor == "amd":  # MI300X: a full mesh of Infinity Fabric links, no switch; capacity = the GPUs' egress
        node = NetworkLevel("node", D, 1, 0, "Infinity Fabric mesh", W, W, D * W)
    else:
        g = nvlink_generation(s)
        switches = g.nvswitches_per_node[-1 if D > 8 else 0]
        node = NetworkLevel("node", D, 1, switches, "NVSwitch", W, W, switches * NVSWITCH_PORTS * g.link_bytes_per_s)
    node_w = s.node_egress_bytes_per_s
    leaf_switches = math.ceil(D * nodes_per_su * IB_PORT_BYTES_PER_S * 2 / _ib_switch_bytes_per_s())
    leaf = NetworkLevel(
        "leaf",
        nodes_per_su,
        D,
        leaf_switches,
        "InfiniBand",
        node_w,
        node_w / D,
        leaf_switches * _ib_switch_bytes_per_s(),
    )
    levels = [node, leaf]
    if n_sus * leaf_switches > IB_SWITCH_PORTS:
        raise ValueError(
            f"{n_sus} SUs need {n_sus * leaf_switches} leaf switches, more than one "
            f"{IB_SWITCH_PORTS}-port spine switch can reach: a two-tier pod stops at {IB_SWITCH_PORTS // leaf_switches} SUs "
            f"(larger pods add a core tier: see fat_tree_switches)"
        )
    if n_sus > 1:
        su_w = nodes_per_su * node_w
        spine_switches = math.ceil(n_sus * su_w / _ib_switch_bytes_per_s())
        per_gpu = spine_switches * _ib_switch_bytes_per_s(per_direction=True) / (n_sus * leaf.gpus)
        levels.append(
            NetworkLevel(
                "spine",
                n_sus,
                leaf.gpus,
                spine_switches,
                "InfiniBand",
                su_w,
                min(per_gpu, node_w / D),
                spine_switches * _ib_switch_bytes_per_s(),
            )
        )
    return Cluster(f"{s.name} SuperPod ({n_sus} SU{'s' if n_sus > 1 else ''})", s.name, tuple(levels))


def single_node(chip: str | ChipSpec = "h100", nvlink_bandwidth: float | None = None) -> Cluster:
    """One NVLink node as a cluster of one level (8 GPUs; 72 for GB200 NVL72).

    `nvlink_bandwidth` (B/s, one way) replaces each GPU's NVLink egress W_gpu: the quizzes' node "whose GPUs
    have W B/s each" (ch12.q14, ch12.q18a)."""
    if nvlink_bandwidth is not None:
        chip = replace(gpu_chip(chip), nvlink_bandwidth_oneway_bytes_per_s=nvlink_bandwidth)
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
    while 2 * half**tiers < n_gpus:
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


__all__ = [
    "CH12_NET",
    "CH12_APPB",
    "gpu_chip",
    "NVLinkGeneration",
    "NVLINK",
    "NVSWITCH_PORTS",
    "IB_SWITCH_PORTS",
    "IB_PORT_BYTES_PER_S",
    "NICS_PER_NODE",
    "CLUSTER_CHIPS",
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
]
