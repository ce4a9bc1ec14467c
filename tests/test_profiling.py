"""profiling (book ch. 9): a trace captured here, its op table, HLO reading, the roofline comparison, memory.

The trace is captured in this test process (a tiny jitted function on the CPU; jax.profiler.trace writes a
Chrome-trace `.trace.json.gz` on every supported JAX). The sharded program runs in a fresh subprocess with
8 simulated CPU devices, so this process's JAX state does not matter.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from scalebook_utils import jaxlab  # noqa: E402
from scalebook_utils import profiling as P  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPEATS = 3


def _step(x, w1, w2):
    # x: f32[64, 128], w1: f32[128, 256], w2: f32[256, 128]
    return jnp.tanh(x @ w1) @ w2


def _args():
    return (
        jnp.ones((64, 128), jnp.float32),
        jnp.full((128, 256), 0.01, jnp.float32),
        jnp.full((256, 128), 0.01, jnp.float32),
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return P.capture_trace(_step, *_args(), repeats=REPEATS, log_dir=tmp_path_factory.mktemp("trace"))


# --- the trace ------------------------------------------------------------------------------------


def test_trace_file_is_chrome_json_with_xla_ops(trace):
    assert trace.path.endswith(".trace.json.gz") and os.path.isfile(trace.path)
    assert P.find_trace_file(os.path.dirname(os.path.dirname(os.path.dirname(trace.path)))) == trace.path
    ops = trace.xla_ops()
    assert ops and all(e.duration_s >= 0 and e.hlo_op for e in ops)
    assert trace.module.startswith("jit_") and trace.calls == REPEATS
    # every executed op is an instruction of the compiled program
    assert {e.hlo_op for e in ops} <= set(trace.ops)
    reloaded = P.load_trace(trace.path)
    assert len(reloaded.events) == len(trace.events)


def test_op_table_sums_and_counts(trace):
    rows = P.op_table(trace)
    assert rows == sorted(rows, key=lambda r: (-r.total_s, r.name))
    assert math.isclose(sum(r.fraction for r in rows), 1.0, rel_tol=1e-9)
    counted = [e for e in trace.xla_ops() if e.hlo_op in {r.name for r in rows}]
    assert math.isclose(sum(r.total_s for r in rows), sum(e.duration_s for e in counted), rel_tol=1e-9)
    assert sum(r.count for r in rows) == len(counted)
    for r in rows:  # one execution of each op per call
        assert r.count % REPEATS == 0, r
        assert math.isclose(r.per_call_s, r.total_s / REPEATS)
    totals = P.category_totals(rows)
    assert set(totals) == set(P.CATEGORIES)
    assert math.isclose(sum(totals.values()), sum(r.total_s for r in rows), rel_tol=1e-9)
    assert P.top_ops(rows, 2) == rows[:2]
    assert "category" in P.format_op_table(rows, 3).splitlines()[0]


def test_two_matmuls_found_and_compared_with_the_roofline(trace):
    rows = P.op_table(trace)
    mm = [r for r in rows if r.category == "matmul"]
    assert len(mm) == 2, P.format_op_table(rows, None)
    cal = jaxlab.Calibration(flops_per_s=1e11, bytes_per_s=2e10, dtype="float32", backend="cpu")
    checks = P.matmul_vs_roofline(trace, calibration=cal)
    assert sorted((c.B, c.D, c.F) for c in checks) == [(64, 128, 256), (64, 256, 128)]
    for c in checks:
        want = max(2 * c.B * c.D * c.F / 1e11, 4 * (c.B * c.D + c.D * c.F + c.B * c.F) / 2e10)
        assert math.isclose(c.predicted_s, want, rel_tol=1e-9)
        assert c.measured_s > 0 and c.ratio == c.predicted_s / c.measured_s
    on_chip = P.matmul_vs_roofline(trace, "tpu-v5e")
    assert on_chip[0].roofline.chip == "tpu-v5e"
    with pytest.raises(ValueError, match="calibration"):
        P.matmul_vs_roofline(trace)


def test_non_matmul_ops_against_the_memory_roofline(trace):
    checks = P.memory_vs_roofline(trace, 2e10)
    assert checks and all(c.category != "matmul" for c in checks)
    for c in checks:
        op = trace.ops[c.name]
        assert c.bytes == sum(s.nbytes for s in op.operands + op.outputs)
        assert math.isclose(c.predicted_s, c.bytes / 2e10) and c.ratio == c.predicted_s / c.measured_s
    with pytest.raises(ValueError, match="bandwidth"):
        P.memory_vs_roofline(trace, 0)


def test_timeline_spans_start_at_zero(trace):
    spans = P.timeline(trace)
    assert min(s.start_s for s in spans) == 0.0
    assert {s.name for s in spans} >= {r.name for r in P.op_table(trace)}


def test_trace_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        P.find_trace_file(tmp_path / "nope")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(FileNotFoundError, match="no \\*.trace.json.gz.*x.txt"):
        P.find_trace_file(tmp_path)
    bad = tmp_path / "bad.trace.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a readable"):
        P.load_trace(bad)
    python_only = tmp_path / "py.trace.json.gz"
    with gzip.open(python_only, "wt") as fh:
        json.dump({"traceEvents": [{"ph": "X", "name": "python", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}, fh)
    with pytest.raises(ValueError, match="no XLA op events"):
        P.op_table(P.load_trace(python_only))
    with pytest.raises(TypeError, match="function"):
        P.capture_trace(42)
    with pytest.raises(ValueError, match="repeats"):
        P.capture_trace(_step, *_args(), repeats=0)


# --- reading HLO ----------------------------------------------------------------------------------

_BOOK_LIKE_HLO = """\
HloModule jit_step

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_dot (p0: bf16[8,1024,8192], p1: bf16[8192,4096]) -> bf16[8,1024,4096] {
  %p0 = bf16[8,1024,8192]{2,1,0} parameter(0)
  %p1 = bf16[8192,4096]{1,0} parameter(1)
  ROOT %d = bf16[8,1024,4096]{2,1,0} dot(%p0, %p1), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}

%all-reduce-scatter.3 (q0: bf16[8,1024,8192]) -> bf16[8,1024,4096] {
  %q0 = bf16[8,1024,8192]{2,1,0} parameter(0)
  %ar = bf16[8,1024,8192]{2,1,0} all-reduce(%q0), replica_groups={{0,1}}, to_apply=%add
  ROOT %ds = bf16[8,1024,4096]{2,1,0} slice(%ar), slice={[0:8], [0:1024], [0:4096]}
}

ENTRY %main (x: bf16[8,1024,8192], w: bf16[8192,4096]) -> bf16[8,1024,4096] {
  %x = bf16[8,1024,8192]{2,1,0} parameter(0)
  %w = bf16[8192,4096]{1,0} parameter(1)
  %fusion.32 = bf16[8,1024,4096]{2,1,0} fusion(%x, %w), kind=kOutput, calls=%fused_dot
  %copy.1 = bf16[8,1024,8192]{2,1,0} copy(%x)
  %fusion.3 = bf16[8,1024,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[8,1024,8192]{2,1,0} %copy.1), kind=kCustom, calls=%all-reduce-scatter.3
  %dot.7 = f32[16,128]{1,0} dot(f32[256,16]{1,0} %x, f32[128,256]{1,0} %w), lhs_contracting_dims={0}, rhs_contracting_dims={1}
  ROOT %tanh.2 = bf16[8,1024,4096]{2,1,0} tanh(%fusion.32)
}
"""


def test_parse_hlo_ops_and_categories():
    ops = P.parse_hlo_ops(_BOOK_LIKE_HLO)
    assert ops["fusion.32"].fusion_kind == "kOutput" and "dot" in ops["fusion.32"].inner
    assert [str(s) for s in ops["fusion.32"].operands] == ["bf16[8,1024,8192]", "bf16[8192,4096]"]
    assert ops["fusion.3"].shape.memory_space == 1
    got = {n: P.categorize(n, ops) for n in ("fusion.32", "fusion.3", "copy.1", "dot.7", "tanh.2", "ds")}
    assert got == {
        "fusion.32": "matmul",
        "fusion.3": "collective",
        "copy.1": "copy",
        "dot.7": "matmul",
        "tanh.2": "other",
        "ds": "copy",
    }
    assert P.dot_dims(ops["fusion.32"], ops) == (8 * 1024, 8192, 4096)
    assert P.dot_dims(ops["dot.7"]) == (16, 256, 128)  # contracting dim 0 of the lhs: [256,16]ᵀ·[256,128]
    with pytest.raises(ValueError, match="not a matmul"):
        P.dot_dims(ops["tanh.2"])


def test_categorize_by_name_without_hlo():
    assert [
        P.categorize(n)
        for n in ("all-reduce.3", "all-gather-start", "dot.8", "copy.2", "transpose.1", "fusion.4", "custom-call.1")
    ] == ["collective", "collective", "matmul", "copy", "copy", "fusion", "other"]


def test_hlo_listing_of_a_hand_written_module():
    listing = P.hlo_listing(_BOOK_LIKE_HLO, (2,), ("model",))
    assert [(n, k, m) for n, k, _, m in listing.fusions] == [
        ("fusion.32", "kOutput", True),
        ("fusion.3", "kCustom", False),
    ]
    assert ("dot.7", "f32[16,128]") in listing.matmuls
    assert listing.collective_kinds() == {"all-reduce": 1}
    assert listing.collectives[0].axes == ("model",)
    with pytest.raises(ValueError, match="differ in length"):
        P.hlo_listing(_BOOK_LIKE_HLO, (2, 4), ("model",))
    with pytest.raises(ValueError, match="no HLO instructions"):
        P.parse_hlo_ops("not hlo at all")
    with pytest.raises(TypeError):
        P.parse_hlo_ops(None)


def test_hlo_shape_layout_tiles_and_padding():
    s = P.parse_hlo_shape("%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(...)")
    assert (s.dtype, s.dims, s.minor_to_major, s.tiles, s.memory_space) == (
        "bf16",
        (32, 32, 4096),
        (2, 1, 0),
        ((8, 128), (2, 1)),
        1,
    )
    assert s.nbytes == 2 * 32 * 32 * 4096 and str(s) == "bf16[32,32,4096]"
    assert P.parse_hlo_shape("f32[16,128]{1,0}").memory_space == 0
    assert P.tiled_shape((3, 5), (2, 2)) == (4, 6)
    assert P.padding_overhead((3, 5), (2, 2)) == pytest.approx(1.6)  # ch. 9: 24 / 15
    assert P.tiled_shape((4, 8), (2, 4)) == (4, 8)
    assert P.tiled_shape((7, 100, 300), (8, 128)) == (7, 104, 384)
    with pytest.raises(ValueError, match="no HLO array type"):
        P.parse_hlo_shape("tuple()")
    with pytest.raises(ValueError, match="rank"):
        P.tiled_shape((5,), (2, 2))
    with pytest.raises(ValueError):
        P.tiled_shape((3, 5), (0, 2))


# --- memory ---------------------------------------------------------------------------------------


def test_memory_report_of_a_compiled_program():
    compiled = jax.jit(_step).lower(*_args()).compile()
    rep = P.memory_report(compiled)
    assert rep.argument_bytes == 4 * (64 * 128 + 128 * 256 + 256 * 128)
    assert rep.output_bytes == 4 * 64 * 128
    assert rep.temp_bytes >= 0 and rep.peak_bytes >= rep.argument_bytes + rep.output_bytes - rep.alias_bytes
    assert rep.source == "memory_analysis" and "MiB" in str(rep)


def test_memory_report_falls_back_to_the_entry_signature():
    class NoAnalysis:
        def memory_analysis(self):
            return None

        def as_text(self):
            return "HloModule m\n\nENTRY %main (a: f32[4,8], b: bf16[8]) -> (f32[4], s32[2]) {\n  ROOT %t = ...\n}\n"

    rep = P.memory_report(NoAnalysis())
    assert (rep.argument_bytes, rep.output_bytes, rep.temp_bytes, rep.source) == (4 * 32 + 2 * 8, 16 + 8, 0.0, "shapes")
    with pytest.raises(TypeError, match="compiled program"):
        P.memory_report(object())


# --- a sharded program on 8 simulated devices -------------------------------------------------------

_CHILD = """
import json
from scalebook_utils import jaxlab, jaxtrain, profiling as P
jaxlab.use_simulated_devices(8)
r = jaxtrain.train("mlp", "fsdp+tp", (4, 2), steps=1, reference=False)
listing = P.hlo_listing(r.hlo, r.mesh_shape, jaxtrain.AXES)
print(json.dumps({"kinds": listing.collective_kinds(), "matmuls": len(listing.matmuls),
                  "fusions": len(listing.fusions),
                  "axes": sorted({"/".join(c.axes or ()) for c in listing.collectives if not c.is_scalar}),
                  "shapes": sorted({str(c.shape) for c in listing.collectives})}))
"""


def test_hlo_listing_of_a_sharded_step_on_8_simulated_devices():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD)], capture_output=True, text=True, timeout=240, cwd=ROOT, env=env
    )
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # FSDP+TP: weights gathered over 'data', activations reduced over 'model' (book ch. 5)
    assert got["kinds"].get("all-gather", 0) >= 1 and got["kinds"].get("all-reduce", 0) >= 1, got
    assert "data" in got["axes"] and "model" in got["axes"], got
    assert got["matmuls"] >= 2, got


# --- figures --------------------------------------------------------------------------------------


def test_views_draw_the_trace_and_refuse_empty_input(trace):
    pytest.importorskip("matplotlib")  # the oldest-JAX environment has no matplotlib
    from figure_support import _draw, _is_message, _labelled, _legend

    from scalebook_utils import profiling_views as PV

    rows = P.op_table(trace)
    for fig in (PV.render_timeline(P.timeline(trace)), PV.render_op_table(rows, 5)):
        ax = _draw(fig).axes[0]
        _labelled(ax)
        assert "matmul" in _legend(ax) or any(t.get_text() == "matmul" for t in ax.get_legend().get_texts())
    cal = jaxlab.Calibration(flops_per_s=1e11, bytes_per_s=2e10, dtype="float32", backend="cpu")
    _labelled(_draw(PV.render_matmul_ratios(P.matmul_vs_roofline(trace, calibration=cal))).axes[0])
    assert _is_message(PV.render_timeline([])) and _is_message(PV.render_op_table([]))
    assert _is_message(PV.render_matmul_ratios([]))


def test_timeline_names_fit_inside_their_bars():
    """An op's name is drawn on its bar only where it fits (names once ran over their neighbours' bars); a bar too
    short for its name carries a number, and the title says which op each number is."""
    pytest.importorskip("matplotlib")
    from figure_support import _draw

    from scalebook_utils import profiling_views as PV

    spans = [
        P.Span("tf_XLAEigen/1234567", "copy_bitcast_fusion.10", "fusion", 0.000, 0.006),  # 6% of the span
        P.Span("tf_XLAEigen/1234567", "dot.61", "matmul", 0.006, 0.030),
        P.Span("tf_XLAEigen/7654321", "ynn_fusion.59", "matmul", 0.040, 0.060),
    ]
    ax = _draw(PV.render_timeline(spans, label_min_fraction=0.05)).axes[0]
    renderer = ax.figure.canvas.get_renderer()
    drawn = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert set(drawn) == {"dot.61", "ynn_fusion.59", "1"}, drawn  # the long name on the short bar is a number
    assert "1\u00a0=\u00a0copy_bitcast_fusion.10" in ax.get_title()
    for s, label in zip(spans, ("1", "dot.61", "ynn_fusion.59")):
        x0, x1 = ax.transData.transform([(s.start_s * 1e3, 0), ((s.start_s + s.duration_s) * 1e3, 0)])[:, 0]
        assert x0 <= drawn[label].x0 and drawn[label].x1 <= x1, label
    title = ax.title.get_window_extent(renderer)
    assert ax.figure.bbox.x0 <= title.x0 and title.x1 <= ax.figure.bbox.x1


# --- the chapter's questions (registered in questions/ch09.py) --------------------------------------


def test_chapter_9_answers_check_correct_and_match_the_book(capsys):
    from scalebook_utils import check
    from scalebook_utils.questions import expected, question_ids

    ids = question_ids(9)
    assert ids == [
        "ch9.e1",
        "ch9.e2",
        "ch9.iq1",
        "ch9.q1a",
        "ch9.q1b",
        "ch9.q1c",
        "ch9.q1d",
        "ch9.q1e",
        "ch9.q2a",
        "ch9.q2b",
        "ch9.q2c",
        "ch9.q2d",
    ]
    for q in ids:
        check(q, expected(q))
    assert capsys.readouterr().out == "".join(f"{q}: correct\n" for q in ids)
    assert expected("ch9.e1") == pytest.approx(0.0956, rel=1e-3)  # book: 95.6 ms
    assert expected("ch9.e2") == pytest.approx(1.12e-3, rel=1e-2)  # book: ≈ 1.1 ms (measured 1.13)
    check("ch9.q1a", lambda w1, w2, x: (x @ w1.T) @ w2.T)
    check("ch9.q1a", lambda w1, w2, x: x @ w1.T)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ch9.q1a: correct" and out[1].startswith("ch9.q1a: incorrect")


# --- wall-clock steps, named scopes, before/after tables --------------------------------------------


def _scoped(x, w1, w2):
    with jax.named_scope("ffw_up"):
        h = jnp.tanh(x @ w1)
    with jax.named_scope("ffw_down"):
        return h @ w2


def test_step_times_are_wall_clock_per_step(trace):
    steps = P.step_times(trace, "step")  # capture_trace marks each call with StepTraceAnnotation
    assert len(steps) == REPEATS and all(s > 0 for s in steps)
    ops_in = trace.xla_ops()
    first = min(e.start_s for e in trace.events if e.name == "step")
    last_end = max(e.start_s + e.duration_s for e in trace.events if e.name == "step")
    assert all(first <= e.start_s <= last_end for e in ops_in)  # every op ran inside a step annotation
    with pytest.raises(ValueError, match="StepTraceAnnotation"):
        P.step_times(trace, "no-such-step")


def test_load_trace_with_hlo_names_categories_and_scopes(tmp_path):
    t = P.capture_trace(_scoped, *_args(), repeats=2, log_dir=tmp_path)
    again = P.load_trace(tmp_path, hlo=t.hlo, calls=2)
    assert again.module == t.module and again.calls == 2 and set(again.ops) == set(t.ops)
    rows = P.op_table(again)
    assert [r.category for r in rows].count("matmul") == 2
    scopes = P.scope_totals(rows, again.ops, ["ffw_up", "ffw_down"])
    assert scopes["ffw_up"] > 0 and scopes["ffw_down"] > 0
    assert math.isclose(sum(scopes.values()), sum(r.total_s for r in rows), rel_tol=1e-9)
    mm = {r.name: again.ops[r.name].op_name for r in rows if r.category == "matmul"}
    assert sorted(n.split("/")[-2] for n in mm.values()) == ["ffw_down", "ffw_up"], mm
    bare = P.load_trace(tmp_path)  # without the HLO: no categories from it, calls unknown
    assert bare.ops == {} and bare.calls == 0


def test_side_by_side_table(trace):
    rows = P.op_table(trace)
    text = P.format_side_by_side(rows, rows[:1], 3, labels=("A", "B"))
    lines = text.splitlines()
    assert lines[0].startswith("A") and "| B" in lines[0]
    assert len(lines) == 2 + 3 + 2  # header, column names, k rows, one total line per side
    assert rows[0].name[:24] in lines[2] and lines[3].rstrip().endswith("|")  # B has one row only
    assert lines[-1].startswith("B: ") and f"{rows[0].per_call_s * 1e6:.0f} µs" in lines[-1]
