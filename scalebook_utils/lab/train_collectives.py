"""Ch. 5's cost model against the compiled training step: which collectives `training.step_collectives`
predicts for a scheme, and whether XLA compiled those (`compare_collectives`, `compare_compiled`).

Part of `jaxtrain` (re-exported by `lab/train.py`); reads the collectives with the pure HLO reader
(`core/hlo/collectives.py`) and needs only `train_models.check_mesh` of the training side, so it takes any
record with a `TrainResult`'s fields. Bytes are per array, as `training.Collective` counts them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from scalebook_utils.core.hlo.collectives import HloCollective
from scalebook_utils.core.hlo.text import HLO_NAME
from scalebook_utils.core.training import planner as training
from scalebook_utils.lab.train_models import check_mesh

# --- the cost model against the compiled step ----------------------------------------------------------


#: The collectives ch. 5's cost model predicts, by family: 'gather' for all-gather; 'reduce' for all-reduce and
#: reduce-scatter (XLA:CPU lowers a reduce-scatter from automatic sharding to all-reduce + dynamic-slice; both
#: reduce the same input).
_FAMILY = {HLO_NAME["all_gather"]: "gather", HLO_NAME["all_reduce"]: "reduce", HLO_NAME["reduce_scatter"]: "reduce"}
_REDUCES = tuple(k for k, family in _FAMILY.items() if family == "reduce")


def _class(kind: str) -> str:
    """The family of a collective (`_FAMILY`); other kinds stand for themselves."""
    return _FAMILY.get(kind, kind)


def predicted_step(
    strategy: str, *, B: int, D: int, F: int, L: int, X: int, Y: int, bytes_per_element: float, regather: bool = True
) -> list[training.Collective]:
    """The collectives of one whole training step of an L-block MLP stack, from `training.step_collectives`.

    L × the per-layer list, except (1) collectives on an axis of one device (none happen) and (2) the
    first block's work for dIn, because the input data needs no gradient: its ReduceScatter_Y of dIn
    and (with `regather`) its backward AllGather_X of W_in, which the book re-gathers only to form dIn.
    """
    per_layer = training.step_collectives(
        strategy, B=B, D=D, F=F, X=X, Y=Y, bytes_per_element=bytes_per_element, regather=regather
    )
    size = {"X": X, "Y": Y}
    out = []
    for layer in range(L):
        for c in per_layer:
            if size[c.axis] == 1:
                continue
            if layer == 0 and (c.array == "dIn" or (c.array == "W_in" and c.phase == "backward")):
                continue
            out.append(c)
    return out


@dataclass(frozen=True)
class CollectiveRow:
    """One kind of transfer: (model kind, axis, full shape), how many the model predicts (lo…hi; lo < hi
    only where the model allows FSDP's backward re-gather or not) and how many XLA compiled."""

    kind: str
    axis: str
    shape: tuple[int, ...]
    arrays: tuple[str, ...]
    predicted_min: int
    predicted_max: int
    compiled: int
    compiled_kinds: tuple[str, ...]
    nbytes_each: float

    @property
    def ok(self) -> bool:
        return self.predicted_min <= self.compiled <= self.predicted_max


@dataclass(frozen=True)
class Comparison:
    """`compare_collectives`'s verdict for one run: rows, extras, bytes and `agree`.

    predicted_bytes: (min, max) total over the step; compiled_bytes: the matched compiled arrays' total;
    scalar_extras: compiled collectives of one element (loss reductions); unexplained: compiled
    collectives the model cannot account for; notes: which allowed differences were used.
    For a transformer run (`kind_only`), rows hold (kind class, axis) pairs with shape () and the
    number of compiled arrays of that class on that axis; bytes are not compared.
    """

    strategy: str
    mesh_shape: tuple[int, int]
    rows: tuple[CollectiveRow, ...]
    predicted_bytes: tuple[float, float]
    compiled_bytes: float
    scalar_extras: tuple[HloCollective, ...]
    unexplained: tuple[HloCollective, ...]
    notes: tuple[str, ...]
    kind_only: bool = False

    @property
    def agree(self) -> bool:
        return all(r.ok for r in self.rows) and not self.unexplained

    def table(self, notes: bool = True) -> str:
        """The rows as a text table; `notes=False` leaves out the list of allowed differences used."""
        head = f"{'model kind':<15}{'axis':<5}{'shape':<14}{'arrays':<16}{'predicted':>10}{'compiled':>9}  compiled as"
        lines = [f"{self.strategy} on {self.mesh_shape[0]}×{self.mesh_shape[1]} — agree: {self.agree}", head]
        for r in self.rows:
            pred = (
                f"{r.predicted_min}"
                if r.predicted_min == r.predicted_max
                else f"≥ {r.predicted_min}"
                if r.predicted_max >= 10**9
                else f"{r.predicted_min}–{r.predicted_max}"
            )
            shape = "×".join(map(str, r.shape)) or "-"
            lines.append(
                f"{r.kind:<15}{r.axis:<5}{shape:<14}{','.join(r.arrays):<16}{pred:>10}{r.compiled:>9}  "
                f"{', '.join(r.compiled_kinds) or '—'}{'' if r.ok else '   ✗'}"
            )
        if not self.kind_only:
            lo, hi = self.predicted_bytes
            pb = f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}–{hi:,.0f}"
            lines.append(f"bytes: predicted {pb}, compiled {self.compiled_bytes:,.0f}")
        if self.scalar_extras:
            lines.append(f"+ {len(self.scalar_extras)} scalar all-reduce(s) (the loss)")
        for u in self.unexplained:
            lines.append(f"unexplained: {u}")
        if notes:
            lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def compare_collectives(result) -> Comparison:
    """Compare the collectives XLA compiled into `result`'s step with `training.step_collectives`.

    Agreement rule (MLP stack), deterministic:
    1. Prediction = `predicted_step` (L × the per-layer list of `training.step_collectives`, with
       bytes_per_element = the parameters' itemsize, 4 for fp32, minus the first block's dIn work).
       Keys are (class, axis, full shape) with class 'gather' (AllGather) or 'reduce' (AllReduce or
       ReduceScatter); the shape convention is `training.Collective`'s.
    2. Every compiled non-scalar collective must match a key, and for every key the compiled count
       lies between the prediction with `regather=False` and with `regather=True`: XLA may keep the
       weights it gathered in the forward pass for the backward pass instead of gathering again.
    3. Allowed differences, each explained in `notes` when used:
       - ReduceScatter compiled as AllReduce (+ dynamic-slice): XLA:CPU never emits reduce-scatter from
         automatic sharding; the all-reduce has the reduce-scatter's input shape and bytes.
       - Combined ops: XLA's combiner merges several all-reduces (e.g. every gradient, plus the loss)
         into one tuple-valued instruction; each array counts separately.
       - Scalar all-reduces (one element): the loss mean over a sharded batch is reduced across devices;
         the chapter's per-layer model leaves the loss out. Nothing else may be extra.
    Any all-to-all or collective-permute, or an op whose replica groups are not whole mesh axes, is
    unexplained. Collectives over groups of one device move nothing and are ignored.

    Transformer runs (`result.model_kind == 'transformer'`): the model is the MLP stack's, so only kinds
    are compared, per axis, as (class, axis) pairs taken from `training.step_collectives`:
    - every compiled non-scalar collective is a gather or reduce on a predicted (class, axis) — so DP
      gathers nothing over X, FSDP gathers (weights) and reduces (gradients) over X, TP moves nothing
      over X — and every predicted pair appears at least once, except the AllGather over Y: when XLA
      keeps the residual stream replicated over 'model', each block's ReduceScatter_Y and the next
      block's AllGather_Y are one AllReduce_Y (Megatron's form; ch. 3: AllReduce = ReduceScatter +
      AllGather), which the rule accepts and notes;
    - groups that are part of one axis are allowed (noted): GQA's attention reshapes the sharded query
      heads N into (K, G), which splits the 'model' axis (2 × 4 for K = 2 on 8 devices);
    - the transformer's extra small reductions (RMSNorm means and softmax statistics over a D- or
      V-sharded axis, [B, T] values) are reduces over Y and count with them. Bytes are not compared.
    """
    X, Y = result.mesh_shape
    comp = [c for c in result.collectives if c.axes != ()]  # groups of one device move nothing
    trivial = len(result.collectives) - len(comp)
    scalars = tuple(c for c in comp if c.is_scalar and c.kind in _REDUCES)
    comp = [c for c in comp if not (c.is_scalar and c.kind in _REDUCES)]
    notes = []
    if any(c.combined > 1 for c in result.collectives):
        k = len({c.name for c in result.collectives if c.combined > 1})
        notes.append(f"XLA combined arrays into {k} tuple-valued collective(s); each array is counted")
    if scalars:
        notes.append(f"{len(scalars)} scalar all-reduce(s) reduce the loss over the sharded batch")
    if trivial:
        notes.append(f"{trivial} collective(s) over groups of one device (no data moves) ignored")
    if result.model_kind == "transformer":
        return _compare_kinds(result, comp, scalars, notes)
    d = result.dims
    kw = dict(B=d["B"], D=d["D"], F=d["F"], L=d["L"], X=X, Y=Y, bytes_per_element=result.bytes_per_element)
    lo = predicted_step(result.strategy, regather=False, **kw)
    hi = predicted_step(result.strategy, regather=True, **kw)
    key = lambda kind, axis, shape: (_class(kind), axis, tuple(shape))  # noqa: E731
    lo_n = Counter(key(c.kind, c.axis, c.shape) for c in lo)
    hi_n = Counter(key(c.kind, c.axis, c.shape) for c in hi)
    info = {}
    for c in hi:
        k = key(c.kind, c.axis, c.shape)
        kinds, arrays, nb = info.get(k, (set(), set(), c.nbytes))
        info[k] = (kinds | {c.kind}, arrays | {c.array}, nb)
    matched, unexplained = {}, []
    for c in comp:
        k = key(c.kind, c.axis, c.shape)
        if k in hi_n and c.kind in _FAMILY and not c.subgroup:
            matched.setdefault(k, []).append(c)
        else:
            unexplained.append(c)
    rows = []
    for k in sorted(hi_n, key=lambda k: (k[1], k[0], k[2])):
        kinds, arrays, nb = info[k]
        got = matched.get(k, [])
        ck = tuple(sorted({c.kind for c in got}))
        rows.append(
            CollectiveRow(
                "/".join(sorted(kinds)), k[1], k[2], tuple(sorted(arrays)), lo_n.get(k, 0), hi_n[k], len(got), ck, nb
            )
        )
        if "reduce-scatter" in kinds and "all-reduce" in ck:
            notes.append(
                f"reduce-scatter of {'×'.join(map(str, k[2]))} over {k[1]} compiled as all-reduce "
                "(+ dynamic-slice): XLA:CPU's form"
            )
        if k[0] == "gather" and lo_n.get(k, 0) < hi_n[k] and got:
            n, m = len(got) - lo_n.get(k, 0), hi_n[k] - lo_n.get(k, 0)
            how = (
                " — the backward pass reuses the forward's gathered weights (regather=False)"
                if n == 0
                else " — every backward use gathers again (regather=True)"
                if n == m
                else ""
            )
            notes.append(
                f"all-gather of {'×'.join(map(str, k[2]))} over {k[1]}: {n} of the {m} optional backward "
                f"re-gathers compiled{how}"
            )
    compiled_bytes = float(sum(c.nbytes for cs in matched.values() for c in cs))
    return Comparison(
        result.strategy,
        (X, Y),
        tuple(rows),
        (float(sum(c.nbytes for c in lo)), float(sum(c.nbytes for c in hi))),
        compiled_bytes,
        scalars,
        tuple(unexplained),
        tuple(notes),
    )


@dataclass(frozen=True)
class _Compiled:
    """What `compare_collectives` reads of a run: enough to compare a step compiled outside `train`."""

    strategy: str
    mesh_shape: tuple[int, int]
    collectives: tuple[HloCollective, ...]
    dims: dict
    bytes_per_element: int
    model_kind: str = "mlp"


def compare_compiled(
    collectives, strategy: str, mesh_shape, *, B: int, D: int, F: int, L: int, bytes_per_element: int = 4
) -> Comparison:
    """`compare_collectives` for an MLP-stack step you jitted yourself (the notebook's visible step).

    collectives: `jaxlab.parse_hlo_collectives(hlo, (X, Y), axis_names)` of the compiled step, with the
    mesh axes named 'X'/'Y' (the book's letters) or 'data'/'model'; strategy: the scheme whose algorithm
    box (`training.step_collectives`, L blocks) it should match; B, D, F, L: the model's sizes;
    bytes_per_element: 4 for fp32. Same agreement rule as `compare_collectives`: a layout that is not the
    scheme's (an edited PartitionSpec) shows as rows that do not match or collectives left unexplained.
    Raises ValueError when the mesh does not fit the scheme (`check_mesh`: DP and FSDP need Y = 1, TP X = 1).
    """
    X, Y = check_mesh(strategy, mesh_shape, n_devices=math.prod(int(v) for v in mesh_shape))
    dims = {"B": int(B), "D": int(D), "F": int(F), "L": int(L)}
    return compare_collectives(_Compiled(strategy, (X, Y), tuple(collectives), dims, int(bytes_per_element)))


def _compare_kinds(result, comp, scalars, notes):
    """The transformer's kind-level rule (see `compare_collectives`)."""
    X, Y = result.mesh_shape
    size = {"X": X, "Y": Y}
    pred = {}
    for c in training.step_collectives(result.strategy, B=8 * X * Y, D=8 * X * Y, F=8 * X * Y, X=X, Y=Y):
        if size[c.axis] > 1:
            pred.setdefault((_class(c.kind), c.axis), set()).add(c.kind)
    optional = {("gather", "Y")} & set(pred)
    got, unexplained = {}, []
    for c in comp:
        k = (_class(c.kind), c.axis)
        if k in pred and c.kind in _FAMILY:
            got.setdefault(k, []).append(c)
        else:
            unexplained.append(c)
    rows = []
    for k in sorted(pred, key=lambda k: (k[1], k[0])):
        ops = got.get(k, [])
        ck = tuple(sorted({c.kind for c in ops}))
        rows.append(
            CollectiveRow("/".join(sorted(pred[k])), k[1], (), (), 0 if k in optional else 1, 10**9, len(ops), ck, 0.0)
        )
        if "reduce-scatter" in pred[k] and "all-reduce" in ck and not (k[1] == "Y" and not got.get(("gather", "Y"))):
            notes.append(f"reduce-scatter over {k[1]} compiled as all-reduce (+ dynamic-slice): XLA:CPU's form")
        if k in optional and not ops:
            notes.append(
                "no all-gather over Y: XLA kept the residual stream replicated over 'model', so each "
                "block's ReduceScatter_Y and the next AllGather_Y are one AllReduce_Y (an AllReduce is a "
                "ReduceScatter then an AllGather, book ch. 3)"
            )
    sub = [c for cs in got.values() for c in cs if c.subgroup]
    if sub:
        sizes = sorted({c.group_size for c in sub})
        notes.append(
            f"{len(sub)} array(s) move within part of an axis (groups of {sizes} devices): attention "
            "reshapes the sharded heads N into (K, G), splitting the axis"
        )
    return Comparison(
        result.strategy,
        (X, Y),
        tuple(rows),
        (0.0, 0.0),
        float(sum(c.nbytes for cs in got.values() for c in cs)),
        scalars,
        tuple(unexplained),
        tuple(notes),
        kind_only=True,
    )


__all__ = ["predicted_step", "CollectiveRow", "Comparison", "compare_collectives", "compare_compiled"]
