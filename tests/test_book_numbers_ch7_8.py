"""Golden tests for chapters 7 ("All About Transformer Inference") and 8 ("Serving LLaMA 3-70B on TPUs"):
numbers the book prints, computed through `scalebook_utils.inference` and compared with the printed value,
or with the accept range of /work/shared/book/PROBLEMS.md (quoted per test).

TPU v5e throughout: C = 1.97e14 bf16 (3.94e14 int8), W_hbm = 8.2e11 B/s, 16 GB HBM, W_ici = 9e10 B/s bidi.
Tolerances: a value the book prints to 2 significant figures gets rel ≈ 0.03; accept ranges are used as
given. Chapter 8's roofline code uses 70e9 parameters for LLaMA 3-70B (the preset counts 70.55e9); tests that
depend on that rounding (batch 43, queries/s) use `served_model(..., params=70e9)` and say so.
"""

from dataclasses import replace

import pytest
from pytest import approx

from scalebook_utils import inference as I
from scalebook_utils import transformer as tf

V5E = "tpu-v5e"
L70 = I.served_model("llama3-70b", params=70e9)  # ch. 8's "70e9 parameters"


def within(x, lo, hi):
    return lo <= x <= hi


# --- chapter 7, "Linear operations" / ch. 8 in-text question 4 -----------------------------------------------


def test_critical_batch_240_120_240():
    # ch8.iq4a/b/c accept [232.8, 247.2], [116.4, 123.6], [232.8, 247.2]; 1.97e14/8.2e11 = 240.2
    assert within(I.critical_batch(V5E, "bf16"), 232.8, 247.2)
    assert within(I.critical_batch(V5E, "int8-weights"), 116.4, 123.6)
    assert within(I.critical_batch(V5E, "int8"), 232.8, 247.2)


# --- chapter 7, "What about memory?" and the LLaMA 2-13B tables ------------------------------------------


def test_llama2_13b_kv_per_sequence_6_7_gb():
    # 8192·40·128·40·2·2 = 6.71e9 bytes (the book prints 6.7, labelled GiB but really GB)
    assert I.kv_cache_bytes("llama2-13b", 1, 8192, "bf16") == approx(6.7e9, rel=0.005)


# book table "Generation on 8× TPU v5e, LLaMA 2-13B, 8192 context, bf16": step ms and tokens/s per batch.
# Our parameter count is 13.02e9 (the book: 26 GB) → ≤ 0.3% off; the printed values have 3-5 digits.
MHA = {
    1: (4.98, 200.61),
    8: (12.13, 659.30),
    16: (20.30, 787.99),
    32: (36.65, 873.21),
    64: (69.33, 923.13),
    240: (249.09, 963.53),
}
GQA = {
    1: (4.17, 239.94),
    8: (5.60, 1429.19),
    16: (7.23, 2212.48),
    32: (10.50, 3047.62),
    64: (17.04, 3756.62),
    240: (52.99, 4529.34),
}


@pytest.mark.parametrize("B", sorted(MHA))
def test_llama2_13b_tables_on_8_v5e(B):
    mha = I.served_model("llama2-13b")
    # the GQA table keeps the MHA weights (26 GB) and divides the cache by 5 (8 KV heads for 40)
    gqa = I.served_model("llama2-13b", kv_elements_per_token=mha.kv_elements_per_token / 5)
    for model, table in ((mha, MHA), (gqa, GQA)):
        # the book tabulates past OOM, and streams the whole embedding table (the book's conventions)
        d = I.decode_step(model, B, 8192, V5E, 8, "bf16", check_memory=False, conventions="book")
        ms, tps = table[B]
        assert d.step_time * 1e3 == approx(ms, rel=0.004)
        assert d.tokens_per_s == approx(tps, rel=0.004)
        assert not d.mlp_compute_bound  # B ≤ 240: still memory-bound (B_crit = 240.2)


def test_mha_llama2_13b_runs_out_of_memory_beyond_batch_16_on_8_v5e():
    # ch. 7: "the MHA variant runs out of memory beyond batch size 16" (128 GB server)
    assert I.max_batch("llama2-13b", 8192, V5E, 8, "bf16") == 15  # 26 + 16·6.7 = 133 GB > 128 GB
    gqa = I.served_model("llama2-13b", kv_elements_per_token=I.served_model("llama2-13b").kv_elements_per_token / 5)
    assert I.max_batch(gqa, 8192, V5E, 8, "bf16") >= 64  # "fits batch 64"


# --- chapter 7, pop quiz and Questions 1–3, 5, 7 ---------------------------------------------------------


def test_ch7_pq1a_batch4_latency_bound():
    # ch7.pq1a accept [0.002425, 0.002575]: 30e9 int8 weights + 4·8192·100 kB over 16 × 8.2e11 B/s
    m = I.ServedModel("30B", params=30e9, active_params=30e9, kv_elements_per_token=1e5)
    d = I.decode_step(m, 4, 8192, V5E, 16, "int8-weights")
    assert within(d.step_time, 0.002425, 0.002575)


def test_ch7_pq1b_batch256_is_kv_dominated():
    # ch7.pq1b (compute it): at B = 256 the MLP is compute-bound (B > 120) and KV loads dominate the step
    m = I.ServedModel("30B", params=30e9, active_params=30e9, kv_elements_per_token=1e5)
    d = I.decode_step(m, 256, 8192, V5E, 16, "int8-weights")
    assert d.mlp_compute_bound and d.bottleneck == "kv"
    assert d.step_time == approx(256 * 8192 * 1e5 / (16 * 8.2e11) + 2 * 256 * 30e9 / (16 * 1.97e14))


def test_ch7_q1b_kv_per_token_int8():
    # ch7.q1b accept [2.542e5, 2.701e5]: 2·64·8·256 = 262,144 bytes
    assert within(I.served_model("book-ch7").kv_bytes_per_token("int8"), 2.542e5, 2.701e5)
    # ch7.q5d: unchanged for the MoE
    assert within(I.served_model("book-ch7-moe").kv_bytes_per_token("int8"), 2.542e5, 2.701e5)


def test_ch7_q2_largest_batch_128k():
    # ch7.q2a accept [6.79, 7.21] (unrounded 7.09; 6.92 with 128k = 131,072); ch7.q2b accept [54.32, 57.68]
    b = I.max_batch("book-ch7", 128_000, V5E, 16, "int8", integer=False)
    assert within(b, 6.79, 7.21) and I.max_batch("book-ch7", 128_000, V5E, 16, "int8") == 7
    b1 = I.max_batch(replace(tf.get_model("book-ch7"), K=1), 128_000, V5E, 16, "int8")
    assert within(b1, 54.32, 57.68)


def test_ch7_q3_param_load_time():
    # ch7.q3 accept [0.001358, 0.001442]: 18.4e9 int8 bytes / (16 · 8.2e11)
    assert within(I.decode_step("book-ch7", 1, 1, V5E, 16, "int8").t_hbm_weights, 0.001358, 0.001442)


def test_ch7_q5c_moe_critical_batch():
    # ch7.q5c accept [1862, 1978]: 240 · E/k (bf16 weights and FLOPs)
    cfg = tf.get_model("book-ch7-moe")
    assert within(I.critical_batch(V5E, "bf16") * cfg.E / cfg.k, 1862, 1978)


def test_ch7_q7_2d_weight_stationary():
    # ch7.q7c: X_opt = sqrt(N/8) for F = 4D; T_comms = sqrt(128)·B·D/(sqrt(N)·W)
    N, B, D = 512, 64, 4096
    assert I.ws_2d_optimal_X(N, D, 4 * D) == approx((N / 8) ** 0.5)
    w = I.weight_stationary_2d(B, D, 4 * D, N, V5E)
    assert w.t_comms == approx(128**0.5 * B * D / (N**0.5 * 9e10))
    assert w.t_math == approx(4 * B * D * 4 * D / (N * 1.97e14))
    # ch7.q7d accept [69.84, 74.16]; ch7.q7e 32·(F/D)·(3/4)²
    assert within(I.ws_2d_crossover_chips(D, 4 * D), 69.84, 74.16)
    assert I.ws_2d_crossover_chips(1, 8) == approx(32 * 8 * 0.75**2)


def test_ch7_tp_bound_example_64_way():
    # ch. 7 "Generation": F = 16,384, B = 32, β = 8 → 16384/(32·8) = 64-way
    assert I.tp_limit_small_batch(16_384, 32, V5E, beta=8) == approx(64)


def test_ch7_appendix_c_latency_bound_collectives():
    # 8-way on v5e: latency-bound below 8 · 4.5e10 · 1e-6 = 360 kB; B = 16, D = 8192 int8 (131 kB) is
    assert I.latency_bound_bytes(8, V5E) == approx(360e3)
    assert 16 * 8192 < I.latency_bound_bytes(8, V5E)
    # TP over Y in int8 is latency-bound when Y > B·D/45,000
    assert I.latency_bound_tp_degree(16, 8192, V5E, "int8") == approx(16 * 8192 / 45_000)


# --- chapter 8 -----------------------------------------------------------------------------------------


def test_ch8_iq2_memory_and_chips():
    # ch8.iq2a accept [1.086e11, 1.154e11]; ch8.iq2b (÷ 16 GB) accept [6.79, 7.21]; smallest slice 4x2
    mem = I.inference_memory("llama3-70b", 32, 8192, "int8")
    assert within(mem, 1.086e11, 1.154e11)
    assert within(mem / 16e9, 6.79, 7.21)
    assert I.min_chips("llama3-70b", V5E, "int8", B=32, S=8192) == 8


def test_ch8_iq3_latency_and_throughput():
    # ch8.iq3b/iq3d accept [227.9, 242.1] tokens/s/chip; ch8.iq3c accept [0.008245, 0.008755] s
    d8 = I.decode_step("llama3-70b", 32, 8192, V5E, 8, "int8-weights")
    d16 = I.decode_step("llama3-70b", 32, 8192, V5E, 16, "int8-weights")
    assert within(d8.tokens_per_s_per_chip, 227.9, 242.1)
    assert within(d16.step_time, 0.008245, 0.008755)
    assert within(d16.tokens_per_s_per_chip, 227.9, 242.1)


def test_ch8_iq5_smallest_topologies():
    # ch8.iq5a/b/c: 16, 8, 4 chips; iq5d/e accept [8.487, 9.013], [4.248, 4.512] (param bytes ÷ 16 GB)
    m = I.served_model("llama3-70b")
    assert [I.min_chips(m, V5E, p) for p in ("bf16", "int8-weights", "int4-weights")] == [16, 8, 4]
    assert within(m.weight_bytes("bf16") / 16e9, 8.487, 9.013)
    assert within(m.weight_bytes("int8-weights") / 16e9, 4.248, 4.512)
    # iq5f accept [2.187, 2.895]: 35.3 GB / 16 GB = 2.2 (the book's 2.81 is from an older int4 size)
    assert within(m.weight_bytes("int4-weights") / 16e9, 2.187, 2.895)


def test_ch8_iq6_iq7_full_hbm_latency_and_qps():
    # iq6 accept [0.01843, 0.01957]; iq7a/b/c accept [0.2619, 0.2781], [0.5335, 0.5665], [1.076, 1.144]
    ranges = {"bf16": (0.2619, 0.2781), "int8-weights": (0.5335, 0.5665), "int4-weights": (1.076, 1.144)}
    for precision, (lo, hi) in ranges.items():
        n = I.min_chips(L70, V5E, precision)
        b = I.max_batch(L70, 8192, V5E, n, precision)
        assert b == 43  # the book's batch; with the preset's 70.55e9 params it is 42
        d = I.decode_step(L70, b, 8192, V5E, n, precision)
        assert within(d.step_time, 0.01843, 0.01957)
        assert within(d.queries_per_s_per_chip(512), lo, hi)


def test_ch8_iq8_doubled_topology():
    # iq8a accept [3.608e11, 3.832e11]; iq8b accept [135.8, 144.2]; iq8c accept [0.4268, 0.4532]
    assert within(I.free_hbm(L70, V5E, 32, "bf16"), 3.608e11, 3.832e11)
    b = I.max_batch(L70, 8192, V5E, 32, "bf16")
    assert within(b, 135.8, 144.2)
    bf = I.decode_step(L70, b, 8192, V5E, 32, "bf16")
    assert within(bf.queries_per_s_per_chip(512), 0.4268, 0.4532)
    # iq8d/e (book 0.9 and 1.8, accept [0.873, 0.927] / [1.746, 1.854]) are the bf16 value doubled and
    # quadrupled. Same batch, half/quarter the chips: the HBM-only bound is exactly 2×/4× our bf16 value
    # (0.866, 1.73 — 3.8% under the book's rounding of 0.45·2). Our full bound is lower still: at B = 138 > 120
    # the int8-weights MLP is compute-bound with bf16 FLOPs, which the book's answer ignores.
    for precision, n, factor, book in (("int8-weights", 16, 2, 0.9), ("int4-weights", 8, 4, 1.8)):
        d = I.decode_step(L70, I.max_batch(L70, 8192, V5E, n, precision), 8192, V5E, n, precision)
        hbm_only = d.B / ((d.t_hbm_weights + d.t_hbm_kv) * 512 * n)
        assert hbm_only == approx(factor * bf.queries_per_s_per_chip(512), rel=0.01)
        assert hbm_only == approx(book, rel=0.04)
        assert d.mlp_compute_bound and d.queries_per_s_per_chip(512) < hbm_only


def test_ch8_iq9_tp_limits_on_4x8():
    # iq9a accept [25.22, 26.78]: F·M_Y/2200 with M_Y = 2 (exact α_ici = 1.97e14/9e10 = 2189)
    assert within(I.tp_limit_large_batch(28_672, V5E, M_Y=2), 25.22, 26.78)
    # iq9c accept [54.32, 57.68]: F/(8B) at B = 64 — with the book's β = 8; the chip's β = 9.1 gives 49
    assert within(I.tp_limit_small_batch(28_672, 64, V5E, beta=8), 54.32, 57.68)
    assert I.tp_limit_small_batch(28_672, 64, V5E) == approx(28_672 / (64 * 8.2e11 / 9e10))
    # iq9d accept [1.067e-5, 1.166e-5]; iq9e (compute it) 2DF/(32·8.2e11); iq9f accept [3.88e-6, 4.77e-6]
    t = I.tp_matmul_times(64, 8192, 28_672, 32, V5E)
    assert within(t.t_ici, 1.067e-5, 1.166e-5)
    assert t.t_hbm == approx(2 * 8192 * 28_672 / (32 * 8.2e11))
    assert within(t.t_math, 3.88e-6, 4.77e-6 * 1.0001)
    assert t.bottleneck == "HBM bandwidth"  # iq9g


def test_ch8_iq10_iq12_prefill_and_disaggregation():
    # iq10 (compute it; the book says 0.91 s): 2·70e9·8192/(16·1.97e14·0.4)
    pf = I.prefill_time(L70, 8192, V5E, 16, mfu=0.4, conventions="book")  # 2·P·T alone: no attention, no comms
    assert pf.time == approx(0.91, rel=0.01)
    # iq11a accept [0.007578, 0.008047]; iq11b accept [93.12, 98.88]
    e = I.kv_eviction_rate(32, 8192, 4096)
    assert within(e.sequences_per_step, 0.007578, 0.008047)
    assert within(e.tokens_per_step, 93.12, 98.88)
    # iq12 accept [2.91, 3.09]: prefill 0.91 s, decode 512 steps at 16 GB/8.2e11 B/s = 19.5 ms, batch 32
    step = I.decode_step(L70, 43, 8192, V5E, 16, "bf16").step_time
    assert within(I.prefill_servers_per_generate_server(pf.time, step, 32, 512), 2.91, 3.09)


def test_ch8_cost_table_flops_per_dollar():
    # ch. 8 cost table: v5e 5.8e17 printed; exact 1.97e14·3600/1.2 = 5.91e17 (1.9% off)
    assert I.flops_per_dollar(V5E) == approx(5.8e17, rel=0.02)
    assert I.flops_per_dollar("tpu-v5p") == approx(3.9e17, rel=0.02)
    assert I.flops_per_dollar("h100") == approx(3.3e17, rel=0.02)


def test_ch8_small_batch_latency_5_5ms():
    # ch. 8 "Visualizing the latency-throughput tradeoff": 16-way int8, latency from ~5.5 ms at small batch
    d = I.decode_step(L70, 1, 2048, V5E, 16, "int8-weights")
    assert d.step_time == approx(5.5e-3, rel=0.04)  # 70e9/(16·8.2e11) = 5.34 ms + KV


# --- added in the audit against the chapter 7–8 syllabi ----------------------------------------------------


def test_ch7_h100_critical_batch_about_280():
    # ch. 7 "Linear operations": "H100 ≈ 280". With the H100 figures of ch. 12 (9.89e14 bf16 FLOPs/s, 3.35e12 B/s)
    # the ratio is 295, 5.4% above the book's round number; we keep the chip's own numbers.
    assert I.critical_batch("h100", "bf16") == approx(9.89e14 / 3.35e12)
    assert I.critical_batch("h100", "bf16") == approx(280, rel=0.06)


def test_ch7_attention_intensity_prefill_and_generation():
    # ch. 7 "What about attention?": one MHA head has intensity ST/(S+T): T/2 in prefill (S = T), so prefill
    # attention is compute-bound above T ≈ 2·240 = 480; generation (T = 1) stays below 1 FLOP/byte
    assert tf.attention_intensity(4096, 4096, 1) == approx(4096 / 2)
    assert 2 * I.critical_batch(V5E, "bf16") == approx(480, rel=0.01)
    assert tf.attention_intensity(1, 8192, 1) == approx(1, rel=0.001) and tf.attention_intensity(1, 8192, 1) < 1


def test_ch7_llama2_13b_parameter_table():
    # ch. 7 "What about memory?" table: FFW 8.5e9, vocab 0.3e9 (1 s.f.; 0.33e9), attention 4.2e9, total 13e9
    pc = tf.param_count("llama2-13b")
    assert pc.mlp == approx(8.5e9, rel=0.01)
    assert pc.embedding + pc.unembedding == approx(0.3e9, rel=0.1)
    assert pc.attention == approx(4.2e9, rel=0.01)
    assert pc.total == approx(13e9, rel=0.01)
    assert I.served_model("llama2-13b").weight_bytes("bf16") == approx(26e9, rel=0.005)  # "26 GB in bf16"


def test_ch7_four_llama2_13b_caches_outweigh_the_parameters():
    # ch. 7: "just 4 of these [6.7 GB caches] exceed the memory of the parameters" (26 GB)
    weights = I.served_model("llama2-13b").weight_bytes("bf16")
    assert I.kv_cache_bytes("llama2-13b", 4, 8192) > weights > I.kv_cache_bytes("llama2-13b", 3, 8192)


def test_ch7_prefill_activation_80_mb():
    # ch. 7: one activation of an 8k-token prefill of LLaMA 2-13B is 8192 × 5120 × 2 bytes, printed "80 MB": it is
    # 80 MiB exactly (83.9e6 bytes)
    cfg = tf.get_model("llama2-13b")
    assert tf.activation_bytes(cfg, 8192, "block", "bf16") / cfg.L == 80 * 2**20


# the memory rows of the two LLaMA 2-13B tables (labelled GiB, really GB; the book rounds the cache to 6.7 GB and
# the weights to 26 GB, so every cell is within 0.3% of ours)
KV_GB = {1: 6.7, 8: 53.6, 16: 107.2, 32: 214.4, 64: 428.8, 240: 1608}
TOTAL_GB = {1: 32.7, 8: 79.6, 16: 133.2, 32: 240.4, 64: 454.8, 240: 1634}
GQA_KV_GB = {1: 1.34, 8: 10.72, 16: 21.44, 32: 42.88, 64: 85.76, 240: 321.6}
GQA_TOTAL_GB = {1: 27.34, 8: 36.72, 16: 47.44, 32: 68.88, 64: 111.76, 240: 347.6}


@pytest.mark.parametrize("B", sorted(KV_GB))
def test_ch7_llama2_13b_table_memory_rows(B):
    mha = I.served_model("llama2-13b")
    gqa = I.served_model("llama2-13b", kv_elements_per_token=mha.kv_elements_per_token / 5)
    assert I.kv_cache_bytes(mha, B, 8192) / 1e9 == approx(KV_GB[B], rel=0.003)
    assert I.inference_memory(mha, B, 8192) / 1e9 == approx(TOTAL_GB[B], rel=0.003)
    assert I.kv_cache_bytes(gqa, B, 8192) / 1e9 == approx(GQA_KV_GB[B], rel=0.003)
    assert I.inference_memory(gqa, B, 8192) / 1e9 == approx(GQA_TOTAL_GB[B], rel=0.003)


def test_ch7_8x_v5e_server():
    # ch. 7: an 8× v5e host has 128 GB of HBM, "6.5 TiB/s" (8 × 8.2e11 = 6.56e12 B/s; the label's TiB is loose) and
    # "1600 TF/s" (8 × 1.97e14 = 1.58e15)
    from scalebook_utils.hardware import get_chip

    c = get_chip(V5E)
    assert 8 * c.hbm_bytes == 128e9
    assert 8 * c.hbm_bandwidth_bytes_per_s == approx(6.5e12, rel=0.01)
    assert 8 * c.peak_flops("bf16") == approx(1600e12, rel=0.02)


def test_ch7_appendix_a_minimum_latency_365_us():
    # Appendix A: ~600M params per layer (2 matmuls of 8192 × 32768 = 537M; the book rounds to 600M) in bf16,
    # sharded 4 ways on v5e: 600e6 · 2 / (4 · 8.2e11) = 366 µs ("~365 µs"); the exact 537M gives 327 µs
    m = I.ServedModel("appendix-a", params=600e6, active_params=600e6, kv_elements_per_token=1)
    assert I.decode_step(m, 1, 1, V5E, 4, "bf16").t_hbm_weights == approx(365e-6, rel=0.01)
    # step time is flat up to the critical batch (~240) and then grows linearly
    assert not I.decode_step(m, 240, 1, V5E, 4, "bf16").mlp_compute_bound
    assert I.decode_step(m, 241, 1, V5E, 4, "bf16").mlp_compute_bound


def test_ch7_appendix_c_131_kb_activation():
    # Appendix C: B = 16, D = 8192 int8 activations are 16·8192 bytes, printed "131 kB"
    assert I.get_precision("int8").activation_bytes * 16 * 8192 == approx(131e3, rel=0.001)


def test_ch7_prefill_tp_bound_f_over_2200():
    # ch. 7 "Prefill": one-axis model parallelism stays compute-bound up to ≈ F/2200 (α_ici = 1.97e14/9e10 = 2189)
    assert I.tp_limit_large_batch(16_384, V5E) == approx(16_384 / 2200, rel=0.01)


def test_ch7_beta_about_8():
    # ch. 7 "Generation": β = W_hbm/W_ici is "about 8" on v5e; the exact ratio is 8.2e11/9e10 = 9.1. The book's
    # worked numbers (64-way, ch. 8's 56) use 8, so the package takes `beta=` for them and uses 9.1 otherwise.
    assert I.hbm_ici_beta(V5E) == approx(8.2e11 / 9e10)
    assert I.hbm_ici_beta(V5E) == approx(8, rel=0.14)


def test_ch7_q1a_q5ab_parameter_counts():
    # ch7.q1a 1.84e10 (accept [1.784e10, 1.896e10]); q5a 2.12e11 (accept [2.056e11, 2.184e11]); q5b 31.2e9 printed
    # (exact 31.27e9: the book truncates; the router adds 4.2M)
    assert within(tf.param_count("book-ch7").total, 1.784e10, 1.896e10)
    assert within(tf.param_count("book-ch7-moe").total, 2.056e11, 2.184e11)
    assert tf.param_count("book-ch7-moe").activated == approx(31.2e9, rel=0.003)
    # q5e: forward FLOPs over T tokens 2·31.2e9·T
    assert I.prefill_time("book-ch7-moe", 1000, V5E, conventions="book").flops == approx(2 * 31.2e9 * 1000, rel=0.003)


def test_ch7_llama3_8b_heads():
    # ch. 7 "Tricks": LLaMA-3 8B has 32 query heads and 8 KV heads
    cfg = tf.get_model("llama3-8b")
    assert (cfg.N, cfg.K) == (32, 8)


def test_ch8_iq1_kv_per_token_160_kb():
    # ch8.iq1: 2·K·H·L = 2·8·128·80 = 163,840 bytes in int8 (≈ 160 kB)
    assert L70.kv_bytes_per_token("int8-weights") == 163_840


def test_ch8_iq3_total_throughput_1882():
    # ch8.iq3: 1882 tokens/s over the 4x2 (235 per chip); with 70e9 parameters we get 1858 (1.3% lower: the book
    # divides by a rounded 17 ms step)
    assert I.decode_step(L70, 32, 8192, V5E, 8, "int8-weights").tokens_per_s == approx(1882, rel=0.02)


def test_ch8_iq6_remarks():
    # ch8.iq6's answer: a 512-token generation at ~19.5 ms/step takes "~9 s" (we get 9.97 s = 512 × 19.47 ms; the book
    # multiplies 512 by a rounded-down step) and int4 weights alone take "~10 ms" per step (35e9/(4·8.2e11) = 10.7)
    n = I.min_chips(L70, V5E, "bf16")
    step = I.decode_step(L70, I.max_batch(L70, 8192, V5E, n, "bf16"), 8192, V5E, n, "bf16").step_time
    assert 9 <= 512 * step <= 10
    assert I.decode_step(L70, 1, 1, V5E, 4, "int4-weights").t_hbm_weights == approx(10e-3, rel=0.08)


def test_ch8_iq7_iq8_at_the_stated_19_ms():
    # ch8.iq7/iq8 divide by the rounded 19 ms step: 0.27/0.55/1.11 and 0.44/0.9/1.8 queries/s/chip come out
    # within the printed precision. (At the exact 19.5 ms, iq8d/e are 0.866/1.73: 3.8% under the book.)
    def qps(precision, n):
        return I.max_batch(L70, 8192, V5E, n, precision) / (19e-3 * 512 * n)

    for precision, n, book in (
        ("bf16", 16, 0.27),
        ("int8-weights", 8, 0.55),
        ("int4-weights", 4, 1.11),
        ("bf16", 32, 0.44),
        ("int8-weights", 16, 0.9),
        ("int4-weights", 8, 1.8),
    ):
        assert qps(precision, n) == approx(book, rel=0.025)


def test_ch8_latency_range_5_5_to_20_ms():
    # ch. 8 "Visualizing": 16-way int8 serving at 8k context runs from ~5.5 ms (batch 1) to ~20 ms (the largest batch)
    lo = I.decode_step(L70, 1, 8192, V5E, 16, "int8-weights").step_time
    B = I.max_batch(L70, 8192, V5E, 16, "int8-weights")
    hi = I.decode_step(L70, B, 8192, V5E, 16, "int8-weights").step_time
    assert lo == approx(5.5e-3, rel=0.02) and hi == approx(20e-3, rel=0.03)


def test_ch8_2k_context_plateau_about_1_token_per_ms_per_chip():
    # ch. 8: at 2k context throughput plateaus at "~1 token/ms/chip" past the batch-120 roofline. The roofline
    # plateau is 1/(16·(KV per sequence/W + 2P/C)) per chip = 893 tokens/s/chip (0.89 token/ms; 11% under "~1").
    from scalebook_utils import serving as sv

    plan = sv.plan_serving(L70, V5E, 16, "int8-weights", S=2048)
    assert plan.max_throughput.tokens_per_s_per_chip / 1e3 == approx(1, rel=0.12)
    assert I.decode_step(L70, 120, 2048, V5E, 16, "int8-weights").tokens_per_s_per_chip / 1e3 == approx(1, rel=0.12)


def test_ch8_doubling_latency_cuts_cost_about_100x():
    # ch. 8: "doubling per-token latency gives ~100× lower per-token cost". At 2k context on 16 chips, int8: batch 1
    # takes 5.4 ms; the best batch under twice that gives 77× the tokens/s per chip (27× at 8k): the order of
    # magnitude the book states.
    from scalebook_utils import serving as sv

    B_max = I.max_batch(L70, 2048, V5E, 16, "int8-weights")
    plan = sv.plan_serving(L70, V5E, 16, "int8-weights", S=2048, batches=range(1, B_max + 1))
    lo = plan.min_latency
    ratio = plan.best_under(2 * lo.latency).tokens_per_s_per_chip / lo.tokens_per_s_per_chip
    assert 50 < ratio < 150


def test_ch8_kv_loading_beats_flops_above_a_few_thousand_tokens():
    # ch. 8: "at every sequence length > 2048, KV loading time exceeds FLOPs time". Per sequence the KV load is
    # S·163,840/W and the MLP FLOPs 2·70e9/C, equal at S = 3557: true at 4k and 8k, not yet at 2k (the book's
    # plots are at 2k and 8k; we test the crossover itself).
    d2, d4 = (I.decode_step(L70, 240, S, V5E, 16, "int8-weights") for S in (2048, 4096))
    assert d2.t_hbm_kv < d2.t_math and d4.t_hbm_kv > d4.t_math
    crossover = (2 * 70e9 / 1.97e14) / (L70.kv_bytes_per_token("int8-weights") / 8.2e11)
    assert crossover == approx(3557, rel=0.001)
