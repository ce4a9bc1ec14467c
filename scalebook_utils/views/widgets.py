"""`widgets`, a façade: the widgets of chapters 1–3 under the one name the notebooks import.

Nothing is defined here. Every name is re-exported from the module it lives in, one per chapter over the
shared kit (docs/conventions.md: a new chapter's widgets go in their own `views/chNN_topic.py`, not here):

- `views/ch01_rooflines.py` — the roofline explorer, the intensity placer, the two-chip roofline (book ch. 1);
- `views/ch02_tpus.py` — the slice calculator and the torus explorer (ch. 2);
- `views/ch03_sharding.py` — the sharding explorer; `views/ch03_collectives.py` — the collective-cost explorer (ch. 3);
- `views/_kit.py` — `show`, `static_png`, `INPUT_ERRORS` and the plumbing every chapter's view shares;
  `views/live_figure.py` — `LiveFigure`, `SCREEN_DPI`.

Every widget has three layers (DESIGN §3):

- a pure *readout* function that returns one deterministic line of text (tests call it directly; a
  browser test waits for its prefix, e.g. ``roofline explorer: B=``);
- a pure *render* function that returns a matplotlib Figure for the same inputs;
- a *builder* that wires ipywidgets controls to both and returns the container widget. The container
  carries ``.controls`` (name → control widget), ``.output`` (the Output widget), ``.readout()`` (the
  readout for the current control values), ``.last_readout`` (the line the view printed most recently)
  and ``.snapshot()`` (the figure the view drew most recently as an ``IPython.display.Image`` — right
  after building, the default state).

A view draws through its container's `LiveFigure` (``box.live_figure``, made by `_kit.emit`): one figure per
widget at `SCREEN_DPI`, laid out once per `key` (the arguments its layout depends on), and after that a slider
step rasterises only the parts of the new render that differ from the last one over a kept background. The
render functions stay pure (a new Figure per call) and ``box.render()`` gives the figure for the current values.

``show(widget)`` displays a widget once: one output holding both the live widget (what a running
kernel's front end draws) and the PNG of its default state (what GitHub, nbviewer and a notebook opened
without a kernel draw). ``static_png(fig)`` turns a figure into an ``IPython.display.Image``.

A builder looks its render up in its own chapter module, so a test that replaces one (monkeypatch) patches
it there (`views.ch01_rooflines.render_explorer`, `views.ch03_collectives.render_collective`), not on this
façade nor on a chapter module that only re-exports it.
"""

from __future__ import annotations

# The names below the API were the pre-split module's own imports; they stay so `widgets.X` resolves as before.
import math  # noqa: F401 - kept name (see above)
from collections.abc import Mapping  # noqa: F401 - kept name (see above)

from IPython.display import clear_output  # noqa: F401 - kept name (see above)
from matplotlib.figure import Figure  # noqa: F401 - kept name (see above)

from scalebook_utils.core import roofline, topology  # noqa: F401 - kept names (see above)
from scalebook_utils.core.collectives import KINDS  # noqa: F401 - kept name (see above)
from scalebook_utils.core.hardware import CHIPS, ChipSpec, get_chip  # noqa: F401 - kept names (see above)
from scalebook_utils.core.units import format_flops, format_si, format_time  # noqa: F401 - kept names (see above)
from scalebook_utils.views import plots  # noqa: F401 - kept name (see above)
from scalebook_utils.views._kit import (  # noqa: F401 - attach … plain_formatter: kept names (see above)
    INPUT_ERRORS,
    attach,
    emit,
    error_text,
    format_number,
    message_figure,
    plain_formatter,
    show,
    static_png,
)
from scalebook_utils.views.ch01_rooflines import (
    EXPLORER_MODES,
    EXPLORER_PREFIX,
    PLACER_PRESETS,
    chips_for_mode,
    explorer_readout,
    intensity_placer,
    placer_readout,
    render_explorer,
    render_placer,
    render_two_chip,
    roofline_explorer,
    two_chip_explorer,
    two_chip_readout,
)
from scalebook_utils.views.ch02_tpus import (
    SLICE_PREFIX,
    TORUS_PREFIX,
    render_slice,
    render_torus,
    slice_calculator,
    slice_readout,
    torus_explorer,
    torus_readout,
)
from scalebook_utils.views.ch03_collectives import (
    COLLECTIVE_KINDS,
    COLLECTIVES_PREFIX,
    collective_cost_explorer,
    collective_readout,
    render_collective,
)
from scalebook_utils.views.ch03_sharding import (
    SHARDING_MESHES,
    SHARDING_PREFIX,
    SHARDING_PRESETS,
    compile_matmul,
    matmul_text,
    render_sharding,
    sharding_details,
    sharding_explorer,
    sharding_readout,
)
from scalebook_utils.views.live_figure import SCREEN_DPI, LiveFigure

__all__ = [
    # the kit
    "static_png",
    "show",
    "INPUT_ERRORS",
    "SCREEN_DPI",
    "LiveFigure",
    # chapter 1 (views/ch01_rooflines.py)
    "EXPLORER_PREFIX",
    "EXPLORER_MODES",
    "PLACER_PRESETS",
    "chips_for_mode",
    "explorer_readout",
    "render_explorer",
    "roofline_explorer",
    "placer_readout",
    "render_placer",
    "intensity_placer",
    "two_chip_readout",
    "render_two_chip",
    "two_chip_explorer",
    # chapter 2 (views/ch02_tpus.py)
    "SLICE_PREFIX",
    "TORUS_PREFIX",
    "slice_readout",
    "render_slice",
    "slice_calculator",
    "torus_readout",
    "render_torus",
    "torus_explorer",
    # chapter 3 (views/ch03_sharding.py, views/ch03_collectives.py)
    "SHARDING_PREFIX",
    "COLLECTIVES_PREFIX",
    "SHARDING_MESHES",
    "SHARDING_PRESETS",
    "COLLECTIVE_KINDS",
    "matmul_text",
    "compile_matmul",
    "sharding_readout",
    "sharding_details",
    "render_sharding",
    "sharding_explorer",
    "collective_readout",
    "render_collective",
    "collective_cost_explorer",
]
