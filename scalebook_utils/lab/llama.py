"""The tiny LLaMA-style decoder of `tinymodel` (book ch. 4, "Transformer Accounting"): the config check,
parameters and their counts, the decoder block, `forward` and `loss`.

The model and its letters are described in `lab/tinymodel.py` (the door of `tinymodel`, which re-exports
every name here and adds the FLOPs checks); attention is `lab/attention.py`. Parameters are elements;
everything is seeded.
"""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.core.transformer import TransformerConfig
from scalebook_utils.lab.attention import check_chunk, chunked_attention, jax_attention, naive_attention

#: The scaled-down LLaMA of book ch. 6 §"What runs on a CPU": L=2, D=256, F=3.5·D, 8 query heads sharing
#: 2 KV heads of 32, a 1000-token vocabulary; two RMSNorms per layer, a final norm, untied embeddings.
TINY = TransformerConfig(
    "tiny-llama",
    L=2,
    D=256,
    F=896,
    N=8,
    K=2,
    H=32,
    V=1000,
    source="book ch. 6, scaled-down LLaMA for CPU checks (L=2, D=256, F=896, N=8, K=2, H=32, V=1000)",
)
#: An even smaller GQA model for fast tests and CPU training (106,496 matmul parameters, 115,008 in all).
MICRO = TransformerConfig(
    "micro-llama", L=2, D=64, F=192, N=4, K=2, H=16, V=128, source="scalebook test model (not from the book)"
)

ATTENTION_KINDS = ("naive", "chunked", "jax")
REMAT_POLICIES = ("none", "big_matmuls", "block")
RMS_EPS = 1e-6


# --- config and parameters -------------------------------------------------------------------------


def check_config(cfg: TransformerConfig) -> TransformerConfig:
    """Return `cfg` if the tiny model can build it: a dense model with GQA (MHA K = N, MQA K = 1).

    Raises ValueError for MoE (E > 0) and MLA (kv_lora_rank > 0) configs and for norms_per_layer > 2.
    """
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be a transformer.TransformerConfig, got {type(cfg).__name__}")
    if cfg.is_moe or cfg.is_mla:
        what = "an MoE (E > 0)" if cfg.is_moe else "multi-head latent attention (kv_lora_rank > 0)"
        raise ValueError(f"the tiny model supports dense GQA transformers only; {cfg.name!r} uses {what}")
    if cfg.norms_per_layer > 2:
        raise ValueError(
            f"the tiny model has at most 2 norms per layer (before attention and before the MLP); "
            f"{cfg.name!r} asks for {cfg.norms_per_layer}"
        )
    return cfg


def _rng(key) -> np.random.Generator:
    """A NumPy generator from an int seed or a `jax.random` key (raw uint32 or typed).

    NumPy, not `jax.random`: every new array shape costs `jax.random` a compilation (≈0.4 s on a small
    CPU), NumPy nothing, and the numbers are just as reproducible."""
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        if key < 0:
            raise ValueError(f"seed must be a non-negative integer, got {key}")
        return np.random.default_rng(int(key))
    try:
        data = jax.random.key_data(key)
    except (TypeError, ValueError):
        data = key
    words = np.asarray(data).astype(np.uint64).ravel()
    if words.size == 0:
        raise ValueError(f"key must be an int seed or a jax.random key, got {key!r}")
    return np.random.default_rng([int(w) for w in words])


def _matrix_shapes(cfg: TransformerConfig) -> dict[str, dict[str, tuple[int, ...]]]:
    D, F, N, K, H = cfg.D, cfg.F, cfg.N, cfg.K, cfg.H
    attn = {"wq": (D, N, H), "wk": (D, K, H), "wv": (D, K, H), "wo": (N, H, D)}
    mlp = {"w_gate": (D, F), "w_up": (D, F), "w_down": (F, D)} if cfg.gated_mlp else {"w_in": (D, F), "w_out": (F, D)}
    return {"attn": attn, "mlp": mlp}


_NORM_NAMES = ("attn_norm", "mlp_norm")


def init_params(cfg: TransformerConfig, key=0, dtype="float32") -> dict:
    """Parameters of the tiny model as nested dicts (deterministic for a given `key`).

    Layout: {"embedding": [V, D], "layers": [per layer {"attn": {wq, wk, wv, wo}, "mlp": {w_gate, w_up,
    w_down} or {w_in, w_out}, "attn_norm": [D], "mlp_norm": [D]} (the norms that `norms_per_layer`
    keeps)], "final_norm": [D] (if cfg.final_norm), "unembedding": [D, V] (unless tied)}.
    Layers are a Python list, not stacked arrays, so the forward pass is unrolled and XLA's cost
    analysis counts every layer (a `lax.scan` body is counted once).

    Matrices are normal with std 1/√fan_in (fan_in = D for W_Q, W_K, W_V, W_gate, W_up, W_in and the
    unembedding; N·H for W_O; F for W_down); the embedding has std 1; norm scales start at 1.
    `key` is an int seed or a `jax.random` key (both feed a NumPy generator); `dtype` e.g. "float32"
    or "bfloat16".
    """
    check_config(cfg)
    dt = jnp.dtype(dtype)
    shapes = _matrix_shapes(cfg)
    rng = _rng(key)

    def normal(shape, fan_in):  # drawn in a fixed order: embedding, unembedding, then layer by layer
        return jnp.asarray((rng.standard_normal(shape, dtype=np.float32) / np.float32(math.sqrt(fan_in))).astype(dt))

    def ones():
        return jnp.asarray(np.ones((cfg.D,), dt))

    embedding = normal((cfg.V, cfg.D), 1)
    unembedding = normal((cfg.D, cfg.V), cfg.D)
    fan_in = {"wo": cfg.N * cfg.H, "w_down": cfg.F, "w_out": cfg.F}
    layers = []
    for _ in range(cfg.L):
        layer = {
            part: {name: normal(shape, fan_in.get(name, cfg.D)) for name, shape in shapes[part].items()}
            for part in ("attn", "mlp")
        }
        for norm in _NORM_NAMES[: cfg.norms_per_layer]:
            layer[norm] = ones()
        layers.append(layer)
    params = {"embedding": embedding, "layers": layers}
    if cfg.final_norm:
        params["final_norm"] = ones()
    if not cfg.tied_embeddings:
        params["unembedding"] = unembedding  # drawn also when tied, so the layers do not depend on the flag
    return params


def _shape(x) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _size(x) -> int:
    return int(np.prod(_shape(x), dtype=np.int64))


def count_params(params) -> int:
    """Total parameters (elements): the sum of the sizes of every leaf of the pytree.

    Works on arrays and on `jax.eval_shape(init_params, cfg)` (shapes only, nothing allocated)."""
    return int(sum(_size(x) for x in jax.tree_util.tree_leaves(params)))


def component_counts(params, cfg: TransformerConfig) -> dict[str, int]:
    """Parameters by component, counted from the arrays: embedding, attention, mlp, norms, unembedding,
    total (the keys and meaning of `transformer.param_count`, which this must equal exactly).

    Per layer: attention 2·D·(N+K)·H, MLP 3·D·F (gated) or 2·D·F, norms norms_per_layer·D; once: the
    embedding V·D, the final norm D, the unembedding D·V (0 when tied). Book ch. 4 summary table.
    Raises ValueError if an array's shape does not match `cfg`.
    """
    check_config(cfg)
    shapes = _matrix_shapes(cfg)

    def expect(x, shape, what):
        if _shape(x) != tuple(shape):
            raise ValueError(f"{what} has shape {_shape(x)}, but cfg {cfg.name!r} needs {tuple(shape)}")
        return _size(x)

    if len(params["layers"]) != cfg.L:
        raise ValueError(f"params have {len(params['layers'])} layers, cfg {cfg.name!r} has L={cfg.L}")
    out = {
        "embedding": expect(params["embedding"], (cfg.V, cfg.D), "embedding"),
        "attention": 0,
        "mlp": 0,
        "norms": 0,
        "unembedding": 0,
    }
    for l, layer in enumerate(params["layers"]):
        for part, key in (("attn", "attention"), ("mlp", "mlp")):
            if set(layer[part]) != set(shapes[part]):
                raise ValueError(f"layer {l} {part} has {sorted(layer[part])}, cfg needs {sorted(shapes[part])}")
            out[key] += sum(expect(layer[part][n], s, f"layer {l} {n}") for n, s in shapes[part].items())
        out["norms"] += sum(expect(v, (cfg.D,), f"layer {l} {n}") for n, v in layer.items() if "norm" in n)
    if "final_norm" in params:
        out["norms"] += expect(params["final_norm"], (cfg.D,), "final_norm")
    if "unembedding" in params:
        out["unembedding"] = expect(params["unembedding"], (cfg.D, cfg.V), "unembedding")
    out["total"] = sum(out.values())
    if out["total"] != count_params(params):
        raise ValueError("params hold arrays that are not part of the model")
    return out


# --- building blocks -------------------------------------------------------------------------------


def rms_norm(x, scale, eps: float = RMS_EPS):
    """RMSNorm over the last axis: x / √(mean(x²) + eps) · scale (no bias, no mean subtraction)."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)


# --- the model -------------------------------------------------------------------------------------


def is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def check_tokens(tokens, cfg: TransformerConfig, min_len: int = 1):
    """Shape and dtype always; the id range only for concrete arrays (a traced value has no numbers yet;
    out-of-range ids would otherwise be clamped silently by the embedding gather)."""
    if not hasattr(tokens, "dtype"):
        tokens = np.asarray(tokens)
    shape, dtype = tuple(tokens.shape), tokens.dtype
    if len(shape) != 2 or shape[1] < min_len:
        raise ValueError(f"tokens must be [B, T] with T ≥ {min_len}, got shape {tuple(shape)}")
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(f"tokens must be integer ids, got dtype {dtype}")
    if is_tracer(tokens):
        return tokens
    ids = np.asarray(tokens)
    if ids.size and (ids.min() < 0 or ids.max() >= cfg.V):
        raise ValueError(f"token ids must lie in [0, V={cfg.V}); got ids from {ids.min()} to {ids.max()}")
    return jnp.asarray(tokens)


def _check_attention(attention: str, chunk):
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_KINDS)}; got {attention!r}")
    if attention == "chunked":
        check_chunk(chunk)
    elif chunk is not None:
        raise ValueError(f"chunk applies to attention='chunked' only (got attention={attention!r})")


def _attend(q, k, v, attention, chunk, causal):
    if attention == "naive":
        return naive_attention(q, k, v, causal)
    if attention == "chunked":
        return chunked_attention(q, k, v, chunk=chunk, causal=causal)
    return jax_attention(q, k, v, causal)


def _block(x, layer, cfg: TransformerConfig, attention: str, chunk, causal: bool):
    """One decoder block: x + Attn(norm(x)), then + MLP(norm(x)). x: [B, T, D]."""
    a = layer["attn"]
    h = rms_norm(x, layer["attn_norm"]) if "attn_norm" in layer else x
    q = jnp.einsum("btd,dnh->btnh", h, a["wq"])
    k = jnp.einsum("btd,dkh->btkh", h, a["wk"])
    v = jnp.einsum("btd,dkh->btkh", h, a["wv"])
    o = _attend(q, k, v, attention, chunk, causal)
    x = x + jnp.einsum("btnh,nhd->btd", o, a["wo"])
    m = layer["mlp"]
    h = rms_norm(x, layer["mlp_norm"]) if "mlp_norm" in layer else x
    if cfg.gated_mlp:
        u = jax.nn.silu(jnp.einsum("btd,df->btf", h, m["w_gate"])) * jnp.einsum("btd,df->btf", h, m["w_up"])
        return x + jnp.einsum("btf,fd->btd", u, m["w_down"])
    u = jax.nn.silu(jnp.einsum("btd,df->btf", h, m["w_in"]))
    return x + jnp.einsum("btf,fd->btd", u, m["w_out"])


def remat_policy(policy: str):
    """The `jax.checkpoint` policy for a name in `REMAT_POLICIES` (ValueError for any other name); callers
    checkpoint only when the name is not "none"."""
    if policy not in REMAT_POLICIES:
        raise ValueError(f"remat must be one of {', '.join(REMAT_POLICIES)}; got {policy!r}")
    if policy == "big_matmuls":
        # projection and MLP matmuls have no dot_general batch dims; QKᵀ and PV (batched over B and K) do,
        # so they are recomputed: the book's "save only the big matmul outputs".
        return jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint_policies.nothing_saveable  # "block": keep each block's input only


def _hidden(params, tokens, cfg, attention, chunk, causal, remat):
    """Embedding lookup and the L blocks (unrolled): [B, T] ids → [B, T, D] residual stream."""
    x = params["embedding"][tokens]
    block = functools.partial(_block, cfg=cfg, attention=attention, chunk=chunk, causal=causal)
    if remat != "none":
        block = jax.checkpoint(block, policy=remat_policy(remat), prevent_cse=True)
    for layer in params["layers"]:
        x = block(x, layer)
    return x


def _logits(params, x, cfg):
    if "final_norm" in params:
        x = rms_norm(x, params["final_norm"])
    w = params["embedding"].T if cfg.tied_embeddings else params["unembedding"]
    return jnp.einsum("btd,dv->btv", x, w)


def forward(
    params,
    tokens,
    cfg: TransformerConfig,
    *,
    attention: str = "naive",
    chunk: int | None = None,
    causal: bool = True,
    remat: str = "none",
):
    """Logits [B, T, V] for token ids [B, T] (int, 0 ≤ id < V).

    attention: "naive" (materialised scores), "chunked" (flash-style, needs `chunk`) or "jax"
    (`jax.nn.dot_product_attention`); causal: mask future keys. remat: "none", "big_matmuls" or
    "block" wraps every block in `jax.checkpoint` (it matters only under a gradient).
    Forward FLOPs ≈ B·T·(2·matmul_params + 4·T·N·H·L) (book ch. 4; `transformer.forward_flops_per_token`).
    """
    check_config(cfg)
    _check_attention(attention, chunk)
    remat_policy(remat)
    tokens = check_tokens(tokens, cfg)
    return _logits(params, _hidden(params, tokens, cfg, attention, chunk, causal, remat), cfg)


def _cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def loss(
    params,
    tokens,
    cfg: TransformerConfig,
    *,
    attention: str = "naive",
    chunk: int | None = None,
    causal: bool = True,
    remat: str = "none",
):
    """Mean next-token cross-entropy (nats): the model reads tokens[:, :-1] and predicts tokens[:, 1:].

    tokens: [B, T + 1] ids, so the model runs on T positions. With remat="block" the output head
    (final norm, unembedding, softmax) is checkpointed too, so the backward pass recomputes the whole
    forward, as `transformer.remat_recompute_flops_per_token(..., "block")` assumes. Other keywords as
    `forward`. A uniform guess scores ln V.
    """
    check_config(cfg)
    _check_attention(attention, chunk)
    remat_policy(remat)
    tokens = check_tokens(tokens, cfg, min_len=2)
    x = _hidden(params, tokens[:, :-1], cfg, attention, chunk, causal, remat)
    head = lambda p, x, t: _cross_entropy(_logits(p, x, cfg), t)  # noqa: E731
    if remat == "block":
        head = jax.checkpoint(head, policy=remat_policy(remat), prevent_cse=True)
    return head(params, x, tokens[:, 1:])


def sample_tokens(cfg: TransformerConfig, B: int, T: int, key=0):
    """Seeded uniform random token ids int32[B, T] in [0, V) (NumPy generator, as `init_params`)."""
    return jnp.asarray(_rng(key).integers(0, cfg.V, size=(B, T)), jnp.int32)


__all__ = [
    "TINY",
    "MICRO",
    "ATTENTION_KINDS",
    "REMAT_POLICIES",
    "RMS_EPS",
    "check_config",
    "init_params",
    "count_params",
    "component_counts",
    "rms_norm",
    "is_tracer",
    "check_tokens",
    "remat_policy",
    "forward",
    "loss",
    "sample_tokens",
]
