"""inference: the chapter-7/8 cost model — properties that could fail, and clear errors for bad input."""

from dataclasses import replace

import pytest
from pytest import approx
from scalebook_utils.errors import UnknownNameError

from scalebook_utils import inference as I
from scalebook_utils import transformer as tf

M70 = "llama3-70b"


# --- precision and the critical batch -----------------------------------------------------------------


def test_int8_weights_halve_weight_bytes_and_critical_batch():
    m = I.served_model(M70)
    assert m.weight_bytes("int8-weights") == approx(m.weight_bytes("bf16") / 2)
    assert m.weight_bytes("int4-weights") == approx(m.weight_bytes("bf16") / 4)
    assert I.critical_batch("v5e", "int8-weights") == approx(I.critical_batch("v5e", "bf16") / 2)
    # int8 FLOPs double the peak and halve the bytes: back to the bf16 value
    assert I.critical_batch("v5e", "int8") == approx(I.critical_batch("v5e", "bf16"))


def test_critical_batch_equals_the_chip_intensity_for_bf16():
    for chip in ("tpu-v5e", "tpu-v5p", "h100"):
        c = I.get_chip(chip)
        assert I.critical_batch(chip, "bf16") == approx(c.peak_flops("bf16") / c.hbm_bandwidth_bytes_per_s)


def test_unknown_precision_names_the_allowed_ones():
    with pytest.raises(UnknownNameError, match="allowed precisions: bf16, int8-weights, int8"):
        I.critical_batch("v5e", "int3")
    with pytest.raises(ValueError, match="unknown precision 'fp64'"):
        I.decode_step(M70, 1, 1, "v5e", 16, "fp64")


def test_precision_without_fast_path_on_chip_is_refused():
    with pytest.raises(ValueError, match="no fp8 matmul peak"):
        I.critical_batch("tpu-v5e", "fp8")


# --- decode step --------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["bf16", "int8-weights", "int8"])
def test_step_time_monotone_in_batch_and_context(precision):
    kw = dict(chip="v5e", n_chips=16, precision=precision, check_memory=False)
    times_B = [I.decode_step(M70, B, 4096, **kw).step_time for B in (1, 4, 16, 64, 256, 1024)]
    times_S = [I.decode_step(M70, 16, S, **kw).step_time for S in (1, 128, 1024, 8192, 32768)]
    assert times_B == sorted(times_B) and times_B[0] < times_B[-1]
    assert times_S == sorted(times_S) and times_S[0] < times_S[-1]


def test_throughput_grows_with_batch():
    tps = [
        I.decode_step(M70, B, 2048, "v5e", 16, "int8-weights", check_memory=False).tokens_per_s_per_chip
        for B in (1, 8, 32, 128, 512)
    ]
    assert tps == sorted(tps)


def test_memory_bound_below_and_compute_bound_above_critical_batch():
    # S = 1 makes the KV term negligible, so only the parameter matmuls decide (1 chip: no ICI)
    for precision in ("bf16", "int8-weights", "int8"):
        bc = I.critical_batch("v5e", precision)
        below = I.decode_step("llama3-8b", int(bc * 0.8), 1, "v5e", 1, precision, check_memory=False)
        above = I.decode_step("llama3-8b", int(bc * 1.25), 1, "v5e", 1, precision, check_memory=False)
        assert not below.mlp_compute_bound and below.bottleneck == "weights"
        assert above.mlp_compute_bound and above.bottleneck == "compute"


def test_step_time_is_kv_plus_max_of_mlp_terms():
    d = I.decode_step(M70, 32, 8192, "v5e", 8, "int8-weights")
    assert d.step_time == approx(d.t_hbm_kv + max(d.t_math, d.t_hbm_weights))
    assert d.step_time_overlapped <= d.step_time
    assert d.latency == d.step_time
    assert d.tokens_per_s_per_chip == approx(32 / (d.step_time * 8))


def test_more_chips_cut_latency_but_not_memory_bound_throughput_per_chip():
    a = I.decode_step(M70, 32, 8192, "v5e", 8, "int8-weights")
    b = I.decode_step(M70, 32, 8192, "v5e", 16, "int8-weights")
    assert b.step_time < a.step_time
    assert b.tokens_per_s_per_chip == approx(a.tokens_per_s_per_chip, rel=0.01)


def test_ici_term_appears_only_with_model_parallelism():
    assert I.decode_step(M70, 32, 1024, "v5e", 16, "bf16").t_ici > 0
    assert I.decode_step("llama3-8b", 4, 1024, "v5e", 1, "int8").t_ici == 0
    # an int8 activation halves the bandwidth part of the collectives
    big_b = dict(B=512, S=1, chip="v5e", n_chips=8, check_memory=False)
    assert I.decode_step(M70, precision="int8", **big_b).t_ici == approx(
        I.decode_step(M70, precision="bf16", **big_b).t_ici / 2
    )


@pytest.mark.parametrize("B", [0, -1, 0.5, True])
def test_bad_batch_raises(B):
    with pytest.raises(ValueError, match="B \\(batch\\) must be a finite number ≥ 1"):
        I.decode_step(M70, B, 1024, "v5e", 16)


def test_context_beyond_maximum_raises():
    with pytest.raises(ValueError, match="longer than the maximum context 8192"):
        I.decode_step(M70, 1, 8193, "v5e", 16, "int8", max_context=8192)
    I.decode_step(M70, 1, 8192, "v5e", 16, "int8", max_context=8192)


def test_model_that_does_not_fit_raises_with_hint():
    with pytest.raises(ValueError, match="does not fit|needs .* GB, more than the HBM.*at least 9 chips"):
        I.decode_step(M70, 1, 1024, "v5e", 4, "bf16")
    with pytest.raises(ValueError, match="largest batch that fits at S=8192 is 42"):
        I.decode_step(M70, 64, 8192, "v5e", 16, "bf16")
    with pytest.raises(ValueError, match="at least 9 chips"):
        I.max_batch(M70, 8192, "v5e", 8, "bf16")


# --- memory -------------------------------------------------------------------------------------------


def test_max_batch_is_the_last_batch_that_fits():
    for precision in ("bf16", "int8-weights", "int4-weights"):
        n = I.min_chips(M70, "v5e", precision)
        b = I.max_batch(M70, 8192, "v5e", n, precision)
        cap = n * 16e9
        assert I.inference_memory(M70, b, 8192, precision) <= cap < I.inference_memory(M70, b + 1, 8192, precision)
        I.decode_step(M70, b, 8192, "v5e", n, precision)  # fits: no error


def test_max_batch_shrinks_with_context_and_grows_with_chips():
    assert I.max_batch(M70, 16384, "v5e", 16, "int8") < I.max_batch(M70, 8192, "v5e", 16, "int8")
    assert I.max_batch(M70, 8192, "v5e", 32, "int8") > I.max_batch(M70, 8192, "v5e", 16, "int8")


def test_min_chips_halves_with_weight_bytes_and_is_a_power_of_two():
    counts = [I.min_chips(M70, "v5e", p) for p in ("bf16", "int8-weights", "int4-weights")]
    assert counts == [16, 8, 4]
    assert I.min_chips(M70, "v5e", "bf16", pow2=False) == 9


def test_kv_bytes_follow_kv_heads():
    cfg = tf.get_model("book-ch7")
    one = replace(cfg, K=1)
    assert I.kv_cache_bytes(cfg, 1, 1000, "int8") == approx(8 * I.kv_cache_bytes(one, 1, 1000, "int8"))
    assert I.kv_cache_bytes(cfg, 2, 1000) == approx(2 * I.kv_cache_bytes(cfg, 1, 1000))


# --- prefill ------------------------------------------------------------------------------------------


def test_prefill_is_compute_bound_and_linear_in_tokens():
    book = dict(conventions="book")  # 2·P·T alone (the default adds attention FLOPs and the TP collectives)
    a, b = I.prefill_time(M70, 4096, "v5e", 16, **book), I.prefill_time(M70, 8192, "v5e", 16, **book)
    assert a.t_math > a.t_hbm_weights
    assert b.time == approx(2 * a.time)
    assert I.prefill_time(M70, 8192, "v5e", 16, mfu=0.5, **book).time == approx(2 * b.time)
    assert I.prefill_time(M70, 8192, "v5e", 16, include_attention=True, **book).time > b.time
    with pytest.raises(ValueError, match="mfu must be a finite number in \\(0, 1\\]"):
        I.prefill_time(M70, 8192, "v5e", 16, mfu=1.5)
    with pytest.raises(ValueError, match="T \\(prompt tokens\\)"):
        I.prefill_time(M70, 0, "v5e", 16)


# --- TP limits, 2D weight-stationary, latency-bound collectives -----------------------------------------


def test_small_batch_tp_limit_is_where_ici_overtakes_hbm():
    F, D, B = 28_672, 8192, 64
    Y = I.tp_limit_small_batch(F, B, "v5e")
    below = I.tp_matmul_times(B, D, F, int(Y * 0.9), "v5e")
    above = I.tp_matmul_times(B, D, F, int(Y * 1.1) + 1, "v5e")
    assert below.t_hbm > below.t_ici and above.t_ici > above.t_hbm
    assert I.tp_limit_small_batch(F, 2 * B, "v5e") == approx(Y / 2)


def test_large_batch_tp_limit_is_where_ici_overtakes_flops():
    F, D, B = 28_672, 8192, 4096
    Y = I.tp_limit_large_batch(F, "v5e")
    t = I.tp_matmul_times(B, D, F, Y, "v5e")
    assert t.t_math == approx(t.t_ici)
    assert I.tp_limit_large_batch(F, "v5e", M_Y=2) == approx(2 * Y)


def test_2d_weight_stationary_optimum_and_crossover():
    B, D, F, N = 128, 8192, 32_768, 256
    best = I.weight_stationary_2d(B, D, F, N, "v5e")
    for X in (best.X / 2, best.X * 2):
        assert I.weight_stationary_2d(B, D, F, N, "v5e", X=X).t_comms > best.t_comms
    assert best.X * best.YZ == approx(N)
    n_star = I.ws_2d_crossover_chips(D, F)
    assert I.weight_stationary_2d(B, D, F, n_star, "v5e").t_comms == approx(I.ws_1d_comms(B, D, "v5e"))
    assert I.weight_stationary_2d(B, D, F, 2 * n_star, "v5e").t_comms < I.ws_1d_comms(B, D, "v5e")


def test_collective_time_has_a_latency_floor():
    thr = I.latency_bound_bytes(8, "v5e")
    assert I.collective_time(thr / 10, 8, "v5e") == I.collective_time(thr / 100, 8, "v5e") == approx(4e-6)
    assert I.collective_time(10 * thr, 8, "v5e") == approx(10 * I.collective_time(thr, 8, "v5e"))
    assert I.collective_time(1e6, 1, "v5e") == 0


# --- serving ------------------------------------------------------------------------------------------


def test_disaggregation_ratio_and_evictions():
    assert I.prefill_servers_per_generate_server(1.0, 0.01, 32, 512) == approx(1.0 * 32 / (0.01 * 512))
    e = I.kv_eviction_rate(32, 8192, 4096, kv_bytes_per_token=1000, step_time=0.02)
    assert e.tokens_per_step == approx(e.sequences_per_step * (8192 + 4096))
    assert e.bytes_per_s == approx(e.tokens_per_step * 1000 / 0.02)
    with pytest.raises(ValueError, match="decode_len must be a positive number"):
        I.kv_eviction_rate(32, 8192, 0)


def test_queries_per_s_per_chip_at_a_given_step_time():
    """ch. 8 in-text question 7: 43 sequences at 19 ms per step, 512 steps, 16 chips → 0.276 queries/s/chip."""
    assert I.queries_per_s_per_chip(43, 19e-3, 512, 16) == approx(0.276, rel=1e-3)
    step = I.decode_step(M70, 32, 8192, "v5e", 8, "int8-weights")
    assert I.queries_per_s_per_chip(32, step.step_time, 512, 8) == approx(step.queries_per_s_per_chip(512))
    with pytest.raises(ValueError, match="step_time"):
        I.queries_per_s_per_chip(32, 0, 512, 8)


def test_decode_activations_are_the_larger_of_a_layer_and_the_logits():
    """ch. 8 worked problem 2: LLaMA 3-8B at B = 240 in bf16 — the logits [B, V] (62 MB) beat one layer (39 MB)."""
    cfg = tf.get_model("llama3-8b")
    assert I.decode_activation_bytes("llama3-8b", 240) == approx(240 * cfg.V * 2)
    assert I.decode_activation_bytes("llama3-8b", 240, "fp32") == approx(
        2 * I.decode_activation_bytes("llama3-8b", 240)
    )


def test_cost_per_token_scales_inversely_with_throughput():
    a = I.cost_per_million_tokens(100, "v5e")
    assert I.cost_per_million_tokens(200, "v5e") == approx(a / 2)
    assert a == approx(1.2 / 3600 / 100 * 1e6)
    with pytest.raises(ValueError, match="no hourly price"):
        I.cost_per_million_tokens(100, "a100")


def test_speculative_tokens_per_step():
    assert I.speculative_tokens_per_step(0.0, 4) == 1
    assert I.speculative_tokens_per_step(1.0, 4) == 5
    vals = [I.speculative_tokens_per_step(a, 4) for a in (0.2, 0.5, 0.8, 0.95)]
    assert vals == sorted(vals)
    # the geometric series it sums
    assert I.speculative_tokens_per_step(0.7, 3) == approx(sum(0.7**i for i in range(4)))
    with pytest.raises(ValueError, match="acceptance \\(a probability\\) must be a finite number in \\[0, 1\\]"):
        I.speculative_tokens_per_step(1.2, 3)
    with pytest.raises(ValueError, match="draft_len must be an integer ≥ 0"):
        I.speculative_tokens_per_step(0.5, -1)


def test_collective_wait_hops_per_axis():
    # ch. 7 Appendix C: a bidirectional ring of |X| chips waits |X|/2 hops; a 4x4 slice has two such axes
    assert I.collective_wait_hops(16, 1) == 8
    assert I.collective_wait_hops(16, 2) == pytest.approx(4)
    assert I.collective_wait_hops(64, 3) == pytest.approx(6)
    assert I.collective_wait_hops(128, shape=(8, 16)) == 12
    with pytest.raises(ValueError, match="product"):
        I.collective_wait_hops(128, shape=(8, 8))
    with pytest.raises(ValueError):
        I.collective_wait_hops(16, 0)


def test_decode_ici_latency_floor_uses_the_slice_axes():
    # B = 1: tiny activations, so each of the 4·L collectives costs the hop floor T_hop·collective_wait_hops
    m = I.served_model("llama3-70b", params=70e9)
    one = I.decode_step(m, 1, 128, "tpu-v5e", 64, "int8-weights", ici_axes=1)
    two = I.decode_step(m, 1, 128, "tpu-v5e", 64, "int8-weights", ici_axes=2)
    assert one.t_ici == pytest.approx(4 * 80 * 1e-6 * 32)
    assert two.t_ici == pytest.approx(4 * 80 * 1e-6 * 8)


def test_bottleneck_names_what_sets_the_step():
    # 8x8, B = 128, int8 weights: ICI (3.7 ms) is the largest single term, but KV (3.3 ms) + FLOPs (1.4 ms) is longer
    m = I.served_model("llama3-70b", params=70e9)
    st = I.decode_step(m, 128, 8192, "tpu-v5e", 64, "int8-weights", shape=(8, 8))
    assert st.t_ici > max(st.t_hbm_kv, st.t_math, st.t_hbm_weights)
    assert st.t_ici < st.step_time and st.bottleneck == "kv"
    assert I.decode_step(m, 1, 128, "tpu-v5e", 16, "int8-weights").bottleneck == "weights"
    assert I.decode_step(m, 1, 128, "tpu-v5e", 256, "int8-weights").bottleneck == "ici"


def test_speculative_step_cost():
    """Verify step = KV of B + max(FLOPs at B(k+1), weights): memory-bound at small B, so it costs about one
    plain step, and the speedup is tokens/(1 + k·t_draft/t_plain)."""
    s = I.speculative_step("llama3-70b", "llama3-8b", 1, 8192, 4, 0.8, "tpu-v5e", 16, "int8-weights")
    plain = I.decode_step("llama3-70b", 1, 8192, "tpu-v5e", 16, "int8-weights")
    draft = I.decode_step("llama3-8b", 1, 8192, "tpu-v5e", 16, "int8-weights")
    assert s.t_plain == plain.step_time and s.t_draft == pytest.approx(4 * draft.step_time)
    assert s.t_verify == pytest.approx(plain.step_time, rel=0.01)  # 5 query tokens ≪ B_crit: same reads
    assert s.tokens == pytest.approx(I.speculative_tokens_per_step(0.8, 4))
    assert s.speedup == pytest.approx(s.tokens * s.t_plain / (s.t_draft + s.t_verify))
    assert 1 < s.speedup < s.tokens
    big = I.speculative_step("llama3-70b", "llama3-8b", 128, 2048, 4, 0.8, "tpu-v5e", 16, "int8-weights")
    assert big.t_verify > 2 * big.t_plain and big.speedup < s.speedup  # compute-bound verify: no free lunch
    with pytest.raises(ValueError):
        I.speculative_step("llama3-70b", "llama3-8b", 1, 8192, 0, 0.8)


# --- the front door ---------------------------------------------------------------------------------------------


def test_the_front_door_re_exports_every_part():
    """`inference` (core/inference/costs.py) holds every public name of memory, decode, model_parallel and
    economics, as the same objects: a function added to a part without its re-export fails here."""
    import importlib

    for part in ("memory", "decode", "model_parallel", "economics"):
        mod = importlib.import_module(f"scalebook_utils.core.inference.{part}")
        public = {
            n
            for n, v in vars(mod).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == mod.__name__ or n in mod.__all__
        }
        assert public <= set(mod.__all__), f"{part}: not in its __all__: {sorted(public - set(mod.__all__))}"
        missing = [n for n in mod.__all__ if getattr(I, n, None) is not getattr(mod, n)]
        assert not missing and set(mod.__all__) <= set(I.__all__), f"inference lacks {part}.{missing}"
