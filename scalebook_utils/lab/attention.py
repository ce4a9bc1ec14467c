"""Attention for the tiny model (book ch. 4, "Attention", and Appendix A, flash attention), in plain JAX.

Three implementations on q[B, T, N, H] and k, v[B, S, K, H] (grouped-query: K divides N, G = N/K query heads
per KV head, query head n = k·G + g): `naive_attention` (the scores [T, S] materialised),
`chunked_attention` (flash-style: K/V streamed in chunks, the book's merge of softmax partial results) and
`jax_attention` (`jax.nn.dot_product_attention`); plus `flash_steps` / `softmax_row`, one query stepped
through the chunks in float64 so a notebook can print every number. Part of `tinymodel` (re-exported by
`lab/tinymodel.py`); imports nothing from the rest of the model.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def _check_qkv(q, k, v):
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape:
        raise ValueError(
            f"expected q[B, T, N, H] and k, v[B, S, K, H]; got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
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


def check_chunk(chunk) -> int:
    """`chunk` as an int: a positive integer number of keys (ValueError otherwise)."""
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
    chunk = check_chunk(chunk)
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

    init = (
        jnp.full((B, K, G, T), -jnp.inf, jnp.float32),
        jnp.zeros((B, K, G, T), jnp.float32),
        jnp.zeros((B, K, G, T, H), jnp.float32),
    )
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
    chunk = check_chunk(chunk)
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


__all__ = [
    "naive_attention",
    "chunked_attention",
    "jax_attention",
    "check_chunk",
    "FlashStep",
    "flash_steps",
    "softmax_row",
]
