"""jaxtrain on 8 simulated CPU devices: the chapter-5 schemes trained for real, against the cost model.

All JAX work that needs 8 devices runs in one fresh subprocess (like tests/test_sharding_jax.py), so
the JAX state of this pytest process does not matter. The child trains the MLP stack under every
strategy on the meshes below, the tiny transformer under the four strategies, and checks the error
messages; the tests read its JSON report. (The pipeline toys: tests/test_jaxpipeline.py; the HLO parser:
tests/test_jaxlab.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

from scalebook_utils import jaxtrain as jt  # noqa: E402
from scalebook_utils import training  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MLP_CASES = [("dp", (8, 1)), ("fsdp", (8, 1)), ("tp", (1, 8)), ("fsdp+tp", (2, 4)), ("fsdp+tp", (4, 2))]
#: MICRO (4 query heads) for the data-parallel schemes; 8-way TP needs TINY's 8 query heads.
TRANSFORMER_CASES = [
    ("dp", (8, 1), "micro"),
    ("fsdp", (8, 1), "micro"),
    ("fsdp+tp", (4, 2), "micro"),
    ("tp", (1, 8), "tiny"),
]

_CHILD = r"""
import dataclasses, json, sys, time
from scalebook_utils import jaxlab
jaxlab.use_simulated_devices(8)
import jax
from scalebook_utils import jaxtrain as jt, tinymodel
mlp_cases, tf_cases = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"jax": jax.__version__, "mlp": {}, "tf": {}, "timing": {}}

def record(r, c):
    by_op = {}
    for h in r.collectives:
        by_op[h.name] = h.kind
    parser_ok = sorted(by_op.values()) == sorted(jaxlab.count_hlo_collectives(r.hlo).elements())
    return dict(parser_ok=parser_ok, losses=list(r.losses), ref=list(r.reference_losses), rel=r.max_loss_rel_diff,
                param_diff=r.max_param_diff, agree=c.agree, table=c.table(), notes=list(c.notes),
                bytes_dev=r.param_bytes_per_device, bytes_total=r.param_bytes_total,
                predicted_bytes=list(c.predicted_bytes), compiled_bytes=c.compiled_bytes,
                kinds=sorted({h.kind for h in r.collectives}), scalars=len(c.scalar_extras),
                rows=[dict(kind=w.kind, axis=w.axis, shape=list(w.shape), lo=w.predicted_min, hi=w.predicted_max,
                           n=w.compiled, as_=list(w.compiled_kinds)) for w in c.rows])

t0 = time.time()
keep = {}
for s, mesh in mlp_cases:
    r = jt.train("mlp", s, tuple(mesh))
    keep[(s, tuple(mesh))] = r
    out["mlp"][f"{s}@{mesh[0]}x{mesh[1]}"] = record(r, jt.compare_collectives(r))
out["timing"]["mlp"] = time.time() - t0

# the rule can fail: drop one compiled array, or add an all-to-all / a non-scalar extra all-reduce
r = keep[("fsdp", (8, 1))]
h = r.collectives
a2a = dataclasses.replace(h[0], kind="all-to-all")
big = dataclasses.replace(next(x for x in h if x.kind == "all-reduce" and not x.is_scalar), shape=(3, 5), nbytes=60)
out["tampered"] = dict(
    dropped=jt.compare_collectives(dataclasses.replace(r, collectives=h[1:])).agree,
    all_to_all=jt.compare_collectives(dataclasses.replace(r, collectives=h + (a2a,))).agree,
    extra=jt.compare_collectives(dataclasses.replace(r, collectives=h + (big,))).agree)

# compare_compiled: the same rule for a step compiled outside `train` (the notebook's), mesh axes named X, Y
r = keep[("fsdp+tp", (4, 2))]
ref_table = jt.compare_collectives(r).table()
dims = dict(B=64, D=64, F=256, L=4)
out["compiled"] = dict(
    same=jt.compare_compiled(r.collectives, "fsdp+tp", (4, 2), **dims).table() == ref_table,
    xy_names=jt.compare_compiled(jaxlab.parse_hlo_collectives(r.hlo, (4, 2), ("X", "Y")), "fsdp+tp", (4, 2),
                                 **dims).table() == ref_table,
    as_dp=jt.compare_compiled(keep[("fsdp", (8, 1))].collectives, "dp", (8, 1), **dims).agree,
    short=jt.compare_compiled(r.collectives, "fsdp+tp", (4, 2), **dims).table(notes=False).count("note:"))

t0 = time.time()
for s, mesh, cfg in tf_cases:
    model = jt.TinyTransformer({"micro": tinymodel.MICRO, "tiny": tinymodel.TINY}[cfg])
    r = jt.train(model, s, tuple(mesh), steps=2)
    out["tf"][f"{s}@{mesh[0]}x{mesh[1]}"] = record(r, jt.compare_collectives(r))
out["timing"]["transformer"] = time.time() - t0

def error(f):
    try:
        f()
    except ValueError as e:
        return str(e)
    return None

out["errors"] = dict(
    strategy=error(lambda: jt.train("mlp", "zero-3", (8, 1))),
    product=error(lambda: jt.train("mlp", "dp", (2, 2))),
    dp_with_model_axis=error(lambda: jt.train("mlp", "dp", (2, 4))),
    tp_with_data_axis=error(lambda: jt.train("mlp", "tp", (2, 4))),
    D=error(lambda: jt.train(jt.MLPStack(D=60), "fsdp", (8, 1))),
    F=error(lambda: jt.train(jt.MLPStack(F=100), "tp", (1, 8))),
    B=error(lambda: jt.train(jt.MLPStack(B=12), "dp", (8, 1))),
    heads=error(lambda: jt.train("micro", "tp", (1, 8))),
)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def report():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), json.dumps(MLP_CASES), json.dumps(TRANSFORMER_CASES)],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.split("RESULT", 1)[1])


def _key(s, mesh):
    return f"{s}@{mesh[0]}x{mesh[1]}"


# --- the MLP stack ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy,mesh", MLP_CASES)
def test_mlp_losses_equal_single_device(report, strategy, mesh):
    r = report["mlp"][_key(strategy, mesh)]
    assert r["rel"] <= jt.LOSS_RTOL, r
    assert r["param_diff"] < 1e-5
    assert r["losses"][-1] < r["losses"][0]  # SGD on a fixed batch: the loss falls


@pytest.mark.parametrize("strategy,mesh", MLP_CASES)
def test_mlp_collectives_agree_with_the_model(report, strategy, mesh):
    r = report["mlp"][_key(strategy, mesh)]
    assert r["parser_ok"]  # same instructions as jaxlab.count_hlo_collectives
    assert r["agree"], r["table"]
    assert set(r["kinds"]) <= {"all-gather", "all-reduce", "reduce-scatter"}


def test_dp_moves_exactly_the_gradients(report):
    """DP: one AllReduce per weight gradient, L·2·D·F fp32 values in all (book ch. 5 table, backward 8DF in bf16
    per layer ⇔ 2 matrices × D·F × 4 bytes here)."""
    r = report["mlp"]["dp@8x1"]
    L, D, F = 4, 64, 256
    assert r["compiled_bytes"] == r["predicted_bytes"][0] == L * 2 * D * F * 4
    assert {w["kind"] for w in r["rows"]} == {"all-reduce"}
    assert r["scalars"] == 1  # the loss mean over the sharded batch


def test_fsdp_gathers_each_weight_once_on_cpu(report):
    """XLA keeps the forward's gathered weights for the backward pass (the model's regather=False)."""
    r = report["mlp"]["fsdp@8x1"]
    gathers = [w for w in r["rows"] if w["kind"] == "all-gather"]
    assert gathers and all(w["n"] == w["lo"] == 4 for w in gathers)
    assert r["compiled_bytes"] == r["predicted_bytes"][0]
    rs = [w for w in r["rows"] if w["kind"] == "reduce-scatter"]
    assert rs and all(w["as_"] == ["all-reduce"] for w in rs)  # XLA:CPU's form of a reduce-scatter


def test_tp_first_layer_has_no_dIn(report):
    """TP: L × (AllGather In, dOut), L × ReduceScatter Out, (L − 1) × ReduceScatter dIn (the data needs no grad)."""
    rows = {w["kind"]: w for w in report["mlp"]["tp@1x8"]["rows"]}
    assert rows["all-gather"]["n"] == 8 and rows["reduce-scatter"]["n"] == 7


def test_fsdp_param_bytes_are_one_over_X(report):
    dp, fsdp = report["mlp"]["dp@8x1"], report["mlp"]["fsdp@8x1"]
    assert dp["bytes_dev"] == dp["bytes_total"]
    assert fsdp["bytes_dev"] * 8 == dp["bytes_dev"]
    assert report["mlp"]["tp@1x8"]["bytes_dev"] * 8 == dp["bytes_dev"]
    assert report["mlp"]["fsdp+tp@2x4"]["bytes_dev"] * 8 == dp["bytes_dev"]


def test_the_rule_can_fail(report):
    t = report["tampered"]
    assert t == {"dropped": False, "all_to_all": False, "extra": False}


# --- the tiny transformer ----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy,mesh,cfg", TRANSFORMER_CASES)
def test_transformer_losses_equal_single_device(report, strategy, mesh, cfg):
    r = report["tf"][_key(strategy, mesh)]
    assert r["rel"] <= jt.LOSS_RTOL, r
    assert r["losses"][-1] < r["losses"][0]


@pytest.mark.parametrize("strategy,mesh,cfg", TRANSFORMER_CASES)
def test_transformer_collective_kinds_as_predicted(report, strategy, mesh, cfg):
    r = report["tf"][_key(strategy, mesh)]
    assert r["parser_ok"]
    assert r["agree"], r["table"]
    assert set(r["kinds"]) <= {"all-gather", "all-reduce", "reduce-scatter"}


def test_transformer_dp_gathers_nothing_and_fsdp_shards_the_weights(report):
    dp, fsdp = report["tf"]["dp@8x1"], report["tf"]["fsdp@8x1"]
    assert [w["kind"] for w in dp["rows"]] == ["all-reduce"] and dp["kinds"] == ["all-reduce"]
    assert dp["bytes_dev"] == dp["bytes_total"]
    # every matrix is sharded 8 ways; only the norm scales [D] stay replicated
    assert dp["bytes_dev"] / 8 < fsdp["bytes_dev"] < dp["bytes_dev"] / 8 * 1.05


# --- errors ------------------------------------------------------------------------------------------


def test_bad_inputs_give_clear_errors(report):
    e = report["errors"]
    assert "unknown strategy 'zero-3'" in e["strategy"] and "fsdp+tp" in e["strategy"]
    assert "4 devices" in e["product"] and "8 CPU devices" in e["product"]
    assert "no tensor-parallel axis" in e["dp_with_model_axis"]
    assert "no data axis" in e["tp_with_data_axis"]
    assert "D = 60 is not divisible by X = 8" in e["D"]
    assert "F = 100 is not divisible by Y = 8" in e["F"]
    assert "B = 12 is not divisible by X = 8" in e["B"]
    assert "N = 4 is not divisible by Y = 8" in e["heads"] and "query heads" in e["heads"]


def test_pure_checks_need_no_devices():
    with pytest.raises(ValueError, match="unknown strategy"):
        jt.check_strategy("pp")
    with pytest.raises(ValueError, match="product is 8"):
        jt.check_mesh("fsdp+tp", (3, 2), n_devices=8)
    assert jt.check_mesh("fsdp+tp", (2, 4), n_devices=8) == (2, 4)
    assert jt.default_mesh_shape("tp", 8) == (1, 8) and jt.default_mesh_shape("fsdp+tp", 8) == (4, 2)


# --- the cost model ---------------------------------------------------------------------------------


def test_predicted_step_drops_the_first_layers_dIn():
    full = training.step_collectives("tp", B=64, D=64, F=256, X=1, Y=8, bytes_per_element=4)
    step = jt.predicted_step("tp", B=64, D=64, F=256, L=4, X=1, Y=8, bytes_per_element=4)
    assert len(step) == 4 * len(full) - 1
    lo = jt.predicted_step("fsdp", B=64, D=64, F=256, L=2, X=8, Y=1, bytes_per_element=4, regather=False)
    hi = jt.predicted_step("fsdp", B=64, D=64, F=256, L=2, X=8, Y=1, bytes_per_element=4, regather=True)
    assert len(lo) == 8 and len(hi) == 11  # layer 0 needs no backward W_in gather
    assert not any(
        c.axis == "Y" for c in jt.predicted_step("fsdp+tp", B=64, D=64, F=256, L=1, X=8, Y=1, bytes_per_element=4)
    )


def test_compare_compiled_is_compare_collectives_for_a_step_compiled_elsewhere(report):
    c = report["compiled"]
    assert c["same"] and c["xy_names"]  # the book's axis names X, Y read like 'data', 'model'
    assert c["as_dp"] is False  # FSDP's weight gathers are not in DP's algorithm box
    assert c["short"] == 0  # table(notes=False) leaves the notes out
