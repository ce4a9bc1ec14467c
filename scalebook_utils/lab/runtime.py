"""jaxlab: the JAX side of scalebook — runtime detection, simulated devices, timing, cost analysis,
and an empirical roofline of the machine you are on.

It is the front module of `lab/` (every module there imports jax; JAX version differences live only in
`lab/_compat.py`). Everything it measures is returned in SI base units: seconds, FLOPs, bytes, FLOPs/s, bytes/s.

Book chapters:
- ch. 1 (rooflines): `calibrate` measures this machine's peak FLOPs/s and memory bandwidth — the two
  constants of the roofline model — and `predict_vs_measure` compares the roofline prediction
  T_lower = max(2·B·D·F / C, bytes / W) with measured matmul times.
- ch. 3, 5, 10 (sharding, training, JAX): `use_simulated_devices` gives 8 CPU devices for meshes;
  `make_mesh` / `shard_map` work on every supported JAX; `cost_analysis` / `compiled_hlo_text`
  show what XLA compiled (FLOPs are per device; which collectives appear), and
  `parse_hlo_collectives` reads each compiled collective's arrays, bytes and mesh axes (that HLO
  reader is the pure module `core/hlo/collectives.py`; jaxlab re-exports it).
- ch. 9 (profiling): `time_fn` is a best-of-N wall-clock timer that waits for the results.

Typical setup cell::

    from scalebook_utils import jaxlab
    jaxlab.use_simulated_devices(8)      # before anything else touches JAX
    print(jaxlab.describe_runtime())
"""

from __future__ import annotations

import math
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.lab import _compat
from scalebook_utils.lab._compat import SUPPORTED_JAX, all_gather_invariant, shard_map, use_mesh  # noqa: F401  (re-exported)
from scalebook_utils.core.hlo.collectives import (BOOK_LETTER, HLO_COLLECTIVES, HloCollective, count_hlo_collectives, parse_hlo_collectives, replica_groups)
from scalebook_utils.core.hlo.text import parse_module
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.roofline import matmul_roofline
from scalebook_utils.core.units import canonical_dtype

# --- runtime --------------------------------------------------------------------------------------

#: device_kind patterns (lower-cased, regex) → scalebook chip name; the first match wins, so the more
#: specific patterns come first. A None value means "recognised, but not a chip of the book".
_DEVICE_KIND_PATTERNS: tuple[tuple[str, str | None], ...] = (
    (r"tpu\s*v?7|ironwood", "tpu7x"),
    (r"tpu\s*v6\s*(lite|e)?\b", "tpu-v6e"),     # Colab/Cloud report v6e as "TPU v6 lite"
    (r"tpu\s*v5\s*(lite|e)\b", "tpu-v5e"),      # "TPU v5 lite" (v5e)
    (r"tpu\s*v5p?\b", "tpu-v5p"),               # "TPU v5" / "TPU v5p"
    (r"tpu\s*v4\s*(lite|i)\b", None),           # v4i: an inference chip the book does not cover
    (r"tpu\s*v4p?\b", "tpu-v4p"),
    (r"tpu\s*v3\b", "tpu-v3"),
    (r"\bgb200\b", "gb200"),
    (r"\bb200\b", "b200"),
    (r"\bh200\b", "h200"),
    (r"\bh100\b", "h100"),                      # SXM, PCIe and NVL all map to the book's (SXM) H100
    (r"\ba100\b", "a100"),
    (r"\bv100\b", "v100"),
)


def chip_from_device_kind(device_kind: str) -> str | None:
    """Scalebook chip name for a JAX `device.device_kind` string, or None (CPU, unknown chips).

    'TPU v5 lite' → 'tpu-v5e', 'TPU v5p' → 'tpu-v5p', 'TPU v6 lite' → 'tpu-v6e', 'TPU v4' → 'tpu-v4p',
    'NVIDIA H100 80GB HBM3' → 'h100', 'NVIDIA A100-SXM4-40GB' → 'a100', 'cpu' → None.
    """
    kind = str(device_kind).strip().lower()
    for pattern, name in _DEVICE_KIND_PATTERNS:
        if re.search(pattern, kind):
            return name
    return None


@dataclass(frozen=True)
class RuntimeInfo:
    """What this Python process runs JAX on.

    backend: 'cpu', 'gpu' or 'tpu' (JAX's default backend); device_kind: e.g. 'cpu', 'TPU v5 lite',
    'NVIDIA H100 80GB HBM3'; n_devices: devices of the default backend; chip: the scalebook chip name
    (see `chip_from_device_kind`), None on CPU; n_cpu_devices: CPU devices (the simulated ones);
    where: 'Kaggle', 'Colab' or 'local' (on_colab is where == 'Colab').
    """

    backend: str
    device_kind: str
    n_devices: int
    on_colab: bool
    jax_version: str
    chip: str | None
    n_cpu_devices: int = 0
    where: str = "local"


def _on_colab() -> bool:
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def _where() -> str:
    """'Kaggle', 'Colab' or 'local'. Kaggle first: its CPU/GPU images are built from Colab's, so Colab's markers
    may be present there too; Kaggle's own code tests KAGGLE_KERNEL_RUN_TYPE."""
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE"):
        return "Kaggle"
    return "Colab" if _on_colab() else "local"


def shards_on_accelerators(platform: str, n_accelerators: int, n: int = 8) -> bool:
    """The one rule for where the sharding experiments run: on the accelerators when the default backend is one
    and has at least `n` devices (Kaggle's TPU v5e-8, a TPU VM, a multi-GPU box), else on `n` simulated CPU devices
    (a laptop; Colab's single TPU v5e chip or single GPU, which keep the timing and profiling experiments)."""
    return platform != "cpu" and n_accelerators >= n


def runtime() -> RuntimeInfo:
    """Detect the backend, its devices and the matching book chip. Initialises JAX's backends, so
    call `use_simulated_devices` first."""
    backend = jax.default_backend()
    backend = {"cuda": "gpu", "rocm": "gpu"}.get(backend, backend)
    devs = jax.devices()
    kind = devs[0].device_kind
    try:
        n_cpu = len(jax.devices("cpu"))
    except RuntimeError:  # pragma: no cover - CPU backend disabled via JAX_PLATFORMS
        n_cpu = 0
    where = _where()
    return RuntimeInfo(backend=backend, device_kind=kind, n_devices=len(devs), on_colab=where == "Colab",
                       jax_version=jax.__version__, chip=None if backend == "cpu" else chip_from_device_kind(kind),
                       n_cpu_devices=n_cpu, where=where)


def describe_runtime(info: RuntimeInfo | None = None, n_sharding: int = 8) -> str:
    """One line: JAX, backend, devices, book chip, where, and what runs on which devices, e.g.
    'JAX 0.7.2 · tpu · 1 × TPU v5 lite + 8 CPU devices · book chip 'tpu-v5e' · Colab · timing on the tpu;
    sharding demos on 8 simulated CPU devices'."""
    r = info or runtime()
    if r.backend == "cpu":
        chip = "no accelerator (book chips are modelled, not measured)"
    elif r.chip:
        chip = f"book chip '{r.chip}'"
    else:
        chip = "a chip scalebook has no spec for"
    extra = f" + {r.n_cpu_devices} CPU devices" if r.backend != "cpu" and r.n_cpu_devices > 1 else ""
    if shards_on_accelerators(r.backend, r.n_devices, n_sharding):
        runs = f"timing and sharding demos on the {r.backend} ({n_sharding} of {r.n_devices} {r.device_kind})"
    elif r.backend != "cpu":
        runs = f"timing on the {r.backend}; sharding demos on {n_sharding} simulated CPU devices"
    else:
        runs = f"sharding demos on {n_sharding} simulated CPU devices"
    return f"JAX {r.jax_version} · {r.backend} · {r.n_devices} × {r.device_kind}{extra} · {chip} · {r.where} · {runs}"


# --- simulated devices and meshes -----------------------------------------------------------------


def use_simulated_devices(n: int = 8) -> int:
    """Make JAX expose `n` CPU devices (for meshes and sharding demos); returns the CPU device count.

    Must run before JAX runs anything (first thing in a notebook's setup cell). Calling it again
    with the same `n` is harmless; with a different `n` after JAX has started it raises a
    RuntimeError that says to restart the kernel. On a TPU/GPU runtime the accelerator stays the
    default backend; the simulated devices are `jax.devices('cpu')`. Timings on simulated devices say
    nothing about interconnects (they all share this machine's memory).
    """
    _compat.set_cpu_device_count(n)
    return _compat.cpu_device_count()


def sharding_devices(n: int = 8) -> list:
    """The `n` devices the sharding experiments run on: the accelerators when there are at least `n`
    of them (e.g. Kaggle's TPU v5e-8), else `n` (simulated) CPU devices (a laptop; Colab's one TPU chip).

    The one place that makes this choice, so every chapter's meshes follow it:
    `Mesh(np.array(jaxlab.sharding_devices(8)).reshape(2, 4), ("X", "Y"))`.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer number of devices, got {n!r}")
    accelerators = jax.devices()
    if shards_on_accelerators(accelerators[0].platform, len(accelerators), n):
        return list(accelerators[:n])
    cpus = jax.devices("cpu")
    if len(cpus) < n:
        raise RuntimeError(f"{n} devices are needed but JAX has {len(cpus)} CPU devices; "
                           f"call jaxlab.use_simulated_devices({n}) first "
                           "(then restart the kernel if JAX already ran)")
    return list(cpus[:n])


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], *, cpu: bool | None = None):
    """A device mesh with Auto axes (the book's auto-sharding style) on every supported JAX.

    cpu=None uses the default backend when it has enough devices, otherwise the (simulated) CPU
    devices; cpu=True always uses CPU devices. e.g. make_mesh((2, 4), ('X', 'Y')).
    """
    n = math.prod(axis_shapes)
    if cpu is None:
        accelerators = jax.devices()
        cpu = not shards_on_accelerators(accelerators[0].platform, len(accelerators), n)
    devices = None
    if cpu:
        cpus = jax.devices("cpu")
        if len(cpus) < n:
            raise RuntimeError(f"a {tuple(axis_shapes)} mesh needs {n} devices but JAX has {len(cpus)} CPU devices; "
                               f"call jaxlab.use_simulated_devices({n}) first "
                               "(then restart the kernel if JAX already ran)")
        devices = cpus[:n]
    return _compat.make_mesh_auto(axis_shapes, axis_names, devices=devices)


# --- timing ---------------------------------------------------------------------------------------


def time_fn(f: Callable, *args, warmup: int = 1, repeats: int = 5, min_time: float = 0.005) -> float:
    """Best-of-`repeats` wall-clock seconds for one call of f(*args), waiting for every output array.

    Each repeat calls f back to back until at least `min_time` seconds have passed and counts
    elapsed / calls (so microsecond-scale ops are averaged over many calls); the minimum over repeats
    is the least noisy estimate on a shared machine. `warmup` calls first (compilation happens there
    if f is jitted). Outputs may be any pytree. Does not jit f: pass `jax.jit(f)` to time compiled code.
    """
    if repeats < 1:
        raise ValueError("repeats must be ≥ 1")
    for _ in range(max(warmup, 0)):
        _compat.block_until_ready(f(*args))
    best = math.inf
    for _ in range(repeats):
        calls = 0
        t0 = time.perf_counter()
        while True:
            _compat.block_until_ready(f(*args))
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


# --- compiled programs ----------------------------------------------------------------------------


def _compiled(f: Callable, *args):
    return jax.jit(f).lower(*args).compile()


def cost_analysis(f: Callable, *args) -> dict[str, float]:
    """XLA's cost estimate of jit(f)(*args): `jax.jit(f).lower(*args).compile().cost_analysis()`.

    Normalised to one dict of floats on every JAX version; always has 'flops' and 'bytes accessed'
    (0.0 when the backend gives none). FLOPs and bytes are per device. On CPU, for X[m, k] @ W[k, n]
    'flops' is exactly 2·m·k·n (book ch. 1: A[256, 512] @ B[512, 1024] → 268,435,456; JAX 0.4.35 to
    0.11.2). On GPU, XLA adds a few FLOPs per output element for the epilogue (H200, JAX 0.11.2:
    f32[256,512] @ f32[512,1024] → 2mkn + 3·m·n; bf16 → 2mkn + 4·m·n), so compare with a tolerance there.
    """
    d = _compat.cost_analysis_dict(_compiled(f, *args))
    d.setdefault("flops", 0.0)
    d.setdefault("bytes accessed", 0.0)
    return d


def compiled_hlo_text(f: Callable, *args) -> str:
    """The optimised HLO that XLA compiled for jit(f)(*args) (look for all-reduce, all-gather, …)."""
    return _compiled(f, *args).as_text()


# HLO_COLLECTIVES, count_hlo_collectives, parse_hlo_collectives, HloCollective, replica_groups and
# BOOK_LETTER live in the pure module `core.hlo.collectives` (`compiled_collectives`, ch. 3, 5), re-exported above.


def hlo_collectives(f: Callable, *args) -> dict[str, int]:
    """How many of each collective op the compiled program contains, e.g. {'all-reduce': 1}.

    `count_hlo_collectives` of `compiled_hlo_text(f, *args)` as a plain dict: instructions
    (`all-reduce(`, `all-reduce-start(`), not their uses. Note: the CPU compiler never emits
    reduce-scatter from automatic sharding (all-reduce + dynamic-slice instead).
    """
    return dict(count_hlo_collectives(compiled_hlo_text(f, *args)))


# --- calibration: the roofline constants of this machine (book ch. 1) ------------------------------


def _jnp_dtype(dtype: str):
    d = canonical_dtype(dtype)
    table = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}
    if d not in table:
        raise ValueError(f"calibration and matmul timing support float32, bfloat16 and float16, not {dtype!r}")
    return table[d]


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
            name=f"measured-{self.backend}", vendor="measured", generation=str(kind),
            peak_flops_per_s={self.mode: float(self.flops_per_s)},
            hbm_bytes=float(self.details.get("memory_bytes", 0.0)),
            hbm_bandwidth_bytes_per_s=float(self.bytes_per_s),
            sources={"peak_flops_per_s": f"measured: {how_c}", "hbm_bandwidth_bytes_per_s": f"measured: {how_w}",
                     "hbm_bytes": "os.sysconf / device memory_stats"},
            notes=("Measured by scalebook_utils.jaxlab.calibrate on this machine; noisy, best of several runs.",))


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
    jdt = _jnp_dtype(dtype)
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
        _compat.block_until_ready(mm(x, w))     # compile and warm up
        t, _ = _best_chain(lambda _prev: mm(x, w), None, inner, mm_repeats)
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
        "matmul_N": N, "matmul_seconds": t_mm, "matmul_repeats": mm_repeats, "matmul_flops_per_s_by_N": by_n,
        "matmul_method": (f"best of {mm_repeats}{chain} (max over N in {list(Ns)}, best N={N}): "
                          f"jit(jnp.dot) {canonical_dtype(dtype)}[N,N] @ [N,N], 2N³ FLOPs"),
        "bandwidth_array_bytes": nb, "bandwidth_seconds": t_bw, "bandwidth_repeats": bw_repeats,
        "bandwidth_method": (f"best of {bw_repeats}{chain}: donated in-place y ← −y over {nb / 2**20:.0f} MiB "
                             "(read + write)"),
        "bytes_per_s_no_donation": 2.0 * nb / t_fresh,
        "memory_bytes": _memory_bytes(backend),
        "quick": quick, "wall_seconds": time.perf_counter() - t_start, "jax_version": jax.__version__,
    }
    return Calibration(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s, dtype=str(dtype), backend=backend,
                       details=details)


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


def measure_matmuls(shapes: Sequence[tuple[int, int, int]], dtype: str = "float32", repeats: int = 5,
                    min_time: float = 0.005, chain: int | None = None) -> list[MatmulMeasurement]:
    """Time jit(X @ W) for each (B, D, F) in `shapes`: seconds per matmul, best of `repeats`.

    chain=1 (the default on CPU): `time_fn`, waiting for every call. chain=k > 1 (the default, 10,
    on GPU/TPU): k calls dispatched back to back, one wait, time / k — the kernel's throughput
    without the per-call launch-and-sync latency (tens of µs on a GPU), which the roofline does not
    model. Small matmuls stay overhead-bound either way (Python dispatch costs µs per call).
    """
    if chain is None:
        chain = 1 if jax.default_backend() == "cpu" else 10
    jdt = _jnp_dtype(dtype)
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
            t, _ = _best_chain(lambda _prev: mm(x, w), None, chain, repeats)
        out.append(MatmulMeasurement(B=B, D=D, F=F, seconds=t, flops=2.0 * B * D * F,
                                     bytes=float((B * D + D * F + B * F) * itemsize)))
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


def predict_vs_measure(calibration: Calibration | None, shapes: Sequence[tuple[int, int, int]], *,
                       chip: ChipSpec | str | None = None, mode: str | None = None, dtype: str | None = None,
                       repeats: int = 5, measurements: Sequence[MatmulMeasurement] | None = None
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
                raise ValueError("chip='runtime' needs a TPU/GPU that scalebook knows; this runtime is "
                                 f"{describe_runtime()}")
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
    "SUPPORTED_JAX", "RuntimeInfo", "runtime", "describe_runtime", "shards_on_accelerators", "chip_from_device_kind", "use_simulated_devices",
    "sharding_devices", "make_mesh", "shard_map", "use_mesh", "all_gather_invariant", "time_fn", "cost_analysis", "compiled_hlo_text",
    "hlo_collectives", "HLO_COLLECTIVES", "count_hlo_collectives", "BOOK_LETTER", "HloCollective",
    "parse_hlo_collectives", "replica_groups", "Calibration", "calibrate", "MatmulMeasurement", "measure_matmuls",
    "PredictionRow", "predict_vs_measure", "median_ratio", "format_rows",
]


# --- sharded matmuls in the book's notation (ch. 3) -------------------------------------------------


def partition_spec(array):
    """`jax.sharding.PartitionSpec` of a `sharding.ShardedArray` (or its notation string).

    A[I_XY, J] → PartitionSpec(('X', 'Y'), None); A[I_X, J] → PartitionSpec('X', None). An unreduced
    array (C[I, K]{U_X}) has no PartitionSpec under Auto axes: ValueError.
    """
    from scalebook_utils.core.sharding import parse_array
    arr = parse_array(array)
    if arr.unreduced:
        raise ValueError(f"{arr.spec()} is unreduced over {', '.join(arr.unreduced)}; a PartitionSpec "
                         "describes only how dims are split (reduce it first, or drop the {U_…})")
    items = [None if ax is None else (ax[0] if len(ax) == 1 else ax) for ax in arr.partition_spec()]
    return jax.sharding.PartitionSpec(*items)


def book_spec(name: str, dims: Sequence[str], spec) -> str:
    """The book's notation of an array with PartitionSpec `spec`: ('A', 'IJ', P(None, 'X')) → 'A[I, J_X]'.

    The inverse of `partition_spec`: P(('X', 'Y'), None) → 'A[I_XY, J]'; a spec shorter than the array
    leaves the remaining dims unsharded. Book ch. 3, "A unified notation for sharding".
    """
    dims = list(dims)
    items = list(spec) + [None] * (len(dims) - len(spec))
    if len(items) != len(dims):
        raise ValueError(f"{spec} has {len(spec)} entries but {name} has {len(dims)} dims {dims}")
    out = []
    for d, e in zip(dims, items):
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        sub = "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"
        out.append(f"{d}_{sub}" if axes else d)
    return f"{name}[{', '.join(out)}]"


def book_matmul(spec_a, spec_b, spec_c=None) -> str:
    """'A[I, J_X] ·_J B[J_X, K] → C[I, K]' for C[I, K] = A[I, J] @ B[J, K] placed with these PartitionSpecs.

    spec_c=None: no target (XLA picks the output sharding). The string `sharding.plan` reads, so a
    notebook can check the collectives XLA compiled for its own PartitionSpecs against the cost model.
    """
    text = f"{book_spec('A', 'IJ', spec_a)} ·_J {book_spec('B', 'JK', spec_b)}"
    return text if spec_c is None else f"{text} → {book_spec('C', 'IK', spec_c)}"


def _spec_tuple(spec, ndim: int) -> tuple:
    """PartitionSpec → the plain form of `ShardedArray.partition_spec()`: (('X', 'Y'), None), one entry per dim."""
    items = list(spec) + [None] * (ndim - len(spec))
    return tuple(None if e is None else (e,) if isinstance(e, str) else tuple(e) for e in items)


def run_sharded_matmul(matmul, mesh_dict, shapes=None, dtype: str = "float32", seed: int = 0) -> dict:
    """Run a matmul in the book's notation on simulated CPU devices and report what XLA did.

    Builds the mesh (Auto axes) from CPU devices, places random A and B with the notation's
    NamedShardings, jits jnp.einsum with the target's out_shardings (none when the matmul has no
    target: XLA then picks), and compares with the numpy product. Returns a dict with
    'result_matches' (bool), 'collectives' (Counter of HLO collective kinds), 'dynamic_slices' (count),
    'hlo' (compiled text), 'output_spec' (the result's sharding as a plain tuple like
    `ShardedArray.partition_spec()`, e.g. (('X',), None)), 'local_shapes'
    ({'A': …, 'B': …, 'C': …} per-device shapes), 'shapes' (the dim sizes used).
    Default dim sizes: 16 × the number of devices. Needs `use_simulated_devices(n)` with n ≥ mesh size.
    """
    from scalebook_utils.core.sharding import parse_matmul, parse_mesh
    m, mesh = parse_matmul(matmul), parse_mesh(mesh_dict)
    dims = list(dict.fromkeys(m.a.dims + m.b.dims))
    shapes = dict(shapes) if shapes else {d: 16 * mesh.n_devices for d in dims}
    jmesh = make_mesh(mesh.sizes, mesh.names, cpu=True)
    NS = jax.sharding.NamedSharding
    dt = _jnp_dtype(dtype)
    rng = np.random.default_rng(seed)
    a_np = rng.standard_normal([shapes[d] for d in m.a.dims]).astype(np.float32)
    b_np = rng.standard_normal([shapes[d] for d in m.b.dims]).astype(np.float32)
    a = jax.device_put(jnp.asarray(a_np, dt), NS(jmesh, partition_spec(m.a)))
    b = jax.device_put(jnp.asarray(b_np, dt), NS(jmesh, partition_spec(m.b)))
    eq = m.einsum()
    kwargs = {} if m.out is None else {"out_shardings": NS(jmesh, partition_spec(m.out))}
    f = jax.jit(lambda x, y: jnp.einsum(eq, x, y), **kwargs)
    hlo = f.lower(a, b).compile().as_text()
    c = f(a, b)
    ref = np.einsum(eq, np.asarray(a, np.float32), np.asarray(b, np.float32))
    tol = 1e-4 if jnp.dtype(dt).itemsize >= 4 else 3e-2
    got = np.asarray(jnp.asarray(c, jnp.float32))
    scale = max(1.0, float(np.abs(ref).max()))
    return {
        "result_matches": bool(np.allclose(got, ref, rtol=tol, atol=tol * scale)),
        "collectives": count_hlo_collectives(hlo),
        "dynamic_slices": sum(op.opcode == "dynamic-slice" for op in parse_module(hlo).instructions),
        "hlo": hlo,
        "output_spec": _spec_tuple(c.sharding.spec, c.ndim),
        "local_shapes": {m.a.name: a.addressable_shards[0].data.shape, m.b.name: b.addressable_shards[0].data.shape,
                         m.out_name: c.addressable_shards[0].data.shape},
        "shapes": shapes,
    }


def predicted_vs_compiled(plan, compiled_counter, hlo: str | None = None):
    """(agree, explanation): the plan's collectives vs those XLA compiled (see sharding.predicted_vs_compiled)."""
    from scalebook_utils.core.sharding import predicted_vs_compiled as _pvc
    return _pvc(plan, compiled_counter, hlo)


# --- the four collectives on simulated devices (ch3.q8) -----------------------------------------------


def simulate_collective(kind: str, x):
    """Run one collective with jax.lax on the stacked shards `x` (shape [n_devices, ...]); numpy result.

    Each x[i] is device i's local array; `jax.vmap(..., axis_name="i")` stands in for n devices, so
    it runs on a single CPU (no simulated device count needed). Results are stacked the same way:
    - 'all_gather':     jax.lax.all_gather(tiled=True)   → out[i] = concatenate(x[0], …, x[n-1])
    - 'all_reduce':     jax.lax.psum                    → out[i] = Σ_j x[j]
    - 'reduce_scatter': jax.lax.psum_scatter(tiled=True) → out[i] = i-th block (dim 0) of Σ_j x[j]
    - 'all_to_all':     jax.lax.all_to_all(0, 0, tiled=True) → out[i] = concat_j (block i of x[j])
    `kind` may be spelled as in `collectives.normalize_kind` ('AllGather', 'psum', …). Book ch. 3, Q8.
    """
    from scalebook_utils.core.collectives import normalize_kind
    k = normalize_kind(kind)
    ops = {
        "all_gather": lambda v: jax.lax.all_gather(v, "i", tiled=True),
        "all_reduce": lambda v: jax.lax.psum(v, "i"),
        "reduce_scatter": lambda v: jax.lax.psum_scatter(v, "i", scatter_dimension=0, tiled=True),
        "all_to_all": lambda v: jax.lax.all_to_all(v, "i", 0, 0, tiled=True),
    }
    if k not in ops:
        raise ValueError(f"simulate_collective runs {', '.join(ops)}, not {kind!r}")
    with jax.default_device(jax.devices("cpu")[0]):
        out = jax.vmap(ops[k], axis_name="i")(jnp.asarray(np.asarray(x, np.float32)))
    return np.asarray(out)


# --- chapter 3: shard_map collectives and the collective matmul ---------------------------------------

__all__ += ["book_spec", "book_matmul"]
__all__ += ["SHARD_MAP_KINDS", "shard_map_demo", "collective_matmul_fn", "collective_matmul"]

#: The JAX collectives `shard_map_demo` runs (book ch. 3 names: AllReduce, AllGather, ReduceScatter,
#: AllToAll, ppermute) → the collectives.KINDS name of their cost model.
SHARD_MAP_KINDS = {"psum": "all_reduce", "all_gather": "all_gather", "psum_scatter": "reduce_scatter",
                   "all_to_all": "all_to_all", "ppermute": "ppermute"}


def shard_map_demo(kind: str, mesh_shape: Sequence[int] = (8,), n: int = 1024, chip: str = "tpu-v5e") -> dict:
    """Run one JAX collective under shard_map on simulated CPU devices; check it and count its bytes.

    `kind`: psum, all_gather, psum_scatter, all_to_all or ppermute, over all axes of a mesh of
    `mesh_shape` (axes X, Y, Z…; D devices in total). Every device holds a float32 block: n values for
    psum, all_gather and ppermute (ring shift by one); D·n values for psum_scatter and all_to_all (a
    chunk of n for each device). Returns
    'correct' (the gathered result equals the numpy computation), 'local_in'/'local_out' (per-device
    shapes), 'bytes_sent' (what one device must send at the least, from the shapes: (D−1) chunks for a
    gather/scatter/all-to-all, twice that for psum, one block for ppermute), 'model_bytes'
    (`collectives.collective(...).bytes_per_device`, which counts forwarding along the ring),
    'model_seconds' on `chip` (one ring per axis, wraparound), 'n_bytes' (what the model is given) and
    'hlo' (Counter of collective kinds in the compiled program). Book ch. 3, "A Deeper Dive…".
    """
    from jax import lax

    from scalebook_utils.core import collectives

    if kind not in SHARD_MAP_KINDS:
        raise ValueError(f"unknown shard_map collective {kind!r}; choose one of {', '.join(SHARD_MAP_KINDS)}")
    mesh_shape = tuple(int(s) for s in mesh_shape)
    names = tuple("XYZW"[: len(mesh_shape)])
    D, P = math.prod(mesh_shape), jax.sharding.PartitionSpec
    mesh = make_mesh(mesh_shape, names, cpu=True)
    ax = names if len(names) > 1 else names[0]
    item = 4
    if kind in ("psum", "all_gather", "ppermute"):
        x = np.arange(D * n, dtype=np.float32).reshape(D, n) % 97
    else:
        x = (np.arange(D * D * n, dtype=np.float32).reshape(D, D * n) % 89)
    if kind == "psum":
        body, out_spec, ref = (lambda a: lax.psum(a, ax)), P(), lambda: x.sum(0, keepdims=True)
        n_bytes, sent = n * item, 2 * (D - 1) * n * item / D
    elif kind == "all_gather":
        body, out_spec = (lambda a: _compat.all_gather_invariant(a, ax, axis=0, tiled=True)), P()
        ref, n_bytes, sent = (lambda: x), D * n * item, (D - 1) * n * item
    elif kind == "psum_scatter":
        body = lambda a: lax.psum_scatter(a, ax, scatter_dimension=1, tiled=True)  # noqa: E731
        out_spec, ref = P(None, ax), lambda: x.sum(0, keepdims=True)
        n_bytes, sent = D * n * item, (D - 1) * n * item
    elif kind == "all_to_all":
        body = lambda a: lax.all_to_all(a.reshape(D, n), ax, 0, 0, tiled=True).reshape(1, D * n)  # noqa: E731
        out_spec, ref = P(ax), lambda: x.reshape(D, D, n).transpose(1, 0, 2).reshape(D, D * n)
        n_bytes, sent = D * D * n * item, (D - 1) * n * item
    else:  # ppermute: a shift by one around the ring of all D devices
        perm = [(i, (i + 1) % D) for i in range(D)]
        body, out_spec = (lambda a: lax.ppermute(a, ax, perm)), P(ax)
        ref, n_bytes, sent = (lambda: np.roll(x, 1, axis=0)), n * item, n * item
    f = jax.jit(_compat.shard_map(body, mesh=mesh, in_specs=P(ax), out_specs=out_spec))
    xa = jax.device_put(jnp.asarray(x), jax.sharding.NamedSharding(mesh, P(ax)))
    hlo = f.lower(xa).compile().as_text()
    y = f(xa)
    got = np.asarray(y)
    want = ref()
    model_kind = SHARD_MAP_KINDS[kind]
    kw = {"hops": 1} if model_kind == "ppermute" else {"wraparound": True}
    cost = collectives.collective(model_kind, float(n_bytes), mesh_shape, chip, **kw)
    return {
        "kind": kind, "mesh_shape": mesh_shape, "n_devices": D,
        "correct": bool(got.shape == want.shape and np.allclose(got, want)),
        "local_in": tuple(xa.addressable_shards[0].data.shape), "local_out": tuple(y.addressable_shards[0].data.shape),
        "bytes_sent": float(sent), "model_bytes": float(cost.bytes_per_device), "n_bytes": float(n_bytes),
        "model_seconds": float(cost.seconds), "regime": cost.regime, "hlo": count_hlo_collectives(hlo),
    }


def collective_matmul_fn(mesh, axis: str | None = None):
    """A jitted f(x, w) → x @ w for x[I_X, J], w[J, K_X] (case 4) that never gathers x all at once.

    The book's collective matmul (ch. 3, "Overlapping communication with compute"): at step s each
    device multiplies the block of x it holds by its local w (writing rows of C[I, K_X]) while
    `ppermute` passes that block one step round the ring; after D steps every device has seen every
    block. The compiled program has D − 1 collective-permutes and no all-gather. `mesh`: a jax Mesh
    (use `make_mesh`); `axis`: the mesh axis to shard over (default: the first).
    """
    from jax import lax

    axis = axis or mesh.axis_names[0]
    D = mesh.shape[axis]
    P = jax.sharding.PartitionSpec
    perm = [(j, (j - 1) % D) for j in range(D)]  # device j sends to j−1: at step s device i holds block i+s

    def body(xb, wb):
        rows = xb.shape[0]
        idx = lax.axis_index(axis)
        out = jnp.zeros((rows * D, wb.shape[1]), jnp.result_type(xb, wb))
        blk = xb
        for s in range(D):
            src = (idx + s) % D
            if s < D - 1:
                nxt = lax.ppermute(blk, axis, perm)   # issued before the multiply: the two can overlap
            out = lax.dynamic_update_slice(out, blk @ wb, (src * rows, 0))
            if s < D - 1:
                blk = nxt
        return out

    return jax.jit(_compat.shard_map(body, mesh=mesh, in_specs=(P(axis, None), P(None, axis)),
                                     out_specs=P(None, axis)))


def collective_matmul(x, w, mesh, axis: str | None = None):
    """x @ w computed by `collective_matmul_fn` (x sharded by rows over `axis`, w by columns)."""
    axis = axis or mesh.axis_names[0]
    NS, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    xs = jax.device_put(jnp.asarray(x), NS(mesh, P(axis, None)))
    ws = jax.device_put(jnp.asarray(w), NS(mesh, P(None, axis)))
    return collective_matmul_fn(mesh, axis)(xs, ws)

