"""The book's sharded matmuls (ch. 3) compiled by XLA on 8 simulated CPU devices, against the plan.

For every case example on meshes 1×8, 2×4, 4×2, 8×1 and 2×2×2: the sharded product equals the numpy
product, and the collectives in the compiled HLO agree with `sharding.plan` (or with one of the
book's alternative strategies; CPU forms — all-reduce + dynamic-slice for a reduce-scatter, a
layout collective-permute — explained by `predicted_vs_compiled`). All JAX work runs in one fresh
subprocess with 8 CPU devices, so the JAX state of this pytest process does not matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

from scalebook_utils import sharding as sh  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MESHES = ["{X: 1, Y: 8}", "{X: 2, Y: 4}", "{X: 4, Y: 2}", "{X: 8, Y: 1}", "{X: 2, Y: 2, Z: 2}"]

#: The book's examples of the four cases (ch. 3 §"Computation With Sharded Arrays") and Question 6.
MATMULS = [
    "A[I, J] ·_J B[J, K] → C[I, K]",  # case 1
    "A[I_X, J] ·_J B[J, K] → C[I_X, K]",
    "A[I, J] ·_J B[J, K_Y] → C[I, K_Y]",
    "A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]",  # also ch3.q6c
    "A[I_X, J] ·_J B[J, K] → C[I, K]",  # case 1 + AllGather of C
    "A[I, J_X] ·_J B[J, K] → C[I, K]",  # case 2
    "A[I, J_X] ·_J B[J, K_Y] → C[I, K_Y]",
    "A[I_X, J] ·_J B[J_X, K_Y] → C[I_X, K_Y]",  # ch3.q6b
    "A[I, J_X] ·_J B[J_X, K] → C[I, K]",  # case 3
    "A[I, J_X] ·_J B[J_X, K] → C[I, K_X]",  # case 3 + ReduceScatter
    "A[I_X, J_Y] ·_J B[J_Y, K] → C[I_X, K]",  # ch3.q6a
    "A[I_X, J] ·_J B[J, K_X] → C[I, K_X]",  # case 4
    "A[I_X, J] ·_J B[J, K_X] → C[I_X, K]",
    "A[I_X, J] ·_J B[J, K] → C[I, K_X]",  # AllToAll (or gather A first)
]

_CHILD = """
import json, sys
from scalebook_utils import jaxlab, sharding as sh
jaxlab.use_simulated_devices(8)
meshes, matmuls = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = []
for mesh in meshes:
    for text in matmuls:
        r = jaxlab.run_sharded_matmul(text, mesh)
        p = sh.plan(text, mesh, r["shapes"])
        ok, why = jaxlab.predicted_vs_compiled(p, r["collectives"], r["hlo"])
        out.append(dict(mesh=mesh, matmul=text, matches=r["result_matches"], collectives=dict(r["collectives"]),
                        agree=ok, why=why, output_spec=r["output_spec"], local=r["local_shapes"]))
# the program text that a notebook shows runs as written
ns = {}
exec(sh.jax_program("A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]", "{X: 2, Y: 4}"), ns)
prog = dict(spec=jaxlab.spec_tuple(ns["C"].sharding.spec, 2), shape=list(ns["C"].shape), sum=float(ns["C"].sum()))
import jax
P = jax.sharding.PartitionSpec
pspecs = [jaxlab.partition_spec(a) == want for a, want in
          (("A[I_XY, J]", P(("X", "Y"), None)), ("A[I_X, J]", P("X", None)), ("A[I, J]", P(None, None)))]
try:
    jaxlab.partition_spec("C[I, K]{U_X}")
    unred = None
except ValueError as e:
    unred = str(e)
# the book's code example (ch. 3 §4): A[B_X, D_Y] · B[D, F_Y] on a 4×2 mesh → all-gather
book = jaxlab.run_sharded_matmul("A[B_X, D_Y] ·_D W[D, F_Y] → C[B_X, F_Y]", "{X: 4, Y: 2}",
                                 {"B": 8, "D": 2048, "F": 8192})
print("RESULT" + json.dumps(dict(rows=out, prog=prog, pspecs=pspecs, unred=unred,
                                 book=dict(c=dict(book["collectives"]), ok=book["result_matches"],
                                           local=book["local_shapes"]))))
"""


@pytest.fixture(scope="module")
def compiled():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), json.dumps(MESHES), json.dumps(MATMULS)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.split("RESULT", 1)[1])


def _row(compiled, mesh, text):
    return next(r for r in compiled["rows"] if r["mesh"] == mesh and r["matmul"] == text)


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("text", MATMULS)
def test_sharded_matmul_matches_and_agrees(compiled, mesh, text):
    r = _row(compiled, mesh, text)
    assert r["matches"], r
    assert r["agree"], r["why"]
    got = tuple(None if e is None else tuple(e) for e in r["output_spec"])
    assert got == sh.parse_matmul(text).out.partition_spec()


def test_output_has_the_target_sharding(compiled):
    r = _row(compiled, "{X: 2, Y: 4}", "A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]")
    assert tuple(map(tuple, r["output_spec"])) == sh.parse_array("C[I_X, K_Y]").partition_spec()
    assert r["local"] == {"A": [64, 128], "B": [128, 32], "C": [64, 32]}


def test_cpu_forms_are_explained(compiled):
    # a predicted reduce-scatter compiles to all-reduce (+ dynamic-slice) on CPU (DESIGN §5)
    r = _row(compiled, "{X: 4, Y: 2}", "A[I, J_X] ·_J B[J_X, K] → C[I, K_X]")
    assert "reduce-scatter" not in r["collectives"] and r["collectives"].get("all-reduce")
    assert "all-reduce + dynamic-slice" in r["why"]


def test_case_kinds_on_the_4x2_mesh(compiled):
    """The book's default collective is what XLA emits for one example of each case."""
    mesh = "{X: 4, Y: 2}"
    assert _row(compiled, mesh, "A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]")["collectives"] == {}
    assert _row(compiled, mesh, "A[I, J_X] ·_J B[J, K] → C[I, K]")["collectives"] == {"all-gather": 1}
    assert _row(compiled, mesh, "A[I, J_X] ·_J B[J_X, K] → C[I, K]")["collectives"] == {"all-reduce": 1}
    assert _row(compiled, mesh, "A[I_X, J] ·_J B[J, K_X] → C[I, K_X]")["collectives"] == {"all-gather": 1}


def test_jax_program_runs(compiled):
    assert compiled["prog"]["spec"] == [["X"], ["Y"]]
    assert compiled["prog"]["shape"] == [128, 128] and compiled["prog"]["sum"] == 128.0**3


def test_partition_spec(compiled):
    assert compiled["pspecs"] == [True, True, True]
    assert "unreduced" in compiled["unred"]


def test_book_code_example(compiled):
    """ch. 3 §"How do we describe this in code?": local shapes (2, 1024) and (2048, 4096); an all-gather."""
    b = compiled["book"]
    assert b["ok"] and b["local"]["A"] == [2, 1024] and b["local"]["W"] == [2048, 4096]
    assert b["c"].get("all-gather", 0) >= 1
    p = sh.plan("A[B_X, D_Y] ·_D W[D, F_Y] → C[B_X, F_Y]", "{X: 4, Y: 2}", {"B": 8, "D": 2048, "F": 8192})
    assert sh.predicted_vs_compiled(p, b["c"])[0]
