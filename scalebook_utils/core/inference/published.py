"""A Rosetta of published inference measurements: a few decode, prefill and request timings from papers and
vendor reports, each set beside the roofline of the same workload from `inference.decode_step` and
`inference.prefill_time` (conventions="practice"), issue 17 item 6.

For every measurement: the model, the chip and how many, the precision, the batch, the prompt and output
lengths, the reported number — the seconds a task took, or output tokens/s per chip — and its citation. What a
source does not state is listed in the measurement's `source_note` as an assumption.

The roofline charges a task what the book's model charges it (book ch. 7 "Theoretical estimates for LLM latency
and throughput"; ch. 8 "What about prefill?"):

    prefill  = inference.prefill_time(model, T, B=B)                       (matmuls, causal attention, TP comms)
    decode   = Σ_i inference.decode_step(model, B, S + i).step_time,  i = 0 … steps − 1
    request  = prefill + decode of the remaining output_len − 1 tokens     (prefill yields the first token)

with the context growing from the prompt length by one key per step. It is a lower bound on the time of any
run of that workload on those chips (up to the layout of its collectives: scalebook models 1D tensor
parallelism, see `Row.gap`), so the roofline's time must not exceed the reported one, and its tokens/s must be
at least the reported tokens/s. A roofline that does not bound a measurement is a bug to explain, not a number
to hide (tests/test_published_inference.py).

Pure Python. SI units: seconds, tokens/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference import costs as inference
from scalebook_utils.core.training.published_runs import PALM_540B
from scalebook_utils.core.units import require_int, require_number

POPE22 = (
    "Pope et al. 2022, 'Efficiently Scaling Transformer Inference' (arXiv 2211.05102, MLSys 2023), Table 2 "
    "(example configurations for PaLM 540B on 64 TPU v4 chips: prefill of 2048 tokens, decode of 64 tokens)"
)
TRTLLM_H200 = (
    "NVIDIA TensorRT-LLM, docs/source/blogs/H200launch.md, table 'H200 FP8 Max throughput' (TensorRT-LLM "
    "v0.5.0, preliminary measured performance; 'largest batch supported on given TP configuration by "
    "power of 2'; throughput in output tokens/s per GPU)"
)

#: PaLM inference in Pope et al. quantizes the weights only: int8 weights, a bf16 KV cache and bf16 matmuls
INT8_WEIGHTS_BF16_KV = inference.Precision("int8-weights-bf16-kv", 1.0, 2.0, "bf16", 2.0)

#: what a measurement times: a prefill, a run of decode steps, or whole requests (prefill + decode)
PHASES = ("prefill", "decode", "request")
#: how the number is reported: seconds for the whole task, or output tokens/s per chip
REPORTED = ("latency_s", "tokens_per_s_per_chip")

_POPE_CHIP = (
    "scalebook's TPU v4 ('tpu-v4p': 275 TFLOP/s bf16, 1.2 TB/s HBM, 32 GB) as the paper's chip; "
    "the 64 chips as a 4×4×4 slice (the paper does not give the shape)"
)
_POPE_1D = (
    "scalebook's 1D tensor parallelism over all 64 chips stands in for the paper's layout (`layout`, as we "
    "read Table 2; its collectives differ, the compute and HBM terms do not depend on the layout)"
)
_TRT_ASSUMED = (
    "llama_70b read as Llama 2 70B (the blog is about Llama 2; there is no other 70B Llama in v0.5); "
    "FP8 weights, activations and KV cache (the table says only 'FP8'; an FP8 KV cache is the "
    "generous reading, a 16-bit one gives a slower roofline); the reported tokens/s read as batch × "
    "output tokens / the time of the whole batch, prefill included (static batching), so the roofline "
    "charges the prefill too — without it the roofline is faster still"
)


@dataclass(frozen=True)
class Measurement:
    """One published inference measurement.

    phase: "prefill" (B prompts of input_len tokens), "decode" (output_len steps of B sequences from a context
    of input_len) or "request" (both: a prefill, then output_len − 1 decode steps); reported: "latency_s" (the
    seconds the whole task took, in `value`) or "tokens_per_s_per_chip" (output tokens/s per chip; prompt
    tokens/s for a prefill); paper_mfu: the source's own MFU for the task, when it gives one; shape: the TPU
    slice (None: one axis, or a GPU group); layout: the source's parallel layout in its words."""

    name: str
    model: tf.TransformerConfig | str
    chip: str
    n_chips: int
    precision: str | inference.Precision
    phase: str
    batch: int
    input_len: int
    output_len: int
    reported: str
    value: float
    citation: str
    source_note: str
    layout: str = ""
    shape: tuple[int, ...] | None = None
    paper_mfu: float | None = None

    def __post_init__(self):
        if self.phase not in PHASES:
            raise ValueError(f"{self.name}: phase must be one of {', '.join(PHASES)}, got {self.phase!r}")
        if self.reported not in REPORTED:
            raise ValueError(f"{self.name}: reported must be one of {', '.join(REPORTED)}, got {self.reported!r}")
        require_int(f"{self.name}: n_chips", self.n_chips)
        require_int(f"{self.name}: batch", self.batch)
        require_int(f"{self.name}: input_len", self.input_len)
        require_int(f"{self.name}: output_len", self.output_len, minimum=0 if self.phase == "prefill" else 1)
        if self.phase == "prefill" and self.output_len:
            raise ValueError(f"{self.name}: a prefill generates no tokens (output_len 0), got {self.output_len}")
        require_number(f"{self.name}: value", self.value, above=0)
        if self.paper_mfu is not None:
            require_number(f"{self.name}: paper_mfu", self.paper_mfu, above=0, maximum=1)
        if self.shape is not None and math.prod(self.shape) != self.n_chips:
            raise ValueError(
                f"{self.name}: slice shape {self.shape} has {math.prod(self.shape)} chips, not n_chips={self.n_chips}"
            )

    @property
    def tokens(self) -> int:
        """The tokens a throughput counts: B × output_len (B × input_len for a prefill)."""
        return self.batch * (self.input_len if self.phase == "prefill" else self.output_len)

    @property
    def reported_s(self) -> float:
        """The measured seconds of the whole task (from tokens/s per chip: tokens / (value · n_chips))."""
        if self.reported == "latency_s":
            return self.value
        return self.tokens / (self.value * self.n_chips)

    @property
    def workload(self) -> str:
        """'B 512 × 128 in / 2048 out' — the batch and lengths in one phrase."""
        out = f" / {self.output_len} out" if self.output_len else ""
        return f"B {self.batch} × {self.input_len} in{out}"


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement(
        "PaLM 540B decode, low latency",
        PALM_540B,
        "tpu-v4p",
        64,
        INT8_WEIGHTS_BF16_KV,
        "decode",
        64,
        2048,
        64,
        "latency_s",
        1.82,
        POPE22 + ": low-latency decode column — batch 64, int8 weights, MFU 14%, "
        "1.82 s for 64 tokens (28 ms per token; the abstract's '29 ms per token')",
        "Published: model, 64 TPU v4 chips, batch 64, int8 weights, 64 generated tokens, 1.82 s, MFU 14%. "
        "Assumed: a context of 2048 tokens at the first step (the table's 2048-token setting); the KV cache "
        f"in bf16 (the paper quantizes the weights); {_POPE_CHIP}; {_POPE_1D}.",
        layout="2D weight-stationary FFN, batch-sharded attention",
        shape=(4, 4, 4),
        paper_mfu=0.14,
    ),
    Measurement(
        "PaLM 540B decode, high throughput",
        PALM_540B,
        "tpu-v4p",
        64,
        "bf16",
        "decode",
        512,
        2048,
        64,
        "latency_s",
        6.0,
        POPE22 + ": high-throughput decode column — batch 512, bf16 weights, MFU 33%, 6.0 s for 64 tokens",
        "Published: model, 64 TPU v4 chips, batch 512, bf16, 64 generated tokens, "
        f"6.0 s, MFU 33%. Assumed: a context of 2048 tokens at the first step; {_POPE_CHIP}; {_POPE_1D}.",
        layout="2D weight-stationary FFN, batch-sharded attention",
        shape=(4, 4, 4),
        paper_mfu=0.33,
    ),
    Measurement(
        "PaLM 540B prefill, high throughput",
        PALM_540B,
        "tpu-v4p",
        64,
        "bf16",
        "prefill",
        512,
        2048,
        0,
        "latency_s",
        85.2,
        POPE22 + ": high-throughput prefill column — batch 512 × 2048 tokens, bf16 "
        "weights, MFU 76% (the abstract's '76% MFU'), 85.2 s",
        "Published: model, 64 TPU v4 chips, batch 512, 2048-token prompts, bf16, 85.2 s, MFU 76%. "
        f"Assumed: {_POPE_CHIP}; {_POPE_1D} — here the paper gathers the weights (XYZ) instead of moving "
        "activations, so scalebook's collectives are an overestimate.",
        layout="FFN weights gathered over XYZ, batch-sharded attention",
        shape=(4, 4, 4),
        paper_mfu=0.76,
    ),
    Measurement(
        "Llama 2 70B on 1 H200, 128 in / 128 out",
        "llama2-70b",
        "h200",
        1,
        "fp8",
        "request",
        512,
        128,
        128,
        "tokens_per_s_per_chip",
        3014,
        TRTLLM_H200 + ": llama_70b, batch 512, TP 1, input 128, output 128, 3,014 tokens/s per GPU",
        f"Published: model, 1 H200, TP 1, batch 512, input 128 and "
        f"output 128 tokens, FP8, 3,014 output tokens/s per GPU. Assumed: {_TRT_ASSUMED}.",
        layout="TP 1",
    ),
    Measurement(
        "Llama 2 70B on 2 H200, 128 in / 2048 out",
        "llama2-70b",
        "h200",
        2,
        "fp8",
        "request",
        512,
        128,
        2048,
        "tokens_per_s_per_chip",
        1654,
        TRTLLM_H200 + ": llama_70b, batch 512, TP 2, input 128, output 2048, 1,654 tokens/s per GPU",
        f"Published: model, 2 H200, TP 2, batch 512, input 128 and "
        f"output 2048 tokens, FP8, 1,654 output tokens/s per GPU. Assumed: {_TRT_ASSUMED}; the two GPUs "
        "run NCCL AllReduces over NVLink (scalebook's GPU rule: two per layer, not overlapped). Here the FP8 "
        "cache is implied, not only generous: a 16-bit cache of 512 × 2176 tokens would not fit beside the "
        "weights in 2 × 141 GB.",
        layout="TP 2",
    ),
)


#: the cost model's bottleneck names, in words
_BOUND = {
    "weights": "weight loads",
    "compute": "compute",
    "kv": "KV loads",
    "ici": "collectives",
    "comms": "collectives",
}


@dataclass(frozen=True)
class Row:
    """One measurement beside its roofline. prefill: the roofline's `inference.Prefill` (None for a decode);
    steps: the decode steps charged; decode_s: their roofline seconds; decode_core_s: the same without the
    collectives (the layout-free part: max(KV, attention FLOPs) + max(matmul FLOPs, weights) per step);
    decode_bound: the cost model's bottleneck of the middle step ("weights", "compute", "kv" or "ici")."""

    measurement: Measurement
    prefill: inference.Prefill | None
    steps: int
    decode_s: float
    decode_core_s: float
    decode_bound: str | None

    @property
    def roofline_s(self) -> float:
        """The roofline's seconds for the whole task: prefill time + the decode steps."""
        return (self.prefill.time if self.prefill else 0.0) + self.decode_s

    @property
    def core_s(self) -> float:
        """The roofline without collectives (compute and HBM only, whatever the layout): a looser bound."""
        pre = max(self.prefill.t_math, self.prefill.t_hbm_weights) if self.prefill else 0.0
        return pre + self.decode_core_s

    @property
    def roofline_tokens_per_s_per_chip(self) -> float:
        m = self.measurement
        return m.tokens / (self.roofline_s * m.n_chips)

    @property
    def bounds(self) -> bool:
        """True when the roofline is no slower than the measurement (its tokens/s at least the reported)."""
        return self.roofline_s <= self.measurement.reported_s

    @property
    def reached(self) -> float:
        """roofline time / measured time: the fraction of the roofline's speed the measurement reached (≤ 1)."""
        return self.roofline_s / self.measurement.reported_s

    def _text(self, seconds: float) -> str:
        m = self.measurement
        if m.reported == "tokens_per_s_per_chip":
            return f"{m.tokens / (seconds * m.n_chips):,.0f} tok/s/chip"
        per = f", {seconds / m.output_len * 1e3:.1f} ms/token" if m.phase == "decode" else ""
        return f"{seconds:.3g} s{per}"

    @property
    def reported_text(self) -> str:
        m = self.measurement
        mfu = f", MFU {m.paper_mfu:.0%}" if m.paper_mfu is not None else ""
        return self._text(m.reported_s) + mfu

    @property
    def roofline_text(self) -> str:
        return self._text(self.roofline_s)

    @property
    def comm_bound(self) -> bool:
        """True when scalebook's tensor-parallel collectives set the prefill or the decode steps."""
        return (self.prefill is not None and self.prefill.bottleneck == "comms") or self.decode_bound == "ici"

    @property
    def bound_text(self) -> str:
        """What sets the roofline: '64 decode steps (0.464 s) bound by weight loads', with the 1D-layout caveat
        where scalebook's collectives are the bound."""
        parts = []
        if self.prefill is not None:
            parts.append(f"a {self.prefill.time:.3g} s prefill bound by {_BOUND[self.prefill.bottleneck]}")
        if self.steps:
            parts.append(f"{self.steps} decode steps ({self.decode_s:.3g} s) bound by {_BOUND[self.decode_bound]}")
        layout = ""
        if self.comm_bound:
            layout = (
                f" (scalebook's 1D tensor parallelism; the source's layout, {self.measurement.layout}, moves "
                f"other bytes; compute and HBM alone take {self.core_s:.3g} s)"
            )
        return " + ".join(parts) + layout

    @property
    def gap(self) -> str:
        """One sentence: what sets the roofline and how far below it the measurement ran (or, when the roofline
        is slower than the measurement, that this is a bug)."""
        m = self.measurement
        if not self.bounds:
            return (
                f"BUG: the roofline ({self.roofline_s:.3g} s) is slower than the measurement "
                f"({m.reported_s:.3g} s): an input or a term of the model is wrong; see the source_note"
            )
        return (
            f"the roofline is {self.bound_text}; the run reached {self.reached:.0%} of it, the rest being what "
            "a roofline leaves out: kernels below peak, collectives not hidden, per-step overheads"
        )


def evaluate(m: Measurement) -> Row:
    """The roofline of the measurement's workload: `inference.prefill_time` for its prompts, then one
    `inference.decode_step` per generated token (context input_len + i), conventions="practice"."""
    kw = dict(chip=m.chip, n_chips=m.n_chips, precision=m.precision, shape=m.shape, conventions="practice")
    prefill = None
    if m.phase in ("prefill", "request"):
        prefill = inference.prefill_time(m.model, m.input_len, B=m.batch, **kw)
    n = {"prefill": 0, "decode": m.output_len, "request": m.output_len - 1}[m.phase]
    steps = [inference.decode_step(m.model, m.batch, m.input_len + i, **kw) for i in range(n)]
    core = sum(max(s.t_hbm_kv, s.t_math_attention) + max(s.t_math, s.t_hbm_weights) for s in steps)
    return Row(m, prefill, n, sum(s.step_time for s in steps), core, steps[n // 2].bottleneck if steps else None)


def rosetta(measurements=MEASUREMENTS) -> list[Row]:
    """Every measurement's `Row`."""
    return [evaluate(m) for m in measurements]


def table(rows=None) -> list[list[str]]:
    """[measurement, chips, precision, workload, reported, roofline, reached, the gap] per measurement."""
    out = []
    for r in rosetta() if rows is None else rows:
        m = r.measurement
        chips = f"{m.n_chips} × {get_chip(m.chip).name}"
        out.append(
            [
                m.name,
                chips,
                inference.get_precision(m.precision).name,
                m.workload,
                r.reported_text,
                r.roofline_text,
                f"{r.reached:.0%}",
                r.gap,
            ]
        )
    return out


__all__ = [
    "POPE22",
    "TRTLLM_H200",
    "INT8_WEIGHTS_BF16_KV",
    "PHASES",
    "REPORTED",
    "Measurement",
    "MEASUREMENTS",
    "Row",
    "evaluate",
    "rosetta",
    "table",
]
