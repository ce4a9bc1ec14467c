"""Tests of scalebook_utils.jaxlab and scalebook_utils._compat on the installed JAX (CPU).

Timing assertions are lower bounds from sleeps or generous ratios only: the VM is shared and noisy.
Anything that needs a particular number of JAX devices runs in a subprocess, so the JAX state of
this test process does not matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from scalebook_utils.hardware import ChipSpec  # noqa: E402
from scalebook_utils.roofline import matmul_roofline  # noqa: E402

from scalebook_utils import _compat, jaxlab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


# --- runtime ---------------------------------------------------------------------------------------


def test_runtime_on_cpu():
    r = jaxlab.runtime()
    assert r.backend == "cpu"
    assert r.device_kind.lower() == "cpu"
    assert r.chip is None
    assert r.n_devices >= 1 and r.n_cpu_devices == r.n_devices
    assert r.jax_version == jax.__version__
    line = jaxlab.describe_runtime()
    assert "\n" not in line and jax.__version__ in line and "cpu" in line


def test_runtime_is_frozen():
    r = jaxlab.runtime()
    with pytest.raises(AttributeError):  # a frozen dataclass raises FrozenInstanceError, an AttributeError
        r.backend = "tpu"  # type: ignore[misc]


def test_colab_detection(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert jaxlab.runtime().on_colab is False
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20250101")
    assert jaxlab.runtime().on_colab is True
    assert "Colab" in jaxlab.describe_runtime()


@pytest.mark.parametrize(
    "kind, chip",
    [
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5e", "tpu-v5e"),
        ("TPU v5p", "tpu-v5p"),
        ("TPU v5", "tpu-v5p"),
        ("TPU v6 lite", "tpu-v6e"),
        ("TPU v6e", "tpu-v6e"),
        ("TPU v4", "tpu-v4p"),
        ("TPU v4 lite", None),
        ("TPU v3", "tpu-v3"),
        ("TPU7x", "tpu7x"),
        ("TPU v2", None),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H20", None),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla T4", None),
        ("cpu", None),
    ],
)
def test_chip_from_device_kind(kind, chip):
    assert jaxlab.chip_from_device_kind(kind) == chip


def test_every_mapped_chip_exists():
    from scalebook_utils.hardware import get_chip

    for _, name in jaxlab.DEVICE_KIND_PATTERNS:
        if name is not None:
            assert get_chip(name).name == name


# --- simulated devices (fresh processes) -----------------------------------------------------------


def test_use_simulated_devices_in_fresh_process():
    p = _run_python("""
        import json
        from scalebook_utils import jaxlab
        out = {"n": jaxlab.use_simulated_devices(8)}
        out["again"] = jaxlab.use_simulated_devices(8)          # idempotent
        import jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        out["devices"] = len(jax.devices())
        r = jaxlab.runtime()
        out["runtime"] = [r.backend, r.n_devices, r.chip]
        try:
            jaxlab.use_simulated_devices(4)
            out["error"] = None
        except RuntimeError as e:
            out["error"] = str(e)
        mesh = jaxlab.make_mesh((2, 4), ("X", "Y"))
        out["mesh"] = dict(mesh.shape)
        # all_gather into a replicated out_spec, on every JAX version
        f = jaxlab.shard_map(lambda a: jaxlab.all_gather_invariant(a, "X", tiled=True), mesh=mesh,
                             in_specs=P("X", None), out_specs=P(None, None))
        x = jnp.arange(64.0).reshape(8, 8)
        out["gather_ok"] = bool((jax.jit(f)(x) == x).all())
        # psum_scatter in shard_map compiles to a reduce-scatter (DESIGN §5)
        g = jaxlab.shard_map(lambda a: jax.lax.psum_scatter(a, "X", tiled=True), mesh=mesh,
                             in_specs=P(None, None), out_specs=P("X", None))
        out["scatter"] = jaxlab.hlo_collectives(g, x)
        # auto-sharded contraction over a sharded dim needs an all-reduce; flops are per device
        xs = jax.device_put(x, NamedSharding(mesh, P(None, "X")))
        ws = jax.device_put(x, NamedSharding(mesh, P("X", None)))
        h = lambda a, b: a @ b
        out["matmul_collectives"] = jaxlab.hlo_collectives(h, xs, ws)
        out["flops_per_device"] = jaxlab.cost_analysis(h, xs, ws)["flops"]
        print("RESULT" + json.dumps(out))
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.split("RESULT", 1)[1])
    assert out["n"] == 8 and out["again"] == 8 and out["devices"] == 8
    assert out["runtime"] == ["cpu", 8, None]
    assert out["error"] and "restart" in out["error"].lower()
    assert out["mesh"] == {"X": 2, "Y": 4}
    assert out["gather_ok"] is True
    assert out["scatter"].get("reduce-scatter", 0) >= 1
    assert out["matmul_collectives"].get("all-reduce", 0) >= 1
    # per device: half the contraction (X = 2) → 2·8·4·8 = 512, plus the all-reduce's 8·8 adds
    assert 2 * 8 * 4 * 8 <= out["flops_per_device"] <= 2 * 8 * 4 * 8 + 8 * 8


def test_use_simulated_devices_after_jax_started_says_restart():
    p = _run_python("""
        import jax
        jax.numpy.ones(3).block_until_ready()          # JAX starts with 1 CPU device
        from scalebook_utils import jaxlab
        try:
            jaxlab.use_simulated_devices(8)
        except RuntimeError as e:
            print("ERR", e)
        print("ONE", jaxlab.use_simulated_devices(1))     # the count it has is fine
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "ERR" in p.stdout and "restart the kernel" in p.stdout.lower()
    assert "ONE 1" in p.stdout


# --- cost analysis ---------------------------------------------------------------------------------


@pytest.mark.parametrize("m, k, n", [(256, 512, 1024), (1, 128, 128), (64, 64, 64), (8, 1024, 32), (3, 5, 7)])
def test_cost_analysis_matmul_flops_exact(m, k, n):
    a = jnp.ones((m, k), jnp.float32)  # a: f32[m, k]
    b = jnp.ones((k, n), jnp.float32)  # b: f32[k, n]
    ca = jaxlab.cost_analysis(lambda x, y: x @ y, a, b)
    assert ca["flops"] == 2 * m * k * n
    assert ca["bytes accessed"] > 0
    assert all(isinstance(v, float) for v in ca.values())


def test_cost_analysis_book_number():
    """Book ch. 1 §7: A[256,512] @ B[512,1024] reports exactly 2NPM = 268,435,456 FLOPs."""
    ca = jaxlab.cost_analysis(jnp.dot, jnp.ones((256, 512)), jnp.ones((512, 1024)))
    assert ca["flops"] == 268_435_456
    assert ca["bytes accessed"] == 4 * (256 * 512 + 512 * 1024 + 256 * 1024)


def test_compiled_hlo_text_has_a_dot():
    text = jaxlab.compiled_hlo_text(jnp.dot, jnp.ones((4, 8)), jnp.ones((8, 2)))
    assert "HloModule" in text and "dot" in text
    assert jaxlab.hlo_collectives(jnp.dot, jnp.ones((4, 8)), jnp.ones((8, 2))) == {}


# --- timing ----------------------------------------------------------------------------------------


class _SlowLeaf:
    """A pytree leaf whose block_until_ready takes ≥ 20 ms: time_fn must wait for it."""

    def block_until_ready(self):
        time.sleep(0.02)
        return self


def test_time_fn_waits_for_every_output_leaf():
    t = jaxlab.time_fn(lambda: {"a": _SlowLeaf(), "b": (_SlowLeaf(), 1.0)}, warmup=0, repeats=2, min_time=0.0)
    assert t >= 0.04 * 0.99


def test_time_fn_at_least_a_sleep():
    t = jaxlab.time_fn(lambda: time.sleep(0.01), warmup=0, repeats=3, min_time=0.0)
    assert t >= 0.01 * 0.99


def test_time_fn_positive_and_ordered():
    mm = jax.jit(jnp.dot)
    small = jnp.ones((32, 32))
    big = jnp.ones((512, 512))  # 4096× the FLOPs of the small one
    t_small = jaxlab.time_fn(mm, small, small, repeats=3)
    t_big = jaxlab.time_fn(mm, big, big, repeats=3)
    assert 0 < t_small < t_big
    with pytest.raises(ValueError):
        jaxlab.time_fn(mm, small, small, repeats=0)


# --- calibration and prediction --------------------------------------------------------------------


def test_calibrate_quick_is_plausible():
    cal = jaxlab.calibrate(quick=True)
    assert cal.backend == "cpu" and cal.mode == "fp32"
    assert 1e8 < cal.flops_per_s < 1e14
    assert 1e8 < cal.bytes_per_s < 1e13
    assert cal.critical_intensity == pytest.approx(cal.flops_per_s / cal.bytes_per_s)
    assert cal.details["wall_seconds"] < 60  # a few seconds when the machine is quiet
    assert cal.details["bytes_per_s_no_donation"] > 0
    chip = cal.as_chip()
    assert isinstance(chip, ChipSpec) and chip.kind == "measured" and chip.vendor == "measured"
    assert chip.name == "measured-cpu"
    assert chip.peak_flops("fp32") == cal.flops_per_s
    assert chip.critical_intensity("fp32") == pytest.approx(cal.critical_intensity)
    r = matmul_roofline(1024, 1024, 1024, chip=chip, mode="fp32")
    assert r.t_lower_s == pytest.approx(max(2 * 1024**3 / cal.flops_per_s, 4 * 3 * 1024**2 / cal.bytes_per_s))


def _fake_cal():
    return jaxlab.Calibration(
        flops_per_s=1e11, bytes_per_s=1e10, dtype="float32", backend="cpu", details={"device_kind": "cpu"}
    )


def test_predict_vs_measure_arithmetic_with_given_measurements():
    cal = _fake_cal()
    meas = [
        jaxlab.MatmulMeasurement(B=1024, D=1024, F=1024, seconds=0.04, flops=2 * 1024**3, bytes=12 * 1024**2),
        jaxlab.MatmulMeasurement(B=1, D=1000, F=1000, seconds=0.002, flops=2e6, bytes=4 * (1000 + 1e6 + 1000)),
    ]
    rows = jaxlab.predict_vs_measure(cal, [], measurements=meas)
    # 1024³: compute-bound, 2·1024³ / 1e11 = 21.47 ms; B=1: memory-bound, 4.008e6 B / 1e10 = 0.4008 ms
    assert rows[0].predicted_s == pytest.approx(2 * 1024**3 / 1e11)
    assert rows[0].ratio == pytest.approx(rows[0].predicted_s / 0.04)
    assert rows[1].predicted_s == pytest.approx(4 * (1000 + 1e6 + 1000) / 1e10)
    B, D, F, pred, measured, ratio = rows[1]  # rows unpack as plain tuples
    assert (B, D, F, measured) == (1, 1000, 1000, 0.002)
    assert jaxlab.median_ratio(rows) == pytest.approx((rows[0].ratio + rows[1].ratio) / 2)
    assert "median ratio" in jaxlab.format_rows(rows)
    # against a book chip instead (bf16): T_lower on TPU v5e
    v5e = jaxlab.predict_vs_measure(None, [], chip="tpu-v5e", measurements=meas[:1])
    assert v5e[0].predicted_s == pytest.approx(matmul_roofline(1024, 1024, 1024, "tpu-v5e", "bf16").t_lower_s)
    with pytest.raises(ValueError):
        jaxlab.median_ratio([])
    with pytest.raises(ValueError):
        jaxlab.predict_vs_measure(None, [(8, 8, 8)])


def test_predict_against_runtime_chip_needs_an_accelerator():
    with pytest.raises(ValueError, match="TPU/GPU"):
        jaxlab.predict_vs_measure(None, [(8, 8, 8)], chip="runtime")


def test_measure_matmuls_and_predict():
    shapes = [(64, 64, 64), (8, 256, 128)]
    ms = jaxlab.measure_matmuls(shapes, repeats=2, min_time=0.001)
    assert [(m.B, m.D, m.F) for m in ms] == shapes
    for m in ms:
        assert m.seconds > 0 and m.flops == 2 * m.B * m.D * m.F
        assert m.bytes == 4 * (m.B * m.D + m.D * m.F + m.B * m.F)
        assert m.flops_per_s > 0 and m.intensity == m.flops / m.bytes
    chained = jaxlab.measure_matmuls(shapes, repeats=2, chain=3)  # the accelerator path, on CPU
    assert all(m.seconds > 0 for m in chained)
    rows = jaxlab.predict_vs_measure(_fake_cal(), shapes, measurements=ms)
    assert all(r.ratio > 0 for r in rows)
    # with real measuring (bf16 works on CPU too, just slowly)
    rows = jaxlab.predict_vs_measure(_fake_cal(), [(16, 32, 16)], repeats=1)
    assert rows[0].measured_s > 0


def test_calibration_rejects_unknown_dtype():
    with pytest.raises(ValueError):
        jaxlab.measure_matmuls([(2, 2, 2)], dtype="int4")


# --- _compat on the installed JAX ------------------------------------------------------------------


def test_supported_range_covers_installed_jax():
    assert _compat.SUPPORTED_JAX[0] == ">=0.4.35"
    assert _compat.parse_version("0.4.35") == (0, 4, 35)
    assert _compat.parse_version("0.5.0.dev20250101") == (0, 5, 0)
    assert _compat.parse_version("0.10.2rc1") == (0, 10, 2)
    assert _compat.JAX_VERSION >= _compat.MIN_JAX
    assert _compat.check_jax_version() is True
    with pytest.warns(RuntimeWarning):
        assert _compat.check_jax_version("0.4.30") is False


def test_cost_analysis_dict_both_shapes():
    old = [{"flops": 10, "bytes accessed": 4.0, "name": "x"}]
    new = {"flops": 10.0, "bytes accessed": 4}
    assert _compat.cost_analysis_dict(old) == {"flops": 10.0, "bytes accessed": 4.0}
    assert _compat.cost_analysis_dict(new) == {"flops": 10.0, "bytes accessed": 4.0}
    assert _compat.cost_analysis_dict(None) == {}
    assert _compat.cost_analysis_dict([]) == {}

    class FakeCompiled:
        def cost_analysis(self):
            return old

    assert _compat.cost_analysis_dict(FakeCompiled())["flops"] == 10.0


def test_set_cpu_device_count_after_start():
    jnp.ones(2).block_until_ready()
    assert _compat.backends_initialized()
    n = _compat.cpu_device_count()
    _compat.set_cpu_device_count(n)  # what we already have: fine
    with pytest.raises(RuntimeError, match="[Rr]estart"):
        _compat.set_cpu_device_count(n + 1)
    with pytest.raises(ValueError):
        _compat.set_cpu_device_count(0)


def test_xla_flag_rewrite(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_foo=1 --xla_force_host_platform_device_count=2")
    _compat._set_xla_flag(8)
    assert os.environ["XLA_FLAGS"] == "--xla_foo=1 --xla_force_host_platform_device_count=8"


def test_make_mesh_auto_shard_map_and_use_mesh_on_one_device():
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = _compat.make_mesh_auto((1,), ("x",), devices=jax.devices("cpu")[:1])
    assert dict(mesh.shape) == {"x": 1}
    if _compat.has_axis_types():
        assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)
    f = _compat.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    assert (jax.jit(f)(jnp.arange(4.0)) == jnp.arange(4.0) * 2).all()
    f_nocheck = _compat.shard_map(
        lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P(), check=False
    )
    assert float(jax.jit(f_nocheck)(jnp.ones(1))[0]) == 1.0
    with _compat.use_mesh(mesh) as m:
        assert m is mesh
        y = jax.device_put(jnp.ones(4), NamedSharding(mesh, P("x")))
        assert float(jax.jit(lambda v: v.sum())(y)) == 4.0


def test_block_until_ready_pytree():
    tree = {"a": jnp.ones(3), "b": [jnp.zeros(2), 1.0]}
    assert _compat.block_until_ready(tree) is not None


def test_count_hlo_collectives_counts_tuple_results_and_async_forms():
    hlo = """
  %all-to-all = (f32[1,4]{1,0}, f32[1,4]{1,0}) all-to-all(f32[1,4]{1,0} %a, f32[1,4]{1,0} %b), replica_groups={{0,1}}
  %all-reduce.1 = f32[8]{0} all-reduce(f32[8]{0} %x), to_apply=%add
  %all-gather-start = (f32[2]{0}, f32[8]{0}) all-gather-start(f32[2]{0} %y), dimensions={0}
  %fusion = f32[8]{0} fusion(f32[8]{0} %all-reduce.1), kind=kLoop
"""
    counts = jaxlab.count_hlo_collectives(hlo)
    assert counts == {"all-to-all": 1, "all-reduce": 1, "all-gather": 1}


# --- HLO parsing (pure text): replica groups, arrays, mesh axes ------------------------------------


@pytest.mark.parametrize(
    "text,groups",
    [
        ("replica_groups={}", [list(range(8))]),
        ("replica_groups={{0,1,2,3},{4,5,6,7}}, x", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("replica_groups=[4,2]<=[2,4]T(1,0), x", [[0, 4], [1, 5], [2, 6], [3, 7]]),
        ("replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_1'}, x", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (
            "replica_groups=mesh['a'=2,'b'=1,'c'=4], device_ids=([2,2,2]T(1,0,2)) {'a'}, x",
            [[0, 2], [1, 3], [4, 6], [5, 7]],
        ),
        ("replica_groups=mesh['a'=8] {'a':(2)2}, x", [[0, 2], [1, 3], [4, 6], [5, 7]]),
    ],
)
def test_replica_group_formats(text, groups):
    assert jaxlab.replica_groups(text, 8) == groups


def test_parse_hlo_collectives():
    hlo = "\n".join(
        [
            "  %ag = f32[64,256]{1,0} all-gather(f32[8,256]{1,0} %p), channel_id=1, replica_groups=[1,8]<=[8], "
            "dimensions={0}, use_global_device_ids=true",
            "  %ar = (f32[256,64]{1,0}, f32[]) all-reduce(%a, %b), channel_id=2, replica_groups={{0,1},{2,3},{4,5},{6,7}}, "
            "to_apply=%add",
            "  ROOT %rs = bf16[4,16]{1,0} reduce-scatter(bf16[16,16]{1,0} %c), replica_groups=[2,4]<=[8], dimensions={0}",
            "  %ar-done = f32[8]{0} all-reduce-done(%x)",
        ]
    )
    c = jaxlab.parse_hlo_collectives(hlo, (4, 2), ("data", "model"))
    assert [(x.kind, x.shape, x.axis, x.combined, x.subgroup) for x in c] == [
        ("all-gather", (64, 256), "XY", 1, False),
        ("all-reduce", (256, 64), "Y", 2, False),
        ("all-reduce", (), "Y", 2, False),
        ("reduce-scatter", (16, 16), "XY", 1, True),
    ]  # RS: input = 4 × output
    assert c[0].nbytes == 64 * 256 * 4 and c[3].nbytes == 16 * 16 * 2
    assert c[2].is_scalar and c[3].group_size == 4
    # the same instructions as count_hlo_collectives (one per HLO op, however many arrays it carries)
    assert sorted({x.name: x.kind for x in c}.values()) == sorted(jaxlab.count_hlo_collectives(hlo).elements())
    # other axis names stand for themselves (ch. 3 names its axes 'X' and 'Y')
    assert [x.axis for x in jaxlab.parse_hlo_collectives(hlo, (4, 2), ("X", "Y"))] == ["XY", "Y", "Y", "XY"]


def test_parse_hlo_collective_permute_axes():
    hlo = (
        "  %cp = f32[4,128]{1,0} collective-permute(f32[4,128]{1,0} %y), channel_id=3, "
        "source_target_pairs={{0,1},{1,2},{2,3}}"
    )
    (c,) = jaxlab.parse_hlo_collectives(hlo, (4,), ("stage",))
    assert (c.kind, c.axis, c.nbytes, c.group_size) == ("collective-permute", "Z", 4 * 128 * 4, 2)


def test_sharding_devices_falls_back_to_cpu_and_rejects_bad_counts():
    import jax

    from scalebook_utils import jaxlab

    n = len(jax.devices("cpu"))
    devs = jaxlab.sharding_devices(n)
    assert len(devs) == n and all(d.platform == "cpu" for d in devs)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        jaxlab.sharding_devices(0)
    with pytest.raises(RuntimeError, match="use_simulated_devices"):
        jaxlab.sharding_devices(n + 1)
