"""The numbers behind chapter 4's calculator, remat table and KV-cache figure (book ch. 4), pure.

Public name `transformer_calculator`. What `views.ch04_transformers` (public name `transformer_views`) and its
sibling views `ch04_remat` and `ch04_kv_cache` show, testable without matplotlib or ipywidgets
(tests/test_calculator_core.py):

- `calculator_config`: a preset (`transformer.MODELS`) with some sizes D, F, N, K, H, L, V (gated, tied)
  replaced, or a `CUSTOM` model built from the sizes alone;
- `calculator_numbers`: parameters by component, P = activated params, the rule of thumb 6·P, the exact
  training FLOPs per token 6·(matmul params) + 12·T·N·H·L (dot-product attention), the FLOPs of one step
  of B sequences of T tokens (B·T·train), the FLOPs split by component, KV-cache bytes per token;
- `remat_rows`: per checkpointing policy, the saved activations 2·n·BT·D·L bytes (bf16, n tensors of D per
  token and layer: 20 / 7 / 1) and the training FLOPs per token in units of matmul params (6 → 8 · P), for the
  book's example `REMAT_EXAMPLE` (BT = 4M tokens, L = 64, D = 8192: 84 TB / 4.2 TB);
- `kv_bytes_per_sequence`: one sequence's KV cache from the sizes alone, S · 2·L·K·H · bytes per value
  (`KV_EXAMPLE`: S = 8192, L = 64, K·H = 8192 → 8 GiB in int8); a served model's cache of B sequences is
  `inference.kv_cache_bytes`.

Units: parameters and FLOPs are counts, memory is bytes (SI), T and S are tokens. The formulas themselves are
`core.transformer`'s; this module only puts them together as the views show them.

Book ch. 4 "All the Transformer Math You Need to Know": "Transformer Accounting", "Global FLOPs and Params
Calculation", "Gradient checkpointing", "Key-Value (KV) caching".
"""

from __future__ import annotations

import dataclasses

from scalebook_utils.core import transformer as tf

__all__ = [
    "CUSTOM",
    "SIZE_FIELDS",
    "FLAG_FIELDS",
    "REMAT_EXAMPLE",
    "KV_EXAMPLE",
    "calculator_config",
    "calculator_numbers",
    "remat_rows",
    "kv_bytes_per_sequence",
]

#: The calculator's model choice that takes the sizes from the boxes as they are.
CUSTOM = "custom"
#: The sizes a calculator may replace (the `TransformerConfig` fields of the same names).
SIZE_FIELDS = ("D", "F", "N", "K", "H", "L", "V")
#: The calculator's checkboxes → the `TransformerConfig` fields they set.
FLAG_FIELDS = {"gated": "gated_mlp", "tied": "tied_embeddings"}
#: The book's gradient-checkpointing example: B·T = 4M tokens, L = 64, D = 8192 (F, N, H, V are not given in the
#: book and matter only for the FLOPs bars; an MHA model with F = 4D and NH = D).
REMAT_EXAMPLE = tf.TransformerConfig(
    "book-remat-example",
    L=64,
    D=8192,
    F=4 * 8192,
    N=64,
    K=64,
    H=128,
    V=32_000,
    source="book ch. 4 'Gradient checkpointing' (BT = 4M, L = 64, D = 8192; F = 4D, NH = D, V chosen)",
)
#: The book's KV-cache example: S = 8192, L = 64, K·H = N·H = D = 8192 → 8 GiB in int8.
KV_EXAMPLE = {"L": 64, "N": 64, "H": 128}


# --- the calculator: parameters, FLOPs per token, KV bytes per token ("Transformer Accounting") -------------


def calculator_config(model: str | tf.TransformerConfig = "llama3-70b", **sizes) -> tf.TransformerConfig:
    """A preset (`transformer.MODELS`) with some sizes replaced, or `CUSTOM` built from the sizes alone.

    sizes: any of D, F, N, K, H, L, V (positive ints), gated (bool), tied (bool); None leaves the preset's
    value. The name says what changed: ``llama3-70b``, ``llama3-70b with K=1``, ``custom``. A preset keeps
    what the boxes cannot express (MoE experts, MLA). Raises ValueError for an invalid combination (the
    message of `TransformerConfig`, e.g. K not dividing N, or a size ≤ 0).
    """
    unknown = set(sizes) - set(SIZE_FIELDS) - set(FLAG_FIELDS)
    if unknown:
        raise ValueError(
            f"unknown size(s) {', '.join(sorted(unknown))}; known: {', '.join(SIZE_FIELDS + tuple(FLAG_FIELDS))}"
        )
    given = {(FLAG_FIELDS.get(k, k)): v for k, v in sizes.items() if v is not None}
    if isinstance(model, str) and model.strip().lower() == CUSTOM:
        missing = [f for f in SIZE_FIELDS if f not in given]
        if missing:
            raise ValueError(f"a custom model needs every size; missing {', '.join(missing)}")
        return tf.TransformerConfig(CUSTOM, **given, source="calculator: custom sizes")
    base = tf.get_model(model)
    changed = {k: v for k, v in given.items() if getattr(base, k) != v}
    if not changed:
        return base
    label = ", ".join(
        f"{k}={v}" if k in SIZE_FIELDS else f"{'gated' if k == 'gated_mlp' else 'tied'}={v}" for k, v in changed.items()
    )
    return dataclasses.replace(base, name=f"{base.name} with {label}", **changed)


def calculator_numbers(cfg: tf.TransformerConfig, T: float = 4096, B: float = 1) -> dict:
    """Everything the calculator shows, per token unless stated (book ch. 4 summary table).

    params (ParamCount); P = activated params (= total for a dense model); six_p = 6·P (the rule of thumb);
    train_matmul = 6·matmul_params (attention projections, active MLP, unembedding; no embedding lookup,
    no norms); train_attention = 12·T·N·H·L (dot-product attention, self-attention S = T, no causal
    saving); train = their sum (`transformer.training_flops_per_token`); step = B·T·train; the FLOPs split
    by component (training, per token); kv_bf16 / kv_int8 = KV-cache bytes per token.
    """
    if not (isinstance(B, (int, float)) and not isinstance(B, bool) and B >= 1):
        raise ValueError(f"B must be a batch of ≥ 1 sequences, got {B!r}")
    if not (isinstance(T, (int, float)) and not isinstance(T, bool) and T >= 1):
        raise ValueError(f"T must be a sequence of ≥ 1 tokens, got {T!r}")
    pc = tf.param_count(cfg)
    train = tf.training_flops_per_token(cfg, T)
    attention = 3 * tf.attention_flops(cfg, 1, T)
    parts = {
        "QKVO projections": 3 * tf.projection_flops(cfg, 1),
        "MLP": 3 * tf.mlp_flops(cfg, 1),
        "unembedding": 6 * cfg.D * cfg.V,
        "dot-product attention": attention,
    }
    return {
        "params": pc,
        "P": pc.activated,
        "six_p": 6 * pc.activated,
        "train_matmul": train - attention,
        "train_attention": attention,
        "train": train,
        "step": B * T * train,
        "flops_parts": parts,
        "kv_bf16": tf.kv_cache_bytes_per_token(cfg, "bf16"),
        "kv_int8": tf.kv_cache_bytes_per_token(cfg, "int8"),
    }


# --- gradient checkpointing: memory against FLOPs ("Gradient checkpointing") --------------------------------


def remat_rows(cfg: tf.TransformerConfig = REMAT_EXAMPLE, tokens: float = 4e6, seq_len: float = 4096) -> list[dict]:
    """Per policy ("none", "big_matmuls", "block"): the book's tensors of D per token and layer
    (`REMAT_TENSORS_PER_LAYER`: 20 / 7 / 1), their bf16 bytes for `tokens` tokens (2·n·BT·D·L), the same at the
    tensors' true widths (`activation_bytes`; differs for "big_matmuls", whose F-wide outputs are 4D each), and
    training FLOPs per token in units of matmul params: matmuls 6, attention 12·S·N·H·L/P, recompute
    (`remat_recompute_flops_per_token`), total."""
    P = tf.matmul_params(cfg)
    attn = 3 * tf.attention_flops(cfg, 1, seq_len) / P
    rows = []
    for policy, n in tf.REMAT_TENSORS_PER_LAYER.items():
        recompute = tf.remat_recompute_flops_per_token(cfg, seq_len, policy) / P
        rows.append(
            {
                "policy": policy,
                "tensors": n,
                "bytes": 2.0 * n * tokens * cfg.D * cfg.L,
                "bytes_true": tf.activation_bytes(cfg, tokens, policy),
                "true_tensors": tf.activation_elements_per_token_per_layer(cfg, policy) / cfg.D,
                "matmul": 6.0,
                "attention": attn,
                "recompute": recompute,
                "multiple": tf.training_flops_per_token(cfg, seq_len, remat=policy) / P,
            }
        )
    return rows


# --- the KV cache of one sequence ("Key-Value (KV) caching") ------------------------------------------------


def kv_bytes_per_sequence(
    S: float,
    K: int,
    *,
    L: int = KV_EXAMPLE["L"],
    N: int = KV_EXAMPLE["N"],
    H: int = KV_EXAMPLE["H"],
    dtype: str = "int8",
) -> float:
    """KV-cache bytes of one sequence of S tokens: S · 2·L·K·H · bytes(dtype) (`kv_cache_bytes_per_token`)."""
    cfg = tf.TransformerConfig("kv", L=L, D=N * H, F=1, N=N, K=K, H=H, V=1)
    if not S >= 1:
        raise ValueError(f"S must be ≥ 1 token, got {S!r}")
    return S * tf.kv_cache_bytes_per_token(cfg, dtype)
