"""transformer: parameter, FLOP, KV-cache and activation accounting pinned to the book (ch. 4–7).

Accept ranges are PROBLEMS.md's; exact values are the Hugging Face parameter counts where the config is public.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scalebook_utils.errors import UnknownNameError
from scalebook_utils.transformer import TransformerConfig, get_model, param_count

from scalebook_utils import transformer as tf


def within(value, lo, hi):
    return lo <= value <= hi


# --- presets and exact parameter counts ----------------------------------------------------------


@pytest.mark.parametrize(
    "name, exact",
    [
        ("llama3-8b", 8_030_261_248),  # HF Meta-Llama-3-8B
        ("llama3-70b", 70_553_706_496),  # HF Meta-Llama-3-70B; book ch. 6 "≈70B" breakdown
        ("llama3-405b", 405_853_388_800),  # HF Llama-3.1-405B
        ("llama2-13b", 13_015_864_320),  # HF Llama-2-13b
    ],
)
def test_llama_param_counts_equal_the_released_models(name, exact):
    assert param_count(name).total == exact


def test_llama3_70b_breakdown_book_ch6():
    p = param_count("llama3-70b")
    assert within(p.mlp, 5.461e10, 5.799e10) and p.mlp == 3 * 80 * 8192 * 28672  # ch6.iq1a 56.3e9
    assert within(p.embedding + p.unembedding, 2.037e9, 2.163e9)  # ch6.iq1b 2.1e9
    assert within(p.attention, 1.164e10, 1.236e10)  # ch6.iq1c 12e9
    assert within(p.total, 6.828e10, 7.252e10)  # ch6.iq1d 70.4e9
    assert p.total == pytest.approx(70.6e9, rel=1e-3)
    assert within(tf.training_flops_per_token(get_model("llama3-70b")), 4.074e11, 4.326e11)  # ch6.iq2a 6·70e9


def test_llama2_13b_breakdown_book_ch5_q1():
    p = param_count("llama2-13b")
    assert within(p.mlp, 8.245e9, 8.755e9)  # ch5.q1a
    assert within(p.attention, 4.074e9, 4.326e9)  # ch5.q1b
    assert within(p.embedding + p.unembedding, 3e8, 3.399e8)  # ch5.q1c
    assert within(p.total, 1.261e10, 1.339e10)  # ch5.q1d


def test_ch4_q1_params_attention_fraction_kv():
    cfg = get_model("book-ch4")
    p = param_count(cfg)
    D, F, V, L = 4096, 4 * 4096, 32_000, 64
    assert p.total == L * (3 * D * F + 4 * D * D + 2 * D) + 2 * D * V  # the book's formula, exactly
    assert within(p.total, 1.552e10, 1.745e10)  # ch4.q1a
    assert within(p.attention_fraction, 0.2425, 0.2575)  # ch4.q1b: 0.25
    assert p.attention / p.total == pytest.approx(0.246, abs=5e-4)  # PROBLEMS.md note
    assert tf.kv_cache_bytes_per_token(cfg, "int8") == 2 * L * D  # ch4.q1c: 2·L·N·H


def test_ch7_model_and_moe():
    cfg, moe = get_model("book-ch7"), get_model("book-ch7-moe")
    L, D, F, N, K, H, V = 64, 4096, 16384, 32, 8, 256, 32128
    assert param_count(cfg).total == L * D * (3 * F + 2 * H * (N + K)) + D * V  # ch7.q1a formula exactly
    assert within(param_count(cfg).total, 1.784e10, 1.896e10)  # ch7.q1a 18.4e9
    assert tf.kv_cache_bytes_per_token(cfg, "int8") == 262_144  # ch7.q1b
    assert tf.kv_cache_bytes_per_token(dataclasses.replace(cfg, K=1), "int8") == 262_144 / 8  # ch7.q2b's 8×
    pm = param_count(moe)
    assert within(pm.total, 2.056e11, 2.184e11)  # ch7.q5a 212e9
    router = L * D * 16
    assert pm.total - router == L * D * (3 * 16 * F + 2 * H * (N + K)) + D * V
    assert pm.activated - router == L * D * (3 * 2 * F + 2 * H * (N + K)) + D * V  # ch7.q5b
    assert tf.kv_cache_bytes_per_token(moe, "int8") == 262_144  # ch7.q5d
    assert tf.forward_flops_per_token(moe) == pytest.approx(2 * 31.2e9, rel=5e-3)  # ch7.q5e 2·31.2e9·T
    assert within(tf.moe_critical_batch(moe, weight_dtype="bf16"), 1862, 1978)  # ch7.q5c 240·E/k


def test_deepseek_v3_like():
    cfg = get_model("deepseek-v3-like")
    p = param_count(cfg)
    assert p.total == pytest.approx(671e9, rel=5e-3) and p.activated == pytest.approx(37e9, rel=0.02)
    assert within(tf.moe_critical_batch(cfg), 3724, 3956)  # ch4.q8b 120·E/k = 3840
    assert tf.kv_cache_bytes_per_token(cfg, "bf16") == 61 * (512 + 64) * 2  # MLA caches the latent
    # ch4.q7: DeepSeek v3 MFU with 6·37e9 per token
    mfu = 6 * 37e9 * 14.8e12 / (2.79e6 * 3600 * 1.513e15)
    ours = 6 * p.activated * 14.8e12 / (2.79e6 * 3600 * 1.513e15)
    assert ours == pytest.approx(mfu, rel=0.02) and 0.2 < mfu < 0.25


def test_moe_coefficient():
    """c in B > c·E/k: α·bytes/2 (v5e int8: 120 with the book's α = 240); moe_critical_batch is c·E/k."""
    from scalebook_utils import hardware

    alpha = hardware.get_chip("tpu-v5e").critical_intensity("bf16")
    assert tf.moe_coefficient("tpu-v5e", "int8") == pytest.approx(alpha / 2)
    assert tf.moe_coefficient("tpu-v5e", "bf16") == pytest.approx(alpha)
    assert tf.moe_coefficient("tpu-v5e", "int8", book_rounding=True) == 120.0  # ch4.q8: 120·E/k
    assert tf.moe_coefficient("tpu-v5e", "int4", book_rounding=True) == 60.0
    cfg = get_model("deepseek-v3-like")
    for chip, w in (("tpu-v5e", "int8"), ("tpu-v5p", "bf16"), ("h100", "fp8")):
        assert tf.moe_coefficient(chip, w) * cfg.E / cfg.k == pytest.approx(tf.moe_critical_batch(cfg, chip, w))
    with pytest.raises(UnknownNameError):
        tf.moe_coefficient("tpu-v99")


def test_get_model_unknown_lists_names():
    with pytest.raises(UnknownNameError, match="llama3-70b") as e:
        get_model("llama-99b")
    assert isinstance(e.value, KeyError) and "deepseek-v3-like" in str(e.value)
    assert get_model("LLaMA3-70B") is get_model("llama3-70b")
    assert all(m.source for m in tf.MODELS.values())


# --- FLOPs ---------------------------------------------------------------------------------------


def test_forward_backward_training_relations():
    cfg = get_model("llama3-8b")
    f = tf.forward_flops_per_token(cfg, 4096)
    assert tf.backward_flops_per_token(cfg, 4096) == 2 * f
    assert tf.training_flops_per_token(cfg, 4096) == 3 * f
    assert tf.training_flops_per_token(cfg, 1) - 12 * cfg.L * cfg.N * cfg.H == 6 * tf.matmul_params(cfg)
    # attention T² term explicit: 12·B·T²·N·H·L for training
    assert 3 * tf.attention_flops(cfg, 4096, B=2) == 12 * 2 * 4096**2 * cfg.N * cfg.H * cfg.L
    assert tf.attention_flops(cfg, 4096, causal=True) == tf.attention_flops(cfg, 4096) / 2
    assert tf.training_flops(cfg, 1e6, 4096) == pytest.approx(1e6 * tf.training_flops_per_token(cfg, 4096))


def test_ch5_e4a_llama70b_training_flops():
    flops = 6 * param_count("llama3-70b").total * 15e12
    assert within(flops, 6.111e24, 6.489e24)


def test_attention_fraction_t_over_8d_and_crossovers():
    for D in (4096, 4608, 8192):
        cfg = TransformerConfig("x", L=2, D=D, F=4 * D, N=D // 128, K=D // 128, H=128, V=1000)
        for T in (1024, 8 * D, 65536):
            assert tf.attention_to_matmul_flops_ratio(cfg, T) == pytest.approx(T / (8 * D))
        assert tf.attention_projection_crossover(cfg) == 2 * D  # ch4.q5: T = 2D
    gemma = TransformerConfig("g", L=1, D=4608, F=4 * 4608, N=36, K=36, H=128, V=1)
    assert tf.attention_to_matmul_flops_ratio(gemma, 36_864) == pytest.approx(1.0)  # ch. 4: ≈37k
    assert tf.attention_projection_crossover(get_model("book-ch4")) == 8192  # book example


def test_attention_intensity_ch4_q4():
    assert tf.attention_intensity(1000, 1000, 1) == pytest.approx(500)  # T·G/(G+1)
    assert tf.attention_intensity(1, 1e9, 8) == pytest.approx(8, rel=1e-6)  # → G for S ≫ G
    # ch4.q4d: prefill is compute-bound on v5e (≈240 FLOPs/B) above T = 240·(G+1)/G: 480 for MHA, → 240 for big G
    for G, lo_ok in ((1, 480), (64, 244)):
        assert within(lo_ok, 232.8, 480.5)
        assert tf.attention_intensity(lo_ok + 1, lo_ok + 1, G) > 240 > tf.attention_intensity(lo_ok - 1, lo_ok - 1, G)
    assert tf.attention_intensity(481, 481, 1) > 240 > tf.attention_intensity(479, 479, 1)  # ch4.q4d (MHA)


def test_remat_recompute_ch4_q6_and_8x_rule():
    cfg = get_model("book-ch4")
    B, T = 3, 2048
    per_tok = tf.remat_recompute_flops_per_token(cfg, T, "big_matmuls")
    assert per_tok * B * T == 4 * B * T**2 * cfg.N * cfg.H * cfg.L  # ch4.q6: 4BT²NH per layer
    assert tf.remat_recompute_flops_per_token(cfg, T, "none") == 0
    ratio = tf.training_flops_per_token(cfg, 1, remat="block") / tf.training_flops_per_token(cfg, 1)
    assert ratio == pytest.approx(8 / 6, rel=1e-3)  # 6 → 8 · params · tokens


# --- activations and KV cache --------------------------------------------------------------------


def test_activation_memory_book_examples():
    cfg = TransformerConfig("x", L=64, D=8192, F=4 * 8192, N=64, K=64, H=128, V=32_000)
    assert tf.activation_bytes(cfg, 4e6, "none") == pytest.approx(84e12, rel=0.01)  # ch. 4: ≈84 TB
    assert tf.activation_bytes(cfg, 4e6, "block") == pytest.approx(4.2e12, rel=0.01)  # ch. 4: 4.2 TB
    big = tf.activation_elements_per_token_per_layer(cfg, "big_matmuls")
    assert big == 8192 + 2 * 8192 + 8192 + 2 * 4 * 8192 + 8192  # Q, K, V, O, W1, W2, W3 outputs
    assert tf.activation_bytes(cfg, 1, "none", "fp32") == 2 * tf.activation_bytes(cfg, 1, "none", "bf16")
    # ch6.iq5c: 2 checkpoints of D per layer, bf16, 4M tokens → 2·D·B·2·L
    c70 = get_model("llama3-70b")
    assert within(2 * tf.activation_bytes(c70, 4e6, "block"), 1.018e13, 1.1e13)


def test_kv_cache_dtypes_and_ch8_iq1():
    cfg = get_model("llama3-70b")
    assert tf.kv_cache_bytes_per_token(cfg, "int8") == 2 * 8 * 128 * 80  # ch8.iq1
    assert tf.kv_cache_bytes_per_token(cfg, "bf16") == 2 * tf.kv_cache_bytes_per_token(cfg, "int8")
    big = TransformerConfig("x", L=64, D=8192, F=32768, N=64, K=64, H=128, V=1)
    assert 8192 * tf.kv_cache_bytes_per_token(big, "int8") == 8 * 2**30  # ch. 4: 8 GiB at S = 8192


# --- properties ----------------------------------------------------------------------------------

small = st.integers(1, 64)


@st.composite
def configs(draw):
    K = draw(st.integers(1, 8))
    E = draw(st.sampled_from([0, 1, 4, 16]))
    return TransformerConfig(
        "h",
        L=draw(small),
        D=draw(small),
        F=draw(small),
        N=K * draw(st.integers(1, 8)),
        K=K,
        H=draw(small),
        V=draw(small),
        gated_mlp=draw(st.booleans()),
        tied_embeddings=draw(st.booleans()),
        E=E,
        k=draw(st.integers(1, E)) if E else 0,
        n_shared=draw(st.integers(0, 2)) if E else 0,
    )


@given(cfg=configs(), dim=st.sampled_from(["L", "D", "F", "H", "V", "E", "n_shared"]), inc=st.integers(1, 50))
@settings(max_examples=150, deadline=None)
def test_params_monotone_in_every_dim(cfg, dim, inc):
    if dim in ("E", "n_shared") and not cfg.is_moe:
        return
    bigger = dataclasses.replace(cfg, **{dim: getattr(cfg, dim) + inc})
    assert param_count(bigger).total > param_count(cfg).total
    assert param_count(bigger).activated >= param_count(cfg).activated


@given(cfg=configs(), g=st.integers(2, 4))
@settings(max_examples=100, deadline=None)
def test_params_monotone_in_heads_and_moe_activated_le_total(cfg, g):
    p = param_count(cfg)
    assert p.activated <= p.total and (p.activated == p.total) == (not cfg.is_moe or cfg.k == cfg.E)
    assert p.total == p.embedding + p.attention + p.mlp + p.norms + p.unembedding
    more_q = dataclasses.replace(cfg, N=cfg.N * g)
    more_kv = dataclasses.replace(cfg, N=cfg.N * g, K=cfg.K * g)
    assert param_count(cfg).total < param_count(more_q).total < param_count(more_kv).total


@given(cfg=configs())
@settings(max_examples=100, deadline=None)
def test_gqa_with_k_equal_n_is_mha(cfg):
    mha = dataclasses.replace(cfg, K=cfg.N)
    D, N, H, L = cfg.D, cfg.N, cfg.H, cfg.L
    assert param_count(mha).attention == L * 4 * D * N * H
    assert tf.kv_cache_bytes_per_token(mha, "int8") == 2 * L * N * H
    assert mha.G == 1
    # training FLOPs ≈ 6·params (matmul params) + attention term, for any config
    assert tf.training_flops_per_token(cfg, 7) == pytest.approx(
        6 * tf.matmul_params(cfg) + 3 * tf.attention_flops(cfg, 1, 7)
    )


# --- bad input -----------------------------------------------------------------------------------

BASE = dict(name="x", L=2, D=8, F=16, N=4, K=2, H=2, V=10)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(D=0), "D must be a positive integer"),
        (dict(L=-1), "L must be a positive integer"),
        (dict(F=2.5), "F must be a positive integer"),
        (dict(K=3), "K .*must divide N"),
        (dict(K=8), "K .*must divide N"),
        (dict(E=4, k=5), "k .*<= E=4"),
        (dict(E=4, k=0), "k .*<= E=4"),
        (dict(k=2), "need an MoE"),
        (dict(E=4, k=1, first_dense_layers=2), "first_dense_layers must be < L"),
        (dict(norms_per_layer=-1), "norms_per_layer must be a non-negative"),
        (dict(rope_head_dim=64), "only to MLA"),
        (dict(E=4, k=1, F_expert=0), "F_expert must be a positive"),
    ],
)
def test_bad_config(change, match):
    with pytest.raises(ValueError, match=match):
        TransformerConfig(**{**BASE, **change})


def test_bad_arguments():
    cfg = get_model("llama3-8b")
    with pytest.raises(ValueError, match="policy must be one of none, big_matmuls, block"):
        tf.activation_bytes(cfg, 1e6, "everything")
    with pytest.raises(ValueError, match="T must be a length"):
        tf.attention_flops(cfg, 0)
    with pytest.raises(ValueError, match="tokens must be a positive"):
        tf.activation_bytes(cfg, -5)
    with pytest.raises(ValueError, match="dense"):
        tf.moe_critical_batch(cfg)
    with pytest.raises(ValueError):
        tf.kv_cache_bytes_per_token(cfg, "int3")
    with pytest.raises(ValueError, match="G must be a positive"):
        tf.attention_intensity(1, 1, 0)
