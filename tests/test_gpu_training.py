"""The GPU training planner (gpu_training): book ch. 12's rooflines over a whole training step.

Golden numbers from ch. 12 Quiz 5 Q2 (ch12.q22*, LLaMA-3 70B on 4096 H100s, a batch of 4·2^20 tokens).
"""

import pytest
from pytest import approx

from scalebook_utils import gpu_training as G
from scalebook_utils import gpus
from scalebook_utils import training as T
from scalebook_utils import training_layouts as TL
from scalebook_utils import transformer as tf

B = 4 * 2**20  # ch12.q22: "a batch of about 4M tokens"
N = 4096  # ch12.q22: 4096 H100s


def _q22(**kw):
    return G.evaluate("llama3-70b", B, T.Config(**kw), "h100", n_gpus=N)


@pytest.fixture(scope="module")
def tp_dp():
    """ch12.q22g/h: 8-way TP + 512-way pure data parallelism."""
    return _q22(X=512, Y=8, zero=0)


@pytest.fixture(scope="module")
def tp_zero3():
    """ch12.q22i/j: 8-way TP + 512-way ZeRO-3."""
    return _q22(X=512, Y=8, zero=3)


@pytest.fixture(scope="module")
def tp_pp_dp():
    """ch12.q22k–m: 8-way TP, 8-way pipelining, 64-way ZeRO-1 (16 sequences per data shard → 16 microbatches)."""
    return _q22(X=64, Y=8, Z=8, zero=1, microbatches=16)


@pytest.fixture(scope="module")
def plan4096():
    return G.plan("llama3-70b", B, "h100", n_gpus=N)  # its speed: `make bench`, planner section


# --- the cluster -----------------------------------------------------------------------------------------


def test_training_cluster_sizes():
    """Book ch. 12 "Networking": 8 GPUs are one NVLink node; 1024 a 4-SU DGX SuperPod; 4096 (ch12.q12) need
    16 SUs and a core tier above the spine (128 leaf, 128 spine, 64 core switches); the leaf is unchanged."""
    one = G.training_cluster("h100", 8)
    assert [lv.name for lv in one.levels] == ["node"] and one.total_gpus == 8
    pod = G.training_cluster("h100", 1024)
    assert pod == gpus.superpod("h100", 4) and pod.level("spine").degree == 4
    assert G.training_cluster("h100", 300).total_gpus == 512  # rounded up to whole SUs
    big = G.training_cluster("h100", 4096)
    assert big.total_gpus == 4096 and big.levels[:2] == gpus.superpod("h100", 1).levels
    top = big.levels[-1]
    assert top.degree == 16 and top.child_bytes_per_s == approx(32 * 400e9)  # each SU at full uplink: 12.8 TB/s
    assert top.switches_per_unit == 128 + 64 and big.level("leaf").degree == 32
    gb = G.training_cluster("gb200", 576)
    assert gb.gpus_per_node == 72 and gb.total_gpus == 576


@pytest.mark.parametrize("n", [0, -8, 1000.5, "1024"])
def test_training_cluster_rejects_bad_counts(n):
    with pytest.raises(ValueError, match="n_gpus"):
        G.training_cluster("h100", n)


def test_training_cluster_rejects_tpus_and_gpus_without_node_egress():
    with pytest.raises(ValueError, match="training.plan"):
        G.training_cluster("tpu-v5p", 64)
    with pytest.raises(ValueError, match="node egress"):
        G.training_cluster("v100", 8)


# --- ch12.q22: LLaMA-3 70B on 4096 H100s --------------------------------------------------------------------


def test_q22g_tp8_pure_dp_does_not_fit(tp_dp):
    """ch12.q22g/h: weights + Adam state at 10 bytes/param, ÷ 8 TP ways ≈ 87.5 GB per GPU > 80 GB (no)."""
    m = tp_dp.memory
    assert m.params + m.grads + m.optimizer == approx(8.75e10, rel=0.03)
    assert not tp_dp.feasible and "80 GB HBM" in tp_dp.reason and "per GPU" in tp_dp.reason


def test_q22j_tp8_zero3_fits_but_is_communication_bound(tp_zero3):
    """ch12.q22i/j: 4M tokens / 4096 = 1024 tokens per GPU (book: 976 with 4e6) < the ≈2500 DP/ZeRO limit, so
    ZeRO-3 is comms-bound; its weights are sharded 4096 ways and fit easily."""
    e = tp_zero3
    assert e.feasible and e.memory.total < 10e9
    assert e.tokens_per_chip == approx(1024)
    assert e.tokens_per_chip < gpus.dp_critical_batch("h100")
    assert e.bound == "DP/FSDP comms" and not e.compute_bound
    # three collectives of the 141 GB of bf16 weights over 32 nodes' leaf: 2P · 31/32 / 400 GB/s each
    P = tf.param_count("llama3-70b").total
    assert e.t_fsdp == approx(3 * 2 * P * 31 / 32 / 400e9, rel=1e-9)


def test_q22k_pipelining_gives_the_dp_reduction_8_nodes_of_egress(tp_pp_dp, tp_zero3):
    """ch12.q22k/l/m: with TP 8 × PP 8 the 64 model-parallel GPUs span 8 nodes, so the DP reduction sees
    8 × 400 GB/s = 3.2 TB/s at the leaf and its threshold drops to 990e12/3.2e12 ≈ 309 tokens per GPU < 1024:
    8-way pipelining works (compute-bound)."""
    e = tp_pp_dp
    assert e.feasible and e.compute_bound and e.t_fsdp < e.t_math
    dense = 2 * tf.param_count("llama3-70b").total
    # ZeRO-1: one AllReduce = 2 AllGathers, each dense · (D_leaf − 1)/D_leaf / W_eff
    w_eff = 2 * dense * (31 / 32) / e.t_fsdp
    assert w_eff == approx(3.2e12, rel=1e-6)
    threshold = e.peak_flops_per_s / w_eff
    assert threshold == approx(309, rel=0.03)
    assert threshold == approx(gpus.dp_critical_batch("h100", model_parallel=64), rel=1e-9)
    assert e.tokens_per_chip > threshold
    # per collective, pipelining cuts the DP cost 8× (and ZeRO-1 needs 2 collectives where ZeRO-3 needs 3)
    assert tp_zero3.t_fsdp / e.t_fsdp == approx(8 * 3 / 2, rel=1e-9)
    # activations cross nodes between stages at a GPU's NIC share (50 GB/s), forward and backward
    assert e.t_pp == approx(2 * 2 * (B / 64) * 8192 / (50e9 * 16) * (16 + 8 - 2), rel=1e-9)


def test_zero3_with_a_pipeline_regathers_weights_every_microbatch(tp_pp_dp):
    """Book ch. 12 "Pipeline Parallelism": PP is bad with ZeRO-3 (an AllGather per microbatch): 2m + 1 weight
    collectives instead of ZeRO-1's 2."""
    z3 = _q22(X=64, Y=8, Z=8, zero=3, microbatches=16)
    assert z3.t_fsdp == approx(tp_pp_dp.t_fsdp * (2 * 16 + 1) / 2, rel=1e-9)
    assert not z3.compute_bound


def test_q22_plan_over_4096_h100s(plan4096, tp_zero3, tp_pp_dp):
    """ch12.q22: the planner's best layout keeps TP in a node (≤ 8, ch12.q22f), is compute-bound, beats both
    the ZeRO-3 and the q22 pipeline layouts, and uses a pipeline with ZeRO < 3 (ch. 12 TLDR: PP with ZeRO-1)."""
    p = plan4096
    best = p.best
    assert best.feasible and best.compute_bound and best.config.Y <= 8
    assert best.config.chips == N and best.config.Z > 1 and best.config.zero < 3
    assert best.step_time < tp_pp_dp.step_time < tp_zero3.step_time
    assert p.best_of("fsdp+tp").bound == "DP/FSDP comms"


def test_q22d_training_time_on_4096_h100s():
    """ch12.q22d: 6 · 70e9 · 15e12 / (4096 · 990e12 · 0.45) ≈ 3.5e6 s ≈ 40 days."""
    t = T.training_time(70e9, 15e12, 4096, "h100", mfu=0.45)
    assert t == approx(3.5e6, rel=0.03) and 38 < t / 86400 < 42


# --- plans on other clusters --------------------------------------------------------------------------------


def _assert_sorted(p):
    keys = [TL.rank_key(e) for e in p.estimates]
    assert keys == sorted(keys)
    times = [float(f"{e.step_time:.9g}") for e in p.feasible]
    assert times == sorted(times) and p.estimates[: len(p.feasible)] == tuple(p.feasible)


def test_plan_on_1024_h100s_is_sorted_with_tp_in_a_node():
    p = G.plan("llama3-8b", B, "h100")
    assert p.n_chips == 1024 and p.chip == "h100"
    assert max(e.config.Y for e in p.estimates) == 8  # max_tp defaults to one NVLink node
    _assert_sorted(p)
    b = p.best
    assert b.mfu == approx(b.model_flops / (1024 * 989e12 * b.step_time), rel=0.01)
    assert b.mfu <= 1 and b.config.slices == 1 and b.t_dcn == 0


def test_plan_on_gb200_defaults_to_one_nvl72_su():
    """Book ch. 12 Appendix A: GB200 NVL72 nodes of 72 GPUs (TP may use all of them) and 3.6 TB/s of egress."""
    p = G.plan("llama3-70b", B, "gb200")
    assert p.n_chips == 576 and max(e.config.Y for e in p.estimates) == 72
    _assert_sorted(p)
    assert p.best.compute_bound


def test_explain_quotes_chapter_12_rules_for_gpus():
    """ch. 12 "Data Parallelism": DP/ZeRO needs > C/W_node ≈ 2475 tokens per GPU across H100 nodes; "Tensor
    Parallelism": TP stays compute-bound up to F/2200 ways in a node (LLaMA-3 8B, F = 14,336: ≈ 6.5)."""
    p = G.plan("llama3-8b", B, "h100")
    assert p.best.config.Y * p.best.config.Z <= 8  # one-node model parallelism
    text = p.explain()
    dp = gpus.dp_critical_batch("h100")
    assert dp == approx(2475, rel=0.01) and f"{dp:.0f}" in text
    assert f"{gpus.tp_max_degree(14336, 'h100'):.1f}" in text and "6.5" in text
    assert "Chapter 12" in text and "α/M_X" not in text and "per GPU" in text


def test_explain_divides_the_dp_threshold_by_the_nodes_model_parallelism_spans(plan4096):
    p = plan4096
    M = p.best.config.Y * p.best.config.Z
    assert M > 8
    assert f"{gpus.dp_critical_batch('h100', model_parallel=M):.0f}" in p.explain()


# --- MoE ----------------------------------------------------------------------------------------------------


def test_expert_parallelism_adds_alltoalls():
    """EP = gcd(X, E) ways over the data axis; the 4 AllToAlls per MoE layer move 2·k·(T_s/Y)·D·(ep−1)/ep bytes
    per GPU, over NVLink when the EP group fits in a node, else at a GPU's NIC share (ch. 12 "Expert Parallelism")."""
    cfg = tf.get_model("book-ch7-moe")
    across = G.evaluate(cfg, B, T.Config(X=256, Y=4), "h100", n_gpus=1024)  # ep = 16 → 64 GPUs, 8 nodes
    inside = G.evaluate(cfg, B, T.Config(X=2, Y=4), "h100", n_gpus=8)  # ep = 2 → 8 GPUs, one node
    assert across.t_ep > 0 and inside.t_ep > 0
    Ts = B / 256
    assert across.t_ep == approx(cfg.moe_layers * 4 * 2 * cfg.k * Ts / 4 * cfg.D * 15 / 16 / 50e9, rel=1e-9)
    Ts = B / 2
    assert inside.t_ep == approx(cfg.moe_layers * 4 * 2 * cfg.k * Ts / 4 * cfg.D * 1 / 2 / 450e9, rel=1e-9)
    dense = G.evaluate("llama3-8b", B, T.Config(X=256, Y=4), "h100", n_gpus=1024)
    assert dense.t_ep == 0
    p = G.plan("deepseek-v3-like", B, "h100", n_gpus=2048)
    assert p.best.t_ep > 0


# --- errors -------------------------------------------------------------------------------------------------


def test_errors():
    cfg = T.Config(X=128, Y=8)
    with pytest.raises(ValueError, match="h900"):
        G.plan("llama3-70b", B, "h900")
    with pytest.raises(ValueError, match="training.plan"):
        G.plan("llama3-70b", B, "tpu-v5p")
    with pytest.raises(ValueError, match="training.plan"):
        G.evaluate("llama3-70b", B, cfg, "tpu-v5p")
    with pytest.raises(ValueError, match="one fat tree; use n_gpus"):
        G.evaluate("llama3-70b", B, T.Config(X=64, Y=8, slices=2), "h100")
    with pytest.raises(ValueError, match="must equal n_gpus"):
        G.evaluate("llama3-70b", B, cfg, "h100", n_gpus=2048)
    for bad in (0, -1024, 1000.5):
        with pytest.raises(ValueError, match="n_gpus"):
            G.plan("llama3-70b", B, "h100", n_gpus=bad)
    with pytest.raises(ValueError, match="is built of"):
        G.evaluate("llama3-70b", B, cfg, "h100", cluster=gpus.superpod("b200", 4))
