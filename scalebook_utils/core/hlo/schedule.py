"""hlo.schedule: the order XLA scheduled a program's collectives and matmuls in, and what each matmul waits for.

Book ch. 10, "Programming TPUs in JAX" §"Collective matmul" (C10.7, ch10.q3–q4): a collective matmul
overlaps communication with compute only if its matmuls do not all wait for every collective. A reader
on top of `hlo.text` (pure: no jax), over the ENTRY computation in program order:

- `hlo_schedule(hlo)`: its collectives and matmuls as XLA ordered them ('collective-permute', …, 'dot');
- `hlo_dependencies(hlo)`: for each matmul, how many collectives it transitively waits for;
- `overlap_summary(hlo)`: both, with counts of collectives, matmuls, matmuls scheduled between the first
  and the last collective, and matmuls that need no communication.

A matmul is a `dot`/`convolution`, a matmul custom-call, or a fusion whose computation holds a dot
(`HloOp.inner`). `collective_matmul` (ch. 10's jax programs) and `jaxprog` re-export the three.
"""

from __future__ import annotations

from scalebook_utils.core.hlo.text import MATMUL_OPS, HloOp, parse_module


def _step(op: HloOp) -> str:
    """'dot', the collective an instruction issues ('all-gather' for `all-gather-start`), or 'other'."""
    if op.collective:
        return op.collective
    attrs = op.attributes.split(", metadata=")[0]
    if (
        op.opcode in MATMUL_OPS
        or (op.opcode == "custom-call" and "matmul" in attrs.lower())
        or (op.opcode == "fusion" and any(o in MATMUL_OPS for o in op.inner))
    ):
        return "dot"
    return "other"


def _entry_steps(hlo: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, 'dot' | collective kind | 'other', the instructions it waits for) per ENTRY instruction, in order."""
    entry = parse_module(hlo).entry
    if entry is None:
        return []
    return [(op.name, _step(op), op.operand_names + op.control_predecessors) for op in entry.instructions]


def hlo_schedule(hlo: str) -> list[str]:
    """The ENTRY computation's collectives and matmuls in the order XLA scheduled them:
    'collective-permute', 'all-gather', …, or 'dot'. (The CPU scheduler of older JAX puts every
    collective first — it runs them synchronously; see `hlo_dependencies` for what *could* overlap.)"""
    return [k for _n, k, _a in _entry_steps(hlo) if k != "other"]


def hlo_dependencies(hlo: str) -> list[int]:
    """For each matmul of the ENTRY computation, how many collectives it (transitively) waits for, sorted.

    The collective matmul on Y devices gives [0, 1, …, Y−1]: the first block multiplies before any
    data has arrived, and block s waits only for s shifts — the others can run while it computes. The
    plain version gives [1]: its one matmul waits for the whole AllGather."""
    deps: dict[str, set] = {}
    res = []
    for name, kind, args in _entry_steps(hlo):
        up = set().union(*(deps.get(a, set()) for a in args)) if args else set()
        deps[name] = up | ({name} if kind not in ("dot", "other") else set())
        if kind == "dot":
            res.append(len(up))
    return sorted(res)


def overlap_summary(hlo: str) -> dict:
    """'schedule' (`hlo_schedule`), 'waits' (`hlo_dependencies`), 'collectives', 'dots', 'dots_between'
    (matmuls scheduled between the first and the last collective) and 'free_dots' (matmuls that need no
    communication at all: work available to hide the first transfer behind)."""
    order = hlo_schedule(hlo)
    idx = [i for i, k in enumerate(order) if k != "dot"]
    between = sum(1 for i, k in enumerate(order) if k == "dot" and idx and idx[0] < i < idx[-1])
    waits = hlo_dependencies(hlo)
    return {
        "schedule": order,
        "waits": waits,
        "collectives": len(idx),
        "dots": order.count("dot"),
        "dots_between": between,
        "free_dots": waits.count(0),
    }


__all__ = ["hlo_schedule", "hlo_dependencies", "overlap_summary"]
