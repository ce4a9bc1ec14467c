"""Runs inside the peers' own virtual environment (made by benchmarks/peers.py); never imports scalebook.

Reads a JSON list of jobs from the file named by argv[1] and prints one JSON object {id: result} on the last
line of stdout. A job is {"id", "tool": "llm-analysis" | "genz", "what", ...inputs}; a result is a dict of
numbers, or {"error": "..."} when the peer refuses the inputs. Units: parameters, bytes, FLOPs, seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # both peers run from their bundled configs
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")


# --- llm-analysis 0.2.2 ---------------------------------------------------------------------------------------


def _la_model(m: dict):
    from llm_analysis.config import ModelConfig

    # llm-analysis's MLP is two matrices (2·D·ffn): a gated MLP of width F is passed as ffn = 1.5·F (= 3·D·F);
    # expansion_ratio is given because ModelConfig asserts ffn % D == 0 otherwise (config.py:75)
    ffn = int(1.5 * m["F"]) if m.get("gated", True) else m["F"]
    return ModelConfig(
        name=m["name"],
        num_layers=m["L"],
        n_head=m["N"],
        hidden_dim=m["D"],
        vocab_size=m["V"],
        num_key_value_heads=m["K"],
        ffn_embed_dim=ffn,
        expansion_ratio=ffn / m["D"],
        max_seq_len=m.get("max_seq_len", 131_072),
    )


def _la(job: dict, tp: int = 1, dp: int = 1):
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name

    dtype = get_dtype_config_by_name(job.get("dtype", "w16a16e16"))
    return LLMAnalysis(
        _la_model(job["model"]),
        get_gpu_config_by_name(job.get("gpu", "h100-sxm-80gb")),
        dtype,
        ParallelismConfig(tp_size=tp, dp_size=dp),
    )


def la_job(job: dict) -> dict:
    what = job["what"]
    if what == "params":
        return {"params": float(_la(job).get_num_params_total())}
    if what == "infer":
        tp, B, T = job["tp"], job["B"], job["T"]
        r = _la(job, tp=tp).inference(batch_size_per_gpu=B, seq_len=T, num_tokens_to_generate=1)
        kv_tokens = B * (T + 1)  # the cache its decode step reads: the prompt and the one generated token
        return {
            "prefill_s": r["prefill_latency"] / B if job.get("per_prompt") else r["prefill_latency"],
            "decode_s": r["decode_latency"],
            "kv_bytes_per_token": r["kv_cache_memory_per_gpu"] * tp / kv_tokens,
            "prefill_flops": r["prefill_num_flops_fwd_total"],
        }
    if what == "train":
        from llm_analysis.analysis import ActivationRecomputation, DSZeRO

        la = _la(job, tp=job["tp"], dp=job["dp"])
        remat = {"none": ActivationRecomputation.NONE, "full": ActivationRecomputation.FULL}[job["remat"]]
        r = la.training(
            batch_size_per_gpu=1,
            global_batch_size=job["dp"],
            seq_len=job["seq_len"],
            activation_recomputation=remat,
            ds_zero=DSZeRO(job["zero"]),
            flash_attn=True,
        )
        tokens = job["dp"] * job["seq_len"]
        flops = r["num_flops_total_per_micro_batch"] * job["dp"]  # one micro-batch of one DP rank, all of it
        return {
            "flops_per_token": flops / tokens,
            "weights": r["weight_memory_per_gpu"],
            "grads": r["gradient_memory_per_gpu"],
            "optimizer": r["optimizer_state_memory_per_gpu"],
            "activations": r["activation_memory_per_gpu"],
            "total": (
                r["weight_memory_per_gpu"]
                + r["gradient_memory_per_gpu"]
                + r["optimizer_state_memory_per_gpu"]
                + r["activation_memory_per_gpu"]
            ),
        }
    raise ValueError(f"unknown llm-analysis job {what!r}")


# --- GenZ (genz-llm 0.0.16) ---------------------------------------------------------------------------------


def _genz_params(name: str) -> float:
    """Weights of every GEMM of GenZ's prefill graph, Repeat blocks multiplied out (norms are not in it)."""
    from GenZ import prefill_moddeling

    df, _ = prefill_moddeling(
        model=name, batch_size=1, input_tokens=16, system_name="H100_GPU", bits="bf16", model_profilling=True
    )
    total, mult = 0.0, [1]
    for op, dim in zip(df["Op Type"], df["Dimension"]):
        if op == "Repeat":
            mult.append(mult[-1] * int(dim))
        elif op == "EndRepeat":
            mult.pop()
        elif op == "GEMM":
            total += mult[-1] * math.prod(dim[0][1])
    return total


def genz_job(job: dict) -> dict:
    from GenZ import decode_moddeling, prefill_moddeling

    what, name = job["what"], job["model"]
    if what == "params":
        return {"params": _genz_params(name)}
    system, bits, tp = job.get("system", "H100_GPU"), job.get("bits", "bf16"), job.get("tp", 1)
    if what == "prefill":
        o = prefill_moddeling(
            model=name, batch_size=job["B"], input_tokens=job["T"], system_name=system, bits=bits, tensor_parallel=tp
        )
        _, st = prefill_moddeling(
            model=name,
            batch_size=job["B"],
            input_tokens=job["T"],
            system_name=system,
            bits=bits,
            tensor_parallel=tp,
            model_profilling=True,
        )
        kv = st["KV Cache (MB)"].values[0] * 2**20 * tp / (job["B"] * job["T"])  # GenZ's MB are MiB
        return {"prefill_s": o["Latency"] / 1e3, "kv_bytes_per_token": kv}
    if what == "decode":  # Bb = 1: no beam search (GenZ's default Bb = 4 is beams)
        o = decode_moddeling(
            model=name,
            batch_size=job["B"],
            input_tokens=job["S"],
            output_tokens=0,
            Bb=1,
            system_name=system,
            bits=bits,
            tensor_parallel=tp,
        )
        return {"decode_s": o["Latency"] / 1e3}
    raise ValueError(f"unknown GenZ job {what!r}")


TOOLS = {"llm-analysis": la_job, "genz": genz_job}


def main(path: str) -> int:
    with open(path) as fh:
        jobs = json.load(fh)
    out = {}
    for job in jobs:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # both peers print progress
                out[job["id"]] = TOOLS[job["tool"]](job)
        except ImportError as e:
            out[job["id"]] = {"error": f"not installed: {e}"}
        except Exception as e:  # noqa: BLE001 - a refusal of one input must not hide the others
            out[job["id"]] = {"error": f"{type(e).__name__}: {e}"[:200]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
