"""A decode step timed against this machine's roofline (book ch. 7, "All About Transformer Inference", §3.4
and §7, with ch. 1's bounds). Part of `jaxdecode` (`lab/decode.py`), which re-exports it.

`decode_roofline` predicts one step of B sequences over S cached keys from C (FLOPs/s) and W (bytes/s):
T_math = (2·B·P_matmul + 4·B·S·N·H·L)/C, T_comms = (P_read + B·S·2·L·K·H)·w/W (`decode_bounds`, through
`inference.decode_step`). `measure_decode` times one step per batch size against it, with C and W measured
in the same interleaved passes (ch. 1's calibration kernels: this VM's speed drifts by 2× within minutes);
`prefill_vs_decode` sets one prefill against one decode step per token. On this 2-core CPU the model needs
two corrections, both measured: a decode step only *reads* memory, which the VM serves ≈ 1.5–2× slower than
calibrate's read + write (`read_bandwidth`), and XLA:CPU's matmuls barely overlap loading weights with
computing, so ch. 1's upper bound T_math + T_comms predicts the step (ratio 0.7–1.3 for B = 8 … 128), where
the overlapped forms can be 2× too optimistic near B_crit ≈ 10–16. Seconds, FLOPs/s and bytes/s throughout.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.inference import costs as inference
from scalebook_utils.core.roofline import lower_bound, upper_bound
from scalebook_utils.core.transformer import TransformerConfig, kv_cache_bytes_per_token, matmul_params, param_count
from scalebook_utils.core.units import canonical_dtype, dtype_bytes, require_int, require_positive
from scalebook_utils.lab import runtime as jaxlab
from scalebook_utils.lab import tinymodel
from scalebook_utils.lab._compat import block_until_ready
from scalebook_utils.lab.decode_loop import decode_jit_donated, prefill_jit
from scalebook_utils.lab.kv_cache import serving_params
from scalebook_utils.lab.tinymodel import check_config

#: Demo model for timing decode on a 2-core CPU in float32 (not from the book): 19.9 M matmul parameters,
#: 80 MB of weights read per step (≈ 2× the 36 MiB L3 cache, so they stream from DRAM), 4 KiB of KV per
#: token. B_crit = (C/W)·w/2 = 2·C/W with w = 4-byte weights ≈ 10–16 here, so B = 1 … 128 spans memory- to
#: compute-bound; two layers keep each compilation ≈ 0.6 s.
DECODE_DEMO = TransformerConfig(
    "decode-demo",
    L=2,
    D=1024,
    F=2048,
    N=8,
    K=2,
    H=128,
    V=2048,
    source="scalebook ch. 7 CPU decode demo (not from the book)",
)
#: The forms `decode_roofline` and `measure_decode` accept (`form=`).
ROOFLINE_FORMS = ("upper", "book", "lower")
#: Bytes `read_bandwidth` and `measure_decode` stream to measure reads (64 MiB, as calibrate(quick=True)), and
#: the square matmul sizes timed for C (as calibrate(quick=True) on a CPU).
READ_BYTES, MATMUL_N = 64 * 2**20, (512, 1024)


# --- the roofline of a decode step ------------------------------------------------------------------


def decode_served_model(cfg: TransformerConfig) -> inference.ServedModel:
    """The model as `inference.ServedModel`: params = what a decode step reads, P_read = P_matmul + norms
    (the embedding lookup reads only B rows; a tied embedding is the unembedding, counted once); active =
    P_matmul (with the D·V unembedding); KV elements 2·L·K·H per token; 4·N·H·L attention FLOPs per key. Not
    `inference.served_model`, whose params are every parameter (`param_count(cfg).total`, the embedding too)."""
    check_config(cfg)
    return inference.ServedModel(
        cfg.name,
        matmul_params(cfg) + param_count(cfg).norms,
        matmul_params(cfg),
        kv_cache_bytes_per_token(cfg, "fp32") / 4,
        4.0 * cfg.N * cfg.H * cfg.L,
        cfg.D,
        cfg.L,
    )


def _read_timer(n_bytes: int):
    x = jnp.ones((require_int("n_bytes", n_bytes) // 4,), jnp.float32)
    total = jax.jit(jnp.sum)
    block_until_ready(total(x))
    return lambda: total(x)


def read_bandwidth(n_bytes: int = READ_BYTES, repeats: int = 5) -> float:
    """Bytes/s of a pure read stream here: jit(jnp.sum) over n_bytes of float32, best of `repeats`.

    A decode step only reads (weights, cache). `jaxlab.calibrate`'s W counts the read + write bytes of an
    in-place update, which this 2-core VM moves ≈ 1.5–2× faster than reads alone (seen: W ≈ 25–30 GB/s,
    reads ≈ 15–18 GB/s; a core keeps only so many reads in flight, while writes are posted)."""
    best = jaxlab.time_fn(_read_timer(n_bytes), warmup=0, repeats=require_int("repeats", repeats), min_time=0.0)
    return n_bytes / best


def _roofline_timers() -> dict:
    """The kernels that measure C and W alongside the decode steps: `jaxlab.calibrate(quick=True)`'s CPU
    matmuls (jit(jnp.dot) of float32[N, N], N in MATMUL_N) and a read stream of READ_BYTES."""
    mm, timers = jax.jit(jnp.dot), {"read": _read_timer(READ_BYTES)}
    for n in MATMUL_N:
        x = jnp.ones((n, n), jnp.float32)
        block_until_ready(mm(x, x))
        timers[f"matmul{n}"] = lambda x=x: mm(x, x)
    return timers


def _calibration(best: dict, calibration, read_bytes_per_s) -> jaxlab.Calibration:
    """C from `calibration` or from the matmuls timed in `best` (max over N of 2·N³/t); W the read stream's."""
    w = read_bytes_per_s or READ_BYTES / best["read"]
    if calibration is not None:
        return dataclasses.replace(calibration, bytes_per_s=float(w))
    c = max(2.0 * n**3 / best[f"matmul{n}"] for n in MATMUL_N)
    return jaxlab.Calibration(c, w, "float32", jax.default_backend(), details={"timed": "alongside the steps"})


def decode_bounds(
    cfg: TransformerConfig,
    B: int,
    S: int,
    calibration: jaxlab.Calibration,
    dtype: str = "float32",
    *,
    read_bytes_per_s: float | None = None,
) -> inference.DecodeStep:
    """`inference.decode_step` for one step of the model on this machine (`calibration.as_chip()`, seconds):
    t_math = 2·B·P_matmul/C, t_math_attention = 4·B·S·N·H·L/C, t_hbm_weights = P_read·w/W,
    t_hbm_kv = B·S·2·L·K·H·w/W, with w bytes per element of `dtype`; W = read_bytes_per_s if given."""
    require_positive(B=B, S=S)
    if read_bytes_per_s is not None:
        require_positive(read_bytes_per_s=read_bytes_per_s)
        calibration = dataclasses.replace(calibration, bytes_per_s=float(read_bytes_per_s))
    w = dtype_bytes(dtype)
    precision = inference.Precision(canonical_dtype(dtype), w, w, calibration.mode, w)
    return inference.decode_step(
        decode_served_model(cfg), B, S, chip=calibration.as_chip(), precision=precision, check_memory=False
    )


def decode_roofline(
    cfg: TransformerConfig,
    B: int,
    S: int,
    calibration: jaxlab.Calibration,
    dtype: str = "float32",
    *,
    form: str = "upper",
    read_bytes_per_s: float | None = None,
) -> float:
    """Predicted seconds of one decode step of B sequences over S cached keys (book ch. 7 §3.4 with ch. 1).

    T_math = (2·B·P_matmul + 4·B·S·N·H·L)/C, T_comms = (P_read + B·S·2·L·K·H)·w/W (`decode_bounds`):
    "upper" (default) T_math + T_comms, ch. 1's bound without overlap; "lower" max(T_math, T_comms), with
    perfect overlap; "book" max(t_hbm_kv, t_math_attention) + max(t_math, t_hbm_weights), ch. 7's step time.
    On this CPU "upper" with W = `read_bandwidth` predicts best (B = 8 … 128, C and W timed alongside,
    JAX 0.10.2, a shared 2-core VM: predicted/measured 0.73–1.26 over five sweeps; "book" and "lower"
    0.50–0.93; with calibrate's read + write W instead, "book" fell to 0.23–0.96): XLA:CPU's matmul loads
    a block of weights, then computes on it, so loads and FLOPs barely overlap.
    """
    if form not in ROOFLINE_FORMS:
        raise ValueError(f"form must be one of {', '.join(ROOFLINE_FORMS)}; got {form!r}")
    st = decode_bounds(cfg, B, S, calibration, dtype, read_bytes_per_s=read_bytes_per_s)
    t_math, t_comms = st.t_math + st.t_math_attention, st.t_hbm_weights + st.t_hbm_kv
    return {"upper": upper_bound(t_math, t_comms), "lower": lower_bound(t_math, t_comms), "book": st.step_time}[form]


# --- measurements ----------------------------------------------------------------------------------


class DecodeRow(NamedTuple):
    """One batch size: B, measured and predicted seconds per step, ratio = predicted / measured, which of
    T_math and T_comms is larger ("compute" / "memory"), and the constants C (FLOPs/s), W (bytes/s) used."""

    B: int
    measured_s: float
    predicted_s: float
    ratio: float
    bound: str
    flops_per_s: float
    bytes_per_s: float


def _decode_timer(params, cfg: TransformerConfig, B: int, S: int):
    """A compiled, warmed-up decode step as a closure: it writes slot S of a cache of S + 1 slots that all hold
    0.01 (the time does not depend on the values), so it reads S + 1 keys. The cache is donated and carried
    from call to call, as in a real decode loop."""
    shape = (cfg.L, B, cfg.K, S + 1, cfg.H)  # as init_cache, filled by NumPy (no compilation per shape)
    state = {"cache": {n: jnp.asarray(np.full(shape, 0.01, params["embedding"].dtype)) for n in ("k", "v")}}
    token, pos = jnp.zeros((B,), jnp.int32), jnp.int32(S)

    def step():
        logits, state["cache"] = decode_jit_donated(params, token, state["cache"], pos, cfg=cfg)
        return logits

    for _ in range(2):
        block_until_ready(step())
    return step


def _best_times(fns: dict, rounds: int, min_time: float = 0.01) -> dict:
    """Best seconds per call of each zero-argument fn over `rounds` interleaved passes of `jaxlab.time_fn`:
    on a shared machine a burst of load then costs one sample of every fn, not every sample of one."""
    best = dict.fromkeys(fns, math.inf)
    for _ in range(require_int("rounds", rounds)):
        for name, fn in fns.items():
            best[name] = min(best[name], jaxlab.time_fn(fn, warmup=0, repeats=1, min_time=min_time))
    return best


def measure_decode(
    cfg: TransformerConfig = DECODE_DEMO,
    batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128),
    S: int = 64,
    calibration: jaxlab.Calibration | None = None,
    *,
    rounds: int = 3,
    form: str = "upper",
    read_bytes_per_s: float | None = None,
    key=0,
) -> list[DecodeRow]:
    """Time the jitted decode step (float32, serving layout) at each batch size against `decode_roofline`.

    The cache holds S positions; the step writes position S and reads S + 1 keys. Each B compiles once
    (≈ 0.6 s for DECODE_DEMO); then all steps are timed in `rounds` interleaved passes, best per B, and so
    are the roofline's constants: calibration=None times `jaxlab.calibrate(quick=True)`'s matmuls for C in
    the same passes (this VM's speed drifts: C measured 65–190 GF/s within minutes, so a calibration from
    another moment can be off by 2×); W is a read stream timed alongside (`read_bandwidth`) unless
    `read_bytes_per_s` is given. Book ch. 7 §3.4: below B_crit the step time is nearly flat in B (the
    weights are loaded for few tokens); above it, it grows ∝ B (compute-bound).
    """
    check_config(cfg)
    batches, S = [require_int("B (batch)", b) for b in batches], require_int("S (context)", S)
    if form not in ROOFLINE_FORMS:
        raise ValueError(f"form must be one of {', '.join(ROOFLINE_FORMS)}; got {form!r}")
    if calibration is not None and calibration.mode != "fp32":
        raise ValueError(f"the decode steps run in float32; pass a float32 calibration, not {calibration.dtype!r}")
    params = serving_params(tinymodel.init_params(cfg, key), cfg)
    timers = {B: _decode_timer(params, cfg, B, S) for B in batches}
    if calibration is None:
        timers.update(_roofline_timers())
    elif read_bytes_per_s is None:
        timers["read"] = _read_timer(READ_BYTES)
    best = _best_times(timers, rounds)
    cal = _calibration(best, calibration, read_bytes_per_s)
    rows = []
    for B in batches:
        st = decode_bounds(cfg, B, S + 1, cal)
        p = decode_roofline(cfg, B, S + 1, cal, form=form)
        bound = "compute" if st.t_math + st.t_math_attention > st.t_hbm_weights + st.t_hbm_kv else "memory"
        rows.append(DecodeRow(B, best[B], p, p / best[B], bound, cal.flops_per_s, cal.bytes_per_s))
    return rows


def format_decode_rows(rows: Sequence[DecodeRow]) -> str:
    """An aligned table of `measure_decode` rows (times in ms), headed by the constants C and W used."""
    lines = [
        f"C = {rows[0].flops_per_s / 1e9:.0f} GFLOP/s, W = {rows[0].bytes_per_s / 1e9:.1f} GB/s (reads)"
        if rows
        else "no rows",
        f"{'B':>5} {'measured ms':>12} {'predicted ms':>13} {'pred/meas':>10}  bound",
    ]
    lines += [
        f"{r.B:>5} {r.measured_s * 1e3:>12.3f} {r.predicted_s * 1e3:>13.3f} {r.ratio:>10.2f}  {r.bound}" for r in rows
    ]
    return "\n".join(lines)


class PrefillVsDecode(NamedTuple):
    """Seconds of one prefill of B prompts of T tokens and of one decode step at context T, measured and
    predicted ("upper" roofline). Per token: prefill_s/(B·T) against decode_s/B."""

    B: int
    T: int
    prefill_s: float
    decode_s: float
    predicted_prefill_s: float
    predicted_decode_s: float

    @property
    def ratio(self) -> float:
        """Decode / prefill seconds per token: ≫ 1 at small B — prefill is compute-bound, decode memory-bound
        (book ch. 7 §3.2–3.4)."""
        return self.decode_s * self.T / self.prefill_s

    @property
    def predicted_ratio(self) -> float:
        return self.predicted_decode_s * self.T / self.predicted_prefill_s

    def __str__(self) -> str:
        return (
            f"B={self.B} T={self.T}: prefill {self.prefill_s / (self.B * self.T) * 1e6:.1f} µs/token, decode "
            f"{self.decode_s / self.B * 1e6:.1f} µs/token → decode costs {self.ratio:.1f}× more per token "
            f"(roofline: {self.predicted_ratio:.1f}×)"
        )


def prefill_vs_decode(
    cfg: TransformerConfig = DECODE_DEMO,
    B: int = 1,
    T: int = 128,
    calibration: jaxlab.Calibration | None = None,
    *,
    rounds: int = 3,
    key=0,
) -> PrefillVsDecode:
    """Time a jitted prefill of B prompts of T tokens (T + 1 cache slots) and a decode step at context T
    (float32, serving layout), interleaved, with the "upper" roofline of each: prefill
    B·T·(2·P_matmul + 4·(T + 1)·N·H·L)/C + P_read·4/W, decode `decode_roofline` with S = T + 1. C and W are
    measured alongside, or C is taken from `calibration` (as `measure_decode`)."""
    check_config(cfg)
    B, T = require_int("B (batch)", B), require_int("T (prompt)", T)
    params = serving_params(tinymodel.init_params(cfg, key), cfg)
    tokens = tinymodel.sample_tokens(cfg, B, T, key)
    timers = {
        "prefill": lambda: prefill_jit(params, tokens, cfg=cfg, max_len=T + 1, dtype="float32"),
        "decode": _decode_timer(params, cfg, B, T),
    }
    block_until_ready(timers["prefill"]())
    timers.update(_roofline_timers() if calibration is None else {"read": _read_timer(READ_BYTES)})
    best = _best_times(timers, rounds)
    cal, m = _calibration(best, calibration, None), decode_served_model(cfg)
    flops = B * T * (2 * m.active_params + (T + 1) * m.attn_flops_per_key)
    return PrefillVsDecode(
        B,
        T,
        best["prefill"],
        best["decode"],
        upper_bound(flops / cal.flops_per_s, m.params * 4 / cal.bytes_per_s),
        decode_roofline(cfg, B, T + 1, cal),
    )


__all__ = [
    "DECODE_DEMO",
    "ROOFLINE_FORMS",
    "READ_BYTES",
    "MATMUL_N",
    "decode_served_model",
    "read_bandwidth",
    "decode_bounds",
    "decode_roofline",
    "DecodeRow",
    "measure_decode",
    "format_decode_rows",
    "PrefillVsDecode",
    "prefill_vs_decode",
]
