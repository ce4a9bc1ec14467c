"""The numbers behind chapter 5's pictures and tables (book ch. 5, "How to Parallelize a Transformer for
Training"), pure: what `views.ch05_training` (public name `training_views`) draws and prints, testable
without matplotlib or ipywidgets.

- `slice_info`: a slice such as "16x20x28" as (chip, shape, N chips, axes with more than one chip = M_X).
- `picture_ratios`, `picture_thresholds`, `rank_schemes`: the chapter's central picture, T_math / T_comms of
  DP, FSDP, TP and FSDP+TP at a batch per chip B/N (`training.comms_ratio`), its thresholds (α/M_X,
  α²/(M_X·M_Y·F), TP's largest degree F/α) and the schemes ranked best first.
- `step_time_curves`: per-layer T_math and each scheme's T_comms of a training step against the total batch B
  (book figure "math-comms-time"), FSDP+TP at its best X·Y split.
- `threshold_rows`: the compute-bound thresholds of several chips as text cells.
- `model_name`: a model's name for a readout, whether given by name or as a `TransformerConfig`.

Notation as in `training_costs`: B tokens per batch, D, F; N chips; X data, Y tensor degrees; C/W_ici = α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scalebook_utils.core import topology
from scalebook_utils.core import transformer as tf
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.training import planner as training
from scalebook_utils.core.units import format_si

__all__ = [
    "SCHEMES",
    "slice_info",
    "picture_ratios",
    "picture_thresholds",
    "rank_schemes",
    "best_mixed_split",
    "step_time_curves",
    "threshold_rows",
    "model_name",
]

#: The chapter's four schemes, as `training.STRATEGIES` spells them → how the book writes them.
SCHEMES = {"dp": "DP", "fsdp": "FSDP", "tp": "TP", "fsdp+tp": "FSDP+TP"}


def model_name(model) -> str:
    """The name a readout shows for `model`: a `TransformerConfig`'s `.name`, else the text given."""
    return model.name if isinstance(model, tf.TransformerConfig) else str(model)


# --- the chapter's central picture: T_math / T_comms against the batch per chip -------------------------


def slice_info(chip="tpu-v5p", shape="4x4x4") -> tuple[str, tuple[int, ...], int, int]:
    """(chip name, shape, N chips, hardware axes with more than one chip) of a slice such as "16x20x28".

    The number of axes is the M that DP/FSDP spread over (book ch. 5: M_X = 3 on a 3-D slice).
    Raises ValueError for a shape that is not a shape or does not fit the chip's pod.
    """
    s = topology.make_slice(chip, shape)
    return s.chip, s.shape, s.n_chips, max(1, sum(n > 1 for n in s.shape))


def picture_ratios(chip="tpu-v5p", shape="4x4x4", F: float = 30_000, batch_per_chip: float = 850) -> dict[str, float]:
    """T_math / T_comms of each scheme at a batch per chip B/N (`training.comms_ratio`, forward pass).

    DP and FSDP have the same ratio (DP's backward AllReduce against its backward FLOPs); TP uses Y = N on
    one axis; FSDP+TP the optimal real-valued split (M_X = axes − 1, M_Y = 1). Book ch. 5, central figure.
    """
    name, _shape, N, n_axes = slice_info(chip, shape)
    return {s: training.comms_ratio(s, batch_per_chip, F, N, name, n_axes=n_axes) for s in SCHEMES}


def picture_thresholds(chip="tpu-v5p", shape="4x4x4", F: float = 30_000) -> dict[str, float]:
    """The batch-per-chip thresholds of the picture: FSDP α/M_X, FSDP+TP α²/(M_X·M_Y·F), and TP's F/α (max Y)."""
    name, _shape, _N, n = slice_info(chip, shape)
    return {
        "fsdp": training.dp_min_batch_per_chip(name, n),
        "fsdp+tp": training.mixed_min_batch_per_chip(F, name, max(n - 1, 1), 1),
        "tp_max_Y": training.tp_max_degree(F, name, 1),
    }


def rank_schemes(ratios: dict[str, float]) -> list[str]:
    """The schemes of `ratios` (T_math / T_comms), best (largest ratio) first.

    Ties go to the simpler scheme: past X_opt = N the best mixed split *is* pure FSDP; ZeRO-3 over plain DP.
    """
    order = ["fsdp", "dp", "fsdp+tp", "tp"]
    return sorted(ratios, key=lambda s: (-ratios[s], order.index(s)))


# --- step time against the total batch (book figure "math-comms-time") ----------------------------------


def best_mixed_split(B, D, F, N, chip, n_axes):
    """(X, Y, LayerCosts) of the FSDP+TP split (1 < X < N, X·Y = N) with the least communication per layer and
    step, FSDP over n_axes − 1 axes and TP over one; None when N has no such divisor (N prime or N ≤ 3)."""
    best = None
    for X in (d for d in range(2, N) if N % d == 0):
        c = training.layer_costs(
            "fsdp+tp", B, D, F, N, X=X, Y=N // X, chip=chip, M_X=max(n_axes - 1, 1), M_Y=1, phase="step"
        )
        if best is None or c.t_comms < best[2].t_comms:
            best = (X, N // X, c)
    return best


def step_time_curves(
    chip="tpu-v5p", shape="16x16x16", D: int = 8192, F: int = 32_768, batches: Sequence[float] = ()
) -> dict:
    """Per-layer times of a training step (forward + backward, `layer_costs(phase="step")`) at each total batch.

    Returns {"B": array, "math": T_math, "dp"/"fsdp"/"tp"/"fsdp+tp": T_comms arrays, "split": [(X, Y)]}.
    DP and FSDP spread over all the slice's axes, TP (Y = N) and the TP part of FSDP+TP over one axis, the
    FSDP part over the rest; FSDP+TP takes, at each B, the divisor split with the least communication.
    """
    name, _shp, N, n = slice_info(chip, shape)
    B = np.asarray(batches, dtype=float)
    out = {"B": B, "math": [], "dp": [], "fsdp": [], "tp": [], "fsdp+tp": [], "split": []}
    for b in B:
        dp = training.layer_costs("dp", b, D, F, N, chip=name, M_X=n, phase="step")
        out["math"].append(dp.t_math)
        out["dp"].append(dp.t_comms)
        out["fsdp"].append(training.layer_costs("fsdp", b, D, F, N, chip=name, M_X=n, phase="step").t_comms)
        out["tp"].append(training.layer_costs("tp", b, D, F, N, chip=name, M_Y=1, phase="step").t_comms)
        mixed = best_mixed_split(b, D, F, N, name, n)
        out["fsdp+tp"].append(mixed[2].t_comms if mixed else math.nan)
        out["split"].append(mixed[:2] if mixed else None)
    for k in ("math", *SCHEMES):
        out[k] = np.asarray(out[k])
    return out


# --- thresholds for several chips ----------------------------------------------------------------------


def threshold_rows(
    chips: Sequence[str] = ("tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x"), F: float = 28_672
) -> list[dict[str, str]]:
    """Per chip, as text cells: α, the DP/FSDP batch per chip on 1 axis and on all axes, TP's largest degree for
    `F`, the FSDP+TP batch per chip (M_X = axes − 1, M_Y = 1), the pod batch FSDP needs, and C/W_dcn per slice."""
    rows = []
    for c in chips:
        spec = get_chip(c)
        n = spec.ici_torus_dims
        a = training.alpha(spec)
        rows.append(
            {
                "chip": spec.name,
                "α = C/W_ici": f"{a:,.0f}",
                "DP/FSDP 1 axis": f"{a:,.0f}",
                "all axes": f"{training.dp_min_batch_per_chip(spec, n):,.0f} ({n})",
                "TP max Y (1 axis)": f"{training.tp_max_degree(F, spec, 1):.1f}",
                "FSDP+TP": f"{training.mixed_min_batch_per_chip(F, spec, max(n - 1, 1), 1):,.0f}",
                "FSDP pod batch": format_si(spec.pod_chips * training.dp_min_batch_per_chip(spec, n), digits=3),
                "DCN tokens/slice": f"{training.alpha_dcn(spec):,.0f}",
            }
        )
    return rows
