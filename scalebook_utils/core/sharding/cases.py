"""The four cases of a sharded matmul (book ch. 3, "Computation With Sharded Arrays"): the matmul itself
(`Matmul`, read from the book's notation by `parse_matmul`) and which case it is (`classify`).

    1. the contracting dim is unsharded in both inputs → no communication
    2. one input is sharded on the contracting dim → AllGather it first (or: local matmul + AllReduce)
    3. both are sharded on the contracting dim along the same axes → local matmul, then AllReduce
       (or ReduceScatter when the target is sharded)
    4. both shard a non-contracting dim on the same axis → AllGather one input first

Pure Python over `notation`; the plans are in `plans`, the JAX program in `program` (all re-exported by
`matmul`, the public `sharded_matmul`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from scalebook_utils.core.sharding.notation import ShardedArray, ShardingError, axes_text, parse_array

#: `matmul` (the public `sharded_matmul`) re-exports the first four; `plans` uses the axis helpers too
__all__ = ["Matmul", "parse_matmul", "MatmulCase", "classify", "contract_axes", "free_axes"]

_OP = r"(?:·|⋅|\*|@|\.)"


@dataclass(frozen=True)
class Matmul:
    """A ·_contracting B [→ out]. `out` is the target sharding (None: whatever the local matmul gives)."""

    a: ShardedArray
    b: ShardedArray
    contracting: tuple[str, ...]
    out: ShardedArray | None = None

    def __post_init__(self):
        object.__setattr__(self, "contracting", tuple(self.contracting))
        for arr in (self.a, self.b):
            if arr.unreduced:
                raise ShardingError(f"input {arr.spec()} is unreduced; reduce it before a matmul")
        if not self.contracting:
            raise ShardingError(f"{self.a.spec()} and {self.b.spec()} share no dim to contract")
        for d in self.contracting:
            if d not in self.a.dims or d not in self.b.dims:
                raise ShardingError(f"contracting dim {d} must appear in both {self.a.spec()} and {self.b.spec()}")
        batch = [d for d in self.a.dims if d in self.b.dims and d not in self.contracting]
        if batch:
            raise ShardingError(
                f"dim(s) {', '.join(batch)} appear in both inputs but are not contracted; "
                "batched matmuls are not covered by the four cases"
            )
        if self.out is not None:
            free = self.free_a + self.free_b
            if sorted(self.out.dims) != sorted(free):
                raise ShardingError(
                    f"target {self.out.spec()} must have dims {', '.join(free)} "
                    f"(the free dims of {self.a.name} and {self.b.name})"
                )

    @property
    def free_a(self) -> tuple[str, ...]:
        return tuple(d for d in self.a.dims if d not in self.contracting)

    @property
    def free_b(self) -> tuple[str, ...]:
        return tuple(d for d in self.b.dims if d not in self.contracting)

    @property
    def out_dims(self) -> tuple[str, ...]:
        """Output dims: the target's order when given, else A's free dims then B's."""
        return self.out.dims if self.out is not None else self.free_a + self.free_b

    @property
    def out_name(self) -> str:
        return self.out.name if self.out is not None else "C"

    def spec(self) -> str:
        """'A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]' (parse_matmul(m.spec()) == m)."""
        sub = self.contracting[0] if len(self.contracting) == 1 else "{" + ",".join(self.contracting) + "}"
        s = f"{self.a.spec()} ·_{sub} {self.b.spec()}"
        return s + (f" → {self.out.spec()}" if self.out is not None else "")

    def __str__(self) -> str:
        return self.spec()

    def einsum(self) -> str:
        """numpy/jnp einsum string, e.g. 'ij,jk->ik' (one lower-case letter per dim name)."""
        names = list(dict.fromkeys(self.a.dims + self.b.dims))
        if all(len(d) == 1 for d in names) and len({d.lower() for d in names}) == len(names):
            letters = {d: d.lower() for d in names}  # I, J, K → 'ij,jk->ik'
        else:
            letters = {d: "abcdefghijklmnopqrstuvwxyz"[i] for i, d in enumerate(names)}
        lt = lambda dims: "".join(letters[d] for d in dims)  # noqa: E731
        return f"{lt(self.a.dims)},{lt(self.b.dims)}->{lt(self.out_dims)}"


def parse_matmul(text: str | Matmul) -> Matmul:
    """'A[I_X, J] ·_J B[J, K_Y]' (also '*_J', '@', no subscript, '→ C[...]' or '-> C[...]') → Matmul.

    Without a subscript the contracting dims are the dims shared by A and B (minus any the target keeps).
    """
    if isinstance(text, Matmul):
        return text
    if not isinstance(text, str):
        raise ShardingError(f"a matmul is a string like 'A[I_X, J] ·_J B[J, K_Y]', got {text!r}")
    left, *rest = re.split(r"→|->", text)
    if len(rest) > 1:
        raise ShardingError(f"{text!r} has more than one arrow")
    m = re.match(
        rf"^\s*(?P<a>[^\[\]]+\[[^\]]*\](?:\s*\{{[^}}]*\}})?)\s*{_OP}"
        rf"(?:_\s*(?P<sub>\{{[^}}]*\}}|[A-Za-z][A-Za-z0-9']*(?=\s)))?\s*(?P<b>.+)$",
        left,
    )
    if not m:
        raise ShardingError(f"cannot read {text!r} as a matmul; write e.g. 'A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]'")
    a, b = parse_array(m.group("a")), parse_array(m.group("b"))
    out = parse_array(rest[0]) if rest else None
    sub = m.group("sub")
    if sub:
        contracting = tuple(s.strip() for s in sub.strip("{}").split(",") if s.strip())
    else:
        keep = set(out.dims) if out is not None else set()
        contracting = tuple(d for d in a.dims if d in b.dims and d not in keep)
    return Matmul(a, b, contracting, out)


class MatmulCase(int):
    """The book's case number (1–4) as an int, with `.reason` saying why."""

    reason: str

    def __new__(cls, case: int, reason: str):
        obj = super().__new__(cls, case)
        obj.reason = reason
        return obj

    def __repr__(self) -> str:
        return f"MatmulCase({int(self)}, {self.reason!r})"


def contract_axes(arr: ShardedArray, contracting: Sequence[str]) -> tuple[str, ...]:
    """The mesh axes that shard `arr`'s contracting dims, in dim order (A[I, J_XY] over J → ('X', 'Y'))."""
    return tuple(a for d in contracting for a in arr.axes_of(d))


def free_axes(arr: ShardedArray, contracting: Sequence[str]) -> tuple[str, ...]:
    """The mesh axes that shard `arr`'s other (free, non-contracting) dims (A[I_X, J] over J → ('X',))."""
    return tuple(a for d, ax in zip(arr.dims, arr.axes) if d not in contracting for a in ax)


def classify(matmul: Matmul | str) -> MatmulCase:
    """The book's case (ch. 3, "Computation With Sharded Arrays") of a sharded matmul, with a reason.

    1: the contracting dim is unsharded in both inputs (and no non-contracting axis clash) — no comms;
    2: the contracting dim is sharded in one input only, or on different axes in the two;
    3: both inputs shard the contracting dim along the same axes — local matmul, then a reduction;
    4: the contracting dim is unsharded but both inputs shard a non-contracting dim on the same axis.
    Cases 2/3 are decided first (a contraction clash is resolved before a free-dim clash).
    """
    m = parse_matmul(matmul)
    ca, cb = contract_axes(m.a, m.contracting), contract_axes(m.b, m.contracting)
    j = ",".join(m.contracting)
    clash = sorted(set(free_axes(m.a, m.contracting)) & set(free_axes(m.b, m.contracting)))
    extra = (
        (
            f"; afterwards both still shard a non-contracting dim on {', '.join(clash)} (case 4), "
            "so one input is also gathered"
        )
        if clash
        else ""
    )
    if ca and ca == cb:
        return MatmulCase(
            3,
            f"both inputs shard the contracting dim {j} on {axes_text(ca)}: local matmul "
            f"gives partial sums {{U_{axes_text(ca)}}}, then AllReduce or ReduceScatter" + extra,
        )
    if ca or cb:
        if ca and cb:
            why = (
                f"the contracting dim {j} is sharded on different axes ({m.a.name}: {axes_text(ca)}, "
                f"{m.b.name}: {axes_text(cb)})"
            )
        else:
            who, ax = (m.a, ca) if ca else (m.b, cb)
            why = f"only {who.name} shards the contracting dim {j} (on {axes_text(ax)})"
        return MatmulCase(2, why + ": AllGather it first (or local matmul + AllReduce)" + extra)
    if clash:
        return MatmulCase(
            4, f"both inputs shard a non-contracting dim on {', '.join(clash)}: AllGather one input first"
        )
    return MatmulCase(
        1,
        f"the contracting dim {j} is unsharded in both inputs: no communication, "
        "the output keeps the inputs' shardings",
    )
