"""core.hlo: the one HLO reader (`text.parse_module`) and the readers on top of it (collectives, ops, schedule).

Pure text, no jax: a hand-written module with an ENTRY, a fusion that wraps a dot, an async
all-gather-start/done pair and a while loop, read as XLA prints it. Then the package-wide "one of each"
rules: one list of collective opcodes, one HLO line reader, one module that branches on the JAX version.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scalebook_utils.core import collectives as book_collectives
from scalebook_utils.core.hlo import collectives, ops, schedule, text
from scalebook_utils.questions.registry import Compiled

PKG = Path(__file__).resolve().parents[1] / "scalebook_utils"

HLO = """\
HloModule jit_f, entry_computation_layout={(f32[2,16]{1,0}, f32[16,16]{1,0})->f32[8,16]{1,0}}, num_partitions=4

%fused_dot (param_0: f32[8,16], param_1: f32[16,16]) -> f32[8,16] {
  %param_0 = f32[8,16]{1,0} parameter(0)
  %param_1 = f32[16,16]{1,0} parameter(1)
  ROOT %dot.1 = f32[8,16]{1,0} dot(f32[8,16]{1,0} %param_0, f32[16,16]{1,0} %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%cond (p: (s32[], f32[8,16])) -> pred[] {
  %p = (s32[], f32[8,16]{1,0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[8,16]{1,0}) %p), index=0
  %three = s32[] constant(3)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %three), direction=LT
}

%body (p.1: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {
  %p.1 = (s32[], f32[8,16]{1,0}) parameter(0)
  %i.1 = s32[] get-tuple-element((s32[], f32[8,16]{1,0}) %p.1), index=0
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %i.1, s32[] %one)
  %v = f32[8,16]{1,0} get-tuple-element((s32[], f32[8,16]{1,0}) %p.1), index=1
  %t = f32[8,16]{1,0} tanh(f32[8,16]{1,0} %v)
  ROOT %tuple.1 = (s32[], f32[8,16]{1,0}) tuple(s32[] %next, f32[8,16]{1,0} %t)
}

ENTRY %main.9 (Arg_0.1: f32[2,16], Arg_1.2: f32[16,16]) -> f32[8,16] {
  %Arg_0.1 = f32[2,16]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  %Arg_1.2 = f32[16,16]{1,0} parameter(1), sharding={replicated}
  %all-gather-start = (f32[2,16]{1,0}, f32[8,16]{1,0}) all-gather-start(f32[2,16]{1,0} %Arg_0.1), channel_id=1, replica_groups=[1,4]<=[4], dimensions={0}, use_global_device_ids=true
  %all-gather-done = f32[8,16]{1,0} all-gather-done((f32[2,16]{1,0}, f32[8,16]{1,0}) %all-gather-start)
  %fusion = f32[8,16]{1,0} fusion(f32[8,16]{1,0} %all-gather-done, f32[16,16]{1,0} %Arg_1.2), kind=kOutput, calls=%fused_dot, metadata={op_name="jit(f)/dot_general"}
  %zero = s32[] constant(0)
  %init = (s32[], f32[8,16]{1,0}) tuple(s32[] %zero, f32[8,16]{1,0} %fusion)
  %while = (s32[], f32[8,16]{1,0}) while((s32[], f32[8,16]{1,0}) %init), condition=%cond, body=%body
  ROOT %out = f32[8,16]{1,0} get-tuple-element((s32[], f32[8,16]{1,0}) %while), index=1
}
"""  # noqa: E501 - HLO lines as XLA prints them


# --- parse_module ---------------------------------------------------------------------------------


def test_parse_module_reads_the_header_and_every_computation():
    m = text.parse_module(HLO)
    assert (m.name, m.num_partitions) == ("jit_f", 4)
    assert list(m.computations) == ["fused_dot", "cond", "body", "main.9"]
    assert m.entry is m.computations["main.9"] and m.entry.is_entry
    assert not any(c.is_entry for n, c in m.computations.items() if n != "main.9")
    assert [str(s) for s in m.entry.parameters] == ["f32[2,16]", "f32[16,16]"]
    assert [str(s) for s in m.entry.result] == ["f32[8,16]"]
    assert [str(s) for s in m.computations["body"].result] == ["s32[]", "f32[8,16]"]
    assert len(m.instructions) == 3 + 4 + 7 + 9 == sum(len(c.instructions) for c in m.computations.values())
    assert m.entry.opcodes == (
        "parameter",
        "parameter",
        "all-gather-start",
        "all-gather-done",
        "fusion",
        "constant",
        "tuple",
        "while",
        "get-tuple-element",
    )


def test_instructions_name_their_operands_calls_and_root():
    m = text.parse_module(HLO)
    fusion = m.ops["fusion"]
    assert (fusion.fusion_kind, fusion.calls, fusion.computation) == ("kOutput", "fused_dot", "main.9")
    assert fusion.inner == ("parameter", "parameter", "dot")  # the fusion wraps a dot
    assert fusion.operand_names == ("all-gather-done", "Arg_1.2")
    assert [str(s) for s in fusion.operands] == ["f32[8,16]", "f32[16,16]"]
    assert fusion.op_name == "jit(f)/dot_general"
    assert m.ops["out"].is_root and m.ops["dot.1"].is_root and not fusion.is_root
    assert m.ops["while"].operand_names == ("init",) and m.ops["while"].computation == "main.9"
    assert m.ops["t"].computation == "body" and m.ops["lt"].computation == "cond"
    ops_by_name = text.parse_hlo_ops(HLO)
    assert ops_by_name == dict(m.ops) and ops_by_name is not m.ops


def test_async_halves_issue_one_collective():
    m = text.parse_module(HLO)
    start, done = m.ops["all-gather-start"], m.ops["all-gather-done"]
    assert (start.base_opcode, start.async_half, start.collective) == ("all-gather", "start", "all-gather")
    assert (done.base_opcode, done.async_half, done.collective) == ("all-gather", "done", "")
    assert [str(s) for s in start.outputs] == ["f32[2,16]", "f32[8,16]"]  # (operand, gathered output)
    assert collectives.count_hlo_collectives(HLO) == {"all-gather": 1}
    (c,) = collectives.parse_hlo_collectives(HLO, (4,), ("x",))
    assert (c.kind, c.shape, c.nbytes, c.axes, c.group_size, c.dimension) == (
        "all-gather",
        (8, 16),
        8 * 16 * 4,
        ("x",),
        4,
        0,
    )


def test_the_module_is_read_only_and_text_without_instructions_reads_empty():
    m = text.parse_module(HLO)
    with pytest.raises(TypeError):
        m.computations["extra"] = m.entry  # a read-only mapping
    with pytest.raises(AttributeError):
        m.entry.name = "other"  # frozen dataclasses
    assert text.parse_module(HLO) is m  # one parse per text
    empty = text.parse_module("not hlo at all")
    assert empty.instructions == () and empty.entry is None and collectives.count_hlo_collectives("x") == {}
    with pytest.raises(ValueError, match="no HLO instructions"):
        text.parse_hlo_ops("not hlo at all")
    with pytest.raises(TypeError, match="HLO text"):
        text.parse_module(["a list"])


def test_item_sizes_come_from_one_table_with_four_bit_types():
    assert text.HLO_ITEMSIZE["s4"] == text.HLO_ITEMSIZE["u4"] == 0.5
    assert text.parse_hlo_shape("s4[3,5]{1,0}").nbytes == 7.5
    line = "  %ar = s4[3,5]{1,0} all-reduce(s4[3,5]{1,0} %x), replica_groups={{0,1}}, to_apply=%add"
    (c,) = collectives.parse_hlo_collectives(line, (2,), ("x",))
    assert (c.dtype, c.nbytes) == ("s4", 8)  # 15 half-bytes, rounded up
    assert collectives.count_hlo_collectives(line) == {"all-reduce": 1}


# --- the readers on top: schedule, ops, the grader's rules ------------------------------------------


def test_schedule_of_the_hand_written_module():
    assert schedule.hlo_schedule(HLO) == ["all-gather", "dot"]
    assert schedule.hlo_dependencies(HLO) == [1]  # the dot waits for the gather
    assert schedule.overlap_summary(HLO) == {
        "schedule": ["all-gather", "dot"],
        "waits": [1],
        "collectives": 1,
        "dots": 1,
        "dots_between": 0,
        "free_dots": 0,
    }


def test_a_matmul_that_needs_no_collective_waits_for_none():
    free = HLO.replace(
        "  %zero = s32[] constant(0)\n",
        "  %dot.9 = f32[16,16]{1,0} dot(f32[16,16]{1,0} %Arg_1.2, f32[16,16]{1,0} %Arg_1.2), "
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  %zero = s32[] constant(0)\n",
    )
    assert schedule.hlo_schedule(free) == ["all-gather", "dot", "dot"]
    assert schedule.hlo_dependencies(free) == [0, 1]
    assert schedule.overlap_summary(free)["free_dots"] == 1
    # a control predecessor is waited for too
    ordered = free.replace(
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  %zero",
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}, control-predecessors={%all-gather-done}\n  %zero",
    )
    assert text.parse_module(ordered).ops["dot.9"].control_predecessors == ("all-gather-done",)
    assert schedule.hlo_dependencies(ordered) == [1, 1]


def test_categories_and_memory_from_the_module():
    hlo_ops = text.parse_hlo_ops(HLO)
    got = {n: ops.categorize(n, hlo_ops) for n in ("fusion", "all-gather-start", "all-gather-done", "while", "t")}
    assert got == {
        "fusion": "matmul",
        "all-gather-start": "collective",
        "all-gather-done": "collective",
        "while": "other",
        "t": "other",
    }
    assert [ops.categorize(n) for n in ("ncclAllToAllKernel", "all-gather.2", "fusion.1")] == [
        "collective",
        "collective",
        "fusion",
    ]

    class OnlyText:  # a compiled program without a memory analysis
        def as_text(self):
            return HLO

    r = ops.memory_report(OnlyText())
    assert (r.argument_bytes, r.output_bytes, r.temp_bytes, r.source) == (
        (2 * 16 + 16 * 16) * 4,
        8 * 16 * 4,
        0.0,
        "shapes",
    )


def test_the_graders_rules_read_the_same_module():
    from scalebook_utils.grading.check import compiled_problem

    assert compiled_problem(Compiled("w", no_gather_of=(8, 16)), (), HLO) == "it all-gathers the whole [8, 16] array"
    assert compiled_problem(Compiled("w", no_gather_of=(2, 16)), (), HLO) is None  # the operand, not gathered
    assert compiled_problem(Compiled("w", partitions=4), (), HLO) is None
    assert "compiled for 4 device(s)" in compiled_problem(Compiled("w", partitions=8), (), HLO)
    assert "1 dot" in compiled_problem(Compiled("w", min_dots=2), (), HLO)
    assert "array of shape [16, 16]" in compiled_problem(Compiled("w", no_array_of=(16, 16)), (), HLO)
    assert "one way round" in compiled_problem(Compiled("w", bidirectional=True), (), HLO)


# --- one of each ------------------------------------------------------------------------------------


def _sources():
    return {p.relative_to(PKG).as_posix(): p.read_text() for p in PKG.rglob("*.py")}


def test_one_list_of_collective_opcodes():
    assert set(text.HLO_NAME) == set(book_collectives.KINDS)  # the two vocabularies, joined in one table
    assert collectives.HLO_COLLECTIVES is text.COLLECTIVE_OPS
    assert set(text.ASYNC_COLLECTIVE_OPS) == {f"{k}-{h}" for k in text.COLLECTIVE_OPS for h in ("start", "done")}
    from scalebook_utils.core import sharding

    assert sharding.HLO_NAME is text.HLO_NAME
    # no other module spells out three or more collective opcodes in one literal tuple, list, set or dict (keys
    # or values: sharding's and ch03's kind → opcode tables were such copies)
    names = set(text.COLLECTIVE_OPS)
    found = []
    for path, src in _sources().items():
        if path == "core/hlo/text.py":
            continue
        for node in ast.walk(ast.parse(src)):
            items = node.keys + node.values if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and items:
                strings = {n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)}
                if len(strings & names) >= 3:
                    found.append(f"{path}:{node.lineno}")
    assert not found, f"collective opcode lists outside core/hlo/text.py: {found}"


def _regexes(src: str) -> list[tuple[int, str]]:
    """(line, pattern) of every literal regular expression passed to re.compile/search/match/findall/… ."""
    out = []
    for node in ast.walk(ast.parse(src)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and getattr(node.func.value, "id", "") == "re"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            out.append((node.lineno, str(node.args[0].value)))
    return out


def test_one_reader_of_hlo_lines():
    # instruction lines, computation headers and the module header are read in core/hlo/text.py only
    # (core/hlo/collectives.py reads a collective's own attributes: replica groups, source-target pairs)
    words = (r"ROOT\s", r"ENTRY\s", "HloModule", "source_target_pairs=", "num_partitions=", "calls=", r"=\s*")
    allowed = {"core/hlo/text.py", "core/hlo/collectives.py"}
    found = [
        f"{path}:{ln} {rx!r}"
        for path, src in _sources().items()
        if path not in allowed
        for ln, rx in _regexes(src)
        if any(w in rx for w in words)
    ]
    assert not found, found
    assert _regexes("import re\nre.match(r'^ENTRY\\s', x)\n") == [(2, r"^ENTRY\s")]  # the scan can fail


def _version_branches(src: str) -> list[int]:
    """Lines that branch on what this JAX has: hasattr(jax…/lax…, …), jax.__version__ in a comparison."""
    lines = []
    for node in ast.walk(ast.parse(src)):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "hasattr"
            and node.args
            and ast.unparse(node.args[0]).split(".")[0] in ("jax", "lax", "jnp")
        ):
            lines.append(node.lineno)
        if isinstance(node, ast.Compare) and "__version__" in ast.unparse(node):
            lines.append(node.lineno)
    return lines


def test_compat_is_the_only_module_that_branches_on_the_jax_version():
    found = {
        path: ln for path, src in _sources().items() if path != "lab/_compat.py" and (ln := _version_branches(src))
    }
    assert not found, found
    assert _version_branches("import jax\nif hasattr(jax, 'typeof'):\n    pass\n") == [2]  # the scan can fail
    assert _version_branches((PKG / "lab/_compat.py").read_text())  # … and finds _compat's branches
