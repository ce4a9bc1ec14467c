"""The Rosetta of published inference measurements (issue 17 item 6): every roofline bounds its report, a report
the roofline cannot reach is flagged, the sources' numbers are self-consistent, bad input is refused."""

from __future__ import annotations

import dataclasses

import pytest
from pytest import approx
from scalebook_utils.errors import UnknownNameError
from scalebook_utils.hardware import get_chip

from scalebook_utils import inference
from scalebook_utils import published_inference as PI
from scalebook_utils import transformer as tf

ROWS = {r.measurement.name: r for r in PI.rosetta()}


@pytest.mark.parametrize("name", list(ROWS))
def test_the_roofline_bounds_every_published_measurement(name):
    r = ROWS[name]
    m = r.measurement
    assert r.bounds, (r.roofline_s, m.reported_s)
    assert r.roofline_s <= m.reported_s and 0 < r.reached <= 1
    if m.reported == "tokens_per_s_per_chip":
        assert r.roofline_tokens_per_s_per_chip >= m.value
    assert m.citation and "Published:" in m.source_note and "Assumed:" in m.source_note
    assert not r.gap.startswith("BUG") and f"{r.reached:.0%}" in r.gap


def test_a_report_the_roofline_cannot_reach_is_flagged():
    """A throughput 10× above the roofline, or a latency 10× below it, is a bug the table says so."""
    tp1 = ROWS["Llama 2 70B on 1 H200, 128 in / 128 out"]
    fast = dataclasses.replace(tp1.measurement, value=10 * tp1.roofline_tokens_per_s_per_chip)
    bad = PI.evaluate(fast)
    assert not bad.bounds and bad.reached == approx(10) and bad.gap.startswith("BUG")
    pope = ROWS["PaLM 540B decode, low latency"]
    quick = PI.evaluate(dataclasses.replace(pope.measurement, value=pope.roofline_s / 10))
    assert not quick.bounds and quick.gap.startswith("BUG")
    assert PI.table([bad])[0][-1].startswith("BUG")


def test_pope_table_2_latencies_agree_with_its_mfus():
    """Each column of Pope et al.'s Table 2 as transcribed: 2·P·tokens / (64 chips · 275 TFLOP/s · latency) is
    the MFU it prints (14%, 33%, 76%) within 3% — a misread latency or batch fails here."""
    P = tf.param_count(PI.PALM_540B).total
    C = get_chip("tpu-v4p").peak_flops("bf16")
    pope = [r.measurement for r in ROWS.values() if r.measurement.citation.startswith(PI.POPE22)]
    assert len(pope) == 3 and P == approx(540e9, rel=0.01)
    for m in pope:
        assert 2 * P * m.tokens / (m.n_chips * C * m.value) == approx(m.paper_mfu, rel=0.03), m.name


def test_low_latency_decode_is_the_weight_stream():
    """PaLM 540B int8 on 64 chips: each step reads P bytes of weights and B·S·2·L·H·2 bytes of bf16 multi-query
    KV at 64 × 1.2 TB/s — 7.04 ms + 0.21 ms at S = 2080 — and the collectives hide behind it."""
    r = ROWS["PaLM 540B decode, low latency"]
    cfg, W = PI.PALM_540B, 64 * get_chip("tpu-v4p").hbm_bandwidth_bytes_per_s
    kv_per_token = 2 * cfg.L * cfg.K * cfg.H * 2
    by_hand = sum(tf.param_count(cfg).total / W + 64 * (2048 + i) * kv_per_token / W for i in range(64))
    assert r.roofline_s == approx(by_hand, rel=1e-6) and r.decode_bound == "weights"
    assert r.roofline_text == f"{by_hand:.3g} s, {by_hand / 64 * 1e3:.1f} ms/token"


def test_a_request_is_its_prefill_and_the_remaining_decode_steps():
    r = ROWS["Llama 2 70B on 1 H200, 128 in / 128 out"]
    m = r.measurement
    pre = inference.prefill_time("llama2-70b", 128, "h200", 1, "fp8", B=512)
    steps = [inference.decode_step("llama2-70b", 512, 128 + i, "h200", 1, "fp8") for i in range(127)]
    assert r.steps == 127 and r.roofline_s == approx(pre.time + sum(s.step_time for s in steps))
    assert m.reported_s == approx(512 * 128 / 3014)
    # with the prefill the bound is the strict reading: decode alone would allow twice the tokens/s
    assert m.tokens / r.decode_s > 1.9 * r.roofline_tokens_per_s_per_chip


def test_the_1d_layout_caveat_is_named_where_collectives_set_the_roofline():
    r = ROWS["PaLM 540B prefill, high throughput"]
    assert r.comm_bound and r.core_s < r.roofline_s <= r.measurement.reported_s
    assert "1D tensor parallelism" in r.gap and "weights gathered" in r.gap
    assert not ROWS["Llama 2 70B on 1 H200, 128 in / 128 out"].comm_bound


def test_the_table_has_one_row_per_measurement():
    t = PI.table(list(ROWS.values()))
    assert len(t) == len(PI.MEASUREMENTS) >= 3 and {len(row) for row in t} == {8}
    assert [row[0] for row in t] == [m.name for m in PI.MEASUREMENTS]


_BASE = PI.MEASUREMENTS[3]


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(phase="train"), "phase must be one of"),
        (dict(reported="mfu"), "reported must be one of"),
        (dict(batch=0), "batch must be an integer"),
        (dict(n_chips=1.5), "n_chips must be an integer"),
        (dict(value=-3), "value must be"),
        (dict(phase="decode", output_len=0), "output_len must be an integer ≥ 1"),
        (dict(phase="prefill"), "a prefill generates no tokens"),
        (dict(shape=(2, 2)), "slice shape"),
        (dict(paper_mfu=1.5), "paper_mfu must be"),
    ],
)
def test_bad_measurements_are_refused(change, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(_BASE, **change)


def test_bad_workloads_get_the_cost_models_errors():
    with pytest.raises(UnknownNameError, match="close matches"):
        PI.evaluate(dataclasses.replace(_BASE, model="llama2-71b"))
    with pytest.raises(ValueError, match="more than the HBM"):
        PI.evaluate(dataclasses.replace(_BASE, batch=4096, output_len=2))
