"""Peers side by side: scalebook, llm-analysis 0.2.2 and GenZ (genz-llm 0.0.16) on the same inputs.

Parameters, KV bytes per token, training FLOPs and memory per GPU, prefill and decode latency, in three columns
(plus scalebook under conventions="book"), each difference against scalebook with its cause. The causes were
found by reading the peers' code (the project's peers review); the ones the numbers can show are tested on them
here (e.g. "llm-analysis = scalebook − V·D" is stated only when it holds).

The peers are optional and never a dependency of scalebook or of `make test`: this bench makes its own virtual
environment (benchmarks/out/peers-venv, gitignored; SCALEBOOK_PEERS_VENV moves it) and pip-installs the two pinned
packages into it; when that cannot be done (no registry, no network) the section is skipped with the reason.
SCALEBOOK_PEERS_PYTHON names an interpreter that already has them (nothing is installed then). `python benchmarks/peers.py` runs it alone; `make bench` as `peers`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scalebook_utils import inference as I  # noqa: E402
from scalebook_utils import transformer as tf  # noqa: E402

PEERS = {"llm-analysis": ("llm-analysis==0.2.2", "llm_analysis"), "genz": ("genz-llm==0.0.16", "GenZ")}
VENV = Path(os.environ.get("SCALEBOOK_PEERS_VENV", ROOT / "benchmarks" / "out" / "peers-venv"))
WORKER = ROOT / "benchmarks" / "peers_worker.py"

#: the models: scalebook's preset (or HF dimensions), GenZ's preset name. GenZ's "meta-llama/Llama-3.1-70B"
#: has LLaMA 3-70B's dimensions (its alias "meta-llama/meta-llama-3.1-70b" is LLaMA-2-70B: avoided).
LLAMA2_70B = tf.TransformerConfig(
    "llama2-70b", L=80, D=8192, F=28_672, N=64, K=8, H=128, V=32_000, source="HF meta-llama/Llama-2-70b-hf config.json"
)
MODELS = {
    "llama2-13b": ("llama2-13b", "llama2_13b"),
    "llama3-8b": ("llama3-8b", "llama3_8b"),
    "llama3-70b": ("llama3-70b", "meta-llama/Llama-3.1-70B"),
    "llama3-405b": ("llama3-405b", "llama_405b"),
}
#: scalebook chip → (llm-analysis GPU config, GenZ system)
GPUS = {"a100": ("a100-sxm-80gb", "A100_80GB_GPU"), "h100": ("h100-sxm-80gb", "H100_GPU")}
#: scalebook precision → (llm-analysis dtype config, GenZ bits)
PRECISIONS = {"bf16": ("w16a16e16", "bf16"), "int8": ("w8a8e16", "int8")}
T_PROMPT = S_CONTEXT = 2048
#: (model, chip, TP, precision, decode batches)
SERVING = [
    ("llama2-13b", "a100", 1, "bf16", (1, 16)),
    ("llama3-8b", "h100", 1, "bf16", (1, 64)),
    ("llama3-70b", "h100", 4, "bf16", (1, 64)),
    ("llama3-70b", "h100", 4, "int8", (1,)),
]
#: training: LLaMA-2-70B on 128 A100, TP 8 × DP 16 (ZeRO-1), 4096-token sequences, one per DP rank
TRAIN = dict(chip="a100", tp=8, dp=16, seq_len=4096, zero=1, remat="none")


def _cfg(name: str) -> tf.TransformerConfig:
    return LLAMA2_70B if name == "llama2-70b" else tf.get_model(MODELS[name][0])


def _dims(cfg: tf.TransformerConfig) -> dict:
    return {
        "name": cfg.name,
        "L": cfg.L,
        "N": cfg.N,
        "D": cfg.D,
        "V": cfg.V,
        "K": cfg.K,
        "F": cfg.F,
        "gated": cfg.gated_mlp,
    }


# --- the peers' environment ---------------------------------------------------------------------------------


@dataclass
class PeerEnv:
    python: str | None
    available: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _run(cmd, timeout) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _last_line(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
    return lines[-1][:200] if lines else f"exit {p.returncode}"


def ensure_peers(install: bool = True, timeout: float = 1200) -> PeerEnv:
    """The interpreter with the peers, installing them into VENV with pip when missing (each may fail alone)."""
    py = os.environ.get("SCALEBOOK_PEERS_PYTHON")
    env = PeerEnv(py)
    if py is None:
        py = str(VENV / "bin" / "python")
        if not Path(py).exists():
            if not install:
                env.notes.append(f"no peers environment at {VENV} (run without --no-install)")
                return env
            try:
                p = _run([sys.executable, "-m", "venv", str(VENV)], 300)
            except (OSError, subprocess.TimeoutExpired) as e:
                env.notes.append(f"cannot create a virtual environment: {e}")
                return env
            if p.returncode != 0:
                env.notes.append(f"cannot create a virtual environment: {_last_line(p)}")
                return env
        env.python = py
    for tool, (req, module) in PEERS.items():
        try:
            ok = _run([py, "-c", f"import {module}"], 120).returncode == 0
            if not ok and install and not os.environ.get("SCALEBOOK_PEERS_PYTHON"):
                p = _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", req], timeout)
                ok = p.returncode == 0 and _run([py, "-c", f"import {module}"], 120).returncode == 0
                if not ok:
                    env.notes.append(f"{tool}: `pip install {req}` failed: {_last_line(p)}")
            elif not ok:
                env.notes.append(f"{tool}: {module} is not importable by {py}")
        except (OSError, subprocess.TimeoutExpired) as e:
            ok = False
            env.notes.append(f"{tool}: {type(e).__name__}: {e}")
        env.available[tool] = ok
    return env


# --- the jobs ------------------------------------------------------------------------------------------------


def jobs() -> list[dict]:
    """Every peer computation, as the worker takes them (the same inputs scalebook gets in `scalebook_side`)."""
    out = []
    for name in MODELS:
        out.append({"id": f"params/{name}/la", "tool": "llm-analysis", "what": "params", "model": _dims(_cfg(name))})
        out.append({"id": f"params/{name}/genz", "tool": "genz", "what": "params", "model": MODELS[name][1]})
    for name, chip, tp, prec, batches in SERVING:
        la_gpu, genz_sys = GPUS[chip]
        la_dt, genz_bits = PRECISIONS[prec]
        key = f"{name}/{chip}/tp{tp}/{prec}"
        for B in (1,) + tuple(batches):
            out.append(
                {
                    "id": f"infer/{key}/B{B}/la",
                    "tool": "llm-analysis",
                    "what": "infer",
                    "model": _dims(_cfg(name)),
                    "gpu": la_gpu,
                    "dtype": la_dt,
                    "tp": tp,
                    "B": B,
                    "T": T_PROMPT,
                }
            )
        out.append(
            {
                "id": f"prefill/{key}/genz",
                "tool": "genz",
                "what": "prefill",
                "model": MODELS[name][1],
                "system": genz_sys,
                "bits": genz_bits,
                "tp": tp,
                "B": 1,
                "T": T_PROMPT,
            }
        )
        for B in batches:
            out.append(
                {
                    "id": f"decode/{key}/B{B}/genz",
                    "tool": "genz",
                    "what": "decode",
                    "model": MODELS[name][1],
                    "system": genz_sys,
                    "bits": genz_bits,
                    "tp": tp,
                    "B": B,
                    "S": S_CONTEXT,
                }
            )
    t = TRAIN
    out.append(
        {
            "id": "train/la",
            "tool": "llm-analysis",
            "what": "train",
            "model": _dims(LLAMA2_70B),
            "gpu": GPUS[t["chip"]][0],
            "tp": t["tp"],
            "dp": t["dp"],
            "seq_len": t["seq_len"],
            "zero": t["zero"],
            "remat": t["remat"],
        }
    )
    return out


def run_peers(env: PeerEnv, timeout: float = 900) -> dict:
    """{job id: result} from the worker in the peers' environment (the jobs of unavailable peers left out)."""
    todo = [j for j in jobs() if env.available.get(j["tool"])]
    if not todo or env.python is None:
        return {}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(todo, f)
    try:
        with tempfile.TemporaryDirectory() as cwd:  # GenZ writes its graphs under /tmp/genz and the cwd
            p = subprocess.run(
                [env.python, str(WORKER), f.name],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=cwd,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"},
            )
    finally:
        os.unlink(f.name)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        env.notes.append(f"the peers' worker failed: {_last_line(p)}")
        return {}
    return json.loads(lines[-1])


# --- scalebook's side ----------------------------------------------------------------------------------------


def _training_scalebook() -> dict:
    """scalebook's training estimate for TRAIN: `training.evaluate_layout` when this tree has it (issue 17's one
    entry point), else `gpu_training.evaluate`. Memory parts in bytes per GPU, FLOPs per token."""
    t, cfg = TRAIN, LLAMA2_70B
    n, tokens = t["tp"] * t["dp"], t["dp"] * t["seq_len"]
    flops = tf.training_flops_per_token(cfg, t["seq_len"], causal=True)
    from scalebook_utils import gpu_training as GT
    from scalebook_utils import training as T

    e, api = None, "gpu_training.evaluate (defaults: the book's 10 B/param, no gradients)"
    if hasattr(T, "evaluate_layout"):
        try:
            e = T.evaluate_layout(
                cfg,
                t["chip"],
                n_chips=n,
                batch_tokens=tokens,
                seq_len=t["seq_len"],
                dp=t["dp"],
                tp=t["tp"],
                zero=t["zero"],
                remat=t["remat"],
            )
            api = "training.evaluate_layout (its defaults)"
        except Exception as exc:  # noqa: BLE001 - an API change must not hide the rest of the table
            api = f"gpu_training.evaluate (training.evaluate_layout raised {type(exc).__name__}: {exc})"[:160]
    if e is None:
        try:
            e = GT.evaluate(
                cfg,
                tokens,
                T.Config(X=t["dp"], Y=t["tp"], zero=t["zero"], remat=t["remat"]),
                t["chip"],
                seq_len=t["seq_len"],
            )
        except Exception as exc:  # noqa: BLE001
            return {"flops_per_token": flops, "api": f"none: {type(exc).__name__}: {exc}"[:160]}
    m = getattr(e, "memory", None)
    parts = {k: getattr(m, k, None) for k in ("params", "grads", "optimizer", "activations")} if m else {}
    total = getattr(e, "memory_bytes_per_chip", None) or (m.total if m else None)
    return {
        "flops_per_token": flops,
        "weights": parts.get("params"),
        "grads": parts.get("grads"),
        "optimizer": parts.get("optimizer"),
        "activations": parts.get("activations"),
        "total": total,
        "api": api,
    }


def scalebook_side() -> dict:
    """{row key: (default, book)} for every quantity the table shows."""
    out = {}
    for name in MODELS:
        cfg = _cfg(name)
        out[f"params/{name}"] = (tf.param_count(cfg).total,) * 2
        out[f"kv/{name}"] = (tf.kv_cache_bytes_per_token(cfg, "bf16"),) * 2
    for name, chip, tp, prec, batches in SERVING:
        key, cfg = f"{name}/{chip}/tp{tp}/{prec}", _cfg(name)
        out[f"prefill/{key}"] = tuple(
            I.prefill_time(cfg, T_PROMPT, chip, tp, prec, conventions=c).time for c in ("practice", "book")
        )
        for B in batches:
            out[f"decode/{key}/B{B}"] = tuple(
                I.decode_step(cfg, B, S_CONTEXT, chip, tp, prec, conventions=c).step_time for c in ("practice", "book")
            )
    out["train"] = _training_scalebook()
    return out


# --- the table -------------------------------------------------------------------------------------------------


def _delta(peer, sb) -> str:
    if peer is None or sb is None:
        return ""
    return f"{(peer - sb) / sb:+.1%}"


def _num(v, kind: str) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if kind == "count":
        return f"{v:,.0f}"
    if kind == "s":
        return f"{v * 1e3:.2f} ms"
    if kind == "bytes":
        return f"{v / 1e9:.2f} GB" if v >= 1e8 else f"{v:,.0f} B"
    return f"{v:.4g}"


def _get(res: dict, key: str, field_: str):
    r = res.get(key)
    if r is None:
        return None
    return f"error: {r['error'][:40]}" if "error" in r else r.get(field_)


CAUSES = {
    "la-embed": "llm-analysis counts one shared embedding matrix (get_num_params_embedding(shared_embedding=True), "
    "analysis.py:244): exactly scalebook − V·D; LLaMA's unembedding is untied",
    "genz-norms": "GenZ's graph has no norm vectors: exactly scalebook − the RMSNorm parameters",
    "kv": "all three count 2·L·K·H·bytes per token",
    "la-mlp": "llm-analysis hard-codes the MLP's FLOPs as 16·D² per token (analysis.py:913), ignoring F "
    "(−24% for LLaMA's gated F = 3.5·D), and counts non-causal attention (analysis.py:897)",
    "genz-embed": "GenZ runs the input-embedding lookup as a D×V GEMM (Models/embedding.py:14): +2·V·D FLOPs "
    "per token; scalebook's default gathers",
    "noncausal": "both peers count the full T² of attention; scalebook counts the causal half",
    "genz-units": "GenZ reads 'GB/s' as GiB/s (unit.py:27): 7.4% more bandwidth than the datasheet",
    "a100": "scalebook's A100 keeps the book's rounded 3.1e14 FLOP/s and 2.0e12 B/s (datasheet: 312 TFLOP/s, "
    "2,039 GB/s, which both peers use): −0.6% and −1.9%",
    "la-kv2": "llm-analysis reads the whole KV cache twice per step ('load and store', analysis.py:1572)",
    "tp": "TP collectives: scalebook's default adds 2·L NCCL AllReduces with NCCL's latency (15 µs on 8, 10.2 µs "
    "on 4 GPUs) after the matmuls; llm-analysis an 8 µs floor per collective; GenZ its own AllReduce model",
    "book": "the 'scalebook (book)' column: conventions='book' (whole table streamed, 2·P·T, no prefill comms, "
    "GPU comms overlapped without latency)",
    "train-flops": "scalebook: 6·matmul params + causal attention per token; llm-analysis: the 16·D² MLP and "
    "non-causal attention above; GenZ models inference only",
    "train-mem": "memory per GPU: weights differ by llm-analysis's shared embedding; gradients, optimizer and "
    "activations by convention — the bytes per parameter each tool assumes are printed",
}


def rows_and_causes(sb: dict, res: dict) -> tuple[list[list], list[str]]:
    """The table rows [quantity, case, scalebook, scalebook (book), llm-analysis, Δ, GenZ, Δ, causes]."""
    rows, used = [], []

    def cite(*keys):
        tags = []
        for k in keys:
            if k not in used:
                used.append(k)
            tags.append(str(used.index(k) + 1))
        return ",".join(tags)

    for name in MODELS:
        cfg = _cfg(name)
        total = sb[f"params/{name}"][0]
        la, gz = _get(res, f"params/{name}/la", "params"), _get(res, f"params/{name}/genz", "params")
        why = []
        if isinstance(la, float) and abs(la - (total - cfg.V * cfg.D)) < 1:
            why.append("la-embed")
        if isinstance(gz, float) and abs(gz - (total - tf.param_count(cfg).norms)) < 1:
            why.append("genz-norms")
        rows.append(
            [
                "parameters",
                name,
                _num(total, "count"),
                "",
                _num(la, "count"),
                _delta(la, total) if isinstance(la, float) else "",
                _num(gz, "count"),
                _delta(gz, total) if isinstance(gz, float) else "",
                cite(*why) if why else "",
            ]
        )
    for name, chip, tp, prec, _batches in SERVING:
        if prec != "bf16":
            continue
        key = f"infer/{name}/{chip}/tp{tp}/{prec}/B1/la"
        kv = sb[f"kv/{name}"][0]
        la = _get(res, key, "kv_bytes_per_token")
        gz = _get(res, f"prefill/{name}/{chip}/tp{tp}/{prec}/genz", "kv_bytes_per_token")
        agree = all(isinstance(v, float) and abs(v - kv) < 1 for v in (la, gz))
        rows.append(
            [
                "KV bytes/token (bf16)",
                name,
                _num(kv, "count"),
                "",
                _num(la, "count"),
                _delta(la, kv) if isinstance(la, float) else "",
                _num(gz, "count"),
                _delta(gz, kv) if isinstance(gz, float) else "",
                cite("kv") if agree else "",
            ]
        )
    t = sb["train"]
    la_t = res.get("train/la", {})
    case = f"llama2-70b, {TRAIN['tp']}×{TRAIN['dp']} {TRAIN['chip']}"
    f_la = la_t.get("flops_per_token")
    rows.append(
        [
            "training FLOPs/token",
            case,
            _num(t["flops_per_token"], ""),
            "",
            _num(f_la, ""),
            _delta(f_la, t["flops_per_token"]) if f_la else "",
            "—",
            "",
            cite("la-mlp", "train-flops"),
        ]
    )
    shard = tf.param_count(LLAMA2_70B).total / TRAIN["tp"]  # parameters per GPU before ZeRO
    for part, la_key, div in (
        ("weights", "weights", 1),
        ("grads", "grads", 1),
        ("optimizer", "optimizer", TRAIN["dp"]),
        ("activations", "activations", None),
        ("total", "total", None),
    ):
        v_sb, v_la = t.get(part), la_t.get(la_key)
        label = f"train memory/GPU: {part}"
        if div and v_sb is not None:
            label += f" (B/param: sb {v_sb / (shard / div):.3g}" + (
                f", la {v_la / (shard / div):.3g})" if v_la else ")"
            )
        rows.append(
            [
                label,
                f"ZeRO-{TRAIN['zero']}, remat {TRAIN['remat']}",
                _num(v_sb, "bytes"),
                "",
                _num(v_la, "bytes"),
                _delta(v_la, v_sb) if v_la and v_sb else "",
                "—",
                "",
                cite("la-embed" if part == "weights" else "train-mem"),
            ]
        )
    for name, chip, tp, prec, batches in SERVING:
        key = f"{name}/{chip}/tp{tp}/{prec}"
        cfg = _cfg(name)
        case = f"{name}, {tp}×{chip} {prec}"
        d, b = sb[f"prefill/{key}"]
        la = _get(res, f"infer/{key}/B1/la", "prefill_s")
        gz = _get(res, f"prefill/{key}/genz", "prefill_s")
        why = ["noncausal", "genz-embed"] + (["la-mlp"] if cfg.gated_mlp else []) + (["tp"] if tp > 1 else [])
        why += ["a100"] if chip == "a100" else []
        rows.append(
            [
                f"prefill T={T_PROMPT}",
                case,
                _num(d, "s"),
                _num(b, "s"),
                _num(la, "s"),
                _delta(la, d) if isinstance(la, float) else "",
                _num(gz, "s"),
                _delta(gz, d) if isinstance(gz, float) else "",
                cite(*why, "book"),
            ]
        )
        for B in batches:
            d, b = sb[f"decode/{key}/B{B}"]
            la = _get(res, f"infer/{key}/B{B}/la", "decode_s")
            gz = _get(res, f"decode/{key}/B{B}/genz", "decode_s")
            why = ["genz-units", "la-kv2"] + (["tp"] if tp > 1 else []) + (["a100"] if chip == "a100" else [])
            rows.append(
                [
                    f"decode step S={S_CONTEXT}",
                    f"{case}, B={B}",
                    _num(d, "s"),
                    _num(b, "s"),
                    _num(la, "s"),
                    _delta(la, d) if isinstance(la, float) else "",
                    _num(gz, "s"),
                    _delta(gz, d) if isinstance(gz, float) else "",
                    cite(*why, "book"),
                ]
            )
    causes = [f"[{i + 1}] {CAUSES[k]}" for i, k in enumerate(used)]
    return rows, causes


def _bench_table():
    """benchmarks/run.py's table formatter (loaded from its file: benchmarks/ is not a package)."""
    import importlib.util

    mod = sys.modules.get("run") or sys.modules.get("__main__")
    if getattr(mod, "table", None) is not None and getattr(mod, "bench_peers", None) is not None:
        return mod.table
    spec = importlib.util.spec_from_file_location("scalebook_bench_run", ROOT / "benchmarks" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.table


def report(install: bool = True) -> tuple[str, list[str]]:
    """(table text, notes): the side-by-side table, or a one-line skip with the reason."""
    table = _bench_table()

    t0 = time.perf_counter()
    env = ensure_peers(install)
    setup = time.perf_counter() - t0
    if not any(env.available.values()):
        return ("skipped: neither peer could be installed", env.notes)
    t1 = time.perf_counter()
    res = run_peers(env)
    peer_s = time.perf_counter() - t1
    sb = scalebook_side()
    rows, causes = rows_and_causes(sb, res)
    body = table(
        ["quantity", "case", "scalebook", "scalebook (book)", "llm-analysis 0.2.2", "Δ", "GenZ 0.0.16", "Δ", "why"],
        rows,
        right={2, 3, 4, 5, 6, 7},
    )
    missing = [k for k, ok in env.available.items() if not ok]
    notes = causes + [
        f"Δ = peer / scalebook − 1; scalebook = the package's defaults (conventions='practice' in "
        f"inference); training via {sb['train']['api']}",
        f"peers' environment {setup:.0f} s (install once, then cached), peers' run {peer_s:.0f} s",
    ]
    notes += [f"not run: {m} ({'; '.join(n for n in env.notes if n.startswith(m)) or 'unavailable'})" for m in missing]
    notes += [n for n in env.notes if not any(n.startswith(m) for m in PEERS)]
    return body, notes


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-install", action="store_true", help="use the peers' environment only if it exists")
    args = ap.parse_args(argv)
    body, notes = report(install=not args.no_install)
    print("== peers: scalebook vs llm-analysis and GenZ ==")
    print(body)
    for n in notes:
        print(f"note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
