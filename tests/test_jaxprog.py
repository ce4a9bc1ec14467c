"""jaxprog (book ch. 10) on 8 simulated CPU devices: the three sharding modes, shard_map collectives, the
collective matmuls and the worked problems, each checked against numpy and by its compiled collectives.
All JAX work runs in one fresh subprocess (8 CPU devices); the tests read its JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

from scalebook_utils.questions import ch10, question_ids  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CH10_IDS = [
    "ch10.q1a",
    "ch10.q1b",
    "ch10.q2a",
    "ch10.q2b",
    "ch10.q2c",
    "ch10.q2d",
    "ch10.q3a",
    "ch10.q3b",
    "ch10.q3c",
    "ch10.q4",
]

_CHILD = textwrap.dedent("""
import json
import numpy as np
from scalebook_utils import jaxlab
jaxlab.use_simulated_devices(8)
from scalebook_utils import jaxprog as jp
from scalebook_utils.check import verdict
import jax
out = {"jax": jax.__version__, "explicit": jp.explicit_unavailable()}
a = jp.auto_matmul()
out["auto"] = dict(correct=a["correct"], kinds=[c.kind for c in a["collectives"]],
                   axes=[c.axis for c in a["collectives"]], local={k: list(v) for k, v in a["local"].items()})
out["types"] = jp.explicit_types()
out["contraction"] = jp.explicit_contraction()
out["reshard"] = jp.reshard_demo()
out["slice_avg"] = jp.slice_and_average().tolist()
out["collectives"] = jp.shard_map_collectives()
c = jp.collective_matmul_check()
out["cm"] = dict(equal=c["equal"], exact=c["exact"], hlo={k: c[k]["hlo"] for k in ("collective", "plain")},
                 overlap={k: c[k]["overlap"] for k in ("collective", "plain")})
out["q1a_coll"] = jp.q1a_collectives()
mesh = jaxlab.make_mesh((2, 4), ("X", "Y"), cpu=True)
NS, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
x = jax.device_put(np.ones((16, 16), np.float32), NS(mesh, P("X", "Y")))
w = jax.device_put(np.ones((16, 16), np.float32), NS(mesh, P("Y", None)))
out["rs_hlo"] = {str(b): jaxlab.hlo_collectives(jp.rs_matmul_fn(mesh, bidirectional=b), x, w) for b in (False, True)}
m4 = jaxlab.make_mesh((4,), ("X",), cpu=True)
from scalebook_utils.questions import ch10
A, W, B, _ = ch10.Q2_SHARDED_INPUTS[1]
args = jp._moe_inputs(A, W, B, m4)
out["moe_hlo"] = {n: dict(jaxlab.count_hlo_collectives(f(m4).lower(*args).compile().as_text()))
                  for n, f in (("jit", jp.moe_jit_fn), ("gather", jp.moe_gather_fn), ("a2a", jp.moe_all_to_all_fn))}
out["ragged"] = bool(np.array_equal(jp.moe_ragged(A, W, B), ch10.moe(A, W, B)))
answers = {"ch10.q1a": jp.q1a_shard_map, "ch10.q1b": jp.q1b, "ch10.q2a": jp.moe_local, "ch10.q2b": jp.moe_jit,
           "ch10.q2c": jp.moe_all_to_all, "ch10.q2d": jp.moe_topk, "ch10.q3a": jp.q3a, "ch10.q3b": jp.q3b,
           "ch10.q3c": jp.q3c, "ch10.q4": jp.q4}
extra = {"ch10.q1a": jp.q1a_jit, "ch10.q2a": jp.moe_ragged, "ch10.q2c": jp.moe_gather}
out["verdicts"] = {q: verdict(q, f)[1] for q, f in answers.items()}
out["extra"] = {q: verdict(q, f)[1] for q, f in extra.items()}
out["wrong"] = {"ch10.q1b": verdict("ch10.q1b", lambda x, X, Y, s: np.roll(x, s, 0) - x)[1],
                "ch10.q3b": verdict("ch10.q3b", lambda t, w, X, Y: t @ w + 1)[1]}
# code that skips each question's technique (right values, wrong program) and plain numpy (no program at all)
import jax.numpy as jnp
from jax.sharding import NamedSharding as NS, PartitionSpec as P
from scalebook_utils.questions import get_question


def auto(spec_a, spec_w):
    def f(a, w, X, Y, *rest):
        mesh = jaxlab.make_mesh((X, Y), ("X", "Y"), cpu=True)
        put = jax.lax.with_sharding_constraint
        return put(a, NS(mesh, spec_a)) @ put(w, NS(mesh, spec_w))
    return f


skip = {
    "ch10.q1a": lambda x, X, Y: x.reshape(X, x.shape[0] // X, Y, -1).mean(axis=(1, 3)),   # one device
    "ch10.q2a": lambda A, W, B: jnp.einsum("sd,sdf->sf", A, W[B]),                        # builds W[B]: [S, D, F]
    "ch10.q3a": auto(P("X", "Y"), P("Y", None)),
    "ch10.q3b": auto(P("X", "Y"), P("Y", None)),
    "ch10.q3c": lambda i, wi, wo, X, Y: auto(P("X", "Y"), P(None, "Y"))(i, wi, X, Y) @ wo,
    "ch10.q4": lambda x, w, X, Y, kind: {"all_reduce": jp.q3a, "reduce_scatter": jp.q3b}[kind](x, w, X, Y),
}
# right program, but the result left as Out[B_X, F_Y] (a local slice) where the question says Out[B_X, F]
wrong_spec = lambda a, w, X, Y: jax.lax.with_sharding_constraint(
    jp.q3a(a, w, X, Y), NS(jaxlab.make_mesh((X, Y), ("X", "Y"), cpu=True), P("X", "Y")))
out["skipped"] = {q: verdict(q, f)[1] for q, f in skip.items()}
out["wrong_spec"] = verdict("ch10.q3a", wrong_spec)[1]
out["numpy"] = {q: verdict(q, lambda *a, _r=get_question(q).compute(): np.asarray(_r(*a)))[1] for q in answers}
print("JSON" + json.dumps(out, default=str))
""")


@pytest.fixture(scope="module")
def child():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.split("JSON", 1)[1])


def test_code_that_skips_the_technique_fails_with_what_was_found(child):
    for qid, msg in child["skipped"].items():
        assert msg.startswith("incorrect — right values, but"), (qid, msg)
    assert "builds an array of shape [16, 8, 16]" in child["skipped"]["ch10.q2a"]
    assert "1 dot" in child["skipped"]["ch10.q3a"], child["skipped"]["ch10.q3a"]
    assert "all-reduce" in child["skipped"]["ch10.q3b"]
    assert "its result is P('X', 'Y'), not P('X')" in child["wrong_spec"], child["wrong_spec"]
    assert (
        "one way round the ring" in child["skipped"]["ch10.q4"]
        or "no collective-permute" in child["skipped"]["ch10.q4"]
    )
    assert "compiled for 1 device" in child["skipped"]["ch10.q1a"]


def test_plain_numpy_passes_no_code_question(child):
    for qid, msg in child["numpy"].items():
        assert msg.startswith("incorrect — jax.jit could not trace your function"), (qid, msg)


def test_ch10_ids_registered():
    assert question_ids(10) == CH10_IDS


def test_references_are_pure_numpy_and_consistent():
    import numpy as np

    x = ch10.Q1A_INPUTS[0][0]
    assert ch10.shard_means(x, 1, 1).item() == x.mean()
    assert np.array_equal(ch10.shard_roll(x, 1, 1, 1), np.roll(x, 1, 0) - x)
    A, W, B, _ = ch10.Q2D_INPUTS[0]
    assert np.allclose(ch10.moe(A, W, B), (ch10.moe(A, W, B[:, 0]) + ch10.moe(A, W, B[:, 1])) / 2)


def test_auto_mode_allreduces_over_y(child):
    a = child["auto"]
    assert a["correct"] and a["kinds"] == ["all-reduce"] and a["axes"] == ["Y"]
    assert a["local"] == {"In": [2, 256], "W": [256, 1024], "Out": [2, 1024]}


def test_explicit_mode(child):
    if child["explicit"]:
        assert child["types"] == {"skipped": child["explicit"]}
        return
    t = child["types"]
    assert t["outside"] == t["inside"] == t["elementwise"] == "float32[8@X,2@Y]"
    assert t["transposed"] == "float32[2@Y,8@X]"
    c = child["contraction"]
    assert c["error"] and "ShardingTypeError" in c["error"] and c["correct"]
    assert c["types"] == {"P('X','Y')": "float32[8@X,128@Y]", "P('X',None)": "float32[8@X,128]"}
    assert "all-reduce" in c["collectives"]["P('X',None)"]
    r = child["reshard"]
    assert r["equal"] and r["types"][0] == "float32[8@X,4@Y]" and r["types"][1] == "float32[8,4@Y]"
    assert "all-gather" in r["collectives"][0]


def test_slice_and_average_matches_book(child):
    assert child["slice_avg"] == [224.0, 225.0, 226.0, 227.0]


def test_each_shard_map_collective(child):
    want = {
        "psum": "all-reduce",
        "all_gather": "all-gather",
        "psum_scatter": "reduce-scatter",
        "all_to_all": "all-to-all",
        "ppermute": "collective-permute",
    }
    for row in child["collectives"]:
        assert row["correct"], row
        assert want[row["jax"]] in row["hlo"], row


def test_collective_matmul_equal_and_overlapped(child):
    cm = child["cm"]
    assert cm["equal"] and cm["exact"]
    assert cm["hlo"]["collective"] == {"collective-permute": 3}  # Y − 1 = 3 shifts, no all-gather
    assert "all-gather" in cm["hlo"]["plain"]
    assert cm["overlap"]["collective"]["waits"] == [0, 1, 2, 3]  # block s waits for s shifts only
    assert cm["overlap"]["plain"]["waits"] == [1]  # the matmul waits for the gather
    assert cm["overlap"]["plain"]["dots_between"] == 0  # gather first, then multiply
    if child["jax"].startswith("0.4."):  # old CPU scheduler: collectives first
        assert cm["overlap"]["collective"]["schedule"][:3] == ["collective-permute"] * 3
    else:  # newer XLA interleaves them
        assert cm["overlap"]["collective"]["dots_between"] >= 1


def test_q1a_needs_no_communication_in_shard_map(child):
    assert child["q1a_coll"]["shard_map"] == {}


def test_reduce_scatter_matmul_uses_only_permutes(child):
    assert child["rs_hlo"]["False"] == {"collective-permute": 3}
    assert child["rs_hlo"]["True"] == {"collective-permute": 6}  # two rings, one each way


def test_moe_collectives(child):
    h = child["moe_hlo"]
    assert set(h["gather"]) == {"all-gather", "reduce-scatter"}
    assert set(h["a2a"]) == {"all-to-all"} and "all-gather" not in h["a2a"]
    assert child["ragged"]


def test_every_answer_checks_correct(child):
    assert child["verdicts"] == {q: "correct" for q in CH10_IDS}
    assert set(child["extra"].values()) == {"correct"}


def test_wrong_answers_are_caught(child):
    assert all(v.startswith("incorrect") for v in child["wrong"].values()), child["wrong"]
