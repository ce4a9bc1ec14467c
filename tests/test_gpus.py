"""Unit tests for scalebook_utils.gpus (book ch. 12): structure, limits and bad input."""

import math

import pytest
from pytest import approx
from scalebook_utils.errors import UnknownNameError

from scalebook_utils import gpus as G


def test_sm_counts_scale_with_sms():
    h, b = G.sm_counts("h100"), G.sm_counts("b200")
    assert h.cuda_cores == 132 * 128 and b.cuda_cores == 148 * 128
    assert h.tensor_cores == h.warp_schedulers == 4 * h.sms
    assert h.register_bytes == 132 * 256 * 1024
    assert b.tmem_bytes == 148 * 256e3 and h.tmem_bytes == 0
    assert h.onchip_bytes == h.smem_bytes + h.register_bytes


def test_vector_flops_and_clock_are_inverse():
    f = G.vector_flops_per_s("b200", clock=2.0e9, flops_per_core_per_cycle=2)
    assert G.implied_clock_hz("b200", f, 2) == approx(2.0e9)
    assert G.vector_flops_per_s("h100", G.clock_hz("h100", boost=False)) < G.vector_flops_per_s("h100")


def test_vector_add_is_memory_bound():
    """ch12.q7: z = x + y over fp32[N] moves 12 bytes per FLOP, so HBM bounds it at any N."""
    assert G.vector_add_fp32(1024) == (1024, 12 * 1024)
    N = 1024**3
    assert G.vector_add_time(N, "h100") == approx(12 * N / 3.35e12)
    assert G.vector_add_time(2 * N) == approx(2 * G.vector_add_time(N))


def test_single_node_with_another_nvlink_bandwidth():
    """ch12.q14/q18a: a node "whose GPUs have W B/s each" changes only W_gpu."""
    base, slow = G.single_node("h100"), G.single_node("h100", nvlink_bandwidth=100e9)
    assert slow.gpu_bytes_per_s == 100e9 and base.gpu_bytes_per_s == 450e9
    assert slow.total_gpus == base.total_gpus == 8
    assert G.all_to_all(1e9, 8, slow).seconds == approx(4.5 * G.all_to_all(1e9, 8, base).seconds)


def test_b200_has_no_clock_in_the_book():
    with pytest.raises(ValueError, match="no clock"):
        G.clock_hz("b200")


@pytest.mark.parametrize("regs,warps", [(256, 8), (128, 16), (32, 64), (16, 64)])
def test_resident_warps(regs, warps):
    assert G.resident_warps(regs) == warps


@pytest.mark.parametrize("bad", [0, 257, 3.5, True])
def test_resident_warps_rejects_bad_register_counts(bad):
    with pytest.raises(ValueError, match="registers_per_thread"):
        G.resident_warps(bad)


@pytest.mark.parametrize("name", ["tpu-v5p", "a6000"])
def test_non_gpus_are_rejected_by_name(name):
    with pytest.raises(UnknownNameError):
        G.sm_counts(name)
    with pytest.raises(KeyError):
        G.superpod(name)


def test_tpu_vpu_alus_only_for_tpus():
    assert G.tpu_vpu_alus("tpu-v5e") == 4096
    with pytest.raises(ValueError, match="not a TPU"):
        G.tpu_vpu_alus("h100")


def test_nvlink_generations():
    assert G.NVLINK["Hopper"].gpu_bytes_per_s == 450e9
    assert G.NVLINK["Blackwell"].gpu_bytes_per_s == 900e9
    assert G.NVLINK["Ampere"].gpu_bytes_per_s == 300e9
    assert G.nvlink_generation("gb200") is G.NVLINK["Blackwell"]
    with pytest.raises(ValueError, match="NVLink table"):
        G.nvlink_generation("v100")


def test_superpod_levels_are_consistent():
    c = G.superpod("h100", 4)
    assert [lv.name for lv in c.levels] == ["node", "leaf", "spine"]
    assert c.total_gpus == 1024 and c.gpus_per_node == 8
    for lower, upper in zip(c.levels, c.levels[1:]):
        assert upper.gpus_per_child == lower.gpus
        # full bisection: the cables into a unit carry what its children can send
        assert upper.child_bytes_per_s == lower.cable_bytes_per_s or lower.name == "node"
    assert G.superpod("h100", 1).levels[-1].name == "leaf"
    assert G.single_node("h100").total_gpus == 8


def test_bigger_pods_need_more_spine_switches():
    assert G.superpod("h100", 8).level("spine").switches_per_unit == 32
    with pytest.raises(ValueError, match="two-tier pod stops at 8 SUs"):
        G.superpod("h100", 9)
    with pytest.raises(ValueError, match="stops at 3 SUs"):
        G.superpod("gb200", 4)
    with pytest.raises(UnknownNameError, match="levels"):
        G.superpod("h100", 1).level("spine")


@pytest.mark.parametrize("bad", [0, -1, 2.5, "4"])
def test_superpod_rejects_bad_su_counts(bad):
    with pytest.raises(ValueError, match="n_sus"):
        G.superpod("h100", bad)


def test_spanned_levels():
    c = G.superpod("h100", 4)
    assert [(lv.name, d) for lv, d in c.spanned(8)] == [("node", 8)]
    assert [(lv.name, d) for lv, d in c.spanned(4)] == [("node", 4)]
    assert [(lv.name, d) for lv, d in c.spanned(512)] == [("node", 8), ("leaf", 32), ("spine", 2)]
    assert c.spanned(1) == []


@pytest.mark.parametrize("n", [0, -8, 1025, 8.0])
def test_more_gpus_than_the_cluster_or_bad_counts(n):
    with pytest.raises(ValueError):
        G.all_gather(1e6, n, "h100")


def test_fat_tree_switch_counts():
    assert G.fat_tree_switches(64) == (1,)
    assert G.fat_tree_switches(1024) == (32, 16)
    assert G.fat_tree_switches(4096, ports=64) == (128, 128, 64)
    with pytest.raises(ValueError):
        G.fat_tree_switches(0)
    with pytest.raises(ValueError):
        G.fat_tree_switches(64, ports=7)


def test_collectives_in_a_node():
    W = 450e9
    for n in (2, 4, 8):
        assert G.all_gather(1e9, n).seconds == approx(1e9 * (n - 1) / (n * W))
        assert G.reduce_scatter(1e9, n).seconds == G.all_gather(1e9, n).seconds
        assert G.all_reduce(1e9, n).seconds == approx(2 * G.all_gather(1e9, n).seconds)
        assert G.all_reduce(1e9, n, sharp=True).seconds == approx(1e9 / W)
        assert G.all_to_all(1e9, n).seconds == approx(1e9 * (n - 1) / (W * n * n))
    assert G.all_gather(1e9, 1).seconds == 0.0


def test_cross_node_collectives_are_bounded_by_the_leaf():
    ag = G.all_gather(1e9, 256)
    assert ag.bottleneck == "leaf" and ag.bandwidth == approx(32 * 400e9 / 31)
    assert G.all_gather(1e9, 1024).bandwidth == approx(ag.bandwidth)  # full bisection: flat across the spine
    assert G.all_gather(1e9, 256, exact=False).bandwidth == approx(400e9)
    assert G.all_reduce(1e9, 1024, sharp=True).bandwidth == approx(400e9)


def test_all_to_all_across_nodes_is_much_slower():
    inside = G.all_to_all(1e9, 8).seconds
    across = G.all_to_all(1e9, 16).seconds
    assert across == approx(1e9 * 1 / (4 * 400e9)) and across > 2 * inside


def test_ragged_all_to_all():
    assert G.all_to_all(1e9, 8, k=4).seconds == approx(0.5 * 1e9 / (450e9 * 8))
    assert G.all_to_all(1e9, 8, k=16).seconds == approx(1e9 / (450e9 * 8))
    assert G.ragged_all_to_all_factor(8, 1) == approx((1 / 8) * 7 / 8)
    assert G.ragged_all_to_all_factor(8, 1000) == approx(7 / 8)


def test_sharp_only_for_all_reduce_and_unknown_kinds():
    with pytest.raises(ValueError, match="SHARP"):
        G.collective("all_gather", 1e6, 8, sharp=True)
    with pytest.raises(ValueError, match="known kinds"):
        G.collective("broadcast", 1e6, 8)
    assert G.collective("AllReduce", 1e6, 8).kind == "all_reduce"
    with pytest.raises(ValueError, match="n_bytes"):
        G.collective("all_gather", -1, 8)


def test_sharded_collectives_shrink_with_the_inner_axis():
    su = G.superpod("h100", 1)
    base = G.sharded_all_gather(1e9, 1, 256, su)
    assert G.sharded_all_gather(1e9, 8, 256, su) == approx(base)  # Y inside a node: leaf unchanged
    assert G.sharded_all_gather(1e9, 16, 256, su) == approx(base / 2)  # Y spans 2 nodes: half
    t, where = G.sharp_sharded_all_reduce(1e9, 4, 8, G.single_node("h100"))
    assert where == "node" and t == approx(1e9 / (4 * 450e9))
    assert G.sharded_all_reduce_simple(1e9, 16, "h100") == approx(1e9 / 400e9 * 8 / 16)
    with pytest.raises(ValueError, match="Y"):
        G.sharded_all_gather(1e9, 0, 256, su)
    with pytest.raises(ValueError, match="more GPUs"):
        G.sharp_sharded_all_reduce(1e9, 2048, 1024)


def test_switch_traffic():
    t = G.su_all_gather_traffic(1e9, 32, 8)
    assert t["node"].egress_bytes == 8e9 and t["leaf"].egress_bytes == 31e9
    s = G.sharp_node_traffic(1e9, 8, 450e9)
    assert s.ingress_bytes == s.egress_bytes == 8e9 and s.seconds == approx(1e9 / 450e9)
    with pytest.raises(ValueError):
        G.sharp_node_traffic(1e9, 0, 450e9)


def test_bus_bandwidth_definition():
    assert G.bus_bandwidth(1e9, 8, 1e9 * 2 * 7 / 8 / 370e9) == approx(370e9)


def test_roofline_thresholds_agree_with_mlp_roofline():
    a = G.dp_critical_batch("h100")
    X = 64
    at = G.mlp_roofline("dp", a * X, 8192, 28672, X)
    assert at.t_math == approx(at.t_comms)
    assert G.mlp_roofline("dp", 2 * a * X, 8192, 28672, X).bound == "compute-bound"
    Y = G.tp_max_degree(28672, "h100")
    tp = G.mlp_roofline("tp", 4096, 8192, 28672, Y, across_nodes=False)
    assert tp.t_math == approx(tp.t_comms)
    F = G.ep_min_F(64, 8)
    ep = G.mlp_roofline("ep", 4096, 8192, F, 64, k=8)
    assert ep.t_math == approx(ep.t_comms)
    assert G.mlp_roofline("ep", 4096, 8192, 1000, 8, k=8).t_comms == 0.0
    assert G.ep_min_F(8, 2) == 0.0
    with pytest.raises(ValueError, match="strategy"):
        G.mlp_roofline("pp", 1, 1, 1, 1)


def test_dp_threshold_modifiers():
    a = G.dp_critical_batch("h100")
    assert G.dp_critical_batch("h100", sharp=True) == approx(a / 2)
    assert G.dp_critical_batch("h100", E=8, k=2) == approx(4 * a)
    assert G.dp_critical_batch("h100", n_nodes=1) == 0.0
    assert G.dp_critical_batch("h100", model_parallel=8) == approx(a)
    assert G.dp_critical_batch("h100", model_parallel=32) == approx(a / 4)
    assert G.dp_critical_batch("h100", egress=300e9) == approx(9.89e14 / 300e9)
    with pytest.raises(ValueError):
        G.dp_critical_batch("h100", n_nodes=0)
    with pytest.raises(ValueError):
        G.dp_critical_batch("h100", E=0)


def test_pipeline_comms():
    t = G.pipeline_comms_time(1e6, 8192, 8, 16, 400e9)
    assert t == approx(2 * 1e6 * 8192 / (400e9 * 8) * 22)
    assert G.pipeline_comms_time(1e6, 8192, 1, 2, 400e9) == approx(2 * 1e6 * 8192 / 400e9)
    with pytest.raises(ValueError):
        G.pipeline_comms_time(1e6, 8192, 0, 2, 400e9)


def test_default_clusters_fit_two_tiers():
    assert G.max_sus("h100") == 8 and G.max_sus("gb200") == 3
    assert G.as_cluster("h100").total_gpus == 1024
    assert G.as_cluster("gb200").total_gpus == 3 * 576
    assert G.all_gather(1e9, 144, "gb200").bottleneck == "node"  # 3.6 TB/s per rack: NVLink is the limit


def test_gb200_nvl72_node():
    c = G.superpod("gb200", 1)
    assert c.gpus_per_node == 72 and c.node_bytes_per_s == 3.6e12
    assert G.node_switch_bytes_per_s("gb200") == 18 * 64 * 50e9
    assert math.isclose(G.dp_critical_batch("gb200"), 2.25e15 / 3.6e12)


def test_v100_tensor_cores_and_fp16():
    v = G.sm_counts("v100")
    assert v.tensor_cores == 640 == 8 * v.sms and v.warp_schedulers == 4 * v.sms
    assert G.matmul_dtype("v100") == "fp16" and G.matmul_dtype("h100") == "bf16"
    per_tc, per_sub = (
        G.tensor_core_flops_per_cycle("v100"),
        G.tensor_core_flops_per_cycle("v100", per_subpartition=True),
    )
    assert per_sub == approx(2 * per_tc) and per_tc == approx(125e12 / (640 * 1.38e9))
    # from Ampere on one Tensor Core per subpartition: the two counts agree
    assert G.tensor_core_flops_per_cycle("h100") == G.tensor_core_flops_per_cycle("h100", per_subpartition=True)


def test_cluster_chips_are_gpus_with_nvlink_nodes_and_node_egress():
    """The chapter's cluster GPUs (the ch. 12 widgets' dropdowns): each has an NVLink node and a scale-out egress."""
    from scalebook_utils import gpu_network, hardware

    assert G.CLUSTER_CHIPS is gpu_network.CLUSTER_CHIPS == ("h100", "h200", "b200", "gb200")
    for name in G.CLUSTER_CHIPS:
        spec = hardware.get_chip(name)
        assert spec.kind == "gpu" and spec.node_egress_bytes_per_s and spec.gpus_per_node in (8, 72)
        assert G.superpod(name, 1).total_gpus > 0
