"""Inference cost model: prefill vs decode, step-time bounds with KV loads, max batch, quantization, TP limits
in decode, 2D weight-stationary sharding, latency-bound collectives, disaggregation, cost (book ch. 7 and 8).

Notation (book ch. 7): B batch (sequences; one new token each per decode step), S context length (keys in the
KV cache), T prompt length (prefill), D d_model, F d_ff, L layers, K KV heads, H head dim, P parameters.
N_chips ("n_chips") is the model-parallel degree (Y in ch. 7 "Distributing Inference": every chip holds 1/Y of
the weights and of the KV caches; no data parallelism, no FSDP in decode). C = peak FLOPs/s per chip in the
compute dtype, W_hbm = HBM bytes/s per chip, W_ici = bidirectional bandwidth of one ICI axis (2 × one-way link,
9e10 B/s on TPU v5e), α_hbm = C/W_hbm, β = W_hbm/W_ici. Everything is SI: seconds, bytes, FLOPs, FLOPs/s.

This module is the front door `scalebook_utils.inference`: it holds no code of its own and re-exports every name
of the four parts, which import each other in this order only (no cycle) and can be read one by one:

- `core/inference/memory.py`: precision modes (`PRECISIONS`, `get_precision`), `critical_batch`, the served model,
  KV-cache and weight bytes, `min_chips`, `free_hbm`, `max_batch`;
- `core/inference/decode.py`: `decode_step` and `prefill_time` (the book's roofline and the `conventions=` the
  package differs from it by), ring collectives and when they are latency-bound;
- `core/inference/model_parallel.py`: one TP matmul's times, the limits on the TP degree, 2-D weight-stationary
  sharding;
- `core/inference/economics.py`: disaggregation, KV evictions, FLOPs per dollar and cost per token, speculative
  decoding.

The model-parallel collectives are `inference_comms` (`core/inference/comms.py`: `tp_comm`, `check_conventions`);
the serving planner over slices and batches is `serving`.
"""

from __future__ import annotations

# What the module exposed before the split as a side effect of its own imports: kept so that every
# `inference.X` that resolved before still resolves (the same objects); they are not the cost model's names.
import math  # noqa: F401 (inference.math resolved before the split)
import numbers  # noqa: F401 (inference.numbers resolved before the split)
from dataclasses import dataclass  # noqa: F401 (inference.dataclass resolved before the split)

from scalebook_utils.core import transformer as tf  # noqa: F401 (inference.tf resolved before the split)
from scalebook_utils.core.errors import UnknownNameError  # noqa: F401 (raised by get_precision; resolved before)
from scalebook_utils.core.hardware import ChipSpec, get_chip  # noqa: F401 (tests call inference.get_chip)
from scalebook_utils.core.inference.comms import CONVENTIONS, TPComm, check_conventions, tp_comm
from scalebook_utils.core.inference.decode import (
    COLLECTIVES_PER_LAYER,
    DecodeStep,
    Prefill,
    collective_time,
    collective_wait_hops,
    decode_step,
    latency_bound_bytes,
    latency_bound_tp_degree,
    prefill_time,
)
from scalebook_utils.core.inference.economics import (
    KVEviction,
    SpeculativeStep,
    cost_per_million_tokens,
    flops_per_dollar,
    kv_eviction_rate,
    prefill_servers_per_generate_server,
    queries_per_s_per_chip,
    speculative_step,
    speculative_tokens_per_step,
)
from scalebook_utils.core.inference.memory import (
    CH7,
    CH8,
    PRECISIONS,
    Precision,
    ServedModel,
    critical_batch,
    decode_activation_bytes,
    free_hbm,
    get_precision,
    inference_memory,
    kv_cache_bytes,
    max_batch,
    min_chips,
    precision_label,
    served_model,
)
from scalebook_utils.core.inference.model_parallel import (
    WS_1D_COMMS_FACTOR,
    TPMatmulTimes,
    WeightStationary2D,
    hbm_ici_beta,
    tp_limit_large_batch,
    tp_limit_small_batch,
    tp_matmul_times,
    weight_stationary_2d,
    ws_1d_comms,
    ws_2d_crossover_chips,
    ws_2d_optimal_X,
)
from scalebook_utils.core.units import require_int, require_positive  # noqa: F401 (resolved before the split)

__all__ = [
    # memory
    "CH7",
    "CH8",
    "Precision",
    "PRECISIONS",
    "precision_label",
    "get_precision",
    "critical_batch",
    "ServedModel",
    "served_model",
    "kv_cache_bytes",
    "inference_memory",
    "decode_activation_bytes",
    "min_chips",
    "free_hbm",
    "max_batch",
    # decode
    "COLLECTIVES_PER_LAYER",
    "collective_time",
    "collective_wait_hops",
    "latency_bound_bytes",
    "latency_bound_tp_degree",
    "DecodeStep",
    "decode_step",
    "Prefill",
    "prefill_time",
    # model_parallel
    "TPMatmulTimes",
    "tp_matmul_times",
    "hbm_ici_beta",
    "tp_limit_small_batch",
    "tp_limit_large_batch",
    "WS_1D_COMMS_FACTOR",
    "WeightStationary2D",
    "ws_2d_optimal_X",
    "weight_stationary_2d",
    "ws_1d_comms",
    "ws_2d_crossover_chips",
    # economics
    "prefill_servers_per_generate_server",
    "queries_per_s_per_chip",
    "KVEviction",
    "kv_eviction_rate",
    "flops_per_dollar",
    "cost_per_million_tokens",
    "speculative_tokens_per_step",
    "SpeculativeStep",
    "speculative_step",
    # the conventions and the TP collectives every cost takes (from inference_comms)
    "CONVENTIONS",
    "check_conventions",
    "TPComm",
    "tp_comm",
]
