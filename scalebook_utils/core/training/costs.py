"""The closed-form side of book ch. 5 "How to Parallelize a Transformer for Training": the per-strategy
rooflines of DP, FSDP, TP and FSDP + TP (their memory is `zero_memory`, re-exported here).

Notation (book ch. 5 "What Do We Mean By Scaling?"): B is the batch in **tokens** (the whole batch, not
per chip), D = d_model, F = d_ff, L layers; X chips of data parallelism (DP/FSDP), Y of tensor
parallelism (TP), Z pipeline stages; N = X·Y·Z chips; C = FLOPs/s per chip; W_ici = the bidirectional
bandwidth of one ICI axis (2 × one-way link; 1.8e11 B/s on TPU v5p); M_X, M_Y = how many hardware axes the
X and Y shardings span; α = C / W_ici (2550 on v5p).

What it holds:

- the hardware ratios: `ici_bandwidth`, `dcn_bandwidth`, `alpha` (α = C / W_ici), `alpha_dcn`;
- the chapter's compute-bound conditions and the degrees they pick: `dp_min_batch_per_chip`, `tp_max_degree`,
  `tp_min_F`, `mixed_min_batch_per_chip`, `optimal_fsdp_degree`, `all_comm_bound_batch`, `fsdp_tp_degrees`,
  `max_params_pure_dp`, `min_chips_for_memory`, `round_pow2`, `training_time`;
- the chapter's per-layer model — a stack of MLP blocks In[B, D] · W_in[D, F] · W_out[F, D] in bf16 with the
  compute and communication of the chapter's table (`layer_costs`, `comms_ratio`) and the collectives of its
  algorithm boxes (`step_collectives`); communication on different axes and compute overlap, so a layer
  takes max(T_math, T_comms on each axis) — a roofline (lower bound), not a simulation;
- the GPipe bubble (`bubble_fraction`).

The chapter's memory — Adam/ZeRO bytes per chip (`Memory`, `training_memory`, `checkpoint_bytes`, the byte
constants) and memory as practitioners count it (`MemoryOptions`, `dp_bytes_per_param`) — is in
`core/training/zero_memory.py`; this module re-exports every public name of it, so `training_costs.Memory`, …
work as before.

Pure Python. The planner that applies these rules to a whole transformer (`plan`, `evaluate`) is in
`training`, which re-exports every public name here: chapters import `training`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core.hardware import ChipSpec, get_chip

# the chapter's memory (Adam/ZeRO bytes per chip, the practitioner's MemoryOptions), re-exported here
from scalebook_utils.core.training.zero_memory import (
    ACT_BYTES,
    ADAM_BYTES_PER_PARAM,
    OPTIMIZER_BYTES,
    PARAM_BYTES,
    Memory,
    MemoryOptions,
    checkpoint_bytes,
    dp_bytes_per_param,
    training_memory,
)
from scalebook_utils.core.units import require_int, require_positive

__all__ = [
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
    "MemoryOptions",
    "dp_bytes_per_param",
]

#: the chapter's four schemes (book ch. 5): data parallelism, fully-sharded DP (ZeRO-3), tensor parallelism, both
STRATEGIES = ("dp", "fsdp", "tp", "fsdp+tp")


# --- hardware ratios ------------------------------------------------------------------------------


def tpu_spec(chip) -> ChipSpec:
    """The ChipSpec of `chip` (a name or spec), a TPU with an ICI figure; ValueError otherwise (GPUs: ch. 12)."""
    spec = get_chip(chip)
    if spec.ici_link_bandwidth_oneway_bytes_per_s is None:
        raise ValueError(
            f"{spec.name} has no ICI figure; the chapter-5 model needs a TPU (e.g. 'tpu-v5p'). "
            "GPU networking is chapter 12's subject."
        )
    return spec


def ici_bandwidth(chip="tpu-v5p") -> float:
    """W_ici: bytes/s of one ICI axis, both directions (2 × one-way link; v5p 2 × 9e10 = 1.8e11). Book ch. 5."""
    return tpu_spec(chip).ici_link_bandwidth_bidi_bytes_per_s


def dcn_bandwidth(chip="tpu-v5p") -> float:
    """W_dcn: DCN egress per chip, bytes/s (v5p 6.25e9: 25 GB/s per host over 4 chips; book ch. 5)."""
    spec = tpu_spec(chip)
    if spec.dcn_bandwidth_bytes_per_s is None:
        raise ValueError(f"{spec.name} has no DCN figure in the book")
    return spec.dcn_bandwidth_bytes_per_s


def alpha(chip="tpu-v5p", dtype: str = "bf16") -> float:
    """α = C / W_ici, FLOPs per byte (v5p bf16: 4.59e14 / 1.8e11 = 2550). Book ch. 5 notation."""
    return tpu_spec(chip).peak_flops(dtype) / ici_bandwidth(chip)


def alpha_dcn(chip="tpu-v5p", dtype: str = "bf16") -> float:
    """C / W_dcn: tokens per slice that pure DP across slices needs (v5p: 73,440). Book ch. 5 "Scaling Across Pods"."""
    return tpu_spec(chip).peak_flops(dtype) / dcn_bandwidth(chip)


def _axes(M: int, name: str) -> int:
    return require_int(f"{name} (hardware axes spanned: 1, 2 or 3)", M)


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


def all_comm_bound_batch(N: float, F: float, chip="tpu-v5p", M_X: int = 2, M_Y: int = 1, dtype: str = "bf16") -> float:
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


def training_time(
    params: float, tokens: float, n_chips: float, chip="tpu-v5p", mfu: float = 1.0, dtype: str = "bf16"
) -> float:
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
    X, Y, N = require_int("X", X), require_int("Y", Y), require_int("N", N)
    if X * Y != N:
        raise ValueError(f"degrees X·Y = {X}·{Y} = {X * Y} must equal the chip count N = {N}")
    return X, Y


def layer_costs(
    strategy: str,
    B: float,
    D: float,
    F: float,
    N: int,
    *,
    X: int | None = None,
    Y: int | None = None,
    chip="tpu-v5p",
    M_X: int = 1,
    M_Y: int = 1,
    phase: str = "forward",
    dtype: str = "bf16",
) -> LayerCosts:
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


def comms_ratio(
    strategy: str, batch_per_chip: float, F: float, N: int, chip="tpu-v5p", n_axes: int = 3, dtype: str = "bf16"
) -> float:
    """T_math / T_comms of the book's central figure (ch. 5, forward pass) at a batch per chip B/N.

    dp, fsdp: (B/N) · M / α over all `n_axes`; tp (Y = N on one axis): F / (N α); fsdp+tp with M_X = n_axes − 1,
    M_Y = 1 at the best real-valued split: T_math/T_comms = (BF/(Nα)) / max(F·X/(N·M_X), B/(X·M_Y)) with
    X = X_opt — sqrt(B F M_X M_Y / N) / α (communication grows like √B, compute like B). Where X_opt < 1 it is
    X = 1 (all TP). The best FSDP+TP layout may also be Y = 1, i.e. pure FSDP over *all* n_axes axes (M_X = n_axes,
    not n_axes − 1): the ratio is the larger of the two, so the curve joins FSDP's where that wins, from
    B/N = F·M_X·M_Y / n_axes² on (≈ 6,700 for F = 30k on a 3-D slice; √(B F M_X M_Y/N)/α = (B/N)·n_axes/α there).
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
        fsdp_all_axes = batch_per_chip * M / a  # Y = 1: pure FSDP over every axis
        X = optimal_fsdp_degree(B, F, N, M_X, M_Y)
        if X >= N:  # no TP left
            return fsdp_all_axes
        X = max(X, 1.0)
        return max((B * F / (N * a)) / max(F * X / (N * M_X), B / (X * M_Y)), fsdp_all_axes)
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


def step_collectives(
    strategy: str,
    *,
    B: int,
    D: int,
    F: int,
    X: int = 1,
    Y: int = 1,
    bytes_per_element: float = 2,
    regather: bool = True,
) -> list[Collective]:
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
    require_int("stages", stages)
    require_int("microbatches", microbatches)
    return (stages - 1) / (microbatches + stages - 1)
