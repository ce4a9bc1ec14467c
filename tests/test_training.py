"""training: the chapter-5 cost model (thresholds, per-layer costs, collectives, memory) and the planner."""

import math

import pytest
from pytest import approx

from scalebook_utils import training as T
from scalebook_utils import training_layouts as TL
from scalebook_utils import transformer as tf

# --- thresholds (book ch. 5) ------------------------------------------------------------------------


def test_alpha_and_dcn_ratio_on_v5p():
    assert T.ici_bandwidth("tpu-v5p") == approx(1.8e11)
    assert T.alpha("tpu-v5p") == approx(2550)
    assert T.alpha_dcn("tpu-v5p") == approx(73_440)


def test_thresholds_scale_with_axes_and_F():
    assert T.dp_min_batch_per_chip("v5p", M_X=3) == approx(850)
    assert T.tp_max_degree(2 * 30_000, "v5p") == approx(2 * T.tp_max_degree(30_000, "v5p"))
    assert T.tp_max_degree(30_000, "v5p", M_Y=2) == approx(2 * 30_000 / 2550)
    assert T.tp_min_F(8, "v5p") == approx(8 * 2550)
    # the mixed threshold is α²/(M_X M_Y F): halving F doubles it
    assert T.mixed_min_batch_per_chip(16_384, "v5p") == approx(2 * T.mixed_min_batch_per_chip(32_768, "v5p"))


def test_x_opt_balances_fsdp_and_tp_comms():
    """At X_opt the forward FSDP and TP communication times of the mixed scheme are equal (book ch. 5)."""
    B, F, N, D = 48_000, 32_768, 64, 8192
    X = T.optimal_fsdp_degree(B, F, N, M_X=2, M_Y=1)
    Y = N / X
    t_fsdp = 4 * D * F / (Y * 2)  # ∝ 4DF/(Y W M_X)
    t_tp = 4 * B * D / (X * 1)  # ∝ 4BD/(X W M_Y)
    assert t_fsdp == approx(t_tp)


def test_mixed_threshold_is_where_the_optimal_split_becomes_compute_bound():
    F, N = 30_000, 64
    b = T.mixed_min_batch_per_chip(F, "v5p", M_X=2, M_Y=1)
    assert T.comms_ratio("fsdp+tp", b, F, N, "v5p", n_axes=3) == approx(1)
    assert T.comms_ratio("fsdp+tp", 2 * b, F, N, "v5p", n_axes=3) > 1
    assert T.comms_ratio("fsdp", 850, F, N, "v5p", n_axes=3) == approx(1)
    assert T.comms_ratio("tp", 1, F, N, "v5p") == T.comms_ratio("tp", 1e6, F, N, "v5p")  # flat in B


def test_round_pow2_matches_the_books_choices():
    assert T.round_pow2(13.69) == 16 and T.round_pow2(1333) == 1024 and T.round_pow2(1618) == 2048


def test_training_time_and_bad_mfu():
    assert T.training_time(70e9, 15e12, 8960, "v5p", mfu=0.4) == approx(6 * 70e9 * 15e12 / (8960 * 4.59e14 * 0.4))
    with pytest.raises(ValueError, match="fraction"):
        T.training_time(70e9, 15e12, 8960, "v5p", mfu=40)
    with pytest.raises(ValueError, match="positive"):
        T.training_time(70e9, 15e12, 0, "v5p")


def test_gpu_is_refused_with_a_pointer():
    with pytest.raises(ValueError, match="chapter 12"):
        T.alpha("h100")


# --- per-layer costs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy,X,Y", [("dp", 8, 1), ("fsdp", 8, 1), ("tp", 1, 8), ("fsdp+tp", 4, 2)])
def test_layer_flops_divide_over_all_chips(strategy, X, Y):
    c = T.layer_costs(strategy, B=4096, D=1024, F=4096, N=8, X=X, Y=Y, chip="v5p", phase="step")
    assert c.flops_per_chip == approx(12 * 4096 * 1024 * 4096 / 8)


def test_fsdp_forward_threshold_is_alpha():
    D, F, N = 8192, 32_768, 64
    at = T.layer_costs("fsdp", B=2550 * N, D=D, F=F, N=N, chip="v5p")
    assert at.ratio == approx(1)
    assert T.layer_costs("fsdp", B=2000 * N, D=D, F=F, N=N, chip="v5p").bound == "communication-bound"


def test_tp_forward_threshold_is_F_over_alpha():
    F = 30_000
    assert T.layer_costs("tp", B=1e6, D=8192, F=F, N=8, chip="v5p").bound == "compute-bound"
    assert T.layer_costs("tp", B=1e6, D=8192, F=F, N=16, chip="v5p").bound == "communication-bound"


def test_dp_has_no_forward_communication_and_fsdp_costs_more_per_step():
    dp = T.layer_costs("dp", B=1e5, D=1024, F=4096, N=8, chip="v5p", phase="forward")
    assert dp.t_comms == 0 and dp.ratio == math.inf
    dps = T.layer_costs("dp", B=1e5, D=1024, F=4096, N=8, chip="v5p", phase="step")
    fs = T.layer_costs("fsdp", B=1e5, D=1024, F=4096, N=8, chip="v5p", phase="step")
    assert fs.t_comms == approx(1.5 * dps.t_comms)  # 12DF vs 8DF in the chapter's table


def test_layer_costs_reject_bad_degrees():
    with pytest.raises(ValueError, match="must equal the chip count"):
        T.layer_costs("fsdp+tp", B=1024, D=64, F=256, N=8, X=4, Y=4)
    with pytest.raises(ValueError, match="unknown strategy"):
        T.layer_costs("zero", B=1024, D=64, F=256, N=8)
    with pytest.raises(ValueError, match="phase"):
        T.layer_costs("dp", B=1024, D=64, F=256, N=8, phase="both")
    with pytest.raises(ValueError, match="positive"):
        T.layer_costs("dp", B=0, D=64, F=256, N=8)


# --- collectives ---------------------------------------------------------------------------------------


def test_step_collectives_kinds_per_strategy():
    kinds = {
        s: sorted({c.kind for c in T.step_collectives(s, B=64, D=16, F=32, X=x, Y=y)})
        for s, x, y in [("dp", 8, 1), ("fsdp", 8, 1), ("tp", 1, 8), ("fsdp+tp", 2, 4)]
    }
    assert kinds["dp"] == ["all-reduce"]
    assert kinds["fsdp"] == kinds["tp"] == kinds["fsdp+tp"] == ["all-gather", "reduce-scatter"]


def test_step_collectives_shapes_and_bytes():
    cs = T.step_collectives("fsdp+tp", B=64, D=16, F=32, X=2, Y=4, bytes_per_element=4)
    w = [c for c in cs if c.axis == "X" and c.kind == "all-gather" and c.phase == "forward"]
    assert sorted(c.shape for c in w) == [(8, 16), (16, 8)]  # [D, F/Y] and [F/Y, D]
    assert all(c.nbytes == 16 * 8 * 4 for c in w)
    a = [c for c in cs if c.axis == "Y"]
    assert len(a) == 4 and all(c.shape == (32, 16) for c in a)  # [B/X, D]
    assert len(T.step_collectives("fsdp", B=64, D=16, F=32, X=8, regather=False)) == 4


def test_bubble_fraction():
    assert T.bubble_fraction(1, 4) == 0
    assert T.bubble_fraction(4, 4) == approx(3 / 7)
    assert T.bubble_fraction(8, 1000) < 0.01
    with pytest.raises(ValueError, match="stages"):
        T.bubble_fraction(0, 4)


# --- memory ---------------------------------------------------------------------------------------------


def test_zero_stages_shard_what_they_should():
    P = 1e9
    dp = T.training_memory(P, zero=0, X=8)
    z1 = T.training_memory(P, zero=1, X=8)
    z3 = T.training_memory(P, zero=3, X=8)
    assert dp.total == approx(10 * P)
    assert z1.optimizer == approx(dp.optimizer / 8) and z1.params == dp.params
    assert z3.total == approx(10 * P / 8)
    with pytest.raises(ValueError, match="zero"):
        T.training_memory(P, zero=4)


def test_checkpoint_bytes_ch6_example():
    # book ch. 6: 2 checkpoints per layer, 4M tokens, D = 8192, L = 80 → 2·D·B·2·L ≈ 1.05e13
    assert T.checkpoint_bytes(8192, 80, 4e6, 2) == approx(2 * 8192 * 4e6 * 2 * 80)


# --- the planner ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plan70():
    return T.plan("llama3-70b", 4 * 2**20, "tpu-v5p")


def test_planner_reaches_the_chapters_recommendation_for_llama3_70b(plan70):
    """Book ch. 6: on a full v5p pod with a 4M batch, pure FSDP is comm-bound; FSDP + TP with TP = 4 is the answer."""
    best = plan70.best
    assert best.config.Y == 4 and best.config.X * best.config.Y == 8960 and best.config.zero == 3
    assert best.bound == "compute"
    fsdp = plan70.best_of("fsdp")
    assert fsdp.config.X == 8960 and fsdp.bound == "DP/FSDP comms" and fsdp.step_time > best.step_time
    text = plan70.explain()
    assert "FSDP 2240 × TP 4" in text and "113" in text and "850" in text


def test_planner_without_sequence_sharding_rules_out_pure_fsdp():
    p = T.plan("llama3-70b", 4 * 2**20, "tpu-v5p", allow_sequence_sharding=False)
    assert p.best_of("fsdp") is None
    reasons = [e.reason for e in p.estimates if e.config.Y == 1 and e.config.Z == 1]
    assert any("1024 sequences" in r for r in reasons)


def test_planner_reports_memory_infeasibility_with_its_reason():
    p = T.plan("llama3-405b", 4 * 2**20, "tpu-v5p", n_chips=64)
    with pytest.raises(ValueError, match="no configuration of llama3-405b fits 64"):
        _ = p.best
    assert all("HBM" in e.reason or "TP degree" in e.reason or "stages" in e.reason for e in p.estimates)


def test_estimates_are_sorted_and_mfu_is_consistent(plan70):
    times = [float(f"{e.step_time:.9g}") for e in plan70.feasible]  # ties are broken by ZeRO stage, headroom
    assert times == sorted(times)
    e = plan70.best
    assert e.mfu == approx(e.model_flops / (8960 * 4.59e14 * e.step_time))
    assert 0 < e.mfu <= 1


def test_dcn_term_appears_across_slices():
    one = T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=2240, Y=4), "tpu-v5p")
    four = T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=2240, Y=4, slices=4), "tpu-v5p")
    assert one.t_dcn == 0 and four.t_dcn == approx(2 * 2 * tf.param_count("llama3-70b").total / (8960 * 6.25e9))
    assert four.t_math == approx(one.t_math / 4)


def test_pipeline_bubble_slows_compute():
    flat = T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=1120, Y=4, Z=2, microbatches=1), "tpu-v5p")
    many = T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=1120, Y=4, Z=2, microbatches=64), "tpu-v5p")
    assert flat.bubble == approx(0.5) and many.t_math < flat.t_math


def test_evaluate_infeasible_degrees_give_reasons():
    e = T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=280, Y=32 * 1, Z=1), "tpu-v5p")
    assert e.feasible  # 32 divides N = 64 and F = 28672
    e = T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=1, Y=7, Z=1280), "tpu-v5p")
    assert not e.feasible and "TP degree 7" in e.reason and "divide L=80" in e.reason
    with pytest.raises(ValueError, match="must equal the chip count 8960"):
        T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=2048, Y=4), "tpu-v5p", n_chips=8960)
    with pytest.raises(ValueError, match="X must be an integer ≥ 1, got 0"):
        T.evaluate("llama3-70b", 4 * 2**20, T.Config(X=0), "tpu-v5p")
    with pytest.raises(KeyError, match="unknown model"):
        T.plan("llama-7", 1e6)


def test_moe_experts_are_not_gathered():
    cfg = tf.get_model("deepseek-v3-like")
    e = T.evaluate(cfg, 16 * 2**20, T.Config(X=256, Y=8), "tpu-v5p")
    assert e.t_ep > 0
    dense_only = (tf.param_count(cfg).total - TL.routed_expert_params(cfg)) / 8
    assert e.t_fsdp >= 3 * 2 * dense_only / (T.ici_bandwidth("v5p") * 2) - 1e-12


def test_plan_is_fast_enough_for_a_widget(plan70):
    assert len(plan70.estimates) > 500  # the whole enumeration; its time is measured by `make bench`


def test_fsdp_tp_degrees_follow_the_books_recipes():
    assert T.fsdp_tp_degrees(48_000, 32_768, 64) == (16, 4)  # ch. 5 E6
    assert T.fsdp_tp_degrees(4 * 2**20, 28_672, 8960) == (2048, 4)  # ch. 6 iq9
    assert T.fsdp_tp_degrees(1e6, 30_000, 8960) == (1024, 8)  # ch. 5 E9, 1M batch


def test_min_chips_for_memory():
    assert T.min_chips_for_memory(11.2e12, "v5p") == 117  # ch. 6 iq5
    assert T.min_chips_for_memory(96e9, "v5p") == 1
    with pytest.raises(ValueError, match="positive"):
        T.min_chips_for_memory(0)


def test_families(plan70):
    assert plan70.best.family == "fsdp+tp"
    assert {e.family for e in plan70.feasible} >= {"fsdp", "fsdp+tp", "dp+tp", "pp"}
    assert all(
        e.family == "dp+tp"
        for e in plan70.feasible
        if e.config.zero < 3 and e.config.Y > 1 and e.config.Z == 1 and e.config.X > 1
    )


def test_mixed_ratio_is_clamped_to_pure_fsdp_at_huge_batches():
    # X_opt > N: no TP is left, so the curve is pure FSDP over all 3 axes, (B/N)·3/α
    b = 1e6
    assert T.optimal_fsdp_degree(b * 64, 30_000, 64) > 64
    assert T.comms_ratio("fsdp+tp", b, 30_000, 64, "v5p", n_axes=3) == approx(b * 3 / 2550)


def test_mixed_ratio_never_falls_below_pure_fsdp_over_all_axes():
    # review ch5 [16]: with M_X = 2, M_Y = 1 the real-valued mix falls below FSDP over 3 axes from
    # B/N = F·M_X·M_Y/3² (≈ 6,667 for F = 30k) on; Y = 1 is one of FSDP+TP's splits, so its best ratio is FSDP's there
    F, N = 30_000, 64
    cross = F * 2 * 1 / 3**2
    for b in (100, 1000, 0.9 * cross, 1.1 * cross, 12_000, 1e5):
        mixed, fsdp = (T.comms_ratio(s, b, F, N, "v5p", n_axes=3) for s in ("fsdp+tp", "fsdp"))
        assert mixed >= fsdp
        assert (mixed == approx(fsdp)) == (b > cross)
    assert T.comms_ratio("fsdp+tp", 0.9 * cross, F, N, "v5p", n_axes=3) == approx((0.9 * cross * F * 2) ** 0.5 / 2550)


def test_cached_plan_defaults_to_the_pod_and_is_cached():
    p = T.cached_plan("llama3-8b", "tpu-v5e", None, 1, 2**20, 2048, True)
    assert p.n_chips == 256  # None: the v5e pod
    assert T.cached_plan("llama3-8b", "v5e", 256, 1, float(2**20), 2048, True) is p  # same inputs, same Plan
    assert T.cached_plan("llama3-8b", "tpu-v5e", 0, 1, 2**20, 2048, True) is p  # 0 also means the pod
    fresh = T.plan(tf.get_model("llama3-8b"), 2**20, "tpu-v5e", n_chips=256, seq_len=2048)
    assert p.best.config == fresh.best.config and p.best.step_time == fresh.best.step_time
    assert T.cached_plan("llama3-8b", "tpu-v5e", 128, 1, 2**20, 2048, True) is not p
