"""Serving economics: prefill/generate server ratios under disaggregation, KV evictions per step, FLOPs per
dollar and cost per token, and speculative decoding (book ch. 7 Appendix D; ch. 8 "Thinking about throughput",
in-text questions 11 and 12, the cost table).

Built on `inference.decode` (the step-time roofline) and the chips' hourly prices (`hardware`). Units: seconds,
tokens, bytes, US dollars.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.core.inference.decode import decode_step
from scalebook_utils.core.units import require_int, require_number, require_positive


def prefill_servers_per_generate_server(
    prefill_latency: float, generate_step_time: float, batch: float, decode_len: float
) -> float:
    """Prefill/generate server ratio that keeps both saturated: each generate server finishes B sequences every
    decode_len steps, each prefill server one prompt per prefill_latency, so
    ratio = prefill_latency·B/(step_time·decode_len) (book ch. 8 question 12: 0.91·32/(0.019·512) ≈ 3)."""
    require_positive(
        prefill_latency=prefill_latency, generate_step_time=generate_step_time, batch=batch, decode_len=decode_len
    )
    return prefill_latency * batch / (generate_step_time * decode_len)


def queries_per_s_per_chip(batch: float, step_time: float, decode_len: float, n_chips: float) -> float:
    """Finished queries per second per chip when `batch` sequences decode together at `step_time` seconds per
    step and each query takes `decode_len` steps: B/(step_time · decode_len · N) (book ch. 8 in-text questions 7
    and 8: 43 sequences at the stated 19 ms, 512 steps, 16 chips → 0.276). `DecodeStep.queries_per_s_per_chip`
    is the same with the step time of its own roofline."""
    require_positive(batch=batch, step_time=step_time, decode_len=decode_len, n_chips=n_chips)
    return batch / (step_time * decode_len * n_chips)


@dataclass(frozen=True)
class KVEviction:
    """Sequences finishing and KV tokens to evict (and replace) per generate step; bytes when sizes are given."""

    sequences_per_step: float
    tokens_per_step: float
    bytes_per_step: float | None = None
    bytes_per_s: float | None = None


def kv_eviction_rate(
    B: float,
    prefill_len: float,
    decode_len: float,
    *,
    kv_bytes_per_token: float | None = None,
    step_time: float | None = None,
) -> KVEviction:
    """Steady state: B/G sequences finish per step, each freeing (P + G) KV tokens: B·(P+G)/G tokens per step
    (book ch. 8 question 11: B = 32, P = 8192, G = 4096 → 96). With KV bytes/token and the step time this is the
    bytes/s of cache freed (and re-filled by new sequences). Under disaggregated serving only the P prompt tokens
    of each new sequence arrive from a prefill server: that inbound transfer is sequences_per_step·P·KV bytes."""
    require_positive(B=B, prefill_len=prefill_len, decode_len=decode_len)
    seqs = B / decode_len
    toks = seqs * (prefill_len + decode_len)
    nbytes = None if kv_bytes_per_token is None else toks * kv_bytes_per_token
    rate = None
    if nbytes is not None and step_time is not None:
        require_positive(step_time=step_time)
        rate = nbytes / step_time
    return KVEviction(seqs, toks, nbytes, rate)


def flops_per_dollar(chip="tpu-v5e", dtype: str = "bf16") -> float:
    """Peak FLOPs bought per US dollar: C·3600/price per hour (book ch. 8 cost table; v5e 5.9e17)."""
    c = get_chip(chip)
    if c.price_per_hour_usd is None:
        raise ValueError(f"{c.name} has no hourly price in the book")
    return c.peak_flops(dtype) * 3600 / c.price_per_hour_usd


def cost_per_million_tokens(
    tokens_per_s_per_chip: float, chip="tpu-v5e", *, price_per_hour_usd: float | None = None
) -> float:
    """US dollars per 1e6 tokens: price/3600 / (tokens/s/chip) · 1e6 (book ch. 8, cost per token at roofline)."""
    require_positive(tokens_per_s_per_chip=tokens_per_s_per_chip)
    c = get_chip(chip)
    price = c.price_per_hour_usd if price_per_hour_usd is None else price_per_hour_usd
    if price is None:
        raise ValueError(f"{c.name} has no hourly price in the book; pass price_per_hour_usd")
    require_positive(price_per_hour_usd=price)
    return price / 3600 / tokens_per_s_per_chip * 1e6


def speculative_tokens_per_step(acceptance: float, draft_len: int) -> float:
    """Expected tokens per target-model step with k drafted tokens, each accepted independently with
    probability α: (1 − α^(k+1))/(1 − α) (k + 1 when α = 1). Not printed in the book (ch. 7 Appendix D describes
    the scheme); the formula is Leviathan et al., "Fast Inference from Transformers via Speculative Decoding"
    (arXiv 2211.17192), eq. 1."""
    acceptance = require_number("acceptance (a probability)", acceptance, minimum=0, maximum=1)
    draft_len = require_int("draft_len", draft_len, minimum=0)
    if acceptance == 1:
        return float(draft_len + 1)
    return (1 - acceptance ** (draft_len + 1)) / (1 - acceptance)


@dataclass(frozen=True)
class SpeculativeStep:
    """Cost of one greedy speculative round (book ch. 7 Appendix D): k draft steps, then one target step that
    scores k + 1 positions per sequence. t_plain: one ordinary target step; t_draft = k draft steps;
    t_verify: the target step on B·(k+1) query tokens (the weights read once, the KV of B sequences read once,
    (k+1)× the FLOPs); tokens: expected tokens per round. All times in seconds."""

    t_plain: float
    t_draft: float
    t_verify: float
    tokens: float

    @property
    def time_per_token(self) -> float:
        """(t_draft + t_verify) / tokens: seconds per generated token per sequence."""
        return (self.t_draft + self.t_verify) / self.tokens

    @property
    def speedup(self) -> float:
        """t_plain / time_per_token: how much faster each sequence decodes than without a drafter."""
        return self.t_plain / self.time_per_token


def speculative_step(
    target,
    draft,
    B: float,
    S: float,
    draft_len: int,
    acceptance: float,
    chip="tpu-v5e",
    n_chips: int = 1,
    precision="bf16",
    *,
    shape=None,
    conventions: str = "practice",
) -> SpeculativeStep:
    """Model one speculative round: `decode_step` of the draft k times and of the target at B·(k+1) tokens,
    with the KV term of B sequences (the k+1 queries of a sequence read its cache once) and the collectives
    of B·(k+1) activations: t_verify = max(KV(B), attn FLOPs(B(k+1))) + max(2·B(k+1)·P/(N·C), P·w/(N·W))
    (then max with ICI, or + ICI where the collectives are not overlapped). Expected tokens =
    `speculative_tokens_per_step(acceptance, k)` (external formula, see there). Both models share the n_chips
    slice; `conventions` as in `decode_step`. Book ch. 7 Appendix D; the cost is not in the book."""
    draft_len = require_int("draft_len", draft_len, minimum=1)
    kw = dict(chip=chip, n_chips=n_chips, precision=precision, check_memory=False, shape=shape, conventions=conventions)
    plain = decode_step(target, B, S, **kw)
    d = decode_step(draft, B, S, **kw)
    v = decode_step(target, B * (draft_len + 1), S, **kw)
    attention = max(plain.t_hbm_kv, v.t_math_attention)
    core = attention + max(v.t_math, v.t_hbm_weights)
    t_verify = max(core, v.t_ici) if v.overlap_comms else core + v.t_ici
    return SpeculativeStep(
        t_plain=plain.step_time,
        t_draft=draft_len * d.step_time,
        t_verify=t_verify,
        tokens=speculative_tokens_per_step(acceptance, draft_len),
    )


__all__ = [
    "prefill_servers_per_generate_server",
    "queries_per_s_per_chip",
    "KVEviction",
    "kv_eviction_rate",
    "flops_per_dollar",
    "cost_per_million_tokens",
    "speculative_tokens_per_step",
    "SpeculativeStep",
    "speculative_step",
]
