"""The model presets: `MODELS`, every config with its source, and `get_model`, the lookup by name (book ch. 4–8).

Each preset is a `TransformerConfig` in the book's letters (L, D, F, N, K, H, V; E, k for an MoE), dimensions as
integers. The book's models: LLaMA 3 8B / 70B / 405B (chs. 6–7), LLaMA 2 13B (ch. 5, Question 1), the ch. 4
Question 1 model (`book-ch4`), the ch. 7 Questions 1–7 model and its MoE (`book-ch7`, `book-ch7-moe`) and a
DeepSeek-V3-like MoE with MLA (`deepseek-v3-like`, E=256, k=8 as in ch. 4). Beyond the book (issue 17), from
the Hugging Face config.json files: LLaMA 2 7B / 70B, Mistral 7B, Mixtral 8x7B, Gemma 2 9B / 27B, Qwen2.5 72B,
DeepSeek-V3 (`deepseek-v3`: the book's preset plus the router bias) and GPT-3 175B (from its paper); their
counts are pinned in tests/test_presets.py. `transformer` re-exports every name here.
"""

from __future__ import annotations

from dataclasses import replace

from scalebook_utils.core.errors import name_index, resolve_name
from scalebook_utils.core.transformer_config import TransformerConfig

__all__ = ["MODELS", "MODEL_ALIASES", "get_model", "CH5", "CH6", "CH7"]

CH5 = "book ch. 5, Question 1 (LLaMA-2 13B)"
CH6 = "book ch. 6, LLaMA 3-70B hyperparameter table (from the Hugging Face config)"
CH7 = "book ch. 7, model for Questions 1–7 (invented, LLaMA-2-13B-like)"

_LLAMA3 = dict(V=128_256, K=8, H=128)
_HF = (
    "Hugging Face config.json of {} (num_hidden_layers, hidden_size, intermediate_size, num_attention_heads, "
    "num_key_value_heads, head_dim, vocab_size, tie_word_embeddings)"
)

#: the book's DeepSeek-V3 (ch. 4); the Hugging Face preset `deepseek-v3` adds the router bias to it
_DEEPSEEK_V3_LIKE = TransformerConfig(
    "deepseek-v3-like",
    L=61,
    D=7168,
    F=18_432,
    N=128,
    K=128,
    H=128,
    V=129_280,
    E=256,
    k=8,
    n_shared=1,
    F_expert=2048,
    first_dense_layers=3,
    q_lora_rank=1536,
    kv_lora_rank=512,
    rope_head_dim=64,
    source="DeepSeek-V3 config.json / technical report (671B total, 37B activated; MTP "
    "module omitted); E=256, k=8 as in book ch. 4",
)

MODELS: dict[str, TransformerConfig] = {
    m.name: m
    for m in (
        TransformerConfig(
            "llama3-8b",
            L=32,
            D=4096,
            F=14_336,
            N=32,
            **_LLAMA3,
            source="Meta-Llama-3-8B config.json (HF); book ch. 7 (32 Q heads, 8 KV heads)",
        ),
        TransformerConfig("llama3-70b", L=80, D=8192, F=28_672, N=64, **_LLAMA3, source=CH6),
        TransformerConfig(
            "llama3-405b",
            L=126,
            D=16_384,
            F=53_248,
            N=128,
            **_LLAMA3,
            source="Llama-3.1-405B config.json (HF), linked by book ch. 6 Worked Problem 2",
        ),
        TransformerConfig("llama2-13b", L=40, D=5120, F=13_824, N=40, K=40, H=128, V=32_000, source=CH5),
        TransformerConfig(
            "book-ch4",
            L=64,
            D=4096,
            F=4 * 4096,
            N=32,
            K=32,
            H=128,
            V=32_000,
            final_norm=False,
            source="book ch. 4, Question 1 (D=4096, F=4D, V=32,000, L=64, NH=D, MHA; N=32 chosen, "
            "only NH matters; 2 norms per layer, untied embeddings)",
        ),
        TransformerConfig(
            "book-ch7",
            L=64,
            D=4096,
            F=16_384,
            N=32,
            K=8,
            H=256,
            V=32_128,
            tied_embeddings=True,
            norms_per_layer=0,
            final_norm=False,
            source=CH7 + "; norms ignored as the book does",
        ),
        TransformerConfig(
            "book-ch7-moe",
            L=64,
            D=4096,
            F=16_384,
            N=32,
            K=8,
            H=256,
            V=32_128,
            tied_embeddings=True,
            norms_per_layer=0,
            final_norm=False,
            E=16,
            k=2,
            source="book ch. 7, Question 5 (the Q1–7 model as an MoE, E=16, k=2; router D·E added)",
        ),
        _DEEPSEEK_V3_LIKE,
        # --- presets people ask for (issue 17): HF config.json dimensions, counts pinned in tests/test_presets.py
        TransformerConfig(
            "llama2-7b",
            L=32,
            D=4096,
            F=11_008,
            N=32,
            K=32,
            H=128,
            V=32_000,
            source=_HF.format("meta-llama/Llama-2-7b-hf"),
        ),
        TransformerConfig(
            "llama2-70b",
            L=80,
            D=8192,
            F=28_672,
            N=64,
            K=8,
            H=128,
            V=32_000,
            source=_HF.format("meta-llama/Llama-2-70b-hf"),
        ),
        TransformerConfig(
            "mistral-7b",
            L=32,
            D=4096,
            F=14_336,
            N=32,
            K=8,
            H=128,
            V=32_000,
            source=_HF.format("mistralai/Mistral-7B-v0.1") + "; its 4096-token sliding window is not "
            "modelled (KV cache and attention FLOPs count full attention)",
        ),
        TransformerConfig(
            "mixtral-8x7b",
            L=32,
            D=4096,
            F=14_336,
            N=32,
            K=8,
            H=128,
            V=32_000,
            E=8,
            k=2,
            source=_HF.format("mistralai/Mixtral-8x7B-v0.1") + " + num_local_experts=8, "
            "num_experts_per_tok=2; router D·E, no bias",
        ),
        TransformerConfig(
            "gemma2-9b",
            L=42,
            D=3584,
            F=14_336,
            N=16,
            K=8,
            H=256,
            V=256_000,
            tied_embeddings=True,
            norms_per_layer=4,
            source=_HF.format("google/gemma-2-9b") + "; 4 RMSNorms per layer "
            "(pre/post attention, pre/post feed-forward); the 4096-token "
            "sliding window of every other layer is not modelled",
        ),
        TransformerConfig(
            "gemma2-27b",
            L=46,
            D=4608,
            F=36_864,
            N=32,
            K=16,
            H=128,
            V=256_000,
            tied_embeddings=True,
            norms_per_layer=4,
            source=_HF.format("google/gemma-2-27b") + "; 4 RMSNorms per layer; sliding windows not modelled",
        ),
        TransformerConfig(
            "qwen2.5-72b",
            L=80,
            D=8192,
            F=29_568,
            N=64,
            K=8,
            H=128,
            V=152_064,
            qkv_bias=True,
            source=_HF.format("Qwen/Qwen2.5-72B") + "; Q, K, V projections have biases",
        ),
        replace(
            _DEEPSEEK_V3_LIKE,
            name="deepseek-v3",
            router_bias=True,
            source=_HF.format("deepseek-ai/DeepSeek-V3") + " + q_lora_rank, kv_lora_rank, "
            "qk_nope_head_dim=128 (H), qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=256, "
            "n_shared_experts=1, num_experts_per_tok=8, moe_intermediate_size=2048, "
            "first_k_dense_replace=3, e_score_correction_bias; the main model only: the "
            "multi-token-prediction module (num_nextn_predict_layers=1) is not counted",
        ),
        TransformerConfig(
            "gpt3-175b",
            L=96,
            D=12_288,
            F=4 * 12_288,
            N=96,
            K=96,
            H=128,
            V=50_257,
            gated_mlp=False,
            tied_embeddings=True,
            linear_bias=True,
            norm_bias=True,
            max_positions=2048,
            source="GPT-3 paper (Brown et al. 2020), Table 2.1: n_layers 96, d_model 12288, n_heads 96, "
            "d_head 128, n_ctx 2048, F = 4·d_model; 'the same model and architecture as GPT-2': "
            "its 50,257-token BPE vocabulary, learned positions, LayerNorm and linear biases, "
            "tied embeddings (assumed: the paper gives no exact count, only 175.0B)",
        ),
    )
}


#: other spellings of the presets, compared after `errors.squash_name` (case, separators, an org/ prefix, a
#: vendor word and "-hf" are ignored); LLaMA 3.1 has LLaMA 3's architecture and parameter count.
MODEL_ALIASES = {
    "llama-3.1-8b": "llama3-8b",
    "llama-3.1-70b": "llama3-70b",
    "llama-3.1-405b": "llama3-405b",
    "mistral-7b-v0.1": "mistral-7b",
    "mixtral-8x7b-v0.1": "mixtral-8x7b",
    "deepseek-v3-base": "deepseek-v3",
    "gpt-3": "gpt3-175b",
    "davinci": "gpt3-175b",
}


_MODEL_INDEX = name_index(MODELS, MODEL_ALIASES)


def get_model(name: str | TransformerConfig) -> TransformerConfig:
    """Look up a preset by name: case, separators and common spellings are ignored ("Llama-3-8B", "llama3_8b",
    "meta-llama/Meta-Llama-3-70B", "Llama-2-7b-hf"; `MODEL_ALIASES`). Raises UnknownNameError listing the close
    matches and every known name."""
    if isinstance(name, TransformerConfig):
        return name
    return MODELS[resolve_name(name, _MODEL_INDEX, "model", MODELS)]
