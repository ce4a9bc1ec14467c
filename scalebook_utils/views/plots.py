"""`plots`, a façade: the figures of chapters 1–3 under the one name the notebooks import.

Nothing is defined here. Every figure builder is re-exported from its chapter's module (docs/conventions.md:
a new chapter's figures go in their own `views/chNN_topic.py`, not here):

- `views/ch01_roofline_plots.py` — `roofline_figure`, `measured_roofline_figure`, `REGION_COLORS` (book ch. 1,
  "Visualizing rooflines"); `views/ch01_figures.py` — `achievable_flops_figure`, `time_bars`,
  `two_chip_figure`, `critical_batch_figure` (ch. 1, "Matrix multiplication", "Network communication rooflines");
- `views/ch02_systolic.py` — `systolic_frame_figure`, `systolic_utilisation_figure` (ch. 2, Appendix B);
  `views/ch02_tpus.py` — `torus_figure`, `bandwidth_hierarchy_figure` (ch. 2);
- `views/ch03_sharding.py` — `sharding_blocks_figure` (ch. 3); `views/ch03_collectives.py` —
  `collective_time_figure`, `allgather_axes_figure`, `ALLGATHER_AXES`, `collective_knee_bytes` (ch. 3);
- `views/_kit.py` — `si_scale`, `si_tick`, `new_figure`, `SHARD_COLORS`; and from `core` (pure facts the
  figures draw): `torus_path`, `torus_route_args`, `ring_hops` (`core.topology`), `bandwidth_channels`,
  `VMEM_TO_HBM_RATIO` (`core.hardware`).

Every builder returns a `matplotlib.figure.Figure` made without pyplot, so nothing is registered in
pyplot's figure manager (no leaks, no `plt.close` needed) and `fig.savefig(...)` works headless with
any backend. Builders that draw into one panel also accept `ax=` so widgets can combine them.
"""

from __future__ import annotations

# The names below the API were the pre-split module's own imports; they stay so `plots.X` resolves as before.
import math  # noqa: F401 - kept name (see above)
from collections.abc import Mapping, Sequence  # noqa: F401 - kept names (see above)

import numpy as np  # noqa: F401 - kept name (see above)
from matplotlib.figure import Figure  # noqa: F401 - kept name (see above)
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: F401 - kept names (see above)

from scalebook_utils.core import roofline  # noqa: F401 - kept name (see above)
from scalebook_utils.core.hardware import (  # noqa: F401 - ChipSpec, get_chip: kept names (see above)
    VMEM_TO_HBM_RATIO,
    ChipSpec,
    bandwidth_channels,
    get_chip,
)
from scalebook_utils.core.topology import ring_hops, torus_path, torus_route_args
from scalebook_utils.core.units import format_si  # noqa: F401 - kept name (see above)
from scalebook_utils.views._kit import SHARD_COLORS, new_figure, si_scale, si_tick
from scalebook_utils.views.ch01_figures import (
    achievable_flops_figure,
    critical_batch_figure,
    time_bars,
    two_chip_figure,
)
from scalebook_utils.views.ch01_roofline_plots import REGION_COLORS, measured_roofline_figure, roofline_figure
from scalebook_utils.views.ch02_systolic import systolic_frame_figure, systolic_utilisation_figure
from scalebook_utils.views.ch02_tpus import bandwidth_hierarchy_figure, torus_figure
from scalebook_utils.views.ch03_collectives import (
    ALLGATHER_AXES,
    allgather_axes_figure,
    collective_knee_bytes,
    collective_time_figure,
)
from scalebook_utils.views.ch03_sharding import sharding_blocks_figure

__all__ = [
    # chapter 1 (views/ch01_roofline_plots.py, views/ch01_figures.py)
    "REGION_COLORS",
    "roofline_figure",
    "achievable_flops_figure",
    "time_bars",
    "measured_roofline_figure",
    "two_chip_figure",
    "critical_batch_figure",
    # chapter 2 (views/ch02_systolic.py, views/ch02_tpus.py)
    "systolic_frame_figure",
    "systolic_utilisation_figure",
    "torus_figure",
    "bandwidth_hierarchy_figure",
    # chapter 3 (views/ch03_sharding.py, views/ch03_collectives.py)
    "SHARD_COLORS",
    "sharding_blocks_figure",
    "collective_knee_bytes",
    "collective_time_figure",
    "ALLGATHER_AXES",
    "allgather_axes_figure",
    # the kit and core
    "si_scale",
    "si_tick",
    "new_figure",
    "torus_path",
    "torus_route_args",
    "ring_hops",
    "bandwidth_channels",
    "VMEM_TO_HBM_RATIO",
]
