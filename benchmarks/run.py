"""scalebook benchmarks: speed and fidelity, printed as plain-text tables (`make bench`).

Sections (run all, or one with --only NAME):
  coldstart  a fresh `python -c` doing what a chapter notebook's setup cell does (imports,
             jaxlab.use_simulated_devices(8), jaxlab.runtime()): wall seconds, and where they go.
  widgets    every widget of chapters 1–12 (benchmarks/widget_steps.py): one slider step as the kernel runs
             it (model + redraw + PNG encode), median and max ms over N steps, in one table.
  notebooks  each notebooks/*.ipynb and solutions/*.ipynb executed with nbclient from a temporary
             copy (the originals are never written): seconds each.
  matmul     book ch. 1 "predict, then measure": calibrate this machine (jaxlab.calibrate), then
             predicted T_lower = max(2BDF / C, (BD + DF + BF)·4 / W) vs measured time of X[B,D] @ W[D,F]
             for square and skinny shapes, and the median predicted / measured ratio.
  planner    training.plan and gpu_training.plan: a full layout enumeration, per layout (the book's planners and
             the unified one, incl. Llama 3 405B on 16,384 H100s).
  rosetta    published training runs (Megatron-LM, PaLM, Llama 3): reported vs the roofline of their layout.
  rosetta-inference  published inference measurements (PaLM 540B on TPU v4, Llama 2 70B on H200): reported vs
             the roofline of the same workload (inference.decode_step, prefill_time).
  frontier   serving.frontier: the latency–throughput frontier over batches and slices, per point.
  capstone   chapter 11's plan_model from cold caches (the app's update time is in `widgets`).
  decode     book ch. 7 on this CPU: the KV-cached decoder's measured step time vs the calibrated roofline per
             batch (jaxdecode.measure_decode), and prefill vs decode cost per token.
  peers      scalebook beside llm-analysis 0.2.2 and GenZ (genz-llm 0.0.16) on the same inputs, with the cause of
             each difference (benchmarks/peers.py; the peers are pip-installed into benchmarks/out/peers-venv
             by the bench only, and the section is skipped with the reason when they cannot be).

--quick: fewer repeats, a quick calibration, smaller sweeps. The tables are also written to
benchmarks/out/latest.txt (gitignored).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "latest.txt"
SECTIONS = (
    "coldstart",
    "widgets",
    "notebooks",
    "matmul",
    "planner",
    "rosetta",
    "rosetta-inference",
    "frontier",
    "capstone",
    "decode",
    "peers",
)

if str(ROOT) not in sys.path:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT))


# --- output helpers --------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list], right: set[int] | None = None) -> str:
    """Aligned plain-text table; columns in `right` (default: all but the first) are right-aligned."""
    right = set(range(1, len(headers))) if right is None else right
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def section(title: str, body: str, notes: list[str] | None = None) -> str:
    out = [f"== {title} ==", body]
    out += [f"note: {n}" for n in (notes or [])]
    return "\n".join(out) + "\n"


def _us(s: float) -> str:
    return f"{s * 1e6:,.1f}"


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f}"


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# --- (a) notebook set-up cell cold start -----------------------------------------------------------

_SETUP_CODE = textwrap.dedent("""
    import json, time
    t0 = time.perf_counter()
    stages, skipped = {}, []
    def stage(name, t):
        stages[name] = time.perf_counter() - t
    t = time.perf_counter(); import scalebook_utils, math; stage("import scalebook_utils", t)
    t = time.perf_counter(); import jax, jax.numpy as jnp; stage("import jax", t)
    t = time.perf_counter(); from scalebook_utils import hardware, roofline, units; stage("import core modules", t)
    t = time.perf_counter(); from scalebook_utils import jaxlab; stage("import jaxlab", t)
    for mod in ("plots", "widgets"):
        t = time.perf_counter()
        try:
            __import__("scalebook_utils." + mod)
            stage("import " + mod, t)
        except ImportError as e:
            skipped.append(f"{mod}: {e}")
    t = time.perf_counter(); n = jaxlab.use_simulated_devices(8); stage("use_simulated_devices(8)", t)
    t = time.perf_counter(); r = jaxlab.runtime(); line = jaxlab.describe_runtime(r); stage("runtime()", t)
    stages["total (in process)"] = time.perf_counter() - t0
    print("RESULT" + json.dumps({"stages": stages, "skipped": skipped, "n": n, "runtime": line}))
""")


def bench_coldstart(quick: bool) -> str:
    runs = 2 if quick else 5
    walls, per_stage, skipped, info = [], {}, [], ""
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-c", _SETUP_CODE], capture_output=True, text=True, cwd=ROOT, env=_clean_env(), timeout=300
        )
        wall = time.perf_counter() - t
        if p.returncode != 0 or "RESULT" not in p.stdout:
            return section("notebook set-up cell: cold start", "FAILED:\n" + p.stderr[-2000:])
        res = json.loads(p.stdout.split("RESULT", 1)[1])
        walls.append(wall)
        for k, v in res["stages"].items():
            per_stage.setdefault(k, []).append(v)
        skipped, info = res["skipped"], f"{res['runtime']} (simulated devices: {res['n']})"
    rows = [["fresh `python -c` (process start → exit)", f"{statistics.median(walls):.2f}", f"{min(walls):.2f}"]]
    rows += [[f"  {k}", f"{statistics.median(v):.2f}", f"{min(v):.2f}"] for k, v in per_stage.items()]
    notes = [f"{runs} runs; median and min wall seconds", info]
    notes += [f"skipped (module not present yet) — {s}" for s in skipped]
    return section("notebook set-up cell: cold start", table(["stage", "median s", "min s"], rows), notes)


# --- (b) every widget's slider step ------------------------------------------------------------------


def bench_widgets(quick: bool) -> str:
    """One table: each widget's step (model + redraw + PNG encode, as the kernel runs it), median and max."""
    title = "widgets (ch. 1–12): one slider step, model + redraw + PNG"
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import widget_steps

    n = 6 if quick else 20
    rows = widget_steps.measure(n)
    body = table(
        ["widget", "ch.", "control moved", "median ms", "max ms", "CPU median ms", "full draws"],
        [
            [
                r["name"],
                r["chapter"],
                r["control"],
                _ms(r["median_s"]),
                _ms(r["max_s"]),
                _ms(r["cpu_median_s"]),
                f"{r['full_draws']}/{r['n']}",
            ]
            for r in rows
        ],
        right={1, 3, 4, 5, 6},
    )
    worst = max(rows, key=lambda r: r["median_s"])
    return section(
        title,
        body,
        [
            f"{n} steps per widget after one warm-up step, cycling the control through its values; wall-clock ms "
            "(what the reader waits, minus the browser round trip) and the process's CPU ms (the same work without "
            f"other processes' load: load average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)",
            "full draws: steps that laid out and rasterised the whole figure; the others redrew only what the control "
            "moves (widgets.LiveFigure)",
            f"slowest median: {worst['name']} {_ms(worst['median_s'])} ms",
        ],
    )


# --- (c) notebook execution ------------------------------------------------------------------------


def bench_notebooks(quick: bool) -> str:
    title = "notebook execution (nbclient, temporary copies)"
    paths = [p for folder in ("notebooks", "solutions") for p in sorted(glob.glob(str(ROOT / folder / "*.ipynb")))]
    if not paths:
        return section(title, "skipped", ["no notebooks/*.ipynb or solutions/*.ipynb yet"])
    try:
        import nbformat
        from jupyter_client.manager import KernelManager
        from nbclient import NotebookClient
    except ImportError as e:
        return section(title, "skipped", [f"nbclient/nbformat missing: {e}"])
    rows, notes = [], []
    cell_timeout = 300 if quick else 600
    for path in paths:
        rel = os.path.relpath(path, ROOT)
        with tempfile.TemporaryDirectory(prefix="scalebook-bench-") as tmp:
            # a copy, in a scratch folder that is also the kernel's working directory
            copy = Path(tmp) / Path(rel).parent.name / Path(rel).name
            copy.parent.mkdir(parents=True)
            shutil.copyfile(path, copy)
            nb = nbformat.read(copy, as_version=4)
            n_code = sum(c.cell_type == "code" for c in nb.cells)
            # IPC sockets in the scratch folder instead of TCP ports: kernels started at the same time
            # by other processes (tests, other benchmarks) cannot collide with this one.
            km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(tmp) / "kernel"))
            starts, cell_s = {}, {}

            def on_start(cell, cell_index, starts=starts, **_):  # this notebook's dicts, bound now
                starts[cell_index] = time.perf_counter()

            def on_done(cell, cell_index, starts=starts, cell_s=cell_s, **_):
                cell_s[cell_index] = time.perf_counter() - starts.get(cell_index, time.perf_counter())

            client = NotebookClient(
                nb,
                km=km,
                timeout=cell_timeout,
                kernel_name="python3",
                resources={"metadata": {"path": str(copy.parent)}},
                on_cell_start=on_start,
                on_cell_executed=on_done,
            )
            t = time.perf_counter()
            status = "ok"
            try:
                client.execute()
            except Exception as e:  # noqa: BLE001 - report, don't stop the benchmark
                status = f"error: {type(e).__name__}"
                first = str(e).strip().splitlines()
                notes.append(f"{rel}: {type(e).__name__}: {first[-1] if first else ''}"[:300])
            finally:
                if km.has_kernel:  # nbclient leaves a kernel manager it was given running
                    km.shutdown_kernel(now=True)
            wall = time.perf_counter() - t
        slow = max(cell_s, key=cell_s.get) if cell_s else None
        slowest = f"#{slow}: {cell_s[slow]:.1f}" if slow is not None else "-"
        rows.append([rel, n_code, f"{wall:.1f}", f"{sum(cell_s.values()):.1f}", slowest, status])
    total = sum(float(r[2]) for r in rows)
    rows.append(["total", sum(r[1] for r in rows), f"{total:.1f}", f"{sum(float(r[3]) for r in rows):.1f}", "", ""])
    notes.append(
        "seconds: wall time including kernel start-up and shutdown; in cells: the sum over cells; "
        "slowest: cell index and its seconds. The originals are never written"
    )
    return section(
        title,
        table(["notebook", "code cells", "seconds", "in cells", "slowest cell", "status"], rows, right={1, 2, 3, 4}),
        notes,
    )


# --- (d) predicted vs measured matmuls -------------------------------------------------------------


def bench_matmul(quick: bool) -> str:
    title = "matmul: roofline prediction vs measurement on this machine (book ch. 1)"
    from scalebook_utils.roofline import matmul_roofline
    from scalebook_utils.units import format_flops, format_si

    from scalebook_utils import jaxlab

    squares = (128, 256, 512, 1024) if quick else (128, 256, 512, 1024, 2048)
    DF = 1024 if quick else 2048
    skinny_B = (1, 8, 32, 128, 512) if quick else (1, 8, 32, 128, 512, 1024)
    shapes = [(n, n, n) for n in squares] + [(b, DF, DF) for b in skinny_B] + [(4096 if not quick else 2048, 256, 256)]
    # Rounds of (calibrate, measure every shape); keep the best of each across rounds, so that the
    # calibration and the measurements see the same mix of quiet and busy moments on a shared machine.
    rounds = 1 if quick else 3
    cals, best = [], {}
    for _ in range(rounds):
        cals.append(jaxlab.calibrate(quick=quick))
        for m in jaxlab.measure_matmuls(shapes, repeats=3 if quick else 5):
            key = (m.B, m.D, m.F)
            if key not in best or m.seconds < best[key].seconds:
                best[key] = m
    top_c = max(cals, key=lambda c: c.flops_per_s)
    top_w = max(cals, key=lambda c: c.bytes_per_s)
    details = dict(top_c.details)
    details.update(
        {k: v for k, v in top_w.details.items() if k.startswith("bandwidth") or k == "bytes_per_s_no_donation"}
    )
    details["wall_seconds"] = sum(c.details["wall_seconds"] for c in cals)
    cal = jaxlab.Calibration(
        flops_per_s=top_c.flops_per_s,
        bytes_per_s=top_w.bytes_per_s,
        dtype=top_c.dtype,
        backend=top_c.backend,
        details=details,
    )
    chip = cal.as_chip()
    rows_p = jaxlab.predict_vs_measure(cal, shapes, measurements=[best[s] for s in shapes])
    rows = []
    for r in rows_p:
        rl = matmul_roofline(r.B, r.D, r.F, chip=chip, mode=cal.mode)
        rows.append(
            [r.B, r.D, r.F, f"{rl.intensity:.1f}", rl.bound, _us(r.predicted_s), _us(r.measured_s), f"{r.ratio:.2f}"]
        )
    med = jaxlab.median_ratio(rows_p)
    big = [r for r in rows_p if min(r.B, r.D, r.F) >= 512]
    cal_rows = [
        ["peak matmul FLOP/s (C)", format_flops(cal.flops_per_s), cal.details["matmul_method"]],
        ["memory bandwidth (W)", format_si(cal.bytes_per_s, "B/s"), cal.details["bandwidth_method"]],
        [
            "  without donation",
            format_si(cal.details["bytes_per_s_no_donation"], "B/s"),
            "fresh output buffer each call (page faults)",
        ],
        ["critical intensity C/W", f"{cal.critical_intensity:.1f} FLOPs/byte", ""],
        [
            "calibration wall time",
            f"{cal.details['wall_seconds']:.1f} s",
            f"quick={quick}, {rounds} round(s): best C and best W over rounds; per round "
            f"C = {', '.join(format_flops(c.flops_per_s) for c in cals)}, "
            f"W = {', '.join(format_si(c.bytes_per_s, 'B/s') for c in cals)}",
        ],
    ]
    body = table(["calibration", "value", "how"], cal_rows, right={1}) + "\n\n"
    body += table(
        ["B", "D", "F", "intensity", "roofline says", "predicted µs", "measured µs", "pred/meas"],
        rows,
        right=set(range(8)) - {4},
    )
    notes = [
        f"median predicted/measured ratio: {med:.2f} over {len(rows_p)} shapes",
        (
            f"median for shapes with every dim ≥ 512: {jaxlab.median_ratio(big):.2f} over {len(big)}"
            if big
            else "no shape with every dim ≥ 512"
        ),
        "ratio < 1: slower than the roofline's lower bound (overheads, a poor kernel for that shape); "
        "> 1: faster than the calibrated peak (the calibration ran while the machine was busier)",
        f"measured: best over {rounds} round(s) of best-of-N jit(jnp.dot) float32; "
        f"load average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs",
    ]
    return section(title, body, notes)


def bench_planner(quick: bool) -> str:
    """A full enumeration of training layouts (training.plan) for LLaMA 3-405B on a v5p pod, and 70B for scale;
    the GPU planner (gpu_training.plan, ch. 12) on H100 and GB200 clusters; the unified planner
    (training.plan(model, chip, n_chips=, batch_tokens=, seq_len=), practitioner conventions, issue 17) on the
    Llama 3 405B run's 16,384 H100s (target < 2 s) and a v5p pod."""
    title = "training planners (ch. 5–6, ch. 12; issue 17's unified one): full enumeration"
    from scalebook_utils import gpu_training, training

    tpu = lambda m, b, n, s: training.plan(m, b, "tpu-v5p", n_chips=n, slices=s)  # noqa: E731

    def unified(chip, seq):
        return lambda m, b, n, s: training.plan(m, chip, n_chips=n * s, batch_tokens=b, seq_len=seq)

    cases = [
        ("book TPU", "llama3-405b", 16 * 2**20, 8960, 1, "tpu-v5p", tpu),
        ("book TPU", "llama3-405b", 16 * 2**20, 8960, 8, "tpu-v5p", tpu),
        ("book TPU", "llama3-70b", 4 * 2**20, 8960, 1, "tpu-v5p", tpu),
        ("book TPU", "deepseek-v3-like", 16 * 2**20, 8960, 1, "tpu-v5p", tpu),
        (
            "book GPU",
            "llama3-70b",
            4 * 2**20,
            4096,
            1,
            "h100",
            lambda m, b, n, s: gpu_training.plan(m, b, "h100", n_gpus=n),
        ),
        (
            "book GPU",
            "llama3-405b",
            16 * 2**20,
            576,
            1,
            "gb200",
            lambda m, b, n, s: gpu_training.plan(m, b, "gb200", n_gpus=n),
        ),
        ("unified", "llama3-405b", 16 * 2**20, 16384, 1, "h100", unified("h100", 8192)),
        ("unified", "llama3-70b", 4 * 2**20, 8960, 1, "tpu-v5p", unified("tpu-v5p", 4096)),
    ]
    reps = 3 if quick else 10
    rows = []
    for kind, model, batch, chips, slices, chip, planner in cases:
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            p = planner(model, batch, chips, slices)
            best = min(best, time.perf_counter() - t0)
        b = p.best if p.feasible else None
        rows.append(
            [
                kind,
                model,
                chip,
                f"{chips}×{slices}",
                f"{batch / 2**20:g}M",
                len(p.estimates),
                len(p.feasible),
                _ms(best),
                f"{best / len(p.estimates) * 1e6:.1f} µs",
                b.config.name if b else "none feasible",
            ]
        )
    body = table(
        [
            "planner",
            "model",
            "chip",
            "chips×slices",
            "batch",
            "layouts",
            "feasible",
            "plan() best ms",
            "per layout",
            "winner",
        ],
        rows,
        right={5, 6, 7, 8},
    )
    return section(
        title,
        body,
        [
            f"best of {reps} runs; book planners: every X·Y·Z factorisation × ZeRO {{0,1,3}} × 3 "
            "remat policies; unified: × ZeRO 0–3 × schedules (1F1B, interleaved ×2, ×4, ×8) × micro-batch "
            "counts, one layout kept per group (its micro-batch count searched); a widget redraw "
            "adds the figure (see the widget sections)"
        ],
    )


def bench_rosetta(quick: bool) -> str:
    """Published training runs (published_runs.RUNS) through training.evaluate_layout: the reported number, it as an
    MFU in scalebook's FLOP count, the roofline MFU of the same layout, reported/predicted and the gap."""
    title = "rosetta (issue 17): published training runs vs the roofline of their layouts"
    from scalebook_utils import published_runs

    rows = published_runs.rosetta()
    body = table(
        ["run", "chips", "layout", "reported", "as MFU", "roofline MFU", "rep/pred"],
        [r[:7] for r in published_runs.table(rows)],
        right={3, 4, 5, 6},
    )
    notes = [f"{r.run.name}: {r.gap}" for r in rows]
    notes.append(
        "'as MFU' converts each paper's number with its own FLOP count (Megatron-LM's counts the recompute, "
        "PaLM's 6N + 12LHQT) into scalebook's (≈ 6·P·tokens + causal attention) on scalebook's peak; "
        "the roofline must be at least that (tests/test_planner_unified.py)"
    )
    return section(title, body, notes)


def bench_rosetta_inference(quick: bool) -> str:
    """Published inference measurements (published_inference.MEASUREMENTS) beside the roofline of the same workload:
    the reported number, the roofline's, the fraction reached and the gap."""
    title = "rosetta-inference (issue 17): published inference measurements vs the roofline of their workload"
    from scalebook_utils import published_inference

    t0 = time.perf_counter()
    rows = published_inference.rosetta()
    took = time.perf_counter() - t0
    body = table(
        ["measurement", "chips", "precision", "workload", "reported", "roofline", "reached"],
        [r[:7] for r in published_inference.table(rows)],
        right={4, 5, 6},
    )
    notes = [f"{r.measurement.name}: {r.gap}" for r in rows]
    notes.append(
        "roofline = inference.prefill_time of the prompts + one inference.decode_step per generated token "
        "(conventions='practice'); 'reached' = roofline time / measured time, at most 100% when the "
        f"roofline bounds the report (tests/test_published_inference.py); evaluated in {_ms(took)} ms"
    )
    return section(title, body, notes)


def bench_frontier(quick: bool) -> str:
    """The serving planner's latency–throughput frontier (serving.frontier) over every batch and slice size."""
    title = "serving frontier (ch. 7–8): batches × power-of-two slices"
    from scalebook_utils import inference, serving

    l70 = inference.served_model("llama3-70b", params=70e9)
    cases = [
        (l70, "tpu-v5e", "int8-weights", 8192, 4),
        (l70, "tpu-v5e", "bf16", 2048, 4),
        ("llama3-405b", "tpu-v5e", "int8-weights", 8192, 4),
        ("llama3-8b", "h100", "fp8", 8192, 4),
        (l70, "tpu-v5e", "int8-weights", 8192, 16),
    ]
    reps = 3 if quick else 10
    rows = []
    for model, chip, prec, S, per_octave in cases:
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            f = serving.frontier(model, chip, prec, S, per_octave=per_octave)
            best = min(best, time.perf_counter() - t0)
        top = f.best_under(15e-3)
        rows.append(
            [
                f.model,
                chip,
                prec,
                f"{S}",
                len(f.plans),
                len(f.points),
                len(f.pareto),
                _ms(best),
                f"{best / len(f.points) * 1e6:.1f} µs",
                top.describe().split(":")[0] if top else "none",
            ]
        )
    body = table(
        [
            "model",
            "chip",
            "precision",
            "S",
            "slices",
            "points",
            "pareto",
            "frontier() ms",
            "per point",
            "best ≤ 15 ms/step",
        ],
        rows,
        right={4, 5, 6, 7, 8},
    )
    return section(
        title,
        body,
        [
            f"best of {reps} runs; per_octave batches per doubling (4, or 16 in the last row); "
            "each point is one inference.decode_step"
        ],
    )


def bench_capstone(quick: bool) -> str:
    """Chapter 11: a whole plan (training planner + serving plan and frontier) from cold caches, and the app's update
    time when a control changes only text (achieved MFU) or also the figure (the training chip)."""
    title = "capstone (ch. 11): plan_model and the app"
    from scalebook_utils import capstone

    clear = capstone.clear_caches

    cases = [
        ("llama3-70b", "tpu-v5p", "tpu-v5e", capstone.Budget()),
        ("llama3-70b", "h100", "h100", capstone.Budget(train_chips=4096, mfu=0.45)),
        ("llama3-405b", "tpu-v5p", "tpu-v5e", capstone.Budget(batch_tokens=16 * 2**20)),
        ("deepseek-v3-like", "gb200", "gb200", capstone.Budget(batch_tokens=16 * 2**20, serve_precision="fp8")),
    ]
    reps = 2 if quick else 5
    rows = []
    for model, tc, sc, budget in cases:
        best = math.inf
        for _ in range(reps):
            clear()
            t0 = time.perf_counter()
            p = capstone.plan_model(model, tc, sc, budget)
            best = min(best, time.perf_counter() - t0)
        sv = p.serving
        pick = f"B={sv.best.B:g} on {sv.best.n_chips}" if sv.best else "none"
        rows.append(
            [
                model,
                tc,
                sc,
                _ms(best),
                p.training.layout or "none",
                f"{sv.n_chips} chip{'s' * (sv.n_chips != 1)}" if sv.feasible else "cannot serve",
                pick,
            ]
        )
    body = table(
        ["model", "train", "serve", "plan_model cold (ms)", "training layout", "smallest slice", "best ≤ 20 ms/step"],
        rows,
        right={3},
    )
    notes = [f"best of {reps} cold runs (the planners' caches cleared each time)"]
    return section(title, body, notes + ["the app's update time is in the widgets section"])


def bench_decode(quick: bool) -> str:
    """jaxdecode: predicted/measured decode step time per batch, and prefill vs decode cost per token."""
    title = "KV-cached decode on this CPU (ch. 7): measured vs calibrated roofline"
    from scalebook_utils import jaxdecode

    batches = (1, 8, 32, 128) if quick else (1, 2, 4, 8, 16, 32, 64, 128)
    t0 = time.perf_counter()
    rows = jaxdecode.measure_decode(jaxdecode.DECODE_DEMO, batches, S=64, rounds=2 if quick else 3)
    sweep = time.perf_counter() - t0
    pvd = jaxdecode.prefill_vs_decode(jaxdecode.DECODE_DEMO, B=1, T=128)
    body = table(
        ["B", "measured (ms)", "predicted (ms)", "pred/meas", "bound"],
        [[r.B, _ms(r.measured_s), _ms(r.predicted_s), f"{r.ratio:.2f}", r.bound] for r in rows],
        right={0, 1, 2, 3},
    )
    ok = all(0.5 <= r.ratio <= 2 for r in rows if r.B >= 8)
    return section(
        title,
        body,
        [
            f"demo model {jaxdecode.DECODE_DEMO.name}, S = 64 cached tokens, float32; C = {rows[0].flops_per_s:.3g} "
            f"FLOP/s and W = {rows[0].bytes_per_s:.3g} B/s (reads) measured in the same passes; sweep {sweep:.1f} s",
            f"within 2× for every B ≥ 8: {ok}",
            f"decode / prefill cost per token (B = 1, T = 128): {pvd.ratio:.1f}× (roofline {pvd.predicted_ratio:.1f}×)",
        ],
    )


def bench_peers(quick: bool) -> str:
    """scalebook, llm-analysis and GenZ side by side (benchmarks/peers.py); skipped when they cannot be installed."""
    import peers

    body, notes = peers.report()
    return section("peers: scalebook vs llm-analysis 0.2.2 and GenZ 0.0.16 on the same inputs", body, notes)


# --- main ------------------------------------------------------------------------------------------

BENCHES = {
    "coldstart": bench_coldstart,
    "widgets": bench_widgets,
    "notebooks": bench_notebooks,
    "matmul": bench_matmul,
    "planner": bench_planner,
    "rosetta": bench_rosetta,
    "rosetta-inference": bench_rosetta_inference,
    "frontier": bench_frontier,
    "capstone": bench_capstone,
    "decode": bench_decode,
    "peers": bench_peers,
}


def header(args) -> str:
    try:
        import jax

        jv = jax.__version__
    except ImportError:  # pragma: no cover
        jv = "not installed"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"scalebook benchmarks — {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        f"python {platform.python_version()} · jax {jv} · {platform.machine()} · {os.cpu_count()} CPUs · "
        f"load average {load:.2f} · flags: quick={args.quick} only={args.only or 'all'}\n"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", choices=SECTIONS, help="run one section")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, smaller sweeps")
    ap.add_argument(
        "--out", type=Path, default=OUT, help=f"where to write the tables (default {OUT.relative_to(ROOT)})"
    )
    args = ap.parse_args(argv)

    parts = [header(args)]
    print(parts[0], flush=True)
    for name in [args.only] if args.only else SECTIONS:
        t = time.perf_counter()
        try:
            text = BENCHES[name](args.quick)
        except Exception as e:  # noqa: BLE001 - one broken section must not hide the others
            text = section(name, f"FAILED: {type(e).__name__}: {e}")
        text += f"({name}: {time.perf_counter() - t:.1f} s)\n"
        print(text, flush=True)
        parts.append(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(parts))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
