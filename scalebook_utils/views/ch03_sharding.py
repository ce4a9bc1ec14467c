"""Views for chapter 3 (sharded matrices): the blocks each device holds, and the sharding explorer.

Figure (a matplotlib Figure made without pyplot; accepts ``ax=``): `sharding_blocks_figure`, a 2-D array cut
into the blocks devices hold (book ch. 3, "A unified notation for sharding").

Widget, a testable triple (DESIGN §3: a pure *readout* line with a fixed prefix, a pure *render*, a *builder*
with ``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()`` from `_kit.attach`): the sharding
explorer (`sharding_readout` / `sharding_details`, `render_sharding`, `sharding_explorer`: the book's four
matmul cases, "Computation With Sharded Arrays", what `sharding.plan` predicts and, with `compile_matmul`, what
XLA compiles on simulated CPU devices, `lab` imported only then).

The chapter's collectives ("A Deeper Dive into TPU Communication Primitives": `collective_time_figure`,
`allgather_axes_figure`, the collective-cost explorer) live in `ch03_collectives`; this module re-exports them,
so every chapter-3 view name still resolves here. A builder looks its render up in the module it is defined in,
so a test patches `ch03_collectives.render_collective`, not this module's re-export. The notebooks reach these
names through the `plots` and `widgets` façades.
"""

from __future__ import annotations

import ipywidgets as widgets
from IPython.display import clear_output
from matplotlib.figure import Figure

from scalebook_utils.core.hardware import get_chip
from scalebook_utils.views._kit import (
    SHARD_COLORS,
    attach,
    emit,
    error_text,
    message_figure,
    new_figure,
    tpu_names,
)
from scalebook_utils.views.ch03_collectives import (
    ALLGATHER_AXES,
    COLLECTIVE_KINDS,
    COLLECTIVES_PREFIX,
    allgather_axes_figure,
    collective_cost_explorer,
    collective_knee_bytes,
    collective_readout,
    collective_time_figure,
    render_collective,
)

__all__ = [
    "sharding_blocks_figure",
    "SHARDING_PREFIX",
    "SHARDING_MESHES",
    "SHARDING_PRESETS",
    "matmul_text",
    "compile_matmul",
    "sharding_readout",
    "sharding_details",
    "render_sharding",
    "sharding_explorer",
    # re-exported from ch03_collectives (moved there; kept so `ch03_sharding.X` resolves as before)
    "collective_knee_bytes",
    "collective_time_figure",
    "ALLGATHER_AXES",
    "allgather_axes_figure",
    "COLLECTIVES_PREFIX",
    "COLLECTIVE_KINDS",
    "collective_readout",
    "render_collective",
    "collective_cost_explorer",
]


# --- the figure: a sharded array's blocks ------------------------------------------------------------------


def _device_id(coords, sizes) -> int:
    k = 0
    for c, s in zip(coords, sizes):
        k = k * s + c
    return k


def sharding_blocks_figure(array, mesh, shape, *, ax=None, figsize=(4.2, 3.6), title: str | None = None) -> Figure:
    """The global 2-D array cut into the blocks devices hold (`sharding.device_blocks`), one colour per shard.

    Each block is labelled with the devices holding it (device number = mesh coordinates read
    first-axis-major, as `jax.make_mesh` numbers them): a replicated array shows one block listing
    every device. `shape`: the global dim sizes (a sequence, or a mapping dim → size). Book ch. 3,
    "A unified notation for sharding". 1-D arrays are drawn as one row.
    """
    from matplotlib.patches import Rectangle

    from scalebook_utils.core import sharding as sh

    arr, m = sh.parse_array(array), sh.parse_mesh(mesh)
    blocks = sh.device_blocks(arr, m, shape)
    local = sh.check(arr, m, shape)
    glob = list(sh.shape_tuple(arr, shape))
    by_block: dict = {}
    for coords, rng in blocks.items():
        by_block.setdefault(rng, []).append(_device_id(coords, m.sizes))
    fig, ax = new_figure(figsize, ax)
    rows_n = glob[0] if len(glob) > 1 else 1
    cols_n = glob[1] if len(glob) > 1 else glob[0]
    for i, (rng, devs) in enumerate(sorted(by_block.items())):
        (r0, r1), (c0, c1) = (rng[0], rng[1]) if len(rng) > 1 else ((0, 1), rng[0])
        ax.add_patch(
            Rectangle(
                (c0, r0),
                c1 - c0,
                r1 - r0,
                facecolor=SHARD_COLORS[i % len(SHARD_COLORS)],
                edgecolor="black",
                linewidth=1.2,
            )
        )
        label = ("d" + ",".join(map(str, devs))) if len(devs) <= 4 else f"d{devs[0]}…d{devs[-1]}\n({len(devs)} copies)"
        if len(devs) <= 4 and len(devs) > 1:
            label = "\n".join("d" + ",".join(map(str, devs[k : k + 2])) for k in range(0, len(devs), 2))
        w, h = (c1 - c0) / cols_n, (r1 - r0) / rows_n
        fs = max(6.0, min(11.0, 60 * min(w, h * 1.6)))
        ax.text((c0 + c1) / 2, (r0 + r1) / 2, label, ha="center", va="center", fontsize=fs)
    ax.set_xlim(0, cols_n)
    ax.set_ylim(rows_n, 0)
    ax.set_aspect("auto")
    dims = arr.dims
    ax.set_xlabel(f"{dims[1] if len(dims) > 1 else dims[0]} ({cols_n})")
    ax.set_ylabel(f"{dims[0]} ({rows_n})" if len(dims) > 1 else "")
    ax.set_xticks([])
    ax.set_yticks([])
    rep = sh.replication(arr, m)
    ax.set_title(
        title
        if title is not None
        else f"{arr.spec()} on {m}\nper device {'×'.join(map(str, local))}, "
        f"{len(by_block)} distinct shard{'s' if len(by_block) > 1 else ''}, "
        f"each on {rep} device{'s' if rep > 1 else ''}",
        fontsize=9,
    )
    return fig


# --- the sharding explorer -----------------------------------------------------------------------------------

#: The browser test waits for this prefix; do not change it.
SHARDING_PREFIX = "sharding explorer: "

#: Mesh shapes the explorer offers (label → the book's mesh notation); 8 devices each.
SHARDING_MESHES: dict[str, str] = {
    "1×8": "{X: 1, Y: 8}",
    "2×4": "{X: 2, Y: 4}",
    "4×2": "{X: 4, Y: 2}",
    "8×1": "{X: 8, Y: 1}",
    "2×2×2": "{X: 2, Y: 2, Z: 2}",
}

#: Matmul presets (label → (A, B, target)) from the book's four cases (ch. 3, "Computation With Sharded
#: Arrays") and Question 6. Every preset, on every mesh above, is compiled by the notebook's check cell.
SHARDING_PRESETS: dict[str, tuple[str, str, str | None]] = {
    "case 1: batch × model, no communication": ("A[I_X, J]", "B[J, K_Y]", "C[I_X, K_Y]"),
    "case 1, then AllGather C": ("A[I_X, J]", "B[J, K]", "C[I, K]"),
    "case 2: A sharded on J → AllGather A": ("A[I, J_X]", "B[J, K_Y]", "C[I, K_Y]"),
    "case 2: A on J, B replicated": ("A[I, J_X]", "B[J, K]", "C[I, K]"),
    "case 3: both on J → AllReduce": ("A[I, J_X]", "B[J_X, K]", "C[I, K]"),
    "case 3 → ReduceScatter into K": ("A[I, J_X]", "B[J_X, K]", "C[I, K_X]"),
    "case 3 on Y, I on X (ch3.q6a)": ("A[I_X, J_Y]", "B[J_Y, K]", "C[I_X, K]"),
    "case 4: I and K both on X → AllGather one": ("A[I_X, J]", "B[J, K_X]", "C[I, K_X]"),
    "move a subscript: AllToAll": ("A[I_X, J]", "B[J, K]", "C[I, K_X]"),
}
_DEFAULT_PRESET = "case 2: A sharded on J → AllGather A"


def _mesh_text(mesh) -> str:
    return SHARDING_MESHES.get(str(mesh).replace("x", "×"), str(mesh))


def matmul_text(a_spec: str, b_spec: str, target: str | None = None) -> str:
    """'A[I, J_X]', 'B[J, K]', 'C[I, K]' → 'A[I, J_X] ·_J B[J, K] → C[I, K]' (J: the dims A and B share)."""
    from scalebook_utils.core import sharding as sh

    a, b = sh.parse_array(str(a_spec).strip()), sh.parse_array(str(b_spec).strip())
    shared = [d for d in a.dims if d in b.dims]
    if not shared:
        raise sh.ShardingError(f"{a.spec()} and {b.spec()} share no dim to contract (e.g. A[I, J] and B[J, K])")
    over = "".join(shared) if all(len(d) == 1 for d in shared) else "{" + ",".join(shared) + "}"
    text = f"{a.spec()} ·_{over} {b.spec()}"
    target = (target or "").strip()
    return f"{text} → {target}" if target and target.lower() != "none" else text


def compile_matmul(mesh, matmul: str) -> dict:
    """What XLA compiles for `matmul` on 8 simulated CPU devices, against `sharding.plan` (cached):
    `lab.sharded.compile_matmul` with `mesh` a label of SHARDING_MESHES ("2×4") or the book's notation.
    Needs jaxlab.use_simulated_devices(8) before JAX first ran."""
    from scalebook_utils.lab import sharded  # lazy: a view imports jax only when it compiles

    return sharded.compile_matmul(_mesh_text(mesh), matmul)


def _sharding_eval(mesh, a_spec, b_spec, target, chip, compile, dim_size):
    """(line, details, plan or None) — never raises."""
    from scalebook_utils.core import sharding as sh

    mesh_t = _mesh_text(mesh)
    head = f"{SHARDING_PREFIX}{mesh_t} "
    try:
        text = matmul_text(a_spec, b_spec, target)
        m = sh.parse_matmul(text)
        shapes = {d: int(dim_size) for d in dict.fromkeys(m.a.dims + m.b.dims)}
        p = sh.plan(m, mesh_t, shapes, "bf16", chip)
    except (ValueError, KeyError, TypeError) as exc:
        msg = error_text(exc)
        spec = f"{a_spec} · {b_spec}" + (f" → {target}" if target else "")
        return f"{head}{spec} → invalid: {msg}", [], None
    from scalebook_utils.core.units import format_time

    pred = " + ".join(f"{s.kind}({''.join(s.axes)}) {format_time(s.seconds)}" for s in p.steps)
    line = f"{head}{m.spec()} | case {int(p.case)} | predicted {pred or 'no communication'}"
    wraps = sh.mesh_wraparound(mesh_t, chip)
    details = [
        f"plan: {p.summary()}",
        f"  wraparound on {p.chip} (ch. 2's rule): "
        + ", ".join(f"{a} {'ring' if w else 'line'}" for a, w in wraps.items()),
    ]
    for s in p.steps:
        details.append(
            f"  {s.describe()}: {s.n_bytes / 1e6:.3g} MB to the cost model, {format_time(s.seconds)} on {p.chip}"
        )
    details += [f"  note: {n}" for n in p.notes]
    if p.alternatives:
        details.append(
            "  other strategies: "
            + " | ".join(
                f"{a.strategy}: {'; '.join(s.describe() for s in a.steps) or 'no communication'}"
                for a in p.alternatives[:3]
            )
        )
    if compile:
        try:
            c = compile_matmul(mesh_t, text)
        except Exception as exc:  # noqa: BLE001 - e.g. JAX missing or too few devices: say so
            line += f" | XLA: cannot compile here ({type(exc).__name__}: {exc})"
            return line, details, p
        kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(c["collectives"].items())) or "no collectives"
        if not c["agree"]:
            verdict = "DISAGREE"
        elif c["strategy"] == c["plan"].strategy:
            verdict = f"agree (the plan's {c['strategy']})"
        else:
            verdict = f"agree (XLA chose the book's alternative: {c['strategy']})"
        line += f" | XLA: {kinds} | C == A·B: {c['result_matches']} | {verdict}"
        details.append(
            f"XLA on 8 CPU devices (every dim 128, float32): {kinds}, "
            f"{c['dynamic_slices']} dynamic-slice(s); {c['why']}"
        )
    else:
        line += " | XLA: not compiled"
    return line, details, p


def sharding_readout(
    mesh="2×4",
    a_spec="A[I, J_X]",
    b_spec="B[J, K_Y]",
    target: str | None = "C[I, K_Y]",
    chip: str = "tpu-v5e",
    compile: bool = False,
    *,
    dim_size: int = 8192,
) -> str:
    """``sharding explorer: {X: 2, Y: 4} A[I, J_X] ·_J B[J, K_Y] → C[I, K_Y] | case 2 | predicted … | XLA: …``.

    The book's case of the matmul, the collectives `sharding.plan` predicts with their time on `chip`
    (every dim `dim_size`, bf16), and with compile=True what XLA compiled on 8 simulated CPU devices
    (`compile_matmul`): collective kinds ×count, whether C equals the unsharded product, and whether
    prediction and HLO agree. `mesh`: a label of SHARDING_MESHES ("2×4") or the book's notation.
    An invalid spec gives a readable '→ invalid: …' line, never an exception.
    """
    return _sharding_eval(mesh, a_spec, b_spec, target, chip, compile, dim_size)[0]


def sharding_details(
    mesh="2×4",
    a_spec="A[I, J_X]",
    b_spec="B[J, K_Y]",
    target: str | None = "C[I, K_Y]",
    chip: str = "tpu-v5e",
    compile: bool = False,
    *,
    dim_size: int = 8192,
) -> list[str]:
    """The explorer's lines under the readout: plan summary, each step's bytes and time, notes, XLA's explanation."""
    return _sharding_eval(mesh, a_spec, b_spec, target, chip, compile, dim_size)[1]


def render_sharding(
    mesh="2×4",
    a_spec="A[I, J_X]",
    b_spec="B[J, K_Y]",
    target: str | None = "C[I, K_Y]",
    chip: str = "tpu-v5e",
    caption: str | None = None,
) -> Figure:
    """Three panels: the blocks each device holds of A, of B, and of C (the target, or the local output).

    Every dim 8192 (the readout's cost sizes). `caption`: text under the panels (the explorer passes its
    readout, so the static snapshot shows the prediction and what XLA compiled)."""
    _line, _details, p = _sharding_eval(mesh, a_spec, b_spec, target, chip, False, 8192)
    if p is None:
        return message_figure(_line.replace(SHARDING_PREFIX, "cannot draw: ", 1), figsize=(11, 1.4))
    fig = Figure(figsize=(12.5, 4.0), layout="constrained")
    mesh_t = _mesh_text(mesh)
    out = p.output  # device_blocks draws an unreduced C by its dims; the title keeps the {U_…}
    for ax, arr, what in zip(fig.subplots(1, 3), (p.matmul.a, p.matmul.b, out), ("input", "input", "output")):
        if len(arr.dims) != 2:
            ax.text(0.5, 0.5, f"{arr.spec()}: only 2-D arrays are drawn", ha="center", va="center")
            ax.set_axis_off()
            continue
        sharding_blocks_figure(arr, mesh_t, {d: 8192 for d in arr.dims}, ax=ax)
        ax.set_title(f"{what} " + ax.get_title(), fontsize=9)
    steps = "; ".join(s.describe() for s in p.steps) or "no communication"
    fig.suptitle(f"case {int(p.case)}: {steps}", fontsize=10)
    if caption:
        parts = caption.removeprefix(SHARDING_PREFIX).split(" | ")
        fig.supxlabel("\n".join([" | ".join(parts[:3]), " | ".join(parts[3:])]), fontsize=9)
    return fig


def sharding_explorer(
    mesh: str = "2×4", preset: str = _DEFAULT_PRESET, chip: str = "tpu-v5e", compile: bool = True
) -> widgets.VBox:
    """Mesh, preset, A / B / target boxes, chip, 'compile on CPU devices'; prints `sharding_readout` + details.

    Choosing a preset fills the three boxes; editing a box keeps the preset dropdown as it is.
    """
    a0, b0, t0 = SHARDING_PRESETS[preset]
    mesh_dd = widgets.Dropdown(options=list(SHARDING_MESHES), value=mesh, description="mesh")
    preset_dd = widgets.Dropdown(
        options=list(SHARDING_PRESETS), value=preset, description="preset", layout=widgets.Layout(width="55%")
    )
    a_box = widgets.Text(value=a0, description="A", continuous_update=False)
    b_box = widgets.Text(value=b0, description="B", continuous_update=False)
    t_box = widgets.Text(
        value=t0 or "", description="target", continuous_update=False, placeholder="e.g. C[I, K_Y] (optional)"
    )
    chip_dd = widgets.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    comp_cb = widgets.Checkbox(value=compile, description="compile on 8 CPU devices")

    holding = [False]  # while a preset fills the three boxes: one redraw at the end, not one per box

    def on_preset(change):
        a, b, t = SHARDING_PRESETS[change["new"]]
        if (a_box.value, b_box.value, t_box.value) == (a, b, t or ""):
            return
        holding[0] = True
        try:
            a_box.value, b_box.value, t_box.value = a, b, t or ""
        finally:
            holding[0] = False
        with out:  # what interactive_output does for one change
            clear_output(wait=True)
            view(**{k: c.value for k, c in controls.items()})

    preset_dd.observe(on_preset, names="value")
    box = widgets.VBox()

    def view(mesh, a, b, target, chip, compile):
        if holding[0]:
            return
        line, details, _p = _sharding_eval(mesh, a, b, target or None, chip, compile, 8192)
        emit(
            box,
            line,
            lambda: render_sharding(mesh, a, b, target or None, chip, caption=line),
            key=(mesh,),
            lines=details,
        )

    controls = {"mesh": mesh_dd, "a": a_box, "b": b_box, "target": t_box, "chip": chip_dd, "compile": comp_cb}
    out = widgets.interactive_output(view, controls)
    box.children = [
        widgets.HBox([mesh_dd, preset_dd]),
        widgets.HBox([a_box, b_box, t_box]),
        widgets.HBox([chip_dd, comp_cb]),
        out,
    ]
    values = lambda: (mesh_dd.value, a_box.value, b_box.value, t_box.value or None, chip_dd.value)  # noqa: E731
    return attach(
        box,
        {**controls, "preset": preset_dd},
        out,
        lambda: sharding_readout(*values(), compile=comp_cb.value),
        lambda: render_sharding(*values()),
    )
