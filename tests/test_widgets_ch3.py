"""Chapter-3 widgets: the sharding explorer and the collective-cost explorer (pure readouts, then builders)."""

import re

import pytest

pytest.importorskip("ipywidgets")

from IPython.display import Image  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from scalebook_utils import collectives, widgets  # noqa: E402

LINE = re.compile(
    r"^sharding explorer: \{.*\} A\[.*\] ·_J B\[.*\]( → C\[.*\])? \| case [1-4] \| predicted .+ \| XLA: not compiled$"
)


def test_readout_case2_default():
    line = widgets.sharding_readout()
    assert LINE.match(line), line
    assert "| case 2 |" in line and "predicted all_gather(X)" in line


@pytest.mark.parametrize("label", list(widgets.SHARDING_PRESETS))
@pytest.mark.parametrize("mesh", list(widgets.SHARDING_MESHES))
def test_every_preset_reads_on_every_mesh(label, mesh):
    a, b, t = widgets.SHARDING_PRESETS[label]
    line = widgets.sharding_readout(mesh, a, b, t)
    assert line.startswith(widgets.SHARDING_PREFIX) and "invalid" not in line, line
    assert LINE.match(line), line


def test_readout_cases_and_costs():
    assert "| case 1 | predicted no communication" in widgets.sharding_readout(
        "2×4", "A[I_X, J]", "B[J, K_Y]", "C[I_X, K_Y]"
    )
    assert "| case 3 | predicted all_reduce(X)" in widgets.sharding_readout("2×4", "A[I, J_X]", "B[J_X, K]", "C[I, K]")
    assert "predicted reduce_scatter(X)" in widgets.sharding_readout("2×4", "A[I, J_X]", "B[J_X, K]", "C[I, K_X]")
    assert "| case 4 |" in widgets.sharding_readout("2×4", "A[I_X, J]", "B[J, K_X]", "C[I, K_X]")
    # a size-1 axis needs no collective: X has size 1 on the 1×8 mesh
    assert "predicted no communication" in widgets.sharding_readout("1×8", "A[I, J_X]", "B[J, K_Y]", "C[I, K_Y]")
    # the time printed is the cost model's: AllGather of A[I, J] (8192², bf16) over X = 2 on v5e
    t = collectives.all_gather(8192 * 8192 * 2, (2,), "tpu-v5e").seconds
    assert f"{t * 1e3:.3g} ms" in widgets.sharding_readout()


@pytest.mark.parametrize(
    "a,b,t,needle",
    [
        ("A[I_X, J_X]", "B[J, K]", None, "used twice"),
        ("A[I_Q, J]", "B[J, K]", None, "no axis Q"),
        ("A[I, J", "B[J, K]", None, "cannot read"),
        ("A[I, J]", "B[K, L]", None, "share no dim"),
        ("A[I, J]", "B[J, K]", "C[I, K]{U_Q}", "invalid"),
    ],
)
def test_invalid_specs_give_a_line(a, b, t, needle):
    line = widgets.sharding_readout("2×4", a, b, t)
    assert line.startswith(widgets.SHARDING_PREFIX) and "→ invalid:" in line and needle in line, line
    assert isinstance(widgets.render_sharding("2×4", a, b, t), Figure)


def test_matmul_text():
    assert widgets.matmul_text("A[I, J_X]", "B[J, K]", "C[I, K]") == "A[I, J_X] ·_J B[J, K] → C[I, K]"
    assert widgets.matmul_text("A[I, J_X]", "B[J, K]", "") == "A[I, J_X] ·_J B[J, K]"


def test_render_sharding_three_panels():
    fig = widgets.render_sharding()
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    assert "AllGather_X" in fig._suptitle.get_text()


def test_collective_readout():
    line = widgets.collective_readout("all_gather", "tpu-v5e", 16, True, 1e6)
    assert line.startswith("collectives: all_gather of 1 MB over an axis of 16 (wraparound) on tpu-v5e → ")
    assert "bandwidth-bound" in line and "knee 720 kB" in line
    assert "latency-bound" in widgets.collective_readout("all_gather", "tpu-v5e", 16, True, 1e4)
    assert "one hop" in widgets.collective_readout("ppermute", "tpu-v5e", 16, True, 1e3)
    nowrap = widgets.collective_readout("all_gather", "tpu-v5e", 4, False, 1e9)
    assert "no wraparound" in nowrap and "note" not in nowrap and "note" not in line
    assert "note: a tpu-v5e axis of 4 has no wraparound" in widgets.collective_readout("all_gather", "tpu-v5e", 4, True)
    assert "note: no tpu-v5e axis has 64 chips" in widgets.collective_readout("all_gather", "tpu-v5e", 64, True)
    assert widgets.collective_readout("bogus").startswith("collectives: bogus → cannot evaluate")
    assert "cannot evaluate" in widgets.collective_readout("all_gather", "tpu-v5e", 16, True, -5)


def test_render_collective_overlays_wraparound():
    fig = widgets.render_collective()
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert len(fig.axes[0].get_legend().get_texts()) == 3  # wrap, no wrap, and the starred size


def test_builders_without_compile():
    w = widgets.sharding_explorer(compile=False)
    assert w.readout().startswith("sharding explorer: {X: 2, Y: 4} A[I, J_X]") and w.readout().endswith("not compiled")
    assert set(w.controls) >= {"mesh", "a", "b", "target", "chip", "compile", "preset"}
    w.controls["preset"].value = "case 3: both on J → AllReduce"
    assert w.controls["b"].value == "B[J_X, K]" and "| case 3 |" in w.readout()
    w.controls["mesh"].value = "2×2×2"
    assert "{X: 2, Y: 2, Z: 2}" in w.readout()
    assert isinstance(w.snapshot(), Image)
    c = widgets.collective_cost_explorer()
    assert c.readout().startswith("collectives: all_gather of 1 MB")
    c.controls["kind"].value = "all_reduce"
    assert c.readout().startswith("collectives: all_reduce")
    assert isinstance(c.snapshot(), Image)
