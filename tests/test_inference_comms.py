"""Issue 17 item 4: the embedding as a gather, prefill's communication term, GPU collectives with NCCL's latency,
GPU groups past one node — each term against a hand-computed small case, and the bad inputs."""

import pytest
from pytest import approx
from scalebook_utils.errors import UnknownNameError

from scalebook_utils import gpu_collectives as gc
from scalebook_utils import gpus
from scalebook_utils import inference as I
from scalebook_utils import inference_comms as ic

# LLaMA 3-8B (HF): P = 8,030,261,248 of which the untied input table V·D = 128,256 · 4096 = 525,336,576
P8, VD8, D8 = 8_030_261_248, 128_256 * 4096, 4096
H100_W, H100_NVLINK, H100_C = 3.35e12, 4.5e11, 9.89e14


# --- the embedding is a gather ----------------------------------------------------------------------------


def test_untied_table_is_gathered_not_streamed_or_multiplied():
    m = I.served_model("llama3-8b")
    assert m.params == P8 and m.gather_params == VD8
    for B in (1, 64):
        d = I.decode_step("llama3-8b", B, 1024, "h100", 1, "bf16")
        book = I.decode_step("llama3-8b", B, 1024, "h100", 1, "bf16", conventions="book")
        # reads the B tokens' rows of the table, not all V·D of it
        assert d.t_hbm_weights == approx((P8 - VD8 + B * D8) * 2 / H100_W)
        assert book.t_hbm_weights == approx(P8 * 2 / H100_W)
        # no 2·V·D FLOPs per token for the lookup (the unembedding's 2·V·D stays)
        assert d.t_math == approx(2 * B * (P8 - VD8) / H100_C)
        assert book.t_math == approx(2 * B * P8 / H100_C)
    assert d.memory_bytes == book.memory_bytes  # the table is still stored in HBM


def test_tied_table_is_read_by_the_unembedding_anyway():
    m = I.served_model("gemma2-9b")  # tied, no learned positions: nothing is only gathered
    assert m.gather_params == 0
    a = I.decode_step("gemma2-9b", 8, 1024, "h100", 1, "bf16")
    b = I.decode_step("gemma2-9b", 8, 1024, "h100", 1, "bf16", conventions="book")
    assert (a.t_hbm_weights, a.t_math) == (b.t_hbm_weights, b.t_math)
    assert I.served_model("gpt3-175b").gather_params == 2048 * 12_288  # tied, but learned positions are a lookup


def test_prefill_flops_without_the_lookup_and_with_causal_attention():
    # T = 1: 2·(P − V·D) + causal attention 4·N·H·L · T²/2 = 4·32·128·32 / 2 = 262,144
    assert I.prefill_time("llama3-8b", 1, "h100").flops == 2 * (P8 - VD8) + 262_144
    assert I.prefill_time("llama3-8b", 1, "h100", conventions="book").flops == 2 * P8
    assert I.prefill_time("llama3-8b", 1, "h100", include_attention=False).flops == 2 * (P8 - VD8)
    # a bare parameter count (the book's P = 70e9) is all matmul weights
    assert I.served_model("llama3-70b", params=70e9).gather_params == 0


# --- NCCL's latency ---------------------------------------------------------------------------------------


def test_nccl_latency_hand_values():
    # base 6.6 µs + steps × 0.6 µs over NVLink; across nodes in-node steps cost max(0.6, 1.0) and net steps 2.7
    assert gc.nccl_latency("all_reduce", 8) == approx(6.6e-6 + 14 * 0.6e-6)  # 15.0 µs
    assert gc.nccl_latency("all_gather", 8) == approx(6.6e-6 + 7 * 0.6e-6)  # 10.8 µs
    assert gc.nccl_latency("reduce_scatter", 4) == approx(6.6e-6 + 3 * 0.6e-6)
    assert gc.nccl_latency("all_reduce", 16) == approx(6.6e-6 + 26 * 1.0e-6 + 4 * 2.7e-6)  # 43.4 µs
    assert gc.nccl_latency("all_gather", 16) == approx(6.6e-6 + 14 * 1.0e-6 + 1 * 2.7e-6)
    assert gc.nccl_latency("psum", 1) == 0.0
    assert gpus.nccl_latency is gc.nccl_latency


def test_collective_with_latency_adds_alpha_to_the_book_bandwidth_time():
    plain = gc.collective("all_reduce", 16384, 8, "h100")
    lat = gc.collective("all_reduce", 16384, 8, "h100", latency=True)
    assert plain.latency_s == 0 and plain.seconds == approx(2 * 16384 * 7 / (8 * H100_NVLINK))
    assert lat.seconds == approx(plain.seconds + 15.0e-6) and lat.latency_s == approx(15.0e-6)
    assert "NCCL latency 15 µs" in lat.note


def test_nccl_latency_bad_input():
    with pytest.raises(ValueError, match="not AllToAll"):
        gc.nccl_latency("all_to_all", 8)
    with pytest.raises(ValueError, match="n_gpus must be a positive integer"):
        gc.nccl_latency("all_reduce", 0)
    with pytest.raises(ValueError, match="gpus_per_node must be a positive integer"):
        gc.nccl_latency("all_reduce", 8, 0)
    with pytest.raises(ValueError, match="unknown collective"):
        gc.nccl_latency("broadcast", 8)


# --- GPU decode: NCCL AllReduces, serial ------------------------------------------------------------------


def test_gpu_decode_comm_is_two_allreduces_per_layer_after_the_matmuls():
    # LLaMA 3-70B, B = 1 on 8 H100: 2·80 AllReduces of 1·8192·2 B, each 15 µs + 2·16384·7/(8·450e9)
    d = I.decode_step("llama3-70b", 1, 2048, "h100", 8, "bf16")
    per = 15.0e-6 + 2 * 16384 * 7 / (8 * H100_NVLINK)
    assert d.t_ici == approx(160 * per) and d.t_ici_latency == approx(160 * 15.0e-6)
    assert not d.overlap_comms
    core = max(d.t_hbm_kv, d.t_math_attention) + max(d.t_math, d.t_hbm_weights)
    assert d.step_time == approx(core + d.t_ici)
    # the book's rule on a GPU: 4·80 collectives of bytes/W_nvlink, no latency, overlapped
    b = I.decode_step("llama3-70b", 1, 2048, "h100", 8, "bf16", conventions="book")
    assert b.t_ici == approx(320 * 16384 / H100_NVLINK) and b.overlap_comms and b.t_ici_latency == 0
    # overlap_comms overrides the convention
    o = I.decode_step("llama3-70b", 1, 2048, "h100", 8, "bf16", overlap_comms=True)
    assert o.step_time == approx(max(core, o.t_ici))


def test_gpu_decode_past_one_node_uses_the_fat_tree_and_net_latency():
    # 16 H100 = 2 nodes: α = 43.4 µs; bandwidth by ch. 12's rule, max(7/(8·450e9), 1/(2·400e9)) per byte
    d = I.decode_step("llama3-70b", 8, 2048, "h100", 16, "bf16")
    nbytes = 8 * 8192 * 2
    per = 43.4e-6 + 2 * nbytes * max(7 / (8 * H100_NVLINK), 1 / (2 * 4e11))
    assert d.t_ici == approx(160 * per)
    # 64 H100 = 8 nodes: the leaf (node egress, 7/(8·400e9)) is now the slowest level
    c = ic.tp_comm(8192, 80, 8, "h100", 64)
    assert c.bandwidth_s == approx(2 * nbytes * 7 / (8 * 4e11)) and c.network == "NVLink + InfiniBand (8 nodes)"
    # the book's rule also leaves the node at the inter-node bandwidth (exact=False: bytes/W per level)
    b = I.decode_step("llama3-70b", 8, 2048, "h100", 64, "bf16", conventions="book")
    assert b.t_ici == approx(320 * nbytes / 4e11)


def test_gpu_groups_that_cannot_be_costed_are_refused_with_the_reason():
    fp16 = I.Precision("fp16", 2, 2, "fp16", 2)  # V100 has no bf16 peak
    with pytest.raises(ValueError, match="v100 has no node egress figure.*n_chips ≤ 8"):
        I.decode_step("llama3-8b", 1, 128, "v100", 16, fp16)
    with pytest.raises(ValueError, match="span 2 NVLink domains of 2 GPUs"):
        I.decode_step("llama3-8b", 1, 128, "h100-pcie", 4, "bf16")
    with pytest.raises(ValueError, match="more than the largest two-tier SuperPod"):
        I.decode_step("llama3-8b", 1, 128, "h100", 4096, "bf16")
    with pytest.raises(ValueError, match="no node egress figure"):
        I.prefill_time("llama3-8b", 128, "v100", 16, fp16)


# --- prefill's communication term --------------------------------------------------------------------------


def test_gpu_prefill_adds_the_allreduces_of_the_prompt():
    # LLaMA 3-70B, T = 2048 on 8 H100: 160 × (15 µs + 2·(2048·8192·2)·7/(8·450e9))
    pf = I.prefill_time("llama3-70b", 2048, "h100", 8, "bf16")
    nbytes = 2048 * 8192 * 2
    assert pf.t_ici == approx(160 * (15.0e-6 + 2 * nbytes * 7 / (8 * H100_NVLINK)))
    assert pf.time == approx(max(pf.t_math, pf.t_hbm_weights) + pf.t_ici) and not pf.overlap_comms
    book = I.prefill_time("llama3-70b", 2048, "h100", 8, "bf16", conventions="book")
    assert book.t_ici == 0 and book.time == book.t_math
    assert I.prefill_time("llama3-70b", 2048, "h100", 1, "bf16").t_ici == 0  # one GPU: nothing to move


def test_tpu_prefill_comm_is_the_decode_rule_at_T_tokens_overlapped():
    # 16 v5e on one axis: 4·80 × max(1 µs · 8 hops, 8192·8192·2 / 9e10) = 0.477 s > 2·P·T/(16·C) at MFU 1
    pf = I.prefill_time("llama3-70b", 8192, "tpu-v5e", 16, "bf16")
    assert pf.t_ici == approx(320 * 8192 * 8192 * 2 / 9e10)
    assert pf.overlap_comms and pf.time == approx(max(pf.t_math, pf.t_hbm_weights, pf.t_ici))
    assert pf.bottleneck == "comms"  # ch. 7's prefill limit: Y = 16 > F·M_Y/α_ici ≈ 13 on one axis
    # on a 4x4 the collectives use both axes (M_Y = 2): half the time, and compute sets the prefill again
    sq = I.prefill_time("llama3-70b", 8192, "tpu-v5e", 16, "bf16", shape=(4, 4))
    assert sq.t_ici == approx(pf.t_ici / 2) and sq.bottleneck == "compute"
    # the book's ch. 8 answer (0.91 s at 40% MFU, no comms) is unchanged by the overlapped term
    assert I.prefill_time(
        "llama3-70b", 8192, "tpu-v5e", 16, "bf16", mfu=0.4, shape=(4, 4), conventions="book"
    ).time == approx(0.91, rel=0.02)


def test_speculative_verify_adds_serial_gpu_comms():
    s = I.speculative_step("llama3-70b", "llama3-8b", 4, 2048, 3, 0.8, "h100", 8, "bf16")
    v = I.decode_step("llama3-70b", 16, 2048, "h100", 8, "bf16", check_memory=False)
    plain = I.decode_step("llama3-70b", 4, 2048, "h100", 8, "bf16", check_memory=False)
    attention = max(plain.t_hbm_kv, v.t_math_attention)
    assert s.t_verify == approx(attention + max(v.t_math, v.t_hbm_weights) + v.t_ici)


# --- bad input ------------------------------------------------------------------------------------------------


def test_unknown_conventions_list_the_allowed_ones():
    with pytest.raises(UnknownNameError, match="unknown conventions 'paper'; allowed: practice, book"):
        I.decode_step("llama3-8b", 1, 128, "h100", 1, "bf16", conventions="paper")
    with pytest.raises(UnknownNameError, match="allowed: practice, book"):
        I.prefill_time("llama3-8b", 128, conventions="")
    assert I.check_conventions("Practitioner") == "practice"


def test_bad_overlap_and_gather_params():
    with pytest.raises(ValueError, match="overlap must be True, False or None"):
        I.decode_step("llama3-8b", 1, 128, "h100", 2, "bf16", overlap_comms="yes")
    with pytest.raises(ValueError, match="gather_params must be in"):
        I.ServedModel("x", 1e9, 1e9, 1e5, gather_params=-1)
    with pytest.raises(ValueError, match="gather_params must be in"):
        I.ServedModel("x", 1e9, 1e9, 1e5, gather_params=1e9)
    with pytest.raises(ValueError, match="L must be"):
        ic.tp_comm(8192, 0, 1, "h100", 8)
