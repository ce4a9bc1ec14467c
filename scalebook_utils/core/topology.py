"""Topology: TPU slices and pods, ICI hops with and without wraparound, transfer times (book ch. 2).

A *slice* is a set of TPU chips joined by ICI links in a 2D or 3D grid (book ch. 2, "TPU Networking").
Each chip links to its nearest neighbours; an axis whose two ends are joined by an extra link has
*wraparound* and forms a ring, which halves its longest path (n − 1 hops on a line, ⌊n/2⌋ on a ring).

Wraparound rules (our reading of ch. 2; the issue phrases it as "only on full axes"):

- 2D chips (v5e, v6e; v3 by the same logic): an axis wraps only when it spans the whole pod side —
  16 on v5e/v6e (an 8×16 v5e slice wraps on its 16-long axis only). The book gives the rule for
  v5e/v6e; for v3 (32×32 pod) we apply the same "full pod side" rule.
- 3D chips (v4p, v5p, TPU7x): pods are built of 4×4×4 cubes whose faces meet through optical
  switches that supply the wraparound links. A slice made of whole cubes — every axis a multiple of 4
  (4×4×4, 4×4×8, …) — wraps on every axis; anything smaller (2×2×1, 2×2×2, 2×2×4, 2×4×4) has none.
  This agrees with the issue's per-axis phrase ("multiples of 4") on every shape the book names; the
  two readings differ only on partial-cube shapes such as 2×4×4, for which the book promises no
  wraparound from cubes and we give none.

Point-to-point time (ch. 2, Question 5): hops × per-hop latency + bytes ÷ (ports × one-way link
bandwidth). Pure functions over frozen dataclasses, SI units; no jax, matplotlib or ipywidgets.

The grid geometry that knows no chip (`ring_hops`, `axis_distance`, `torus_route_args`, `torus_path`) is in
`torus`; it is re-exported here (`__all__`), so `topology.torus_path` works as before.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from scalebook_utils.core.hardware import VMEM_TO_HBM_RATIO, ChipSpec, chip_names, get_chip
from scalebook_utils.core.torus import axis_distance, ring_hops, torus_path, torus_route_args
from scalebook_utils.core.units import is_int, require_bytes

#: Side of the optical-switch cube that 3D-torus pods are built from (book ch. 2).
CUBE_SIDE = 4
#: VMEM ↔ MXU bandwidth is about 22 × HBM bandwidth (book ch. 2, "What Is a TPU?", on v5e).
VMEM_TO_HBM_BANDWIDTH_RATIO = float(VMEM_TO_HBM_RATIO)
#: The "typical" PCIe bandwidth per TPU of ch. 2's table; ch2.q6 applies it to a v5e (older text: 1.5e10).
TYPICAL_PCIE_BYTES_PER_S = 1.6e10


# --- validation helpers -----------------------------------------------------------------------------


def tpu_chip(chip: str | ChipSpec) -> ChipSpec:
    """Look up `chip` and insist it is a TPU with ICI numbers (GPUs have no torus; see ch. 12)."""
    spec = get_chip(chip)
    if spec.kind != "tpu" or spec.ici_torus_dims is None or spec.ici_link_bandwidth_oneway_bytes_per_s is None:
        raise ValueError(
            f"{spec.name} is not a TPU: ICI tori, slices and pods exist only for TPU chips "
            f"({', '.join(chip_names('tpu'))}); GPU networking is book ch. 12"
        )
    return spec


def parse_shape(shape) -> tuple[int, ...]:
    """A slice shape as a tuple of positive ints: "4x4" (or "4×4") → (4, 4), 8 → (8,), [4, 8] → (4, 8);
    ValueError saying the allowed forms otherwise."""
    if isinstance(shape, str):
        try:
            shape = tuple(int(p) for p in shape.lower().replace("×", "x").split("x"))
        except ValueError:
            raise ValueError(f"shape {shape!r} is not of the form '4x4' or '4x4x8'") from None
    elif is_int(shape):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(f"shape must be a tuple of positive integers such as (4, 4), got {shape!r}") from None
    if not shape or not all(is_int(s) and s >= 1 for s in shape):
        raise ValueError(f"shape must be a non-empty tuple of positive integers such as (4, 4), got {shape!r}")
    return tuple(int(s) for s in shape)


def shape_text(shape) -> str:
    """A slice's shape as the book writes it, the inverse of `parse_shape`: (4, 2) → '4x2', (8,) → '8'."""
    return "x".join(map(str, shape))


# --- slices -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """A TPU slice: `shape` chips of kind `chip` on an ICI grid, `wraparound[i]` per axis.

    Build one with `make_slice` (which checks the pod size and applies the book's wraparound rules)
    or `pod`; constructing `Slice` directly lets you explore a "what if" wraparound. `chip` is stored
    as its canonical scalebook name ("tpu-v5e").
    """

    chip: str
    shape: tuple[int, ...]
    wraparound: tuple[bool, ...]

    def __post_init__(self):
        spec = tpu_chip(self.chip)
        object.__setattr__(self, "chip", spec.name)
        shape = parse_shape(self.shape)
        object.__setattr__(self, "shape", shape)
        wrap = self.wraparound
        if isinstance(wrap, bool):
            wrap = (wrap,) * len(shape)
        wrap = tuple(wrap)
        if len(wrap) != len(shape) or not all(isinstance(w, (bool, numbers.Integral)) for w in wrap):
            raise ValueError(f"wraparound must be one bool per axis of shape {shape}, got {self.wraparound!r}")
        object.__setattr__(self, "wraparound", tuple(bool(w) for w in wrap))

    @property
    def spec(self) -> ChipSpec:
        return get_chip(self.chip)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def n_chips(self) -> int:
        return math.prod(self.shape)

    @property
    def chips_per_host(self) -> int:
        """Chips attached to one CPU host (ch. 2 spec table, "Host size": 4×2 = 8 on v5e, 2×2×1 = 4 on v5p)."""
        return math.prod(self.spec.host_shape)

    @property
    def n_hosts(self) -> int:
        """Hosts driving the slice: ⌈chips ÷ chips per host⌉ (a slice smaller than a host still needs one)."""
        return -(-self.n_chips // self.chips_per_host)

    @property
    def n_tensorcores(self) -> int:
        """TensorCores in the slice: chips × cores per chip (1 on v5e/v6e, 2 on v4p/v5p; ch. 2)."""
        return self.n_chips * self.spec.tensorcores_per_chip

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Total dense peak FLOPs/s of the slice in `dtype` (chips × per-chip peak)."""
        return self.n_chips * self.spec.peak_flops(dtype)

    @property
    def hbm_bytes(self) -> float:
        """Total HBM capacity in bytes (chips × per-chip HBM)."""
        return self.n_chips * self.spec.hbm_bytes

    @property
    def hbm_bandwidth_bytes_per_s(self) -> float:
        """Total HBM bandwidth in bytes/s (chips × per-chip HBM bandwidth)."""
        return self.n_chips * self.spec.hbm_bandwidth_bytes_per_s

    @property
    def name(self) -> str:
        """e.g. 'tpu-v5e 4x4'."""
        return f"{self.chip} {shape_text(self.shape)}"

    def coords(self) -> Iterator[tuple[int, ...]]:
        """Every chip coordinate, in row-major order."""
        return itertools.product(*(range(n) for n in self.shape))

    def check_coord(self, c, name: str = "coordinate") -> tuple[int, ...]:
        """Return `c` as a tuple, or raise ValueError if it is not a chip of this slice."""
        try:
            c = tuple(c)
        except TypeError:
            raise ValueError(f"{name} must be a tuple of {self.ndim} integers, got {c!r}") from None
        if len(c) != self.ndim or not all(is_int(x) for x in c):
            raise ValueError(f"{name} must be a tuple of {self.ndim} integers for slice {self.name}, got {c!r}")
        for x, n in zip(c, self.shape):
            if not 0 <= x < n:
                raise ValueError(
                    f"{name} {c} lies outside slice {self.name}: each entry i must satisfy "
                    f"0 ≤ c[i] < shape[i] = {self.shape}"
                )
        return tuple(int(x) for x in c)

    def links(self, c) -> int:
        """ICI links at chip `c`: 2 per wrapped axis, else one per neighbour that exists (axes of size 1 add none)."""
        c = self.check_coord(c)
        total = 0
        for x, n, w in zip(c, self.shape, self.wraparound):
            if n > 1:
                total += 2 if w else (x > 0) + (x < n - 1)
        return total

    def __str__(self) -> str:
        wraps = "".join("w" if w else "-" for w in self.wraparound)
        return f"Slice({self.name}, wraparound={wraps})"


def default_wraparound(chip: str | ChipSpec, shape: Sequence[int]) -> tuple[bool, ...]:
    """The book's wraparound rule for a slice of `shape` on `chip` (see the module docstring).

    2D chips: axis wraps iff it spans the pod side (16 on v5e/v6e). 3D chips: every axis wraps iff
    the slice is made of whole 4×4×4 cubes (every axis a multiple of 4), else none (book ch. 2).
    """
    spec = tpu_chip(chip)
    shape = parse_shape(shape)
    if spec.ici_torus_dims == 2:
        side = max(spec.pod_shape)
        return tuple(n == side for n in shape)
    whole_cubes = all(n % CUBE_SIDE == 0 for n in shape)
    return (whole_cubes,) * len(shape)


def make_slice(chip: str | ChipSpec, shape, wraparound: Sequence[bool] | bool | None = None) -> Slice:
    """A slice of `shape` chips on `chip`, checked against the pod, with the book's wraparound.

    `shape` may be a tuple or a string like "4x4". A shape with fewer axes than the chip's torus
    (2 for v3/v5e/v6e, 3 for v4p/v5p/TPU7x) is padded with 1s: (2, 2) on v5p is the 2×2×1 slice.
    The slice must fit in the pod in some orientation (sorted sizes ≤ sorted pod sides); we do not
    require the axes in the pod's order. That is the only check: any shape that fits is accepted, also one
    Google does not sell (a 3×5 v5e), so you can ask "what if"; the real topologies are the book's ch. 2 list. `wraparound=None` applies `default_wraparound`; pass bools to
    override ("what if this slice had wraparound?").
    """
    spec = tpu_chip(chip)
    shape = parse_shape(shape)
    dims = spec.ici_torus_dims
    if len(shape) > dims:
        raise ValueError(
            f"shape {shape} has {len(shape)} axes but {spec.name} is a {dims}D torus "
            f"(pod shape {spec.pod_shape}); give at most {dims} axes"
        )
    shape = shape + (1,) * (dims - len(shape))
    if any(s > p for s, p in zip(sorted(shape), sorted(spec.pod_shape))):
        raise ValueError(
            f"shape {shape} does not fit in a {spec.name} pod of shape {spec.pod_shape}: every "
            f"axis must be at most the matching pod axis (larger systems join slices over DCN)"
        )
    wrap = default_wraparound(spec, shape) if wraparound is None else wraparound
    return Slice(spec.name, shape, wrap)


def pod(chip: str | ChipSpec) -> Slice:
    """The full pod of `chip` (v5e/v6e 16×16, v4p 16×16×16, v5p 16×20×28, TPU7x 4×4×576; ch. 2)."""
    spec = tpu_chip(chip)
    return make_slice(spec, spec.pod_shape)


# --- hops (over a Slice; the chip-free ones are in `torus`) -----------------------------------------


def hop_distance(slice: Slice, a, b) -> int:
    """ICI hops from chip `a` to chip `b`: Σ over axes of |a_i − b_i|, min(d, n_i − d) where axis i wraps.

    Book ch. 2, "TPU Networking" (only nearest neighbours are linked; wraparound halves the longest path).
    """
    a = slice.check_coord(a, "a")
    b = slice.check_coord(b, "b")
    return sum(axis_distance(x, y, n, w) for x, y, n, w in zip(a, b, slice.shape, slice.wraparound))


def max_hops(slice: Slice) -> int:
    """Diameter of the slice in hops: Σ over axes of ⌊n/2⌋ (ring) or n − 1 (line)."""
    return sum(ring_hops(n, w) for n, w in zip(slice.shape, slice.wraparound))


# --- transfers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transfer:
    """The time of one ICI transfer: hops × per-hop latency + bytes ÷ (ports × one-way link bandwidth).

    `latency_s` is when the first byte arrives; `seconds` when the last one does (ch. 2, Question 5).
    """

    hops: int
    ports: int
    n_bytes: float
    latency_s: float
    bandwidth_s: float
    seconds: float
    note: str = ""


def p2p_time(slice: Slice, a, b, n_bytes: float, ports: int | None = None) -> Transfer:
    """Send `n_bytes` from chip `a` to chip `b` over ICI.

    latency_s = hops × ici_hop_latency_s (≈1 µs); bandwidth_s = n_bytes ÷ (ports × one-way link
    bandwidth); seconds = latency_s + bandwidth_s. `ports` defaults to the links usable at both ends,
    min(links(a), links(b)): the sender cannot push faster than its outgoing links, nor the receiver
    take in faster than its incoming ones (a corner of a 4×4 v5e slice has 2).

    Book ch. 2, Question 5: v5e 4×4, bf16[8,128,8192] from (0,0) to (3,3): 6 hops → first byte at
    6 µs; 2^24 B ÷ (2 × 4.5e10) = 186 µs, ≈192 µs in all (the book rounds to 188 + 6 = 194 µs).
    `a == b` moves nothing over ICI and costs 0 s.
    """
    spec = slice.spec
    n_bytes = require_bytes("n_bytes", n_bytes)
    hops = hop_distance(slice, a, b)
    if ports is None:
        ports = min(slice.links(a), slice.links(b))
    elif not is_int(ports) or ports < 1:
        raise ValueError(f"ports must be a positive integer (ICI links used in parallel), got {ports!r}")
    if hops == 0:
        return Transfer(0, ports, n_bytes, 0.0, 0.0, 0.0, note="same chip: nothing crosses ICI")
    latency = hops * spec.ici_hop_latency_s
    bandwidth = n_bytes / (ports * spec.ici_link_bandwidth_oneway_bytes_per_s)
    return Transfer(
        hops,
        ports,
        n_bytes,
        latency,
        bandwidth,
        latency + bandwidth,
        note=f"{hops} hops × {spec.ici_hop_latency_s:g} s + bytes over {ports} one-way links",
    )


def gather_to_chip(slice: Slice, at, n_bytes_total: float, ports: int | None = None) -> Transfer:
    """Copy an array of `n_bytes_total`, sharded evenly over the slice, onto chip `at`.

    The chip already holds 1/n of it, so (n − 1)/n of the bytes arrive over its `ports` incoming links
    (default: all its links); the first byte from the farthest chip arrives after max-distance hops.
    Book ch. 2, Question 6: TPU{0,0} of a v5e 4×4 takes 15/16 of A over 2 links at 4.5e10 B/s.
    """
    spec = slice.spec
    n_bytes_total = require_bytes("n_bytes_total", n_bytes_total)
    at = slice.check_coord(at, "at")
    if ports is None:
        ports = slice.links(at)
    elif not is_int(ports) or ports < 1:
        raise ValueError(f"ports must be a positive integer (ICI links used in parallel), got {ports!r}")
    n = slice.n_chips
    moved = n_bytes_total * (n - 1) / n
    if n == 1 or ports == 0:
        return Transfer(0, ports, 0.0, 0.0, 0.0, 0.0, note="single chip: nothing crosses ICI")
    hops = sum(max(x, nn - 1 - x) if not w else nn // 2 for x, nn, w in zip(at, slice.shape, slice.wraparound))
    latency = hops * spec.ici_hop_latency_s
    bandwidth = moved / (ports * spec.ici_link_bandwidth_oneway_bytes_per_s)
    return Transfer(
        hops,
        ports,
        moved,
        latency,
        bandwidth,
        latency + bandwidth,
        note=f"(n−1)/n of the bytes into {at} over {ports} one-way links",
    )


def _bandwidth(spec: ChipSpec, field: str, what: str, override: float | None, hint: str) -> float:
    if override is not None:
        ok = isinstance(override, numbers.Real) and not isinstance(override, bool) and override > 0
        if not ok or not math.isfinite(override):
            raise ValueError(f"bandwidth_bytes_per_s must be a positive number, got {override!r}")
        return float(override)
    value = getattr(spec, field)
    if value is None:
        raise ValueError(f"{spec.name} has no {what} bandwidth in the book's tables; pass bandwidth_bytes_per_s{hint}")
    return value


def pcie_time(
    chip: str | ChipSpec, n_bytes: float, n_links: int = 1, bandwidth_bytes_per_s: float | None = None
) -> float:
    """Seconds to move `n_bytes` between host DRAM and TPUs over `n_links` PCIe links in parallel.

    n_bytes ÷ (n_links × PCIe bandwidth per TPU). The chip's number comes from ch. 2's PCIe/DCN
    table; v5e has none there, and ch2.q6 uses the "typical" 1.6e10 (`TYPICAL_PCIE_BYTES_PER_S`).
    Book ch. 2, Question 6: 16 GiB over 16 links at 1.6e10 B/s → 67 ms (the book rounds A to 16e9 B: 63 ms).
    """
    spec = get_chip(chip)
    n_bytes = require_bytes("n_bytes", n_bytes)
    if not is_int(n_links) or n_links < 1:
        raise ValueError(f"n_links must be a positive integer (PCIe links used in parallel), got {n_links!r}")
    bw = _bandwidth(
        spec,
        "pcie_bandwidth_bytes_per_s",
        "PCIe",
        bandwidth_bytes_per_s,
        f" (ch. 2's 'typical' value is {TYPICAL_PCIE_BYTES_PER_S:g} B/s, as used in ch2.q6)",
    )
    return n_bytes / (n_links * bw)


def dcn_time(
    chip: str | ChipSpec, n_bytes: float, n_chips: int = 1, bandwidth_bytes_per_s: float | None = None
) -> float:
    """Seconds to send `n_bytes` over DCN when `n_chips` TPUs each use their egress share in parallel.

    n_bytes ÷ (n_chips × DCN egress per TPU). Book ch. 2, PCIe/DCN table (6.25e9 B/s typical, 3.125e9
    on v5e, 12.5e9 on v6e/TPU7x); the path is PCIe → host NIC → network → host → PCIe → HBM.
    """
    spec = get_chip(chip)
    n_bytes = require_bytes("n_bytes", n_bytes)
    if not is_int(n_chips) or n_chips < 1:
        raise ValueError(f"n_chips must be a positive integer (TPUs sending in parallel), got {n_chips!r}")
    bw = _bandwidth(spec, "dcn_bandwidth_bytes_per_s", "DCN", bandwidth_bytes_per_s, "")
    return n_bytes / (n_chips * bw)


def hbm_time(chip: str | ChipSpec, n_bytes: float, n_chips: int = 1) -> float:
    """Seconds to stream `n_bytes` from HBM into the cores of `n_chips` chips: n_bytes ÷ (n_chips × HBM BW).

    Book ch. 2, Question 6: all of A (2^34 B) through one v5e's HBM at 8.2e11 B/s → 21 ms (book: ≈20 ms).
    """
    spec = get_chip(chip)
    n_bytes = require_bytes("n_bytes", n_bytes)
    if not is_int(n_chips) or n_chips < 1:
        raise ValueError(f"n_chips must be a positive integer, got {n_chips!r}")
    return n_bytes / (n_chips * spec.hbm_bandwidth_bytes_per_s)


def bandwidth_hierarchy(chip: str | ChipSpec) -> dict[str, float | None]:
    """Per-chip bandwidths in bytes/s, fastest first: VMEM, HBM, ICI (one link, one way), PCIe, DCN.

    VMEM is estimated as 22 × HBM (ch. 2, stated for v5e). None where the book gives no number.
    Divide the chip's peak FLOPs/s by each to get the critical intensity of that channel (ch. 2,
    "Key takeaways": keep each channel's traffic proportional to its speed).
    """
    spec = tpu_chip(chip)
    return {
        "vmem": VMEM_TO_HBM_BANDWIDTH_RATIO * spec.hbm_bandwidth_bytes_per_s,
        "hbm": spec.hbm_bandwidth_bytes_per_s,
        "ici": spec.ici_link_bandwidth_oneway_bytes_per_s,
        "pcie": spec.pcie_bandwidth_bytes_per_s,
        "dcn": spec.dcn_bandwidth_bytes_per_s,
    }


__all__ = [
    "CUBE_SIDE",
    "VMEM_TO_HBM_BANDWIDTH_RATIO",
    "TYPICAL_PCIE_BYTES_PER_S",
    "Slice",
    "Transfer",
    "tpu_chip",
    "parse_shape",
    "shape_text",
    "default_wraparound",
    "make_slice",
    "pod",
    "ring_hops",
    "axis_distance",
    "hop_distance",
    "max_hops",
    "torus_route_args",
    "torus_path",
    "p2p_time",
    "gather_to_chip",
    "pcie_time",
    "dcn_time",
    "hbm_time",
    "bandwidth_hierarchy",
]
