"""Tests of scalebook_utils.jaxdecode: the KV-cache decoder of book ch. 7 must decode exactly like the naive
recompute of `tinymodel.forward`, its cache must have the book's size, and its roofline must be the stated
formula. Timing is never asserted here (benchmarks measure it); the measuring functions only have to
return sane rows. Everything uses MICRO-sized models so that the compilations stay short.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from scalebook_utils.jaxlab import Calibration  # noqa: E402

from scalebook_utils import jaxdecode as jd  # noqa: E402
from scalebook_utils import tinymodel as tm  # noqa: E402
from scalebook_utils import transformer as tr  # noqa: E402

MICRO = tm.MICRO  # L=2, D=64, F=192, N=4, K=2, H=16, V=128: GQA
# MQA also varies the rest of the architecture: tied embeddings, a plain (ungated) MLP, one norm per layer
MQA = dataclasses.replace(MICRO, K=1, tied_embeddings=True, gated_mlp=False, norms_per_layer=1)
ATTENTION = {"mha": dataclasses.replace(MICRO, K=4), "gqa": MICRO, "mqa": MQA}
# Shapes shared by the tests, so that most calls reuse a compiled function: B = 3 sequences, prompts of
# T = 5 or 6 tokens, 10 cache slots.
B, MAX_LEN = 3, 10
FAKE = Calibration(flops_per_s=1e11, bytes_per_s=1e10, dtype="float32", backend="cpu")


@pytest.fixture(scope="module")
def micro():
    return tm.init_params(MICRO, 0)


# --- cached decoding equals recomputation ----------------------------------------------------------


@pytest.mark.parametrize("kind", list(ATTENTION))
def test_cache_equals_recompute(kind):
    cfg = ATTENTION[kind]
    params = tm.init_params(cfg, 1)
    prompt = tm.sample_tokens(cfg, B, 5, 1)
    a, la = jd.generate(params, prompt, cfg, 6, return_logits=True)  # prefill, then 5 decode steps
    b, lb = jd.generate(params, prompt, cfg, 6, use_cache=False, return_logits=True)  # tinymodel.forward
    assert a.shape == (B, 6) and a.dtype == jnp.int32 and la.shape == (B, 6, cfg.V)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(la), np.asarray(lb), rtol=jd.LOGITS_TOL, atol=jd.LOGITS_TOL)
    assert len(set(np.asarray(a).ravel().tolist())) > 1  # not a degenerate constant output


def test_cache_matches_recompute_prints_a_bool():
    assert jd.cache_matches_recompute(MQA, B=B, T=5, steps=6, key=1) is True


def test_generate_accepts_serving_params(micro):
    prompt = tm.sample_tokens(MICRO, B, 5, 2)
    sp = jd.serving_params(micro, MICRO)
    assert jd.serving_params(sp, MICRO) is sp
    np.testing.assert_array_equal(
        np.asarray(jd.generate(sp, prompt, MICRO, 6)), np.asarray(jd.generate(micro, prompt, MICRO, 6))
    )


def test_serving_params_hold_the_same_numbers(micro):
    sp = jd.serving_params(micro, MICRO)
    a, m = micro["layers"][1]["attn"], micro["layers"][1]["mlp"]
    wq = np.asarray(a["wq"]).reshape(MICRO.D, -1)
    np.testing.assert_array_equal(np.asarray(sp["layers"][1]["w_qkv"])[: MICRO.N * MICRO.H], wq.T)
    np.testing.assert_array_equal(np.asarray(sp["layers"][1]["w_down"]), np.asarray(m["w_down"]).T)
    np.testing.assert_array_equal(np.asarray(sp["unembedding_t"]), np.asarray(micro["unembedding"]).T)
    tied = jd.serving_params(tm.init_params(MQA), MQA)
    assert tied["unembedding_t"] is tied["embedding"] and set(tied["layers"][0]) == {
        "w_qkv",
        "wo",
        "w_in",
        "w_out",
        "attn_norm",
    }


# --- the cache ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", list(ATTENTION))
def test_cache_bytes_equal_the_formula(kind, dtype):
    cfg = ATTENTION[kind]
    cache = jd.init_cache(cfg, 3, 11, dtype)
    assert cache["k"].shape == cache["v"].shape == (cfg.L, 3, cfg.K, 11, cfg.H)
    # 2·L·K·H·bytes per token (book ch. 7), times max_len slots, times B sequences
    assert jd.cache_bytes(cache) == tr.kv_cache_bytes_per_token(cfg, dtype) * 11 * 3
    assert jd.cache_bytes(cache) == 2 * cfg.L * cfg.K * cfg.H * jnp.dtype(dtype).itemsize * 11 * 3


def test_prefill_then_decode_equals_a_longer_prefill(micro):
    tokens = tm.sample_tokens(MICRO, B, 7, 3)
    _, cache = jd.prefill(micro, tokens[:, :6], MICRO, MAX_LEN)
    logits7, cache7 = jd.decode_step(micro, tokens[:, 6], cache, 6, MICRO)
    want7, want_cache = jd.prefill(micro, tokens, MICRO, MAX_LEN)
    np.testing.assert_allclose(np.asarray(logits7), np.asarray(want7), rtol=1e-5, atol=1e-5)
    for name in ("k", "v"):
        np.testing.assert_allclose(np.asarray(cache7[name]), np.asarray(want_cache[name]), rtol=1e-5, atol=1e-5)
    assert not np.asarray(cache7["k"])[:, :, :, 7:].any()  # the slots after the last position stay empty


def test_length_mask_ignores_what_lies_beyond_pos(micro):
    tokens = tm.sample_tokens(MICRO, B, 7, 4)
    _, cache = jd.prefill(micro, tokens[:, :6], MICRO, MAX_LEN)
    junk = np.random.default_rng(0).normal(0, 1e3, cache["k"].shape).astype(np.float32)
    later = (np.arange(MAX_LEN) > 6)[:, None]  # decode writes position 6; slots 7 … 9 must not matter
    dirty = {n: jnp.asarray(np.where(later, junk, np.asarray(c))) for n, c in cache.items()}
    clean, _ = jd.decode_step(micro, tokens[:, 6], cache, 6, MICRO)
    got, new = jd.decode_step(micro, tokens[:, 6], dirty, 6, MICRO)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(clean))
    np.testing.assert_array_equal(np.asarray(new["k"])[:, :, :, 7:], np.asarray(dirty["k"])[:, :, :, 7:])


def test_decode_step_jits_once_for_every_position(micro):
    traces = []

    def step(params, token, cache, pos):
        traces.append(pos)
        return jd.decode_step(params, token, cache, pos, MICRO)

    f = jax.jit(step)
    tokens = tm.sample_tokens(MICRO, B, 9, 5)
    _, cache = jd.prefill(micro, tokens[:, :6], MICRO, MAX_LEN)
    jitted, direct = cache, cache
    for pos in (6, 7, 8):
        got, jitted = f(micro, tokens[:, pos], jitted, jnp.int32(pos))
        want, direct = jd.decode_step(micro, tokens[:, pos], direct, pos, MICRO)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
    assert len(traces) == 1  # one trace (one compilation) for the three positions


# --- the roofline ------------------------------------------------------------------------------------


def test_decode_roofline_against_hand_numbers():
    # MICRO: P_matmul = L·(2·D·(N+K)·H + 3·D·F) + D·V = 2·(12,288 + 36,864) + 8,192 = 106,496 (tinymodel doc);
    # norms 2·2·64 + 64 = 320 → 106,816 parameters read, 4 bytes each; KV 2·L·K·H·4 = 512 bytes per token.
    B, S = 4, 16
    t_math = 2 * 4 * 106_496 / 1e11  # 8.51968e-6 s
    t_attn = 4 * 4 * 16 * 4 * 16 * 2 / 1e11  # 4·B·S·N·H·L = 32,768 FLOPs → 3.2768e-7 s
    t_weights = 106_816 * 4 / 1e10  # 4.27264e-5 s
    t_kv = 4 * 16 * 512 / 1e10  # 3.2768e-6 s
    st = jd.decode_bounds(MICRO, B, S, FAKE)
    for got, want in (
        (st.t_math, t_math),
        (st.t_math_attention, t_attn),
        (st.t_hbm_weights, t_weights),
        (st.t_hbm_kv, t_kv),
    ):
        assert got == pytest.approx(want, rel=1e-12)
    assert jd.decode_roofline(MICRO, B, S, FAKE) == pytest.approx(t_math + t_attn + t_weights + t_kv)
    assert jd.decode_roofline(MICRO, B, S, FAKE, form="upper") == pytest.approx(5.485056e-5, rel=1e-9)
    assert jd.decode_roofline(MICRO, B, S, FAKE, form="lower") == pytest.approx(t_weights + t_kv)
    assert jd.decode_roofline(MICRO, B, S, FAKE, form="book") == pytest.approx(t_kv + t_weights)
    # a separate read bandwidth replaces W in both bytes terms
    assert jd.decode_roofline(MICRO, B, S, FAKE, read_bytes_per_s=5e9) == pytest.approx(
        t_math + t_attn + 2 * (t_weights + t_kv)
    )
    # far above B_crit = 2·C/(W·4) = 5 the matmuls are compute-bound in every form
    big = jd.decode_bounds(MICRO, 4096, 1, FAKE)
    assert big.t_math > big.t_hbm_weights
    assert jd.decode_roofline(MICRO, 4096, 1, FAKE, form="book") == pytest.approx(
        max(big.t_hbm_kv, big.t_math_attention) + big.t_math
    )


def test_decode_served_model_counts_what_a_step_reads():
    # MICRO: P_read = P_matmul + norms = 106,496 + 320 (the embedding lookup reads B rows, not D·V)
    m = jd.decode_served_model(MICRO)
    assert m.params == 106_816 and m.active_params == 106_496 and m.kv_elements_per_token == 2 * 2 * 2 * 16
    assert jd.inference.served_model(MICRO).params == tr.param_count(MICRO).total > m.params  # a different count
    assert not hasattr(jd, "served_model")


def test_measure_decode_returns_sane_rows():
    # S = 9: the cache has MAX_LEN = 10 slots, as in the tests above (no new compilation). Without a
    # calibration C and W are measured alongside; with one, C is the calibration's.
    rows = jd.measure_decode(MICRO, batches=(B,), S=MAX_LEN - 1, rounds=1)
    fixed = jd.measure_decode(
        MICRO, batches=(1, B), S=MAX_LEN - 1, calibration=FAKE, rounds=1, form="lower", read_bytes_per_s=2e10
    )
    assert [r.B for r in rows] == [B] and [r.B for r in fixed] == [1, B]
    for r in rows + fixed:
        assert r.measured_s > 0 and math.isfinite(r.measured_s) and r.flops_per_s > 0 and r.bytes_per_s > 0
        assert r.ratio == pytest.approx(r.predicted_s / r.measured_s) and r.ratio > 0 and math.isfinite(r.ratio)
        assert r.bound == "memory"
    assert fixed[1].predicted_s == pytest.approx(
        jd.decode_roofline(MICRO, B, MAX_LEN, FAKE, form="lower", read_bytes_per_s=2e10)
    )
    assert fixed[0].flops_per_s == FAKE.flops_per_s and fixed[0].bytes_per_s == 2e10
    table = jd.format_decode_rows(fixed)
    assert "pred/meas" in table and "C = 100 GFLOP/s, W = 20.0 GB/s" in table and len(table.splitlines()) == 4


def test_prefill_vs_decode_is_print_friendly():
    r = jd.prefill_vs_decode(MICRO, B=B, T=MAX_LEN - 1, calibration=FAKE, rounds=1)
    assert r.prefill_s > 0 and r.decode_s > 0 and math.isfinite(r.ratio) and r.ratio > 0
    assert r.ratio == pytest.approx((r.decode_s / B) / (r.prefill_s / (B * (MAX_LEN - 1))))
    assert r.predicted_ratio > 1  # on paper too, a decode token costs more than a prefill token
    assert "decode costs" in str(r) and "roofline" in str(r)
    measured = jd.prefill_vs_decode(MICRO, B=B, T=MAX_LEN - 1, rounds=1)  # C and W timed alongside
    assert measured.predicted_prefill_s > 0 and measured.predicted_ratio > 1


# --- bad input ---------------------------------------------------------------------------------------


def test_bad_input_raises_clear_errors(micro):
    tokens = tm.sample_tokens(MICRO, B, 6, 6)
    _, cache = jd.prefill(micro, tokens, MICRO, MAX_LEN)
    token = tokens[:, -1]
    cases = [
        (lambda: jd.init_cache(MICRO, 0, 8), r"B \(batch\) must be an integer ≥ 1, got 0"),
        (lambda: jd.init_cache(MICRO, 2, 0), "max_len must be an integer ≥ 1"),
        (lambda: jd.prefill(micro, tokens, MICRO, 5), "prompt length T=6 exceeds the cache: max_len=5"),
        (lambda: jd.prefill(micro, tokens + MICRO.V, MICRO, 8), r"token ids must lie in \[0, V=128\)"),
        (lambda: jd.prefill(micro, tokens[0], MICRO, 8), r"tokens must be \[B, T\]"),
        (lambda: jd.decode_step(micro, token, cache, MAX_LEN, MICRO), "0 ≤ pos < max_len=10, got 10"),
        (lambda: jd.decode_step(micro, token, cache, -1, MICRO), "0 ≤ pos < max_len=10, got -1"),
        (lambda: jd.decode_step(micro, token, cache, 2.5, MICRO), "pos must be an integer position"),
        (lambda: jd.decode_step(micro, tokens, cache, 6, MICRO), r"token must be \[B\] = \[3\]"),
        (lambda: jd.decode_step(micro, token[:1], cache, 6, MICRO), r"token must be \[B\] = \[3\]"),
        (lambda: jd.decode_step(micro, token * 0 - 1, cache, 6, MICRO), r"token ids must lie in \[0, V=128\)"),
        (
            lambda: jd.decode_step(micro, token, jd.init_cache(MQA, B, 6), 4, MICRO),
            r"cache arrays must be \[L, B, K, max_len, H\]",
        ),
        (lambda: jd.decode_step(micro, token, {"k": cache["k"]}, 4, MICRO), "cache must be the dict"),
        (lambda: jd.generate(micro, tokens, MICRO, 0), "steps must be an integer ≥ 1, got 0"),
        (
            lambda: jd.generate(jd.serving_params(micro, MICRO), tokens, MICRO, 2, use_cache=False),
            "needs tinymodel parameters",
        ),
        (lambda: jd.decode_roofline(MICRO, 0, 8, FAKE), "B must be a positive number"),
        (lambda: jd.decode_roofline(MICRO, 1, 8, FAKE, form="max"), "form must be one of upper, book, lower"),
        (lambda: jd.decode_roofline(MICRO, 1, 8, FAKE, read_bytes_per_s=0), "read_bytes_per_s must be a positive"),
        (lambda: jd.measure_decode(MICRO, batches=(4, 0), calibration=FAKE), r"B \(batch\) must be an integer ≥ 1"),
        (lambda: jd.prefill_vs_decode(MICRO, B=1, T=0), r"T \(prompt\) must be an integer ≥ 1"),
        (
            lambda: jd.measure_decode(MICRO, calibration=dataclasses.replace(FAKE, dtype="bfloat16")),
            "pass a float32 calibration",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(ValueError, match="dense GQA"):
        jd.init_cache(tr.get_model("book-ch7-moe"), 1, 4)
