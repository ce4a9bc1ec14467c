"""What a chip is: `ChipSpec`, one accelerator's numbers in SI units, and `FrozenMap`, its read-only tables.

`ChipSpec` holds a chip's dense peak FLOPs/s per compute dtype (C), HBM capacity (bytes) and bandwidth
(W_hbm, bytes/s), its interconnect (ICI for TPUs, NVLink and node egress for GPUs), the sources of every
number and notes where versions of the book disagree; field names carry the unit. Among its derived
quantities is the critical intensity α_hbm = C / W_hbm in FLOPs per byte (book ch. 1, "Where does the time go?").

The chips themselves are in `chips_tpu` (book ch. 2) and `chips_gpu` (book ch. 12, vendor datasheets);
`hardware` is the front door (`CHIPS`, `get_chip`) and re-exports both names defined here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scalebook_utils.core.units import canonical_dtype

__all__ = ["ChipSpec", "FrozenMap"]


class FrozenMap(Mapping):
    """A read-only, hashable mapping (a ChipSpec's dtype → FLOPs/s table, its sources): assignment raises.

    >>> m = FrozenMap({"bf16": 1.97e14}); m["bf16"] = 0
    Traceback (most recent call last):
    TypeError: 'FrozenMap' object does not support item assignment
    """

    __slots__ = ("_items",)

    def __init__(self, items=()):
        object.__setattr__(self, "_items", dict(items))

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self):
        return FrozenMap, (self._items,)


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator chip (a TPU chip or one GPU), all quantities in SI units.

    `peak_flops_per_s` maps a compute dtype ("bf16", "int8", "fp8", "fp16", "fp4") to dense peak
    FLOPs/s (OPs/s for integers). A dtype the chip has no fast path for is absent; `peak_flops`
    raises a clear error for it.

    Read-only all the way down: the dataclass is frozen, its mappings are `FrozenMap`s (a dict given
    is copied into one), so no assignment can change a chip under every later calculation; specs are
    hashable. Derive a variant with `dataclasses.replace(spec, peak_flops_per_s={...})`.
    """

    name: str
    vendor: str  # "google", "nvidia" or "amd"
    generation: str
    peak_flops_per_s: Mapping[str, float]
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    sources: Mapping[str, str]
    # TPU interconnect
    ici_link_bandwidth_oneway_bytes_per_s: float | None = None
    ici_torus_dims: int | None = None  # 2 (2D torus) or 3 (3D torus)
    pod_shape: tuple[int, ...] | None = None
    host_shape: tuple[int, ...] | None = None
    pcie_bandwidth_bytes_per_s: float | None = None
    dcn_bandwidth_bytes_per_s: float | None = None
    ici_hop_latency_s: float | None = None
    tensorcores_per_chip: int | None = None
    mxu_size: int | None = None
    vmem_bytes: float | None = None
    # GPU
    sms: int | None = None
    clock_hz: float | None = None
    smem_bytes_per_sm: float | None = None
    l2_bytes: float | None = None
    nvlink_bandwidth_oneway_bytes_per_s: float | None = None  # per-GPU egress inside the NVLink domain
    gpus_per_node: int | None = None
    node_egress_bytes_per_s: float | None = None
    # money
    price_per_hour_usd: float | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self):
        for name in ("peak_flops_per_s", "sources"):
            object.__setattr__(self, name, FrozenMap(getattr(self, name)))
        for name in ("pod_shape", "host_shape", "notes"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    # --- derived quantities ------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """ "tpu", "gpu", or "measured" (a spec calibrated on this machine by jaxlab.calibrate)."""
        return "tpu" if self.vendor == "google" else "measured" if self.vendor == "measured" else "gpu"

    @property
    def supported_dtypes(self) -> tuple[str, ...]:
        return tuple(self.peak_flops_per_s)

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOPs/s (OPs/s) for matmuls computed in `dtype`."""
        d = canonical_dtype(dtype)
        if d not in self.peak_flops_per_s:
            raise ValueError(
                f"{self.name} has no {d} matmul peak; supported compute dtypes on {self.name}: "
                f"{', '.join(self.supported_dtypes)}"
            )
        return self.peak_flops_per_s[d]

    @property
    def ici_link_bandwidth_bidi_bytes_per_s(self) -> float | None:
        """Both directions of one ICI link together (book ch. 2: 'bidi' = 2 × one-way)."""
        w = self.ici_link_bandwidth_oneway_bytes_per_s
        return None if w is None else 2 * w

    @property
    def pod_chips(self) -> int | None:
        return None if self.pod_shape is None else math.prod(self.pod_shape)

    def critical_intensity(self, dtype: str = "bf16") -> float:
        """α_hbm = peak FLOPs/s ÷ HBM bytes/s, in FLOPs per byte (v5e bf16: ≈240; book ch. 1)."""
        return self.peak_flops(dtype) / self.hbm_bandwidth_bytes_per_s
