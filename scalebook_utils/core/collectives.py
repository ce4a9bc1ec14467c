"""Collectives: what AllGather, ReduceScatter, AllReduce, AllToAll and ppermute cost on TPU ICI.

Book ch. 3, "A Deeper Dive into TPU Communication Primitives" (and its summary table). Symbols:
V = bytes of the array (for AllGather the gathered array; for ReduceScatter/AllReduce the unreduced
array each device holds; for AllToAll the whole array), X = devices along a mesh axis, W_ici = the
bidirectional bandwidth of one axis (2 × one-way link bandwidth), T_min = per-hop latency (≈1 µs).

The model, axis by axis (axes of size 1 take no part):

- ring (wraparound, both directions): ⌊X/2⌋ hops; bandwidth term V / W_ici, independent of X
  (the book drops the exact (X − 1)/X factor, and so do we: ch3.q2a's 23 µs needs it dropped);
- no wraparound, or one-way links only: a line/one-way ring, X − 1 hops, and every byte but our own
  crosses the last link one way: V·(X − 1)/X / W_one. This is the book's "unidirectional form" and
  reproduces its corrected pop-quiz answer (ch3.pq3a: 3 one-way hops of 8 MB ≈ 560 µs). It is never
  cheaper than the ring and is ≈2× it for large X, as ch. 2 warns.
- several axes at once: the links of every axis work in parallel, so bandwidths add,
  V / Σ_i W_i (= V / (N_axes · W_ici) when all wrap, ch. 3's multi-axis formula), and hops add,
  Σ_i hops_i (= Σ|X_i|/2 with wraparound).
- latency: T = max(T_min · hops, bandwidth term); `regime` says which term won ('latency' below
  ≈45 kB per shard on v5e). `latency=False` returns the bandwidth term alone.

AllReduce = ReduceScatter + AllGather = 2 × AllGather. AllToAll costs the most-loaded link's share of
shortest-path traffic: V·X/(4·N·W_ici) on rings (¼ of an AllGather for one axis, ch. 3 and ch3.q10),
twice that on a line, V·(X − 1)/(2·N·W_one) on a one-way ring.

Only TPU chips (ICI numbers) are accepted here; GPU collectives are book ch. 12. The axes must fit the
hardware (`check_fits`): at most the chip's torus dimensions of axes longer than 1 and at most one pod of
devices for a chip name, or one slice axis per mesh axis for a `topology.Slice`; anything larger raises.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from scalebook_utils.core.hardware import ChipSpec
from scalebook_utils.core.topology import CUBE_SIDE, Slice, default_wraparound, ring_hops, shape_text, tpu_chip
from scalebook_utils.core.units import is_int, require_bytes

#: Kind names `collective` accepts, canonical spelling.
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "ppermute")

#: Spellings people and compilers use, mapped to KINDS (HLO 'all-gather', JAX 'psum', book 'AllGather').
_KIND_ALIASES = {
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "allreduce": "all_reduce",
    "alltoall": "all_to_all",
    "ppermute": "ppermute",
    "collectivepermute": "ppermute",
    "psum": "all_reduce",
    "psumscatter": "reduce_scatter",
}


@dataclass(frozen=True)
class CollectiveCost:
    """The modelled cost of one collective.

    seconds: max(latency_s, bandwidth_s) (or bandwidth_s with latency=False); bytes_per_device: bytes
    each device sends over its ICI links, forwarding included; regime: 'bandwidth' or 'latency';
    axis_sizes / wraparound: the mesh axes taken part (after broadcasting); note: the formula used.
    """

    kind: str
    seconds: float
    bytes_per_device: float
    regime: str
    axis_sizes: tuple[int, ...]
    wraparound: tuple[bool, ...]
    note: str = ""
    bandwidth_s: float = 0.0
    latency_s: float = 0.0
    n_bytes: float = 0.0
    chip: str = ""
    bidirectional: bool = True


# --- argument handling ------------------------------------------------------------------------------


def _axes(axis_sizes, wraparound) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    sizes = (axis_sizes,) if is_int(axis_sizes) else axis_sizes
    try:
        sizes = tuple(sizes)
    except TypeError:
        raise ValueError(
            f"axis_sizes must be a positive integer or a tuple of them (one per mesh axis), got {axis_sizes!r}"
        ) from None
    if not sizes or not all(is_int(x) and x >= 1 for x in sizes):
        raise ValueError(
            f"axis_sizes must be a positive integer or a non-empty tuple of positive integers "
            f"(devices along each mesh axis gathered over), got {axis_sizes!r}"
        )
    if isinstance(wraparound, (bool, numbers.Integral)) or not hasattr(wraparound, "__iter__"):
        wraps = (bool(wraparound),) * len(sizes)
    else:
        try:
            wraps = tuple(bool(w) for w in wraparound)
        except TypeError:
            raise ValueError(f"wraparound must be a bool or one bool per axis, got {wraparound!r}") from None
        if len(wraps) != len(sizes):
            raise ValueError(
                f"wraparound has {len(wraps)} entries but axis_sizes {sizes} has {len(sizes)}; "
                "give one bool per axis or a single bool"
            )
    return tuple(int(x) for x in sizes), wraps


def _ici(chip) -> tuple[ChipSpec, float, float]:
    spec = tpu_chip(chip.chip if isinstance(chip, Slice) else chip)
    return spec, spec.ici_link_bandwidth_oneway_bytes_per_s, spec.ici_hop_latency_s


def check_fits(axis_sizes: tuple[int, ...], chip) -> None:
    """ValueError unless the collective's axes fit the hardware they run on (book ch. 2–3).

    On a chip name: at most as many axes longer than 1 as the chip's torus has (2 on v5e/v6e, 3 on
    v4p/v5p), and no more devices than one pod (256 on v5e): ICI ends at the pod, beyond it is DCN.
    On a `topology.Slice`: each axis longer than 1 must run along its own slice axis (sorted sizes ≤ sorted
    slice sides), as a mesh axis of 4 cannot be a ring on a 2×2 slice.
    """
    active = sorted((x for x in axis_sizes if x > 1), reverse=True)
    if isinstance(chip, Slice):
        sides = sorted((n for n in chip.shape if n > 1), reverse=True)
        if len(active) > len(sides) or any(x > n for x, n in zip(active, sides)):
            raise ValueError(
                f"axis_sizes {tuple(axis_sizes)} do not fit slice {chip.name}: each axis longer "
                f"than 1 must run along its own slice axis (sides {tuple(chip.shape)})"
            )
        return
    spec = tpu_chip(chip)
    dims = spec.ici_torus_dims
    if len(active) > dims:
        raise ValueError(
            f"axis_sizes {tuple(axis_sizes)} has {len(active)} axes longer than 1, but {spec.name} "
            f"is a {dims}D torus: a collective runs over at most {dims} ICI axes at once"
        )
    n, pod = math.prod(axis_sizes), spec.pod_chips
    if pod is not None and n > pod:
        raise ValueError(
            f"axis_sizes {tuple(axis_sizes)} span {n} devices, more than one {spec.name} pod "
            f"({pod} chips, {shape_text(spec.pod_shape)}); ICI ends at the pod (across "
            "pods is DCN, book ch. 2)"
        )


def axis_note(chip, axis_size: int, wraparound: bool) -> str:
    """'' when one mesh axis of `axis_size` chips with this `wraparound` occurs on `chip`; else why not (a clause).

    An axis longer than the pod's longest side does not exist on the chip ("no tpu-v5e axis has 64 chips (pod
    16×16)"); an axis whose wraparound no slice gives it by ch. 2's rule (`topology.default_wraparound`) is a
    "what if" (asked with wraparound: "a tpu-v5e axis of 4 has no wraparound by ch. 2's rule"). On a 2-D chip
    an axis wraps iff it spans the pod side; on a 3-D chip an axis that is a multiple of 4 wraps in a slice of
    whole 4×4×4 cubes and not in a thinner one (4×2×1), so either is real, and any other axis never wraps.
    The cost model prices every case; this says which axes are real. Book ch. 2, "TPU Networking"; ch. 3,
    "A Deeper Dive…".
    """
    spec = tpu_chip(chip)
    n, wrap = int(axis_size), bool(wraparound)
    if n > max(spec.pod_shape):
        return f"no {spec.name} axis has {n} chips (pod {'×'.join(map(str, spec.pod_shape))})"
    others = spec.ici_torus_dims - 1  # the slice's other sides: all 1 (a line), or whole cubes on a 3-D chip
    possible = {default_wraparound(spec, (n,) + (side,) * others)[0] for side in (1, CUBE_SIDE)}
    if wrap not in possible:
        return f"a {spec.name} axis of {n} {'has no' if wrap else 'has'} wraparound by ch. 2's rule"
    return ""


@dataclass(frozen=True)
class LinkAxes:
    """Mesh axes that occur on TPUs of one one-way ICI link bandwidth: `axes` are (size, wraps, where it occurs)."""

    link_bytes_per_s: float
    chips: tuple[str, ...]
    axes: tuple[tuple[int, bool, str], ...]


def axes_by_link_bandwidth(chips=("tpu-v5e", "tpu-v4p", "tpu-v6e", "tpu-v5p")) -> tuple[LinkAxes, ...]:
    """Axes of ch. 2's slices on `chips`, grouped by one-way ICI link bandwidth (the only chip number a collective's
    bandwidth term reads), each with the wraparound `topology.make_slice` gives it (book ch. 2, ch. 3).

    A 2-D chip gives its 4×4 slice's axis and its pod side; a 3-D chip the axis of a 4×4×4 cube, of a 16×16×16
    slice where one fits, and the pod's longest side where it is longer than 16 (v5p: 28). One size and
    wraparound on two chips is one axis ("v5e pod side; v4p 16×16×16"). Groups in the order of their first chip.
    """
    groups: dict[float, tuple[list[str], dict]] = {}
    for name in chips:
        spec = tpu_chip(name)
        g, side = spec.generation, max(spec.pod_shape)
        if spec.ici_torus_dims == 2:
            shapes = [((4, 4), f"{g} 4×4"), (spec.pod_shape, f"{g} pod side")]
        else:
            shapes = [((4, 4, 4), f"{g} 4×4×4 cube"), ((16, 16, 16), f"{g} 16×16×16")]
            shapes += [(spec.pod_shape, f"{g} pod's long axis")] if side > 16 else []
        names, rows = groups.setdefault(spec.ici_link_bandwidth_oneway_bytes_per_s, ([], {}))
        names.append(spec.name)
        for shape, where in shapes:
            if any(n > p for n, p in zip(sorted(shape), sorted(spec.pod_shape))):
                continue  # no such slice on this chip (TPU7x has no 16×16×16)
            n = max(shape)
            wrap = default_wraparound(spec, shape)[shape.index(n)]
            note = f": no wrap below {side}" if spec.ici_torus_dims == 2 and not wrap else ""
            rows.setdefault((n, wrap), []).append(where + note)
    return tuple(
        LinkAxes(bw, tuple(names), tuple((n, w, "; ".join(ws)) for (n, w), ws in sorted(rows.items())))
        for bw, (names, rows) in groups.items()
    )


def _finish(kind, bw, lat, bytes_per_device, sizes, wraps, latency, note, n_bytes, spec, bidirectional):
    seconds = max(bw, lat) if latency else bw
    regime = "latency" if latency and lat > bw else "bandwidth"
    return CollectiveCost(
        kind,
        seconds,
        bytes_per_device,
        regime,
        sizes,
        wraps,
        note,
        bw,
        lat if latency else 0.0,
        n_bytes,
        spec.name,
        bidirectional,
    )


def _ring_axis(x: int, wrap: bool, bidirectional: bool) -> bool:
    """True when the axis is used as a full bidirectional ring."""
    return wrap and bidirectional and x > 1


def _gather_terms(n_bytes, sizes, wraps, bidirectional, w_one, t_min) -> tuple[float, float]:
    """(bandwidth seconds, latency seconds) of one AllGather of n_bytes (the gathered array)."""
    active = [(x, w) for x, w in zip(sizes, wraps) if x > 1]
    if not active:
        return 0.0, 0.0
    w_total = sum(2 * w_one if _ring_axis(x, w, bidirectional) else w_one * x / (x - 1) for x, w in active)
    hops = sum(ring_hops(x, _ring_axis(x, w, bidirectional)) for x, w in active)
    return n_bytes / w_total, hops * t_min


# --- the collectives --------------------------------------------------------------------------------


def all_gather(
    n_bytes: float, axis_sizes, chip, wraparound=True, bidirectional: bool = True, latency: bool = True
) -> CollectiveCost:
    """AllGather_{axes}: every device ends with the whole array of `n_bytes` (the gathered size).

    Bandwidth term V / Σ_i W_i with W_i = 2·W_one on a ring axis, W_one·X_i/(X_i − 1) without
    wraparound or with one-way links; latency term T_min·Σ_i hops_i (⌊X_i/2⌋ or X_i − 1);
    seconds = max of the two. Book ch. 3, "A Deeper Dive…": T = max[T_min·Σ|X_i|/2, V/(W_ici·N_axes)].

    ch3.q2a (v4p, X=4, V = 2·1024·4096/4 B): 2.1e6 / 9e10 ≈ 23 µs. ch3.pq3a (v5e, axis of 4 without
    wraparound, V = 33.5 MB): 33.5e6·3/4 / 4.5e10 ≈ 560 µs.
    """
    spec, w_one, t_min = _ici(chip)
    n_bytes = require_bytes("n_bytes", n_bytes)
    sizes, wraps = _axes(axis_sizes, wraparound)
    check_fits(sizes, chip)
    bw, lat = _gather_terms(n_bytes, sizes, wraps, bidirectional, w_one, t_min)
    n = math.prod(sizes)
    return _finish(
        "all_gather",
        bw,
        lat,
        n_bytes * (n - 1) / n,
        sizes,
        wraps,
        latency,
        "max(T_min·Σ hops, V / Σ W_axis)",
        n_bytes,
        spec,
        bidirectional,
    )


def reduce_scatter(
    n_bytes: float, axis_sizes, chip, wraparound=True, bidirectional: bool = True, latency: bool = True
) -> CollectiveCost:
    """ReduceScatter_{axes}: sum the unreduced array of `n_bytes` held by every device, leave each a shard.

    The transpose of AllGather, with the same cost (plus the adds, ignored): book ch. 3, "More about
    the ReduceScatter". `n_bytes` is the full unreduced array on one device.
    """
    c = all_gather(n_bytes, axis_sizes, chip, wraparound, bidirectional, latency)
    return CollectiveCost(
        "reduce_scatter",
        c.seconds,
        c.bytes_per_device,
        c.regime,
        c.axis_sizes,
        c.wraparound,
        "same as AllGather: max(T_min·Σ hops, V / Σ W_axis)",
        c.bandwidth_s,
        c.latency_s,
        c.n_bytes,
        c.chip,
        c.bidirectional,
    )


def all_reduce(
    n_bytes: float, axis_sizes, chip, wraparound=True, bidirectional: bool = True, latency: bool = True
) -> CollectiveCost:
    """AllReduce_{axes} of an unreduced array of `n_bytes` per device = ReduceScatter + AllGather.

    Twice the AllGather cost, 2·V/W_ici on a ring (book ch. 3 summary table). ch3.q2c (v4p, Z=4,
    V = 2·1024·4096/16 B): 2 · 5.2e5 / 9e10 ≈ 11.7 µs.
    """
    c = all_gather(n_bytes, axis_sizes, chip, wraparound, bidirectional, latency)
    return CollectiveCost(
        "all_reduce",
        2 * c.seconds,
        2 * c.bytes_per_device,
        c.regime,
        c.axis_sizes,
        c.wraparound,
        "ReduceScatter + AllGather = 2 × AllGather",
        2 * c.bandwidth_s,
        2 * c.latency_s,
        c.n_bytes,
        c.chip,
        c.bidirectional,
    )


def _all_to_all_axis(n_bytes, x, n, wrap, bidirectional) -> tuple[float, float]:
    """(bytes on the busiest one-way link, Σ over destinations of hops along this axis ÷ X)."""
    if not bidirectional:  # one-way ring: chunk to distance k travels k hops
        return n_bytes * (x - 1) / (2 * n), (x - 1) / 2
    if wrap:  # bidirectional ring: shortest way round, balanced
        return n_bytes * (x * x // 4) / (2 * x * n), (x * x // 4) / x
    return n_bytes * (x * x // 4) / (x * n), (x * x - 1) / (3 * x)  # line: the middle link is the bottleneck


def all_to_all(
    n_bytes: float, axis_sizes, chip, wraparound=True, bidirectional: bool = True, latency: bool = True
) -> CollectiveCost:
    """AllToAll_{axes} of an array of `n_bytes` in total (summed over devices): move a subscript.

    Each device sends 1/N of its shard to every other device by the shortest path. Time = bytes on
    the busiest link ÷ W_one: V·X/(4·N·W_ici) on a ring axis of even size X (book ch. 3:
    T = V·max(A, B, …)/(4·N·W_ici), ¼ of an AllGather on one bidirectional ring, ch3.q10), twice
    that without wraparound, V·(X − 1)/(2·N·W_one) on a one-way ring. Axes run in parallel: the
    slowest axis decides. Latency term as AllGather's (the farthest pair is Σ hops apart).
    """
    spec, w_one, t_min = _ici(chip)
    n_bytes = require_bytes("n_bytes", n_bytes)
    sizes, wraps = _axes(axis_sizes, wraparound)
    check_fits(sizes, chip)
    n = math.prod(sizes)
    active = [(x, w) for x, w in zip(sizes, wraps) if x > 1]
    loads, mean_hops = [0.0], 0.0
    for x, w in active:
        load, h = _all_to_all_axis(n_bytes, x, n, w, bidirectional)
        loads.append(load)
        mean_hops += h
    bw = max(loads) / w_one
    lat = sum(ring_hops(x, _ring_axis(x, w, bidirectional)) for x, w in active) * t_min
    return _finish(
        "all_to_all",
        bw,
        lat,
        n_bytes / n * mean_hops,
        sizes,
        wraps,
        latency,
        "busiest link: V·X/(4·N·W_ici) per ring axis (×2 without wraparound)",
        n_bytes,
        spec,
        bidirectional,
    )


def ppermute(n_bytes_per_device: float, chip, hops: int = 1, latency: bool = True) -> CollectiveCost:
    """Every device sends `n_bytes_per_device` to the device `hops` steps along an axis (a shift).

    All devices shift at once, so each link in that direction carries `hops` messages: bandwidth term
    hops · n / W_one, latency term hops · T_min, and per hop max(T_min, n/W_one) as in ch. 3's ring
    model (a bidirectional AllGather is ⌊X/2⌋ such steps of V/X each way). Book ch. 3 (collective
    matmul) and ch. 10 (`jax.lax.ppermute`).
    """
    spec, w_one, t_min = _ici(chip)
    n = require_bytes("n_bytes_per_device", n_bytes_per_device)
    if not is_int(hops) or hops < 0:
        raise ValueError(f"hops must be a non-negative integer (ICI steps between sender and receiver), got {hops!r}")
    return _finish(
        "ppermute",
        hops * n / w_one,
        hops * t_min,
        hops * n,
        (),
        (),
        latency,
        "hops × max(T_min, n / W_one)",
        n,
        spec,
        False,
    )


def normalize_kind(kind: str) -> str:
    """'AllGather', 'all-gather', 'psum' … → one of KINDS, or ValueError listing them."""
    key = str(kind).lower().replace("-", "").replace("_", "").replace(" ", "")
    if key not in _KIND_ALIASES:
        raise ValueError(
            f"unknown collective {kind!r}; known kinds: {', '.join(KINDS)} "
            "(also accepted: HLO names like 'all-gather', JAX 'psum', 'psum_scatter')"
        )
    return _KIND_ALIASES[key]


def collective(kind: str, n_bytes: float, axis_sizes=None, chip="tpu-v5e", **kw) -> CollectiveCost:
    """Cost of the collective named `kind` (see KINDS); keyword arguments go to that function.

    For 'ppermute', `n_bytes` is the bytes each device sends and `axis_sizes` is ignored (pass `hops=`).
    """
    k = normalize_kind(kind)
    if k == "ppermute":
        return ppermute(n_bytes, chip, **kw)
    if axis_sizes is None:
        raise ValueError(f"axis_sizes is required for {k}: the sizes of the mesh axes it runs over")
    return {
        "all_gather": all_gather,
        "reduce_scatter": reduce_scatter,
        "all_reduce": all_reduce,
        "all_to_all": all_to_all,
    }[k](n_bytes, axis_sizes, chip, **kw)


# --- ring counting (ch3.q10) ------------------------------------------------------------------------


def ring_scalars_per_link(kind: str, N: float, D: float, bidirectional: bool = False) -> float:
    """Scalars crossing each one-way link of a D-device ring for `kind` on an N×N array A[I_X, J].

    Book ch. 3, Question 10 (exact counts; `D = math.inf` gives the book's large-D limits):
    - AllGather / ReduceScatter: every shard of N²/D passes D − 1 links → N²(1 − 1/D) per link on a
      one-way ring; half of that per directed link when both directions are used.
    - AllToAll: the chunk of N²/D² for the device k steps away travels k hops → N²(D − 1)/(2D) on a
      one-way ring; going the short way round, Σ_k min(k, D − k) = ⌊D²/4⌋ → N²⌊D²/4⌋/(2D²) ≈ N²/8.
    - AllReduce: twice AllGather.
    """
    k = normalize_kind(kind)
    for name, v in (("N", N), ("D", D)):
        if not isinstance(v, numbers.Real) or isinstance(v, bool) or not v > 0 or math.isnan(v):
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    if math.isinf(N):
        raise ValueError("N must be finite")
    if k == "ppermute":
        raise ValueError("ring_scalars_per_link counts all_gather, reduce_scatter, all_reduce and all_to_all")
    if k in ("all_gather", "reduce_scatter", "all_reduce"):
        per = N * N * (1 - 1 / D) / (2 if bidirectional else 1)
        return 2 * per if k == "all_reduce" else per
    if not bidirectional:
        return N * N / 2 * (1 - 1 / D)
    if math.isinf(D):
        return N * N / 8
    return N * N * math.floor(D * D / 4) / (2 * D * D)


def knee_bytes(kind: str, chip: ChipSpec | str, axis_sizes, wraparound=True) -> float:
    """Bytes where the latency and bandwidth terms of a collective's cost are equal (the regime boundary).

    Both terms are linear in bytes / constant, so knee = n · latency_s / bandwidth_s at any n.
    For 'ppermute' `axis_sizes` is ignored (one hop). Book ch. 3, "A Deeper Dive…" (latency-bound regime).
    """
    kw = {"hops": 1} if normalize_kind(kind) == "ppermute" else {"wraparound": wraparound}
    c = collective(kind, 1e9, axis_sizes, chip, **kw)
    return 1e9 * c.latency_s / c.bandwidth_s if c.bandwidth_s > 0 else math.inf


__all__ = [
    "KINDS",
    "knee_bytes",
    "CollectiveCost",
    "check_fits",
    "axis_note",
    "LinkAxes",
    "axes_by_link_bandwidth",
    "all_gather",
    "reduce_scatter",
    "all_reduce",
    "all_to_all",
    "ppermute",
    "collective",
    "normalize_kind",
    "ring_scalars_per_link",
]
