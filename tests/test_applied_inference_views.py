"""Chapter 8 views (`applied_inference_views`): smallest slice, configurations, the TP check, prefill,
disaggregation and the book's roofline generator — readouts, figures and widgets.

Expected lines are rebuilt here from `inference` / `serving` directly (not from the view's own helpers), so a
readout that stops going through the cost model, or formats a number differently, fails."""

import pytest

pytest.importorskip("ipywidgets")

import numpy as np  # noqa: E402
from figure_support import _draw, _is_message, _labelled  # noqa: E402
from IPython.display import Image  # noqa: E402
from scalebook_utils.units import format_bytes, format_time  # noqa: E402

from scalebook_utils import applied_inference_views as A  # noqa: E402
from scalebook_utils import inference as I  # noqa: E402
from scalebook_utils import serving as S  # noqa: E402

V5E = "tpu-v5e"
L70 = I.served_model("llama3-70b", params=70e9)


def test_book_model_is_the_chapters_rounding():
    assert A.BOOK_70B == L70
    assert A.precision_label("int8-weights") == "int8-weights" and A.precision_label("bf16") == "bf16"


def test_smallest_slice_readout_and_table():
    line = A.smallest_slice_readout("bf16", L70, V5E, 8192)
    n = I.min_chips(L70, V5E, "bf16")
    b = I.max_batch(L70, 8192, V5E, n, "bf16")
    free = I.free_hbm(L70, V5E, n, "bf16")
    assert (n, b) == (16, 43)
    assert line == (
        f"smallest slice: llama3-70b (70B params) in bf16 (bf16 weights + KV, bf16 math), S=8192 → weights "
        f"{format_bytes(L70.weight_bytes('bf16'))} = {L70.weight_bytes('bf16') / 16e9:.3g} chips → 16 chips (4x4) | "
        f"{format_bytes(free)} free → {b} caches of 8192 tokens "
        f"({format_bytes(I.kv_cache_bytes(L70, 1, 8192, 'bf16'))} each)"
    )
    s32 = "x".join(map(str, S.slice_shape(V5E, 32)))  # the book writes 4x8
    assert f"→ doubled: 32 chips ({s32})" in A.smallest_slice_readout("bf16", L70, V5E, 8192, doubled=True)
    rows = A.smallest_slice_rows(L70, V5E, 8192)
    assert [(r["chips"], r["slice"], r["B_max"]) for r in rows] == [(16, "4x4", 43), (8, "4x2", 43), (4, "2x2", 43)]
    text = A.smallest_slice_text(L70, V5E, 8192, doubled=True)
    assert text.splitlines()[2].split() == ["bf16", "140", "GB", "328", "kB", "8.75", "32", s32, "372", "GB", "138"]


def test_config_readout_goes_through_the_planner():
    plan = S.plan_serving(L70, V5E, "4x2", "int8-weights", 8192, batches=[32])
    pt = plan.points[0]
    line = A.config_readout("int8-weights", "4x2", L70, V5E, 8192, B=32)
    assert line == (
        f"serving config: llama3-70b (70B params) int8-weights (int8 weights + KV, bf16 math) on tpu-v5e 4x2, S=8192 → batch 1 … {plan.B_max} fits | "
        f"B=32: {format_time(pt.latency)}/step, {pt.tokens_per_s_per_chip:.4g} tokens/s/chip, "
        f"{pt.step.queries_per_s_per_chip(512):.3g} queries/s/chip (512-token answers), "
        f"${pt.cost_per_million_tokens:.3g}/1M tokens (weights-bound)"
    )
    # default batch: the largest that fits (HBM full), as the book's questions 6-8 use it
    rows = A.config_rows(L70, V5E, 8192, (("int8-weights", "4x4"),))
    d = I.decode_step(L70, 138, 8192, V5E, 16, "int8-weights", ici_axes=2)
    assert rows[0]["B"] == 138 and rows[0]["latency"] == pytest.approx(d.step_time)
    assert "B=43: 19.5 ms/step" in A.config_readout("bf16", "4x4", L70)


def test_tp_check_readout_numbers():
    line = A.tp_check_readout("4x8", "bf16", 64)
    large = I.tp_limit_large_batch(28_672, V5E, "bf16", M_Y=2)
    small = I.tp_limit_small_batch(28_672, 64, V5E, "bf16")
    t = I.tp_matmul_times(64, 8192, 28_672, 32, V5E, "bf16")
    assert line == (
        f"tp check: llama3-70b bf16 (bf16 weights + KV, bf16 math) on tpu-v5e 4x8 (Y=32, M_Y=2), B=64 → large batch: "
        f"Y ≤ F·M_Y/α_ici = {large:.3g} → comm-bound | small batch: Y ≤ F/(B·β) = {small:.3g} → OK | "
        f"one matmul: T_math {format_time(t.t_math)}, T_hbm {format_time(t.t_hbm)}, "
        f"T_ici {format_time(t.t_ici)} → HBM bandwidth-bound"
    )
    assert "F/(B·β=8) = 56 → OK" in A.tp_check_readout("4x8", "bf16", 64, beta=8)
    r = A.tp_check("llama3-70b", V5E, "4x8", "bf16", 200)
    assert r["comm_bound_at_B"] and r["bound"] == "ICI"  # past B ≈ 98 the 4x8 turns ICI-bound
    assert not A.tp_check("llama3-70b", V5E, "4x2", "bf16", 200)["comm_bound_at_B"]


def test_prefill_readout():
    pf = I.prefill_time(L70, 8192, V5E, 16, "bf16", mfu=0.4, conventions="book")
    att = I.prefill_time(L70, 8192, V5E, 16, "bf16", mfu=0.4, include_attention=True, conventions="book")
    assert A.prefill_readout(8192, 16, 0.4, L70) == (
        f"prefill: T=8192 on 16 × tpu-v5e at MFU 40% → {format_time(pf.time)} (2·P·T = {pf.flops:.3g} FLOPs) | "
        f"with causal attention FLOPs {format_time(att.time)} | weight loads {format_time(pf.t_hbm_weights)}: compute-bound"
    )


def test_disaggregation_readout_and_book_ratio():
    pf = I.prefill_time(L70, 8192, V5E, 16, "bf16", mfu=0.4, conventions="book")
    pt = S.plan_serving(L70, V5E, "4x4", "bf16", 8192 + 256, batches=[32]).points[0]
    ratio = I.prefill_servers_per_generate_server(pf.time, pt.latency, 32, 512)
    ev = I.kv_eviction_rate(32, 8192, 512)
    kv_in = ev.sequences_per_step * 8192 * L70.kv_bytes_per_token("bf16") / pt.latency
    line = A.disaggregation_readout(8192, 512, 32, "4x4", "4x4", "bf16", 0.4, L70)
    assert line == (
        f"disaggregation: prompt=8192, decode=512, B=32, bf16 (bf16 weights + KV, bf16 math) → prefill 4x4 at MFU 40%: "
        f"{format_time(pf.time)}/prompt | generate 4x4: {format_time(pt.latency)}/step at 8448 tokens of "
        f"context | {ratio:.3g} prefill servers per generate server ({ratio:.3g} chips per generate chip) | "
        f"evict {ev.tokens_per_step:.4g} KV tokens/step; new prompts' KV in: {format_bytes(kv_in)}/s"
    )
    d = A.disaggregation(8192, 512, 32, "4x4", "4x4", "bf16", 0.4, L70)
    assert d.ratio == pytest.approx(d.finished_per_s / d.prefill_per_s)
    assert A.disaggregation(8192, 512, 32, "4x8", "4x4", "bf16", 0.4, L70).chip_ratio == pytest.approx(d.ratio)


def test_book_roofline_readout_shows_the_bug():
    fixed = S.book_roofline_curve(8192, 16)
    bug = S.book_roofline_curve(8192, 16, book_compat=True)
    line = A.book_roofline_readout(8192, 16)
    assert line.startswith(
        f"book roofline: S=8192, 16 chips, 1 byte/param → largest batch {fixed.max_batch} "
        f"(the book's code: {bug.max_batch}, {fixed.max_batch / bug.max_batch:.3g}× fewer)"
    )
    assert (fixed.max_batch, bug.max_batch) == (138, 34)
    assert f"B={fixed.max_batch}: {format_time(fixed.latency[-1])}" in line


@pytest.mark.parametrize(
    "line",
    [
        lambda: A.smallest_slice_readout("nope"),
        lambda: A.config_readout("bf16", "2x2"),  # 140 GB of weights on 64 GB
        lambda: A.config_readout("int8-weights", "4x2", B=500),
        lambda: A.tp_check_readout("4x8", "bf16", 0),
        lambda: A.tp_check_readout("4x4", "bf16", 64, model="nope"),
        lambda: A.prefill_readout(8192, 16, 1.5),
        lambda: A.disaggregation_readout(B=200),
        lambda: A.disaggregation_readout(prompt=0),
        lambda: A.book_roofline_readout(8192, 2),
    ],
)
def test_bad_input_gives_a_line(line):
    text = line()
    assert "→ cannot evaluate: " in text and "Traceback" not in text


def test_bad_input_gives_a_message_figure():
    for fig in (
        A.render_memory_per_slice(precisions=("nope",)),
        A.render_configs(configs=(("bf16", "2x2"),)),
        A.render_tp_check("4x8", "bf16", -1),
        A.render_prefill(mfu=0),
        A.render_disaggregation(B=200),
        A.render_book_roofline(n_chips=2),
    ):
        assert _is_message(fig)


def test_figures_are_labelled_with_units():
    figs = {
        "memory": A.render_memory_per_slice(),
        "configs": A.render_configs(),
        "tp": A.render_tp_check(),
        "prefill": A.render_prefill(),
        "disagg": A.render_disaggregation(),
        "book": A.render_book_roofline(),
    }
    for fig in figs.values():
        _draw(fig)
        for ax in fig.axes:
            _labelled(ax)
    assert figs["memory"].axes[0].get_ylabel() == "memory (GB)"
    assert "(ms)" in figs["configs"].axes[0].get_xlabel() and "tokens/s" in figs["configs"].axes[1].get_xlabel()
    assert "(µs)" in figs["tp"].axes[1].get_ylabel() and "(chips)" in figs["tp"].axes[0].get_ylabel()
    assert (
        figs["prefill"].axes[0].get_ylabel() == "prefill time (s)"
        and "(tokens)" in figs["prefill"].axes[0].get_xlabel()
    )
    assert "per second" in figs["disagg"].axes[1].get_ylabel()
    assert "(ms" in figs["book"].axes[0].get_xlabel() and "tokens/s" in figs["book"].axes[0].get_ylabel()


def test_titles_fit_the_figure_and_do_not_overlap():
    """Every title (the figure's and each panel's) lies inside the figure and no two overlap — the TP check's and
    the book-generator figure's panel titles once ran into each other or off the edge — and each figure names
    its precision mode."""
    figs = {
        "tp": A.render_tp_check(),
        "prefill": A.render_prefill(),
        "book": A.render_book_roofline(),
        "configs": A.render_configs(),
        "disagg": A.render_disaggregation(),
    }
    for name, fig in figs.items():
        _draw(fig)
        renderer = fig.canvas.get_renderer()
        frame = fig.bbox
        titles = [ax.title for ax in fig.axes if ax.get_title()] + ([fig._suptitle] if fig._suptitle else [])
        boxes = [t.get_window_extent(renderer) for t in titles]
        for t, b in zip(titles, boxes):
            assert b.x0 >= frame.x0 - 1 and b.x1 <= frame.x1 + 1 and b.y1 <= frame.y1 + 1, (name, t.get_text())
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                assert not boxes[i].overlaps(boxes[j]), (name, titles[i].get_text(), titles[j].get_text())
    for name in ("tp", "prefill", "book"):
        text = " ".join(
            t.get_text()
            for t in [ax.title for ax in figs[name].axes] + ([figs[name]._suptitle] if figs[name]._suptitle else [])
        )
        assert "math)" in text, (name, text)  # e.g. "bf16 (bf16 weights + KV, bf16 math)"


def test_disaggregation_figure_curves_and_fixed_axis():
    """The curves are the cost model's ratios (cached per setting); with decode_span (the widget's slider ends)
    the left y axis is the same for every decode length in it, so a decode step moves the black curve only."""
    prompts = A.DISAGG_PROMPTS
    ys = A.disaggregation_curve(1024, 32, "4x4", "4x4", "bf16", 0.4, L70, V5E)
    for i in (0, len(prompts) // 2):
        assert ys[i] == pytest.approx(A.disaggregation(prompts[i], 1024, 32, "4x4", "4x4", "bf16", 0.4, L70).ratio)
    assert ys[-1] != ys[-1]  # NaN: 32 sequences of a 32k prompt do not fit a 4x4
    figs = {g: _draw(A.render_disaggregation(decode=g, decode_span=(64, 4096))) for g in (64, 512, 4096)}
    lims = {g: f.axes[0].get_ylim() for g, f in figs.items()}
    assert lims[64] == lims[512] == lims[4096]
    ax = figs[512].axes[0]
    assert [ln.get_label() for ln in ax.lines[:4]] == [
        "decode 128 tokens",
        "decode 512 tokens",
        "decode 2048 tokens",
        "current decode length",
    ]
    assert ax.lines[3].get_color() == "k"
    assert np.array_equal(ax.lines[3].get_ydata(), ax.lines[1].get_ydata(), equal_nan=True)  # decode 512: both
    assert "at decode 512" in ax.texts[0].get_text()
    assert A._nice_log_limits([0.037, 15.2]) == (0.02, 20.0) and A._nice_log_limits([1.0, 3.0]) == (0.5, 5.0)


def test_disaggregation_widget_updates():
    w = A.disaggregation_widget()
    first = w.last_readout
    assert first == A.disaggregation_readout() and first.startswith(A.DISAGG_PREFIX + "prompt=8192, decode=512")
    w.controls["decode"].value = 4096  # what the browser test does
    assert "decode=4096" in w.last_readout and w.last_readout == A.disaggregation_readout(decode=4096)
    w.controls["B"].value = 128  # does not fit: a readable line, not an exception
    assert "cannot evaluate" in w.last_readout
    w.controls["MFU"].value = 0.5
    assert "MFU 50%" in w.readout() or "cannot evaluate" in w.readout()
    assert isinstance(w.snapshot(), Image)


def test_tp_check_widget_updates():
    w = A.tp_check_widget()
    assert w.last_readout == A.tp_check_readout("4x8", "bf16", 64)
    w.controls["B"].value = 200
    assert "B=200" in w.last_readout and "→ ICI-bound" in w.last_readout
    w.controls["slice"].value = "4x2"
    assert "4x2 (Y=8, M_Y=2)" in w.last_readout
    assert isinstance(w.snapshot(), Image)
