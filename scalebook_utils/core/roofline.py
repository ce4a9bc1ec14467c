"""Rooflines: when is an algorithm bound by compute, and when by moving bytes? (book ch. 1)

T_math  = FLOPs / (FLOPs/s)                     compute time
T_comms = bytes / (bytes/s)                     time to move data (HBM ↔ cores, or chip ↔ chip)
T_lower = max(T_math, T_comms)                  perfect overlap (the book's default)
T_upper = T_math + T_comms                      no overlap; never more than 2 × T_lower

Arithmetic intensity = FLOPs / bytes. An algorithm is compute-bound when its intensity exceeds the
hardware's critical intensity, peak FLOPs/s ÷ bandwidth (TPU v5e: 1.97e14 / 8.2e11 ≈ 240).

All functions take plain numbers in SI units (or numpy arrays where noted) and never import jax,
matplotlib or ipywidgets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import (
    dtype_bytes,
    require_bool,
    require_number,
    require_positive,
    require_positive_values,
)

# --- the basic model ------------------------------------------------------------------------------


def t_math(flops: float, flops_per_s: float) -> float:
    """Compute time in seconds: FLOPs ÷ FLOPs/s (book ch. 1, "Where does the time go?")."""
    require_positive(flops=flops, flops_per_s=flops_per_s)
    return flops / flops_per_s


def t_comms(n_bytes: float, bytes_per_s: float) -> float:
    """Communication time in seconds: bytes ÷ bytes/s (book ch. 1)."""
    require_positive(n_bytes=n_bytes, bytes_per_s=bytes_per_s)
    return n_bytes / bytes_per_s


def lower_bound(t_math_s: float, t_comms_s: float) -> float:
    """max(T_math, T_comms): the runtime if compute and communication overlap perfectly (times in s, ≥ 0)."""
    return max(require_number("t_math_s", t_math_s, minimum=0), require_number("t_comms_s", t_comms_s, minimum=0))


def upper_bound(t_math_s: float, t_comms_s: float) -> float:
    """T_math + T_comms: the runtime with no overlap at all (≤ 2 × the lower bound; times in s, ≥ 0)."""
    return require_number("t_math_s", t_math_s, minimum=0) + require_number("t_comms_s", t_comms_s, minimum=0)


def intensity(flops: float, n_bytes: float) -> float:
    """Arithmetic intensity in FLOPs per byte."""
    require_positive(flops=flops, n_bytes=n_bytes)
    return flops / n_bytes


def critical_intensity(flops_per_s: float, bytes_per_s: float) -> float:
    """Hardware intensity α = peak FLOPs/s ÷ bandwidth (FLOPs/byte). v5e HBM, bf16: ≈240 (ch. 1)."""
    require_positive(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s)
    return flops_per_s / bytes_per_s


def attainable_flops_per_s(intensity_flops_per_byte, peak_flops_per_s: float, bytes_per_s: float):
    """The roofline: min(peak, intensity × bandwidth) in FLOPs/s. Accepts numpy arrays of intensities (each
    finite and > 0)."""
    require_positive(peak_flops_per_s=peak_flops_per_s, bytes_per_s=bytes_per_s)
    i = np.asarray(require_positive_values("intensity_flops_per_byte", intensity_flops_per_byte), dtype=float)
    out = np.minimum(peak_flops_per_s, i * bytes_per_s)
    return float(out) if out.ndim == 0 else out


# --- the dot product (ch. 1 "Arithmetic intensity") ------------------------------------------------


def dot_product_intensity(N: float, dtype: str = "bf16") -> float:
    """Intensity of x·y with x, y: dtype[N] → dtype[1].

    FLOPs: N multiplies + (N − 1) adds = 2N − 1. Bytes: 2 inputs of N elements read, 1 element
    written. For bf16: (2N − 1)/(4N + 2), which tends to 1/2 (book ch. 1).
    """
    require_positive(N=N)
    s = dtype_bytes(dtype)
    return (2 * N - 1) / (2 * N * s + s)


def dot_product_intensity_limit(dtype: str = "bf16") -> float:
    """lim_{N→∞} (2N − 1)/((2N + 1)·s) = 2/(2s) = 1/s FLOPs per byte (bf16: 0.5)."""
    return 2 / (2 * dtype_bytes(dtype))


# --- matmuls --------------------------------------------------------------------------------------

#: Dtype modes for X[B, D] · W[D, F] → Z[B, F]: (activation dtype, weight dtype, compute dtype).
MATMUL_MODES: dict[str, tuple[str, str, str]] = {
    "bf16": ("bf16", "bf16", "bf16"),
    "int8": ("int8", "int8", "int8"),
    "int8-weights": ("bf16", "int8", "bf16"),  # int8 weights, bf16 activations and compute (ch1.q2)
    "fp32": ("fp32", "fp32", "fp32"),  # what a CPU measures best (chapter 1's "predict, then measure")
}


def _mode(mode: str) -> tuple[str, str, str]:
    if mode not in MATMUL_MODES:
        raise ValueError(f"unknown matmul mode {mode!r}; known modes: {', '.join(MATMUL_MODES)}")
    return MATMUL_MODES[mode]


def compute_dtype(mode: str) -> str:
    """The dtype `mode`'s matmul computes in (MATMUL_MODES: "int8-weights" → "bf16"); ValueError for an unknown mode."""
    return _mode(mode)[2]


def has_matmul_peak(chip: str | ChipSpec, mode: str) -> bool:
    """Whether `chip` has a matmul peak (FLOPs/s) for `mode`'s compute dtype: a v100 has none for bf16 (ch. 1)."""
    return compute_dtype(mode) in get_chip(chip).peak_flops_per_s


def _num(x, name: str = "B"):
    """A Python float for a scalar, a float numpy array otherwise; every entry finite and > 0."""
    return require_positive_values(name, x)


def _dims(B, D, F):
    """(B, D, F) checked: each a positive finite number or an array of them (one error naming the bad one)."""
    return _num(B, "B"), _num(D, "D"), _num(F, "F")


def _finite(name: str, value):
    """`value` unless some entry overflowed to inf (dims too large for a float), else an error naming it."""
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{name} overflows a float (inf) for these dims; use smaller B, D, F")
    return value


def matmul_flops(B, D, F):
    """2·B·D·F FLOPs for X[B, D] · W[D, F] (the exact BF·(2D − 1) count rounds to this; ch. 1).

    B, D, F: positive numbers or numpy arrays of them; anything else raises an error naming the dim."""
    B, D, F = _dims(B, D, F)
    return 2.0 * B * D * F


def matmul_io_bytes(B, D, F, mode: str = "bf16"):
    """(bytes read, bytes written) for X[B, D] · W[D, F] → Z[B, F] in HBM.

    read = B·D·s_x + D·F·s_w, written = B·F·s_z, with s the bytes per element of each dtype
    (int8 everywhere, ch1.q1: BD + DF read and BF written).
    """
    s_x, s_w, s_z = (dtype_bytes(d) for d in _mode(mode))
    B, D, F = _dims(B, D, F)
    return B * D * s_x + D * F * s_w, B * F * s_z


def matmul_bytes(B, D, F, mode: str = "bf16", exact: bool = True):
    """Total HBM bytes for X[B, D] · W[D, F] → Z[B, F].

    exact=True: B·D·s_x + D·F·s_w + B·F·s_z (e.g. 2BD + DF + 2BF for int8 weights, ch1.q3).
    exact=False: only the weights D·F·s_w (the B ≪ D, F approximation of ch. 1).
    """
    exact = require_bool("exact", exact)
    if not exact:
        s_w = dtype_bytes(_mode(mode)[1])
        B, D, F = _dims(B, D, F)
        return D * F * s_w + 0.0 * B
    read, written = matmul_io_bytes(B, D, F, mode)
    return read + written


def batched_weights_intensity(B, D, F, dtype: str = "int8"):
    """Intensity of x[B, D] ·_D W[B, D, F] → z[B, F]: a different weight matrix per batch element (ch1.q4).

    2·B·D·F / (s·(B·D + B·D·F + B·F)), which tends to 2/s as D, F grow: always memory-bound.
    """
    _check_dims(B, D, F)
    s = dtype_bytes(dtype)
    B = _num(B)
    return 2 * B * D * F / (s * (B * D + B * D * F + B * F))


def batched_weights_intensity_limit(dtype: str = "int8") -> float:
    """lim_{D,F→∞} of `batched_weights_intensity`: 2 / s FLOPs per byte (int8: 2)."""
    return 2 / dtype_bytes(dtype)


def _check_dims(B, D, F) -> None:
    require_positive(D=D, F=F)
    require_positive_values("B", B)


def matmul_intensity(B, D, F, mode: str = "bf16", exact: bool = True):
    """FLOPs per byte of X[B, D] · W[D, F]; ≈ B for bf16 when B ≪ D, F (book ch. 1)."""
    _check_dims(B, D, F)
    return matmul_flops(B, D, F) / matmul_bytes(B, D, F, mode, exact)


def critical_batch(chip: ChipSpec | str, mode: str = "bf16") -> float:
    """Token batch above which a weight-streaming matmul is compute-bound on `chip`.

    FLOPs 2·B·D·F against weight bytes D·F·s_w (activations ignored, B ≪ D, F):
    B_crit = (peak FLOPs/s of the compute dtype ÷ HBM bytes/s) · s_w / 2.

    Book ch. 1: 240 for bf16 on TPU v5e, 240 for int8 (int8 peak is 2×, weights are ½), 120 for int8
    weights with bf16 compute (ch1.q2); ≈295 on an H100 (ch1.q5).
    """
    chip = get_chip(chip)
    _, s_w_dtype, compute = _mode(mode)
    return chip.peak_flops(compute) / chip.hbm_bandwidth_bytes_per_s * dtype_bytes(s_w_dtype) / 2


@dataclass(frozen=True)
class MatmulRoofline:
    """Roofline of one matmul X[B, D] · W[D, F] on one chip, all in SI units."""

    B: float
    D: float
    F: float
    mode: str
    chip: str
    flops: float
    bytes: float
    t_math_s: float
    t_comms_s: float
    peak_flops_per_s: float

    @property
    def t_lower_s(self) -> float:
        return max(self.t_math_s, self.t_comms_s)

    @property
    def t_upper_s(self) -> float:
        return self.t_math_s + self.t_comms_s

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def compute_bound(self) -> bool:
        return self.t_math_s >= self.t_comms_s

    @property
    def achievable_flops_per_s(self) -> float:
        """FLOPs ÷ T_lower: what the chip can deliver on this matmul (≤ peak)."""
        return self.flops / self.t_lower_s

    @property
    def bound(self) -> str:
        return "compute-bound" if self.compute_bound else "memory-bound"


def matmul_roofline(
    B: float, D: float, F: float, chip: ChipSpec | str = "tpu-v5e", mode: str = "bf16", exact: bool = True
) -> MatmulRoofline:
    """T_math, T_comms and the bounds for X[B, D] · W[D, F] on `chip` with HBM traffic only."""
    _check_dims(B, D, F)
    spec = get_chip(chip)
    compute = _mode(mode)[2]
    peak = spec.peak_flops(compute)
    flops = float(_finite("the FLOP count 2·B·D·F", matmul_flops(B, D, F)))
    nbytes = float(_finite("the byte count", matmul_bytes(B, D, F, mode, exact)))
    return MatmulRoofline(
        B=B,
        D=D,
        F=F,
        mode=mode,
        chip=spec.name,
        flops=flops,
        bytes=nbytes,
        t_math_s=flops / peak,
        t_comms_s=nbytes / spec.hbm_bandwidth_bytes_per_s,
        peak_flops_per_s=peak,
    )


def achievable_flops_curve(
    B, D: float, F: float, chip: ChipSpec | str = "tpu-v5e", mode: str = "bf16", exact: bool = True
):
    """Achievable FLOPs/s = 2BDF / max(T_math, T_comms) over an array of batch sizes B (ch1.q3)."""
    _check_dims(B, D, F)
    spec = get_chip(chip)
    peak = spec.peak_flops(_mode(mode)[2])
    Bs = np.asarray(B, dtype=float)
    flops = matmul_flops(Bs, D, F)
    t = np.maximum(flops / peak, matmul_bytes(Bs, D, F, mode, exact) / spec.hbm_bandwidth_bytes_per_s)
    return flops / t


def crossover_batch(D: float, F: float, chip: ChipSpec | str = "tpu-v5e", mode: str = "bf16") -> float:
    """The B at which T_math = T_comms with the exact byte count (ch1.q3).

    2BDF/C = (B·D·s_x + D·F·s_w + B·F·s_z)/W  ⇒  B = D·F·s_w / (2DF/α − D·s_x − F·s_z), α = C/W.
    Returns inf when the matmul never becomes compute-bound (denominator ≤ 0: D, F too small).
    """
    require_positive(D=D, F=F)
    spec = get_chip(chip)
    s_x, s_w, s_z = (dtype_bytes(d) for d in _mode(mode))
    alpha = spec.peak_flops(_mode(mode)[2]) / spec.hbm_bandwidth_bytes_per_s
    denom = 2 * D * F / alpha - D * s_x - F * s_z
    return float("inf") if denom <= 0 else D * F * s_w / denom


def tile_intensity(bm: float, bn: float) -> float:
    """Intensity of a tiled matmul with tiles (bm, bk)·(bk, bn), bf16, ignoring output writes: bm·bn/(bm + bn)."""
    require_positive(bm=bm, bn=bn)
    return bm * bn / (bm + bn)


# --- the two-chip network roofline (ch. 1 "Network communication rooflines") -----------------------


@dataclass(frozen=True)
class NetworkRoofline:
    """Two chips each multiply half of the contraction dim D, then swap bf16 partial sums Z[B, F]."""

    B: float
    D: float
    F: float
    t_math_s: float
    t_comms_s: float
    d_threshold: float

    @property
    def compute_bound(self) -> bool:
        return self.t_math_s >= self.t_comms_s

    @property
    def bound(self) -> str:
        return "compute-bound" if self.compute_bound else "communication-bound"


def two_chip_roofline(
    B: float, D: float, F: float, flops_per_s: float = 1.97e14, link_bytes_per_s: float = 4.5e10
) -> NetworkRoofline:
    """Z = X[B, D] · Y[D, F] split over D between two chips.

    Each chip does 2·B·(D/2)·F FLOPs: T_math = B·D·F / C. Each sends its bf16 partial sum (2·B·F bytes)
    over a full-duplex link of `link_bytes_per_s` each way: T_comms = 2·B·F / W.
    Compute-bound when D/2 > C/W, i.e. D > 2C/W — independent of B (v5e: D > 8755; book ch. 1).
    """
    require_positive(B=B, D=D, F=F, flops_per_s=flops_per_s, link_bytes_per_s=link_bytes_per_s)
    return NetworkRoofline(
        B=B,
        D=D,
        F=F,
        t_math_s=B * D * F / flops_per_s,
        t_comms_s=2 * B * F / link_bytes_per_s,
        d_threshold=2 * flops_per_s / link_bytes_per_s,
    )


def two_chip_d_threshold(flops_per_s: float = 1.97e14, link_bytes_per_s: float = 4.5e10) -> float:
    """Smallest contraction dim D for which the two-chip split is compute-bound: 2 · C / W."""
    require_positive(flops_per_s=flops_per_s, link_bytes_per_s=link_bytes_per_s)
    return 2 * flops_per_s / link_bytes_per_s


# --- book ch. 9's worked example: the mock Transformer's profile on a TPU v2-8 ------------------------
# Ch. 9 reads a profile taken on a TPU v2-8 and checks each op against the roofline: matmul time =
# 2·∏ dims / FLOPs/s, collective time = bytes / bandwidth ("Looking at a real(ish) example profile"). The
# chip registry starts at v3, so the v2's two numbers are named here with their section.

#: TPU v2: bf16 FLOPs/s per core and cores in a v2-8 (ch. 9 "Looking at a real(ish) example profile")
V2_CORE_FLOPS, V2_CORES = 23e12, 8
#: TPU v2 ICI bandwidth per hop, bidirectional (ch. 9, the ReduceScatter estimate)
V2_ICI_BYTES_PER_S = 1.2e11
#: the mock Transformer: global activations bf16[B, T, D], W_in[D, F]; 4-way data × 2-way model parallelism
MOCK_B, MOCK_T, MOCK_D, MOCK_F = 32, 1024, 8192, 32768
MOCK_DP, MOCK_MP = 4, 2
#: attention projection W_Q[D, N, H] (ch. 9's in-text question)
MOCK_N, MOCK_H = 32, 256
#: what the book's profile measured (ch. 9): the FFW up-projection and its ReduceScatter fusion, in seconds
MEASURED_FFW_S, MEASURED_REDUCE_SCATTER_S = 0.096, 1.13e-3


def mock_ffw_time() -> float:
    """Seconds of the mock Transformer's FFW up-projection X[B·T, D]·W_in[D, F] at the roofline: 2·B·T·D·F FLOPs
    spread over the 8 cores of a TPU v2-8 (data and model parallelism split the FLOPs evenly, no communication
    inside the matmul): 2·32·1024·8192·32768 / (8 · 23e12) = 95.6 ms; the profile measured 96 ms (ch. 9)."""
    return matmul_flops(MOCK_B * MOCK_T, MOCK_D, MOCK_F) / (V2_CORES * V2_CORE_FLOPS)


def mock_reduce_scatter_bytes() -> float:
    """Bytes the mock profile's ReduceScatter moves: the per-data-shard activations bf16[B/4, T, D]
    (134,217,728 B = 128 MiB; ch. 9)."""
    return MOCK_B // MOCK_DP * MOCK_T * MOCK_D * dtype_bytes("bf16")


def mock_reduce_scatter_time() -> float:
    """Seconds of that ReduceScatter: bytes / bandwidth at the v2's 1.2e11 B/s per hop = 1.12 ms (measured 1.13 ms)."""
    return mock_reduce_scatter_bytes() / V2_ICI_BYTES_PER_S


def mock_q_projection_time() -> float:
    """Seconds of the attention Q projection X[B·T, D]·W_Q[D, N·H] at the roofline: Megatron sharding splits the
    heads 2 ways and data parallelism the batch 4 ways, so each of the 8 cores does 1/8 of the 2·B·T·D·N·H FLOPs
    with no communication: 23.9 ms (ch. 9's in-text question; not answered in the book)."""
    return matmul_flops(MOCK_B * MOCK_T, MOCK_D, MOCK_N * MOCK_H) / (V2_CORES * V2_CORE_FLOPS)
