"""jaxdecode: `tinymodel`'s decoder with a KV cache — prefill, decode, greedy generation — and a decode step
timed against this machine's roofline (book ch. 7, "All About Transformer Inference", §3.1, §3.4, §7).

Book ch. 7 §3.1: *prefill* runs the prompt at once and keeps every position's keys and values; each
*generate* step feeds one token, appends its K/V to the cache and attends to all of it (without a cache a
step re-runs the prefix: O(n²) FFW FLOPs for n tokens instead of O(n)). The cache is {"k", "v"}, each
[L, B, K, S_max, H]: 2·L·K·H·bytes per token (ch. 7 §3.5). `decode_step` writes at `pos` with
`jax.lax.dynamic_update_slice` and masks slots after `pos`; `pos` may be traced, so one compilation serves
every step. The model is `tinymodel`'s (parameters, RMSNorm, GQA with query head n = k·G + g on KV head k,
SwiGLU, no positional encoding), so `generate(..., use_cache=False)`, which re-runs `tinymodel.forward`,
is the reference. Decoding reads the weights in a serving layout (`serving_params`). Letters: B sequences,
T prompt tokens, S keys per query; D, F, L, N, K, H, V as in ch. 4.

`measure_decode` times one step per batch size against `decode_roofline`, with C and W measured in the
same interleaved passes (ch. 1's calibration kernels: this VM's speed drifts by 2× within minutes). On this
2-core CPU the model needs two corrections, both measured: a decode step only *reads* memory, which the VM
serves ≈ 1.5–2× slower than calibrate's read + write (`read_bandwidth`), and XLA:CPU's matmuls barely
overlap loading weights with computing, so ch. 1's upper bound T_math + T_comms predicts the step (ratio
0.7–1.3 for B = 8 … 128), where the overlapped forms can be 2× too optimistic near B_crit ≈ 10–16.

The namespace is three parts, each its own module, all re-exported here (`jaxdecode.X` for every X; nothing
is defined in this door, and the parts never import it):
`lab/kv_cache.py` (the cache {"k", "v"} and the weights' serving layout: what a decode step reads),
`lab/decode_loop.py` (prefill, `decode_step`, `generate`, and the check that cached decoding matches the
naive sampler) and `lab/decode_timing.py` (the roofline of a decode step and its measurement on this machine).
"""

from __future__ import annotations

# The imports marked "kept" are names `jaxdecode` held before its parts had their own modules (`jaxdecode.jnp`,
# `jaxdecode.tinymodel`, …): no `jaxdecode.X` that worked before breaks.
import dataclasses  # noqa: F401  (kept)
import math  # noqa: F401  (kept)
from collections.abc import Sequence  # noqa: F401  (kept)
from typing import NamedTuple  # noqa: F401  (kept)

import jax  # noqa: F401  (kept)
import jax.numpy as jnp  # noqa: F401  (kept)
import numpy as np  # noqa: F401  (kept)

from scalebook_utils.core.inference import costs as inference  # noqa: F401  (kept)
from scalebook_utils.core.roofline import lower_bound, upper_bound  # noqa: F401  (kept)
from scalebook_utils.core.transformer import (  # noqa: F401  (kept)
    TransformerConfig,
    kv_cache_bytes_per_token,
    matmul_params,
    param_count,
)
from scalebook_utils.core.units import (  # noqa: F401  (kept)
    canonical_dtype,
    dtype_bytes,
    is_int,
    require_int,
    require_positive,
)
from scalebook_utils.lab import runtime as jaxlab  # noqa: F401  (kept)
from scalebook_utils.lab import tinymodel  # noqa: F401  (kept)
from scalebook_utils.lab._compat import block_until_ready  # noqa: F401  (kept)
from scalebook_utils.lab.decode_loop import (
    LOGITS_TOL,
    cache_matches_recompute,
    decode_jit,
    decode_jit_donated,
    decode_step,
    generate,
    prefill,
    prefill_jit,
)
from scalebook_utils.lab.decode_timing import (
    DECODE_DEMO,
    MATMUL_N,
    READ_BYTES,
    ROOFLINE_FORMS,
    DecodeRow,
    PrefillVsDecode,
    decode_bounds,
    decode_roofline,
    decode_served_model,
    format_decode_rows,
    measure_decode,
    prefill_vs_decode,
    read_bandwidth,
)
from scalebook_utils.lab.kv_cache import cache_bytes, check_cache, init_cache, serving_params
from scalebook_utils.lab.tinymodel import check_config, check_tokens, is_tracer, rms_norm  # noqa: F401  (kept)

__all__ = [
    "DECODE_DEMO",
    "LOGITS_TOL",
    "ROOFLINE_FORMS",
    "READ_BYTES",
    "MATMUL_N",
    "init_cache",
    "cache_bytes",
    "check_cache",
    "serving_params",
    "prefill_jit",
    "decode_jit",
    "decode_jit_donated",
    "prefill",
    "decode_step",
    "generate",
    "cache_matches_recompute",
    "decode_served_model",
    "read_bandwidth",
    "decode_bounds",
    "decode_roofline",
    "DecodeRow",
    "measure_decode",
    "format_decode_rows",
    "PrefillVsDecode",
    "prefill_vs_decode",
]
