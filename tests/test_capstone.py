"""Chapter 11 capstone (pure core): `capstone.plan_model` against the book's worked numbers, reasons, budget
verdicts, infeasible sides, a custom model, bad input and the report text."""

import math

import pytest
from pytest import approx
from scalebook_utils.hardware import get_chip

from scalebook_utils import capstone as C
from scalebook_utils import gpu_training as GT
from scalebook_utils import training as T
from scalebook_utils import transformer as tf

DAY = 86_400


@pytest.fixture(scope="module")
def default():
    return C.plan_model()


# --- the book's numbers -------------------------------------------------------------------------------------------


def test_ch6_llama3_70b_on_a_v5p_pod(default):
    # book ch. 6: LLaMA 3-70B, the full v5p pod (8960 chips), a 4·2^20-token batch → FSDP 2240 × TP 4 (our
    # chapter-6 notebook reports the same), compute-bound
    t = default.training
    assert (t.chip, t.n_chips, t.feasible) == ("tpu-v5p", 8960, True)
    assert t.layout == "FSDP 2240 × TP 4"
    assert t.bound == "compute-bound" and t.roofline_mfu == approx(1.0)
    assert t.memory_per_chip < t.hbm_per_chip == 96e9


def test_ch6_iq4_days_to_train(default):
    # ch6.iq4: 6 · 70e9 · 15e12 / (8960 · 4.59e14 · 0.4) s ≈ 44 days; with the preset's 70.6e9 parameters 44.7
    t = default.training
    book = 6 * 70e9 * 15e12 / (8960 * 4.59e14 * 0.4) / DAY
    assert book == approx(44.3, abs=0.1)
    assert t.days == approx(book, rel=0.03)
    P = tf.param_count("llama3-70b").total
    assert t.seconds == approx(T.training_time(P, 15e12, 8960, "tpu-v5p", 0.4))
    assert t.mfu == 0.4  # the achieved MFU: the roofline (100%) does not cap it
    assert t.chip_hours == approx(t.seconds / 3600 * 8960)
    assert t.usd == approx(t.chip_hours * 4.2)  # v5p: $4.20 per chip-hour (ch. 8 price table)


def test_ch8_serving_llama3_70b_int8_on_v5e(default):
    # ch8.iq2c / iq5b: int8 weights + one 8k context → the smallest slice is 4x2 = 8 chips
    s = default.serving
    assert (s.chip, s.precision, s.S, s.feasible) == ("tpu-v5e", "int8", 8192, True)
    assert (s.n_chips, s.shape) == (8, (4, 2))
    assert s.B_max == 42 and s.B_crit == approx(240, rel=0.01)
    # ch8.iq3: B = 32 on that slice ≈ 17 ms/step and 235 tokens/s/chip (PROBLEMS.md accepts [227.9, 242.1])
    pt = s.at_batch(32)
    assert pt.latency == approx(17.2e-3, rel=0.02)
    assert 227.9 <= pt.tokens_per_s_per_chip <= 242.1
    assert pt.tokens_per_s_per_chip == approx(232, rel=0.01)


def test_gpu_llama3_70b_on_4096_h100():
    # ch12.q22: 4096 H100s, a ~4M-token batch → compute-bound with TP ≤ 8 (inside the NVLink node);
    # q22d: 15T tokens at 45% MFU ≈ 3.5e6 s ≈ 40 days
    t = C.plan_training("llama3-70b", "h100", C.Budget(train_chips=4096, mfu=0.45))
    assert t.feasible and t.n_chips == 4096 and t.chip == "h100"
    assert t.estimate.compute_bound and t.bound.startswith("compute-bound")
    assert t.estimate.config.Y <= 8
    assert t.seconds == approx(3.5e6, rel=0.03)
    assert t.days == approx(40, rel=0.03)
    assert t.mfu == 0.45 < t.roofline_mfu


def test_dispatch_to_the_right_planner():
    tpu = C.plan_training("llama3-70b", "tpu-v5p", C.Budget(train_chips=4096))
    assert tpu.layout == T.plan("llama3-70b", 4 * 2**20, "tpu-v5p", n_chips=4096).best.config.name
    gpu = C.plan_training("llama3-70b", "h100", C.Budget(train_chips=2048))
    assert gpu.layout == GT.plan("llama3-70b", 4 * 2**20, "h100", n_gpus=2048).best.config.name
    assert gpu.estimate.chip == "h100"


def test_default_chip_counts():
    assert C.train_chip_count("tpu-v5p") == 8960 and C.train_chip_count("tpu-v5e") == 256
    assert C.train_chip_count("h100") == 1024 and C.train_chip_count("gb200") == 576
    assert C.plan_training("llama3-8b", "gb200").n_chips == 576
    assert C.train_chip_count("h100", 4096) == 4096


# --- reasons and verdicts ---------------------------------------------------------------------------------------------


def test_training_reasons(default):
    r = default.training.reasons
    assert [x.split(":")[0] for x in r] == ["Memory", "Batch", "Bound", "Alternatives", "Time", "Money"]
    memory, batch, bound, alts, when, money = r
    # 10 bytes/param × 70.6B = 706 GB > 96 GB: at least 8 chips just for the weights and Adam
    assert "706 GB" in memory and "at least 8 chips" in memory
    # Plan.explain's rules of thumb: 468 tokens per chip against α/M_X = 850 and α²/(M_X·M_Y·F) = 113
    assert "468 tokens per chip" in batch and "850" in batch and "113" in batch and "tensor parallelism" in batch
    assert "compute-bound" in bound and "DP/FSDP comms" in bound
    assert "FSDP 8960" in alts and "1.77× slower" in alts
    assert "44.7 days at 40% MFU" in when
    assert "$40.3M" in money


def test_deadline_and_money_verdicts():
    late = C.plan_training(budget=C.Budget(max_days=30, max_usd=1e7))
    assert late.meets_deadline is False and late.meets_money is False
    text = " ".join(late.reasons)
    # 44.7 / 30 = 1.49: "need ≈ 1.5× the chips" (8960 × 1.49 = 13,344 > a pod) or 40% × 1.49 = 60% MFU
    more = math.ceil(8960 * late.days / 30)
    assert more == 13_344
    assert (
        "over the 30-day deadline: need ≈ 1.5× the chips (≈ 13,344 — more than a pod: slices over DCN) or 60% MFU"
    ) in text
    assert "over the $10M cap by 4×" in text
    ok = C.plan_training(budget=C.Budget(max_days=60, max_usd=5e7))
    assert ok.meets_deadline is True and ok.meets_money is True
    assert "within the 60-day deadline" in " ".join(ok.reasons) and "within the $50M cap" in " ".join(ok.reasons)
    free = C.plan_training(budget=C.Budget())
    assert free.meets_deadline is None and free.meets_money is None


def test_chip_without_a_price():
    t = C.plan_training("llama3-8b", "tpu-v6e", C.Budget(max_usd=1e6))
    assert get_chip("tpu-v6e").price_per_hour_usd is None
    assert t.feasible and t.usd is None and t.meets_money is None
    assert any("no hourly price" in x and "$1M cap cannot be checked" in x for x in t.reasons)


def test_days_use_the_roofline_mfu_when_it_is_lower():
    # a 256k-token batch on the pod is communication-bound: the roofline (56%) caps the 90% asked for
    t = C.plan_training(budget=C.Budget(batch_tokens=2**18, mfu=0.9))
    assert not t.estimate.compute_bound and t.roofline_mfu < 0.9
    assert t.mfu == t.roofline_mfu
    assert t.seconds == approx(T.training_time(t.params, 15e12, 8960, "tpu-v5p", t.roofline_mfu))
    assert any(f"the roofline allows only {t.roofline_mfu:.0%}" in x for x in t.reasons)


def test_serving_reasons_and_the_best_point(default):
    s = default.serving
    assert [x.split(":")[0] for x in s.reasons] == ["Memory", "Batch", "Latency", "Money"]
    assert "70.6 GB" in s.reasons[0] and "4x2 (8 chips)" in s.reasons[0]
    assert "B_crit ≈ 240" in s.reasons[1] and "42 caches" in s.reasons[1]
    best = s.best
    assert s.meets_latency and best.latency <= 0.02
    ok = [p for p in s.frontier.points if p.latency <= 0.02]
    assert best.tokens_per_s_per_chip == approx(max(p.tokens_per_s_per_chip for p in ok))
    assert f"B={best.B:g}" in s.reasons[2] and "bound by" in s.reasons[2]
    assert f"${best.cost_per_million_tokens:.3g}" in s.reasons[3]
    assert s.max_throughput.n_chips == 8 and s.max_throughput.B == 42


def test_latency_cap_nobody_meets():
    s = C.plan_serving_side(budget=C.Budget(max_latency=1e-3))
    assert s.feasible and s.best is None and not s.meets_latency
    assert s.fastest.latency > 1e-3
    assert any(x.startswith("no configuration meets 1 ms; the fastest is B=") for x in s.lines())
    assert "no configuration meets 1 ms/step" in s.reasons[2]


def test_gpu_serving_inside_one_node():
    s = C.plan_serving_side("llama3-70b", "h100")
    assert s.feasible and s.n_chips == 1 and s.B_max >= 1
    assert max(p.n_chips for p in s.frontier.points) == 8
    too_big = C.plan_serving_side("llama3-405b", "h100", C.Budget(serve_precision="bf16"))
    assert not too_big.feasible and too_big.best is None
    assert "16 GPUs, more than one 8-GPU NVLink node" in too_big.reason


def test_infeasible_training_says_why_instead_of_raising():
    t = C.plan_training("llama3-405b", "tpu-v5p", C.Budget(train_chips=64))
    assert not t.feasible and t.layout is None and t.seconds is None and t.meets_deadline is None
    assert t.reason.startswith("no layout of llama3-405b fits 64 × tpu-v5p") and "HBM" in t.reason
    assert t.reasons[0].startswith("Memory:") and "at least 43 chips" in t.reasons[0]
    assert "no feasible layout" in t.headline()


# --- custom models, bad input ---------------------------------------------------------------------------------------


def test_custom_model_end_to_end():
    cfg = tf.TransformerConfig("tiny", L=4, D=512, F=2048, N=8, K=8, H=64, V=32_000)
    p = C.plan_model(cfg, "tpu-v5e", "tpu-v5e", C.Budget(train_chips=16, train_tokens=1e9))
    assert p.model == "tiny" and p.params == tf.param_count(cfg).total
    assert p.training.feasible and p.serving.feasible
    assert p.training.seconds == approx(T.training_time(p.params, 1e9, 16, "tpu-v5e", p.training.mfu))
    assert p.serving.n_chips == 1
    assert "Plan for tiny" in p.report()
    gpu = C.plan_model(cfg, "h100", "h100", C.Budget(train_chips=8, train_tokens=1e9))
    assert gpu.training.feasible and gpu.serving.feasible


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(train_tokens=0), "train_tokens must be a positive number"),
        (dict(batch_tokens=-1), "batch_tokens must be a positive number"),
        (dict(train_chips=0), "train_chips must be a positive integer"),
        (dict(train_chips=2.5), "train_chips must be a positive integer"),
        (dict(seq_len=0), "seq_len must be a positive integer"),
        (dict(batch_tokens=1024, seq_len=4096), "at least one sequence"),
        (dict(mfu=1.5), "0 < mfu ≤ 1"),
        (dict(mfu=0), "0 < mfu ≤ 1"),
        (dict(max_days=0), "max_days"),
        (dict(max_usd=-5), "max_usd"),
        (dict(serve_precision="int3"), "unknown serve_precision 'int3'; allowed: bf16"),
        (dict(serve_context=0), "serve_context"),
        (dict(max_latency=0), "max_latency"),
    ],
)
def test_bad_budget(kwargs, needle):
    with pytest.raises(ValueError) as info:
        C.Budget(**kwargs)
    assert needle in str(info.value), str(info.value)


def test_bad_names_and_sizes():
    with pytest.raises(ValueError, match="unknown model 'nope'; known models: llama3-8b"):
        C.plan_model("nope")
    with pytest.raises(ValueError, match="unknown chip 'tpu-v9'"):
        C.plan_model(train_chip="tpu-v9")
    with pytest.raises(ValueError, match="unknown chip"):
        C.plan_model(serve_chip="x100")
    with pytest.raises(ValueError, match="a tpu-v5p pod has 8,960 chips"):
        C.plan_training(budget=C.Budget(train_chips=9000))
    with pytest.raises(ValueError, match="up to three tiers of 64-port switches, 65,536 GPUs"):
        C.plan_training("llama3-70b", "h100", C.Budget(train_chips=100_000))
    assert C.train_chip_count("h100", C.MAX_GPU_TRAIN_CHIPS) == 65_536
    with pytest.raises(ValueError, match="no node egress"):  # ch. 12 gives V100 no cluster
        C.plan_training("llama3-8b", "v100")
    with pytest.raises(ValueError, match="v100 has no int8 matmul peak"):
        C.plan_serving_side("llama3-8b", "v100")
    with pytest.raises(TypeError, match="budget must be a Budget"):
        C.plan_model(budget={"mfu": 0.4})


# --- the report ----------------------------------------------------------------------------------------------------


def test_report_text(default):
    text = default.report()
    lines = text.splitlines()
    assert lines[0] == "Plan for llama3-70b (70.6B parameters)" and set(lines[1]) == {"="}
    assert "Training: 8,960 tpu-v5p chips, 15T tokens, batch 4.19M tokens in 4096-token sequences" in lines
    assert "  layout: FSDP 2240 × TP 4" in lines
    assert "  time: 44.7 days at 40% MFU (9.61M chip-hours)" in lines
    assert "Serving: tpu-v5e, int8 (int8 weights + KV, int8 math), 8192-token context, latency cap 20 ms/step" in lines
    assert "  smallest slice: 4x2 (8 chips), batches 1 … 42" in lines
    assert text.index("Training:") < text.index("Serving:")
    for r in default.training.reasons + default.serving.reasons:
        assert f"  - {r}" in lines
    assert lines.count("  why:") == 2
    infeasible = C.plan_model("llama3-405b", budget=C.Budget(train_chips=64)).report()
    assert "no feasible layout: no layout of llama3-405b fits 64 × tpu-v5p" in infeasible


def test_headlines(default):
    assert default.training.headline() == (
        "train tpu-v5p×8960: FSDP 2240 × TP 4, 44.7 days at 40% MFU, $40.3M, compute-bound"
    )
    h = default.serving.headline()
    assert h.startswith("serve tpu-v5e int8 (int8 weights + KV, int8 math): 4x2 (8 chips), B≤42, best ≤ 20 ms: B=")
    assert math.isclose(default.params, tf.param_count("llama3-70b").total)


def test_durations_read_as_words_not_exponents():
    """A slow plan (LLaMA 3-70B on TPU v3) takes thousands of days: written '1,2xx days', never '1.28e+03 days'."""
    side = C.plan_training("llama3-70b", "tpu-v3", C.Budget())
    assert side.days > 1000
    text = side.headline()
    assert "e+" not in text and f"{side.days:,.0f} days" in text, text
    assert C.days_text(3 * 3600) == "3 hours" and C.days_text(90) == "1.5 minutes"


def test_equal_steps_read_as_a_tie_not_one_times_slower():
    mine = tf.TransformerConfig(name="my-24b", L=60, D=6144, F=16384, N=48, K=8, H=128, V=64_000)
    side = C.plan_training(mine, "tpu-v6e", C.Budget(train_chips=256, train_tokens=2e12, batch_tokens=2**21))
    alt = next(r for r in side.reasons if r.startswith("Alternatives"))
    assert "1.00× slower" not in alt and "ties with it" in alt, alt
    for row in side.layouts[1:]:  # each alternative is named by the same kind as its row of the layouts table
        if f"({row.layout})" in alt:
            assert f"{row.kind} ({row.layout})" in alt, (row, alt)
    ties = [r for r in side.layouts if r.verdict == "tie"]
    assert ties and all(r.step_time / side.step_time < C.TIE for r in ties)


def test_layout_rows_give_every_kind_with_its_reason():
    side = C.plan_training("llama3-70b", "h100", C.Budget(train_chips=4096, mfu=0.45))
    rows = side.layouts
    assert rows[0].verdict == "chosen" and rows[0].layout == side.layout
    no_fit = [r for r in rows if r.verdict == "does not fit"]
    assert no_fit and all("GB per GPU" in r.why and r.step_time is None for r in no_fit)
    slower = [r for r in rows if r.verdict == "slower"]
    assert slower and all(r.step_time > side.step_time * C.TIE for r in slower)
    assert all(f"{r.step_time / side.step_time:.2f}× slower" in r.why for r in slower)
