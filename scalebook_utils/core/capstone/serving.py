"""The serving half of a capstone plan (book ch. 11 over ch. 7–8): the smallest slice that holds the weights and one
context (`serving.plan_serving`), its batch range and most-throughput point, and the best point under a latency cap
over every batch and slice (`serving.frontier`), with the reasons (memory, batch, latency, money).
`plan_serving_side(model, chip, budget)` returns a `ServingSide`. Pure Python.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.capstone.budget import Budget
from scalebook_utils.core.capstone.text import chips_text, ms_text, slice_text, tokens_per_s_text, usd_text
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.inference import costs as inf
from scalebook_utils.core.inference import serving as sv
from scalebook_utils.core.units import format_bytes, format_count

__all__ = ["ServingSide", "plan_serving_side", "clear_cache"]

_BOUND_WORDS = {
    "weights": "weight loads from HBM",
    "kv": "KV-cache loads from HBM",
    "compute": "matmul FLOPs",
    "ici": "the model-parallel collectives",
}


@functools.lru_cache(maxsize=64)
def _serving(m: inf.ServedModel, chip: str, precision: str, S: float):
    """(plan on the smallest slice, frontier), cached for app redraws."""
    return sv.plan_serving(m, chip, None, precision, S), sv.frontier(m, chip, precision, S)


def clear_cache() -> None:
    """Forget the cached serving plans and frontiers (`capstone.clear_caches`)."""
    _serving.cache_clear()


def _point(pt: sv.ServingPoint, plan_shapes: dict[int, tuple[int, ...]]) -> str:
    where = slice_text(pt.n_chips, plan_shapes.get(pt.n_chips), get_chip(pt.step.chip).kind == "gpu")
    return (
        f"B={pt.B:g} on {where}: {ms_text(pt.latency)}/step, "
        f"{tokens_per_s_text(pt.tokens_per_s_per_chip)} tokens/s/chip"
    )


@dataclass(frozen=True)
class ServingSide:
    """The serving half of a `ModelPlan`: the smallest slice that holds the weights and one context, its batch
    range and best throughput, and the frontier's best point under the latency cap. Seconds, bytes, US dollars."""

    model: str
    chip: str
    precision: str
    S: float
    max_latency: float
    feasible: bool
    reason: str
    weight_bytes: float
    hbm_per_chip: float
    n_chips: int | None
    shape: tuple[int, ...] | None
    B_max: int | None
    B_crit: float
    max_throughput: sv.ServingPoint | None  # on the smallest slice
    best: sv.ServingPoint | None  # over every batch and slice, step ≤ max_latency
    fastest: sv.ServingPoint | None  # the lowest step time anywhere
    reasons: tuple[str, ...]
    frontier: sv.Frontier | None = field(default=None, repr=False, compare=False)
    plan: sv.ServingPlan | None = field(default=None, repr=False, compare=False)
    served: inf.ServedModel | None = field(default=None, repr=False, compare=False)

    @property
    def meets_latency(self) -> bool:
        return self.best is not None

    def at_batch(self, B: int) -> sv.ServingPoint:
        """The smallest slice's point at batch B (ch8.iq3: B = 32 on v5e 4x2 ≈ 17 ms/step, ≈ 235 tokens/s/chip).
        Raises ValueError when nothing is served or B is outside 1 … B_max."""
        if not self.feasible:
            raise ValueError(f"nothing to evaluate: {self.reason}")
        return sv.plan_serving(self.served, self.chip, self.n_chips, self.precision, self.S, batches=[B]).points[0]

    def precision_text(self) -> str:
        """The precision with its meaning: 'int8 (int8 weights + KV, int8 math)' (`inference.Precision.label`)."""
        try:
            return inf.precision_label(self.precision)
        except ValueError:  # an unknown name (UnknownNameError) is reported by `reason`
            return str(self.precision)

    def _shapes(self) -> dict[int, tuple[int, ...]]:
        return {} if self.frontier is None else {p.n_chips: p.shape for p in self.frontier.plans}

    def headline(self) -> str:
        if not self.feasible:
            return f"serve {self.chip} {self.precision_text()}: cannot serve — {self.reason}"
        cap = ms_text(self.max_latency)
        gpu = get_chip(self.chip).kind == "gpu"
        tail = (
            f"best ≤ {cap}: B={self.best.B:g} on {chips_text(self.best.n_chips, gpu)}, "
            f"{tokens_per_s_text(self.best.tokens_per_s_per_chip)} tokens/s/chip"
            if self.best
            else f"nothing ≤ {cap} (fastest {ms_text(self.fastest.latency)})"
        )
        return f"serve {self.chip} {self.precision_text()}: {slice_text(self.n_chips, self.shape, gpu)}, B≤{self.B_max}, {tail}"

    def lines(self) -> list[str]:
        head = f"{self.chip}, {self.precision_text()}, {self.S:g}-token context, latency cap {ms_text(self.max_latency)}/step"
        if not self.feasible:
            return [head, f"cannot serve: {self.reason}"]
        sh = self._shapes()
        top = self.max_throughput
        out = [
            head,
            f"smallest slice: {slice_text(self.n_chips, self.shape, get_chip(self.chip).kind == 'gpu')}, "
            f"batches 1 … {self.B_max}",
            f"its best throughput: {_point(top, sh)}" + _cost(top),
        ]
        if self.best is not None:
            out.append(f"best under {ms_text(self.max_latency)}: {_point(self.best, sh)}" + _cost(self.best))
        else:
            out.append(f"no configuration meets {ms_text(self.max_latency)}; the fastest is {_point(self.fastest, sh)}")
        return out


def _cost(pt: sv.ServingPoint) -> str:
    c = pt.cost_per_million_tokens
    return "" if c is None else f", {usd_text(c)}/1M tokens"


def _serving_reasons(
    m: inf.ServedModel,
    spec: ChipSpec,
    prec: inf.Precision,
    S: float,
    budget: Budget,
    plan: sv.ServingPlan,
    f: sv.Frontier,
    best,
    fastest,
) -> list[str]:
    w = m.weight_bytes(prec)
    kv = inf.kv_cache_bytes(m, 1, S, prec)
    sh = {p.n_chips: p.shape for p in f.plans}
    out = [
        f"Memory: {prec.name} weights take {prec.weight_bytes:g} byte{'s' if prec.weight_bytes > 1 else ''} × "
        f"{format_count(m.params)} parameters = {format_bytes(w)}, plus {format_bytes(kv)} for one "
        f"{S:g}-token KV cache; at {format_bytes(spec.hbm_bytes)} per chip the smallest power-of-two slice is "
        f"{slice_text(plan.n_chips, plan.shape, spec.kind == 'gpu')} (book ch. 8)."
    ]
    top = plan.max_throughput
    if plan.B_max < plan.B_crit:
        out.append(
            f"Batch: that slice holds {plan.B_max} caches of {S:g} tokens beside the weights, below "
            f"B_crit ≈ {plan.B_crit:.0f} where the weight matmuls turn compute-bound, so its steps stream the "
            f"weights from HBM; its best is {_point(top, sh)}."
        )
    else:
        out.append(
            f"Batch: that slice holds {plan.B_max} caches of {S:g} tokens, past B_crit ≈ {plan.B_crit:.0f} "
            f"where the weight matmuls turn compute-bound; its best is {_point(top, sh)}."
        )
    cap = ms_text(budget.max_latency)
    if best is not None:
        bigger = (
            " — a bigger slice splits the weight and KV loads over more chips" if best.n_chips > plan.n_chips else ""
        )
        out.append(
            f"Latency: under {cap}/step the best of every batch and slice is {_point(best, sh)}, bound by "
            f"{_BOUND_WORDS[best.bottleneck]}{bigger}."
        )
    else:
        out.append(
            f"Latency: no configuration meets {cap}/step; the fastest is {_point(fastest, sh)}, bound by "
            f"{_BOUND_WORDS[fastest.bottleneck]} — use a smaller precision or accept a longer step."
        )
    chosen = best or top
    if spec.price_per_hour_usd is None:
        out.append(f"Money: {spec.name} has no price in the book, so no $/1M tokens.")
    else:
        out.append(
            f"Money: at {usd_text(spec.price_per_hour_usd)}/chip-hour that point costs "
            f"{usd_text(chosen.cost_per_million_tokens)} per million generated tokens (decode only)."
        )
    return out


def plan_serving_side(model="llama3-70b", chip="tpu-v5e", budget: Budget = Budget()) -> ServingSide:
    """The serving half: the smallest slice that holds the weights and one `serve_context` cache
    (`serving.plan_serving(..., slice_=None)`), its batch range and most-throughput point, and the frontier's best
    point under `max_latency` (book ch. 7–8). GPUs are served inside one NVLink node: power-of-two slices up to 8
    GPUs (64 of a GB200 NVL72's 72).

    Raises for bad input (unknown names, a precision the chip has no matmul peak for); returns an infeasible side,
    with the reason, when the model does not fit a pod or node.

    Book ch. 8: LLaMA 3-70B in int8 on v5e with an 8k context → 4x2 (8 chips); B = 32 there ≈ 17 ms/step and
    ≈ 235 tokens/s/chip (ch8.iq3).
    """
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget, got {type(budget).__name__}")
    cfg = tf.get_model(model)
    spec = get_chip(chip)
    prec = inf.get_precision(budget.serve_precision)
    spec.peak_flops(prec.compute_dtype)  # a precision the chip cannot compute in is bad input: raise here
    m = inf.served_model(cfg)
    S = float(budget.serve_context)
    common = dict(
        model=cfg.name,
        chip=spec.name,
        precision=prec.name,
        S=S,
        max_latency=budget.max_latency,
        weight_bytes=m.weight_bytes(prec),
        hbm_per_chip=spec.hbm_bytes,
        B_crit=inf.critical_batch(spec, prec),
    )
    need = inf.min_chips(m, spec, prec, B=1, S=S)
    top = spec.pod_chips or spec.gpus_per_node or 8
    if need > top:
        unit = f"one {spec.name} pod ({top} chips)" if spec.kind == "tpu" else f"one {top}-GPU NVLink node"
        reason = (
            f"{prec.name} weights ({format_bytes(m.weight_bytes(prec))}) and one {S:g}-token cache need "
            f"{chips_text(need, spec.kind == 'gpu')}, more than {unit}; use a smaller precision or a bigger chip"
        )
        return ServingSide(
            **common,
            feasible=False,
            reason=reason,
            n_chips=None,
            shape=None,
            B_max=None,
            max_throughput=None,
            best=None,
            fastest=None,
            reasons=(f"Memory: {reason}.",),
        )
    plan, f = _serving(m, spec.name, prec.name, S)
    best = f.best_under(budget.max_latency)
    fastest = min(f.points, key=lambda p: p.latency)
    reasons = _serving_reasons(m, spec, prec, S, budget, plan, f, best, fastest)
    return ServingSide(
        **common,
        feasible=True,
        reason="",
        n_chips=plan.n_chips,
        shape=plan.shape,
        B_max=plan.B_max,
        max_throughput=plan.max_throughput,
        best=best,
        fastest=fastest,
        reasons=tuple(reasons),
        frontier=f,
        plan=plan,
        served=m,
    )
