"""Training parallelism: compute, communication and memory per strategy, and a planner (book ch. 5 and 6).

Notation (book ch. 5 "What Do We Mean By Scaling?"): B is the batch in **tokens** (the whole batch, not
per chip), D = d_model, F = d_ff, L layers; X chips of data parallelism (DP/FSDP), Y of tensor
parallelism (TP), Z pipeline stages; N = X·Y·Z chips; C = FLOPs/s per chip; W_ici = the bidirectional
bandwidth of one ICI axis (2 × one-way link; 1.8e11 B/s on TPU v5p); M_X, M_Y = how many hardware axes the
X and Y shardings span; α = C / W_ici (2550 on v5p).

Two layers of model:

1. The chapter's own model (`layer_costs`, the thresholds, `step_collectives`): a stack of MLP blocks
   In[B, D] · W_in[D, F] · W_out[F, D] in bf16, with the per-layer compute and communication of the
   chapter's table, and the compute-bound conditions derived from the forward pass.
2. The planner (`plan`, `evaluate`): the same rules applied to a whole `TransformerConfig` — attention and
   MLP blocks, embeddings, MoE experts, pipeline bubbles, DCN across slices, Adam memory and activation
   checkpoints — to rank every configuration that fits a mesh and HBM by estimated step time. Its FLOPs,
   validity rules and memory are shared with the GPU planner (`gpu_training`, book ch. 12).

Overlap: like the book, communication on different axes and compute are assumed to overlap, so a step
takes max(T_math, T_comms on each axis) — a roofline (lower bound), not a simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Sequence

from . import gpus
from . import transformer as tf
from .hardware import ChipSpec, get_chip
from .units import format_bytes, format_si, format_time, is_int, require_positive

CH5 = "book ch. 5 'How to Parallelize a Transformer for Training'"
CH6 = "book ch. 6 'Training LLaMA 3 on TPUs'"

#: the chapter's four schemes (book ch. 5): data parallelism, fully-sharded DP (ZeRO-3), tensor parallelism, both
STRATEGIES = ("dp", "fsdp", "tp", "fsdp+tp")
#: bf16 parameters (2) + fp32 Adam first and second moments (8): book ch. 5 "Data Parallelism"
ADAM_BYTES_PER_PARAM = 10
PARAM_BYTES, OPTIMIZER_BYTES = 2, 8
ACT_BYTES = 2  # bf16 activations


# --- hardware ratios ------------------------------------------------------------------------------


def _tpu(chip) -> ChipSpec:
    spec = get_chip(chip)
    if spec.ici_link_bandwidth_oneway_bytes_per_s is None:
        raise ValueError(f"{spec.name} has no ICI figure; the chapter-5 model needs a TPU (e.g. 'tpu-v5p'). "
                         "GPU networking is chapter 12's subject.")
    return spec


def ici_bandwidth(chip="tpu-v5p") -> float:
    """W_ici: bytes/s of one ICI axis, both directions (2 × one-way link; v5p 2 × 9e10 = 1.8e11). Book ch. 5."""
    return _tpu(chip).ici_link_bandwidth_bidi_bytes_per_s


def dcn_bandwidth(chip="tpu-v5p") -> float:
    """W_dcn: DCN egress per chip, bytes/s (v5p 6.25e9: 25 GB/s per host over 4 chips; book ch. 5)."""
    spec = _tpu(chip)
    if spec.dcn_bandwidth_bytes_per_s is None:
        raise ValueError(f"{spec.name} has no DCN figure in the book")
    return spec.dcn_bandwidth_bytes_per_s


def alpha(chip="tpu-v5p", dtype: str = "bf16") -> float:
    """α = C / W_ici, FLOPs per byte (v5p bf16: 4.59e14 / 1.8e11 = 2550). Book ch. 5 notation."""
    return _tpu(chip).peak_flops(dtype) / ici_bandwidth(chip)


def alpha_dcn(chip="tpu-v5p", dtype: str = "bf16") -> float:
    """C / W_dcn: tokens per slice that pure DP across slices needs (v5p: 73,440). Book ch. 5 "Scaling Across Pods"."""
    return _tpu(chip).peak_flops(dtype) / dcn_bandwidth(chip)


def _axes(M: int, name: str) -> int:
    if not is_int(M) or M < 1:
        raise ValueError(f"{name} (hardware axes spanned) must be a positive integer (1, 2 or 3), got {M!r}")
    return int(M)


# --- the chapter's compute-bound conditions ------------------------------------------------------


def max_params_pure_dp(chip="tpu-v5p", bytes_per_param: float = ADAM_BYTES_PER_PARAM) -> float:
    """Largest model pure DP can train: HBM / (bytes per parameter). v5p with Adam: 96e9/10 = 9.6e9 (≈ 9B)."""
    require_positive(bytes_per_param=bytes_per_param)
    return get_chip(chip).hbm_bytes / bytes_per_param


def dp_min_batch_per_chip(chip="tpu-v5p", M_X: int = 1, dtype: str = "bf16") -> float:
    """DP and FSDP are compute-bound when the batch per chip B/X exceeds α / M_X (v5p: 2550, or 850 on 3 axes).

    DP: T_math = 8BDF/(XC) vs T_comms = 8DF/W (two gradient AllReduces); FSDP's forward: 4BDF/(XC) vs 4DF/W.
    Book ch. 5 "Data Parallelism", "FSDP".
    """
    return alpha(chip, dtype) / _axes(M_X, "M_X")


fsdp_min_batch_per_chip = dp_min_batch_per_chip


def tp_max_degree(F: float, chip="tpu-v5p", M_Y: int = 1, dtype: str = "bf16") -> float:
    """TP is compute-bound while Y < M_Y · F / α (independent of the batch). Book ch. 5 "Tensor Parallelism"."""
    require_positive(F=F)
    return _axes(M_Y, "M_Y") * F / alpha(chip, dtype)


def tp_min_F(Y: float, chip="tpu-v5p", M_Y: int = 1, dtype: str = "bf16") -> float:
    """The d_ff needed for Y-way TP to stay compute-bound: F > Y · α / M_Y (v5p, 8-way: 20,400)."""
    require_positive(Y=Y)
    return Y * alpha(chip, dtype) / _axes(M_Y, "M_Y")


def mixed_min_batch_per_chip(F: float, chip="tpu-v5p", M_X: int = 2, M_Y: int = 1, dtype: str = "bf16") -> float:
    """FSDP + TP at the optimal split is compute-bound when B/N > α² / (M_X · M_Y · F) (v5p, F = 32,768: ≈ 99).

    Book ch. 5 "Combining FSDP and Tensor Parallelism" (current text, max() of the two axes' times).
    """
    require_positive(F=F)
    return alpha(chip, dtype) ** 2 / (_axes(M_X, "M_X") * _axes(M_Y, "M_Y") * F)


def optimal_fsdp_degree(B: float, F: float, N: float, M_X: int = 2, M_Y: int = 1) -> float:
    """X_opt = sqrt((B / F) · (M_X / M_Y) · N): equalises the FSDP and TP communication times (real-valued).

    Book ch. 5: N = 64, B = 48,000, F = 32,768, M_X/M_Y = 2 → 13.7 (the book prints 13.9).
    """
    require_positive(B=B, F=F, N=N)
    return math.sqrt(B / F * _axes(M_X, "M_X") / _axes(M_Y, "M_Y") * N)


def all_comm_bound_batch(N: float, F: float, chip="tpu-v5p", M_X: int = 2, M_Y: int = 1,
                         dtype: str = "bf16") -> float:
    """Total batch below which even the best FSDP + TP split is communication-bound: N · α² / (M_X M_Y F)."""
    require_positive(N=N)
    return N * mixed_min_batch_per_chip(F, chip, M_X, M_Y, dtype)


def fsdp_tp_degrees(B: float, F: float, N: int, M_X: int = 2, M_Y: int = 1) -> tuple[int, int]:
    """(X, Y) as the book picks them: X = X_opt rounded to the nearest power of two (log scale), Y = the
    largest power of two with X·Y ≤ N. Book ch. 5 E6 (64 chips → 16 × 4), E9 (1M batch on a pod → 1024 × 8,
    8192 of the 8960 chips: the book's "8k" pod) and ch. 6 (4M batch on 8960 chips → 2048 × 4)."""
    X = round_pow2(optimal_fsdp_degree(B, F, N, M_X, M_Y))
    return X, 2 ** math.floor(math.log2(N / X))


def min_chips_for_memory(total_bytes: float, chip="tpu-v5p") -> int:
    """The fewest chips whose HBM holds `total_bytes` (book ch. 6: 11.2 TB on 96 GB v5p chips → 117)."""
    require_positive(total_bytes=total_bytes)
    return math.ceil(total_bytes / get_chip(chip).hbm_bytes)


def round_pow2(x: float) -> int:
    """The power of two nearest to x on a log scale (how the book turns X_opt into a mesh degree)."""
    require_positive(x=x)
    return 2 ** round(math.log2(x))


def training_time(params: float, tokens: float, n_chips: float, chip="tpu-v5p", mfu: float = 1.0,
                  dtype: str = "bf16") -> float:
    """Seconds to train: 6 · params · tokens / (n_chips · C · MFU). Book ch. 5 / ch. 6 ("days to train")."""
    require_positive(params=params, tokens=tokens, n_chips=n_chips, mfu=mfu)
    if mfu > 1:
        raise ValueError(f"mfu is a fraction in (0, 1], got {mfu}")
    return 6 * params * tokens / (n_chips * get_chip(chip).peak_flops(dtype) * mfu)


# --- the chapter's per-layer model (MLP stack) ------------------------------------------------------


@dataclass(frozen=True)
class LayerCosts:
    """One MLP layer In[B,D]·W_in[D,F]·W_out[F,D] under a strategy, per chip (s, FLOPs, bytes).

    `t_comms_x` is the DP/FSDP axis, `t_comms_y` the TP axis; they overlap, so t_comms = max of the two.
    """

    strategy: str
    phase: str
    flops_per_chip: float
    t_math: float
    t_comms_x: float
    t_comms_y: float

    @property
    def t_comms(self) -> float:
        return max(self.t_comms_x, self.t_comms_y)

    @property
    def ratio(self) -> float:
        """T_math / T_comms (> 1: compute-bound; inf when there is no communication)."""
        return math.inf if self.t_comms == 0 else self.t_math / self.t_comms

    @property
    def bound(self) -> str:
        return "compute-bound" if self.ratio >= 1 else "communication-bound"

    @property
    def time(self) -> float:
        return max(self.t_math, self.t_comms)


def _degrees(strategy: str, N: int, X: int | None, Y: int | None) -> tuple[int, int]:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy in ("dp", "fsdp"):
        X, Y = (N if X is None else X), 1 if Y is None else Y
        if Y != 1:
            raise ValueError(f"{strategy} has no TP axis: Y must be 1, got {Y}")
    elif strategy == "tp":
        X, Y = 1 if X is None else X, (N if Y is None else Y)
        if X != 1:
            raise ValueError(f"tp has no data axis: X must be 1, got {X}")
    else:
        if X is None and Y is None:
            raise ValueError("fsdp+tp needs the degrees: pass X (FSDP) and Y (TP) with X·Y = N")
        X = N // Y if X is None else X
        Y = N // X if Y is None else Y
    for name, v in (("X", X), ("Y", Y), ("N", N)):
        if not is_int(v) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if X * Y != N:
        raise ValueError(f"degrees X·Y = {X}·{Y} = {X * Y} must equal the chip count N = {N}")
    return int(X), int(Y)


def layer_costs(strategy: str, B: float, D: float, F: float, N: int, *, X: int | None = None, Y: int | None = None,
                chip="tpu-v5p", M_X: int = 1, M_Y: int = 1, phase: str = "forward", dtype: str = "bf16") -> LayerCosts:
    """Compute and communication time of one MLP layer (book ch. 5 table "compute and comms per layer").

    FLOPs per chip: forward 4BDF/n, backward 8BDF/n (n = X for DP/FSDP, Y for TP, XY for both).
    Communication (divide by W_ici · M for time):
      DP 0 forward, 8DF backward; FSDP 4DF + 8DF; TP 4BD + 4BD; FSDP+TP (4BD/X + 4DF/Y) + (8BD/X + 8DF/Y).
    phase: "forward" (what the book's thresholds are derived from), "backward" or "step" (both).
    """
    if phase not in ("forward", "backward", "step"):
        raise ValueError(f"phase must be 'forward', 'backward' or 'step', got {phase!r}")
    require_positive(B=B, D=D, F=F)
    X, Y = _degrees(strategy, N, X, Y)
    C, W = get_chip(chip).peak_flops(dtype), ici_bandwidth(chip)
    wx, wy = W * _axes(M_X, "M_X"), W * _axes(M_Y, "M_Y")
    fwd, bwd = phase in ("forward", "step"), phase in ("backward", "step")
    flops = (4 * fwd + 8 * bwd) * B * D * F / (X * Y)
    cx = cy = 0.0
    if strategy == "dp":
        cx = 8 * D * F * bwd
    elif strategy == "fsdp":
        cx = 4 * D * F * fwd + 8 * D * F * bwd
    elif strategy == "tp":
        cy = 4 * B * D * (fwd + bwd)
    else:
        cx = (4 * fwd + 8 * bwd) * D * F / Y
        cy = (4 * fwd + 8 * bwd) * B * D / X
    return LayerCosts(strategy, phase, flops, flops / C, cx / wx, cy / wy)


def comms_ratio(strategy: str, batch_per_chip: float, F: float, N: int, chip="tpu-v5p", n_axes: int = 3,
                dtype: str = "bf16") -> float:
    """T_math / T_comms of the book's central figure (ch. 5, forward pass) at a batch per chip B/N.

    dp, fsdp: (B/N) · M / α over all `n_axes`; tp (Y = N on one axis): F / (N α); fsdp+tp with M_X = n_axes − 1,
    M_Y = 1 at the best real-valued split: T_math/T_comms = (BF/(Nα)) / max(F·X/(N·M_X), B/(X·M_Y)) with
    X = X_opt — sqrt(B F M_X M_Y / N) / α (communication grows like √B, compute like B). Where X_opt ≥ N no
    TP is left and the curve is pure FSDP's over all axes; where X_opt < 1 it is X = 1 (all TP).
    """
    require_positive(batch_per_chip=batch_per_chip, F=F, N=N)
    a, M = alpha(chip, dtype), _axes(n_axes, "n_axes")
    if strategy in ("dp", "fsdp"):
        return batch_per_chip * M / a
    if strategy == "tp":
        return F / (N * a)
    if strategy == "fsdp+tp":
        M_X, M_Y = max(M - 1, 1), 1
        B = batch_per_chip * N
        X = optimal_fsdp_degree(B, F, N, M_X, M_Y)
        if X >= N:  # no TP left: pure FSDP over all axes
            return batch_per_chip * M / a
        X = max(X, 1.0)
        return (B * F / (N * a)) / max(F * X / (N * M_X), B / (X * M_Y))
    raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


@dataclass(frozen=True)
class Collective:
    """One collective of the chapter's algorithm boxes, per MLP layer.

    kind: the HLO spelling ("all-gather", "reduce-scatter", "all-reduce"); axis: "X" (data) or "Y" (model);
    array: what moves; shape: its full (unsharded over `axis`) per-device shape, in elements — an AllGather's
    output, a ReduceScatter's input, an AllReduce's operand; nbytes: that shape × bytes per element.
    """

    kind: str
    axis: str
    phase: str
    array: str
    shape: tuple[int, ...]
    nbytes: float


def step_collectives(strategy: str, *, B: int, D: int, F: int, X: int = 1, Y: int = 1,
                     bytes_per_element: float = 2, regather: bool = True) -> list[Collective]:
    """The collectives one training step of one MLP layer performs (book ch. 5 algorithm boxes).

    DP: backward AllReduce_X of dW_out and dW_in. FSDP: forward AllGather_X of W_in, W_out; backward
    ReduceScatter_X of both gradients (and, with `regather`, AllGather_X of both weights again). TP: forward
    AllGather_Y of In and ReduceScatter_Y of Out; backward AllGather_Y of dOut and ReduceScatter_Y of dIn.
    FSDP+TP: both, with the TP collectives on [B/X, D] and the FSDP ones on [D, F/Y].
    """
    X, Y = _degrees(strategy, X * Y, X, Y)
    b = bytes_per_element
    out: list[Collective] = []

    def add(kind, axis, phase, array, shape):
        out.append(Collective(kind, axis, phase, array, tuple(int(s) for s in shape), math.prod(shape) * b))

    fsdp, tp = strategy in ("fsdp", "fsdp+tp"), strategy in ("tp", "fsdp+tp")
    Bl, Fl = B // X, F // Y
    if strategy == "dp":
        add("all-reduce", "X", "backward", "dW_out", (F, D))
        add("all-reduce", "X", "backward", "dW_in", (D, F))
    if tp:
        add("all-gather", "Y", "forward", "In", (Bl, D))
        add("reduce-scatter", "Y", "forward", "Out", (Bl, D))
        add("all-gather", "Y", "backward", "dOut", (Bl, D))
        add("reduce-scatter", "Y", "backward", "dIn", (Bl, D))
    if fsdp:
        add("all-gather", "X", "forward", "W_in", (D, Fl))
        add("all-gather", "X", "forward", "W_out", (Fl, D))
        add("reduce-scatter", "X", "backward", "dW_out", (Fl, D))
        add("reduce-scatter", "X", "backward", "dW_in", (D, Fl))
        if regather:
            add("all-gather", "X", "backward", "W_out", (Fl, D))
            add("all-gather", "X", "backward", "W_in", (D, Fl))
    return out


def bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle fraction of a GPipe schedule, (P − 1) / (M + P − 1) for P stages and M microbatches.

    Not in the book (ch. 5 describes the bubble qualitatively); the formula is from GPipe (Huang et al. 2019).
    """
    for name, v in (("stages", stages), ("microbatches", microbatches)):
        if not is_int(v) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return (stages - 1) / (microbatches + stages - 1)


# --- memory ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Bytes per chip: parameters, gradients, optimizer state, activation checkpoints, FSDP's gathered layer."""

    params: float
    grads: float
    optimizer: float
    activations: float
    gathered: float = 0.0

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.gathered

    def describe(self) -> str:
        parts = ", ".join(f"{k} {format_bytes(getattr(self, k))}" for k in
                          ("params", "grads", "optimizer", "activations", "gathered") if getattr(self, k))
        return f"{format_bytes(self.total)} per chip ({parts})"


def checkpoint_bytes(D: float, L: float, tokens: float, per_layer: float, dtype_bytes: float = ACT_BYTES) -> float:
    """Activation checkpoints: per_layer tensors of width D per token and layer: per_layer·D·tokens·L·bytes.

    Book ch. 6: 2 per layer (layer input and after attention) → 2·D·B·2·L bytes in bf16.
    """
    require_positive(D=D, L=L, tokens=tokens, per_layer=per_layer)
    return per_layer * D * tokens * L * dtype_bytes


def training_memory(params: float, *, zero: int = 3, X: int = 1, model_shards: int = 1,
                    activation_bytes_total: float = 0.0, n_chips: int = 1, grad_bytes: float = 0.0,
                    gathered_bytes: float = 0.0) -> Memory:
    """Per-chip memory of Adam training with ZeRO stage `zero` over X data-parallel chips.

    ZeRO-1 shards the optimizer state over X, ZeRO-2 also the gradients, ZeRO-3 (FSDP) also the parameters
    (book ch. 5 "FSDP"); `model_shards` (TP × PP) divides everything. bf16 params (2 B), fp32 Adam moments
    (8 B); gradients cost `grad_bytes` per parameter — 0 by default, as the book's 10 bytes/param does.
    Activations are spread evenly over all `n_chips`.
    """
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0 (plain DP), 1, 2 or 3 (FSDP), got {zero!r}")
    require_positive(params=params, X=X, model_shards=model_shards, n_chips=n_chips)
    p = params / model_shards
    return Memory(params=PARAM_BYTES * p / (X if zero >= 3 else 1),
                  grads=grad_bytes * p / (X if zero >= 2 else 1),
                  optimizer=OPTIMIZER_BYTES * p / (X if zero >= 1 else 1),
                  activations=activation_bytes_total / n_chips, gathered=gathered_bytes)


# --- the planner --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One way to lay out a training step: `slices` ICI slices joined by DCN (pure DP across them); inside a
    slice X data-parallel chips (ZeRO stage `zero`; 0 = plain DP, 3 = FSDP), Y-way TP, Z pipeline stages."""

    X: int
    Y: int = 1
    Z: int = 1
    slices: int = 1
    zero: int = 3
    remat: str = "block"
    microbatches: int = 1

    @property
    def chips(self) -> int:
        return self.X * self.Y * self.Z * self.slices

    @property
    def name(self) -> str:
        data = ("FSDP" if self.zero == 3 else "DP" if self.zero == 0 else f"DP+ZeRO-{self.zero}")
        parts = [f"{data} {self.X}"] if self.X > 1 else []
        if self.Y > 1:
            parts.append(f"TP {self.Y}")
        if self.Z > 1:
            parts.append(f"PP {self.Z}")
        name = " × ".join(parts) or "1 chip"
        return f"{name} × {self.slices} slices (DCN)" if self.slices > 1 else name


@dataclass(frozen=True)
class Estimate:
    """A configuration's estimated step (seconds per step, per chip) and whether it is feasible."""

    config: Config
    feasible: bool
    reason: str
    t_math: float
    t_fsdp: float
    t_tp: float
    t_pp: float
    t_ep: float
    t_dcn: float
    bubble: float
    memory: Memory
    model_flops: float
    tokens_per_chip: float
    seq_shards: int
    chip: str
    peak_flops_per_s: float

    @property
    def times(self) -> dict[str, float]:
        return {"compute": self.t_math, "DP/FSDP comms": self.t_fsdp, "TP comms": self.t_tp,
                "pipeline transfers": self.t_pp, "expert AllToAlls": self.t_ep, "DCN": self.t_dcn}

    @property
    def step_time(self) -> float:
        return max(self.times.values())

    @property
    def bound(self) -> str:
        """What sets the step time: 'compute' (with a pipeline: 'compute + pipeline bubble', since the idle
        stages are folded into T_math) or the name of the slowest communication."""
        k = max(self.times, key=self.times.get)
        return "compute + pipeline bubble" if k == "compute" and self.bubble > 0 else k

    @property
    def compute_bound(self) -> bool:
        return self.bound.startswith("compute")

    @property
    def family(self) -> str:
        """'dp' (ZeRO 0–2), 'fsdp' (ZeRO-3), 'tp', 'dp+tp', 'fsdp+tp', or 'pp' (any layout with stages)."""
        c = self.config
        if c.Z > 1:
            return "pp"
        data = "fsdp" if c.zero == 3 else "dp"
        if c.Y > 1:
            return f"{data}+tp" if c.X > 1 else "tp"
        return data

    @property
    def mfu(self) -> float:
        """Roofline MFU: model FLOPs (≈ 6·P·tokens, no remat recompute) / (chips · C · step time).

        An upper bound: the step time assumes matmuls at peak and perfect overlap, so a compute-bound layout
        without remat or bubble reads 100%; real runs reach about 40–60% (the book's exercises assume 40–50%).
        """
        return self.model_flops / (self.config.chips * self.peak_flops_per_s * self.step_time)

    def summary(self) -> str:
        if not self.feasible:
            return f"{self.config.name}: infeasible — {self.reason}"
        return (f"{self.config.name} (ZeRO-{self.config.zero}, {self.config.remat} remat): "
                f"{format_time(self.step_time)}/step, MFU {self.mfu:.0%}, bound by {self.bound}, "
                f"{format_bytes(self.memory.total)}/{'GPU' if get_chip(self.chip).kind == 'gpu' else 'chip'}")


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def ici_axes(chip, X: int, Y: int) -> tuple[int, int]:
    """(M_X, M_Y): hardware axes spanned by the data and TP shardings. Book ch. 5's simplification: TP on one
    axis (two if Y exceeds the longest axis), data parallelism on the rest; all axes when there is no TP."""
    spec = _tpu(chip)
    n = spec.ici_torus_dims or 1
    if Y == 1:
        return n, 1
    longest = max(spec.pod_shape or (Y,))
    M_Y = 1 if Y <= longest else min(2, n)
    return max(n - M_Y, 1), M_Y


def _remat_policy(remat) -> tuple[str, float | None]:
    """A policy name of transformer.REMAT_TENSORS_PER_LAYER, or a number of D-wide checkpoints per layer
    (book ch. 6: 2, with the FLOPs of block remat)."""
    if isinstance(remat, str):
        tf._policy(remat)
        return remat, None
    require_positive(checkpoints_per_layer=remat)
    return "block", float(remat)


def evaluate(model, batch_tokens: float, config: Config, chip="tpu-v5p", *, seq_len: int = 4096,
             n_chips: int | None = None, allow_sequence_sharding: bool = True, grad_bytes: float = 0.0,
             dtype: str = "bf16") -> Estimate:
    """Estimate one configuration for `model` (a preset name or TransformerConfig) and a global batch of
    `batch_tokens` tokens in sequences of `seq_len`.

    Raises ValueError when the degrees do not multiply to `n_chips` (if given); returns an infeasible
    Estimate, with the reason, when the degrees do not divide the model (TP must divide N heads and F,
    PP must divide L), when the batch cannot give every data shard a token (more data shards than
    sequences needs sequence sharding, `seq_shards`; shards may be uneven, i.e. padded), or when the
    memory exceeds HBM.

    Per step and chip (L' = L/Z layers per stage, B_s = batch per slice, P parameters, P' = P/(Y·Z)):
      T_math = tokens · FLOPs/token (with remat) / (chips · C) / (1 − bubble)
      T_fsdp = 3 · 2P' / (W_ici · M_X) for FSDP (AllGather fwd + bwd, ReduceScatter), 2 · 2P' / (W M_X) for DP
      T_tp   = L' · 2 blocks · 12 · (B_s/X) · D / (W_ici · M_Y)   (the table's FSDP+TP row: 4BD/X forward +
               8BD/X backward per block, so backward/forward = 2 as for compute and the step's TP threshold is
               the forward one the book derives, Y < M_Y·F/α)
      T_dcn  = 2 · 2P / (chips per slice · W_dcn)                  (gradient AllReduce over DCN)
      T_ep   = MoE layers' 4 AllToAlls of k·(B_s/X)·D bf16, each ¼ of an AllGather (book ch. 4)
    """
    cfg = tf.get_model(model)
    spec = _tpu(chip)
    c = config
    _check_layout(c)
    if n_chips is not None and c.chips != n_chips:
        raise ValueError(f"degrees X·Y·Z·slices = {c.X}·{c.Y}·{c.Z}·{c.slices} = {c.chips} must equal the chip "
                         f"count {n_chips}")
    require_positive(batch_tokens=batch_tokens, seq_len=seq_len)
    C, W = spec.peak_flops(dtype), ici_bandwidth(spec)
    n_slice = c.X * c.Y * c.Z
    M_X, M_Y = ici_axes(spec, c.X, c.Y)
    pc = tf.param_count(cfg)
    P = pc.total
    expert = _routed_expert_params(cfg)
    reasons, seq_shards, tokens_per_shard = _reasons(cfg, c, batch_tokens, seq_len, allow_sequence_sharding)
    ep = _ep_degree(cfg, c.X)
    t_math, model_flops, bubble = _flops(cfg, batch_tokens, c, seq_len, C)
    # communication
    P_gathered = (P - expert) / (c.Y * c.Z)  # expert weights stay on their EP shard
    if c.X == 1:
        t_fsdp = 0.0
    else:
        colls = 3 if c.zero == 3 else 2
        t_fsdp = colls * PARAM_BYTES * P_gathered / (W * M_X)
        if expert:  # expert gradients are reduced over the data chips that share an expert shard
            t_fsdp += 2 * PARAM_BYTES * expert / (ep * c.Y * c.Z) / (W * M_X) * (c.X > ep)
    layers_per_stage = _layers_per_stage(cfg, c.Z)
    t_tp = 0.0 if c.Y == 1 else layers_per_stage * 2 * 12 * tokens_per_shard * cfg.D / (W * M_Y)
    t_pp = 0.0 if c.Z == 1 else 2 * 2 * tokens_per_shard * cfg.D / spec.ici_link_bandwidth_oneway_bytes_per_s
    t_ep = 0.0
    if cfg.is_moe and ep > 1:
        moe_per_stage = cfg.moe_layers / c.Z
        t_ep = moe_per_stage * 4 * ACT_BYTES * cfg.k * tokens_per_shard * cfg.D * ep / (4 * W * M_X) / c.Y
    t_dcn = 0.0 if c.slices == 1 else 2 * PARAM_BYTES * P / (n_slice * dcn_bandwidth(spec))
    memory = _memory(cfg, c, batch_tokens, grad_bytes)
    reasons += _hbm_reasons(memory, spec)
    return Estimate(c, not reasons, "; ".join(reasons), t_math, t_fsdp, t_tp, t_pp, t_ep, t_dcn, bubble, memory,
                    model_flops, batch_tokens / c.chips, seq_shards, spec.name, C)


# The parts of an estimate that do not depend on the network: shared by this planner and the GPU one
# (gpu_training.evaluate, book ch. 12), which differ only in their communication times.


def _check_layout(c: Config) -> None:
    """ValueError unless every degree of `c` (and its microbatch count) is a positive integer."""
    for name in ("X", "Y", "Z", "slices", "microbatches"):
        v = getattr(c, name)
        if not is_int(v) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def _reasons(cfg: tf.TransformerConfig, c: Config, batch_tokens: float, seq_len: float,
             allow_sequence_sharding: bool) -> tuple[list[str], int, float]:
    """(reasons the layout cannot run, sequence shards, tokens per data shard) for a batch of `batch_tokens`.

    TP must divide the N heads and F, PP the L layers; each of the X data shards (a Y·Z group of chips) of a
    slice needs at least one token, and more shards than sequences needs sequence sharding (uneven shards
    are padded) into at most `seq_len` pieces. Book ch. 5–6.
    """
    B_s = batch_tokens / c.slices
    tokens_per_shard = B_s / c.X  # tokens each data shard (a Y·Z group of chips) processes
    sequences = B_s / seq_len
    seq_shards = 1
    reasons = []
    if cfg.N % c.Y or cfg.F % c.Y:
        reasons.append(f"TP degree {c.Y} must divide N={cfg.N} heads and F={cfg.F}")
    if cfg.L % c.Z:
        reasons.append(f"{c.Z} pipeline stages must divide L={cfg.L} layers")
    if tokens_per_shard < 1:
        reasons.append(f"{c.X}-way data parallelism leaves less than one token per shard (batch per slice {B_s:g})")
    elif c.X > sequences:
        seq_shards = math.ceil(c.X / max(sequences, 1))
        if not allow_sequence_sharding:
            reasons.append(f"{c.X}-way data parallelism exceeds the {sequences:g} sequences of the batch "
                           "(sequence sharding not allowed)")
        elif seq_shards > seq_len:
            reasons.append(f"{c.X}-way data parallelism needs {seq_shards} shards per sequence of {seq_len} tokens")
    return reasons, seq_shards, tokens_per_shard


def _flops(cfg: tf.TransformerConfig, batch_tokens: float, c: Config, seq_len: float,
           C: float) -> tuple[float, float, float]:
    """(T_math, model FLOPs, bubble) of one step on `c.chips` chips of C FLOPs/s each:
    T_math = tokens · FLOPs/token (with the remat recompute) / (chips · C) / (1 − bubble), the bubble of a
    GPipe schedule of `c.microbatches` over Z stages; model FLOPs leave the recompute out (for MFU)."""
    policy, _ = _remat_policy(c.remat)
    flops_per_token = tf.training_flops_per_token(cfg, seq_len, causal=True, remat=policy)
    model_flops = batch_tokens * tf.training_flops_per_token(cfg, seq_len, causal=True)
    m = c.microbatches if c.Z > 1 else 1
    bubble = bubble_fraction(c.Z, m) if c.Z > 1 else 0.0
    t_math = batch_tokens * flops_per_token / (c.chips * C) / (1 - bubble)
    return t_math, model_flops, bubble


def _memory(cfg: tf.TransformerConfig, c: Config, batch_tokens: float, grad_bytes: float) -> Memory:
    """Bytes per chip of layout `c`: `training_memory` of the dense parameters (ZeRO over X, TP × PP shards),
    the routed experts sharded over ep·Y·Z chips, the activations of the remat policy (or checkpoints) spread
    over all chips, and under FSDP the AllGathered layer being used (2 layers' worth, ÷ Y). Book ch. 5–6."""
    policy, ckpt = _remat_policy(c.remat)
    pc = tf.param_count(cfg)
    P, expert = pc.total, _routed_expert_params(cfg)
    if ckpt is None:
        act_total = tf.activation_bytes(cfg, batch_tokens, policy)
    else:
        act_total = checkpoint_bytes(cfg.D, cfg.L, batch_tokens, ckpt)
    layer_params = (P - pc.embedding - pc.unembedding) / cfg.L
    gathered = 2 * PARAM_BYTES * layer_params / c.Y if (c.zero == 3 and c.X > 1) else 0.0
    dense = training_memory(P - expert, zero=c.zero, X=c.X, model_shards=c.Y * c.Z,
                            activation_bytes_total=act_total, n_chips=c.chips, grad_bytes=grad_bytes,
                            gathered_bytes=gathered)
    if expert:
        ex = training_memory(expert, zero=0, model_shards=_ep_degree(cfg, c.X) * c.Y * c.Z, grad_bytes=grad_bytes)
        dense = replace(dense, params=dense.params + ex.params, grads=dense.grads + ex.grads,
                        optimizer=dense.optimizer + ex.optimizer)
    return dense


def _hbm_reasons(memory: Memory, spec: ChipSpec, unit: str = "chip") -> list[str]:
    """[the reason] when `memory` exceeds the chip's HBM, else []."""
    if memory.total > spec.hbm_bytes:
        return [f"needs {format_bytes(memory.total)} per {unit} > {format_bytes(spec.hbm_bytes)} HBM"]
    return []


def _ep_degree(cfg: tf.TransformerConfig, X: int) -> int:
    """Expert parallelism over the data axis: ep = gcd(X, E) ways (1 for a dense model)."""
    return math.gcd(X, cfg.E) if cfg.is_moe else 1


def _layers_per_stage(cfg: tf.TransformerConfig, Z: int) -> float:
    return cfg.L // Z if cfg.L % Z == 0 else cfg.L / Z


def _layouts(n: int, max_tp: int, max_pp: int) -> Iterator[tuple[int, int, int]]:
    """Every (X, Y, Z) with X·Y·Z = n, Y ≤ max_tp, Z ≤ max_pp (Y, then Z ascending)."""
    divs = _divisors(n)
    for Y in (d for d in divs if d <= max_tp):
        for Z in (d for d in divs if d <= max_pp and (n // Y) % d == 0):
            yield n // (Y * Z), Y, Z


def _microbatches(batch_tokens: float, seq_len: float, X: int, Z: int, per_stage: int) -> int:
    """Microbatches of a Z-stage pipeline: per_stage·Z, capped by the sequences of a data shard (1 without PP)."""
    if Z == 1:
        return 1
    return min(per_stage * Z, max(int(batch_tokens / seq_len / X), 1))


def _rank_key(e: Estimate) -> tuple:
    """The planners' order. Ties (several layouts compute-bound) go first to the higher ZeRO stage — same
    speed, less memory, the book's "basically always use ZeRO-3" — then to the most communication headroom
    (the book's X_opt, which balances the FSDP and TP times), then to less memory."""
    return (not e.feasible, float(f"{e.step_time:.9g}"), -e.config.zero,
            max(e.t_fsdp, e.t_tp, e.t_pp, e.t_ep, e.t_dcn), e.memory.total)


def _routed_expert_params(cfg: tf.TransformerConfig) -> int:
    if not cfg.is_moe:
        return 0
    width = cfg.F_expert or cfg.F
    return cfg.moe_layers * cfg.E * cfg.mlp_matrices * cfg.D * width


@dataclass(frozen=True)
class Plan:
    """Every configuration considered, fastest feasible first; `best` and `explain()` for the winner."""

    model: tf.TransformerConfig
    chip: str
    n_chips: int
    batch_tokens: float
    seq_len: int
    estimates: tuple[Estimate, ...]

    @property
    def feasible(self) -> list[Estimate]:
        return [e for e in self.estimates if e.feasible]

    @property
    def best(self) -> Estimate:
        if not self.feasible:
            reasons = sorted({e.reason for e in self.estimates})[:3]
            raise ValueError(f"no configuration of {self.model.name} fits {self.n_chips} {self.chip} chips with a batch "
                             f"of {format_si(self.batch_tokens)} tokens; e.g. " + " | ".join(reasons))
        return self.feasible[0]

    def best_of(self, family: str) -> Estimate | None:
        """The fastest feasible estimate of one family (see `Estimate.family`), or None."""
        return next((e for e in self.feasible if e.family == family), None)

    def table(self, n: int = 10) -> list[dict]:
        rows = []
        for e in self.feasible[:n]:
            rows.append({"config": e.config.name, "zero": e.config.zero, "remat": e.config.remat,
                         "step_s": e.step_time, "mfu": e.mfu, "bound": e.bound,
                         "memory_per_chip_bytes": e.memory.total, "tokens_per_chip": e.tokens_per_chip})
        return rows

    def explain(self) -> str:
        """Two or three sentences: the winner and what bounds it (the planner's own times), the chapter's
        rules of thumb at this batch per chip, and the best pure-FSDP alternative."""
        b = self.best
        spec = get_chip(self.chip)
        comms = {k: v for k, v in b.times.items() if k != "compute"}
        slowest = max(comms, key=comms.get)
        if b.compute_bound:
            why = (f"compute-bound (its slowest communication, {slowest}, needs {comms[slowest] / b.t_math:.0%} "
                   "of the compute time)" if comms[slowest] > 0 else "compute-bound (no communication)")
        else:
            why = f"bound by {b.bound} ({b.step_time / b.t_math:.2f}× the compute time)"
        unit = "GPU" if spec.kind == "gpu" else "chip"
        text = (f"{b.config.name} wins: {format_time(b.step_time)} per step at {b.mfu:.0%} MFU, {why}, "
                f"{format_bytes(b.memory.total)} per {unit}.")
        per_chip = self.batch_tokens / self.n_chips
        if spec.kind == "gpu":
            text += self._gpu_rules(b, per_chip)
        else:
            n_axes = spec.ici_torus_dims or 1
            text += (f" Chapter 5's rules of thumb at {per_chip:.0f} tokens per chip: FSDP alone needs more than "
                     f"α/M_X = {dp_min_batch_per_chip(spec, n_axes):.0f}, FSDP+TP more than α²/(M_X·M_Y·F) = "
                     f"{mixed_min_batch_per_chip(self.model.F, spec, max(n_axes - 1, 1), 1):.0f}.")
        alt = self.best_of("fsdp")
        if alt is not None and alt is not b:
            text += f" Best pure FSDP: {alt.config.name}, {alt.step_time / b.step_time:.2f}× slower (bound by {alt.bound})."
        elif alt is None:
            fs = [e for e in self.estimates if e.family == "fsdp"]
            if fs:
                text += f" Pure FSDP is not an option here: {fs[0].reason}."
        return text

    def _gpu_rules(self, b: Estimate, per_gpu: float) -> str:
        """Book ch. 12's rules of thumb ("Rooflines for LLM Scaling on GPUs"): DP/ZeRO across nodes needs
        B/X > C/W_node tokens per GPU (H100: 2475), ÷ M/D_node when M = Y·Z ways of model parallelism span
        M/D_node nodes (`gpus.dp_critical_batch`); in one node C/W_gpu (2200). TP stays compute-bound up to
        Y < F·W_gpu/C ways inside a node (`gpus.tp_max_degree`, ≈ F/2200 on H100)."""
        spec = get_chip(self.chip)
        node = spec.gpus_per_node
        M = b.config.Y * b.config.Z
        if self.n_chips <= node:
            dp = (f"DP/ZeRO inside one node needs more than C/W_gpu = "
                  f"{gpus.dp_critical_batch(spec, across_nodes=False):.0f}")
        else:
            dp = f"DP/ZeRO across nodes needs more than C/W_node = {gpus.dp_critical_batch(spec):.0f}"
            if M > node:
                dp += (f" (÷ {M / node:g} = {gpus.dp_critical_batch(spec, model_parallel=M):.0f} with the winner's "
                       f"{M}-way model parallelism spanning {M / node:g} nodes)")
        return (f" Chapter 12's rules of thumb at {per_gpu:.0f} tokens per GPU: {dp}; TP inside a node stays "
                f"compute-bound up to F·W_gpu/C = {gpus.tp_max_degree(self.model.F, spec):.1f} ways.")


REMAT_CHOICES = ("none", "big_matmuls", "block")


def plan(model, batch_tokens: float, chip="tpu-v5p", *, n_chips: int | None = None, slices: int = 1,
         seq_len: int = 4096, max_tp: int = 64, max_pp: int = 16, zero_stages: Sequence[int] = (0, 1, 3),
         remat: Iterable = REMAT_CHOICES, microbatches_per_stage: int = 4, allow_sequence_sharding: bool = True,
         grad_bytes: float = 0.0, dtype: str = "bf16") -> Plan:
    """Enumerate the layouts of a training step and rank them by estimated step time (book ch. 5–6).

    `n_chips` per slice (default: the chip's full pod, 8960 for v5p) and `slices` joined by DCN. Every
    factorisation X·Y·Z = n_chips with Y ≤ max_tp, Z ≤ max_pp is tried with each ZeRO stage and remat policy;
    pipelines get `microbatches_per_stage`·Z microbatches (capped by the sequences per data shard).
    Infeasible layouts stay in the plan with their reason. ~10k estimates take well under a second.
    """
    cfg = tf.get_model(model)
    spec = _tpu(chip)
    if n_chips is None:
        if spec.pod_chips is None:
            raise ValueError(f"{spec.name} has no pod size; pass n_chips")
        n_chips = spec.pod_chips
    for name, v in (("n_chips", n_chips), ("slices", slices)):
        if not is_int(v) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    require_positive(batch_tokens=batch_tokens)
    remat = tuple(remat)
    estimates = []
    for X, Y, Z in _layouts(n_chips, max_tp, max_pp):
        mb = _microbatches(batch_tokens / slices, seq_len, X, Z, microbatches_per_stage)
        for zero in (zero_stages if X > 1 else (0,)):
            for r in remat:
                cfgn = Config(X=X, Y=Y, Z=Z, slices=slices, zero=zero, remat=r, microbatches=mb)
                estimates.append(evaluate(cfg, batch_tokens, cfgn, spec, seq_len=seq_len,
                                          allow_sequence_sharding=allow_sequence_sharding,
                                          grad_bytes=grad_bytes, dtype=dtype))
    estimates.sort(key=_rank_key)
    return Plan(cfg, spec.name, n_chips * slices, batch_tokens, seq_len, tuple(estimates))
