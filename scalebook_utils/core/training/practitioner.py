"""One training layout a user names, estimated on TPUs or GPUs (`evaluate_layout`, issue 17), and the
practitioner's estimate of one layout that the planner (`training.plan`) also ranks with.

The practitioner's conventions (`training_layouts`: 16 B/param, activations per micro-batch and tensor,
1F1B/interleaved/uneven pipelines) are the default; `conventions="book"` hands the layout to the chapters'
estimates (`training.evaluate` on TPUs, `gpu_training.evaluate` on GPUs). A `Setting` holds what every layout of
one question shares (model, chip, batch, memory options, the GPU cluster); `practitioner_estimate` times one
layout on the chip's network (ICI and DCN: `estimate.tpu_times`; NVLink and the fat tree:
`gpu_training.layout_times`). Part of `training`, which re-exports `evaluate_layout`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.training import layouts as TL
from scalebook_utils.core.training.costs import tpu_spec
from scalebook_utils.core.training.estimate import Config, Estimate, evaluate, tpu_times
from scalebook_utils.core.training.layouts import CONVENTIONS
from scalebook_utils.core.training.zero_memory import Memory, MemoryOptions
from scalebook_utils.core.units import require_bool, require_int, require_positive

__all__ = [
    "MEMORY_OPTIONS",
    "Setting",
    "cannot_run",
    "dcn_slices",
    "evaluate_layout",
    "practitioner_estimate",
    "resolve_conventions",
    "setting",
]

#: the keyword options of the practitioner's memory (the fields of `zero_memory.MemoryOptions`)
MEMORY_OPTIONS = tuple(f for f in MemoryOptions.__dataclass_fields__)


def evaluate_layout(
    model,
    chip,
    *,
    n_chips,
    batch_tokens,
    seq_len,
    dp,
    tp=1,
    pp=1,
    zero=1,
    remat="none",
    microbatches=None,
    pipeline="1f1b",
    virtual_stages=1,
    stage_layers=None,
    conventions="practitioner",
    slices=None,
    dtype="bf16",
    **options,
) -> Estimate:
    """Estimate the layout a user names: dp data shards (ZeRO stage `zero`; on TPUs split over DCN `slices`),
    tp-way TP, pp pipeline stages run by `pipeline` ("1f1b", "interleaved" with `virtual_stages` chunks per
    device, "gpipe") over `microbatches` micro-batches per data shard (None: one sequence each with a pipeline,
    1 without), `stage_layers` layers per stage (or per virtual stage; None: even), remat "none", "selective"
    or "full" (the book's names too). TPU or GPU from the chip; model and chip as in `plan`.

    Returns an `Estimate` (feasible, reasons, step_s, mfu, hfu, bubble_fraction, memory_bytes_per_chip,
    memory_parts, bound, explain()). A layout that cannot run — dp·tp·pp ≠ n_chips, TP that does not divide the
    query heads or F or does not fit the KV heads, stages that do not cover the layers, micro-batches that do not
    divide a data shard's sequences, a schedule the layout cannot run — is infeasible with its reasons and NaN
    numbers; one that runs but does not fit is infeasible with its numbers. Memory options and conventions as in
    `plan` (`conventions="book"`: the chapters' `evaluate` / `gpu_training.evaluate`, reproducing the book).
    """
    cfg, spec, conventions = tf.get_model(model), get_chip(chip), resolve_conventions(conventions)
    n_chips = require_int("n_chips", n_chips)
    dp, tp, pp = (require_int(k, v) for k, v in (("dp", dp), ("tp", tp), ("pp", pp)))
    zero = require_int("zero", zero, 0, 3)
    v = require_int("virtual_stages", virtual_stages)
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    kind = TL.schedule_name(pipeline)
    if conventions == "book" and not isinstance(remat, str):
        r = remat
        TL.remat_policy(r)
    else:
        r = TL.remat_name(remat)
    m = (
        TL.default_microbatches(batch_tokens, seq_len, dp, pp)
        if microbatches is None
        else require_int("microbatches", microbatches)
    )
    layers = tuple(stage_layers) if hasattr(stage_layers, "__iter__") else stage_layers
    slices = dcn_slices(spec, n_chips, slices, dp)
    reasons = []
    if dp * tp * pp != n_chips:
        reasons.append(f"dp × tp × pp = {dp} × {tp} × {pp} = {dp * tp * pp} is not the {n_chips} chips")
    if dp % slices:
        reasons.append(f"dp={dp} does not split over {slices} DCN slices")
    c = Config(
        X=max(dp // slices, 1),
        Y=tp,
        Z=pp,
        slices=slices,
        zero=zero,
        remat=r,
        microbatches=m,
        pipeline=kind,
        virtual_stages=v,
        stage_layers=layers,
    )
    if conventions == "book":
        if reasons or stage_layers is not None:
            return cannot_run(
                setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, {}, book=True),
                c,
                reasons or ["uneven stage_layers are beyond the book's model; use conventions='practitioner'"],
                (),
            )
        return _book_layout(cfg, spec, c, batch_tokens, seq_len, dtype, options)
    st = setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, options)
    if reasons:
        return cannot_run(st, c, reasons, ())
    return practitioner_estimate(st, c)


def _book_layout(cfg, spec: ChipSpec, c: Config, batch_tokens, seq_len, dtype, options) -> Estimate:
    """Layout `c` under the book's conventions: the chapters' `evaluate` (TPU) or `gpu_training.evaluate` (GPU),
    with the book's names of the remat policies; only the book's options (grad_bytes, allow_sequence_sharding)."""
    extra = sorted(set(options) - {"grad_bytes", "allow_sequence_sharding"})
    if extra:
        raise TypeError(
            f"conventions='book' counts memory the book's way: {', '.join(extra)} "
            f"{'is' if len(extra) == 1 else 'are'} not among its options (grad_bytes, "
            "allow_sequence_sharding)"
        )
    r = c.remat
    r_book = TL.BOOK_REMAT.get(r, r) if isinstance(r, str) else r
    c = Config(
        X=c.X,
        Y=c.Y,
        Z=c.Z,
        slices=c.slices,
        zero=c.zero,
        remat=r_book,
        microbatches=c.microbatches,
        pipeline=c.pipeline,
        virtual_stages=c.virtual_stages,
    )
    if spec.kind == "gpu":
        from scalebook_utils.core.gpu import training as gpu_training

        return gpu_training.evaluate(cfg, batch_tokens, c, spec, seq_len=seq_len, dtype=dtype, **options)
    return evaluate(cfg, batch_tokens, c, spec, seq_len=seq_len, dtype=dtype, **options)


@dataclass(frozen=True)
class Setting:
    """What every layout of one planning question shares: model, chip, batch, memory options, the network."""

    cfg: tf.TransformerConfig
    spec: ChipSpec
    terms: TL.ModelTerms | None
    batch_tokens: float
    seq_len: float
    C: float
    options: MemoryOptions
    gpu: bool
    cluster: object = None
    n: int = 0
    options_text: str = ""


def setting(cfg, spec, n_chips, batch_tokens, seq_len, dtype, options, book=False) -> Setting:
    """The `Setting` of one question; TypeError naming unknown memory options, the GPU cluster of n_chips GPUs (or
    a check that the chip is a TPU). `book=True` (the chapters' conventions) leaves out the practitioner's terms."""
    unknown = sorted(set(options) - set(MEMORY_OPTIONS))
    if unknown:
        raise TypeError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; memory options: "
            f"{', '.join(MEMORY_OPTIONS)}"
        )
    gpu = spec.kind == "gpu"
    cluster = n = None
    if gpu:
        from scalebook_utils.core.gpu import training as gpu_training

        cluster = gpu_training.training_cluster(spec, n_chips)
        n = cluster.require_gpus(n_chips)
    else:
        tpu_spec(spec)
    for k in ("sequence_parallel", "flash_attention"):
        if k in options:
            require_bool(k, options[k])
    terms = None if book else TL.model_terms(cfg, float(seq_len))
    opts = MemoryOptions(**options)
    return Setting(
        cfg, spec, terms, batch_tokens, seq_len, spec.peak_flops(dtype), opts, gpu, cluster, n or 0, opts.describe()
    )


def practitioner_estimate(st: Setting, c: Config) -> Estimate:
    """One layout under the practitioner's conventions (`training_layouts`), timed on the chip's network."""
    shape = TL.practitioner_shape(st.cfg, c, st.batch_tokens, st.seq_len)
    if shape.reasons:
        return cannot_run(st, c, shape.reasons, shape.notes)
    t_math, model_flops, executed, bubble = TL.practitioner_flops(st.terms, c, shape, c.remat, st.C)
    memory, acts, worst = TL.practitioner_memory(st.terms, c, shape, c.remat, st.options)
    load = TL.practitioner_comm_load(st.terms, c, shape, st.options)
    if st.gpu:
        from scalebook_utils.core.gpu import training as gpu_training

        times = (*gpu_training.layout_times(st.cfg, c, load, st.n, st.cluster), 0.0)
    else:
        times = tpu_times(st.spec, st.cfg, c, load)
    reasons = TL.hbm_reasons(memory, st.spec, "GPU" if st.gpu else "chip")
    return Estimate(
        c,
        not reasons,
        "; ".join(reasons),
        t_math,
        *times,
        bubble,
        memory,
        model_flops,
        st.batch_tokens / c.chips,
        1,
        st.spec.name,
        st.C,
        hardware_flops=executed,
        notes=shape.notes,
        conventions="practitioner",
        activation_parts=tuple(acts.items()),
        worst_stage=worst,
        options_text=st.options_text,
    )


def cannot_run(st: Setting, c: Config, reasons, notes) -> Estimate:
    """The infeasible Estimate of a layout that cannot run at all: its reasons, NaN times, MFU and memory."""
    nan = math.nan
    return Estimate(
        c,
        False,
        "; ".join(reasons),
        nan,
        nan,
        nan,
        nan,
        nan,
        nan,
        nan,
        Memory(nan, nan, nan, nan),
        nan,
        st.batch_tokens / c.chips,
        1,
        st.spec.name,
        st.C,
        hardware_flops=nan,
        reasons=tuple(reasons),
        notes=tuple(notes),
        conventions="book" if st.terms is None else "practitioner",
        options_text="" if st.terms is None else st.options_text,
    )


def resolve_conventions(conventions) -> str:
    """`conventions` if it is one of CONVENTIONS ("practitioner", "book"), else ValueError listing them."""
    if conventions not in CONVENTIONS:
        raise ValueError(f"conventions must be one of {', '.join(CONVENTIONS)}, got {conventions!r}")
    return conventions


def dcn_slices(spec: ChipSpec, n_chips: int, slices, dp: int | None = None) -> int:
    """DCN slices: 1 on GPUs and for TPUs within one pod; else the fewest that divide n_chips (and dp) into pods."""
    if slices is not None:
        slices = require_int("slices", slices)
        if spec.kind == "gpu" and slices != 1:
            raise ValueError("GPU clusters are one fat tree: slices must be 1")
        if n_chips % slices:
            raise ValueError(f"slices={slices} must divide n_chips={n_chips}")
        return slices
    pod = spec.pod_chips
    if spec.kind == "gpu" or pod is None or n_chips <= pod:
        return 1
    for s in range(math.ceil(n_chips / pod), n_chips + 1):
        if n_chips % s == 0 and (dp is None or dp % s == 0):
            return s
    return n_chips
