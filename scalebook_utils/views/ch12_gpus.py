"""Views for chapter 12 (GPUs): a topology explorer (node → scalable unit → pod) and a GPU collective-cost
widget, plus figures of the chapter's rooflines — readouts, figures and widgets over `gpus`.

`gpu_views`, a façade: nothing is defined here. Every name is re-exported from the module of the book section it
belongs to (book ch. 12 "How to Think About GPUs"):

- `views/ch12_networks.py` — "Networking": the topology explorer, `CLUSTER_CHIPS` (from `gpu_network`);
- `views/ch12_collectives.py` — "How Do Collectives Work on GPUs?": the collective-cost widget and the sharded
  AllGather figure;
- `views/ch12_rooflines.py` — "Rooflines for LLM Scaling on GPUs": the data-parallel critical batch, the roofline
  calculator and the pipeline schedules.

The same three layers as `training_views` (DESIGN §3): a pure *readout* returning one deterministic line with a
fixed prefix, a *render* function returning a matplotlib Figure, and a *builder* wiring ipywidgets controls to
both (`_kit.attach` / `_kit.emit`). Bad input (an unknown GPU, more GPUs than the pod holds) gives a
readable line and a message figure, never an exception. A builder looks its render up in its own section
module, so a test that replaces one (monkeypatch) patches it there, not on this façade.
"""

from __future__ import annotations

from scalebook_utils.views.ch12_collectives import (
    GPU_COLLECTIVE_PREFIX,
    gpu_collective_readout,
    gpu_collective_widget,
    render_gpu_collective,
    render_sharded_all_gather,
)
from scalebook_utils.views.ch12_networks import (
    CLUSTER_CHIPS,
    TOPOLOGY_PREFIX,
    render_topology,
    topology_explorer,
    topology_readout,
    topology_rows,
)
from scalebook_utils.views.ch12_rooflines import (
    GPU_ROOFLINE_PREFIX,
    gpu_roofline_readout,
    gpu_roofline_widget,
    render_dp_thresholds,
    render_gpu_roofline,
    render_pipeline_schedules,
)

__all__ = [
    "TOPOLOGY_PREFIX",
    "GPU_COLLECTIVE_PREFIX",
    "CLUSTER_CHIPS",
    "topology_rows",
    "topology_readout",
    "render_topology",
    "topology_explorer",
    "gpu_collective_readout",
    "render_gpu_collective",
    "gpu_collective_widget",
    "render_dp_thresholds",
    "render_sharded_all_gather",
    "GPU_ROOFLINE_PREFIX",
    "gpu_roofline_readout",
    "render_gpu_roofline",
    "gpu_roofline_widget",
    "render_pipeline_schedules",
]
