"""Tests of scalebook_utils.tinymodel: the JAX model must agree with the transformer accounting (book ch. 4).

Parameter counts are exact. FLOP counts come from XLA's CPU cost model and are compared with stated
tolerances (see `tinymodel.flops_check` and `tinymodel.train_flops_with_remat` for the reasons).
Compiling a training step takes seconds on a small shared machine, so most tests use MICRO.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from scalebook_utils import tinymodel as tm  # noqa: E402
from scalebook_utils import transformer as tr  # noqa: E402

MICRO, TINY = tm.MICRO, tm.TINY


def _abstract(cfg):
    return jax.eval_shape(functools.partial(tm.init_params, cfg))


def _rand(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


# --- configs and parameter counts ------------------------------------------------------------------

VARIANTS = {
    "tiny": TINY,
    "micro": MICRO,
    "tied": dataclasses.replace(MICRO, tied_embeddings=True),
    "ungated": dataclasses.replace(MICRO, gated_mlp=False),
    "norms0": dataclasses.replace(MICRO, norms_per_layer=0, final_norm=False),
    "norms1": dataclasses.replace(MICRO, norms_per_layer=1),
    "mha": dataclasses.replace(MICRO, K=4),
    "mqa": dataclasses.replace(MICRO, K=1),
    "tiny-tied-ungated-mqa": dataclasses.replace(TINY, tied_embeddings=True, gated_mlp=False, K=1, L=3),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_component_counts_equal_transformer_param_count(name):
    cfg = VARIANTS[name]
    params = _abstract(cfg)
    want = tr.param_count(cfg).as_dict()
    want.pop("activated")
    assert tm.component_counts(params, cfg) == want
    assert tm.count_params(params) == want["total"]


def test_tiny_matches_the_book_ch6_formula():
    # book ch. 6: 3LDF + L(2DNH + 2DKH) + 2VD without norms; norms counted separately (5 vectors of D)
    c = TINY
    no_norms = 3 * c.L * c.D * c.F + c.L * (2 * c.D * c.N * c.H + 2 * c.D * c.K * c.H) + 2 * c.V * c.D
    assert no_norms == 2_215_936
    assert tm.count_params(tm.init_params(TINY)) == no_norms + (2 * c.L + 1) * c.D


def test_init_is_deterministic_and_seeded():
    a, b, c = tm.init_params(MICRO, 0), tm.init_params(MICRO, 0), tm.init_params(MICRO, 1)
    leaves = jax.tree_util.tree_leaves
    assert all(np.array_equal(x, y) for x, y in zip(leaves(a), leaves(b)))
    assert not np.array_equal(a["layers"][0]["attn"]["wq"], c["layers"][0]["attn"]["wq"])
    assert a["layers"][1]["mlp"]["w_down"].shape == (MICRO.F, MICRO.D)
    assert tm.init_params(MICRO, dtype="bfloat16")["embedding"].dtype == jnp.bfloat16


def test_unsupported_configs_raise():
    moe = dataclasses.replace(MICRO, E=4, k=1)
    with pytest.raises(ValueError, match="dense GQA"):
        tm.init_params(moe)
    with pytest.raises(ValueError, match="dense GQA"):
        tm.flops_check(tr.get_model("deepseek-v3-like"), 1, 4)
    with pytest.raises(ValueError, match="at most 2 norms"):
        tm.init_params(dataclasses.replace(MICRO, norms_per_layer=3))


def test_component_counts_rejects_params_of_another_config():
    with pytest.raises(ValueError, match="shape"):
        tm.component_counts(_abstract(MICRO), dataclasses.replace(MICRO, F=256))


# --- attention -------------------------------------------------------------------------------------

#: fp32 agreement of the attention variants on unit-normal inputs (observed ≤ 1e-6)
ATOL = 1e-5


@pytest.mark.parametrize(
    "N,K,causal,chunks",
    [
        (8, 2, True, (1, 8, 20)),  # GQA; 8 does not divide S = 20: the last chunk is padded and masked
        (8, 2, False, (3, 32)),  # 32 > S: one padded chunk
        (4, 4, True, (7,)),  # MHA
        (4, 1, False, (7,)),  # MQA
    ],
)
def test_chunked_equals_naive(N, K, causal, chunks):
    B, T, S, H = 2, 12, 20, 8
    q, k, v = _rand(0, (B, T, N, H)), _rand(1, (B, S, K, H)), _rand(2, (B, S, K, H))
    want = np.asarray(jax.jit(tm.naive_attention, static_argnums=3)(q, k, v, causal))
    for chunk in chunks:
        got = jax.jit(functools.partial(tm.chunked_attention, chunk=chunk, causal=causal))(q, k, v)
        np.testing.assert_allclose(np.asarray(got), want, atol=ATOL, rtol=ATOL)
    ref = jax.jit(tm.jax_attention, static_argnums=3)(q, k, v, causal)
    np.testing.assert_allclose(np.asarray(ref), want, atol=ATOL, rtol=ATOL)


def test_causal_mask_hides_the_future():
    q, k, v = _rand(0, (1, 6, 2, 4)), _rand(1, (1, 6, 1, 4)), _rand(2, (1, 6, 1, 4))
    out = tm.naive_attention(q, k, v, causal=True)
    v2 = v.at[:, 3:].set(100.0)  # change keys 3..5: queries 0..2 must not notice
    out2 = tm.naive_attention(q, k, v2, causal=True)
    np.testing.assert_array_equal(np.asarray(out[:, :3]), np.asarray(out2[:, :3]))
    assert not np.allclose(np.asarray(out[:, 3:]), np.asarray(out2[:, 3:]))


def test_attention_input_errors():
    q, k = _rand(0, (1, 4, 3, 8)), _rand(1, (1, 4, 2, 8))
    with pytest.raises(ValueError, match="must divide"):
        tm.naive_attention(q, k, k)
    q = _rand(0, (1, 4, 4, 8))
    for bad in (0, -1, 2.5, None):
        with pytest.raises(ValueError, match="chunk"):
            tm.chunked_attention(q, k, k, chunk=bad)
    with pytest.raises(ValueError, match="T ≤ S"):
        tm.naive_attention(_rand(0, (1, 6, 4, 8)), k, k, causal=True)


def test_flash_steps_reach_the_naive_softmax():
    S, H, chunk = 23, 16, 5
    q, k, v = (np.asarray(_rand(i, shape), np.float64) for i, shape in enumerate([(H,), (S, H), (S, H)]))
    steps = tm.flash_steps(q, k, v, chunk)
    assert len(steps) == math.ceil(S / chunk) and steps[-1].keys == (20, 23)
    assert all(b.M >= a.M for a, b in zip(steps, steps[1:]))  # the running max never decreases
    for st in steps:  # after each chunk: exactly the softmax over the keys seen so far
        stop = st.keys[1]
        s = k[:stop] @ q / math.sqrt(H)
        assert st.M == pytest.approx(s.max(), rel=1e-12)
        assert st.L == pytest.approx(np.exp(s - s.max()).sum(), rel=1e-12)
        np.testing.assert_allclose(st.output, tm.softmax_row(q, k[:stop], v[:stop]), rtol=1e-12, atol=1e-12)
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    naive = tm.naive_attention(f32(q[None, None, None]), f32(k[None, :, None]), f32(v[None, :, None]), causal=False)
    np.testing.assert_allclose(steps[-1].output, np.asarray(naive)[0, 0, 0], atol=ATOL)


# --- the model -------------------------------------------------------------------------------------


def test_forward_attention_variants_agree_and_loss_is_sane():
    params = tm.init_params(MICRO)
    tokens = tm.sample_tokens(MICRO, 2, 17)
    run = jax.jit(tm.forward, static_argnames=("cfg", "attention", "chunk", "causal"))
    naive = np.asarray(run(params, tokens, MICRO))
    assert naive.shape == (2, 17, MICRO.V)
    np.testing.assert_allclose(np.asarray(run(params, tokens, MICRO, attention="chunked", chunk=5)), naive, atol=1e-4)
    np.testing.assert_allclose(np.asarray(run(params, tokens, MICRO, attention="jax")), naive, atol=1e-4)
    # causality end to end: changing the last token changes no earlier logits
    changed = np.asarray(run(params, tokens.at[:, -1].set((tokens[:, -1] + 1) % MICRO.V), MICRO))
    np.testing.assert_allclose(changed[:, :-1], naive[:, :-1], atol=1e-6)
    assert not np.allclose(changed[:, -1], naive[:, -1], atol=1e-3)
    loss = float(jax.jit(tm.loss, static_argnums=2)(params, tokens, MICRO))
    assert math.isfinite(loss) and abs(loss - math.log(MICRO.V)) < 1.5  # near a uniform guess at init


def test_bad_tokens_and_options_raise():
    params = _abstract(MICRO)
    with pytest.raises(ValueError, match=r"\[0, V=128\)"):
        tm.forward(params, np.array([[1, 128]]), MICRO)
    with pytest.raises(ValueError, match=r"\[0, V=128\)"):
        tm.loss(params, np.array([[-1, 3]]), MICRO)
    with pytest.raises(ValueError, match="integer"):
        tm.forward(params, np.zeros((1, 4), np.float32), MICRO)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        tm.forward(params, np.zeros((4,), np.int32), MICRO)
    with pytest.raises(ValueError, match="chunk"):
        tm.forward(params, np.zeros((1, 4), np.int32), MICRO, attention="chunked")
    with pytest.raises(ValueError, match="attention must be"):
        tm.forward(params, np.zeros((1, 4), np.int32), MICRO, attention="flash")
    with pytest.raises(ValueError, match="remat must be"):
        tm.loss(params, np.zeros((1, 4), np.int32), MICRO, remat="all")


# --- FLOPs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg,B,T,kind",
    [
        (MICRO, 4, 64, "forward"),
        (MICRO, 2, 32, "train"),  # MICRO (2, 32) forward: the next test
        (TINY, 2, 32, "forward"),
        (TINY, 1, 16, "train"),
    ],
)
def test_flops_check(cfg, B, T, kind):
    c = tm.flops_check(cfg, B, T, kind)
    assert c.ok, str(c)
    assert c.fine_ok, str(c)
    assert c.ratio > 1.0  # the elementwise work is really counted
    assert c.predicted == pytest.approx(B * T * (tr.forward_flops_per_token(cfg, T) * (1 if kind == "forward" else 3)))


def test_flops_check_notices_a_wrong_formula():
    c = tm.flops_check(MICRO, 2, 32, "forward")
    assert c.ok and c.fine_ok
    no_attention = 2 * tr.matmul_params(MICRO) * 64  # "2 · params · tokens" without 4·T·N·H·L
    one_layer_less = tr.forward_flops_per_token(dataclasses.replace(MICRO, L=1), 32) * 64
    for wrong in (no_attention, one_layer_less):
        w = dataclasses.replace(c, predicted=wrong)
        assert not w.ok and not w.fine_ok


def test_remat_flops_ordering_and_prediction():
    r = {p: tm.train_flops_with_remat(MICRO, 2, 32, p, fused=(p == "big_matmuls")) for p in tm.REMAT_POLICIES}
    assert r["none"].measured < r["big_matmuls"].measured <= r["block"].measured
    for x in r.values():
        assert x.ok, str(x)
    assert 6.0 < r["none"].multiple < 7.0  # 6·params·tokens + attention + elementwise
    assert 8.0 < r["block"].multiple < 8.7  # ≈ 8 (the book); MICRO's attention adds a little
    # the recompute XLA keeps is the forward minus each block's down-projection (never read by the backward)
    extra = r["block"].measured - r["none"].measured
    fwd = tr.forward_flops_per_token(MICRO, 32) * 64
    assert extra == pytest.approx(fwd - r["block"].dropped, rel=0.05)
    # one jitted step: XLA's CPU CSE merges (some of) the recomputed attention matmuls despite prevent_cse
    attn_recompute = tr.attention_flops(MICRO, 32, B=2)
    big = r["big_matmuls"]
    assert r["none"].measured < big.fused < big.measured - 0.25 * attn_recompute
