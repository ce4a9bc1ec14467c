"""A Rosetta of published training runs: the layouts of large public runs, each evaluated by
`training.evaluate_layout` and set beside the utilisation its paper reports (issue 17).

For every run: the model, the chips, the published layout (data, tensor and pipeline parallel degrees, ZeRO,
schedule, recomputation), the batch and sequence length, and the reported number — MFU, or achieved TFLOP/s
per chip — with its citation. What a paper does not state (a pipeline's virtual stages, the micro-batch size,
the recomputation policy) is an *assumption*, listed with the run.

Comparing a roofline with a measurement needs one FLOP count: papers count FLOPs their own way (Megatron-LM counts
the recompute and non-causal attention, PaLM 6N + 12·L·H·Q·T), so each run's reported number is first turned into
a measured step time with the paper's own formula (`reported_step_s`), and that step time into an MFU with
scalebook's count (`reported_mfu`: model FLOPs ≈ 6·P·tokens + causal attention, no recompute, on scalebook's chip
peak). The roofline MFU of the same layout (`Row.predicted_mfu`) must be at least that: a roofline that does not
bound a real run is a bug to explain, not a number to hide (tests/test_planner_unified.py).

Pure Python. Numbers are the papers' as we read them (see each `confidence`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as training

NARAYANAN21 = (
    "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
    "Megatron-LM' (SC21), Table 1 (weak scaling, GPT models, Selene: DGX A100 80 GB, 8 × 200 Gb/s HDR "
    "InfiniBand per node)"
)
CHOWDHERY22 = (
    "Chowdhery et al. 2022, 'PaLM: Scaling Language Modeling with Pathways', Table 1 (model), "
    "Section 4 (two TPU v4 Pods of 3072 chips: 12-way model × 256-way fully sharded data parallelism "
    "per pod, data parallelism across pods), Table 3 (MFU 46.2%, HFU 57.8%, with rematerialization)"
)
DUBEY24 = (
    "Dubey et al. 2024, 'The Llama 3 Herd of Models', Table 4 (scaling configurations and MFU of Llama 3 "
    "405B pre-training, 8K sequences) and Section 3.3.2 (pipeline: interleaved schedule, one layer fewer on "
    "the first and the last stage)"
)


def _megatron_gpt(name: str, L: int, h: int, heads: int) -> tf.TransformerConfig:
    """A GPT model of Narayanan et al. 2021: 4h ungated MLP, MHA, vocabulary 51,200, learned positions (2048),
    biases and LayerNorm biases, tied embeddings — their parameter count 12·l·h²·(1 + 13/(12h) + (V + s)/(12lh))."""
    return tf.TransformerConfig(
        name,
        L=L,
        D=h,
        F=4 * h,
        N=heads,
        K=heads,
        H=h // heads,
        V=51_200,
        gated_mlp=False,
        tied_embeddings=True,
        linear_bias=True,
        norm_bias=True,
        max_positions=2048,
        source=NARAYANAN21,
    )


PALM_540B = tf.TransformerConfig(
    "palm-540b",
    L=118,
    D=18_432,
    F=4 * 18_432,
    N=48,
    K=1,
    H=256,
    V=256_000,
    tied_embeddings=True,
    norms_per_layer=1,
    source=CHOWDHERY22 + ": SwiGLU with d_ff = 4·d_model, multi-query attention (one K/V head), shared input-output "
    "embeddings, no biases, parallel attention and MLP behind one LayerNorm, 256k SentencePiece vocabulary",
)


@dataclass(frozen=True)
class PublishedRun:
    """One published training run. `layout` holds `evaluate_layout`'s keywords; `reported` is "tflops" (achieved
    TFLOP/s per chip, in `value` FLOP/s) or "mfu" (a fraction); `flop_count` names the paper's FLOP formula
    ("megatron": 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per iteration, recompute included; "palm": 6N + 12·L·H·Q·T
    per token; "scalebook": taken to be scalebook's own count, as the paper gives none); `peak` the chip peak the
    paper divides by (for "mfu")."""

    name: str
    model: tf.TransformerConfig | str
    chip: str
    n_chips: int
    batch_tokens: float
    seq_len: int
    layout: dict
    reported: str
    value: float
    flop_count: str
    citation: str
    peak: float | None = None
    assumptions: tuple[str, ...] = ()
    confidence: str = "published"
    options: dict = field(default_factory=dict)


_MEGATRON_OPTS = dict(grad_bytes=4.0, sequence_parallel=False, flash_attention=False)
_MEGATRON_ASSUMED = (
    "1F1B schedule (the table does not say whether a run interleaves; 1F1B has the larger bubble)",
    "micro-batches of one sequence",
    "no ZeRO (plain data parallelism)",
    "fp32 gradients (Megatron's main_grad); no sequence parallelism (2022) nor flash attention (2022)",
)

RUNS: tuple[PublishedRun, ...] = (
    PublishedRun(
        "Megatron-LM GPT 1T",
        _megatron_gpt("megatron-gpt-1t", 128, 25_600, 160),
        "a100",
        3072,
        3072 * 2048,
        2048,
        dict(dp=6, tp=8, pp=64, zero=0, remat="full", pipeline="1f1b", dtype="fp16"),
        "tflops",
        163e12,
        "megatron",
        NARAYANAN21 + ": 1008 B params, TP 8, PP 64, 3072 GPUs, batch 3072, "
        "163 TFLOP/s per GPU (52% of peak), full activation recomputation",
        assumptions=_MEGATRON_ASSUMED,
        confidence="recalled from the paper's Table 1; consistent with its 502 PFLOP/s aggregate",
        options=_MEGATRON_OPTS,
    ),
    PublishedRun(
        "Megatron-LM GPT 530B",
        _megatron_gpt("megatron-gpt-530b", 105, 20_480, 128),
        "a100",
        2520,
        2520 * 2048,
        2048,
        dict(dp=9, tp=8, pp=35, zero=0, remat="full", pipeline="1f1b", dtype="fp16"),
        "tflops",
        163e12,
        "megatron",
        NARAYANAN21 + ": 529.6 B params, TP 8, PP 35, 2520 GPUs, batch 2520, 163 TFLOP/s per GPU (52%)",
        assumptions=_MEGATRON_ASSUMED,
        confidence="recalled from the paper's Table 1; consistent with its 410.2 PFLOP/s aggregate",
        options=_MEGATRON_OPTS,
    ),
    PublishedRun(
        "Megatron-LM GPT 145.6B",
        _megatron_gpt("megatron-gpt-146b", 80, 12_288, 96),
        "a100",
        1536,
        2304 * 2048,
        2048,
        dict(dp=24, tp=8, pp=8, zero=0, remat="full", pipeline="1f1b", dtype="fp16"),
        "tflops",
        148e12,
        "megatron",
        NARAYANAN21 + ": 145.6 B params, TP 8, PP 8, 1536 GPUs, batch 2304, 148 TFLOP/s per GPU (47%)",
        assumptions=_MEGATRON_ASSUMED,
        confidence="recalled from the paper's Table 1; consistent with its 227.1 PFLOP/s aggregate",
        options=_MEGATRON_OPTS,
    ),
    PublishedRun(
        "PaLM 540B",
        PALM_540B,
        "tpu-v4p",
        6144,
        2048 * 2048,
        2048,
        dict(dp=512, tp=12, pp=1, zero=3, remat="full", slices=2),
        "mfu",
        0.462,
        "palm",
        CHOWDHERY22 + ": 6144 TPU v4, 2 pods × (12 TP × 256 FSDP), batch 2048 × 2048 tokens (the last "
        "of its batch-size stages), MFU 46.2%",
        peak=275e12,
        assumptions=(
            "full rematerialization (the paper's HFU/MFU = 1.25 implies partial; full is 1.33)",
            "one micro-batch per step (4 sequences per data shard)",
            "the 3072-chip slices as DCN slices of scalebook's v4 pod model",
        ),
        confidence="published (the paper's Tables 1 and 3)",
    ),
    PublishedRun(
        "Llama 3 405B, 16K GPUs",
        "llama3-405b",
        "h100",
        16_384,
        16 * 2**20,
        8192,
        dict(
            dp=128,
            tp=8,
            pp=16,
            zero=2,
            remat="selective",
            pipeline="interleaved",
            virtual_stages=8,
            stage_layers=(0,) + (1,) * 126 + (0,),
        ),
        "mfu",
        0.41,
        "scalebook",
        DUBEY24 + ": 16,384 H100, TP 8, CP 1, PP 16, DP 128, 8192-token sequences, 16 sequences per data "
        "shard, 16M tokens per batch, 400 TFLOP/s per GPU, 41% BF16 MFU",
        peak=989e12,
        assumptions=(
            "8 virtual stages of one layer, the first chunk embedding-only and the last logits-"
            "only (our reading of Section 3.3.2; the paper gives no number)",
            "ZeRO-2 (optimizer states and gradients sharded, as the paper's FSDP description)",
            "selective recomputation (the paper does not say; without it stage 0 needs > 80 GB in this model)",
            "the paper's FLOP count taken to be scalebook's",
        ),
        confidence="published (the paper's Table 4)",
    ),
    PublishedRun(
        "Llama 3 405B, 8K GPUs",
        "llama3-405b",
        "h100",
        8192,
        16 * 2**20,
        8192,
        dict(
            dp=64,
            tp=8,
            pp=16,
            zero=2,
            remat="selective",
            pipeline="interleaved",
            virtual_stages=8,
            stage_layers=(0,) + (1,) * 126 + (0,),
        ),
        "mfu",
        0.43,
        "scalebook",
        DUBEY24 + ": 8192 H100, TP 8, CP 1, PP 16, DP 64, 8192-token sequences, 32 sequences per data "
        "shard, 16M tokens per batch, 430 TFLOP/s per GPU, 43% BF16 MFU",
        peak=989e12,
        assumptions=("as the 16K-GPU run",),
        confidence="published (the paper's Table 4)",
    ),
)


def reported_step_s(run: PublishedRun) -> float:
    """The step time the paper's number implies, with the paper's own FLOP count (seconds)."""
    cfg = tf.get_model(run.model)
    seqs = run.batch_tokens / run.seq_len
    if run.flop_count == "megatron":
        B, s, l, h, V = seqs, run.seq_len, cfg.L, cfg.D, cfg.V
        flops = 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    elif run.flop_count == "palm":
        N = tf.param_count(cfg).total
        flops = run.batch_tokens * (6 * N + 12 * cfg.L * cfg.N * cfg.H * run.seq_len)
    elif run.flop_count == "scalebook":
        flops = run.batch_tokens * tf.training_flops_per_token(cfg, run.seq_len, causal=True)
    else:
        raise ValueError(f"unknown FLOP count {run.flop_count!r}")
    rate = run.value if run.reported == "tflops" else run.value * run.peak
    return flops / (run.n_chips * rate)


def estimate(run: PublishedRun) -> training.Estimate:
    """`training.evaluate_layout` on the run's published layout (practitioner conventions)."""
    return training.evaluate_layout(
        run.model,
        run.chip,
        n_chips=run.n_chips,
        batch_tokens=run.batch_tokens,
        seq_len=run.seq_len,
        **run.layout,
        **run.options,
    )


@dataclass(frozen=True)
class Row:
    """One run beside its roofline: the paper's number, it as an MFU in scalebook's FLOP count, the roofline MFU
    of the same layout, their ratio and one sentence on the gap."""

    run: PublishedRun
    estimate: training.Estimate
    reported_mfu: float
    predicted_mfu: float

    @property
    def bounds(self) -> bool:
        return self.estimate.feasible and self.predicted_mfu >= self.reported_mfu

    @property
    def ratio(self) -> float:
        """reported / predicted: the fraction of the roofline the run reached."""
        return self.reported_mfu / self.predicted_mfu

    @property
    def reported_text(self) -> str:
        r = self.run
        return f"{r.value / 1e12:.0f} TFLOP/s" if r.reported == "tflops" else f"{r.value:.1%} MFU"

    @property
    def gap(self) -> str:
        e = self.estimate
        if not e.feasible:
            return "the roofline calls the published layout infeasible: " + "; ".join(e.reasons)
        lost = []
        if e.bubble > 0.02:
            lost.append(f"a {e.bubble:.0%} pipeline bubble")
        if e.hardware_flops > 1.05 * e.model_flops:
            lost.append(f"{e.hardware_flops / e.model_flops - 1:.0%} recompute")
        comm = max((k for k in e.times if k != "compute"), key=e.times.get)
        if e.times[comm] > 0.5 * e.t_math:
            lost.append(f"{comm} at {e.times[comm] / e.t_math:.0%} of compute (overlapped here)")
        why = ", ".join(lost) if lost else "nothing but the peak"
        return (
            f"the roofline loses {why}; the run reached {self.ratio:.0%} of it — kernels below peak, "
            "unoverlapped communication and stragglers are what a roofline leaves out"
        )


def rosetta(runs=RUNS) -> list[Row]:
    """Every run's `Row`."""
    rows = []
    for run in runs:
        e = estimate(run)
        ours = run.batch_tokens * tf.training_flops_per_token(tf.get_model(run.model), run.seq_len, causal=True)
        C = get_chip(run.chip).peak_flops(run.layout.get("dtype", "bf16"))
        rows.append(Row(run, e, ours / (run.n_chips * C * reported_step_s(run)), e.mfu))
    return rows


def table(rows=None) -> list[list[str]]:
    """[run, chips, layout, reported, reported as MFU, roofline MFU, reported/predicted, the gap] per run."""
    out = []
    for r in rosetta() if rows is None else rows:
        lay = r.run.layout
        layout = f"DP {lay['dp']} × TP {lay['tp']} × PP {lay.get('pp', 1)}"
        out.append(
            [
                r.run.name,
                f"{r.run.n_chips} × {r.run.chip}",
                layout,
                r.reported_text,
                f"{r.reported_mfu:.1%}",
                f"{r.predicted_mfu:.1%}",
                f"{r.ratio:.2f}",
                r.gap,
            ]
        )
    return out


__all__ = [
    "NARAYANAN21",
    "CHOWDHERY22",
    "DUBEY24",
    "PALM_540B",
    "PublishedRun",
    "RUNS",
    "reported_step_s",
    "estimate",
    "Row",
    "rosetta",
    "table",
]
