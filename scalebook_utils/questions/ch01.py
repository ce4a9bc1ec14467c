"""Chapter 1 — rooflines: the questions of "All About Rooflines" (book ch. 1)."""

from __future__ import annotations

from scalebook_utils.core import roofline as rl
from scalebook_utils.core.hardware import get_chip
from scalebook_utils.questions.registry import add

#: Ch. 1's own figure for TPU v6e bf16 FLOPs/s (ch. 2's table says 9.2e14; see hardware notes).
V6E_BF16_FLOPS_CH1 = 9.1e14
#: The 1e12-FLOP workload of ch. 1's first example.
CH1_E4_FLOPS = 1e12

V5E = "tpu-v5e"


def _v5e_int8(B, D, F) -> rl.MatmulRoofline:
    return rl.matmul_roofline(B, D, F, chip=V5E, mode="int8")


def _q3c_choice() -> str:
    ratio = rl.crossover_batch(1024, 1024, V5E, "int8-weights") / rl.crossover_batch(4096, 4096, V5E, "int8-weights")
    if ratio < 0.95:
        return "decreases it"
    return "leaves it unchanged" if ratio < 1.3 else "almost doubles it"


add(
    "ch1.e1a",
    "formula",
    "Arithmetic intensity of a bf16 dot product x·y, x, y: bf16[N]",
    lambda: lambda N: rl.dot_product_intensity(N, "bf16"),
    unit="FLOPs/byte",
    variables=("N",),
)
add(
    "ch1.e1b",
    "number",
    "Limit of the bf16 dot-product intensity as N → ∞",
    lambda: rl.dot_product_intensity_limit("bf16"),
    unit="FLOPs/byte",
)
add(
    "ch1.e2",
    "number",
    "Critical token batch for a bf16 matmul on TPU v5e",
    lambda: rl.critical_batch(V5E, "bf16"),
    unit="tokens",
    accept=(232.8, 247.2),
)
add(
    "ch1.e3",
    "number",
    "Smallest D for which a 2-chip D-sharded matmul is compute-bound (v5e, 4.5e10 B/s link)",
    lambda: rl.two_chip_d_threshold(
        get_chip(V5E).peak_flops("bf16"), get_chip(V5E).ici_link_bandwidth_oneway_bytes_per_s
    ),
    unit="count",
    accept=(8492, 9018),
)
add(
    "ch1.e4a",
    "number",
    "Time for 1e12 FLOPs on an H100 (bf16 dense)",
    lambda: rl.t_math(CH1_E4_FLOPS, get_chip("h100").peak_flops("bf16")),
    unit="s",
    accept=(0.0009797, 0.001041),
)
add(
    "ch1.e4b",
    "number",
    "Time for 1e12 FLOPs on a TPU v6e at ch. 1's 9.1e14 FLOPs/s",
    lambda: rl.t_math(CH1_E4_FLOPS, V6E_BF16_FLOPS_CH1),
    unit="s",
    accept=(0.001067, 0.001133),
)
add(
    "ch1.q1a",
    "formula",
    "int8 X[B,D]·Y[D,F]→Z[B,F]: bytes read from HBM",
    lambda: lambda B, D, F: rl.matmul_io_bytes(B, D, F, "int8")[0],
    unit="bytes",
    variables=("B", "D", "F"),
)
add(
    "ch1.q1b",
    "formula",
    "int8 matmul: bytes written to HBM",
    lambda: lambda B, D, F: rl.matmul_io_bytes(B, D, F, "int8")[1],
    unit="bytes",
    variables=("B", "D", "F"),
)
add("ch1.q1c", "formula", "int8 matmul: total OPs", lambda: rl.matmul_flops, unit="OPs", variables=("B", "D", "F"))
add(
    "ch1.q1d",
    "formula",
    "int8 matmul: arithmetic intensity",
    lambda: lambda B, D, F: rl.matmul_intensity(B, D, F, "int8"),
    unit="OPs/byte",
    variables=("B", "D", "F"),
)
add(
    "ch1.q1e",
    "number",
    "int8 matmul on v5e: batch above which it is compute-bound",
    lambda: rl.critical_batch(V5E, "int8"),
    unit="tokens",
    accept=(232.8, 247.2),
)
add(
    "ch1.q1f",
    "formula",
    "int8 matmul on v5e: T_math",
    lambda: lambda B, D, F: _v5e_int8(B, D, F).t_math_s,
    unit="s",
    variables=("B", "D", "F"),
)
add(
    "ch1.q1g",
    "formula",
    "int8 matmul on v5e: T_comms",
    lambda: lambda B, D, F: _v5e_int8(B, D, F).t_comms_s,
    unit="s",
    variables=("B", "D", "F"),
)
add(
    "ch1.q1h",
    "formula",
    "int8 matmul on v5e: lower bound on runtime",
    lambda: lambda B, D, F: _v5e_int8(B, D, F).t_lower_s,
    unit="s",
    variables=("B", "D", "F"),
)
add(
    "ch1.q1i",
    "formula",
    "int8 matmul on v5e: upper bound on runtime",
    lambda: lambda B, D, F: _v5e_int8(B, D, F).t_upper_s,
    unit="s",
    variables=("B", "D", "F"),
)
add(
    "ch1.q2",
    "number",
    "bf16[B,D]·int8[D,F] with bf16 compute on v5e: compute-bound batch",
    lambda: rl.critical_batch(V5E, "int8-weights"),
    unit="tokens",
)
add(
    "ch1.q3a",
    "number",
    "int8 weights, bf16 compute, exact bytes, D=F=4096: batch where FLOPs/s reaches peak",
    lambda: rl.crossover_batch(4096, 4096, V5E, "int8-weights"),
    unit="tokens",
    rtol=0.05,
    note="The book answers with a plot only; the value is T_math = T_comms with exact bytes.",
)
add(
    "ch1.q3b",
    "number",
    "Same for D=F=1024",
    lambda: rl.crossover_batch(1024, 1024, V5E, "int8-weights"),
    unit="tokens",
    rtol=0.05,
    note="The book answers with a plot only.",
)
add(
    "ch1.q3c",
    "choice",
    "Effect on the critical batch of shrinking D=F from 4096 to 1024",
    _q3c_choice,
    options=("decreases it", "leaves it unchanged", "almost doubles it"),
)
add(
    "ch1.q4a",
    "formula",
    "Intensity of int8[B,D]·_D int8[B,D,F] → int8[B,F]",
    lambda: lambda B, D, F: rl.batched_weights_intensity(B, D, F, "int8"),
    unit="OPs/byte",
    variables=("B", "D", "F"),
)
add(
    "ch1.q4b",
    "number",
    "Its value for large D, F",
    lambda: rl.batched_weights_intensity_limit("int8"),
    unit="OPs/byte",
    accept=(1.94, 2.06),
)
add(
    "ch1.q5",
    "number",
    "Critical batch for a bf16 matmul on an H100 SXM (dense = spec-sheet sparse ÷ 2)",
    lambda: rl.critical_batch("h100", "bf16"),
    unit="tokens",
    accept=(286.1, 303.9),
)
