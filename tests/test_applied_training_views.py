"""Chapter 6 views: parameters, days to train, memory, the budget widget and the decision path (`applied_training_views`)."""

import math
import re

import pytest

pytest.importorskip("ipywidgets")

from figure_support import _draw, _is_message, _labelled  # noqa: E402
from IPython.display import Image  # noqa: E402

from scalebook_utils import applied_training_views as A  # noqa: E402


def test_param_breakdown_book_numbers():
    d = A.param_breakdown("llama3-70b")
    assert d["FFW (MLP)"] == 3 * 80 * 8192 * 28_672
    assert d["vocab (embed + unembed)"] == 2 * 128_256 * 8192
    assert d["attention"] == 80 * (2 * 8192 * 64 * 128 + 2 * 8192 * 8 * 128)
    assert sum(d.values()) == pytest.approx(70.6e9, rel=0.01)
    fig = _draw(A.render_param_breakdown(("llama3-70b", "llama3-405b")))
    assert len(fig.axes) == 2 and all(len(ax.patches) == 4 for ax in fig.axes)
    assert fig.axes[0].get_xlabel() == "parameters (billions)" and "70.6 B" in fig.axes[0].get_title()
    assert _is_message(A.render_param_breakdown("nope"))


def test_days_and_memory_book_numbers():
    # ch6.iq4: 8960 chips at 40% MFU → ~44 days (6.3e24 FLOPs)
    assert A.days_to_train("llama3-70b", 15e12, 8960, "tpu-v5p", 0.4) == pytest.approx(44.7, rel=0.01)
    m = A.memory_per_chip("llama3-70b", 4 * 2**20, 8960, 2)
    assert sum(m.values()) == pytest.approx(1.31e9, rel=0.01)  # ch6.iq6
    assert A.min_chips_for_model("llama3-70b", 4 * 2**20, 2, "tpu-v5p") == 122  # ch6.iq5: ≈ 11.7 TB / 96 GB
    line = A.budget_readout()
    assert line.startswith("training budget: llama3-70b, 15 T tokens, chips=8960, MFU=40% → 44.7 days")
    assert "1.31 GB/chip (fits in 96 GB)" in line and "≥ 122 chips" in line
    assert "cannot evaluate: unknown model" in A.budget_readout("nope")


def test_days_and_memory_figures():
    fig = _draw(A.render_days_to_train("llama3-70b", mfus=(0.2, 0.4, 0.6)))
    ax = fig.axes[0]
    _labelled(ax)
    assert ax.get_xscale() == "log" and len(ax.get_legend_handles_labels()[1]) == 3
    assert any("8,960" in t.get_text() for t in ax.texts)  # the full pod marked
    fig = _draw(A.render_memory_vs_checkpoints("llama3-70b", n_chips=256, checkpoints=(1, 2, 4, 8)))
    ax = fig.axes[0]
    _labelled(ax)
    assert len(ax.patches) == 3 * 4  # params, optimizer, activations stacked for 4 settings
    assert any("HBM" in lbl for lbl in ax.get_legend_handles_labels()[1])
    assert ax.get_ylim()[1] > 96  # some bars exceed HBM on 256 chips: the HBM line is drawn to scale
    ticks = [t.get_text() for t in _draw(A.render_memory_vs_checkpoints("llama3-70b")).axes[0].get_xticklabels()]
    assert ticks == [str(k) for k in range(1, 9)]  # every count 1…8, evenly spaced (no missing 7)
    budget = _draw(A.render_budget())
    assert len(budget.axes) == 2
    right = budget.axes[1]  # 8960 chips: ≈ 0.7–5 GB per chip against 96 GB of HBM
    assert right.get_ylim()[1] < 10, right.get_ylim()  # zoomed onto the bars, HBM named in the legend
    assert any("HBM" in lbl and "off this scale" in lbl for lbl in right.get_legend_handles_labels()[1])
    assert [t.get_text() for t in right.get_xticklabels()] == [str(k) for k in range(1, 9)]
    assert _is_message(A.render_budget("nope"))


def test_budget_widget_updates():
    w = A.budget_widget()
    first = w.last_readout
    w.controls["chips"].value = 4480
    assert "chips=4480" in w.last_readout and w.last_readout != first
    w.controls["MFU"].value = 0.5
    assert "MFU=50%" in w.last_readout
    assert isinstance(w.snapshot(), Image)


def test_decision_path_book_narrative():
    rows = A.decision_path("llama3-70b", 4 * 2**20, 4096, "tpu-v5p")
    assert [r["feasible"] for r in rows] == [False, True, True]
    assert "1024 sequences" in rows[0]["estimate"].reason  # ch6.iq7
    assert rows[1]["verdict"] == "communication-bound (468 < 850)"  # ch6.iq8
    assert rows[2]["verdict"] == "compute-bound (468 > 113)"  # ch6.iq9
    assert rows[2]["config"] == "FSDP 2240 × TP 4"
    text = A.decision_path_text()
    assert re.search(r"FSDP over batch and sequence\s+FSDP 8960", text) and "why infeasible" in text
    assert math.isnan(rows[0]["step_s"])
