import dataclasses

import pytest
from scalebook_utils.hardware import CHIPS, ChipSpec, get_chip

from scalebook_utils import hardware

DESIGN_NAMES = [
    "tpu-v3",
    "tpu-v4p",
    "tpu-v5e",
    "tpu-v5p",
    "tpu-v6e",
    "tpu7x",
    "v100",
    "a100",
    "h100",
    "h200",
    "b200",
    "gb200",
]


def test_registry_has_every_chip_of_the_design():
    assert sorted(CHIPS) == sorted(DESIGN_NAMES)


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_every_number_has_a_source(name):
    chip = get_chip(name)
    for f in dataclasses.fields(ChipSpec):
        value = getattr(chip, f.name)
        if f.name in ("name", "vendor", "generation", "sources", "notes") or value is None:
            continue
        assert chip.sources.get(f.name), f"{name}.{f.name} has no source"


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_specs_are_positive_si_numbers(name):
    c = get_chip(name)
    assert c.hbm_bytes > 1e9 and c.hbm_bandwidth_bytes_per_s > 1e11
    assert all(v > 1e13 for v in c.peak_flops_per_s.values())
    assert c.critical_intensity(c.supported_dtypes[0]) > 50


def test_lookup_is_case_insensitive_and_has_aliases():
    assert get_chip("TPU-V5E") is get_chip("v5e") is CHIPS["tpu-v5e"]
    assert get_chip(get_chip("h100")).name == "h100"


def test_unknown_chip_lists_known_names():
    with pytest.raises(KeyError) as info:
        get_chip("tpu-v9")
    msg = str(info.value)
    assert msg.startswith("unknown chip 'tpu-v9'")
    for name in DESIGN_NAMES:
        assert name in msg
    with pytest.raises(ValueError):  # also a ValueError, for callers validating input
        get_chip("tpu-v9")


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match=r"v100 has no bf16 .*supported compute dtypes on v100: fp16"):
        get_chip("v100").peak_flops("bf16")
    with pytest.raises(ValueError, match="no fp4"):
        get_chip("tpu-v5e").peak_flops("fp4")
    with pytest.raises(ValueError, match="unknown dtype"):
        get_chip("tpu-v5e").peak_flops("int3")


def test_chip_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_chip("tpu-v5e").hbm_bytes = 1


def test_version_differences_are_recorded():
    assert any("8.1e11" in n for n in get_chip("tpu-v5e").notes)
    assert any("9.1e14" in n for n in get_chip("tpu-v6e").notes)
    assert any("3.4e12" in n for n in get_chip("h100").notes)
    assert any("9 TB/s" in n for n in get_chip("b200").notes)


def test_chip_names_by_kind():
    assert hardware.chip_names("tpu") == DESIGN_NAMES[:6] or set(hardware.chip_names("tpu")) == set(DESIGN_NAMES[:6])
    assert set(hardware.chip_names("gpu")) == set(DESIGN_NAMES[6:])
    with pytest.raises(ValueError, match="kind"):
        hardware.chip_names("fpga")


# --- the registry is immutable (issue 16 item 6) ------------------------------------------------------


@pytest.mark.parametrize("name", sorted(hardware.ALL_CHIPS))
def test_a_chip_spec_cannot_be_changed_and_is_hashable(name):
    import dataclasses

    spec = hardware.get_chip(name)
    before = spec.peak_flops("bf16") if "bf16" in spec.supported_dtypes else None
    attempts = [
        lambda: spec.peak_flops_per_s.__setitem__("bf16", 1.0),  # spec.peak_flops_per_s["bf16"] = 1
        lambda: spec.sources.__setitem__("hbm_bytes", "mine"),
        lambda: spec.peak_flops_per_s.update(bf16=1.0),
        lambda: setattr(spec, "hbm_bytes", 1.0),
        lambda: spec.peak_flops_per_s.__delitem__("bf16"),
    ]
    for attempt in attempts:
        with pytest.raises((TypeError, AttributeError, dataclasses.FrozenInstanceError)):
            attempt()
    assert hardware.get_chip(name) == spec and {spec: 1}[hardware.get_chip(name)] == 1  # hashable, stable
    if before is not None:
        assert hardware.get_chip(name).peak_flops("bf16") == before
    variant = dataclasses.replace(spec, peak_flops_per_s={"bf16": 1.0})  # the way to derive a variant
    assert variant.peak_flops("bf16") == 1.0 and variant != spec and hash(variant) != hash(spec)


# --- the bandwidth hierarchy (book ch. 2 "Key Takeaways"; ch. 12 for GPUs) ------------------------------


@pytest.mark.parametrize("chip", hardware.chip_names())
def test_bandwidth_channels_fastest_first_and_named_by_kind(chip):
    spec = get_chip(chip)
    rows = hardware.bandwidth_channels(chip)
    names = [n for n, _, _ in rows]
    if spec.kind == "tpu":
        assert names[-4:] == ["HBM", "ICI", "PCIe", "DCN"]
    else:
        assert names[-3:] == ["HBM", "NVLink", "node egress"]
    assert ("VMEM" in names) == (spec.vmem_bytes is not None)
    known = [bw for _, bw, _ in rows if bw is not None]
    assert known == sorted(known, reverse=True), rows  # the hierarchy: each channel slower than the one above


def test_bandwidth_channels_numbers():
    v5e = {n: (bw, note) for n, bw, note in hardware.bandwidth_channels("tpu-v5e")}
    assert v5e["VMEM"] == (pytest.approx(22 * 8.2e11), "≈22× HBM")  # ch. 2: VMEM ≈ 22 × HBM on v5e
    assert v5e["ICI"][0] == get_chip("tpu-v5e").ici_link_bandwidth_oneway_bytes_per_s
    h100 = get_chip("h100")
    gpu = {n: bw for n, bw, _ in hardware.bandwidth_channels(h100)}
    assert gpu["NVLink"] == h100.nvlink_bandwidth_oneway_bytes_per_s
    assert gpu["node egress"] == pytest.approx(h100.node_egress_bytes_per_s / h100.gpus_per_node)
    # topology's TPU-only table uses the same ratio
    from scalebook_utils import topology

    assert topology.VMEM_TO_HBM_BANDWIDTH_RATIO == hardware.VMEM_TO_HBM_RATIO
    assert topology.bandwidth_hierarchy("tpu-v5e")["vmem"] == v5e["VMEM"][0]
