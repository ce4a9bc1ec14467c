"""`TransformerConfig`: a decoder-only transformer in the book's letters (book ch. 4, "Transformer Accounting").

B batch (sequences), T query length, S key/value length, D d_model, F d_ff, N query heads, K KV heads (K divides
N; G = N/K), H head dim, L layers, V vocabulary, E experts, k experts per token. A frozen dataclass of plain
integers (dimensions, not bytes), checked on construction: dense or MoE (E routed experts of width F_expert,
k active, shared experts, leading dense layers), GQA or DeepSeek's multi-head latent attention (MLA), and the
parameters outside the book's counts (biases, learned positions).

The counts over it (parameters, FLOPs, KV cache, activations) are in `transformer`; the named presets in
`model_presets`. `transformer` re-exports this class.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

__all__ = ["TransformerConfig"]


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer in the book's notation (ch. 4, "Transformer Accounting").

    Dense: E = k = 0. MoE: E routed experts of width `F_expert` (default F), k active per token, plus
    `n_shared` always-active shared experts; the first `first_dense_layers` layers keep a dense MLP of width F
    (DeepSeek-V3). Each MoE layer also has a router D·E.

    Attention is GQA (K divides N; MHA K = N, MQA K = 1) unless `kv_lora_rank` > 0, which selects
    DeepSeek's multi-head latent attention (MLA): queries through an optional `q_lora_rank` bottleneck,
    keys and values through a shared latent of width `kv_lora_rank` plus `rope_head_dim` decoupled
    RoPE dims; the KV cache then holds kv_lora_rank + rope_head_dim numbers per layer per token.
    """

    name: str
    L: int
    D: int
    F: int
    N: int
    K: int
    H: int
    V: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    norms_per_layer: int = 2
    final_norm: bool = True
    E: int = 0
    k: int = 0
    n_shared: int = 0
    F_expert: int | None = None
    first_dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    source: str = ""
    # parameters outside the book's counts (param_count only; none of them is a matmul, so FLOPs ignore them)
    qkv_bias: bool = False  # biases on Q, K, V: (N + 2K)·H per layer (Qwen2)
    linear_bias: bool = False  # biases on every linear layer, incl. qkv, O (D) and the MLP (GPT-2/3)
    norm_bias: bool = False  # LayerNorm with a bias: 2 vectors per norm instead of 1 (GPT-2/3)
    max_positions: int = 0  # learned absolute position embeddings, max_positions·D (GPT-2/3)
    router_bias: bool = False  # a bias of E per MoE router (DeepSeek-V3's e_score_correction_bias)

    def __post_init__(self):
        for f in ("L", "D", "F", "N", "K", "H", "V"):
            v = getattr(self, f)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{f} must be a positive integer, got {v!r}")
        for f in (
            "norms_per_layer",
            "E",
            "k",
            "n_shared",
            "first_dense_layers",
            "q_lora_rank",
            "kv_lora_rank",
            "rope_head_dim",
        ):
            v = getattr(self, f)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{f} must be a non-negative integer, got {v!r}")
        if self.F_expert is not None and (not isinstance(self.F_expert, numbers.Integral) or self.F_expert <= 0):
            raise ValueError(f"F_expert must be a positive integer or None, got {self.F_expert!r}")
        if self.kv_lora_rank == 0:
            if self.K > self.N or self.N % self.K:
                raise ValueError(f"K (KV heads) must divide N (query heads); got N={self.N}, K={self.K}")
            if self.q_lora_rank or self.rope_head_dim:
                raise ValueError("q_lora_rank and rope_head_dim apply only to MLA (kv_lora_rank > 0)")
        if self.E == 0:
            if self.k or self.n_shared or self.first_dense_layers or self.F_expert is not None:
                raise ValueError(
                    "k, n_shared, first_dense_layers and F_expert need an MoE (E > 0); "
                    f"got E=0, k={self.k}, n_shared={self.n_shared}"
                )
        else:
            if not 1 <= self.k <= self.E:
                raise ValueError(f"k (active experts) must satisfy 1 <= k <= E={self.E}, got k={self.k}")
            if self.first_dense_layers >= self.L:
                raise ValueError(f"first_dense_layers must be < L={self.L}, got {self.first_dense_layers}")
        self._check_extras()

    def _check_extras(self) -> None:
        if (
            not isinstance(self.max_positions, numbers.Integral)
            or isinstance(self.max_positions, bool)
            or self.max_positions < 0
        ):
            raise ValueError(f"max_positions must be a non-negative integer, got {self.max_positions!r}")
        if (self.qkv_bias or self.linear_bias) and self.is_mla:
            raise ValueError("qkv_bias and linear_bias apply to GQA attention, not MLA (kv_lora_rank > 0)")
        if self.linear_bias and self.is_moe:
            raise ValueError("linear_bias is not modelled for MoE experts (E > 0)")
        if self.router_bias and not self.is_moe:
            raise ValueError("router_bias needs an MoE (E > 0)")

    # --- derived ---------------------------------------------------------------------------------
    @property
    def G(self) -> int:
        """Query heads per KV head, N/K (MLA: every query head has its own K/V, G = 1)."""
        return 1 if self.is_mla else self.N // self.K

    @property
    def is_moe(self) -> bool:
        return self.E > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.L - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        return self.L - self.moe_layers

    @property
    def mlp_matrices(self) -> int:
        """3 for a gated (SwiGLU) MLP, 2 otherwise."""
        return 3 if self.gated_mlp else 2
