"""Presets and chips people ask for (issue 17, item 5): exact parameter counts against the published totals,
the datasheet chips, and name lookup (aliases, close matches)."""

import dataclasses

import pytest
from scalebook_utils.errors import UnknownNameError, name_index, squash_name

from scalebook_utils import gpu_training, gpus, hardware
from scalebook_utils import transformer as tf

# Hugging Face's total for the checkpoint (the model page's safetensors count, = model.num_parameters()),
# each reproduced from the config.json dimensions in the preset's `source`.
HF_TOTALS = {
    "llama2-7b": (6_738_415_616, "meta-llama/Llama-2-7b-hf"),
    "llama2-70b": (68_976_648_192, "meta-llama/Llama-2-70b-hf"),
    "mistral-7b": (7_241_732_096, "mistralai/Mistral-7B-v0.1"),
    "mixtral-8x7b": (46_702_792_704, "mistralai/Mixtral-8x7B-v0.1"),
    "gemma2-9b": (9_241_705_984, "google/gemma-2-9b (tied embeddings)"),
    "gemma2-27b": (27_227_128_320, "google/gemma-2-27b (tied embeddings)"),
    "qwen2.5-72b": (72_706_203_648, "Qwen/Qwen2.5-72B (q/k/v biases)"),
    # the main model's tensors in the checkpoint headers (FP8 scale tensors and the MTP layer 61 excluded);
    # the technical report's "671B total"
    "deepseek-v3": (671_026_419_200, "deepseek-ai/DeepSeek-V3, main model"),
}


@pytest.mark.parametrize("name", list(HF_TOTALS))
def test_parameter_count_is_the_published_total(name):
    want, source = HF_TOTALS[name]
    cfg = tf.get_model(name)
    assert tf.param_count(cfg).total == want, f"{name}: published {want:,} ({source})"
    assert cfg.source  # every preset names where its dimensions come from


@pytest.mark.parametrize("name", list(HF_TOTALS) + ["gpt3-175b"])
def test_preset_sources_are_stated(name):
    src = tf.get_model(name).source
    assert ("config.json" in src) or ("paper" in src)


def test_dense_activated_equals_total_and_moe_activated_counts():
    for name in ("llama2-7b", "llama2-70b", "mistral-7b", "gemma2-9b", "gemma2-27b", "qwen2.5-72b", "gpt3-175b"):
        p = tf.param_count(name)
        assert p.activated == p.total
    # Mixtral: "12.9B active" (Mistral's announcement): 2 of 8 experts per layer
    mix = tf.param_count("mixtral-8x7b")
    assert mix.activated == mix.total - 32 * 6 * 3 * 4096 * 14_336
    assert round(mix.activated / 1e8) == 129
    # DeepSeek-V3: "37B activated" (technical report); ours, 37.55B, includes the 0.93B input embedding
    ds = tf.param_count("deepseek-v3")
    assert ds.activated - ds.embedding == pytest.approx(36.6e9, abs=0.05e9)


def test_each_feature_adds_exactly_its_parameters():
    """The features added for these presets, each against the count without it (so each can fail)."""
    qwen = tf.get_model("qwen2.5-72b")
    no_bias = dataclasses.replace(qwen, qkv_bias=False)
    assert tf.param_count(qwen).total - tf.param_count(no_bias).total == 80 * (64 + 2 * 8) * 128
    assert tf.matmul_params(qwen) == tf.matmul_params(no_bias)  # a bias is not a matmul: FLOPs unchanged
    gemma = tf.param_count("gemma2-9b")
    assert gemma.unembedding == 0 and gemma.norms == 42 * 4 * 3584 + 3584
    ds, like = tf.get_model("deepseek-v3"), tf.get_model("deepseek-v3-like")
    assert tf.param_count(ds).total - tf.param_count(like).total == 58 * 256  # e_score_correction_bias
    assert tf.kv_cache_bytes_per_token(ds) == 61 * (512 + 64) * 2  # MLA caches the latent + RoPE key
    gpt3 = tf.param_count("gpt3-175b")
    D, L = 12_288, 96
    assert gpt3.norms == 2 * (2 * L * D + D)  # LayerNorm weight + bias
    assert gpt3.embedding == (50_257 + 2048) * D  # tokens + learned positions
    assert gpt3.attention == L * (4 * D * D + 4 * D) and gpt3.mlp == L * (8 * D * D + 5 * D)


def test_features_default_off_for_every_earlier_preset():
    for name in (
        "llama3-8b",
        "llama3-70b",
        "llama3-405b",
        "llama2-13b",
        "book-ch4",
        "book-ch7",
        "book-ch7-moe",
        "deepseek-v3-like",
    ):
        cfg = tf.get_model(name)
        assert (cfg.qkv_bias, cfg.linear_bias, cfg.norm_bias, cfg.max_positions, cfg.router_bias) == (
            False,
            False,
            False,
            0,
            False,
        )


def test_deepseek_v3_mtp_module_is_the_documented_difference():
    """DeepSeek's README: 685B on Hugging Face = 671B main model + 14B multi-token-prediction (MTP) module.
    The MTP module (num_nextn_predict_layers = 1) is one more MoE decoder layer, eh_proj (2D → D), enorm, hnorm
    and a head norm, and the checkpoint stores its own copies of the embedding and head. Our preset counts the
    main model only; this recomputes the module from the same config and checks the published split."""
    cfg = tf.get_model("deepseek-v3")
    main = tf.param_count(cfg)
    per_moe_layer = (
        tf.param_count(dataclasses.replace(cfg, L=cfg.L + 1, first_dense_layers=3)).total - main.total
    )  # one more MoE layer (attention, experts, router, its norms)
    mtp = per_moe_layer + 2 * cfg.D * cfg.D + 3 * cfg.D + 2 * cfg.V * cfg.D
    assert mtp == 13_463_426_304
    assert abs(mtp - 14e9) < 0.6e9 and abs(main.total + mtp - 685e9) < 0.6e9  # the README's rounded 14B, 685B


def test_gpt3_count_matches_the_paper_to_its_rounding():
    """The GPT-3 paper gives no exact count: Table 2.1 says 175.0B, Table D.1 174,600M parameters. With GPT-2's
    conventions (50,257-token vocabulary, 2,048 learned positions, tied embeddings, biases, LayerNorms) the
    Table 2.1 dimensions give 174,604,259,328: Table D.1's figure to its 4 digits, 0.23 % under 175.0B."""
    total = tf.param_count("gpt3-175b").total
    assert total == 174_604_259_328
    assert round(total / 1e8) * 100 == 174_600  # millions, Table D.1
    assert total / 175.0e9 - 1 == pytest.approx(-0.00226, abs=1e-4)


# --- chips ----------------------------------------------------------------------------------------------------

# (bf16 dense FLOP/s, HBM bytes, HBM bytes/s, per-GPU interconnect one way, GPUs per domain) from the datasheets
DATASHEET = {
    "a100-40gb": (312e12, 40e9, 1555e9, 300e9, 8),
    "h100-pcie": (756e12, 80e9, 2.0e12, 300e9, 2),
    "mi300x": (1307.4e12, 192e9, 5.3e12, 448e9, 8),
}


@pytest.mark.parametrize("name", list(DATASHEET))
def test_datasheet_chips(name):
    flops, hbm, bw, link, node = DATASHEET[name]
    c = hardware.get_chip(name)
    assert c.kind == "gpu" and name in hardware.DATASHEET_CHIPS and name not in hardware.CHIPS
    assert (c.peak_flops("bf16"), c.hbm_bytes, c.hbm_bandwidth_bytes_per_s) == (flops, hbm, bw)
    assert (c.nvlink_bandwidth_oneway_bytes_per_s, c.gpus_per_node) == (link, node)
    assert c.peak_flops("int8") == pytest.approx(2 * flops, rel=1e-3)  # int8 = 2 × bf16 (datasheets round)
    assert "datasheet" in c.sources["peak_flops_per_s"] and "datasheet" in c.sources["hbm_bandwidth_bytes_per_s"]


@pytest.mark.parametrize("name", list(DATASHEET))
def test_every_datasheet_number_has_a_source(name):
    c = hardware.get_chip(name)
    for f in dataclasses.fields(hardware.ChipSpec):
        if f.name not in ("name", "vendor", "generation", "sources", "notes") and getattr(c, f.name) is not None:
            assert c.sources.get(f.name), f"{name}.{f.name} has no source"


def test_the_book_registry_is_unchanged_and_the_datasheet_chips_are_separate():
    assert "mi300x" not in hardware.CHIPS and "mi300x" not in hardware.chip_names("gpu")
    assert hardware.chip_names("gpu", datasheet=True) == hardware.chip_names("gpu") + list(DATASHEET)
    assert hardware.ALL_CHIPS == hardware.CHIPS | hardware.DATASHEET_CHIPS


def test_datasheet_chips_in_the_gpu_rooflines():
    assert gpus.alpha("a100-40gb") == pytest.approx(312e12 / 200e9)
    assert gpus.alpha("mi300x", across_nodes=False) == pytest.approx(1307.4e12 / 448e9)
    assert gpus.alpha("h100-pcie", across_nodes=False) == pytest.approx(756e12 / 300e9)
    with pytest.raises(ValueError, match="no node egress bandwidth is known for h100-pcie"):
        gpus.alpha("h100-pcie")
    with pytest.raises(ValueError, match="mi300x has no SM count"):
        gpus.sm_counts("mi300x")
    assert gpus.sm_counts("h100-pcie").cuda_cores == 114 * 128
    node = gpus.single_node("mi300x").node
    assert (node.switches_per_unit, node.switch_kind, node.child_bytes_per_s) == (0, "Infinity Fabric mesh", 448e9)


@pytest.mark.parametrize("chip", ["a100-40gb", "mi300x"])
def test_datasheet_chips_plan_a_gpu_cluster(chip):
    assert gpu_training.training_cluster(chip, 256).total_gpus >= 256
    best = gpu_training.plan("llama3-8b", 4e6, chip, n_gpus=64).best
    assert best.feasible and best.peak_flops_per_s == hardware.get_chip(chip).peak_flops("bf16")


def test_h100_pcie_has_no_cluster_and_says_why():
    with pytest.raises(ValueError, match="no node egress"):
        gpu_training.training_cluster("h100-pcie", 16)


# --- names --------------------------------------------------------------------------------------------------

MODEL_SPELLINGS = [
    ("Llama-3-8B", "llama3-8b"),
    ("llama3_8b", "llama3-8b"),
    ("LLAMA 3 8B", "llama3-8b"),
    ("Meta-Llama-3-70B", "llama3-70b"),
    ("meta-llama/Meta-Llama-3-8B", "llama3-8b"),
    ("meta-llama/Llama-3.1-405B", "llama3-405b"),
    ("Llama-2-7b-hf", "llama2-7b"),
    ("llama-2-70b", "llama2-70b"),
    ("Llama-2-13b-hf", "llama2-13b"),
    ("mistralai/Mistral-7B-v0.1", "mistral-7b"),
    ("Mixtral-8x7B", "mixtral-8x7b"),
    ("google/gemma-2-9b", "gemma2-9b"),
    ("Gemma-2-27B", "gemma2-27b"),
    ("Qwen/Qwen2.5-72B", "qwen2.5-72b"),
    ("qwen2_5_72b", "qwen2.5-72b"),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    ("DeepSeek-V3-Base", "deepseek-v3"),
    ("GPT-3", "gpt3-175b"),
    ("gpt3_175b", "gpt3-175b"),
    ("BOOK-CH7-MOE", "book-ch7-moe"),
]
CHIP_SPELLINGS = [
    ("h100-sxm", "h100"),
    ("H100 SXM5", "h100"),
    ("NVIDIA H100", "h100"),
    ("h100_80gb", "h100"),
    ("a100-80gb", "a100"),
    ("A100-SXM4-80GB", "a100"),
    ("A100 40GB", "a100-40gb"),
    ("a100-sxm4-40gb", "a100-40gb"),
    ("H100 PCIe", "h100-pcie"),
    ("AMD Instinct MI300X", "mi300x"),
    ("MI300X", "mi300x"),
    ("TPU v5e", "tpu-v5e"),
    ("v5e", "tpu-v5e"),
    ("tpu-v4", "tpu-v4p"),
    ("Trillium", "tpu-v6e"),
    ("TPU-v7x", "tpu7x"),
    ("GB200 NVL72", "gb200"),
]


@pytest.mark.parametrize("spelling,name", MODEL_SPELLINGS)
def test_model_aliases(spelling, name):
    assert tf.get_model(spelling) is tf.MODELS[name]
    assert tf.param_count(spelling) == tf.param_count(name)


@pytest.mark.parametrize("spelling,name", CHIP_SPELLINGS)
def test_chip_aliases(spelling, name):
    assert hardware.get_chip(spelling) is hardware.ALL_CHIPS[name]


def test_similar_names_stay_distinct():
    assert tf.get_model("llama3-8b") is not tf.get_model("llama3-70b")
    assert hardware.get_chip("a100") is not hardware.get_chip("a100-40gb")
    assert hardware.get_chip("h100") is not hardware.get_chip("h100-pcie")
    with pytest.raises(AssertionError, match="same key"):
        name_index(["a-b"], {"ab": "other"})  # a clash between two targets is caught when the index is built
    assert squash_name("meta-llama/Meta-Llama-3-8B") == squash_name("llama3-8b") == "llama38b"


@pytest.mark.parametrize(
    "lookup,bad,close",
    [
        (tf.get_model, "lama3-8b", "llama3-8b"),
        (tf.get_model, "mixtral", "mixtral-8x7b"),
        (tf.get_model, "gemma2", "gemma2-9b"),
        (hardware.get_chip, "h10", "h100"),
        (hardware.get_chip, "mi300", "mi300x"),
        (hardware.get_chip, "a100-40", "a100-40gb"),
    ],
)
def test_unknown_names_list_close_matches(lookup, bad, close):
    with pytest.raises(UnknownNameError) as info:
        lookup(bad)
    msg = str(info.value)
    assert msg.startswith(f"unknown {'model' if lookup is tf.get_model else 'chip'} {bad!r}; close matches: ")
    assert close in msg.split("close matches: ")[1].split(";")[0]
    assert "; known " in msg  # and still every known name


def test_unknown_name_without_a_close_match():
    with pytest.raises(UnknownNameError) as info:
        tf.get_model("nope")
    assert str(info.value).startswith("unknown model 'nope'; known models: llama3-8b")
    with pytest.raises(ValueError, match="unknown chip 'zzz'; known chips: tpu-v3"):
        hardware.get_chip("zzz")
