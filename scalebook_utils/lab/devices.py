"""What JAX runs on, and the timer: runtime detection, simulated devices, meshes, `time_fn`.

The bottom of `jaxlab` (the public name; its door is `lab/runtime.py`, which re-exports every name here):
`calibrate` and `sharded` build on this module and never on the door. Seconds are SI.

Book chapters: ch. 3, 5, 10 (`use_simulated_devices` gives 8 CPU devices for meshes; `sharding_devices`
picks the devices every chapter's meshes use; `make_mesh` works on every supported JAX) and ch. 9
(`time_fn`, a best-of-N wall-clock timer that waits for the results).
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from scalebook_utils.core.units import canonical_dtype
from scalebook_utils.lab import _compat

# --- runtime --------------------------------------------------------------------------------------

#: device_kind patterns (lower-cased, regex) → scalebook chip name; the first match wins, so the more
#: specific patterns come first. A None value means "recognised, but not a chip of the book".
DEVICE_KIND_PATTERNS: tuple[tuple[str, str | None], ...] = (
    (r"tpu\s*v?7|ironwood", "tpu7x"),
    (r"tpu\s*v6\s*(lite|e)?\b", "tpu-v6e"),  # Colab/Cloud report v6e as "TPU v6 lite"
    (r"tpu\s*v5\s*(lite|e)\b", "tpu-v5e"),  # "TPU v5 lite" (v5e)
    (r"tpu\s*v5p?\b", "tpu-v5p"),  # "TPU v5" / "TPU v5p"
    (r"tpu\s*v4\s*(lite|i)\b", None),  # v4i: an inference chip the book does not cover
    (r"tpu\s*v4p?\b", "tpu-v4p"),
    (r"tpu\s*v3\b", "tpu-v3"),
    (r"\bgb200\b", "gb200"),
    (r"\bb200\b", "b200"),
    (r"\bh200\b", "h200"),
    (r"\bh100\b", "h100"),  # SXM, PCIe and NVL all map to the book's (SXM) H100
    (r"\ba100\b", "a100"),
    (r"\bv100\b", "v100"),
)


def chip_from_device_kind(device_kind: str) -> str | None:
    """Scalebook chip name for a JAX `device.device_kind` string, or None (CPU, unknown chips).

    'TPU v5 lite' → 'tpu-v5e', 'TPU v5p' → 'tpu-v5p', 'TPU v6 lite' → 'tpu-v6e', 'TPU v4' → 'tpu-v4p',
    'NVIDIA H100 80GB HBM3' → 'h100', 'NVIDIA A100-SXM4-40GB' → 'a100', 'cpu' → None.
    """
    kind = str(device_kind).strip().lower()
    for pattern, name in DEVICE_KIND_PATTERNS:
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
    return RuntimeInfo(
        backend=backend,
        device_kind=kind,
        n_devices=len(devs),
        on_colab=where == "Colab",
        jax_version=jax.__version__,
        chip=None if backend == "cpu" else chip_from_device_kind(kind),
        n_cpu_devices=n_cpu,
        where=where,
    )


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
        raise RuntimeError(
            f"{n} devices are needed but JAX has {len(cpus)} CPU devices; "
            f"call jaxlab.use_simulated_devices({n}) first "
            "(then restart the kernel if JAX already ran)"
        )
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
            raise RuntimeError(
                f"a {tuple(axis_shapes)} mesh needs {n} devices but JAX has {len(cpus)} CPU devices; "
                f"call jaxlab.use_simulated_devices({n}) first "
                "(then restart the kernel if JAX already ran)"
            )
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


# --- dtypes ---------------------------------------------------------------------------------------


def jnp_dtype(dtype: str):
    """The jnp dtype of a book dtype name ('float32'/'fp32', 'bfloat16'/'bf16', 'float16'/'fp16') for the
    calibration and matmul timings; ValueError for the others (int8, fp8: no timed matmul here)."""
    d = canonical_dtype(dtype)
    table = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}
    if d not in table:
        raise ValueError(f"calibration and matmul timing support float32, bfloat16 and float16, not {dtype!r}")
    return table[d]


__all__ = [
    "RuntimeInfo",
    "runtime",
    "describe_runtime",
    "shards_on_accelerators",
    "chip_from_device_kind",
    "DEVICE_KIND_PATTERNS",
    "use_simulated_devices",
    "sharding_devices",
    "make_mesh",
    "time_fn",
    "jnp_dtype",
]
