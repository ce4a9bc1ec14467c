"""Hardware: the chips of the book, every number with its source.

`ChipSpec` is a frozen dataclass in SI units (FLOPs/s, bytes, bytes/s, Hz, s); field names carry the
unit. `CHIPS` maps the lower-case names used everywhere in scalebook to the book's chips, `DATASHEET_CHIPS`
holds the chips beyond the book (`ALL_CHIPS` both); `get_chip(name)` looks one up in either, ignoring case,
separators and common spellings, and lists the close matches and the known names when it cannot.

Sources (cited per field in `ChipSpec.sources`):
- TPU numbers: book ch. 2, "TPU specs" tables (chips, ICI, PCIe/DCN), with ch. 1 where it differs.
- GPU numbers: book ch. 12, spec and networking tables; NVIDIA datasheets where the book gives none.
- Chips beyond the book (A100 40 GB, H100 PCIe, AMD MI300X): the vendor datasheets, dense (not sparse) peaks.
Where versions of the book disagree, `ChipSpec.notes` records the alternatives and why we chose.

The chips live in their own modules, one per book idea, and every name stays reachable here:
`chip_spec` (`ChipSpec`, `FrozenMap`), `chips_tpu` (book ch. 2) and `chips_gpu` (book ch. 12, datasheets).
This module holds the tables users reach (`CHIPS`, `DATASHEET_CHIPS`, `ALL_CHIPS`, `CHIP_ALIASES`), the
lookups (`get_chip`, `chip_names`) and one chip's bandwidth hierarchy (`bandwidth_channels`).
"""

from __future__ import annotations

from scalebook_utils.core.chip_spec import ChipSpec, FrozenMap
from scalebook_utils.core.chips_gpu import (
    A100_DS,
    BOOK_GPUS,
    CH1,
    CH12_FLOPS,
    CH12_MEM,
    CH12_NET,
    DATASHEET_GPUS,
    H100_DS,
    MI300X_DS,
)
from scalebook_utils.core.chips_tpu import (
    CH2_CHIPS,
    CH2_ICI,
    CH2_PCIE,
    CH2_TEXT,
    CH8_PRICE,
    TPUS,
)
from scalebook_utils.core.errors import name_index, resolve_name

__all__ = [
    "CHIPS",
    "DATASHEET_CHIPS",
    "ALL_CHIPS",
    "CHIP_ALIASES",
    "get_chip",
    "chip_names",
    "VMEM_TO_HBM_RATIO",
    "bandwidth_channels",
    # re-exported: the chip's type (`chip_spec`) and the chips with their citations (`chips_tpu`, `chips_gpu`)
    "ChipSpec",
    "FrozenMap",
    "TPUS",
    "BOOK_GPUS",
    "DATASHEET_GPUS",
    "CH1",
    "CH2_CHIPS",
    "CH2_ICI",
    "CH2_PCIE",
    "CH2_TEXT",
    "CH8_PRICE",
    "CH12_FLOPS",
    "CH12_MEM",
    "CH12_NET",
    "A100_DS",
    "H100_DS",
    "MI300X_DS",
]

#: Every chip of the book, by its scalebook name (what the notebooks and figures iterate over).
CHIPS: dict[str, ChipSpec] = {c.name: c for c in TPUS + BOOK_GPUS}
#: Chips beyond the book, from vendor datasheets: A100 40 GB (SXM), H100 PCIe, AMD MI300X.
DATASHEET_CHIPS: dict[str, ChipSpec] = {c.name: c for c in DATASHEET_GPUS}
#: Every chip `get_chip` knows: the book's and the datasheet ones.
ALL_CHIPS: dict[str, ChipSpec] = CHIPS | DATASHEET_CHIPS

#: other spellings (compared after `errors.squash_name`: case, separators, a leading vendor name are ignored)
CHIP_ALIASES = {
    "v3": "tpu-v3",
    "v4": "tpu-v4p",
    "v4p": "tpu-v4p",
    "tpu-v4": "tpu-v4p",
    "v5p": "tpu-v5p",
    "v5e": "tpu-v5e",
    "v5litepod": "tpu-v5e",
    "v6e": "tpu-v6e",
    "trillium": "tpu-v6e",
    "tpu-v7x": "tpu7x",
    "v7x": "tpu7x",
    "ironwood": "tpu7x",
    "tpu-v7": "tpu7x",
    "v100-sxm2": "v100",
    "v100-32gb": "v100",
    "a100-80gb": "a100",
    "a100-sxm": "a100",
    "a100-sxm4": "a100",
    "a100-sxm4-80gb": "a100",
    "a100-80gb-sxm": "a100",
    "a100-sxm-80gb": "a100",
    "a100-40gb-sxm": "a100-40gb",
    "a100-sxm4-40gb": "a100-40gb",
    "a100-sxm-40gb": "a100-40gb",
    "h100-sxm": "h100",
    "h100-sxm5": "h100",
    "h100-80gb": "h100",
    "h100-sxm-80gb": "h100",
    "h100-sxm5-80gb": "h100",
    "h100-80gb-pcie": "h100-pcie",
    "h100-pcie-80gb": "h100-pcie",
    "h200-sxm": "h200",
    "h200-141gb": "h200",
    "b200-sxm": "b200",
    "gb200-nvl72": "gb200",
    "instinct-mi300x": "mi300x",
}


def get_chip(name: str | ChipSpec) -> ChipSpec:
    """Look up a chip by name: case, separators, a vendor prefix and common spellings are ignored ("v5e",
    "H100 SXM5", "h100-sxm", "a100-80gb", "AMD Instinct MI300X"; `CHIP_ALIASES`).

    Raises UnknownNameError (a KeyError) listing the close matches and the known names when `name` is unknown.
    """
    if isinstance(name, ChipSpec):
        return name
    return ALL_CHIPS[resolve_name(name, _CHIP_INDEX, "chip", ALL_CHIPS)]


def chip_names(kind: str | None = None, *, datasheet: bool = False) -> list[str]:
    """Names of the book's chips (`CHIPS`), or only "tpu" or "gpu" ones; `datasheet=True` adds the chips
    beyond the book (`DATASHEET_CHIPS`)."""
    if kind not in (None, "tpu", "gpu"):
        raise ValueError(f"kind must be 'tpu', 'gpu' or None, got {kind!r}")
    chips = ALL_CHIPS if datasheet else CHIPS
    return [n for n, c in chips.items() if kind is None or c.kind == kind]


_CHIP_INDEX = name_index(ALL_CHIPS, CHIP_ALIASES)


# --- the bandwidth hierarchy of one chip (book ch. 2; ch. 12 for GPUs) ------------------------------

#: VMEM ↔ MXU bandwidth as a multiple of HBM bandwidth (book ch. 2, "What Is a TPU?": about 22×, stated for v5e).
VMEM_TO_HBM_RATIO = 22


def bandwidth_channels(chip: ChipSpec | str, dtype: str = "bf16") -> list[tuple[str, float | None, str]]:
    """(channel, bytes/s or None, note) from fastest to slowest: VMEM, HBM, ICI, PCIe, DCN (TPUs) —
    NVLink and node egress for GPUs. None means the book gives no number for this chip.

    VMEM = `VMEM_TO_HBM_RATIO` × HBM (only for chips with a VMEM size); ICI is one link, one way; node egress
    is the node's egress ÷ GPUs per node. Divide the chip's `dtype` peak by each to get that channel's critical
    intensity C/W (book ch. 2, "Key Takeaways"). `dtype` is accepted for the figure that draws C/W; the
    bandwidths do not depend on it.
    """
    spec = get_chip(chip)
    rows: list[tuple[str, float | None, str]] = []
    if spec.vmem_bytes is not None:
        rows.append(("VMEM", VMEM_TO_HBM_RATIO * spec.hbm_bandwidth_bytes_per_s, f"≈{VMEM_TO_HBM_RATIO}× HBM"))
    rows.append(("HBM", spec.hbm_bandwidth_bytes_per_s, "per chip"))
    if spec.kind == "tpu":
        rows.append(("ICI", spec.ici_link_bandwidth_oneway_bytes_per_s, "one link, one way"))
        rows.append(("PCIe", spec.pcie_bandwidth_bytes_per_s, "per chip, host ↔ chip"))
        rows.append(("DCN", spec.dcn_bandwidth_bytes_per_s, "egress per chip"))
    else:
        rows.append(("NVLink", spec.nvlink_bandwidth_oneway_bytes_per_s, "per GPU, one way"))
        egress = spec.node_egress_bytes_per_s
        per_gpu = egress / spec.gpus_per_node if egress and spec.gpus_per_node else None
        rows.append(("node egress", per_gpu, "per GPU"))
    return rows
