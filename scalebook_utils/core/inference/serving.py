"""Serving planner: feasible batches, latency, throughput and cost of one slice, and the latency–throughput
frontier over batch size and slice size (book ch. 7 "Theoretical estimates for LLM latency and throughput",
"Distributing Inference"; ch. 8 "Thinking about throughput" and "Visualizing the latency–throughput trade-off").

Every number comes from `inference.decode_step` (the book's roofline: KV loads + max(matmul FLOPs, weight
loads), ICI of model parallelism overlapped): decode is served with pure model parallelism over the whole
slice (weights and KV caches sharded N ways, the book's setting for ch. 8), every sequence has S tokens of
context and the batch B is the number of sequences decoded together. Throughput is B/step per chip; cost per
million tokens uses the chip's hourly price (ch. 8's cost table). A point is on the frontier when no other
point has both lower latency and more tokens/s per chip.

The planner keeps the book's conventions by default (`conventions="book"`: every parameter streamed and
multiplied, collectives overlapped), so its numbers are ch. 8's; `conventions="practice"` uses
`inference.decode_step`'s default instead (the input embedding as a gather; GPU collectives as NCCL runs them,
with latency and after the matmuls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.topology import make_slice, parse_shape, shape_text
from scalebook_utils.core.units import require_choices, require_int, require_number, require_positive

#: batch grid density of `batch_grid` (points per doubling) used by plans and frontiers
PER_OCTAVE = 4
#: bounds of `batch_grid`: the largest batch (2**40 sequences, beyond any pod's HBM) and points per doubling
MAX_BATCH, MAX_PER_OCTAVE = 2**40, 64


# --- slices -----------------------------------------------------------------------------------------------


def slice_shape(chip: str | ChipSpec, n_chips: int) -> tuple[int, ...]:
    """The book's slice shape for a power-of-two chip count: doublings dealt round-robin to the torus axes
    (v5e: 2x2, 4x2, 4x4, 4x8, 8x8, 8x16, 16x16 — named as the book names them, ch. 7–8; v5p: 4x4x4 ...).
    Other counts (12 → (12,)), or chips without a torus, are one axis: a label for the TP ring, not a claim
    that such a slice is sold (pass a shape such as "3x4" to `plan_serving` to choose the layout)."""
    require_number("n_chips", n_chips, minimum=1)
    c = get_chip(chip)
    dims = c.ici_torus_dims or 1
    n = int(n_chips)
    if n & (n - 1):
        return (n,)
    k = int(math.log2(n))
    shape = [1] * dims
    for i in range(k):
        shape[i % dims] *= 2
    if dims == 2 and k % 2 and k >= 5:  # the book writes 4x8 and 8x16 (but 4x2)
        shape.reverse()
    return tuple(s for s in shape if s > 1) or (1,)


def parse_slice(chip: str | ChipSpec, slice_) -> tuple[int, tuple[int, ...]]:
    """(n_chips, shape) from an int chip count (shape: `slice_shape`), "4x4" or a tuple; ValueError unless a TPU
    shape fits the chip's torus (`topology.make_slice`) and the slice fits one pod."""
    chip = get_chip(chip)
    if isinstance(slice_, (str, tuple, list)):
        shape = parse_shape(slice_)
        if chip.kind == "tpu":
            make_slice(chip, shape)  # raises unless the shape fits the chip's torus and pod
        n = math.prod(shape)
    else:
        require_number("slice (chips)", slice_, minimum=1)
        n = int(slice_)
        shape = slice_shape(chip, n)
    pod = chip.pod_chips
    if pod is not None and n > pod:
        raise ValueError(
            f"a {chip.name} slice has at most {pod} chips (one pod); got {n}. Serving across pods "
            "is data parallelism: plan one pod and multiply the throughput"
        )
    return n, shape


def pow2_slices(chip: str | ChipSpec, smallest: int = 1) -> list[int]:
    """Power-of-two chip counts from the first ≥ `smallest` up to a pod (TPU) or a node (GPU)."""
    c = get_chip(chip)
    top = c.pod_chips or c.gpus_per_node or 8
    first = 2 ** math.ceil(math.log2(max(smallest, 1)))
    return [2**k for k in range(int(math.log2(first)), int(math.log2(top)) + 1)]


def batch_grid(B_max: int, per_octave: int = PER_OCTAVE) -> list[int]:
    """Integer batches 1 … B_max spaced ≈ geometrically (per_octave points per doubling), B_max included.

    B_max: an integer from 1 to MAX_BATCH (2**40); per_octave: an integer from 1 to MAX_PER_OCTAVE (64)."""
    B_max = require_int("B_max", B_max, 1, MAX_BATCH)
    per_octave = require_int("per_octave", per_octave, 1, MAX_PER_OCTAVE)
    pts = {1, B_max}
    k = 0
    while True:
        b = round(2 ** (k / per_octave))
        if b > B_max:
            break
        pts.add(b)
        k += 1
    return sorted(pts)


# --- one configuration ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingPoint:
    """One (batch, slice) configuration. latency: seconds per generate step (= per token of each sequence)."""

    step: inf.DecodeStep
    price_per_hour_usd: float | None

    @property
    def B(self) -> float:
        return self.step.B

    @property
    def n_chips(self) -> int:
        return self.step.n_chips

    @property
    def latency(self) -> float:
        return self.step.step_time

    @property
    def tokens_per_s_per_chip(self) -> float:
        return self.step.tokens_per_s_per_chip

    @property
    def bottleneck(self) -> str:
        return self.step.bottleneck

    @property
    def cost_per_million_tokens(self) -> float | None:
        """US dollars per 1e6 generated tokens at this throughput (None when the chip has no price)."""
        if self.price_per_hour_usd is None:
            return None
        return inf.cost_per_million_tokens(
            self.tokens_per_s_per_chip, self.step.chip, price_per_hour_usd=self.price_per_hour_usd
        )

    def describe(self) -> str:
        cost = self.cost_per_million_tokens
        money = f", ${cost:.3g}/1M tokens" if cost is not None else ""
        return (
            f"B={self.B:g} on {self.n_chips} chips: {self.latency * 1e3:.3g} ms/step, "
            f"{self.tokens_per_s_per_chip:.4g} tokens/s/chip{money} ({self.bottleneck}-bound)"
        )


def _price(chip: ChipSpec, price_per_hour_usd: float | None) -> float | None:
    if price_per_hour_usd is None:
        return chip.price_per_hour_usd
    require_positive(price_per_hour_usd=price_per_hour_usd)
    return price_per_hour_usd


@dataclass(frozen=True)
class ServingPlan:
    """What one slice can do for one model, precision and context length S (book ch. 8)."""

    model: str
    chip: str
    precision: str
    S: float
    n_chips: int
    shape: tuple[int, ...]
    B_max: int
    B_crit: float
    points: tuple[ServingPoint, ...]
    #: `inference.Precision.label`: the name with its meaning, e.g. 'int8-weights (int8 weights + KV, bf16 math)'.
    precision_label: str = ""

    @property
    def batch_range(self) -> tuple[int, int]:
        """Feasible batches (sequences): 1 … the most S-token KV caches that fit beside the weights."""
        return 1, self.B_max

    @property
    def min_latency(self) -> ServingPoint:
        """B = 1: the lowest step time (the weight-loading floor P·w/(N·W_hbm) when memory-bound)."""
        return self.points[0]

    @property
    def max_throughput(self) -> ServingPoint:
        """The point with the most tokens/s per chip; on a flat plateau (compute- and KV-bound, throughput equal up
        to rounding) the one with the lowest latency."""
        return fastest_of_best(self.points)

    def best_under(self, max_latency: float) -> ServingPoint | None:
        """Highest-throughput point whose step time is ≤ max_latency seconds (None if even B = 1 is slower)."""
        return best_under(self.points, max_latency)

    def explain(self) -> str:
        lo, hi = self.min_latency, self.max_throughput
        shape = shape_text(self.shape)
        return "\n".join(
            [
                f"{self.model} in {self.precision_label or self.precision} on {self.chip} {shape} ({self.n_chips} chips), "
                f"{self.S:g}-token context:",
                f"  batches 1 … {self.B_max} fit in HBM; the weight matmuls turn compute-bound above "
                f"B_crit ≈ {self.B_crit:.0f} sequences per step",
                f"  lowest latency:   {lo.describe()}",
                f"  most throughput:  {hi.describe()}",
            ]
        )


def fastest_of_best(points) -> ServingPoint:
    """The point with the most tokens/s per chip; ties within a relative 1e-9 go to the lower latency."""
    top = max(p.tokens_per_s_per_chip for p in points)
    return min((p for p in points if p.tokens_per_s_per_chip >= top * (1 - 1e-9)), key=lambda p: p.latency)


def best_under(points, max_latency: float) -> ServingPoint | None:
    """`fastest_of_best` of the points whose step time is ≤ max_latency seconds (None when there is none)."""
    require_positive(max_latency=max_latency)
    ok = [p for p in points if p.latency <= max_latency]
    return fastest_of_best(ok) if ok else None


def plan_serving(
    model,
    chip="tpu-v5e",
    slice_=None,
    precision="bf16",
    S: float = 8192,
    *,
    max_context: float | None = None,
    batches=None,
    per_octave: int = PER_OCTAVE,
    price_per_hour_usd: float | None = None,
    conventions: str = "book",
) -> ServingPlan:
    """Plan decode serving of `model` on one slice (book ch. 8; `conventions` as in `inference.decode_step`,
    the book's by default).

    slice_: chips (int), a shape "4x4" / (4, 4), or None for the smallest power-of-two slice that holds the
    weights and one S-token KV cache. A shape is checked only against the pod (`topology.make_slice`): "3x5"
    is accepted as a what-if although no such v5e slice is sold. batches: the batch sizes to evaluate (default:
    `batch_grid` up to the largest that fits). The TP collectives span every slice axis longer than 1 (M_Y of
    ch. 5), each waiting |axis|/2 hops (ch. 7 Appendix C).
    Raises ValueError when the model does not fit, S exceeds max_context, or a batch is outside 1 … B_max.
    """
    c, m, p = get_chip(chip), inf.served_model(model), inf.get_precision(precision)
    conventions = inf.check_conventions(conventions)
    require_number("S (context)", S, minimum=1)
    if max_context is not None:
        require_positive(max_context=max_context)
        if S > max_context:
            raise ValueError(f"context S={S:g} is longer than the model's maximum context {max_context:g}")
    if slice_ is None:
        slice_ = inf.min_chips(m, c, p, B=1, S=S)
    n, shape = parse_slice(c, slice_)
    if inf.inference_memory(m, 1, S, p) > n * c.hbm_bytes:
        need = inf.min_chips(m, c, p, B=1, S=S)
        raise ValueError(
            f"{m.name} in {p.name} does not fit {n} × {c.name}: with one {S:g}-token sequence it needs "
            f"{inf.inference_memory(m, 1, S, p) / 1e9:.1f} GB, more than its "
            f"{n * c.hbm_bytes / 1e9:.0f} GB; use at least {need} chips or a smaller precision"
        )
    B_max = inf.max_batch(m, S, c, n, p)
    if batches is None:
        batches = batch_grid(B_max, per_octave)
    else:
        batches = sorted(
            set(require_choices("batches", batches, "batch sizes (sequences), or None for the default grid 1 … B_max"))
        )
        for b in batches:
            require_number("batch", b, minimum=1)
            if b > B_max:
                raise ValueError(
                    f"batch {b} does not fit: at most {B_max} sequences of {S:g} tokens fit on "
                    f"{n} × {c.name} in {p.name}"
                )
    price = _price(c, price_per_hour_usd)
    points = tuple(
        ServingPoint(inf.decode_step(m, b, S, c, n, p, shape=shape, conventions=conventions), price) for b in batches
    )
    return ServingPlan(
        model=m.name,
        chip=c.name,
        precision=p.name,
        S=S,
        n_chips=n,
        shape=shape,
        B_max=B_max,
        B_crit=inf.critical_batch(c, p),
        points=points,
        precision_label=p.label,
    )


# --- the frontier -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frontier:
    """All (batch, slice) points for a model/chip/precision/context and the Pareto-optimal ones (book ch. 7
    "latency vs cost" figure, ch. 8 "pareto" figure): `pareto` is sorted by latency, throughput rising."""

    model: str
    chip: str
    precision: str
    S: float
    plans: tuple[ServingPlan, ...]
    pareto: tuple[ServingPoint, ...]
    precision_label: str = ""  # `inference.Precision.label`

    @property
    def points(self) -> tuple[ServingPoint, ...]:
        return tuple(pt for plan in self.plans for pt in plan.points)

    def best_under(self, max_latency: float) -> ServingPoint | None:
        """Highest tokens/s per chip with step time ≤ max_latency over every batch and slice."""
        return best_under(self.points, max_latency)

    def smallest_under(self, max_latency: float) -> ServingPlan | None:
        """The slice with the fewest chips whose batch-1 step (`ServingPlan.min_latency`) takes ≤ max_latency
        seconds, or None (book ch. 8 worked problem 3: LLaMA 3-405B in int8 under 15 ms/token → 64 v5e chips)."""
        require_positive(max_latency=max_latency)
        ok = [p for p in self.plans if p.min_latency.latency <= max_latency]
        return min(ok, key=lambda p: p.n_chips) if ok else None

    def table(self) -> str:
        rows = [f"{'chips':>6} {'B':>6} {'ms/step':>9} {'tok/s/chip':>11} {'$/1M tok':>9}  bound"]
        for pt in self.pareto:
            cost = pt.cost_per_million_tokens
            rows.append(
                f"{pt.n_chips:>6} {pt.B:>6g} {pt.latency * 1e3:>9.3g} {pt.tokens_per_s_per_chip:>11.4g} "
                f"{'' if cost is None else format(cost, '.3g'):>9}  {pt.bottleneck}"
            )
        return "\n".join(rows)


def pareto_front(points) -> tuple[ServingPoint, ...]:
    """Points not dominated by another with lower-or-equal latency and higher-or-equal tokens/s/chip. Throughput
    within a relative 1e-9 counts as equal (a compute- or KV-bound plateau is flat up to rounding)."""
    best, out = -math.inf, []
    for pt in sorted(points, key=lambda p: (p.latency, -p.tokens_per_s_per_chip)):
        if pt.tokens_per_s_per_chip > best * (1 + 1e-9):
            out.append(pt)
            best = pt.tokens_per_s_per_chip
    return tuple(out)


def frontier(
    model,
    chip="tpu-v5e",
    precision="bf16",
    S: float = 8192,
    *,
    slices=None,
    per_octave: int = PER_OCTAVE,
    max_context: float | None = None,
    price_per_hour_usd: float | None = None,
    conventions: str = "book",
) -> Frontier:
    """The latency–throughput frontier over batch size and slice size (book ch. 7 §"Theoretical estimates";
    ch. 8 "Visualizing"): every slice in `slices` (default: powers of two from the smallest that fits one
    S-token sequence to a pod) × `batch_grid` of that slice's feasible batches. `conventions` as in
    `plan_serving` (the book's by default)."""
    c, m, p = get_chip(chip), inf.served_model(model), inf.get_precision(precision)
    require_number("S (context)", S, minimum=1)
    if slices is None:
        slices = pow2_slices(c, inf.min_chips(m, c, p, B=1, S=S, pow2=False))
        if not slices:
            raise ValueError(f"{m.name} in {p.name} does not fit in one {c.name} pod at S={S:g}")
    else:
        slices = require_choices(
            "slices",
            slices,
            "slices (chip counts or shapes such as '4x4'), or None for every "
            "power of two from the smallest that fits to a pod",
        )
    plans = tuple(
        plan_serving(
            m,
            c,
            s,
            p,
            S,
            max_context=max_context,
            per_octave=per_octave,
            price_per_hour_usd=price_per_hour_usd,
            conventions=conventions,
        )
        for s in slices
    )
    return Frontier(
        model=m.name,
        chip=c.name,
        precision=p.name,
        S=S,
        plans=plans,
        pareto=pareto_front(pt for plan in plans for pt in plan.points),
        precision_label=p.label,
    )


# --- the book's roofline generator (ch. 8 "Visualizing the latency–throughput trade-off") -----------------------


@dataclass(frozen=True)
class BookCurve:
    """Latency (s) and throughput (tokens/s/chip) vs batch, as ch. 8's numpy code computes them."""

    batches: tuple[int, ...]
    latency: tuple[float, ...]
    tokens_per_s_per_chip: tuple[float, ...]
    max_batch: int


def book_roofline_curve(
    S: float = 8192,
    n_chips: int = 16,
    params: float = 70e9,
    bytes_per_param: float = 1,
    kv_bytes_per_token: float = 2 * 128 * 8 * 80,
    chip="tpu-v5e",
    *,
    book_compat: bool = False,
) -> BookCurve:
    """Ch. 8's roofline generator: latency = KV/(N·W) + max(2·P·B/(N·C), P·w/(N·W)) for B = 1 … max batch.

    The book scans batches 1, 5, 9, … for the last that fits N chips of HBM and then uses that *index* as the
    count of a stride-1 range, so its curves stop ≈ 4× too early; `book_compat=True` reproduces that, the
    default uses the true largest batch. (The book also uses bytes as the parameter count in the FLOPs term,
    which is right only for 1 byte per parameter; here FLOPs use `params`.)"""
    require_positive(S=S, params=params, bytes_per_param=bytes_per_param, kv_bytes_per_token=kv_bytes_per_token)
    require_number("n_chips", n_chips, minimum=1)
    c = get_chip(chip)
    W, C = c.hbm_bandwidth_bytes_per_s, c.peak_flops("bf16")
    weights = params * bytes_per_param
    true_max = math.floor((n_chips * c.hbm_bytes - weights) / (S * kv_bytes_per_token))
    if true_max < 1:
        raise ValueError(f"{weights / 1e9:.0f} GB of weights and one {S:g}-token cache do not fit {n_chips} chips")
    # the book: the index of the last fit in the scan 1, 5, 9, ... (1023), used as a batch count
    B_max = max(len(range(1, min(true_max, 1023) + 1, 4)) - 1, 1) if book_compat else true_max
    batches = tuple(range(1, B_max + 1))
    lat = tuple(
        b * S * kv_bytes_per_token / (n_chips * W) + max(2 * params * b / (n_chips * C), weights / (n_chips * W))
        for b in batches
    )
    return BookCurve(batches, lat, tuple(b / (t * n_chips) for b, t in zip(batches, lat)), B_max)
