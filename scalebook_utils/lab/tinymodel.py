"""A tiny LLaMA-style decoder in plain JAX, to check the accounting of book ch. 4 against XLA.

`transformer` counts parameters and FLOPs on paper; this module builds the same model as arrays and
lets XLA count: `component_counts` must equal `transformer.param_count` exactly, `flops_check`
compares the compiled program's `cost_analysis()['flops']` with `forward_flops_per_token` /
`training_flops_per_token`, and `train_flops_with_remat` shows block rematerialisation lifting a
training step from ≈ 6 to ≈ 8 · params · tokens (book ch. 4, "Gradient checkpointing"; XLA skips
recomputing each block's last matmul, which the backward never reads, so it is a little under 8).

The model (book ch. 4, "Transformer Accounting"; letters B, T, S, D, F, N, K, G = N/K, H, L, V):

- embedding E[V, D] (a lookup, no FLOPs), then L blocks, a final RMSNorm and the unembedding
  W_U[D, V] (E transposed when `cfg.tied_embeddings`);
- each block: x += Attn(norm₁(x)); x += MLP(norm₂(x)). RMSNorms have a scale vector of D and no bias;
  `cfg.norms_per_layer` = 2 keeps both, 1 keeps only the one before attention (the MLP then reads the
  raw residual), 0 none. `cfg.final_norm` adds one more norm before the unembedding;
- attention is grouped-query: W_Q[D, N, H], W_K[D, K, H], W_V[D, K, H], W_O[N, H, D]; query head
  n = k·G + g shares KV head k (the layout `jax.nn.dot_product_attention` uses);
- MLP: SwiGLU, (silu(x·W_gate) ⊙ x·W_up)·W_down with W_gate, W_up [D, F], W_down [F, D]; with
  `cfg.gated_mlp` False it is silu(x·W_in)·W_out (2 matrices);
- no biases and no positional encoding. RoPE (what LLaMA uses) has no parameters and costs
  O(B·T·(N+K)·H) = O(B·T·D) elementwise FLOPs, so leaving it out changes neither count the book makes
  (it would matter for what the model can learn about word order, which these checks do not need).

MoE and MLA configs are out of scope (ValueError). The layer loop is a Python loop, not `lax.scan`:
XLA's cost analysis counts a loop body once, not once per trip (checked on JAX 0.4.35 and 0.10.2), so
a scanned model would report about 1/L of its FLOPs. For the same reason `chunked_attention`, which
streams K/V with `lax.scan`, is checked for values here and never for FLOPs.

Units: parameters are elements; FLOPs are XLA's count (a multiply-add is 2; exp, log, rsqrt are
"transcendentals", a separate counter that `flops` leaves out). Everything is seeded.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from scalebook_utils.lab import runtime as jaxlab
from scalebook_utils.core.transformer import (TransformerConfig, forward_flops_per_token, matmul_params, training_flops_per_token)

#: The scaled-down LLaMA of book ch. 6 §"What runs on a CPU": L=2, D=256, F=3.5·D, 8 query heads sharing
#: 2 KV heads of 32, a 1000-token vocabulary; two RMSNorms per layer, a final norm, untied embeddings.
TINY = TransformerConfig("tiny-llama", L=2, D=256, F=896, N=8, K=2, H=32, V=1000,
                         source="book ch. 6, scaled-down LLaMA for CPU checks (L=2, D=256, F=896, N=8, K=2, "
                                "H=32, V=1000)")
#: An even smaller GQA model for fast tests and CPU training (106,496 matmul parameters, 115,008 in all).
MICRO = TransformerConfig("micro-llama", L=2, D=64, F=192, N=4, K=2, H=16, V=128,
                          source="scalebook test model (not from the book)")

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
        raise ValueError(f"the tiny model has at most 2 norms per layer (before attention and before the MLP); "
                         f"{cfg.name!r} asks for {cfg.norms_per_layer}")
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
    mlp = ({"w_gate": (D, F), "w_up": (D, F), "w_down": (F, D)} if cfg.gated_mlp
           else {"w_in": (D, F), "w_out": (F, D)})
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
        layer = {part: {name: normal(shape, fan_in.get(name, cfg.D)) for name, shape in shapes[part].items()}
                 for part in ("attn", "mlp")}
        for norm in _NORM_NAMES[:cfg.norms_per_layer]:
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
    out = {"embedding": expect(params["embedding"], (cfg.V, cfg.D), "embedding"), "attention": 0, "mlp": 0,
           "norms": 0, "unembedding": 0}
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


def _check_qkv(q, k, v):
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape:
        raise ValueError(f"expected q[B, T, N, H] and k, v[B, S, K, H]; got q{tuple(q.shape)}, "
                         f"k{tuple(k.shape)}, v{tuple(v.shape)}")
    B, T, N, H = q.shape
    if k.shape[0] != B or k.shape[3] != H:
        raise ValueError(f"q{tuple(q.shape)} and k{tuple(k.shape)} disagree on B or H")
    K = k.shape[2]
    if N % K:
        raise ValueError(f"KV heads K={K} must divide query heads N={N}")
    return B, T, N, K, N // K, H, k.shape[1]


def _causal_mask(T: int, S: int):
    """bool[T, S]: key s is visible to query t iff s ≤ t + (S − T) (the last query sees every key)."""
    return jnp.arange(S)[None, :] <= jnp.arange(T)[:, None] + (S - T)


def naive_attention(q, k, v, causal: bool = True):
    """Softmax attention that materialises the scores [B, K, G, T, S] (book ch. 4, "Attention").

    q: [B, T, N, H]; k, v: [B, S, K, H] with K dividing N (GQA; G = N/K query heads per KV head,
    query head n = k·G + g). Scores q·k/√H, softmax over S, times v → [B, T, N, H].
    `causal`: query t sees keys s ≤ t + S − T (self-attention S = T: s ≤ t); needs T ≤ S.
    FLOPs: 4·B·T·S·N·H for the two contractions, whatever the mask (it only hides scores).
    """
    B, T, N, K, G, H, S = _check_qkv(q, k, v)
    if causal and T > S:
        raise ValueError(f"causal attention needs T ≤ S (every query must see a key); got T={T}, S={S}")
    qg = (q * (1.0 / math.sqrt(H))).reshape(B, T, K, G, H)
    scores = jnp.einsum("btkgh,bskh->bkgts", qg, k)
    if causal:
        scores = jnp.where(_causal_mask(T, S), scores, -jnp.inf)
    probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgts,bskh->btkgh", probs, v)
    return out.reshape(B, T, N, H)


def _merge(M1, L1, O1, M2, L2, O2):
    """The book's merge of two softmax partial results (ch. 4 Appendix A, flash attention).

    M: running max of the scores, L: Σ exp(score − M), O: Σ exp(score − M)·v (unnormalised).
    With M = max(M1, M2): L = e^(M1−M)·L1 + e^(M2−M)·L2, O = e^(M1−M)·O1 + e^(M2−M)·O2.
    """
    M = jnp.maximum(M1, M2)
    a1 = jnp.where(M1 == -jnp.inf, 0.0, jnp.exp(M1 - M))
    a2 = jnp.where(M2 == -jnp.inf, 0.0, jnp.exp(M2 - M))
    return M, a1 * L1 + a2 * L2, a1[..., None] * O1 + a2[..., None] * O2


def _check_chunk(chunk) -> int:
    if not isinstance(chunk, numbers.Integral) or isinstance(chunk, bool) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer number of keys, got {chunk!r}")
    return int(chunk)


def chunked_attention(q, k, v, *, chunk: int, causal: bool = True):
    """Flash-style attention: stream K/V in chunks of `chunk` keys, never forming the [T, S] scores.

    Book ch. 4 Appendix A. For each chunk j the scores s = q·k_j/√H give the chunk's own statistics
    M₂ = max s, L₂ = Σ exp(s − M₂), O₂ = Σ exp(s − M₂)·v_j, merged into the running (M, L, O) with
    the book's rule (see `_merge`); the output is O / L. Shapes as `naive_attention`. When `chunk`
    does not divide S the last chunk is padded with masked keys, so any positive chunk works.
    Same result as `naive_attention` up to fp32 rounding: ≤ 5e-7 apart on unit-normal inputs (the tests
    allow 1e-5, absolute and relative). The chunks run in a `lax.scan`, so XLA's cost analysis counts
    one chunk's FLOPs; the statistics are kept in float32 whatever the input dtype.
    """
    B, T, N, K, G, H, S = _check_qkv(q, k, v)
    chunk = _check_chunk(chunk)
    if causal and T > S:
        raise ValueError(f"causal attention needs T ≤ S (every query must see a key); got T={T}, S={S}")
    n_chunks = -(-S // chunk)
    pad = n_chunks * chunk - S
    if pad:
        k = jnp.pad(k, ((0, 0), (0, pad), (0, 0), (0, 0)))
        v = jnp.pad(v, ((0, 0), (0, pad), (0, 0), (0, 0)))
    kc = k.reshape(B, n_chunks, chunk, K, H).swapaxes(0, 1)  # [n_chunks, B, C, K, H]
    vc = v.reshape(B, n_chunks, chunk, K, H).swapaxes(0, 1)
    qg = (q * (1.0 / math.sqrt(H))).reshape(B, T, K, G, H).astype(jnp.float32)

    def step(carry, xs):
        M, L, O = carry  # [B, K, G, T], [B, K, G, T], [B, K, G, T, H]
        j, kj, vj = xs
        s = jnp.einsum("btkgh,bckh->bkgtc", qg, kj.astype(jnp.float32))
        cols = j * chunk + jnp.arange(chunk)
        visible = (cols < S)[None, :]
        if causal:
            visible = visible & (cols[None, :] <= jnp.arange(T)[:, None] + (S - T))
        s = jnp.where(visible, s, -jnp.inf)
        M2 = jnp.max(s, axis=-1)
        p = jnp.where(visible, jnp.exp(s - jnp.where(M2 == -jnp.inf, 0.0, M2)[..., None]), 0.0)
        L2 = jnp.sum(p, axis=-1)
        O2 = jnp.einsum("bkgtc,bckh->bkgth", p, vj.astype(jnp.float32))
        return _merge(M, L, O, M2, L2, O2), None

    init = (jnp.full((B, K, G, T), -jnp.inf, jnp.float32), jnp.zeros((B, K, G, T), jnp.float32),
            jnp.zeros((B, K, G, T, H), jnp.float32))
    (M, L, O), _ = jax.lax.scan(step, init, (jnp.arange(n_chunks), kc, vc))
    out = O / L[..., None]  # [B, K, G, T, H]
    return out.transpose(0, 3, 1, 2, 4).reshape(B, T, N, H).astype(q.dtype)


def jax_attention(q, k, v, causal: bool = True):
    """`jax.nn.dot_product_attention` (XLA implementation) on the same inputs, as a third opinion.

    Available on every supported JAX (0.4.35+), with GQA. The causal mask is passed explicitly so it
    has `naive_attention`'s alignment (s ≤ t + S − T) also when T ≠ S.
    """
    B, T, N, K, G, H, S = _check_qkv(q, k, v)
    if causal and T > S:
        raise ValueError(f"causal attention needs T ≤ S (every query must see a key); got T={T}, S={S}")
    mask = _causal_mask(T, S)[None, None] if causal else None
    return jax.nn.dot_product_attention(q, k, v, mask=mask)


class FlashStep(NamedTuple):
    """Running statistics of one query after a K/V chunk (book ch. 4 Appendix A).

    chunk: index of the chunk just merged; keys: (first, last + 1) key positions it held; M: running max
    of the scores; L: running denominator Σ exp(score − M); O: running unnormalised output
    Σ exp(score − M)·v, shape [H]. `output` = O / L is the attention output over the keys seen so far.
    """

    chunk: int
    keys: tuple[int, int]
    M: float
    L: float
    O: np.ndarray

    @property
    def output(self) -> np.ndarray:
        return self.O / self.L


def flash_steps(q_row, k, v, chunk: int) -> list[FlashStep]:
    """Step through flash attention for ONE query: the running (M, L, O) after each K/V chunk.

    q_row: [H]; k, v: [S, H]; scores are q·k/√H (as in `naive_attention`). After the last chunk,
    `steps[-1].output` equals softmax(q·kᵀ/√H)·v (compare with `softmax_row`). Computed in float64
    with NumPy, so a notebook can print every number; chunks need not divide S.
    """
    q_row, k, v = (np.asarray(a, np.float64) for a in (q_row, k, v))
    if q_row.ndim != 1 or k.ndim != 2 or v.shape != k.shape or k.shape[1] != q_row.shape[0]:
        raise ValueError(f"expected q_row[H], k[S, H], v[S, H]; got {q_row.shape}, {k.shape}, {v.shape}")
    chunk = _check_chunk(chunk)
    S, H = k.shape
    M, L, O = -np.inf, 0.0, np.zeros(H)
    steps = []
    for j, start in enumerate(range(0, S, chunk)):
        stop = min(start + chunk, S)
        s = k[start:stop] @ q_row / math.sqrt(H)
        M2 = float(s.max())
        p = np.exp(s - M2)
        L2, O2 = float(p.sum()), p @ v[start:stop]
        Mn = max(M, M2)
        a1 = 0.0 if M == -np.inf else math.exp(M - Mn)
        a2 = math.exp(M2 - Mn)
        M, L, O = Mn, a1 * L + a2 * L2, a1 * O + a2 * O2
        steps.append(FlashStep(j, (start, stop), M, L, O.copy()))
    return steps


def softmax_row(q_row, k, v) -> np.ndarray:
    """softmax(q·kᵀ/√H)·v for one query in float64: the answer `flash_steps` must reach."""
    q_row, k, v = (np.asarray(a, np.float64) for a in (q_row, k, v))
    s = k @ q_row / math.sqrt(k.shape[1])
    p = np.exp(s - s.max())
    return (p / p.sum()) @ v


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
        _check_chunk(chunk)
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


def _remat_policy(policy: str):
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
        block = jax.checkpoint(block, policy=_remat_policy(remat), prevent_cse=True)
    for layer in params["layers"]:
        x = block(x, layer)
    return x


def _logits(params, x, cfg):
    if "final_norm" in params:
        x = rms_norm(x, params["final_norm"])
    w = params["embedding"].T if cfg.tied_embeddings else params["unembedding"]
    return jnp.einsum("btd,dv->btv", x, w)


def forward(params, tokens, cfg: TransformerConfig, *, attention: str = "naive", chunk: int | None = None,
            causal: bool = True, remat: str = "none"):
    """Logits [B, T, V] for token ids [B, T] (int, 0 ≤ id < V).

    attention: "naive" (materialised scores), "chunked" (flash-style, needs `chunk`) or "jax"
    (`jax.nn.dot_product_attention`); causal: mask future keys. remat: "none", "big_matmuls" or
    "block" wraps every block in `jax.checkpoint` (it matters only under a gradient).
    Forward FLOPs ≈ B·T·(2·matmul_params + 4·T·N·H·L) (book ch. 4; `transformer.forward_flops_per_token`).
    """
    check_config(cfg)
    _check_attention(attention, chunk)
    _remat_policy(remat)
    tokens = check_tokens(tokens, cfg)
    return _logits(params, _hidden(params, tokens, cfg, attention, chunk, causal, remat), cfg)


def _cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def loss(params, tokens, cfg: TransformerConfig, *, attention: str = "naive", chunk: int | None = None,
         causal: bool = True, remat: str = "none"):
    """Mean next-token cross-entropy (nats): the model reads tokens[:, :-1] and predicts tokens[:, 1:].

    tokens: [B, T + 1] ids, so the model runs on T positions. With remat="block" the output head
    (final norm, unembedding, softmax) is checkpointed too, so the backward pass recomputes the whole
    forward, as `transformer.remat_recompute_flops_per_token(..., "block")` assumes. Other keywords as
    `forward`. A uniform guess scores ln V.
    """
    check_config(cfg)
    _check_attention(attention, chunk)
    _remat_policy(remat)
    tokens = check_tokens(tokens, cfg, min_len=2)
    x = _hidden(params, tokens[:, :-1], cfg, attention, chunk, causal, remat)
    head = lambda p, x, t: _cross_entropy(_logits(p, x, cfg), t)  # noqa: E731
    if remat == "block":
        head = jax.checkpoint(head, policy=_remat_policy(remat), prevent_cse=True)
    return head(params, x, tokens[:, 1:])


def sample_tokens(cfg: TransformerConfig, B: int, T: int, key=0):
    """Seeded uniform random token ids int32[B, T] in [0, V) (NumPy generator, as `init_params`)."""
    return jnp.asarray(_rng(key).integers(0, cfg.V, size=(B, T)), jnp.int32)


# --- FLOPs: XLA's count against the book's ---------------------------------------------------------

#: XLA CPU flops per element of each elementwise piece, (forward, forward + backward). Pieces marked
#: "measured" were compiled alone between two matmuls with `jaxlab.cost_analysis` (JAX 0.4.35 and 0.10.2
#: agree to ±1); the others are counted by hand from the ops. exp, log and rsqrt are "transcendentals",
#: a separate XLA counter, so they add nothing here.
ELEMENTWISE_FLOPS = {
    "rms_norm": (4, 15),        # measured 4 / 13: x², mean, ×rsqrt, ×scale; + 2 for the scale's gradient
    "residual": (1, 1),         # x + f(x); the backward just passes the cotangent on
    "q_scale": (1, 2),          # q · 1/√H
    "softmax": (4, 13),         # measured: max, −max, Σ, ÷ (0.4.35: 12 with the backward)
    "causal_mask": (1, 2),      # select(mask, s, −∞) (0.4.35 counts ≈ 2 in the forward)
    "swiglu": (5, 23),          # measured: silu(a)·b = a·(1 / (1 + e^−a))·b
    "silu": (4, 16),            # measured
    "cross_entropy": (5, 10),   # measured: log_softmax over V, per logit, and picking the target
}


def elementwise_flops_estimate(cfg: TransformerConfig, B: int, T: int, kind: str = "forward", *,
                               causal: bool = True) -> float:
    """XLA-counted elementwise FLOPs of the tiny model, which the book's matmul formula leaves out.

    Per token and layer: norms_per_layer·c_norm·D + 2·c_res·D + c_q·N·H + (c_soft [+ c_mask])·S·N
    + c_act·F; per token once: final norm c_norm·D and, for training, the loss c_ce·V; constants from
    `ELEMENTWISE_FLOPS` (forward or forward + backward). S = T (naive attention scores every key).
    This is O(B·T·(D + F + S·N + V)) against the matmuls' O(B·T·params): a few per cent for MICRO.
    """
    check_config(cfg)
    if kind not in ("forward", "train"):
        raise ValueError(f"kind must be 'forward' or 'train', got {kind!r}")
    i = 0 if kind == "forward" else 1
    c = {k: v[i] for k, v in ELEMENTWISE_FLOPS.items()}
    act = c["swiglu"] if cfg.gated_mlp else c["silu"]
    soft = c["softmax"] + (c["causal_mask"] if causal else 0)
    per_layer = cfg.norms_per_layer * c["rms_norm"] * cfg.D + 2 * c["residual"] * cfg.D + c["q_scale"] * cfg.N * cfg.H \
        + soft * T * cfg.N + act * cfg.F
    once = (c["rms_norm"] * cfg.D if cfg.final_norm else 0) + (c["cross_entropy"] * cfg.V if i else 0)
    return float(B * T * (cfg.L * per_layer + once))


@dataclass(frozen=True)
class FlopsCheck:
    """XLA's FLOP count of the compiled tiny model against the book's formula.

    measured: `cost_analysis()['flops']` of the jitted forward (kind "forward") or value_and_grad of the
    loss (kind "train"); predicted: B·T·forward_flops_per_token(cfg, T) or B·T·training_flops_per_token
    (naive attention scores all T×T pairs, so the formula's causal=False); ratio = measured / predicted;
    tolerance: the accepted ratio − 1 (see `flops_check`); elementwise: `elementwise_flops_estimate`;
    fine_ratio = measured / (predicted + elementwise), accepted within ±fine_tolerance.
    """

    cfg_name: str
    kind: str
    B: int
    T: int
    measured: float
    predicted: float
    tolerance: float
    elementwise: float
    fine_tolerance: float

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted

    @property
    def fine_ratio(self) -> float:
        return self.measured / (self.predicted + self.elementwise)

    @property
    def ok(self) -> bool:
        """1 ≤ ratio ≤ 1 + tolerance (XLA counts at least the matmuls, and little besides)."""
        return 1.0 <= self.ratio <= 1.0 + self.tolerance

    @property
    def fine_ok(self) -> bool:
        return abs(self.fine_ratio - 1.0) <= self.fine_tolerance

    def __str__(self) -> str:
        return (f"{self.cfg_name} {self.kind} B={self.B} T={self.T}: measured {self.measured:.4g} / predicted "
                f"{self.predicted:.4g} = {self.ratio:.4f} (≤ 1 + {self.tolerance:.3f}); with elementwise "
                f"{self.fine_ratio:.4f} (±{self.fine_tolerance})")


#: |measured / (matmuls + elementwise estimate) − 1| accepted by `FlopsCheck.fine_ok`.
FINE_TOLERANCE = {"forward": 0.005, "train": 0.01}


def _cpu_specs(tree):
    """ShapeDtypeStructs placed on the first CPU device, so `jax.jit(...).lower` compiles for the CPU
    even on a GPU/TPU runtime (whose cost model adds epilogue FLOPs; see `jaxlab.cost_analysis`)."""
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(_shape(x), x.dtype, sharding=cpu), tree)


def _cpu_flops(f, *args) -> float:
    """XLA's FLOP count of jit(f) for arguments shaped like `args`, compiled for a CPU device."""
    return float(jaxlab.cost_analysis(f, *_cpu_specs(args))["flops"])


def _abstract_inputs(cfg: TransformerConfig, B: int, T: int):
    params = jax.eval_shape(functools.partial(init_params, cfg))
    return params, jax.ShapeDtypeStruct((B, T), jnp.int32)


def _check_shape_args(B, T):
    for name, v in (("B", B), ("T", T)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def flops_check(cfg: TransformerConfig, B: int, T: int, kind: str = "forward") -> FlopsCheck:
    """Compile the causal tiny model with naive attention for a CPU device and compare XLA's FLOPs with
    the book's matmul count (book ch. 4, "rule of thumb": forward 2·params, training 6·params per token,
    plus 4·T·N·H·L resp. 12·T·N·H·L of attention; `transformer.forward_flops_per_token`).

    kind "forward": jit(forward) on tokens [B, T]; "train": jit(value_and_grad(loss)) on [B, T + 1]
    (the model sees T positions). The compiled count also holds the elementwise work (norms, softmax,
    SiLU, residual adds, the loss), so the ratio is a little above 1. Tolerance = 2 × the elementwise
    estimate / predicted: twice the expected excess, since the per-op constants shift a little with
    fusion and between XLA versions. `fine_ratio` adds the estimate itself and lands within
    `FINE_TOLERANCE` (0.5 % forward, 1 % train; observed ≤ 0.25 % on JAX 0.4.35 and 0.10.2).
    Nothing is executed: the inputs are abstract (shape and dtype only).
    """
    check_config(cfg)
    _check_shape_args(B, T)
    if kind not in ("forward", "train"):
        raise ValueError(f"kind must be 'forward' or 'train', got {kind!r}")
    if kind == "forward":
        params, tokens = _abstract_inputs(cfg, B, T)
        measured = _cpu_flops(lambda p, t: forward(p, t, cfg), params, tokens)
        predicted = forward_flops_per_token(cfg, T) * B * T
    else:
        params, tokens = _abstract_inputs(cfg, B, T + 1)
        measured = _cpu_flops(jax.value_and_grad(lambda p, t: loss(p, t, cfg)), params, tokens)
        predicted = training_flops_per_token(cfg, T) * B * T
    ew = elementwise_flops_estimate(cfg, B, T, kind)
    return FlopsCheck(cfg.name, kind, B, T, measured, float(predicted), tolerance=2 * ew / predicted,
                      elementwise=ew, fine_tolerance=FINE_TOLERANCE[kind])


@dataclass(frozen=True)
class RematFlops:
    """FLOPs of one training step under a rematerialisation policy (book ch. 4, "Gradient checkpointing").

    measured: XLA's count with forward and backward compiled as two programs (`jax.vjp`'s forward,
    then its pullback), so the recompute cannot be merged with the forward (see
    `train_flops_with_remat`); fused: the same step as ONE jitted value_and_grad, or None if not asked.
    predicted: B·T·training_flops_per_token(cfg, T, remat=policy), the transformer module's number.
    dropped: recompute FLOPs that the backward never uses: with "block", each block's last matmul
    (W_down / W_out, 2·B·T·D·F per layer), whose output only feeds the next block, whose input is
    saved anyway. adjusted = predicted − dropped. tolerance: accepted measured/adjusted − 1 (twice the
    estimated elementwise work, including the recomputed norms, softmax and SiLU).
    six_pt = 6·matmul_params·B·T, the book's "6 · params · tokens".
    """

    cfg_name: str
    policy: str
    B: int
    T: int
    measured: float
    predicted: float
    dropped: float
    tolerance: float
    six_pt: float
    fused: float | None = None

    @property
    def adjusted(self) -> float:
        return self.predicted - self.dropped

    @property
    def ratio(self) -> float:
        """measured / predicted (transformer module; "block" lands below 1 by dropped / predicted)."""
        return self.measured / self.predicted

    @property
    def adjusted_ratio(self) -> float:
        return self.measured / self.adjusted

    @property
    def ok(self) -> bool:
        return 1.0 <= self.adjusted_ratio <= 1.0 + self.tolerance

    @property
    def multiple(self) -> float:
        """measured / (matmul_params · tokens): ≈ 6 without remat, ≈ 8 with block remat (book ch. 4)."""
        return 6 * self.measured / self.six_pt

    def __str__(self) -> str:
        fused = "" if self.fused is None else f"; one jitted step: {6 * self.fused / self.six_pt:.3f}"
        return (f"{self.cfg_name} remat={self.policy} B={self.B} T={self.T}: {self.multiple:.3f} · params · tokens "
                f"(predicted {6 * self.predicted / self.six_pt:.3f}"
                + (f", adjusted {6 * self.adjusted / self.six_pt:.3f})" if self.dropped else ")") + fused)


def train_flops_with_remat(cfg: TransformerConfig, B: int, T: int, policy: str = "none", *,
                           fused: bool = False) -> RematFlops:
    """XLA's FLOPs for one training step of the tiny model under remat `policy`, and the book's.

    Policies (each block wrapped in `jax.checkpoint(prevent_cse=True)`): "none" saves everything;
    "big_matmuls" uses `checkpoint_policies.dots_with_no_batch_dims_saveable` (projection and MLP
    outputs saved; QKᵀ, softmax, PV and the elementwise ops recomputed, ≈ 4·B·T²·N·H·L extra);
    "block" uses `nothing_saveable` (only block inputs kept; the output head is checkpointed too), so
    the backward reruns the forward: ≈ 8 instead of 6 · params · tokens (book ch. 4).

    `measured` compiles forward and backward as two programs, so every recompute is counted. In ONE
    jitted value_and_grad (`fused=True` adds that count) XLA's CPU compiler partly undoes
    "big_matmuls": `prevent_cse` (on by default) puts the recompute's inputs behind an optimization
    barrier, but the CPU pipeline expands the barriers and then runs CSE once more after layout
    assignment, so recomputed attention matmuls, whose operands are the saved Q, K, V, become
    identical to the forward ones and are merged (JAX 0.10.2: all of them; 0.4.35: part). The block
    recompute survives: its first matmuls read norm outputs that XLA computes in differently shaped
    fusions in the forward and in the recompute, so nothing downstream is identical. A merged
    recompute also means the forward's attention probabilities stay alive until the backward, which is
    the memory the policy was meant to save.
    """
    check_config(cfg)
    _check_shape_args(B, T)
    _remat_policy(policy)
    params, tokens = _abstract_inputs(cfg, B, T + 1)
    f = lambda p, t: loss(p, t, cfg, remat=policy)  # noqa: E731
    fwd = lambda p, t: jax.vjp(lambda q: f(q, t), p)  # noqa: E731  (loss, pullback with the residuals)
    _, pullback = jax.eval_shape(fwd, params, tokens)
    measured = _cpu_flops(fwd, params, tokens) + _cpu_flops(lambda pb, ct: pb(ct), pullback,
                                                            jax.ShapeDtypeStruct((), jnp.float32))
    one_step = _cpu_flops(jax.value_and_grad(f), params, tokens) if fused else None
    predicted = training_flops_per_token(cfg, T, remat=policy) * B * T
    dropped = 2.0 * B * T * cfg.L * cfg.D * cfg.F if policy == "block" else 0.0
    ew = elementwise_flops_estimate(cfg, B, T, "train")
    if policy != "none":
        ew += elementwise_flops_estimate(cfg, B, T, "forward")
    return RematFlops(cfg.name, policy, B, T, measured, float(predicted), dropped,
                      tolerance=2 * ew / (predicted - dropped), six_pt=6.0 * matmul_params(cfg) * B * T,
                      fused=one_step)


__all__ = [
    "TINY", "MICRO", "ATTENTION_KINDS", "REMAT_POLICIES", "check_config", "init_params", "count_params",
    "component_counts", "rms_norm", "naive_attention", "chunked_attention", "jax_attention", "FlashStep",
    "flash_steps", "softmax_row", "forward", "loss", "sample_tokens", "ELEMENTWISE_FLOPS",
    "elementwise_flops_estimate", "FlopsCheck", "FINE_TOLERANCE", "flops_check", "RematFlops",
    "train_flops_with_remat",
]
