"""Chapter 6's numbers live in core (core/training/applied.py, public name `applied_training`): computable without
matplotlib or ipywidgets, and the views show exactly these objects (tests/test_applied_training_views.py, which
needs ipywidgets, checks the readouts and figures built on them)."""

import math
import subprocess
import sys

import pytest

from scalebook_utils import applied_training as A
from scalebook_utils import training as T
from scalebook_utils import transformer as tf
from scalebook_utils.core.training import applied


def test_the_chapter_6_numbers_import_without_a_plotting_library():
    code = (
        "import sys; from scalebook_utils import applied_training as A\n"
        "rows = A.decision_path('llama3-70b', 4 * 2**20, 4096, 'tpu-v5p')\n"
        "print(A.min_chips_for_model(), [r['feasible'] for r in rows],\n"
        "      sorted(m for m in ('matplotlib', 'ipywidgets', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "122 [False, True, True] []"


def test_the_flat_name_is_the_core_module():
    assert A is applied


def test_param_breakdown_book_numbers():
    d = A.param_breakdown("llama3-70b")
    assert d["FFW (MLP)"] == 3 * 80 * 8192 * 28_672
    assert d["vocab (embed + unembed)"] == 2 * 128_256 * 8192
    assert d["attention"] == 80 * (2 * 8192 * 64 * 128 + 2 * 8192 * 8 * 128)
    assert d["norms"] == (2 * 80 + 1) * 8192
    assert sum(d.values()) == tf.param_count("llama3-70b").total == pytest.approx(70.6e9, rel=0.01)


def test_days_to_train_book_numbers():
    # ch6.iq4: 6 · 70.6e9 · 15e12 FLOPs on 8960 v5p chips at 40% MFU → ~44 days
    assert A.days_to_train("llama3-70b", 15e12, 8960, "tpu-v5p", 0.4) == pytest.approx(44.7, rel=0.01)
    P = tf.param_count("llama3-70b").total
    assert A.days_to_train() == pytest.approx(6 * P * 15e12 / (8960 * 4.59e14 * 0.4) / 86_400, rel=1e-3)
    assert A.days_to_train(n_chips=4480) == pytest.approx(2 * A.days_to_train())


def test_memory_per_chip_and_min_chips_book_numbers():
    m = A.memory_per_chip("llama3-70b", 4 * 2**20, 8960, 2)
    P = tf.param_count("llama3-70b").total
    assert m["params"] == pytest.approx(2 * P / 8960) and m["optimizer"] == pytest.approx(8 * P / 8960)
    assert m["activations"] == pytest.approx(2 * 8192 * 4 * 2**20 * 2 * 80 / 8960)  # 2·D·B·(checkpoints)·L / N
    assert sum(m.values()) == pytest.approx(1.31e9, rel=0.01)  # ch6.iq6
    total = sum(A.memory_per_chip("llama3-70b", 4 * 2**20, 1, 2).values())
    assert A.min_chips_for_model("llama3-70b", 4 * 2**20, 2, "tpu-v5p") == 122 == math.ceil(total / 96e9)  # ch6.iq5


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "llama3-405b"])
@pytest.mark.parametrize("chip", ["tpu-v5p", "tpu-v5e"])
@pytest.mark.parametrize("checkpoints", [1, 4])
def test_min_chips_for_model_is_training_min_chips_for_memory_of_the_total(model, chip, checkpoints):
    total = sum(A.memory_per_chip(model, 2**22, 1, checkpoints).values())
    assert A.min_chips_for_model(model, 2**22, checkpoints, chip) == T.min_chips_for_memory(total, chip)


def test_decision_path_book_narrative():
    rows = A.decision_path("llama3-70b", 4 * 2**20, 4096, "tpu-v5p")
    assert [r["step"] for r in rows] == [
        "pure FSDP, batch only",
        "FSDP over batch and sequence",
        "FSDP + TP (planner's split)",
    ]
    assert [r["feasible"] for r in rows] == [False, True, True]
    assert "1024 sequences" in rows[0]["estimate"].reason  # ch6.iq7
    assert rows[1]["verdict"] == "communication-bound (468 < 850)"  # ch6.iq8
    assert rows[2]["verdict"] == "compute-bound (468 > 113)"  # ch6.iq9
    assert rows[2]["config"] == "FSDP 2240 × TP 4"
    assert math.isnan(rows[0]["step_s"]) and rows[0]["bound"] == "-"
    assert rows[1]["threshold"][0] == "α/M_X" and rows[2]["threshold"][0] == "α²/(M_X·M_Y·F)"


def test_the_views_show_the_core_objects():
    pytest.importorskip("ipywidgets")
    from scalebook_utils import applied_training_views as views

    for name in ("param_breakdown", "days_to_train", "memory_per_chip", "min_chips_for_model", "decision_path"):
        assert getattr(views, name) is getattr(applied, name), name
    assert not hasattr(views, "min_chips_for_memory")  # that name is training's (total bytes, chip)
    assert views.get_plan is T.cached_plan
