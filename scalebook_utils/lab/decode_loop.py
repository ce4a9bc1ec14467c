"""Prefill, one decode step and greedy generation over the KV cache (book ch. 7, "All About Transformer
Inference", §3.1). Part of `jaxdecode` (`lab/decode.py`), which re-exports it.

*Prefill* runs the prompt at once and keeps every position's keys and values; each *generate* step feeds one
token, appends its K/V to the cache and attends to all of it (without a cache a step re-runs the prefix:
O(n²) FFW FLOPs for n tokens instead of O(n)). `decode_step` writes at `pos` with
`jax.lax.dynamic_update_slice` and masks slots after `pos`; `pos` may be traced, so one compilation serves
every step. The model is `tinymodel`'s (parameters, RMSNorm, GQA with query head n = k·G + g on KV head k,
SwiGLU, no positional encoding), so `generate(..., use_cache=False)`, which re-runs `tinymodel.forward`,
is the reference. Decoding reads the weights in the serving layout (`kv_cache.serving_params`). Letters:
B sequences, T prompt tokens, S keys per query; D, F, L, N, K, H, V as in ch. 4.

The jitted programs `prefill_jit`, `decode_jit` and `decode_jit_donated` are what the timings of
`lab/decode_timing.py` run.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.transformer import TransformerConfig
from scalebook_utils.core.units import is_int, require_int
from scalebook_utils.lab import tinymodel
from scalebook_utils.lab.kv_cache import check_cache, init_cache, serving_params
from scalebook_utils.lab.tinymodel import check_config, check_tokens, is_tracer, rms_norm

#: Cached and recomputed logits agree within this, absolute and relative (float32; seen: ≤ 3e-6).
LOGITS_TOL = 1e-4


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


#: The jitted prefill and decode step, feature-major logits [V, B] (`prefill` and `decode_step` check their
#: inputs, then call these; the timings of `lab/decode_timing.py` call them directly).
prefill_jit = jax.jit(_prefill_impl, static_argnames=("cfg", "max_len", "dtype"))
decode_jit = jax.jit(_decode_impl, static_argnames=("cfg",))
#: The step with the cache donated, so XLA writes the new K/V in place instead of copying the whole cache
#: (used by `generate` and the timings; the cache passed in becomes invalid).
decode_jit_donated = jax.jit(_decode_impl, static_argnames=("cfg",), donate_argnums=(2,))


def prefill(params, tokens, cfg: TransformerConfig, max_len: int, *, dtype=None):
    """Run prompts tokens[B, T] at once (book ch. 7 §3.1): (logits of position T−1 [B, V], a cache of
    `max_len` slots with positions 0 … T−1 filled). FLOPs ≈ B·T·(2·P_matmul + 4·max_len·N·H·L): the masked
    attention scores every slot. params: `tinymodel` or `serving_params`; dtype: the cache's (default the
    parameters'). ValueError unless 1 ≤ T ≤ max_len and every id is in [0, V)."""
    check_config(cfg)
    tokens = check_tokens(tokens, cfg)
    if tokens.shape[1] > require_int("max_len", max_len):
        raise ValueError(f"prompt length T={tokens.shape[1]} exceeds the cache: max_len={max_len}")
    logits, cache = prefill_jit(
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
    B, max_len = check_cache(cache, cfg)
    token = token if hasattr(token, "shape") else np.asarray(token)
    if token.ndim != 1 or token.shape[0] != B:
        raise ValueError(f"token must be [B] = [{B}] ids (one per cached sequence), got shape {tuple(token.shape)}")
    token = check_tokens(token[:, None], cfg)[:, 0]
    logits, cache = decode_jit(params, token, cache, _check_pos(pos, max_len), cfg=cfg)
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
            logits, cache = decode_jit_donated(params, outs[-1], cache, jnp.int32(T + i - 1), cfg=cfg)
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


__all__ = [
    "LOGITS_TOL",
    "prefill_jit",
    "decode_jit",
    "decode_jit_donated",
    "prefill",
    "decode_step",
    "generate",
    "cache_matches_recompute",
]
