"""Transformer accounting: parameters, FLOPs, KV cache and activation memory (book ch. 4).

The book's letters: B batch (sequences), T query length, S key/value length, D d_model, F d_ff, N query heads,
K KV heads (K divides N; G = N/K), H head dim, L layers, V vocabulary, E experts, k experts per token.
Every count is a plain number: parameters (elements), FLOPs, bytes (SI). Every function taking a model (`cfg`)
accepts a `TransformerConfig` or a preset name from MODELS ("llama3-8b"), as `get_model` does.

Conventions (book ch. 4, "Global FLOPs and Params Calculation"):
- A gated MLP has 3 matrices (3DF params, 18BTDF training FLOPs); an ungated one 2 (2DF, 12BTDF).
- GQA attention projections: 2D(N+K)H params, 12BTD(N+K)H training FLOPs; MHA is K = N.
- Dot-product attention: 12BTSNH training FLOPs (4BTSNH forward), no params.
- Norms: `norms_per_layer` vectors of D per layer (current text: 2; older text: 1; 0 = ignore them, as
  ch. 6 and ch. 7 do) plus an optional final norm. Their O(BTD) FLOPs are ignored.
- Embedding (DV) and unembedding (DV) are separate components; with tied embeddings the unembedding
  reuses the embedding matrix (0 extra params), but its matmul still costs 2·D·V FLOPs per token forward.
- Training FLOPs per token = 3 × forward = 6 · (matmul params) + attention term (book ch. 4, "rule of
  thumb"); the input embedding is a lookup, not a matmul, so it is not in the 6·params.

The config (`TransformerConfig`) is in `transformer_config`, the presets (`MODELS`, `get_model`) in
`model_presets`; both are re-exported here, so `transformer.MODELS` and `transformer.get_model` work as before.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.model_presets import (
    CH5,
    CH6,
    CH7,
    MODEL_ALIASES,
    MODELS,
    get_model,
)
from scalebook_utils.core.transformer_config import TransformerConfig
from scalebook_utils.core.units import dtype_bytes, require_positive

__all__ = [
    "CH4",
    "ParamCount",
    "param_count",
    "matmul_params",
    "attention_flops",
    "forward_flops_per_token",
    "backward_flops_per_token",
    "training_flops_per_token",
    "training_flops",
    "projection_flops",
    "mlp_flops",
    "attention_to_matmul_flops_ratio",
    "attention_projection_crossover",
    "attention_intensity",
    "REMAT_TENSORS_PER_LAYER",
    "activation_elements_per_token_per_layer",
    "activation_bytes",
    "remat_recompute_flops_per_token",
    "kv_cache_bytes_per_token",
    "moe_critical_batch",
    "moe_coefficient",
    # re-exported: the config (`transformer_config`) and the presets (`model_presets`)
    "TransformerConfig",
    "MODELS",
    "MODEL_ALIASES",
    "get_model",
    "CH5",
    "CH6",
    "CH7",
]

CH4 = "book ch. 4 'All the Transformer Math You Need to Know'"


# --- parameters ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamCount:
    """Parameters by component (elements, not bytes). `activated` counts k routed experts instead of E
    (equal to `total` for a dense model): the parameters one token touches."""

    embedding: int
    attention: int
    mlp: int
    norms: int
    unembedding: int
    total: int
    activated: int

    @property
    def attention_fraction(self) -> float:
        """attention / (attention + MLP): the per-layer share, 4DNH/(4DNH + 3DF) for MHA (ch4.q1b: 0.25)."""
        return self.attention / (self.attention + self.mlp)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _attention_params_per_layer(cfg: TransformerConfig) -> int:
    D, N, K, H = cfg.D, cfg.N, cfg.K, cfg.H
    if not cfg.is_mla:
        return 2 * D * (N + K) * H  # W_Q, W_O: DNH each; W_K, W_V: DKH each
    R, qr, kvr = cfg.rope_head_dim, cfg.q_lora_rank, cfg.kv_lora_rank
    q = D * qr + qr * N * (H + R) if qr else D * N * (H + R)
    kv = D * (kvr + R) + kvr * N * 2 * H
    return q + kv + N * H * D


def _expert_params(cfg: TransformerConfig, width: int) -> int:
    return cfg.mlp_matrices * cfg.D * width


def _mlp_params(cfg: TransformerConfig, active_only: bool) -> int:
    dense = cfg.dense_layers * _expert_params(cfg, cfg.F)
    if not cfg.is_moe:
        return dense
    Fe = cfg.F_expert or cfg.F
    routed = cfg.k if active_only else cfg.E
    per_layer = (routed + cfg.n_shared) * _expert_params(cfg, Fe) + cfg.D * cfg.E  # + router D·E
    return dense + cfg.moe_layers * per_layer


def _bias_params(cfg: TransformerConfig) -> tuple[int, int]:
    """(attention, MLP) bias parameters over all layers: qkv (N + 2K)·H, + O's D with linear_bias; the MLP's
    (matrices − 1)·F + D with linear_bias (gated: 2F + D, ungated F + D)."""
    attn = (cfg.N + 2 * cfg.K) * cfg.H if (cfg.qkv_bias or cfg.linear_bias) else 0
    attn += cfg.D if cfg.linear_bias else 0
    mlp = (cfg.mlp_matrices - 1) * cfg.F + cfg.D if cfg.linear_bias else 0
    return cfg.L * attn, cfg.L * mlp


def param_count(cfg: TransformerConfig | str) -> ParamCount:
    """Parameter count by component (book ch. 4 summary table; ch. 6's LLaMA 3-70B breakdown).

    Per layer: MLP 3DF (gated) or 2DF, attention 2D(N+K)H (4DNH for MHA), norms norms_per_layer·D;
    once: embedding DV, unembedding DV (0 when tied), final norm D. MoE: E·3DF_expert routed (+ shared,
    + router DE) per MoE layer; `activated` uses k instead of E. Units: parameters (elements).
    Beyond the book (all default off): biases (`qkv_bias`, `linear_bias`, `router_bias`: E per MoE layer),
    LayerNorm biases (`norm_bias` doubles every norm) and learned positions (`max_positions`·D, in `embedding`).
    """
    cfg = get_model(cfg)
    emb = cfg.V * cfg.D + cfg.max_positions * cfg.D
    unemb = 0 if cfg.tied_embeddings else cfg.V * cfg.D
    attn_bias, mlp_bias = _bias_params(cfg)
    attn = cfg.L * _attention_params_per_layer(cfg) + attn_bias
    norms = cfg.L * cfg.norms_per_layer * cfg.D + (cfg.D if cfg.final_norm else 0)
    if cfg.is_mla:
        norms += cfg.L * (cfg.q_lora_rank + cfg.kv_lora_rank)  # RMSNorms on the latents
    norms *= 2 if cfg.norm_bias else 1
    router_bias = cfg.moe_layers * cfg.E if cfg.router_bias else 0
    mlp = _mlp_params(cfg, active_only=False) + mlp_bias + router_bias
    mlp_active = _mlp_params(cfg, active_only=True) + mlp_bias + router_bias
    other = emb + unemb + attn + norms
    return ParamCount(
        embedding=emb,
        attention=attn,
        mlp=mlp,
        norms=norms,
        unembedding=unemb,
        total=other + mlp,
        activated=other + mlp_active,
    )


def matmul_params(cfg: TransformerConfig | str) -> int:
    """Activated parameters that take part in a matmul per token: attention projections, active MLP
    (incl. router) and the unembedding D·V (also when tied). Excludes the embedding lookup and norms.
    Forward FLOPs per token = 2 × this + the attention term (book ch. 4 "rule of thumb")."""
    cfg = get_model(cfg)
    return cfg.L * _attention_params_per_layer(cfg) + _mlp_params(cfg, active_only=True) + cfg.D * cfg.V


# --- FLOPs ---------------------------------------------------------------------------------------


def _check_len(**kw) -> None:
    for name, v in kw.items():
        if not isinstance(v, numbers.Real) or isinstance(v, bool) or not v >= 1:
            raise ValueError(f"{name} must be a length >= 1 (tokens), got {v!r}")


def attention_flops(
    cfg: TransformerConfig | str, T: float, S: float | None = None, B: float = 1, *, causal: bool = False
) -> float:
    """Forward FLOPs of dot-product attention (QKᵀ and PV) over all L layers, no projections.

    4·B·T·S·N·H per layer (2BTSNH for Q·K, 2BTSNH for P·V; MLA: 2BTSN(H+R) + 2BTSNH); S = T for
    self-attention (default). `causal=True` halves it (only with a real attention kernel). Backward is 2×,
    training 3× (12BTSNH). Book ch. 4, "Attention".
    """
    cfg = get_model(cfg)
    S = T if S is None else S
    _check_len(T=T, S=S, B=B)
    hqk = cfg.H + cfg.rope_head_dim
    f = B * T * S * cfg.N * 2 * (hqk + cfg.H) * cfg.L
    return f / 2 if causal else f


def forward_flops_per_token(cfg: TransformerConfig | str, seq_len: float = 1, *, causal: bool = False) -> float:
    """Forward FLOPs per token with context `seq_len` (S): 2·matmul_params + 4·S·N·H·L (book ch. 4).

    `seq_len` is the number of keys each query attends to (self-attention over T tokens: S = T).
    """
    cfg = get_model(cfg)
    _check_len(seq_len=seq_len)
    return 2 * matmul_params(cfg) + attention_flops(cfg, 1, seq_len, causal=causal)


def backward_flops_per_token(cfg: TransformerConfig | str, seq_len: float = 1, *, causal: bool = False) -> float:
    """Backward = 2 × forward (∂L/∂A and ∂L/∂W each cost one forward matmul; book ch. 4 "Forward vs backward")."""
    cfg = get_model(cfg)
    return 2 * forward_flops_per_token(cfg, seq_len, causal=causal)


def training_flops_per_token(
    cfg: TransformerConfig | str, seq_len: float = 1, *, causal: bool = False, remat: str = "none"
) -> float:
    """One training step per token: 6·matmul_params + 12·S·N·H·L (≈ 6 · params; book ch. 4), plus the
    recompute of `remat` (see `remat_recompute_flops_per_token`)."""
    cfg = get_model(cfg)
    return 3 * forward_flops_per_token(cfg, seq_len, causal=causal) + remat_recompute_flops_per_token(
        cfg, seq_len, remat, causal=causal
    )


def training_flops(
    cfg: TransformerConfig | str, tokens: float, seq_len: float, *, causal: bool = False, remat: str = "none"
) -> float:
    """Total training FLOPs for `tokens` tokens in sequences of `seq_len` (≈ 6 · params · tokens)."""
    cfg = get_model(cfg)
    require_positive(tokens=tokens)
    return tokens * training_flops_per_token(cfg, seq_len, causal=causal, remat=remat)


def projection_flops(cfg: TransformerConfig | str, T: float, B: float = 1) -> float:
    """Forward FLOPs of the Q, K, V, O projections over all layers: 4·B·T·D(N+K)H·L (MHA: 8BTDNH·L)."""
    cfg = get_model(cfg)
    _check_len(T=T, B=B)
    return 2 * B * T * cfg.L * _attention_params_per_layer(cfg)


def mlp_flops(cfg: TransformerConfig | str, T: float, B: float = 1) -> float:
    """Forward FLOPs of the (active) MLPs over all layers: 2·B·T·(3DF)·L for a dense gated MLP."""
    cfg = get_model(cfg)
    _check_len(T=T, B=B)
    return 2 * B * T * _mlp_params(cfg, active_only=True)


def attention_to_matmul_flops_ratio(cfg: TransformerConfig | str, T: float) -> float:
    """Self-attention FLOPs over the layers' matmul FLOPs (MLP + QKVO projections, no unembedding).

    Book ch. 4 "Fractional cost of attention": 12BT²NH/(18BTDF + 24BTDNH) = T/(8D) when F = 4D, D = NH,
    K = N; attention dominates for T > 8D (≈37k tokens for Gemma-27B's D = 4608).
    """
    cfg = get_model(cfg)
    return attention_flops(cfg, T) / (projection_flops(cfg, T) + mlp_flops(cfg, T))


def attention_projection_crossover(cfg: TransformerConfig | str) -> float:
    """Sequence length where self-attention FLOPs equal the QKVO projection FLOPs: 4TNH·(per token) =
    4D(N+K)H, i.e. T = D(N+K)/N (= 2D for MHA; book ch4.q5: 8192 for D = 4096)."""
    cfg = get_model(cfg)
    per_key = attention_flops(cfg, 1, 1)
    return projection_flops(cfg, 1) / per_key


def attention_intensity(T: float, S: float, G: float) -> float:
    """Arithmetic intensity of GQA attention without projections, bf16, efficient kernel (book ch4.q4).

    FLOPs 4·T·S·G·H per KV head; bytes 2·(2·T·G·H + 2·S·H) (Q in, O out, K and V): T·S·G/(T·G + S).
    Prefill (S = T): T·G/(G + 1); generation (T = 1): S·G/(G + S) < G.
    """
    require_positive(T=T, S=S, G=G)
    return T * S * G / (T * G + S)


# --- remat, activations, KV cache ----------------------------------------------------------------

#: saved tensors per layer and token, book ch. 4 "Gradient checkpointing": ~20 intermediates of width D
#: (no remat), ≈ 7 big matmul outputs (their true widths are in activation_elements_per_token_per_layer,
#: 13·D for an MHA layer with F = 4D), 1 block input of width D (block remat)
REMAT_TENSORS_PER_LAYER = {"none": 20, "big_matmuls": 7, "block": 1}


def _policy(policy: str) -> str:
    if policy not in REMAT_TENSORS_PER_LAYER:
        raise ValueError(f"policy must be one of {', '.join(REMAT_TENSORS_PER_LAYER)}; got {policy!r}")
    return policy


def activation_elements_per_token_per_layer(cfg: TransformerConfig | str, policy: str = "block") -> float:
    """Saved activations per token and layer (elements) under a checkpointing policy (book ch. 4):

    - "none": every intermediate, the book's rule of thumb 20·D;
    - "big_matmuls": the 7 big matmul outputs at their true widths, Q (NH) + K, V (2KH) + O (D) +
      the MLP's inputs-to-output (2F gated, F ungated; k·F_expert per MoE layer, + shared) + its output (D);
      the book counts them as ≈ 7 tensors of D;
    - "block": the block input only, D (block remat).
    MoE widths are averaged over layers.
    """
    cfg = get_model(cfg)
    _policy(policy)
    D = cfg.D
    if policy != "big_matmuls":
        return REMAT_TENSORS_PER_LAYER[policy] * D
    g = cfg.mlp_matrices - 1
    hid = cfg.dense_layers * g * cfg.F
    if cfg.is_moe:
        hid += cfg.moe_layers * g * (cfg.k + cfg.n_shared) * (cfg.F_expert or cfg.F)
    return cfg.N * cfg.H + 2 * cfg.K * cfg.H + D + hid / cfg.L + D


def activation_bytes(cfg: TransformerConfig | str, tokens: float, policy: str = "block", dtype: str = "bf16") -> float:
    """Activation memory for a training step over `tokens` tokens (B·T), all layers, in bytes.

    bytes = tokens · L · elements_per_token_per_layer(policy) · bytes(dtype). Book ch. 4: 2·20·BT·D·L ≈ 84 TB
    with no remat (BT = 4e6, L = 64, D = 8192), 4.2 TB with block remat.
    """
    cfg = get_model(cfg)
    require_positive(tokens=tokens)
    return tokens * cfg.L * activation_elements_per_token_per_layer(cfg, policy) * dtype_bytes(dtype)


def remat_recompute_flops_per_token(
    cfg: TransformerConfig | str, seq_len: float = 1, policy: str = "none", *, causal: bool = False
) -> float:
    """Extra forward FLOPs per token recomputed in the backward pass (book ch. 4, ch4.q6):

    "none": 0; "big_matmuls": the dot-product attention forward, 4·S·N·H·L per token (4BT²NH per layer;
    O(BTD), O(BTF) elementwise ignored); "block": the whole forward, so a step costs ≈ 8·params·tokens.
    """
    cfg = get_model(cfg)
    _policy(policy)
    if policy == "none":
        return 0.0
    if policy == "big_matmuls":
        return attention_flops(cfg, 1, seq_len, causal=causal)
    return forward_flops_per_token(cfg, seq_len, causal=causal)


def kv_cache_bytes_per_token(cfg: TransformerConfig | str, dtype: str = "bf16") -> float:
    """KV-cache bytes per token (all layers): 2·L·K·H·bytes(dtype) (book ch. 4 "KV caching"; the cache is
    [2, S, L, K, H]). MLA caches the latent instead: L·(kv_lora_rank + rope_head_dim)·bytes."""
    cfg = get_model(cfg)
    per_layer = cfg.kv_lora_rank + cfg.rope_head_dim if cfg.is_mla else 2 * cfg.K * cfg.H
    return cfg.L * per_layer * dtype_bytes(dtype)


def moe_critical_batch(
    cfg: TransformerConfig | str, chip="tpu-v5e", weight_dtype: str = "int8", flops_dtype: str = "bf16"
) -> float:
    """Token batch above which an MoE layer is compute-bound (book ch. 4 "Mixture of experts", ch4.q8):

    weight bytes E·D·F·w, FLOPs 2·k·B·D·F → B > (C/W_hbm)·E·w/(2k) (v5e, int8 weights: ≈ 120·E/k).
    """
    cfg = get_model(cfg)
    if not cfg.is_moe:
        raise ValueError(f"cfg must be an MoE (E > 0); {cfg.name!r} is dense")
    c = get_chip(chip)
    return c.critical_intensity(flops_dtype) * cfg.E * dtype_bytes(weight_dtype) / (2 * cfg.k)


def moe_coefficient(
    chip="tpu-v5e", weight_dtype: str = "int8", flops_dtype: str = "bf16", *, book_rounding: bool = False
) -> float:
    """c in an MoE layer's critical batch B > c · E/k tokens (`moe_critical_batch` per unit of E/k):
    c = (C/W_hbm) · bytes_per_weight / 2 (v5e, int8 weights: ≈ 120.1, so DeepSeek-V3's E/k = 32 needs ≈ 3844).

    `book_rounding=True` rounds α = C/W_hbm to an integer first, as the book does (v5e: α = 240 → c = 120,
    3840 tokens; book ch. 4 "Mixture of experts", ch4.q8).
    """
    alpha = get_chip(chip).critical_intensity(flops_dtype)
    if book_rounding:
        alpha = round(alpha)
    return alpha * dtype_bytes(weight_dtype) / 2
