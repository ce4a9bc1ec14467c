"""Where the experiments run, by runtime (issue 15, item 5), with simulated device lists (no TPU here): Colab's one
TPU v5e chip keeps timing on the chip and shards on 8 simulated CPU devices; Kaggle's TPU v5e-8 shards on its chips.
The branch lives in jaxlab.shards_on_accelerators; sharding_devices, make_mesh and describe_runtime follow it."""

from dataclasses import dataclass

import pytest

from scalebook_utils import jaxlab


@dataclass(frozen=True)
class FakeDevice:
    id: int
    platform: str
    device_kind: str


def _fake(monkeypatch, platform, kind, n_acc, n_cpu=8):
    acc = [FakeDevice(i, platform, kind) for i in range(n_acc)]
    cpus = [FakeDevice(100 + i, "cpu", "cpu") for i in range(n_cpu)]

    def devices(backend=None):
        return cpus if backend == "cpu" or platform == "cpu" else acc

    monkeypatch.setattr(jaxlab.jax, "devices", devices)
    monkeypatch.setattr(jaxlab.jax, "default_backend", lambda: platform)
    return acc, cpus


@pytest.fixture(autouse=True)
def _local(monkeypatch):
    for var in ("KAGGLE_KERNEL_RUN_TYPE", "COLAB_RELEASE_TAG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delitem(jaxlab.sys.modules, "google.colab", raising=False)


def test_colab_one_tpu_chip_times_on_the_chip_and_shards_on_simulated_cpus(monkeypatch):
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20260714")
    acc, cpus = _fake(monkeypatch, "tpu", "TPU v5 lite", 1)
    assert jaxlab.sharding_devices(8) == cpus
    r = jaxlab.runtime()
    assert (r.where, r.on_colab, r.chip, r.n_devices, r.n_cpu_devices) == ("Colab", True, "tpu-v5e", 1, 8)
    line = jaxlab.describe_runtime(r)
    assert "Colab" in line and "timing on the tpu; sharding demos on 8 simulated CPU devices" in line


def test_kaggle_tpu_v5e_8_shards_on_the_real_chips_and_is_detected_before_colab(monkeypatch):
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv("COLAB_RELEASE_TAG", "leaked-from-the-base-image")
    acc, _ = _fake(monkeypatch, "tpu", "TPU v5 lite", 8)
    assert jaxlab.sharding_devices(8) == acc and jaxlab.sharding_devices(4) == acc[:4]
    r = jaxlab.runtime()
    assert (r.where, r.on_colab) == ("Kaggle", False)
    assert "Kaggle" in jaxlab.describe_runtime(
        r
    ) and "sharding demos on the tpu (8 of 8 TPU v5 lite)" in jaxlab.describe_runtime(r)


def test_a_16_device_request_on_8_chips_falls_back_to_cpus(monkeypatch):
    _, cpus = _fake(monkeypatch, "tpu", "TPU v5 lite", 8, n_cpu=16)
    assert jaxlab.sharding_devices(16) == cpus


def test_one_gpu_and_a_laptop(monkeypatch):
    _, cpus = _fake(monkeypatch, "gpu", "NVIDIA H100 80GB HBM3", 1)
    assert jaxlab.sharding_devices(8) == cpus
    assert "timing on the gpu; sharding demos on 8 simulated CPU devices" in jaxlab.describe_runtime()
    _, cpus = _fake(monkeypatch, "cpu", "cpu", 0)
    assert jaxlab.sharding_devices(8) == cpus
    r = jaxlab.runtime()
    assert r.where == "local" and jaxlab.describe_runtime(r).endswith(
        "local · sharding demos on 8 simulated CPU devices"
    )


def test_too_few_cpu_devices_says_what_to_call(monkeypatch):
    _fake(monkeypatch, "tpu", "TPU v5 lite", 1, n_cpu=1)
    with pytest.raises(RuntimeError, match=r"call jaxlab.use_simulated_devices\(8\) first"):
        jaxlab.sharding_devices(8)


@pytest.mark.parametrize(
    "platform, n_acc, n, want",
    [("tpu", 1, 8, False), ("tpu", 8, 8, True), ("tpu", 4, 8, False), ("gpu", 8, 8, True), ("cpu", 8, 8, False)],
)
def test_the_rule(platform, n_acc, n, want):
    assert jaxlab.shards_on_accelerators(platform, n_acc, n) is want
