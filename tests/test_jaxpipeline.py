"""jaxpipeline on 8 simulated CPU devices: the chapter-5 pipelining snippet (fixed) and the GPipe toy.

The JAX work that needs 8 devices runs in one fresh subprocess (like tests/test_jaxtrain.py), so the
JAX state of this pytest process does not matter; the tests read its JSON report. The schedule grid is
pure numpy and is tested here directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

from scalebook_utils import jaxpipeline as jp  # noqa: E402
from scalebook_utils import training  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json
import numpy as np
from scalebook_utils import jaxlab
jaxlab.use_simulated_devices(8)
import jax, jax.numpy as jnp
from scalebook_utils import jaxpipeline as jp
out = {"jax": jax.__version__}

W = jp.init_pipeline_weights(8, 128)
x = jax.random.normal(jax.random.PRNGKey(1), (32, 128))
loss, new = jp.naive_pipeline_step(W, x, lr=0.01)
rl, rw = jp.reference_pipeline_step(W, x, lr=0.01)
out["naive"] = dict(loss=float(loss), ref=float(rl),
                    wdiff=max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(new, rw)),
                    moved=float(jnp.max(jnp.abs(rw - W))), devices=[list(a.devices())[0].id for a in new],
                    n=len(new))
out["gpipe"] = {}
ref = np.asarray(jp.sequential_forward(W, x))
for M in (1, 4):
    g = jp.gpipe_forward(W, x, M)
    out["gpipe"][M] = dict(err=float(np.max(np.abs(np.asarray(g.out) - ref))), scale=float(np.max(np.abs(ref))),
                           schedule=g.schedule.tolist(), kinds=sorted({c.kind for c in g.collectives}),
                           axes=sorted({c.axis for c in g.collectives}),
                           act_bytes=sorted({c.nbytes for c in g.collectives if c.dtype == "f32"}))

def error(f):
    try:
        f()
    except ValueError as e:
        return str(e)
    return None

out["errors"] = dict(
    microbatches=error(lambda: jp.gpipe_forward(W, x, 5)),
    stages=error(lambda: jp.naive_pipeline_step(jnp.zeros((9, 4, 4)), jnp.zeros((2, 4)))),
)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def report():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.split("RESULT", 1)[1])


def test_naive_pipeline_equals_unsharded_step(report):
    n = report["naive"]
    assert n["n"] == 8 and n["devices"] == list(range(8))  # stage i's new weights live on device i
    assert n["loss"] == pytest.approx(n["ref"], rel=1e-6)
    assert n["wdiff"] <= 1e-6 < n["moved"]  # the step changed W, exactly as the reference did


@pytest.mark.parametrize("M", ["1", "4"])
def test_gpipe_forward_equals_sequential_and_follows_the_schedule(report, M):
    g = report["gpipe"][M]
    assert g["err"] <= 1e-6 * max(1.0, g["scale"])
    assert g["schedule"] == jp.pipeline_schedule(8, int(M)).tolist()
    assert g["kinds"] == ["collective-permute"]
    assert g["axes"] == ["Z"]  # one hop along the 'stage' axis
    assert g["act_bytes"] == [32 // int(M) * 128 * 4]  # one microbatch of activations per hop


@pytest.mark.parametrize("P,M", [(1, 1), (2, 1), (4, 4), (8, 3), (8, 32), (3, 7)])
def test_schedule_idle_fraction_is_the_bubble(P, M):
    grid = jp.pipeline_schedule(P, M)
    assert grid.shape == (P, M + P - 1)
    assert jp.idle_fraction(grid) == pytest.approx(training.bubble_fraction(P, M), abs=1e-12)
    for s in range(P):  # every stage runs every microbatch once, in order
        row = [m for m in grid[s] if m >= 0]
        assert row == list(range(M))


def test_bad_inputs_give_clear_errors(report):
    e = report["errors"]
    assert "M = 5" in e["microbatches"]
    assert "9 stages" in e["stages"]
    with pytest.raises(ValueError, match="stages"):
        jp.pipeline_schedule(0, 4)
