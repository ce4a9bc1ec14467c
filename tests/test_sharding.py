"""Tests of scalebook_utils.sharding: the book's notation, the four matmul cases and their plans (ch. 3).

Pure Python (no JAX). What XLA compiles for the same matmuls is tested in test_sharding_jax.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scalebook_utils.sharding import ShardingError

from scalebook_utils import sharding as sh

# --- meshes ---------------------------------------------------------------------------------------


def test_parse_mesh_forms():
    m = sh.parse_mesh("{X: 2, Y: 4}")
    assert m == sh.Mesh.from_dict({"X": 2, "Y": 4}) == sh.parse_mesh("X=2, Y=4") == sh.parse_mesh({"X": 2, "Y": 4})
    assert m.names == ("X", "Y") and m.sizes == (2, 4) and m.n_devices == 8
    assert str(m) == "{X: 2, Y: 4}" and sh.parse_mesh(str(m)) == m
    assert sh.parse_mesh("{'data': 4, 'model': 2}").names == ("data", "model")


@pytest.mark.parametrize(
    "text, words",
    [
        ("{X: 2, X: 4}", ["X", "twice"]),
        ("{X: 0}", ["X", "positive"]),
        ("{X 2}", ["X 2"]),
        ("{}", ["at least one"]),
    ],
)
def test_bad_meshes(text, words):
    with pytest.raises(ShardingError) as e:
        sh.parse_mesh(text)
    assert all(w in str(e.value) for w in words)


# --- arrays: parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, dims, axes, unreduced",
    [
        ("A[I_X, J]", ("I", "J"), (("X",), ()), ()),
        ("A[I_XY, J]", ("I", "J"), (("X", "Y"), ()), ()),
        ("A[I_YX,J]", ("I", "J"), (("Y", "X"), ()), ()),
        ("C[I, K]{U_X}", ("I", "K"), ((), ()), ("X",)),
        ("C[I, K]{U_XY}", ("I", "K"), ((), ()), ("X", "Y")),
        ("C[I_Z, K]{U_X, U_Y}", ("I", "K"), (("Z",), ()), ("X", "Y")),
        ("W_in[D, F_{data,model}]", ("D", "F"), ((), ("data", "model")), ()),
        ("A[B_X, D_Y]", ("B", "D"), (("X",), ("Y",)), ()),
    ],
)
def test_parse_array(text, dims, axes, unreduced):
    a = sh.parse_array(text)
    assert (a.dims, a.axes, a.unreduced) == (dims, axes, unreduced)
    assert sh.parse_array(a.spec()) == a


def test_spec_and_partition_spec():
    a = sh.parse_array("A[I_XY,  J]")
    assert a.spec() == "A[I_XY, J]"
    assert a.partition_spec() == (("X", "Y"), None)
    assert sh.parse_array("C[I, K]{U_X}").spec() == "C[I, K]{U_X}"
    assert sh.parse_array("A[I_X, J_Y]").partition_spec() == (("X",), ("Y",))


_axis = st.sampled_from("XYZW")
_dimname = st.sampled_from(["I", "J", "K", "B", "D", "F", "T"])


@st.composite
def sharded_arrays(draw):
    dims = draw(st.lists(_dimname, min_size=1, max_size=4, unique=True))
    pool = draw(st.permutations(list("XYZW")))
    axes, i = [], 0
    for _ in dims:
        k = draw(st.integers(0, 2))
        axes.append(tuple(pool[i : i + k]))
        i += k
    rest = pool[i:]
    unreduced = tuple(rest[: draw(st.integers(0, len(rest)))])
    return sh.ShardedArray(draw(st.sampled_from(["A", "B", "C", "W_in"])), tuple(dims), tuple(axes), unreduced)


@given(sharded_arrays())
@settings(max_examples=200, deadline=None)
def test_array_round_trip(a):
    assert sh.parse_array(a.spec()) == a
    assert len(a.partition_spec()) == len(a.dims)


@pytest.mark.parametrize(
    "text, words",
    [
        ("A[I_X, J_X]", ["A", "X", "twice", "I", "J"]),
        ("A[I_XX, J]", ["A", "X", "twice"]),
        ("A[I, I]", ["A", "I", "twice"]),
        ("C[I_X, K]{U_X}", ["C", "X", "unreduced"]),
        ("A[I_X J]", ["I_X J"]),
        ("A(I, J)", ["A(I, J)"]),
        ("A[]", ["no dims"]),
        ("C[I, K]{V_X}", ["V_X"]),
    ],
)
def test_bad_arrays(text, words):
    with pytest.raises(ShardingError) as e:
        sh.parse_array(text)
    assert all(w in str(e.value) for w in words), str(e.value)


# --- arrays on a mesh -----------------------------------------------------------------------------


def test_local_shape_and_bytes():
    assert sh.local_shape("A[I_X, J_Y]", "{X: 2, Y: 4}", (128, 64)) == (64, 16)
    assert sh.local_shape("A[I_XY, J]", "{X: 2, Y: 4}", {"I": 128, "J": 64}) == (16, 64)
    assert sh.local_shape("A[I, J]", "{X: 2, Y: 4}", (128, 64)) == (128, 64)
    assert sh.bytes_per_device("A[I_X, J_Y]", "{X: 2, Y: 4}", (128, 64), "bf16") == 64 * 16 * 2


def test_golden_ch3_pq1a():
    # fp32[1024, 4096], A[I_XY, J] on {X: 8, Y: 2}: 1 MiB per device (book ch. 3 pop quiz)
    assert sh.bytes_per_device("A[I_XY, J]", "{X: 8, Y: 2}", (1024, 4096), "fp32") == 1024**2


def test_golden_ch3_pq2():
    # int8[128, 2048], A[I_XY, J] on {X: 2, Y: 8, Z: 2}: 16 KiB per device, 512 KiB over 32 devices
    mesh = "{X: 2, Y: 8, Z: 2}"
    assert sh.bytes_per_device("A[I_XY, J]", mesh, (128, 2048), "int8") == 16384
    assert sh.total_bytes("A[I_XY, J]", mesh, (128, 2048), "int8") == 524288
    assert sh.replication("A[I_XY, J]", mesh) == 2


def test_golden_ch3_q1():
    # A[I_X, J, K] on {X: 4, Y: 8, Z: 2}: total ÷ one copy = 16
    mesh = "{X: 4, Y: 8, Z: 2}"
    assert sh.replication("A[I_X, J, K]", mesh) == 16
    shape = (64, 32, 16)
    one_copy = math.prod(shape) * 2
    assert sh.total_bytes("A[I_X, J, K]", mesh, shape, "bf16") / one_copy == 16


def test_replication_counts_unreduced_as_used():
    assert sh.replication("C[I, K]{U_X}", "{X: 2, Y: 4}") == 4
    assert sh.replication("C[I, K]", "{X: 2, Y: 4}") == 8


@pytest.mark.parametrize(
    "array, mesh, shape, words",
    [
        ("A[I_Z, J]", "{X: 2, Y: 4}", (8, 8), ["A", "Z", "{X: 2, Y: 4}"]),
        ("A[I_XY, J]", "{X: 2, Y: 4}", (12, 8), ["A", "I", "12", "8", "|X|=2", "|Y|=4"]),
        ("A[I, J_Y]", "{X: 2, Y: 4}", (8, 6), ["A", "J", "6", "4", "Y"]),
        ("A[I, J]", "{X: 2}", {"I": 8}, ["A", "J"]),
        ("A[I, J]", "{X: 2}", (8,), ["2 dims"]),
        ("C[I, K]{U_W}", "{X: 2}", (8, 8), ["C", "W"]),
    ],
)
def test_check_errors(array, mesh, shape, words):
    with pytest.raises(ShardingError) as e:
        sh.check(array, mesh, shape)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_replication_unknown_axis():
    with pytest.raises(ShardingError, match="Z"):
        sh.replication("A[I_Z, J]", "{X: 2}")


@given(sharded_arrays(), st.lists(st.sampled_from([1, 2, 4]), min_size=4, max_size=4))
@settings(max_examples=100, deadline=None)
def test_blocks_tile_the_array(a, sizes):
    """Every device's blocks have the local shape; the distinct blocks tile the array exactly."""
    mesh = sh.Mesh(tuple(zip("XYZW", sizes)))
    shape = tuple(8 * mesh.n_devices for _ in a.dims)
    blocks = sh.device_blocks(a, mesh, shape)
    local = sh.local_shape(a, mesh, shape)
    assert len(blocks) == mesh.n_devices
    distinct = set(blocks.values())
    assert all(tuple(hi - lo for lo, hi in b) == local for b in distinct)
    assert len(distinct) * math.prod(local) == math.prod(shape)
    assert mesh.n_devices // len(distinct) == sh.replication(a, mesh) * mesh.axes_size(a.unreduced)


# --- matmuls: parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "A[I_X, J] ·_J B[J, K_Y]",
        "A[I_X, J] *_J B[J, K_Y]",
        "A[I_X,J]·B[J,K_Y]",
        "A[I_X, J] @ B[J, K_Y]",
        "A[I_X, J] ⋅_J B[J, K_Y]",
    ],
)
def test_parse_matmul_operators(text):
    m = sh.parse_matmul(text)
    assert m.contracting == ("J",) and m.a.spec() == "A[I_X, J]" and m.b.spec() == "B[J, K_Y]" and m.out is None
    assert m.out_dims == ("I", "K") and m.einsum() == "ij,jk->ik"


@pytest.mark.parametrize(
    "text",
    [
        "A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]",
        "A[I_X, J] ·_J B[J, K_Y] -> C[I_X, K_Y]",
        "A[I, J_X] ·_J B[J_X, K] → C[I, K]{U_X}",
        "In[B, D_X] ·_D W[D_X, F] → Out[B, F_X]",
        "A[I_X, J] ·_J B[J, K_Y] → C[K_Y, I_X]",
    ],
)
def test_matmul_round_trip(text):
    m = sh.parse_matmul(text)
    assert sh.parse_matmul(m.spec()) == m
    assert m.out is not None


def test_matmul_einsum_and_transposed_target():
    m = sh.parse_matmul("A[I, J] · B[J, K] -> C[K, I]")
    assert m.einsum() == "ij,jk->ki"
    assert sh.parse_matmul("X[B, D] ·_D Y[D, F]").einsum() == "bd,df->bf"


@pytest.mark.parametrize(
    "text, words",
    [
        ("A[I, J] ·_K B[J, K]", ["K", "both"]),
        ("A[I, J] · B[K, L]", ["share no dim"]),
        ("A[I, J] ·_J B[J, K] → C[I, J]", ["C[I, J]", "I, K"]),
        ("A[I, J]{U_X} ·_J B[J, K]", ["unreduced"]),
        ("A[I, J] B[J, K]", ["cannot read"]),
        ("A[B, I, J] ·_J B[B, J, K]", ["B", "not contracted"]),
    ],
)
def test_bad_matmuls(text, words):
    with pytest.raises(ShardingError) as e:
        sh.parse_matmul(text)
    assert all(w in str(e.value) for w in words), str(e.value)


# --- the four cases (book ch. 3, "Computation With Sharded Arrays") -------------------------------


@pytest.mark.parametrize(
    "text, case",
    [
        # case 1: the book's four examples
        ("A[I, J] · B[J, K] → C[I, K]", 1),
        ("A[I_X, J] · B[J, K] → C[I_X, K]", 1),
        ("A[I, J] · B[J, K_Y] → C[I, K_Y]", 1),
        ("A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]", 1),
        # case 2
        ("A[I, J_X] · B[J, K] → C[I, K]", 2),
        ("A[I, J_X] · B[J_Y, K]", 2),
        ("A[I_X, J] · B[J_X, K_Y] → C[I_X, K_Y]", 2),
        # case 3
        ("A[I, J_X] ·_J B[J_X, K] → C[I, K]", 3),
        ("A[I, J_X] ·_J B[J_X, K] → C[I, K_X]", 3),
        ("A[I_X, J_Y] ·_J B[J_Y, K] → C[I_X, K]", 3),
        ("A[I, J_XY] · B[J_XY, K]", 3),
        # case 4
        ("A[I_X, J] · B[J, K_X]", 4),
        ("A[I_X, J] · B[J, K_X] → C[I, K_X]", 4),
    ],
)
def test_classify_book_examples(text, case):
    c = sh.classify(text)
    assert c == case and isinstance(c, int)
    assert c.reason and f"MatmulCase({case}" in repr(c)


def test_classify_reasons_name_the_axes():
    assert "only A" in sh.classify("A[I, J_X] · B[J, K]").reason
    assert "different axes" in sh.classify("A[I, J_X] · B[J_Y, K]").reason
    assert "case 4" in sh.classify("A[I_Y, J_X] · B[J_X, K_Y]").reason  # case 3 with a free-dim clash too


# --- plans ----------------------------------------------------------------------------------------

MESH = "{X: 2, Y: 4}"
SHAPES = {"I": 1024, "J": 2048, "K": 4096}


def kinds(p):
    return [(s.kind, s.axes) for s in p.steps]


def test_plan_case1_no_communication():
    p = sh.plan("A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]", MESH, SHAPES)
    assert p.case == 1 and p.steps == () and p.output.spec() == "C[I_X, K_Y]"
    assert p.flops_per_device == 2 * 512 * 2048 * 1024
    assert p.t_math == pytest.approx(p.flops_per_device / 1.97e14)
    assert p.t_comms == 0 and p.t_lower == p.t_math == p.t_upper


def test_plan_case1_without_target_inherits():
    p = sh.plan("A[I_X, J] · B[J, K_Y]", MESH, SHAPES)
    assert p.output.spec() == "C[I_X, K_Y]" and p.steps == ()


def test_plan_case2_gathers_the_sharded_input():
    p = sh.plan("A[I, J_X] · B[J, K] → C[I, K]", MESH, SHAPES, dtype="bf16", chip="tpu-v5e")
    assert kinds(p) == [("all_gather", ("X",))]
    s = p.steps[0]
    assert (s.before, s.after, s.phase) == ("A[I, J_X]", "A[I, J]", "input")
    assert s.n_bytes == 1024 * 2048 * 2  # the gathered A
    from scalebook_utils import collectives

    assert s.seconds == pytest.approx(collectives.collective("all_gather", s.n_bytes, (2,), "tpu-v5e").seconds)
    assert p.flops_per_device == 2 * 1024 * 2048 * 4096  # replicated matmul
    # the book's alternative (Questions 4, 9): slice B, local matmul, AllReduce_X
    alt = {a.strategy: a for a in p.alternatives}
    assert [(s.kind, s.axes) for s in alt["reduce"].steps] == [("all_reduce", ("X",))]
    assert alt["reduce"].local_out.spec() == "C[I, K]{U_X}"
    assert alt["reduce"].flops_per_device == p.flops_per_device / 2


def test_plan_case2_ch3_q4_strategies():
    """X[B, D] ·_D Y[D_X, F] → Z[B, F]: strategy 1 gathers Y (2DF bytes), strategy 2 all-reduces Z (2BF)."""
    B, D, F = 128, 8192, 32768
    p = sh.plan("X[B, D] ·_D Y[D_X, F] → Z[B, F]", "{X: 4}", {"B": B, "D": D, "F": F}, chip="tpu-v5p")
    assert kinds(p) == [("all_gather", ("X",))] and p.steps[0].n_bytes == 2 * D * F
    assert p.flops_per_device == 2 * B * D * F
    reduce = next(a for a in p.alternatives if a.strategy == "reduce")
    assert [s.kind for s in reduce.steps] == ["all_reduce"] and reduce.steps[0].n_bytes == 2 * B * F
    assert reduce.flops_per_device == 2 * B * D * F / 4
    assert reduce.t_lower < p.t_lower  # D ≫ 2B: strategy 2 wins (book's answer)


def test_plan_case3_all_reduce_or_reduce_scatter():
    p = sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K]", MESH, SHAPES)
    assert kinds(p) == [("all_reduce", ("X",))]
    assert p.local_out.spec() == "C[I, K]{U_X}" and p.output.spec() == "C[I, K]"
    assert p.steps[0].n_bytes == 1024 * 4096 * 2 and p.flops_per_device == 2 * 1024 * 1024 * 4096
    rs = sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K_X]", MESH, SHAPES)
    assert kinds(rs) == [("reduce_scatter", ("X",))] and rs.output.spec() == "C[I, K_X]"
    # AllReduce = ReduceScatter + AllGather: twice the time (book ch. 3)
    assert p.t_comms == pytest.approx(2 * rs.t_comms)
    unred = sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K]{U_X}", MESH, SHAPES)
    assert unred.steps == () and unred.output.spec() == "C[I, K]{U_X}"
    # without a target the partial sums stay unreduced
    assert sh.plan("A[I, J_X] ·_J B[J_X, K]", MESH, SHAPES).output.spec() == "C[I, K]{U_X}"


def test_plan_case3_multi_axis_and_q6a():
    p = sh.plan("A[I, J_XY] · B[J_XY, K] → C[I, K]", MESH, SHAPES)
    assert kinds(p) == [("all_reduce", ("X", "Y"))]
    q6a = sh.plan("A[I_X, J_Y] ·_J B[J_Y, K] → C[I_X, K]", "{X: 4, Y: 4}", SHAPES)
    assert kinds(q6a) == [("all_reduce", ("Y",))] and q6a.steps[0].n_bytes == 256 * 4096 * 2


def test_plan_case4_gathers_one_input():
    p = sh.plan("A[I_X, J] · B[J, K_X] → C[I, K_X]", MESH, SHAPES)
    assert p.case == 4 and kinds(p) == [("all_gather", ("X",))] and p.steps[0].before == "A[I_X, J]"
    q = sh.plan("A[I_X, J] · B[J, K_X] → C[I_X, K]", MESH, SHAPES)
    assert kinds(q) == [("all_gather", ("X",))] and q.steps[0].before == "B[J, K_X]"
    # no target: the book's default gathers A
    assert sh.plan("A[I_X, J] · B[J, K_X]", MESH, SHAPES).steps[0].before == "A[I_X, J]"


def test_plan_target_collectives():
    # AllGather to replicate, AllToAll to move a subscript, free slice to shard a replicated dim
    g = sh.plan("A[I_X, J] · B[J, K] → C[I, K]", MESH, SHAPES)
    assert kinds(g) == [("all_gather", ("X",))] and g.steps[0].phase == "output"
    a2a = sh.plan("A[I_X, J] · B[J, K] → C[I, K_X]", MESH, SHAPES)
    assert kinds(a2a) == [("all_to_all", ("X",))]
    assert any(p.steps and p.steps[0].phase == "input" for p in a2a.alternatives)  # or gather A first
    sl = sh.plan("A[I, J] · B[J, K] → C[I_X, K]", MESH, SHAPES)
    assert sl.steps == () and any("slice" in n for n in sl.notes) and sl.output.spec() == "C[I_X, K]"
    perm = sh.plan("A[I_XY, J] · B[J, K] → C[I_YX, K]", MESH, SHAPES)
    assert [s.kind for s in perm.steps] == ["ppermute"]
    with pytest.raises(ShardingError, match="cannot be undone"):
        sh.plan("A[I, J] · B[J, K] → C[I, K]{U_X}", MESH, SHAPES)


def test_plan_q6b_and_q6c():
    # data + tensor + ZeRO: gather the weight's contracting shard; inference TP + DP: nothing
    b = sh.plan("A[I_X, J] · B[J_X, K_Y] → C[I_X, K_Y]", "{X: 4, Y: 4}", SHAPES)
    assert kinds(b) == [("all_gather", ("X",))] and b.steps[0].before == "B[J_X, K_Y]"
    c = sh.plan("A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]", "{X: 4, Y: 4}", SHAPES)
    assert c.steps == ()


def test_plan_skips_size_one_axes():
    p = sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K]", "{X: 1, Y: 8}", SHAPES)
    assert p.steps == () and any("size 1" in n for n in p.notes)


def test_plan_wraparound_never_cheaper():
    for text in ("A[I, J_X] · B[J, K] → C[I, K]", "A[I, J_X] ·_J B[J_X, K] → C[I, K]"):
        ring = sh.plan(text, "{X: 4, Y: 2}", SHAPES, wraparound=True)
        line = sh.plan(text, "{X: 4, Y: 2}", SHAPES, wraparound=False)
        assert line.t_comms >= ring.t_comms > 0


def test_plan_wraparound_defaults_to_the_chips_rule():
    """wraparound=None applies topology.default_wraparound to the mesh as a slice (review ch3 [23])."""
    from scalebook_utils import collectives as col

    assert sh.mesh_wraparound("{X: 2, Y: 4}", "tpu-v5e") == {"X": False, "Y": False}
    assert sh.mesh_wraparound("{X: 16, Y: 4}", "tpu-v5e") == {"X": True, "Y": False}
    assert sh.mesh_wraparound("{X: 4, Y: 4, Z: 4}", "tpu-v4p") == {"X": True, "Y": True, "Z": True}
    assert sh.mesh_wraparound("{X: 4}", "tpu-v5p") == {"X": False}  # 4×1×1 is not a whole cube
    assert sh.mesh_wraparound("{X: 2, Y: 4}", "tpu-v5e", True) == {"X": True, "Y": True}
    assert sh.mesh_wraparound("{X: 2, Y: 4}", "tpu-v5e", (True, False)) == {"X": True, "Y": False}
    with pytest.raises(ShardingError, match="one bool per axis"):
        sh.mesh_wraparound("{X: 2, Y: 4}", "tpu-v5e", (True,))
    a2a = "A[I_X, J] · B[J, K] → C[I, K_X]"
    shapes = {"I": 8192, "J": 8192, "K": 8192}
    default = sh.plan(a2a, "{X: 2, Y: 4}", shapes)
    ring = sh.plan(a2a, "{X: 2, Y: 4}", shapes, wraparound=True)
    line = sh.plan(a2a, "{X: 2, Y: 4}", shapes, wraparound=False)
    assert default.t_comms == line.t_comms == pytest.approx(2 * ring.t_comms)  # 746 µs, not 373 µs
    v = default.steps[0].n_bytes
    assert default.t_comms == col.all_to_all(v, (2,), "tpu-v5e", wraparound=False).seconds
    # per axis: only the 16-long axis of a v5e 16×4 mesh is a ring
    ag = sh.plan("A[I, J_XY] · B[J, K] → C[I, K]", "{X: 16, Y: 4}", shapes)
    v = ag.steps[0].n_bytes
    assert ag.t_comms == col.all_gather(v, (16, 4), "tpu-v5e", wraparound=(True, False)).seconds
    # a whole v4p cube keeps the ring
    cube = "{X: 4, Y: 4, Z: 4}"
    assert (
        sh.plan(a2a, cube, shapes, chip="tpu-v4p").t_comms
        == sh.plan(a2a, cube, shapes, chip="tpu-v4p", wraparound=True).t_comms
    )


def test_plan_errors():
    with pytest.raises(ShardingError, match="K"):
        sh.plan("A[I, J_X] · B[J, K]", MESH, {"I": 8, "J": 8})
    with pytest.raises(ShardingError, match="Z"):
        sh.plan("A[I, J_Z] · B[J, K]", MESH, SHAPES)
    with pytest.raises(ShardingError, match="divisible"):
        sh.plan("A[I, J_XY] · B[J, K]", MESH, {"I": 8, "J": 12, "K": 8})
    with pytest.raises(ValueError, match="fp32"):
        sh.plan("A[I, J] · B[J, K]", MESH, SHAPES, dtype="fp32")  # a TPU has no fp32 matmul peak


def test_plan_summary_is_one_line():
    line = sh.plan("A[I, J_X] · B[J, K] → C[I, K]", MESH, SHAPES).summary()
    assert "\n" not in line and line.startswith("case 2: AllGather_X A[I, J_X] → A[I, J]") and "T_comms=" in line


# --- predicted vs compiled (pure) -----------------------------------------------------------------


def test_predicted_vs_compiled_rules():
    rs = sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K_X]", MESH, SHAPES)
    ok, why = sh.predicted_vs_compiled(rs, {"all-reduce": 1}, hlo="... dynamic-slice(...)")
    assert ok and "all-reduce + dynamic-slice" in why and "reduce-scatter" in why
    assert sh.predicted_vs_compiled(rs, {"reduce-scatter": 1})[0]
    ok, why = sh.predicted_vs_compiled(rs, {"all-reduce": 1, "collective-permute": 1})
    assert ok and "collective-permute" in why
    ok, why = sh.predicted_vs_compiled(rs, {"all-gather": 1})
    assert not ok and "disagree" in why
    g = sh.plan("A[I, J_X] · B[J, K_Y] → C[I, K_Y]", MESH, SHAPES)
    assert sh.predicted_vs_compiled(g, {"all-gather": 1})[0]
    ok, why = sh.predicted_vs_compiled(g, {"all-reduce": 1})  # XLA's choice on 2×4: the alternative
    assert ok and "alternative" in why
    none = sh.plan("A[I_X, J] · B[J, K_Y] → C[I_X, K_Y]", MESH, SHAPES)
    assert sh.predicted_vs_compiled(none, {})[0]
    assert not sh.predicted_vs_compiled(none, {"all-gather": 1})[0]


def test_matched_strategy_names_xlas_choice():
    """Review ch3 [11]/[29]: say which strategy XLA chose, not just "agree"."""
    g = sh.plan("A[I, J_X] · B[J, K_Y] → C[I, K_Y]", MESH, SHAPES)
    assert g.strategy == "gather" and sh.matched_strategy(g, {"all-gather": 1}) == "gather"
    assert sh.matched_strategy(g, {"all-reduce": 1}) == "reduce"  # the book's alternative
    assert sh.matched_strategy(g, {"all-to-all": 3}) is None
    rs = sh.plan("A[I, J_X] ·_J B[J_X, K] → C[I, K_X]", MESH, SHAPES)
    assert sh.matched_strategy(rs, {"all-reduce": 1}, "dynamic-slice(") == rs.strategy  # the CPU form


# --- the JAX program text (executed in test_sharding_jax.py) --------------------------------------


def test_jax_program_text():
    src = sh.jax_program("A[I_X, J] ·_J B[J, K_Y] → C[I_X, K_Y]", "{X: 2, Y: 4}")
    compile(src, "<jax_program>", "exec")
    assert "jaxlab.make_mesh((2, 4), ('X', 'Y'))" in src
    assert "NamedSharding(mesh, P('X', None))" in src and "NamedSharding(mesh, P(None, 'Y'))" in src
    assert "out_shardings=NamedSharding(mesh, P('X', 'Y'))" in src and "'ij,jk->ik'" in src
    multi = sh.jax_program("A[I_XY, J] · B[J, K]", "{X: 2, Y: 4}", {"I": 64, "J": 8, "K": 8})
    assert "P(('X', 'Y'), None)" in multi and "(64, 8)" in multi and "out_shardings" not in multi
    with pytest.raises(ShardingError, match="unreduced"):
        sh.jax_program("A[I, J_X] · B[J_X, K] → C[I, K]{U_X}", "{X: 2}")


def test_case2_alltoall_alternative_moves_the_contracting_sharding():
    # A[I, J_X] → AllToAll_X → A[I_X, J], then a case-1 matmul into C[I_X, K_Y] (book ch. 3: AllToAll
    # "moves a subscript"); XLA on 8 CPU devices picks exactly this for that target.
    p = sh.plan("A[I, J_X] ·_J B[J, K_Y] → C[I_X, K_Y]", "{X: 2, Y: 4}", {"I": 8192, "J": 8192, "K": 8192})
    moves = [alt for alt in p.alternatives if alt.strategy == "all-to-all"]
    assert len(moves) == 1
    (step,) = moves[0].steps
    assert (step.kind, step.axes, step.before, step.after) == ("all_to_all", ("X",), "A[I, J_X]", "A[I_X, J]")
    # a quarter of the AllGather of the same array on a ring (here the default strategy's one step)
    gather = [s for s in p.steps if s.kind == "all_gather"]
    assert moves[0].t_comms <= gather[0].seconds
    # no such alternative when the target does not shard a free dim of A the same way
    q = sh.plan("A[I, J_X] ·_J B[J, K_Y] → C[I, K_Y]", "{X: 2, Y: 4}", {"I": 8192, "J": 8192, "K": 8192})
    assert not [alt for alt in q.alternatives if alt.strategy == "all-to-all"]


# --- layers: chains of matmuls (ch. 3, Question 7) -----------------------------------------------------

Q7_TP = ("In[B, D_XY] ·_D W_in[D, F_XY] → H[B, F_XY]", "H[B, F_XY] ·_F W_out[F_XY, D] → Out[B, D_XY]")
Q7_FSDP = ("In[B_X, D] ·_D W_in[D_XY, F] → H[B_X, F]", "H[B_X, F] ·_F W_out[F, D_XY] → Out[B_X, D]")
Q7_SIZES = {"B": 128, "D": 8192, "F": 32768}


def test_layer_time_is_the_sum_of_its_plans_upper_bounds():
    plans = [sh.plan(m, "{X: 2, Y: 2}", Q7_SIZES, chip="tpu-v5e", wraparound=False) for m in Q7_TP]
    t = sh.layer_time(Q7_TP, "{X: 2, Y: 2}", Q7_SIZES, chip="tpu-v5e", wraparound=False)
    assert t == pytest.approx(sum(p.t_math + p.t_comms for p in plans))
    assert t > max(p.t_upper for p in plans)  # both matmuls cost something
    # ch3.q7: TP (≈ 0.2 ms) beats FSDP, which gathers 1 GB of weights (≈ 6 ms)
    fsdp = sh.layer_time(Q7_FSDP, "{X: 2, Y: 2}", Q7_SIZES, chip="tpu-v5e", wraparound=False)
    assert t == pytest.approx(0.2e-3, rel=0.05) and fsdp == pytest.approx(6.2e-3, rel=0.05)
    # a one-matmul layer is that matmul's plan
    one = sh.layer_time(Q7_TP[:1], "{X: 2, Y: 2}", Q7_SIZES, chip="tpu-v5e", wraparound=False)
    assert one == plans[0].t_upper


def test_layer_bytes_per_device_counts_input_weights_and_output():
    mesh = "{X: 2, Y: 2}"
    got = sh.layer_bytes_per_device(Q7_TP, mesh, Q7_SIZES)
    B, D, F = Q7_SIZES.values()
    # In[B, D_XY] + W_in[D, F_XY] + W_out[F_XY, D] + Out[B, D_XY], bf16, 4 devices; H in between is not counted
    assert got == 2 * (B * D / 4 + D * F / 4 + F * D / 4 + B * D / 4)
    assert sh.layer_bytes_per_device(Q7_TP, mesh, Q7_SIZES, "fp32") == 2 * got
    fsdp = sh.layer_bytes_per_device(Q7_FSDP, mesh, Q7_SIZES)
    assert fsdp == 2 * (B * D / 2 + D * F / 4 + F * D / 4 + B * D / 2)


def test_layer_bad_input():
    with pytest.raises(ShardingError, match="non-empty sequence"):
        sh.layer_time(Q7_TP[0], "{X: 2, Y: 2}", Q7_SIZES)  # one matmul as text, not a sequence
    with pytest.raises(ShardingError, match="non-empty sequence"):
        sh.layer_bytes_per_device((), "{X: 2, Y: 2}", Q7_SIZES)
    with pytest.raises(ShardingError, match="names no output"):
        sh.layer_bytes_per_device(("In[B, D_X] ·_D W[D, F]",), "{X: 2}", Q7_SIZES)
