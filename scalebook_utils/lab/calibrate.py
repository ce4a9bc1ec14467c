"""The roofline constants of this machine, measured (book ch. 1 §"predict, then measure"), and the
roofline's prediction of matmul times against the timings.

`calibrate` measures this machine's peak FLOPs/s (C) and memory bandwidth (W), the two constants of the
roofline model; `measure_matmuls` times X[B, D] @ W[D, F]; `predict_vs_measure` compares
T_lower = max(2·B·D·F / C, bytes / W) with those times. Part of `jaxlab` (re-exported by `lab/runtime.py`);
builds on `lab/devices.py`. Seconds, FLOPs, bytes, FLOPs/s, bytes/s (SI).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp

from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.roofline import matmul_roofline
from scalebook_utils.core.units import canonical_dtype
from scalebook_utils.lab import _compat
from scalebook_utils.lab.devices import describe_runtime, jnp_dtype, runtime, time_fn


def _memory_bytes(backend: str) -> float:
    """Device memory (accelerators) or physical RAM (CPU) in bytes; 0.0 when unknown."""
    if backend != "cpu":
        try:
            stats = jax.devices()[0].memory_stats() or {}
            return float(stats.get("bytes_limit", 0.0))
        except Exception:  # pragma: no cover
            return 0.0
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 0.0


@dataclass(frozen=True)
class Calibration:
    """This machine's measured roofline constants.

    flops_per_s: best matmul FLOPs/s in `dtype` (C); bytes_per_s: best memory bandwidth, read + write
    bytes per second (W); backend: 'cpu' | 'gpu' | 'tpu'; details: how they were measured.
    """

    flops_per_s: float
    bytes_per_s: float
    dtype: str
    backend: str
    details: dict = field(default_factory=dict, compare=False)

    @property
    def mode(self) -> str:
        """Canonical dtype ('fp32', 'bf16'): the `roofline.MATMUL_MODES` key for this calibration."""
        return canonical_dtype(self.dtype)

    @property
    def critical_intensity(self) -> float:
        """α = C / W in FLOPs per byte: matmuls with higher intensity are compute-bound here (ch. 1)."""
        return self.flops_per_s / self.bytes_per_s

    def as_chip(self) -> ChipSpec:
        """A `ChipSpec` (vendor 'measured') for `roofline.matmul_roofline(..., chip=cal.as_chip(), mode=cal.mode)`."""
        kind = self.details.get("device_kind", self.backend)
        how_c = self.details.get("matmul_method", "jaxlab.calibrate matmul")
        how_w = self.details.get("bandwidth_method", "jaxlab.calibrate array update")
        return ChipSpec(
            name=f"measured-{self.backend}",
            vendor="measured",
            generation=str(kind),
            peak_flops_per_s={self.mode: float(self.flops_per_s)},
            hbm_bytes=float(self.details.get("memory_bytes", 0.0)),
            hbm_bandwidth_bytes_per_s=float(self.bytes_per_s),
            sources={
                "peak_flops_per_s": f"measured: {how_c}",
                "hbm_bandwidth_bytes_per_s": f"measured: {how_w}",
                "hbm_bytes": "os.sysconf / device memory_stats",
            },
            notes=("Measured by scalebook_utils.jaxlab.calibrate on this machine; noisy, best of several runs.",),
        )


def _best_chain(step: Callable, state, inner: int, repeats: int):
    """Best seconds per step of `state = step(state)` run `inner` times back to back, then waited for.

    On accelerators, dispatch is asynchronous: chaining `inner` calls before one wait hides the
    per-call launch and sync latency (tens of µs), which would otherwise count as compute or
    memory time. On CPU, inner = 1 (the best single call is the least disturbed one).
    Returns (seconds per step, final state).
    """
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            state = step(state)
        _compat.block_until_ready(state)
        best = min(best, (time.perf_counter() - t0) / inner)
    return best, state


def _bandwidth(n_bytes: int, dtype, repeats: int, inner: int) -> tuple[float, float, int]:
    """(seconds of the donated in-place update, seconds of the out-of-place version, bytes of the array)."""
    itemsize = jnp.dtype(dtype).itemsize
    n = n_bytes // itemsize
    # y: dtype[n]; y ← −y with the input buffer donated, so XLA updates in place (n read + n written).
    # Negation is exact in every dtype; a multiply by (1 + ε) rounds to × 1 in bf16 and XLA removes it.
    step = jax.jit(lambda y: -y, donate_argnums=0)
    y = _compat.block_until_ready(step(jnp.ones((n,), dtype)))
    t_donated, y = _best_chain(step, y, inner, repeats)
    # the same op writing a fresh output buffer each call (what code without donation sees)
    fresh = jax.jit(lambda x: -x)
    t_fresh, y = _best_chain(fresh, y, inner, max(2, repeats // 2))
    del y
    return t_donated, t_fresh, n * itemsize


def calibrate(quick: bool = True, dtype: str = "float32") -> Calibration:
    """Measure this machine's matmul FLOPs/s and memory bandwidth (book ch. 1 §"predict, then measure").

    Compute: C = max over N of 2·N³ / t for a jitted X[N, N] @ W[N, N] in `dtype`, t the best of
    several runs (CPU: N ∈ {512, 1024} quick, {512, 1024, 2048} full; accelerators: {4096, 8192} /
    {4096, 8192, 16384}). The maximum over sizes is the peak: on a CPU, mid-sized matmuls that fit
    the caches run fastest; the per-size numbers are in details['matmul_flops_per_s_by_N'].
    Bandwidth: W = 2·n_bytes / t for y ← −y over an n_bytes array whose buffer is donated (so the
    update is in place: n_bytes read + n_bytes written, no fresh allocation); CPU 64 MiB quick,
    256 MiB full; accelerators 256 MiB / 1 GiB. The out-of-place version (a fresh output buffer
    every call) is in details['bytes_per_s_no_donation'] — on CPU it is several times slower,
    because the new pages must be faulted in.
    On accelerators each timing chains 10 calls before waiting, to hide launch latency.
    quick=True takes a few seconds on a 2-core CPU; quick=False is steadier and takes longer.
    Precision: on GPUs a float32 matmul uses TF32 tensor cores by default and on TPUs bf16 passes,
    so a float32 calibration there is not an fp32 peak; use dtype='bfloat16' to compare with the
    book's bf16 peaks.
    """
    jdt = jnp_dtype(dtype)
    backend = {"cuda": "gpu", "rocm": "gpu"}.get(jax.default_backend(), jax.default_backend())
    accel = backend != "cpu"
    Ns = ((4096, 8192) if quick else (4096, 8192, 16384)) if accel else ((512, 1024) if quick else (512, 1024, 2048))
    mm_repeats = 5 if quick else 10
    inner = 10 if accel else 1
    bw_bytes = (256 if quick else 1024) * 2**20 if accel else (64 if quick else 256) * 2**20
    bw_repeats = 5 if quick else 12

    t_start = time.perf_counter()
    mm = jax.jit(jnp.dot)
    by_n = {}
    for N in Ns:
        kx, kw = jax.random.split(jax.random.PRNGKey(N))
        x = jax.random.normal(kx, (N, N), jdt)  # x: dtype[N, N]
        w = jax.random.normal(kw, (N, N), jdt)  # w: dtype[N, N]
        _compat.block_until_ready(mm(x, w))  # compile and warm up
        t, _ = _best_chain(lambda _prev, x=x, w=w: mm(x, w), None, inner, mm_repeats)
        by_n[N] = 2.0 * N**3 / t
        del x, w
    N = max(by_n, key=by_n.get)
    flops_per_s = by_n[N]
    t_mm = 2.0 * N**3 / flops_per_s

    t_bw, t_fresh, nb = _bandwidth(bw_bytes, jdt, bw_repeats, inner)
    bytes_per_s = 2.0 * nb / t_bw

    chain = f", {inner} calls chained per timing" if inner > 1 else ""
    details = {
        "device_kind": jax.devices()[0].device_kind,
        "matmul_N": N,
        "matmul_seconds": t_mm,
        "matmul_repeats": mm_repeats,
        "matmul_flops_per_s_by_N": by_n,
        "matmul_method": (
            f"best of {mm_repeats}{chain} (max over N in {list(Ns)}, best N={N}): "
            f"jit(jnp.dot) {canonical_dtype(dtype)}[N,N] @ [N,N], 2N³ FLOPs"
        ),
        "bandwidth_array_bytes": nb,
        "bandwidth_seconds": t_bw,
        "bandwidth_repeats": bw_repeats,
        "bandwidth_method": (
            f"best of {bw_repeats}{chain}: donated in-place y ← −y over {nb / 2**20:.0f} MiB (read + write)"
        ),
        "bytes_per_s_no_donation": 2.0 * nb / t_fresh,
        "memory_bytes": _memory_bytes(backend),
        "quick": quick,
        "wall_seconds": time.perf_counter() - t_start,
        "jax_version": jax.__version__,
    }
    return Calibration(
        flops_per_s=flops_per_s, bytes_per_s=bytes_per_s, dtype=str(dtype), backend=backend, details=details
    )


# --- matmul timing and the roofline prediction -----------------------------------------------------


@dataclass(frozen=True)
class MatmulMeasurement:
    """One timed X[B, D] @ W[D, F]: seconds (best of N), flops = 2·B·D·F, bytes = (BD + DF + BF)·itemsize."""

    B: int
    D: int
    F: int
    seconds: float
    flops: float
    bytes: float

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def intensity(self) -> float:
        """FLOPs per byte of HBM/DRAM traffic (inputs read once, output written once)."""
        return self.flops / self.bytes


def measure_matmuls(
    shapes: Sequence[tuple[int, int, int]],
    dtype: str = "float32",
    repeats: int = 5,
    min_time: float = 0.005,
    chain: int | None = None,
) -> list[MatmulMeasurement]:
    """Time jit(X @ W) for each (B, D, F) in `shapes`: seconds per matmul, best of `repeats`.

    chain=1 (the default on CPU): `time_fn`, waiting for every call. chain=k > 1 (the default, 10,
    on GPU/TPU): k calls dispatched back to back, one wait, time / k — the kernel's throughput
    without the per-call launch-and-sync latency (tens of µs on a GPU), which the roofline does not
    model. Small matmuls stay overhead-bound either way (Python dispatch costs µs per call).
    """
    if chain is None:
        chain = 1 if jax.default_backend() == "cpu" else 10
    jdt = jnp_dtype(dtype)
    itemsize = jnp.dtype(jdt).itemsize
    mm = jax.jit(jnp.dot)
    key = jax.random.PRNGKey(1)
    out = []
    for B, D, F in shapes:
        B, D, F = int(B), int(D), int(F)
        key, kx, kw = jax.random.split(key, 3)
        x = jax.random.normal(kx, (B, D), jdt)  # x: dtype[B, D]
        w = jax.random.normal(kw, (D, F), jdt)  # w: dtype[D, F]
        if chain <= 1:
            t = time_fn(mm, x, w, warmup=1, repeats=repeats, min_time=min_time)
        else:
            _compat.block_until_ready(mm(x, w))  # compile and warm up
            t, _ = _best_chain(lambda _prev, x=x, w=w: mm(x, w), None, chain, repeats)
        out.append(
            MatmulMeasurement(
                B=B, D=D, F=F, seconds=t, flops=2.0 * B * D * F, bytes=float((B * D + D * F + B * F) * itemsize)
            )
        )
        del x, w
    return out


class PredictionRow(NamedTuple):
    """(B, D, F, predicted_s, measured_s, ratio) with ratio = predicted_s / measured_s (≤ 1 expected:
    the roofline's T_lower is a lower bound)."""

    B: int
    D: int
    F: int
    predicted_s: float
    measured_s: float
    ratio: float


def predict_vs_measure(
    calibration: Calibration | None,
    shapes: Sequence[tuple[int, int, int]],
    *,
    chip: ChipSpec | str | None = None,
    mode: str | None = None,
    dtype: str | None = None,
    repeats: int = 5,
    measurements: Sequence[MatmulMeasurement] | None = None,
) -> list[PredictionRow]:
    """Roofline prediction T_lower = max(2BDF / C, (BD + DF + BF)·s / W) against the measured time.

    chip=None: C and W from `calibration` (`calibration.as_chip()`, mode 'fp32' for a float32
    calibration). chip='runtime': the book's spec of the accelerator JAX runs on
    (`hardware.get_chip(runtime().chip)`, mode 'bf16', timed in bfloat16); any other chip name or
    ChipSpec is used as given. Pass `measurements` to reuse timings instead of measuring again.
    Book ch. 1: large matmuls should land near 1; small ones are dominated by overheads.
    """
    if chip is None:
        if calibration is None:
            raise ValueError("pass a Calibration (jaxlab.calibrate()) or chip=")
        spec = calibration.as_chip()
        mode = mode or calibration.mode
        dtype = dtype or calibration.dtype
    else:
        if isinstance(chip, str) and chip == "runtime":
            name = runtime().chip
            if name is None:
                raise ValueError(
                    f"chip='runtime' needs a TPU/GPU that scalebook knows; this runtime is {describe_runtime()}"
                )
            chip = name
        spec = get_chip(chip)
        mode = mode or "bf16"
        dtype = dtype or ("bfloat16" if mode == "bf16" else mode)
    meas = list(measurements) if measurements is not None else measure_matmuls(shapes, dtype, repeats=repeats)
    rows = []
    for m in meas:
        pred = matmul_roofline(m.B, m.D, m.F, chip=spec, mode=mode).t_lower_s
        rows.append(PredictionRow(m.B, m.D, m.F, pred, m.seconds, pred / m.seconds))
    return rows


def median_ratio(rows: Sequence[PredictionRow | tuple]) -> float:
    """Median of predicted / measured over `rows` (the last field of each row)."""
    if not rows:
        raise ValueError("no rows")
    return float(statistics.median(float(r[5]) for r in rows))


def format_rows(rows: Sequence[PredictionRow | tuple]) -> str:
    """An aligned plain-text table of prediction rows (times in µs)."""
    lines = [f"{'B':>6} {'D':>6} {'F':>6} {'predicted µs':>13} {'measured µs':>12} {'ratio':>6}"]
    for B, D, F, p, m, r in rows:
        lines.append(f"{B:>6} {D:>6} {F:>6} {p * 1e6:>13.1f} {m * 1e6:>12.1f} {r:>6.2f}")
    lines.append(f"median ratio (predicted / measured): {median_ratio(rows):.2f}")
    return "\n".join(lines)


__all__ = [
    "Calibration",
    "calibrate",
    "MatmulMeasurement",
    "measure_matmuls",
    "PredictionRow",
    "predict_vs_measure",
    "median_ratio",
    "format_rows",
]
