"""sharding_figures (book ch. 10): per-device blocks read from real sharded arrays, the collective matmul's ring
schedule, and that both figures draw. The 8-device case runs in a subprocess (its own JAX device count)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from scalebook_utils import sharding_figures as sf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class _Dev:
    id: int


class _Sharding:
    def __init__(self, blocks, spec=None):
        self._blocks, self.spec = blocks, spec

    def devices_indices_map(self, shape):
        return self._blocks


class _Array:
    """Just what the figure reads from a jax.Array: shape, dtype and sharding.devices_indices_map."""

    def __init__(self, shape, blocks, spec=None, dtype="float32"):
        self.shape, self.dtype, self.sharding = shape, dtype, _Sharding(blocks, spec)


def test_device_blocks_groups_replicas_and_reads_slices():
    # rows split in two, each half on two devices (replicated over a second axis)
    blocks = {
        _Dev(0): (slice(0, 4), slice(None)),
        _Dev(1): (slice(0, 4), slice(None)),
        _Dev(2): (slice(4, 8), slice(None)),
        _Dev(3): (slice(4, 8), slice(None)),
    }
    got = sf.device_blocks(_Array((8, 6), blocks))
    assert got == {((0, 4), (0, 6)): [0, 1], ((4, 8), (0, 6)): [2, 3]}


def test_device_blocks_1d_and_bad_rank():
    blocks = {_Dev(i): (slice(2 * i, 2 * i + 2),) for i in range(4)}
    assert sf.device_blocks(_Array((8,), blocks))[((0, 1), (2, 4))] == [1]
    with pytest.raises(ValueError, match="1-D or 2-D"):
        sf.device_blocks(_Array((2, 2, 2), {}))


def test_ring_schedule_every_device_sees_every_block_once():
    held = sf.ring_schedule(4)
    assert held[0].tolist() == [0, 1, 2, 3]  # step 0: device j holds its own block j
    assert held[1].tolist() == [1, 2, 3, 0]  # after one shift to j − 1: block j + 1
    for j in range(4):
        assert sorted(held[:, j].tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        sf.ring_schedule(0)


def test_figures_draw():
    blocks = {_Dev(i): (slice(2 * i, 2 * i + 2), slice(None)) for i in range(4)}
    fig = sf.array_blocks_figure({"x": _Array((8, 4), blocks, spec=("X", None))}, title="t")
    assert len(fig.axes) == 1 and "per device 2×4, 4 blocks" in fig.axes[0].get_title()
    fig2 = sf.ring_schedule_figure(
        4, measured_s={"plain": 1e-3, "collective": 2e-3}, book_us={"plain": 311, "collective": 244}
    )
    assert len(fig2.axes) == 3
    assert [t.get_text() for t in fig2.axes[1].get_yticklabels()] == ["plain", "collective"]
    assert len(sf.ring_schedule_figure(3).axes) == 1
    with pytest.raises(ValueError):
        sf.array_blocks_figure({})


def test_device_blocks_of_real_sharded_arrays():
    pytest.importorskip("jax")
    code = textwrap.dedent("""
        import json
        from scalebook_utils import jaxlab
        jaxlab.use_simulated_devices(8)
        import jax, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from scalebook_utils import sharding_figures as sf
        mesh = Mesh(np.array(jax.devices("cpu")[:8]).reshape(4, 2), ("X", "Y"))
        a = jax.device_put(np.ones((32, 256), np.float32), NamedSharding(mesh, P("X", "Y")))
        w = jax.device_put(np.ones((256, 64), np.float32), NamedSharding(mesh, P("Y", None)))
        out = {k: [[list(map(list, b)), d] for b, d in sf.device_blocks(v).items()] for k, v in (("a", a), ("w", w))}
        print("JSON" + json.dumps(out))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.split("JSON", 1)[1])
    assert len(out["a"]) == 8 and out["a"][0] == [[[0, 8], [0, 128]], [0]]  # In[B_X, D_Y]: 8 blocks of 8×128
    assert out["w"] == [[[[0, 128], [0, 64]], [0, 2, 4, 6]], [[[128, 256], [0, 64]], [1, 3, 5, 7]]]
