"""Chapter 7 views: decode step time, KV cache, frontier, context pareto and the static figures (`inference_views`).

The expected numbers are recomputed here from the book's formulas (or from `inference` / `serving` directly), so a
readout that formats the wrong quantity fails.
"""

import math
import re

import pytest

pytest.importorskip("ipywidgets")

from figure_support import _draw, _is_message, _labelled  # noqa: E402
from IPython.display import Image  # noqa: E402

from scalebook_utils import inference as inf  # noqa: E402
from scalebook_utils import inference_figures as IF  # noqa: E402
from scalebook_utils import inference_views as V  # noqa: E402
from scalebook_utils import serving as sv  # noqa: E402
from scalebook_utils import transformer as tf  # noqa: E402

W_HBM, C_BF16, HBM = 8.2e11, 1.97e14, 16e9  # TPU v5e (book ch. 7 §2)
P70 = tf.param_count(tf.get_model("llama3-70b")).total
KV70_INT8 = 2 * 80 * 8 * 128 * 1  # 2·L·K·H bytes per token, int8
UNIT = re.compile(r"\([^()]+\)$")  # a label ends with its unit in parentheses: "time per decode step (ms)"
UNITLESS = re.compile(r"^(chip|number of chips .*|acceptance probability .*)$")  # categories, counts, probabilities


def test_the_serving_plan_is_cached_under_its_own_name():
    """`get_serving_plan` is `serving.plan_serving`, cached; `get_plan` is the training plan's name (ch. 5–6)."""
    p = V.get_serving_plan("llama3-70b", "tpu-v5e", "4x4", "int8-weights", 8192)
    assert V.get_serving_plan("llama3-70b", "tpu-v5e", "4x4", "int8-weights", 8192) is p
    fresh = sv.plan_serving("llama3-70b", "tpu-v5e", "4x4", "int8-weights", 8192)
    assert (p.B_max, p.B_crit) == (fresh.B_max, fresh.B_crit)
    assert not hasattr(V, "get_plan")


def _units(ax):
    _labelled(ax)
    assert UNIT.search(ax.get_xlabel()) or UNITLESS.match(ax.get_xlabel()), ax.get_xlabel()
    assert UNIT.search(ax.get_ylabel()), ax.get_ylabel()


# --- (1) decode step time -----------------------------------------------------------------------------------


def test_step_time_readout_book_roofline():
    # llama3-70b, int8 weights and KV, bf16 FLOPs, v5e 4x4 (16 chips), 8k context: memory-bound at B = 32
    t_w = P70 / (16 * W_HBM)
    t_kv = 32 * 8192 * KV70_INT8 / (16 * W_HBM)
    step = t_w + t_kv  # 2·B·P/(N·C) = 1.4 ms < t_w: the MLP is weights-bound
    assert 2 * 32 * P70 / (16 * C_BF16) < t_w
    b_max = math.floor((16 * HBM - P70) / (8192 * KV70_INT8))
    assert b_max == 138 and round(C_BF16 / W_HBM / 2) == 120
    tps = 32 / step / 16
    cost = 1.2 / 3600 / tps * 1e6
    assert f"{step * 1e3:.3g}" == "8.65" and f"{tps:.0f}" == "231"
    assert V.step_time_readout() == (
        f"decode step: B=32 → 8.65 ms/step, 231 tokens/s/chip (${cost:.3g}/1M tokens), weights-bound "
        "(B_crit=120, B_max=138) | llama3-70b int8-weights (int8 weights + KV, bf16 math) on tpu-v5e 4x4, S=8192"
    )


def test_step_time_readout_kv_bound_and_gpu():
    d = inf.decode_step("llama3-70b", 138, 8192, "tpu-v5e", 16, "int8-weights", shape=(4, 4), conventions="book")
    line = V.step_time_readout(B=138)
    assert line.startswith(
        f"decode step: B=138 → {d.step_time * 1e3:.3g} ms/step, {d.tokens_per_s_per_chip:.0f} tokens/s/chip"
    ), line
    assert "KV-bound (B_crit=120, B_max=138)" in line
    # on 64 chips the ICI is the largest single term but KV + FLOPs (4.7 ms) set the step
    d64 = inf.decode_step("llama3-70b", 128, 8192, "tpu-v5e", 64, "int8-weights", shape=(8, 8), conventions="book")
    assert d64.t_ici > d64.t_hbm_kv and d64.t_ici < d64.step_time == pytest.approx(d64.t_hbm_kv + d64.t_math)
    assert "4.71 ms/step, 425 tokens/s/chip ($0.784/1M tokens), KV-bound" in V.step_time_readout(slice_="8x8", B=128)
    assert "ICI-bound" in V.step_time_readout(slice_="16x16", B=4)  # 16 hops × 1 µs × 4 collectives × 80 layers
    h = V.step_time_readout("llama3-70b", "h100", 8, "fp8", 8192, 32)
    assert (
        h.endswith("| llama3-70b fp8 (fp8 weights + KV, fp8 math) on 8 × h100, S=8192") and "B_crit=295" in h
    )  # 1.979e15 / 3.35e12 / 2


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(B=0), "B (batch) must be a finite number ≥ 1, got 0"),
        (dict(B=139), "B=139 does not fit: at most 138 sequences of 8192 tokens"),
        (dict(model="nope"), "unknown model 'nope'"),
        (dict(chip="tpu-v9"), "unknown chip 'tpu-v9'"),
        (dict(precision="int3"), "unknown precision 'int3'"),
        (dict(slice_="2x1"), "does not fit 2 × tpu-v5e"),
        (dict(S=2_000_000), "does not fit 16 × tpu-v5e"),
        (dict(S=16384, max_context=8192), "longer than the model's maximum context"),
        (dict(precision="fp8"), "tpu-v5e has no fp8 matmul peak"),
    ],
)
def test_step_time_bad_input_gives_a_line_and_a_message(kwargs, needle):
    line = V.step_time_readout(**kwargs)
    assert line.startswith("decode step: B=") and "→ cannot evaluate: " in line and needle in line, line
    args = {k: v for k, v in kwargs.items() if k != "max_context"}
    assert _is_message(V.render_step_time(**args, max_context=kwargs.get("max_context")))


def test_step_time_curves_and_figures():
    c = V.step_time_curves(batches=[1, 120, 138])
    assert c["weights"][0] == pytest.approx(P70 / (16 * W_HBM))  # flat: the weights load once per step
    assert c["total"][0] == pytest.approx(c["kv"][0] + c["weights"][0])
    assert c["flops"][1] == pytest.approx(c["weights"][1], rel=0.01)  # the knee: B_crit ≈ 120
    assert c["total"][2] == pytest.approx(c["kv"][2] + c["flops"][2])  # past the knee: compute-bound MLP
    plan = sv.plan_serving("llama3-70b", "tpu-v5e", "4x8", "int8-weights", 8192)  # 2 + 4 hops per collective
    c48 = V.step_time_curves(slice_="4x8")
    assert list(c48["total"]) == [p.latency for p in plan.points]  # the same points as serving's plan
    fig = _draw(V.render_step_time(B=32))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        _units(ax)
    labels = fig.legends[0].get_texts()
    assert any("knee: B_crit = 120" in t.get_text() for t in labels)
    assert fig.axes[0].get_xlim()[1] == 138  # 1 … B_max
    log = V.render_step_time(B=32, log=True)
    assert log.axes[0].get_xscale() == "log" and log.axes[0].get_xlim()[1] == 4 * 121  # up to 4·⌈B_crit⌉
    assert any("do not fit" in t.get_text() for t in log.legends[0].get_texts())


def test_step_time_widget_updates():
    w = V.step_time_widget()
    assert w.last_readout == V.step_time_readout() and w.controls["B"].max == 138
    w.controls["B"].value = 64
    assert w.last_readout.startswith("decode step: B=64 → ") and w.last_readout == V.step_time_readout(B=64)
    w.controls["S"].value = 2048
    assert w.controls["B"].max == 552 and "S=2048" in w.last_readout
    w.controls["chip"].value = "h100"  # 16 chips is more than an 8-GPU node: the largest node slice
    assert w.controls["slice_"].value == "8" and w.last_readout == V.step_time_readout(
        "llama3-70b", "h100", "8", "int8-weights", 2048, 64
    )
    assert isinstance(w.snapshot(), Image)
    served = inf.served_model("llama3-70b", params=70e9)  # book ch. 8 rounds the parameters to 70e9
    s = V.step_time_widget(model=served)
    assert s.controls["model"].options[0] == ("llama3-70b (as given)", served)
    assert s.last_readout == V.step_time_readout(served) != V.step_time_readout()


# --- (2) KV cache --------------------------------------------------------------------------------------------


def test_kv_readout_llama2_13b_tables():
    P13 = tf.param_count(tf.get_model("llama2-13b")).total
    per_token = 2 * 40 * 40 * 128 * 2  # 2·L·K·H·bytes: 819,200
    assert V.kv_readout(n_chips=8) == (
        f"KV cache: llama2-13b MHA (K=40 of N=40), bf16 (bf16 weights + KV, bf16 math), S=8192 → 819 kB/token, 6.71 GB per sequence | "
        f"weights 26 GB on 8 × tpu-v5e (128 GB HBM): max batch {math.floor((128e9 - 2 * P13) / (8192 * per_token))}"
    )
    gqa = V.kv_readout(K=8, n_chips=8, B=64)
    assert "GQA (K=8 of N=40)" in gqa and "164 kB/token, 1.34 GB per sequence" in gqa
    assert "max batch 75" in gqa  # the book: the 1:5 GMQA variant fits batch 64
    step = (2 * P13 + 64 * 8192 * per_token / 5) / (8 * W_HBM)  # the book's step time: bytes / total bandwidth
    assert f"B=64: 112 GB (fits), {step * 1e3:.3g} ms/step" in gqa and round(step * 1e3, 1) == 17.1
    assert V.kv_readout().endswith("weights do not fit (≥ 2 chips needed)")  # 26 GB > one chip's 16 GB
    assert "MQA (K=1 of N=40)" in V.kv_readout(K=1, n_chips=8)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(K=3), "must divide N = 40"),
        (dict(K=0), "K (KV heads)"),
        (dict(model="gpt-9"), "unknown model"),
        (dict(precision="q2"), "unknown"),
    ],
)
def test_kv_bad_input(kwargs, needle):
    line = V.kv_readout(**kwargs)
    assert line.startswith("KV cache: ") and "cannot evaluate" in line and needle in line, line
    assert _is_message(V.render_kv(**kwargs))


def test_kv_figure_and_explorer():
    fig = V.render_kv(K=8, B=16)
    assert len(fig.axes) == 3
    for ax in fig.axes:
        _units(ax)
    assert any("HBM 128 GB" in t for t in fig.axes[0].get_legend_handles_labels()[1])
    assert _is_message(V.render_kv(n_chips=1))  # weights do not fit
    w = V.kv_explorer()
    assert w.last_readout == V.kv_readout(n_chips=8, B=8)
    w.controls["K"].value = 1
    assert "MQA (K=1 of N=40)" in w.last_readout
    w.controls["model"].value = "llama3-8b"  # K options follow the model, starting at its own K = 8
    assert w.controls["K"].value == 8 and "llama3-8b GQA (K=8 of N=32)" in w.last_readout


# --- (3) frontier and (4) context pareto ---------------------------------------------------------------------


def test_frontier_readout():
    f = sv.frontier("llama3-70b", "tpu-v5e", "int8-weights", 8192)
    top = max(f.pareto, key=lambda p: (round(p.tokens_per_s_per_chip, 6), -p.latency))
    line = V.frontier_readout()
    assert line.startswith(
        f"frontier: llama3-70b int8-weights (int8 weights + KV, bf16 math) on tpu-v5e, S=8192, 8–256 chips → max "
        f"{top.tokens_per_s_per_chip:.0f} tokens/s/chip (B={top.B} on {top.n_chips} chips"
    ), line
    fast = f.pareto[0]
    assert f"min latency {fast.latency * 1e3:.3g} ms/step (B={fast.B} on {fast.n_chips} chips)" in line
    ok = [p for p in f.points if p.latency <= 3e-3]
    best = max(ok, key=lambda p: p.tokens_per_s_per_chip)
    assert f"under 3 ms: {best.tokens_per_s_per_chip:.0f} tokens/s/chip" in V.frontier_readout(max_latency=3e-3)
    assert "under 1 ms: nothing" in V.frontier_readout(max_latency=1e-3)
    assert "cannot evaluate: unknown model" in V.frontier_readout("nope")


def test_frontier_figure_and_widget():
    fig = V.render_frontier(max_latency=0.01, compare_precisions=True)
    ax = fig.axes[0]
    _units(ax)
    labels = ax.get_legend_handles_labels()[1]
    assert (
        "Pareto frontier, int8-weights (int8 weights + KV, bf16 math)" in labels
        and "Pareto frontier, bf16 (bf16 weights + KV, bf16 math)" in labels
    )
    assert any(lbl.startswith("best under the cap") for lbl in labels) and ax.get_xscale() == "log"
    assert _is_message(V.render_frontier(precision="int3"))
    w = V.frontier_widget()
    assert w.last_readout == V.frontier_readout()
    w.controls["cap"].value = 5e-3
    assert w.last_readout == V.frontier_readout(max_latency=5e-3) and "| under 5 ms: " in w.last_readout


def test_context_pareto():
    plan = sv.plan_serving("llama3-70b", "tpu-v5e", "4x4", "int8-weights", 2048)
    line = V.context_pareto_readout(S=2048)
    assert line.startswith(f"pareto: S=2048 → B=1…{plan.B_max}: {plan.points[0].latency * 1e3:.3g}–"), line
    assert plan.B_max == 552 and line.endswith(
        "| llama3-70b int8-weights (int8 weights + KV, bf16 math) on tpu-v5e 4x4"
    )
    # the book: at 2k context throughput plateaus near 1 token/ms/chip
    assert 800 < max(p.tokens_per_s_per_chip for p in plan.points) < 1100
    assert "cannot evaluate" in V.context_pareto_readout(S=10**7)
    ax = V.render_context_pareto().axes[0]
    _units(ax)
    assert any("(selected)" in lbl for lbl in ax.get_legend_handles_labels()[1])
    w = V.context_pareto_widget()
    w.controls["S"].value = 2048
    assert w.last_readout == line


# --- (5) static figures --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "render",
    [
        IF.render_intensity,
        IF.render_critical_batch,
        IF.render_weight_stationary,
        IF.render_allgather_latency,
        IF.render_speculative,
    ],
)
def test_static_figures_have_units(render):
    _units(render().axes[0])


def test_static_figures_content_and_bad_input():
    ax = IF.render_intensity().axes[0]
    assert any("240" in lbl for lbl in ax.get_legend_handles_labels()[1])
    assert any("T > 480" in t.get_text() for t in ax.texts)
    ws = IF.render_weight_stationary().axes[0]
    assert any("crossover N = 72" in lbl for lbl in ws.get_legend_handles_labels()[1])  # F = 4D (ch7.q7)
    ag = IF.render_allgather_latency().axes[0]
    assert any("8 shards: knee 360 kB" in lbl for lbl in ag.get_legend_handles_labels()[1])  # Appendix C
    assert "Leviathan" in IF.render_speculative().axes[0].get_title()  # the formula is external
    assert _is_message(IF.render_intensity("tpu-v9")) and _is_message(IF.render_critical_batch(["x"]))
    assert _is_message(IF.render_weight_stationary(B=0)) and _is_message(IF.render_speculative((-1,)))
    assert _is_message(IF.render_allgather_latency(shards=(0,)))
