"""The KV cache and the serving layout of the weights: the two things a decode step reads (book ch. 7,
"All About Transformer Inference", §3.1, §3.5). Part of `jaxdecode` (`lab/decode.py`), which re-exports it.

The cache is {"k", "v"}, each [L, B, K, S_max, H]: slot s of layer l holds the key and value of sequence b's
position s on KV head k, 2·L·K·H·w bytes per token (w bytes per element; `transformer.kv_cache_bytes_per_token`).
`prefill` fills slots 0 … T−1 and each decode step writes one more (`lab/decode_loop.py`).

`serving_params` lays `tinymodel`'s parameters out the way a serving engine loads them: the same numbers,
every matrix stored [out, in], the Q/K/V and gate/up projections fused, so a decode step runs fewer, larger
matmuls on feature-major activations x[D, tokens]. Letters: B sequences, S_max cache slots; D, F, L, N, K, H,
V as in ch. 4.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.transformer import TransformerConfig
from scalebook_utils.core.units import require_int
from scalebook_utils.lab.tinymodel import check_config, is_tracer

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


def check_cache(cache, cfg: TransformerConfig) -> tuple[int, int]:
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


__all__ = ["init_cache", "cache_bytes", "check_cache", "serving_params"]
