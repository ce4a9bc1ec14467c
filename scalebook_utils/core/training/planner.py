"""Training parallelism: the planner that ranks layouts of a whole training step (book ch. 5 and 6), and the
chapters' front door to ch. 5's closed-form costs.

Two layers of model:

1. The chapter's own model — the hardware ratios (`alpha`, `ici_bandwidth`, …), the compute-bound thresholds
   (`dp_min_batch_per_chip`, `tp_max_degree`, `mixed_min_batch_per_chip`, `fsdp_tp_degrees`, …), the per-layer
   MLP costs (`layer_costs`, `comms_ratio`, `step_collectives`), `bubble_fraction` and Adam/ZeRO memory
   (`training_memory`, `checkpoint_bytes`) — lives in `training_costs` (pure; the notation is in its
   docstring: B tokens, D, F, L; X data, Y TP, Z pipeline degrees; N = X·Y·Z; C; W_ici; M_X, M_Y; α = C/W_ici).
   Every public name of it is re-exported here, so `training.alpha`, `training.layer_costs`, … work as before.
2. The planner: the same rules applied to a whole `TransformerConfig` — attention and MLP blocks,
   embeddings, MoE experts, pipeline bubbles, DCN across slices, Adam memory and activation checkpoints — to rank
   every configuration that fits a mesh and HBM by estimated step time. Its network-free parts (FLOPs, validity
   rules, memory) live in `training_layouts`, shared with the GPU planner (`gpu_training`, book ch. 12).

The planner's modules (`scalebook_utils.core.training`; every name below is re-exported here):
`estimate` (`Config`, `Estimate`, the book's TPU estimate `evaluate`, `ici_axes`), `practitioner`
(`evaluate_layout` and the practitioner's estimate of one layout), `plan_report` (`Plan`: the ranked estimates,
`best`, `table`, `explain()`) and this module (`plan`: the search — the layouts it enumerates and how it keeps
the fastest of each; `cached_plan`: the book's `plan` for a widget's inputs, cached).

One entry point for both kinds of chip (issue 17): `plan(model, chip, n_chips=, batch_tokens=, seq_len=, …)`
ranks layouts and `evaluate_layout(model, chip, n_chips=, batch_tokens=, seq_len=, dp=, tp=, pp=, …)` estimates
one; a TPU gets ICI and DCN slices, a GPU an NVLink node and a fat tree (`gpu_training`). Both count memory as a
practitioner does by default (`zero_memory.MemoryOptions`: 16 B/param, activations per micro-batch and
tensor, 1F1B/interleaved/uneven pipelines) and as the book does with `conventions="book"`. The chapters' forms —
`plan(model, batch_tokens, chip, …)`, `evaluate(model, batch_tokens, Config(…), chip)` and `gpu_training`'s —
keep the book's conventions and numbers.

Overlap: like the book, communication on different axes and compute are assumed to overlap, so a step
takes max(T_math, T_comms on each axis) — a roofline (lower bound), not a simulation.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterable, Sequence

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.training import layouts as TL
from scalebook_utils.core.training import practitioner as TP
from scalebook_utils.core.training import schedules as PS

# book ch. 5's closed forms (training_costs), used below and re-exported for the chapters
from scalebook_utils.core.training.costs import (
    ACT_BYTES,
    ADAM_BYTES_PER_PARAM,
    OPTIMIZER_BYTES,
    PARAM_BYTES,
    STRATEGIES,
    Collective,
    LayerCosts,
    Memory,
    MemoryOptions,
    all_comm_bound_batch,
    alpha,
    alpha_dcn,
    bubble_fraction,
    checkpoint_bytes,
    comms_ratio,
    dcn_bandwidth,
    dp_bytes_per_param,
    dp_min_batch_per_chip,
    fsdp_min_batch_per_chip,
    fsdp_tp_degrees,
    ici_bandwidth,
    layer_costs,
    max_params_pure_dp,
    min_chips_for_memory,
    mixed_min_batch_per_chip,
    optimal_fsdp_degree,
    round_pow2,
    step_collectives,
    tp_max_degree,
    tp_min_F,
    tpu_spec,
    training_memory,
    training_time,
)
from scalebook_utils.core.training.estimate import Config, Estimate, evaluate, ici_axes
from scalebook_utils.core.training.layouts import CONVENTIONS, REMAT_CHOICES, REMAT_POLICIES, CommLoad
from scalebook_utils.core.training.plan_report import Plan
from scalebook_utils.core.training.practitioner import MEMORY_OPTIONS, evaluate_layout
from scalebook_utils.core.units import (
    is_int,
    require_bytes,
    require_choices,
    require_int,
    require_positive,
)

CH5 = "book ch. 5 'How to Parallelize a Transformer for Training'"
CH6 = "book ch. 6 'Training LLaMA 3 on TPUs'"

__all__ = [
    # the planner (this module and its siblings estimate, practitioner, plan_report)
    "CH5",
    "CH6",
    "Config",
    "Estimate",
    "Plan",
    "REMAT_CHOICES",
    "evaluate",
    "evaluate_layout",
    "ici_axes",
    "plan",
    "cached_plan",
    "CONVENTIONS",
    "REMAT_POLICIES",
    "MemoryOptions",
    "MEMORY_OPTIONS",
    "CommLoad",
    # re-exported from training_costs (book ch. 5's closed forms)
    "STRATEGIES",
    "ADAM_BYTES_PER_PARAM",
    "PARAM_BYTES",
    "OPTIMIZER_BYTES",
    "ACT_BYTES",
    "tpu_spec",
    "ici_bandwidth",
    "dcn_bandwidth",
    "alpha",
    "alpha_dcn",
    "max_params_pure_dp",
    "dp_min_batch_per_chip",
    "fsdp_min_batch_per_chip",
    "tp_max_degree",
    "tp_min_F",
    "mixed_min_batch_per_chip",
    "optimal_fsdp_degree",
    "all_comm_bound_batch",
    "fsdp_tp_degrees",
    "min_chips_for_memory",
    "round_pow2",
    "training_time",
    "LayerCosts",
    "layer_costs",
    "comms_ratio",
    "Collective",
    "step_collectives",
    "bubble_fraction",
    "Memory",
    "checkpoint_bytes",
    "training_memory",
    "dp_bytes_per_param",
]


# --- the book's search (ch. 5–6): every X·Y·Z layout of TPU slices, fastest feasible first ------------------


def _book_plan(
    model,
    batch_tokens: float,
    chip="tpu-v5p",
    *,
    n_chips: int | None = None,
    slices: int = 1,
    seq_len: int = 4096,
    max_tp: int = 64,
    max_pp: int = 16,
    zero_stages: Sequence[int] = (0, 1, 3),
    remat: Iterable = REMAT_CHOICES,
    microbatches_per_stage: int = 4,
    allow_sequence_sharding: bool = True,
    grad_bytes: float = 0.0,
    dtype: str = "bf16",
) -> Plan:
    """Enumerate the layouts of a training step and rank them by estimated step time (book ch. 5–6).

    `n_chips` per slice (default: the chip's full pod, 8960 for v5p) and `slices` joined by DCN. Every
    factorisation X·Y·Z = n_chips with Y ≤ max_tp, Z ≤ max_pp is tried with each ZeRO stage and remat policy;
    pipelines get `microbatches_per_stage`·Z microbatches (capped by the sequences per data shard).
    Infeasible layouts stay in the plan with their reason. ~10k estimates take well under a second.

    Arguments are checked first, each error naming the argument: n_chips is one slice, at most the chip's pod
    (more chips are `slices` joined by DCN); batch_tokens holds at least one sequence of seq_len tokens;
    max_tp, max_pp, microbatches_per_stage are integers ≥ 1; zero_stages (a stage or several of 0–3) and
    remat (a policy of REMAT_CHOICES, a number of checkpoints per layer, or several) must not be empty;
    grad_bytes is ≥ 0.
    """
    cfg = tf.get_model(model)
    spec = tpu_spec(chip)
    n_chips = _slice_chips(spec, n_chips)
    slices = require_int("slices", slices)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    if batch_tokens < seq_len:
        raise ValueError(
            f"batch_tokens={batch_tokens:g} is less than one sequence of seq_len={seq_len:g} tokens; "
            "a training batch is whole sequences (lower seq_len for short sequences)"
        )
    max_tp = require_int("max_tp", max_tp)
    max_pp = require_int("max_pp", max_pp)
    microbatches_per_stage = require_int("microbatches_per_stage", microbatches_per_stage)
    grad_bytes = require_bytes("grad_bytes", grad_bytes)
    zero_stages = _zero_stages(zero_stages)
    remat = require_choices(
        "remat",
        remat,
        f"remat policies ({', '.join(REMAT_CHOICES)}) or checkpoints per layer",
        lambda r: isinstance(r, (str, int, float)),
    )
    for r in remat:
        TL.remat_policy(r)
    estimates = []
    for X, Y, Z in TL.layouts(n_chips, max_tp, max_pp):
        mb = TL.pipeline_microbatches(batch_tokens / slices, seq_len, X, Z, microbatches_per_stage)
        for zero in zero_stages if X > 1 else (0,):
            for r in remat:
                cfgn = Config(X=X, Y=Y, Z=Z, slices=slices, zero=zero, remat=r, microbatches=mb)
                estimates.append(
                    evaluate(
                        cfg,
                        batch_tokens,
                        cfgn,
                        spec,
                        seq_len=seq_len,
                        allow_sequence_sharding=allow_sequence_sharding,
                        grad_bytes=grad_bytes,
                        dtype=dtype,
                    )
                )
    estimates.sort(key=TL.rank_key)
    return Plan(cfg, spec.name, n_chips * slices, batch_tokens, seq_len, tuple(estimates))


def _slice_chips(spec: ChipSpec, n_chips) -> int:
    """The chips of one ICI slice for the book's planner: the pod by default, an integer ≥ 1, at most a pod."""
    if n_chips is None:
        if spec.pod_chips is None:
            raise ValueError(f"{spec.name} has no pod size; pass n_chips")
        n_chips = spec.pod_chips
    n_chips = require_int("n_chips", n_chips)
    if spec.pod_chips is not None and n_chips > spec.pod_chips:
        raise ValueError(
            f"n_chips={n_chips} is more than one {spec.name} pod ({spec.pod_chips} chips); n_chips is "
            "the chips of one ICI slice — join pods with slices=… (DCN, book ch. 5 'Scaling Across "
            "Pods')"
        )
    return n_chips


def _zero_stages(zero_stages) -> tuple[int, ...]:
    """`zero_stages` as a non-empty tuple of ZeRO stages, each an integer from 0 to 3."""
    zero_stages = require_choices("zero_stages", zero_stages, "ZeRO stages (0 plain DP, 1, 2, 3 FSDP)", is_int)
    for z in zero_stages:
        require_int("each of zero_stages", z, 0, 3)
    return zero_stages


# --- one entry point for TPUs and GPUs (issue 17) ---------------------------------------------------------


def plan(model, chip="tpu-v5p", *book_form, **options) -> Plan:
    """Rank the layouts of a training step on TPUs (ICI, DCN slices; book ch. 5–6) or GPUs (NVLink node, fat
    tree; ch. 12), chosen from the chip: `plan(model, chip, n_chips=, batch_tokens=, seq_len=, **options)`.

    `model`: a preset name or TransformerConfig; `chip`: a name or ChipSpec (unknown names list the close
    matches). `n_chips` is every chip (TPUs beyond one pod are split into DCN `slices`, default the fewest that
    fit). Every X·Y·Z layout (Y ≤ `max_tp`, default 64 on TPUs and one NVLink node on GPUs; Z ≤ `max_pp`,
    default 64) is tried with each ZeRO stage (`zero_stages`, default 0–3), remat policy (`remat`, default
    none, selective, full), schedule (`pipelines`, default 1F1B and interleaved with `virtual_stages` 2, 4 or 8
    chunks; "gpipe" on request; L that does not split evenly gets `balanced_stage_layers`) and number of
    micro-batches m (the divisors of a data shard's sequences: the fewest that fit without a pipeline, the most
    with one and ZeRO ≤ 1, all of them with ZeRO ≥ 2, where the collectives grow with m); each layout keeps its
    best m. Memory options (`MemoryOptions` fields: param_bytes, master_bytes, optimizer_bytes, grad_bytes,
    activation_bytes, logits_bytes, sequence_parallel, flash_attention) default to the practitioner's
    (stated in `explain()`); `conventions="book"` plans as the chapters do (`plan(model, batch_tokens, chip)`,
    `gpu_training.plan`), reproducing every book number.

    The chapters' form `plan(model, batch_tokens, chip="tpu-v5p", *, n_chips=None, slices=1, seq_len=4096,
    max_tp=64, max_pp=16, zero_stages=(0, 1, 3), remat=REMAT_CHOICES, microbatches_per_stage=4,
    allow_sequence_sharding=True, grad_bytes=0.0, dtype="bf16")` — a number as the second argument — is the
    book's TPU planner, unchanged (n_chips per slice, GPipe microbatches, 10 B/param).
    """
    if isinstance(chip, numbers.Real) and not isinstance(chip, bool):
        return _book_plan(model, chip, *book_form, **options)
    if book_form:
        raise TypeError(
            "plan(model, chip, *, n_chips=, batch_tokens=, seq_len=, ...) takes the model and the chip "
            "as its only positional arguments (the book's form is plan(model, batch_tokens, chip))"
        )
    return _plan(model, chip, **options)


@functools.lru_cache(maxsize=64)
def _cached_book_plan(model, chip, n_chips, slices, batch_tokens, seq_len, allow_seq) -> Plan:
    return plan(
        model, batch_tokens, chip, n_chips=n_chips, slices=slices, seq_len=seq_len, allow_sequence_sharding=allow_seq
    )


def cached_plan(
    model="llama3-70b",
    chip="tpu-v5p",
    chips: int | None = None,
    slices: int = 1,
    batch_tokens: float = 4 * 2**20,
    seq_len: int = 4096,
    allow_sequence_sharding: bool = True,
) -> Plan:
    """The book's `plan(model, batch_tokens, chip, n_chips=chips, slices=, seq_len=, allow_sequence_sharding=)`,
    cached: the last 64 plans, the same `Plan` object for the same inputs (a widget redraw, or chapters 5 and 6,
    ask for the same plan several times). `chips`: chips per slice, None or 0 for the chip's pod."""
    cfg = tf.get_model(model)
    spec = get_chip(chip)
    n = spec.pod_chips if chips in (None, 0) else chips
    return _cached_book_plan(
        cfg, spec.name, n, slices, float(batch_tokens), int(seq_len), bool(allow_sequence_sharding)
    )


def _plan(
    model,
    chip,
    *,
    n_chips,
    batch_tokens,
    seq_len,
    conventions="practitioner",
    slices=None,
    max_tp=None,
    max_pp=None,
    zero_stages=None,
    remat=None,
    pipelines=("1f1b", "interleaved"),
    virtual_stages=(2, 4, 8),
    dtype="bf16",
    **options,
) -> Plan:
    """`plan`'s form for both chips: the practitioner's search, or with conventions="book" the chapters' planners."""
    cfg, spec, conventions = tf.get_model(model), get_chip(chip), TP.resolve_conventions(conventions)
    n_chips = require_int("n_chips", n_chips)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    slices = TP.dcn_slices(spec, n_chips, slices)
    if conventions == "book":
        kw = {
            k: v
            for k, v in (("max_tp", max_tp), ("max_pp", max_pp), ("zero_stages", zero_stages), ("remat", remat))
            if v is not None
        }
        if spec.kind != "gpu":
            return _book_plan(
                cfg,
                batch_tokens,
                spec,
                n_chips=n_chips // slices,
                slices=slices,
                seq_len=seq_len,
                dtype=dtype,
                **kw,
                **options,
            )
        from scalebook_utils.core.gpu import training as gpu_training

        if slices != 1:
            raise ValueError("GPU clusters are one fat tree: slices must be 1")
        return gpu_training.plan(cfg, batch_tokens, spec, n_gpus=n_chips, seq_len=seq_len, dtype=dtype, **kw, **options)
    st = TP.setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, options)
    max_tp = require_int("max_tp", max_tp if max_tp is not None else (spec.gpus_per_node if st.gpu else 64))
    max_pp = require_int("max_pp", 64 if max_pp is None else max_pp)
    choices = _search_choices(zero_stages, remat, pipelines, virtual_stages)
    estimates = []
    for X, Y, Z in TL.layouts(n_chips // slices, max_tp, max_pp):
        estimates += _degrees_estimates(st, X, Y, Z, slices, choices)
    estimates.sort(key=TL.rank_key)
    return Plan(cfg, spec.name, n_chips, batch_tokens, seq_len, tuple(estimates), "practitioner", st.options.describe())


def _search_choices(zero_stages, remat, pipelines, virtual_stages) -> dict:
    """The practitioner's search space, checked: ZeRO stages (default 0–3), remat policies by their common names
    (default all), schedules and chunks per device (each ≥ 2) — `layout_groups`' keyword arguments."""
    zero_stages = _zero_stages((0, 1, 2, 3) if zero_stages is None else zero_stages)
    remats = [
        TL.remat_name(r)
        for r in require_choices(
            "remat",
            REMAT_POLICIES if remat is None else remat,
            "remat policies (none, selective, full)",
            lambda r: isinstance(r, str),
        )
    ]
    kinds = [
        TL.schedule_name(k)
        for k in require_choices(
            "pipelines", pipelines, "schedules (gpipe, 1f1b, interleaved)", lambda k: isinstance(k, str)
        )
    ]
    vs = [
        require_int("each of virtual_stages", v, 2)
        for v in require_choices("virtual_stages", virtual_stages, "chunks per device (≥ 2)", is_int)
    ]
    return {"zero_stages": zero_stages, "remats": remats, "kinds": kinds, "virtual_stages": vs}


def _degrees_estimates(st: TP.Setting, X: int, Y: int, Z: int, slices: int, choices: dict) -> list[Estimate]:
    """The estimates the search keeps for degrees X·Y·Z: one infeasible entry when the degrees themselves cannot
    run (heads, batch split, too many stages), else the fastest of each of `layout_groups`' groups."""
    cfg, batch_tokens, seq_len = st.cfg, st.batch_tokens, st.seq_len
    first = Config(
        X=X,
        Y=Y,
        Z=Z,
        slices=slices,
        zero=0,
        remat=choices["remats"][0],
        microbatches=TL.default_microbatches(batch_tokens, seq_len, X * slices, Z),
        stage_layers=None if cfg.L % Z == 0 or Z > cfg.L else PS.balanced_stage_layers(cfg.L, Z),
    )
    shape = TL.practitioner_shape(cfg, first, batch_tokens, seq_len)
    if shape.reasons:
        return [TP.cannot_run(st, first, shape.reasons, shape.notes)]
    return [
        _fastest(st, group, first_feasible)
        for first_feasible, group in TL.layout_groups(cfg, first, batch_tokens, seq_len, **choices)
    ]


def _fastest(st: TP.Setting, group: list[dict], first_feasible: bool) -> Estimate:
    """The best estimate of a group of layouts (feasible first, then the step time, then fewer micro-batches);
    the first feasible one when the group says so."""
    best = None
    for kw in group:
        e = TP.practitioner_estimate(st, Config(**kw))
        if best is None or (not e.feasible, _finite(e.step_time), kw["microbatches"]) < (
            not best.feasible,
            _finite(best.step_time),
            best.config.microbatches,
        ):
            best = e
        if first_feasible and e.feasible:
            break
    return best


def _finite(x: float) -> float:
    return x if x == x else math.inf
