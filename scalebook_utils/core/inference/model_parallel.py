"""How far model parallelism goes in decode: one TP matmul's three times, the small- and large-batch limits on
the TP degree, and 2-D weight-stationary sharding of the FFW block (book ch. 7 "Distributing Inference",
"Generation", "Prefill", Appendix B and Question 7; ch. 8 in-text question 9).

Notation as in `inference`: B tokens per step, D d_model, F d_ff, Y the TP degree, M_Y the hardware axes it
spans, C peak FLOPs/s, W_hbm HBM bytes/s, W_ici bidirectional bytes/s of one axis (`inference_comms.axis_bandwidth`),
β = W_hbm/W_ici, a bytes per activation element, w bytes per weight. Units: seconds, chips.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference.comms import axis_bandwidth
from scalebook_utils.core.inference.memory import get_precision
from scalebook_utils.core.units import require_number, require_positive

# --- limits on model parallelism in decode ------------------------------------------------------------


@dataclass(frozen=True)
class TPMatmulTimes:
    """One [B, D] × [D, F] matmul with F sharded Y ways (ch. 8 in-text question 9): seconds each."""

    t_math: float
    t_hbm: float
    t_ici: float

    @property
    def bottleneck(self) -> str:
        terms = {"FLOPs": self.t_math, "HBM bandwidth": self.t_hbm, "ICI": self.t_ici}
        return max(terms, key=terms.get)


def tp_matmul_times(
    B: float, D: float, F: float, Y: int, chip="tpu-v5e", precision="bf16", *, M_Y: int = 1
) -> TPMatmulTimes:
    """T_math = 2BDF/(Y·C), T_hbm = w·DF/(Y·W_hbm), T_ici = a·BD/(M_Y·W_ici) (book ch. 7 "Generation"; ch. 8
    question 9: LLaMA 3-70B bf16 on 4x8, B = 64 → 4.8 µs, 17.9 µs, 11.7 µs: HBM-bound). The book's question uses
    one axis (M_Y = 1) here but M_Y = 2 in its large-batch limit `tp_limit_large_batch`; pass M_Y to match."""
    require_positive(B=B, D=D, F=F)
    require_number("Y (TP degree)", Y, minimum=1)
    require_number("M_Y", M_Y, minimum=1)
    c, p = get_chip(chip), get_precision(precision)
    return TPMatmulTimes(
        t_math=2 * B * D * F / (Y * c.peak_flops(p.compute_dtype)),
        t_hbm=p.weight_bytes * D * F / (Y * c.hbm_bandwidth_bytes_per_s),
        t_ici=p.activation_bytes * B * D / (M_Y * axis_bandwidth(c)),
    )


def hbm_ici_beta(chip="tpu-v5e") -> float:
    """β = W_hbm/W_ici (ch. 7: "about 8" on v5e and v6e; 8.2e11/9e10 = 9.1 on v5e)."""
    c = get_chip(chip)
    return c.hbm_bandwidth_bytes_per_s / axis_bandwidth(c)


def tp_limit_small_batch(F: float, B: float, chip="tpu-v5e", precision="bf16", *, beta: float | None = None) -> float:
    """Largest TP degree before ICI dominates memory-bound decode: T_ici = a·BD/W_ici > T_hbm = w·DF/(Y·W_hbm)
    iff Y > w·F/(a·B·β) (bf16: F/(B·β)). Book ch. 7 "Generation": F = 16,384, B = 32, β = 8 → 64; ch. 8 question 9
    with β = 8: 56. `beta` overrides the chip's β (the book rounds it to 8)."""
    require_positive(F=F, B=B)
    p = get_precision(precision)
    b = hbm_ici_beta(chip) if beta is None else beta
    require_positive(beta=b)
    return p.weight_bytes * F / (p.activation_bytes * B * b)


def tp_limit_large_batch(F: float, chip="tpu-v5e", precision="bf16", *, M_Y: int = 1) -> float:
    """Largest TP degree keeping a compute-bound matmul off the ICI roofline: 2BDF/(Y·C) > a·BD/(W_ici·M_Y)
    iff Y < 2·F·M_Y·W_ici/(a·C) (bf16: F·M_Y/α_ici, α_ici ≈ 2200 on v5e). Book ch. 7 "Prefill"/"Generation";
    ch. 8 question 9: LLaMA 3-70B, M_Y = 2 → 26."""
    require_positive(F=F)
    require_number("M_Y", M_Y, minimum=1)
    c, p = get_chip(chip), get_precision(precision)
    return 2 * F * M_Y * axis_bandwidth(c) / (p.activation_bytes * c.peak_flops(p.compute_dtype))


# --- 2D weight-stationary sharding (Appendix B, Question 7) --------------------------------------------

#: 1D model sharding's comms in units of B·D/W_ici that the book's crossover 128·(3/4)² (ch7 Question 7) implies.
#: The derivation of that factor is not in our notes; it is a stated assumption, see `ws_1d_comms`.
WS_1D_COMMS_FACTOR = 4 / 3


@dataclass(frozen=True)
class WeightStationary2D:
    """FFW block on N = X·YZ chips, 2D weight-stationary (book ch. 7 Appendix B / Question 7). Seconds."""

    X: float
    YZ: float
    t_math: float
    t_comms: float

    @property
    def time(self) -> float:
        return max(self.t_math, self.t_comms)


def ws_2d_optimal_X(N: float, D: float, F: float) -> float:
    """X minimizing 2BD/(X·W) + 4BF·X/(N·W): X = √(D·N/(2F)) (F = 4D: √(N/8)). Book ch. 7 Question 7."""
    require_positive(N=N, D=D, F=F)
    return math.sqrt(D * N / (2 * F))


def weight_stationary_2d(
    B: float, D: float, F: float, N: float, chip="tpu-v5e", *, X: float | None = None, precision="bf16"
) -> WeightStationary2D:
    """T_math = 4BDF/(N·C) (two matmuls), T_comms = 2BD/(X·W_ici) + 4BF/(YZ·W_ici), YZ = N/X (X defaults to the
    optimum; W_ici bidirectional). Book ch. 7 Appendix B, Question 7."""
    require_positive(B=B, D=D, F=F, N=N)
    X = ws_2d_optimal_X(N, D, F) if X is None else X
    require_positive(X=X)
    c, p = get_chip(chip), get_precision(precision)
    W = axis_bandwidth(c)
    YZ = N / X
    return WeightStationary2D(
        X=X,
        YZ=YZ,
        t_math=4 * B * D * F / (N * c.peak_flops(p.compute_dtype)),
        t_comms=2 * B * D / (X * W) + 4 * B * F / (YZ * W),
    )


def ws_1d_comms(B: float, D: float, chip="tpu-v5e") -> float:
    """1D model-sharding comms for the FFW block, WS_1D_COMMS_FACTOR·B·D/W_ici, independent of N (the assumption
    behind the book's crossover in Question 7). Units: s."""
    require_positive(B=B, D=D)
    return WS_1D_COMMS_FACTOR * B * D / axis_bandwidth(get_chip(chip))


def ws_2d_crossover_chips(D: float, F: float) -> float:
    """N above which 2D weight-stationary comms (at the optimal X) beat 1D: 4·√(2F/(D·N)) < c ⇔
    N > 32·(F/D)/c² with c = WS_1D_COMMS_FACTOR (F = 4D: 72). Book ch. 7 Question 7."""
    require_positive(D=D, F=F)
    return 32 * (F / D) / WS_1D_COMMS_FACTOR**2


__all__ = [
    "TPMatmulTimes",
    "tp_matmul_times",
    "hbm_ici_beta",
    "tp_limit_small_batch",
    "tp_limit_large_batch",
    "WS_1D_COMMS_FACTOR",
    "WeightStationary2D",
    "ws_2d_optimal_X",
    "weight_stationary_2d",
    "ws_1d_comms",
    "ws_2d_crossover_chips",
]
