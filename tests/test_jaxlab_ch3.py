"""jaxlab ch. 3 additions on 8 simulated CPU devices: shard_map collectives, the collective matmul, and the
sharding explorer's compile step. All JAX work runs in one fresh subprocess (8 CPU devices)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

from scalebook_utils import jaxlab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = textwrap.dedent("""
import json
import numpy as np
from scalebook_utils import jaxlab, widgets
jaxlab.use_simulated_devices(8)
out = {"demos": {}}
for shape in [(8,), (2, 4)]:
    for k in jaxlab.SHARD_MAP_KINDS:
        r = jaxlab.shard_map_demo(k, shape, n=32)
        out["demos"][f"{k}@{shape}"] = dict(correct=r["correct"], sent=r["bytes_sent"], model=r["model_bytes"],
                                            hlo=dict(r["hlo"]), local_in=list(r["local_in"]), local_out=list(r["local_out"]))
try:
    jaxlab.shard_map_demo("bogus")
    out["bad"] = None
except ValueError as e:
    out["bad"] = str(e)
rng = np.random.default_rng(0)
x, w = rng.standard_normal((64, 16)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
m8 = jaxlab.make_mesh((8,), ("X",), cpu=True)
c = jaxlab.collective_matmul(x, w, m8)
out["cm"] = bool(np.allclose(np.asarray(c), x @ w, atol=1e-4))
out["cm_spec"] = list(c.sharding.spec) + [None] * (2 - len(c.sharding.spec))
import jax
NS, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
out["cm_hlo"] = jaxlab.hlo_collectives(jaxlab.collective_matmul_fn(m8), jax.device_put(x, NS(m8, P("X", None))),
                                       jax.device_put(w, NS(m8, P(None, "X"))))
m24 = jaxlab.make_mesh((2, 4), ("X", "Y"), cpu=True)
out["cm_y"] = bool(np.allclose(np.asarray(jaxlab.collective_matmul(x, w, m24, "Y")), x @ w, atol=1e-4))
out["cm_x2"] = bool(np.allclose(np.asarray(jaxlab.collective_matmul(x, w, m24, "X")), x @ w, atol=1e-4))
out["lines"] = [widgets.sharding_readout(m, *abt, compile=True)
                for m in widgets.SHARDING_MESHES for abt in widgets.SHARDING_PRESETS.values()]
out["rs"] = widgets.sharding_details("2×4", "A[I, J_X]", "B[J_X, K]", "C[I, K_X]", compile=True)
from scalebook_utils.lab import sharded
mm = "A[I, J_X] ·_J B[J, K_Y] → C[I, K_Y]"
first = sharded.compile_matmul("{X: 2, Y: 4}", mm)
out["cache"] = [first is widgets.compile_matmul("2×4", mm),           # the explorer's label → the same kept compile
                first is sharded.compile_matmul("{X: 2, Y: 4}", "A[I, J_X] · B[J, K_Y] → C[I, K_Y]")]
sharded.clear_compile_cache()
again = sharded.compile_matmul("{X: 2, Y: 4}", mm)
out["recompiled"] = [again is not first, dict(again["collectives"]) == dict(first["collectives"]),
                     again["agree"], again["strategy"] == first["strategy"]]
print("JSON" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def child():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.split("JSON", 1)[1])


def test_shard_map_collectives_correct(child):
    for key, r in child["demos"].items():
        assert r["correct"], key


def test_shard_map_bytes_vs_model(child):
    d = child["demos"]
    D, n, item = 8, 32, 4
    assert d["psum@(8,)"]["sent"] == 2 * (D - 1) * n * item / D == d["psum@(8,)"]["model"]
    assert d["all_gather@(8,)"]["sent"] == (D - 1) * n * item == d["all_gather@(8,)"]["model"]
    assert d["psum_scatter@(8,)"]["sent"] == d["psum_scatter@(8,)"]["model"]
    assert d["ppermute@(8,)"]["sent"] == n * item == d["ppermute@(8,)"]["model"]
    assert d["all_to_all@(8,)"]["model"] > d["all_to_all@(8,)"]["sent"]  # ring forwarding
    assert d["all_gather@(8,)"]["local_out"] == [8, 32] and d["psum_scatter@(8,)"]["local_out"] == [1, 32]


def test_shard_map_hlo_kinds(child):
    want = {
        "psum": "all-reduce",
        "all_gather": "all-gather",
        "psum_scatter": "reduce-scatter",
        "all_to_all": "all-to-all",
        "ppermute": "collective-permute",
    }
    for k, op in want.items():
        assert set(child["demos"][f"{k}@(8,)"]["hlo"]) == {op}, (k, child["demos"][f"{k}@(8,)"]["hlo"])
    assert "bogus" in child["bad"]


def test_collective_matmul(child):
    assert child["cm"] and child["cm_y"] and child["cm_x2"]
    assert child["cm_spec"] == [None, "X"]
    assert child["cm_hlo"] == {"collective-permute": 7}  # X − 1 ring steps, no all-gather


def test_explorer_compiles_every_preset_and_agrees(child):
    assert len(child["lines"]) == 45
    for line in child["lines"]:
        assert line.startswith("sharding explorer: ") and "| C == A·B: True | agree" in line, line


def test_compile_matmul_is_kept_per_mesh_and_matmul(child):
    assert child["cache"] == [True, True]
    assert child["recompiled"] == [True, True, True, True]


def test_reduce_scatter_cpu_form_explained(child):
    text = "\\n".join(child["rs"])
    assert "compiled as all-reduce + dynamic-slice" in text


def test_book_spec_inverts_partition_spec():
    from jax.sharding import PartitionSpec as P

    assert jaxlab.book_spec("A", "IJ", P(None, "X")) == "A[I, J_X]"
    assert jaxlab.book_spec("A", "IJ", P(("X", "Y"))) == "A[I_XY, J]"
    assert jaxlab.book_spec("A", ("I", "J"), P()) == "A[I, J]"
    for text in ("A[I_X, J_Y]", "A[I_YX, J]", "A[I, J]"):
        assert jaxlab.book_spec("A", "IJ", jaxlab.partition_spec(text)) == text
    assert jaxlab.book_matmul(P(None, "X"), P("X", None), P()) == "A[I, J_X] ·_J B[J_X, K] → C[I, K]"
    assert jaxlab.book_matmul(P("X"), P(None, "Y")) == "A[I_X, J] ·_J B[J, K_Y]"
    with pytest.raises(ValueError, match="entries"):
        jaxlab.book_spec("A", "IJ", P("X", None, None))
