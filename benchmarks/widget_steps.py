"""Every widget's slider step, timed as the live kernel runs it (imported by benchmarks/run.py, section `widgets`).

A step is one `control.value = v`: ipywidgets calls the view synchronously, which evaluates the model, redraws the
figure and PNG-encodes it (`widgets._emit`), exactly what a kernel does when the browser moves a slider. The
browser round trip (sending the PNG, painting it) is not included.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import time


def _cases():
    """(widget, chapter, builder, control name, values to step through[, reset before each step])."""
    from scalebook_utils import applied_inference_views as aiv
    from scalebook_utils import applied_training_views as atv
    from scalebook_utils import attention_views as av
    from scalebook_utils import capstone_views as cv
    from scalebook_utils import gpu_views as gv
    from scalebook_utils import inference_views as iv
    from scalebook_utils import training_views as trv
    from scalebook_utils import transformer_views as tv
    from scalebook_utils import widgets as wd

    return [
        ("roofline_explorer", 1, wd.roofline_explorer, "B", [1, 16, 64, 240, 256, 512, 1024, 2048, 4096, 128]),
        ("intensity_placer", 1, wd.intensity_placer, "intensity", [0.1, 1.0, 10.0, 100.0, 240.0, 1000.0, 0.5]),
        ("two_chip_explorer", 1, wd.two_chip_explorer, "W", [1e10, 2e10, 1e11, 2e11, 4.5e10]),
        ("torus_explorer", 2, wd.torus_explorer, "dst", ["1,1", "2,3", "3,0", "0,2", "3,3"]),
        (
            "slice_calculator",
            2,
            lambda: wd.slice_calculator(shape="16x16"),
            "shape",
            ["8x8", "4x4", "16x8", "8x16", "16x16"],
        ),
        (
            "sharding_explorer",
            3,
            lambda: wd.sharding_explorer(compile=False),
            "preset",
            list(wd.SHARDING_PRESETS)[::-1],
        ),
        ("collective_cost_explorer", 3, wd.collective_cost_explorer, "n_bytes", [1e3, 1e4, 1e5, 1e7, 1e8, 1e9, 1e6]),
        ("calculator_widget", 4, tv.calculator_widget, "T", [2.0**k for k in (7, 10, 13, 16, 20, 12)]),
        ("intensity_widget", 4, av.intensity_widget, "chip", ["tpu-v6e", "tpu-v5p", "h100", "tpu-v5e"]),
        ("flash_widget", 4, av.flash_widget, "step", [1, 2, 3, 4]),
        ("training_picture", 5, trv.training_picture, "B", [100.0, 300.0, 1000.0, 3000.0, 850.0]),
        ("planner_widget", 5, trv.planner_widget, "slices", [2, 4, 8, 16, 1]),
        ("budget_widget", 6, atv.budget_widget, "MFU", [0.3, 0.5, 0.6, 0.35, 0.4]),
        ("step_time_widget", 7, iv.step_time_widget, "B", [1, 8, 64, 120, 16, 32]),
        ("kv_explorer", 7, iv.kv_explorer, "B", [1, 16, 32, 64, 4, 8]),
        (
            "frontier_widget",
            7,
            lambda: iv.frontier_widget(max_latency=0.005, compare_precisions=True),
            "S",
            [2048, 4096, 16384, 32768, 8192],
        ),
        ("context_pareto_widget", 7, iv.context_pareto_widget, "S", [2048, 4096, 16384, 32768, 8192]),
        ("tp_check_widget", 8, aiv.tp_check_widget, "B", [16, 32, 128, 200, 64]),
        ("disaggregation_widget", 8, aiv.disaggregation_widget, "decode", [128, 1024, 2048, 4096, 512]),
        (
            "plan_app (figure)",
            11,
            cv.plan_app,
            "serve_chip",
            ["h100", "tpu-v5p", "tpu-v6e", "tpu-v5e"],
            cv._figure_png_cached.cache_clear,
        ),
        ("plan_app (text only)", 11, cv.plan_app, "mfu", [0.45, 0.5, 0.35, 0.4]),
        ("topology_explorer", 12, gv.topology_explorer, "n_sus", [1, 2, 3, 6, 8, 4]),
        ("gpu_collective_widget", 12, gv.gpu_collective_widget, "n_bytes", [1e5, 1e6, 1e7, 1e8, 1e10, 1e9]),
    ]


def measure(n_steps: int = 20, only: str | None = None) -> list[dict]:
    """Build each widget, then time `n_steps` steps of its control (cycling its values). One dict per widget:
    name, chapter, control, median_s, max_s, cpu_median_s (process CPU time), n, build_s, full_draws (steps that
    drew the whole figure; the others redrew what moved, see `widgets.LiveFigure`)."""
    rows = []
    for name, chapter, build, control, values, *rest in _cases():
        reset = rest[0] if rest else None
        if only and only not in name:
            continue
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink):
            t0 = time.perf_counter()
            w = build()
            build_s = time.perf_counter() - t0
            c = w.controls[control]
            c.value = values[0]  # warm: first-use caches (fonts, glyphs, a plan) are not a step
            times, cpus = [], []
            live = getattr(w, "live_figure", None)
            draws0 = live.full_draws if live is not None else None
            for i in range(n_steps):
                v = values[(i + 1) % len(values)]
                if v == c.value:
                    v = values[(i + 2) % len(values)]
                if reset is not None:
                    reset()  # e.g. the capstone's figure cache: every step draws
                t, cpu = time.perf_counter(), time.process_time()
                c.value = v
                times.append(time.perf_counter() - t)
                cpus.append(time.process_time() - cpu)

        rows.append(
            dict(
                name=name,
                chapter=chapter,
                control=control,
                median_s=statistics.median(times),
                max_s=max(times),
                cpu_median_s=statistics.median(cpus),
                n=n_steps,
                build_s=build_s,
                full_draws=live.full_draws - draws0 if live is not None else n_steps,
            )
        )
    return rows


if __name__ == "__main__":  # python benchmarks/widget_steps.py [N] [name fragment]
    import sys

    for r in measure(int(sys.argv[1]) if len(sys.argv) > 1 else 10, sys.argv[2] if len(sys.argv) > 2 else None):
        print(
            f"{r['name']:28s} ch{r['chapter']:<3d} {r['control']:10s} median {r['median_s'] * 1e3:7.1f} ms  "
            f"max {r['max_s'] * 1e3:7.1f} ms  cpu {r['cpu_median_s'] * 1e3:7.1f} ms  full {r['full_draws']}/{r['n']}  build {r['build_s'] * 1e3:6.0f} ms",
            flush=True,
        )
