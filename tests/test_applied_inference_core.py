"""Chapter 8's numbers live in core (core/inference/applied.py): computable without matplotlib, and the
views show exactly these objects (issue 16 item 4: the registry and the views only call the package)."""

import subprocess
import sys

from scalebook_utils.core.inference import applied


def test_the_chapter_8_numbers_import_without_a_plotting_library():
    code = (
        "import sys; from scalebook_utils.core.inference import applied as A\n"
        "d = A.disaggregation(8192, 512, 32, '4x4', '4x4', 'bf16', 0.4)\n"
        "t = A.tp_check('llama3-70b', 'tpu-v5e', '4x8', 'bf16', 64)\n"
        "print(round(d.ratio, 6) > 0, t['Y'], sorted(m for m in ('matplotlib', 'ipywidgets', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "32", "[]"]


def test_the_tp_check_follows_the_books_rules():
    t = applied.tp_check("llama3-70b", "tpu-v5e", "4x8", "bf16", 64)
    assert t["M_Y"] == 2 and t["comm_bound_large"] == (t["Y"] > t["large_limit"])
    assert t["comm_bound_small"] == (t["Y"] > t["small_limit"]) and t["bound"] == t["times"].bottleneck


def test_the_views_show_the_core_objects():
    from scalebook_utils import applied_inference_views as views

    for name in ("BOOK_70B", "tp_check", "disaggregation", "config_rows", "smallest_slice_rows", "Disaggregation"):
        assert getattr(views, name) is getattr(applied, name)
