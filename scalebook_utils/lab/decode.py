"""jaxdecode: `tinymodel`'s decoder with a KV cache — prefill, decode, greedy generation — and a decode step
timed against this machine's roofline (book ch. 7, "All About Transformer Inference", §3.1, §3.4, §7).

Book ch. 7 §3.1: *prefill* runs the prompt at once and keeps every position's keys and values; each
*generate* step feeds one token, appends its K/V to the cache and attends to all of it (without a cache a
step re-runs the prefix: O(n²) FFW FLOPs for n tokens instead of O(n)). The cache is {"k", "v"}, each
[L, B, K, S_max, H]: 2·L·K·H·bytes per token (ch. 7 §3.5). `decode_step` writes at `pos` with
`jax.lax.dynamic_update_slice` and masks slots after `pos`; `pos` may be traced, so one compilation serves
every step. The model is `tinymodel`'s (parameters, RMSNorm, GQA with query head n = k·G + g on KV head k,
SwiGLU, no positional encoding), so `generate(..., use_cache=False)`, which re-runs `tinymodel.forward`,
is the reference. Decoding reads the weights in a serving layout (`serving_params`). Letters: B sequences,
T prompt tokens, S keys per query; D, F, L, N, K, H, V as in ch. 4.

`measure_decode` times one step per batch size against `decode_roofline`, with C and W measured in the
same interleaved passes (ch. 1's calibration kernels: this VM's speed drifts by 2× within minutes). On this
2-core CPU the model needs two corrections, both measured: a decode step only *reads* memory, which the VM
serves ≈ 1.5–2× slower than calibrate's read + write (`read_bandwidth`), and XLA:CPU's matmuls barely
overlap loading weights with computing, so ch. 1's upper bound T_math + T_comms predicts the step (ratio
0.7–1.3 for B = 8 … 128), where the overlapped forms can be 2× too optimistic near B_crit ≈ 10–16.
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
from scalebook_utils.core.units import canonical_dtype, dtype_bytes, is_int, require_int, require_positive
from scalebook_utils.lab import runtime as jaxlab
from scalebook_utils.lab import tinymodel
from scalebook_utils.lab._compat import block_until_ready
from scalebook_utils.lab.tinymodel import check_config, check_tokens, is_tracer, rms_norm

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
#: Cached and recomputed logits agree within this, absolute and relative (float32; seen: ≤ 3e-6).
LOGITS_TOL = 1e-4
ROOFLINE_FORMS = ("upper", "book", "lower")
#: Bytes `read_bandwidth` and `measure_decode` stream to measure reads (64 MiB, as calibrate(quick=True)), and
#: the square matmul sizes timed for C (as calibrate(quick=True) on a CPU).
READ_BYTES, MATMUL_N = 64 * 2**20, (512, 1024)


# --- the KV cache ----------------------------------------------------------------------------------


def init_cache(cfg: TransformerConfig, B: int, max_len: int, dtype="float32") -> dict:
    """An empty (zero) KV cache {"k", "v"}, each dtype[L, B, K, max_len, H] (book ch. 7 §3.5).

    Bytes: 2·L·B·max_len·K·H·w = `transformer.kv_cache_bytes_per_token(cfg, dtype)`·max_len·B (w bytes per
    element)."""
    check_config(cfg)
    shape = (cfg.L, require_int("B (batch)", B), cfg.K, require_int("max_len", max_len), cfg.H)
    return {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}


def cache_bytes(cache: dict) -> int:
    """Bytes the cache holds: Σ size·itemsize over its arrays (= 2·L·B·max_len·K·H·w)."""
    return int(sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(cache)))


def _check_cache(cache, cfg: TransformerConfig) -> tuple[int, int]:
    """(B, max_len) of a cache that `init_cache` made for `cfg`; ValueError otherwise."""
    if not isinstance(cache, dict) or set(cache) != {"k", "v"}:
        raise ValueError(
            f"cache must be the dict {{'k', 'v'}} of init_cache/prefill, got {type(cache).__name__} "
            f"{sorted(cache) if isinstance(cache, dict) else ''}"
        )
    shape = tuple(cache["k"].shape)
    if len(shape) != 5 or (shape[0], shape[2], shape[4]) != (cfg.L, cfg.K, cfg.H) or cache["v"].shape != shape:
        raise ValueError(
            f"cache arrays must be [L, B, K, max_len, H] = [{cfg.L}, B, {cfg.K}, max_len, {cfg.H}] "
            f"for {cfg.name!r}; got k{shape}, v{tuple(cache['v'].shape)}"
        )
    return shape[1], shape[3]


# --- the serving layout ----------------------------------------------------------------------------


def serving_params(params, cfg: TransformerConfig) -> dict:
    """`tinymodel` parameters laid out for decoding: the same numbers, every matrix stored [out, in].

    "w_qkv" = [W_Q | W_K | W_V]ᵀ [(N + 2K)·H, D], "wo" [D, N·H], "w_gate_up" = [W_gate | W_up]ᵀ [2F, D] and
    "w_down" [D, F] (or "w_in" [F, D], "w_out" [D, F]), "unembedding_t" [V, D] (the embedding itself when
    tied); embedding and norms unchanged. Activations stay feature-major (x[D, tokens]), so every matmul
    is W[out, in] @ x[in, tokens]: with a skinny decode batch (8–32 columns) XLA:CPU runs that ≈ 2× faster
    than x[tokens, in] @ W[in, out] (measured, 2-core CPU), and fused QKV and gate/up matrices mean fewer,
    larger matmuls — what serving engines do when they load weights. Serving parameters pass through.
    """
    check_config(cfg)
    if "unembedding_t" in params:
        return params
    traced = any(is_tracer(x) for x in jax.tree_util.tree_leaves(params))
    xp = jnp if traced else np  # NumPy for concrete arrays: no XLA compilation per matrix shape

    def t(*ws):  # [in, out…] matrices → one [Σ out, in] matrix, stored contiguously
        w = xp.concatenate([xp.asarray(w).reshape(w.shape[0], -1) for w in ws], axis=1)
        return w.T if traced else jnp.asarray(np.ascontiguousarray(w.T))

    layers = []
    for layer in params["layers"]:
        a, m = layer["attn"], layer["mlp"]
        new = {"w_qkv": t(a["wq"], a["wk"], a["wv"]), "wo": t(a["wo"].reshape(-1, cfg.D))}
        new.update(
            {"w_gate_up": t(m["w_gate"], m["w_up"]), "w_down": t(m["w_down"])}
            if cfg.gated_mlp
            else {"w_in": t(m["w_in"]), "w_out": t(m["w_out"])}
        )
        layers.append({**new, **{n: v for n, v in layer.items() if n.endswith("norm")}})
    out = {
        "embedding": params["embedding"],
        "layers": layers,
        "unembedding_t": params["embedding"] if cfg.tied_embeddings else t(params["unembedding"]),
    }
    return {**out, **({"final_norm": params["final_norm"]} if "final_norm" in params else {})}


# --- prefill and decode ----------------------------------------------------------------------------


def _attend(q, k, v, pos):
    """Attention of new queries q[B, K, T, G, H] at positions pos … pos+T−1 over cache slots k, v[B, K, S_max, H]:
    slot s is visible to query t iff s ≤ pos + t (causal among the new tokens, a length mask on the cache).
    Both contractions are batched over the B·K (sequence, KV head) pairs, in the layout XLA:CPU runs
    fastest (≈ 4× faster than a 5-D einsum that transposes the cache)."""
    B, K, T, G, H = q.shape
    S_max = k.shape[2]
    qf = (q * (1.0 / math.sqrt(H))).reshape(B * K, T * G, H)  # row t·G + g
    scores = jnp.einsum("bqh,bsh->bqs", qf, k.reshape(B * K, S_max, H))  # [B·K, T·G, S_max]
    visible = jnp.repeat(jnp.arange(S_max)[None, :] <= pos + jnp.arange(T)[:, None], G, axis=0)  # [T·G, S_max]
    probs = jax.nn.softmax(jnp.where(visible, scores, -jnp.inf).astype(jnp.float32), axis=-1)
    return jnp.einsum("bqs,bsh->bqh", probs.astype(v.dtype), v.reshape(B * K, S_max, H)).reshape(B, K, T, G, H)


def _norm(x, params, name):
    """`tinymodel.rms_norm` over the features of a feature-major x[D, M] (identity if `name` is absent)."""
    return rms_norm(x.T, params[name]).T if name in params else x


def _cached_block(x, layer, ks, vs, l: int, pos, cfg: TransformerConfig):
    """`tinymodel`'s block for new tokens x[D, B·T] (column b·T + t: sequence b at position pos + t), which
    writes their K/V into layer l of the cache ks, vs[L, B, K, S_max, H] and attends to it."""
    B, T, G, NH = ks.shape[1], x.shape[1] // ks.shape[1], cfg.N // cfg.K, cfg.N * cfg.H
    qkv = layer["w_qkv"] @ _norm(x, layer, "attn_norm")  # [(N + 2K)·H, B·T]
    q = qkv[:NH].reshape(cfg.K, G, cfg.H, B, T).transpose(3, 0, 4, 1, 2)  # [B, K, T, G, H]
    k, v = (a.reshape(cfg.K, cfg.H, B, T).transpose(2, 0, 3, 1) for a in jnp.split(qkv[NH:], 2))  # [B, K, T, H]
    ks = jax.lax.dynamic_update_slice(ks, k[None].astype(ks.dtype), (l, 0, 0, pos, 0))
    vs = jax.lax.dynamic_update_slice(vs, v[None].astype(vs.dtype), (l, 0, 0, pos, 0))
    o = _attend(q, ks[l].astype(q.dtype), vs[l].astype(q.dtype), pos)  # [B, K, T, G, H]
    x = x + layer["wo"] @ o.transpose(1, 3, 4, 0, 2).reshape(NH, B * T)
    h = _norm(x, layer, "mlp_norm")
    if cfg.gated_mlp:  # SwiGLU W_down·(silu(W_gate·h) ⊙ W_up·h), else W_out·silu(W_in·h)
        gate, up = jnp.split(layer["w_gate_up"] @ h, 2)
        return x + layer["w_down"] @ (jax.nn.silu(gate) * up), ks, vs
    return x + layer["w_out"] @ jax.nn.silu(layer["w_in"] @ h), ks, vs


def _run(params, tokens, cache, pos, cfg: TransformerConfig):
    """tokens[B, T] at positions pos … pos+T−1 → (logits of the last one, feature-major [V, B], updated cache).

    The callers transpose the logits outside the jitted function: inside it XLA would fold the transpose
    into the matmul (the slow orientation on a CPU; JAX 0.4.35 with an optimization barrier even emits a
    dot its CPU runtime rejects)."""
    p = serving_params(params, cfg)  # nothing to do for serving parameters; traced transposes otherwise
    B, T = tokens.shape
    x = p["embedding"][tokens.reshape(-1)].T  # x: [D, B·T]
    ks, vs = cache["k"], cache["v"]
    for l, layer in enumerate(p["layers"]):
        x, ks, vs = _cached_block(x, layer, ks, vs, l, pos, cfg)
    return p["unembedding_t"] @ _norm(x.reshape(cfg.D, B, T)[:, :, -1], p, "final_norm"), {"k": ks, "v": vs}


def _prefill_impl(params, tokens, cfg, max_len, dtype):
    return _run(params, tokens, init_cache(cfg, tokens.shape[0], max_len, dtype), 0, cfg)


def _decode_impl(params, token, cache, pos, cfg):
    return _run(params, token[:, None], cache, pos, cfg)


_prefill_jit = jax.jit(_prefill_impl, static_argnames=("cfg", "max_len", "dtype"))
_decode_jit = jax.jit(_decode_impl, static_argnames=("cfg",))
#: The step with the cache donated, so XLA writes the new K/V in place instead of copying the whole cache
#: (used by `generate` and the timings; the cache passed in becomes invalid).
_decode_jit_donated = jax.jit(_decode_impl, static_argnames=("cfg",), donate_argnums=(2,))


def prefill(params, tokens, cfg: TransformerConfig, max_len: int, *, dtype=None):
    """Run prompts tokens[B, T] at once (book ch. 7 §3.1): (logits of position T−1 [B, V], a cache of
    `max_len` slots with positions 0 … T−1 filled). FLOPs ≈ B·T·(2·P_matmul + 4·max_len·N·H·L): the masked
    attention scores every slot. params: `tinymodel` or `serving_params`; dtype: the cache's (default the
    parameters'). ValueError unless 1 ≤ T ≤ max_len and every id is in [0, V)."""
    check_config(cfg)
    tokens = check_tokens(tokens, cfg)
    if tokens.shape[1] > require_int("max_len", max_len):
        raise ValueError(f"prompt length T={tokens.shape[1]} exceeds the cache: max_len={max_len}")
    logits, cache = _prefill_jit(
        params, tokens, cfg=cfg, max_len=max_len, dtype=str(jnp.dtype(dtype or params["embedding"].dtype))
    )
    return logits.T, cache


def _check_pos(pos, max_len: int):
    if is_tracer(pos):
        return pos  # unchecked: XLA would clamp an out-of-range traced pos
    if not (is_int(pos) or (np.ndim(pos) == 0 and np.issubdtype(np.asarray(pos).dtype, np.integer))):
        raise ValueError(f"pos must be an integer position, got {pos!r}")
    if not 0 <= int(pos) < max_len:
        raise ValueError(f"pos must satisfy 0 ≤ pos < max_len={max_len}, got {int(pos)}")
    return jnp.int32(int(pos))


def decode_step(params, token, cache: dict, pos, cfg: TransformerConfig):
    """One generate step (book ch. 7 §3.1): token[B] at position `pos` → (logits [B, V], updated cache).

    Writes the token's K/V into slot `pos` with `jax.lax.dynamic_update_slice` and attends to slots
    0 … pos (a length mask: later slots are ignored, whatever they hold, as long as they are finite).
    `pos`: an int, an int32 scalar, or a traced value under `jax.jit` (then unchecked). FLOPs
    2·B·P_matmul + 4·B·max_len·N·H·L; bytes ≈ the weights + the whole cache (every slot is read).
    The cache passed in stays valid (no donation)."""
    check_config(cfg)
    B, max_len = _check_cache(cache, cfg)
    token = token if hasattr(token, "shape") else np.asarray(token)
    if token.ndim != 1 or token.shape[0] != B:
        raise ValueError(f"token must be [B] = [{B}] ids (one per cached sequence), got shape {tuple(token.shape)}")
    token = check_tokens(token[:, None], cfg)[:, 0]
    logits, cache = _decode_jit(params, token, cache, _check_pos(pos, max_len), cfg=cfg)
    return logits.T, cache


# --- greedy generation -----------------------------------------------------------------------------

_forward_jit = jax.jit(tinymodel.forward, static_argnames=("cfg",))


def generate(
    params, prompt, cfg: TransformerConfig, steps: int, *, use_cache: bool = True, return_logits: bool = False
):
    """Greedy decoding: `steps` new tokens int32[B, steps] after prompt[B, T] (book ch. 7 §3.1).

    use_cache=True: `prefill` (max_len = T + steps − 1), then steps − 1 decode steps (cache donated).
    use_cache=False: the naive sampler — every step runs `tinymodel.forward` over the whole sequence (a
    fixed buffer of T + steps − 1 ids whose future slots hold 0, hidden by the causal mask, so one
    compilation serves every step). return_logits: also the logits float[B, steps, V] behind each token.
    """
    check_config(cfg)
    tokens = check_tokens(prompt, cfg)
    steps = require_int("steps", steps)
    (B, T), n = tokens.shape, tokens.shape[1] + steps - 1
    if not use_cache and "unembedding_t" in params:
        raise ValueError("use_cache=False runs tinymodel.forward, which needs tinymodel parameters, not serving_params")
    if use_cache:
        params = serving_params(params, cfg)
        logits, cache = prefill(params, tokens, cfg, n)
    else:
        buf = jnp.zeros((B, n), jnp.int32).at[:, :T].set(tokens)
    outs, all_logits = [], []
    for i in range(steps):
        if use_cache and i:
            logits, cache = _decode_jit_donated(params, outs[-1], cache, jnp.int32(T + i - 1), cfg=cfg)
            logits = logits.T
        elif not use_cache:
            logits = _forward_jit(params, buf, cfg=cfg)[:, T + i - 1]
        outs.append(jnp.argmax(logits, axis=-1).astype(jnp.int32))
        all_logits.append(logits)
        if not use_cache and T + i < n:
            buf = buf.at[:, T + i].set(outs[-1])
    out = jnp.stack(outs, axis=1)
    return (out, jnp.stack(all_logits, axis=1)) if return_logits else out


def cache_matches_recompute(
    cfg: TransformerConfig = tinymodel.TINY, B: int = 2, T: int = 8, steps: int = 8, key=0, *, tol: float = LOGITS_TOL
) -> bool:
    """True when cached and recomputed greedy decoding give exactly the same tokens, and logits within `tol`
    (absolute and relative), for seeded parameters and a seeded random prompt [B, T]."""
    params = tinymodel.init_params(cfg, key)
    prompt = tinymodel.sample_tokens(cfg, B, T, key)
    a, la = generate(params, prompt, cfg, steps, return_logits=True)
    b, lb = generate(params, prompt, cfg, steps, use_cache=False, return_logits=True)
    return bool(np.array_equal(np.asarray(a), np.asarray(b)) and np.allclose(la, lb, rtol=tol, atol=tol))


# --- the roofline of a decode step ------------------------------------------------------------------


def served_model(cfg: TransformerConfig) -> inference.ServedModel:
    """The model as `inference.ServedModel`: params = what a decode step reads, P_read = P_matmul + norms
    (the embedding lookup reads only B rows; a tied embedding is the unembedding, counted once); active =
    P_matmul (with the D·V unembedding); KV elements 2·L·K·H per token; 4·N·H·L attention FLOPs per key."""
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
        served_model(cfg), B, S, chip=calibration.as_chip(), precision=precision, check_memory=False
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
        logits, state["cache"] = _decode_jit_donated(params, token, state["cache"], pos, cfg=cfg)
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
        "prefill": lambda: _prefill_jit(params, tokens, cfg=cfg, max_len=T + 1, dtype="float32"),
        "decode": _decode_timer(params, cfg, B, T),
    }
    block_until_ready(timers["prefill"]())
    timers.update(_roofline_timers() if calibration is None else {"read": _read_timer(READ_BYTES)})
    best = _best_times(timers, rounds)
    cal, m = _calibration(best, calibration, None), served_model(cfg)
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
    "LOGITS_TOL",
    "ROOFLINE_FORMS",
    "READ_BYTES",
    "MATMUL_N",
    "init_cache",
    "cache_bytes",
    "serving_params",
    "prefill",
    "decode_step",
    "generate",
    "cache_matches_recompute",
    "served_model",
    "read_bandwidth",
    "decode_bounds",
    "decode_roofline",
    "DecodeRow",
    "measure_decode",
    "format_decode_rows",
    "PrefillVsDecode",
    "prefill_vs_decode",
]
