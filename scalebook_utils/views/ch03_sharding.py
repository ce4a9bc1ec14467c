"""Views for chapter 3 (sharded matrices): the blocks each device holds, collective times, and two explorers.

Figures (each returns a matplotlib Figure made without pyplot; one-panel ones accept ``ax=``):
`sharding_blocks_figure` (a 2-D array cut into the blocks devices hold; "A unified notation for sharding"),
`collective_time_figure` and `allgather_axes_figure` (a collective's time against bytes, latency- then
bandwidth-bound; "A Deeper Dive…"), with `collective_knee_bytes`, the regime boundary.

Widgets, each a testable triple (DESIGN §3: a pure *readout* line with a fixed prefix, a pure *render*, a
*builder* with ``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()`` from `_kit.attach`): the
sharding explorer (`sharding_readout` / `sharding_details`, `render_sharding`, `sharding_explorer`: the book's
four matmul cases, what `sharding.plan` predicts and, with `compile_matmul`, what XLA compiles on simulated
CPU devices, `lab` imported only then) and the collective-cost explorer (`collective_readout`,
`render_collective`, `collective_cost_explorer`). The notebooks reach these names through the `plots` and
`widgets` façades.
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np
from IPython.display import clear_output
from matplotlib.figure import Figure

from scalebook_utils.core.collectives import KINDS
from scalebook_utils.core.collectives import knee_bytes as collective_knee_bytes
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import format_si
from scalebook_utils.views._kit import (
    LINE_COLORS,
    SHARD_COLORS,
    attach,
    emit,
    error_text,
    log_span,
    message_figure,
    new_figure,
    si_tick,
    tpu_names,
)

__all__ = [
    "sharding_blocks_figure",
    "collective_knee_bytes",
    "collective_time_figure",
    "ALLGATHER_AXES",
    "allgather_axes_figure",
    "SHARDING_PREFIX",
    "COLLECTIVES_PREFIX",
    "SHARDING_MESHES",
    "SHARDING_PRESETS",
    "matmul_text",
    "compile_matmul",
    "sharding_readout",
    "sharding_details",
    "render_sharding",
    "sharding_explorer",
    "COLLECTIVE_KINDS",
    "collective_readout",
    "render_collective",
    "collective_cost_explorer",
]


# --- figures: sharded arrays and collective times ----------------------------------------------------------


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


def collective_time_figure(
    kind: str,
    chip: ChipSpec | str = "tpu-v5e",
    axis_sizes=(16,),
    wraparound=True,
    *,
    bytes_range=(1e3, 1e10),
    n_bytes: float | None = None,
    ax=None,
    figsize=(6.4, 4.0),
    label: str | None = None,
    color: str | None = None,
    title: str | None = None,
) -> Figure:
    """Collective time against bytes (log-log) from `collectives.collective`, the knee marked.

    Left of the knee the time is flat (latency-bound: T_min × hops); right of it, linear in bytes
    (bandwidth-bound). The dashed line is the bandwidth term alone. `n_bytes` adds a marker at that
    size. Call again with the same `ax` to overlay another chip or axis size.
    """
    from scalebook_utils.core import collectives

    k = collectives.normalize_kind(kind)
    kw = {"hops": 1} if k == "ppermute" else {"wraparound": wraparound}
    spec = get_chip(chip)
    xs = log_span(*bytes_range)
    costs = [collectives.collective(k, float(x), axis_sizes, spec, **kw) for x in xs]
    t = np.array([c.seconds for c in costs])
    tb = np.array([c.bandwidth_s for c in costs])
    fresh = ax is None
    fig, ax = new_figure(figsize, ax)
    n_lines = sum(1 for ln in ax.get_lines() if ln.get_linestyle() == "-")  # one solid line per curve
    color = color or LINE_COLORS[n_lines % len(LINE_COLORS)]
    sizes_txt = "×".join(str(s) for s in np.atleast_1d(axis_sizes)) if k != "ppermute" else "1 hop"
    wrap_txt = "" if k == "ppermute" else (", wrap" if wraparound else ", no wrap")
    knee = collective_knee_bytes(k, spec, axis_sizes, wraparound)
    shown = bytes_range[0] < knee < bytes_range[1]
    # the knee goes into the legend (labels next to the points overlapped when curves were overlaid)
    text = (label or f"{spec.name}, axis {sizes_txt}{wrap_txt}") + (
        f" · knee {format_si(knee, 'B', digits=3)}" if shown else ""
    )
    ax.plot(xs, t, color=color, lw=2, label=text)
    ax.plot(xs, tb, color=color, lw=1, ls="--", alpha=0.6)
    if shown:
        t_knee = collectives.collective(k, knee, axis_sizes, spec, **kw).seconds
        ax.plot([knee], [t_knee], "o", color=color, ms=7, mfc="white", mew=2)
    if n_bytes is not None:
        c = collectives.collective(k, float(n_bytes), axis_sizes, spec, **kw)
        ax.plot(
            [n_bytes],
            [c.seconds],
            "*",
            color="#d62728",
            ms=13,
            zorder=5,
            ls="none",
            label=f"this size: {format_si(float(n_bytes), 'B', digits=3)} → {format_si(c.seconds, 's', digits=3)}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(si_tick("B"))
    ax.yaxis.set_major_formatter(si_tick("s"))
    ax.set_xlabel("bytes (n_bytes given to the cost model)")
    ax.set_ylabel("time")
    ax.grid(True, which="major", alpha=0.3)
    if fresh or title is not None:
        ax.set_title(
            title
            if title is not None
            else f"{k}: latency-bound (flat) left of the knee ○,\n"
            "bandwidth-bound right of it (dashed: bandwidth term alone)",
            fontsize=9,
        )
    ax.legend(fontsize=8, loc="upper left")
    return fig


#: Axes that exist, with the wraparound ch. 2 gives them, grouped by one-way ICI link bandwidth (the only
#: chip number the bandwidth-bound part depends on): (axis size, wraps?, where such an axis occurs).
ALLGATHER_AXES = {
    "TPU v5e, v4p: 45 GB/s one-way links": [
        (4, False, "v5e 4×4: no wrap below 16"),
        (4, True, "v4p 4×4×4 cube"),
        (16, True, "v5e pod side; v4p 16×16×16"),
    ],
    "TPU v6e, v5p: 90 GB/s one-way links": [
        (4, False, "v6e 4×4: no wrap below 16"),
        (4, True, "v5p 4×4×4 cube"),
        (16, True, "v6e pod side; v5p 16×16×16"),
        (28, True, "v5p pod's long axis"),
    ],
}


def allgather_axes_figure(
    kind: str = "all_gather", axes=None, *, bytes_range=(1e3, 1e9), figsize=(12.5, 4.4)
) -> Figure:
    """One panel per link bandwidth: `kind`'s time vs bytes on axes that exist, with their wraparound.

    `axes`: {panel title: [(axis size, wraps, label), …]}, default ALLGATHER_AXES (v5e/v6e pods are
    16×16, so no axis is longer than 16 there; a v5e/v6e axis under 16 has no wraparound; v4p/v5p
    wrap in whole 4×4×4 cubes; book ch. 2). Chips with equal link bandwidth share a panel because
    their curves coincide (v4p = v5e, v5p = v6e). Book ch. 3, "A Deeper Dive…".
    """
    from scalebook_utils.core.hardware import get_chip as _chip

    axes = ALLGATHER_AXES if axes is None else axes
    chips = {"45": "tpu-v5e", "90": "tpu-v5p"}
    fig = Figure(figsize=figsize, layout="constrained")
    for ax, (title, rows) in zip(np.atleast_1d(fig.subplots(1, len(axes))), axes.items()):
        chip = next((c for bw, c in chips.items() if f"{bw} GB/s" in title), "tpu-v5e")
        for x, wrap, where in rows:
            collective_time_figure(
                kind,
                _chip(chip),
                (x,),
                wrap,
                ax=ax,
                bytes_range=bytes_range,
                label=f"axis {x}, {'ring' if wrap else 'line'} ({where})",
            )
        ax.set_title(title, fontsize=10)
    fig.suptitle(
        f"{kind}: flat (latency) left of each knee ○, sloped (bandwidth) right of it; dashed: bandwidth term alone",
        fontsize=10,
    )
    return fig


# --- the sharding explorer and the collective-cost explorer ----------------------------------

#: The browser test waits for these prefixes; do not change them.
SHARDING_PREFIX = "sharding explorer: "
COLLECTIVES_PREFIX = "collectives: "

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
) -> W.VBox:
    """Mesh, preset, A / B / target boxes, chip, 'compile on CPU devices'; prints `sharding_readout` + details.

    Choosing a preset fills the three boxes; editing a box keeps the preset dropdown as it is.
    """
    a0, b0, t0 = SHARDING_PRESETS[preset]
    mesh_dd = W.Dropdown(options=list(SHARDING_MESHES), value=mesh, description="mesh")
    preset_dd = W.Dropdown(
        options=list(SHARDING_PRESETS), value=preset, description="preset", layout=W.Layout(width="55%")
    )
    a_box = W.Text(value=a0, description="A", continuous_update=False)
    b_box = W.Text(value=b0, description="B", continuous_update=False)
    t_box = W.Text(
        value=t0 or "", description="target", continuous_update=False, placeholder="e.g. C[I, K_Y] (optional)"
    )
    chip_dd = W.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    comp_cb = W.Checkbox(value=compile, description="compile on 8 CPU devices")

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
    box = W.VBox()

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
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([mesh_dd, preset_dd]), W.HBox([a_box, b_box, t_box]), W.HBox([chip_dd, comp_cb]), out]
    values = lambda: (mesh_dd.value, a_box.value, b_box.value, t_box.value or None, chip_dd.value)  # noqa: E731
    return attach(
        box,
        {**controls, "preset": preset_dd},
        out,
        lambda: sharding_readout(*values(), compile=comp_cb.value),
        lambda: render_sharding(*values()),
    )


#: Collective kinds offered by the collective-cost explorer (`collectives.KINDS`, as `collectives.collective`
#: spells them).
COLLECTIVE_KINDS = KINDS


def collective_readout(
    kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16, wraparound: bool = True, n_bytes: float = 1e6
) -> str:
    """``collectives: all_gather of 1 MB over an axis of 16 (wraparound) on tpu-v5e → 11.1 us, bandwidth-bound | …``.

    Time from `collectives.collective`, its regime, both terms, and the knee (bytes where latency and
    bandwidth terms are equal: below it the collective is latency-bound). ppermute: one hop (the axis
    size and wraparound do not matter). A bad value gives a readable line, never an exception.
    """
    from scalebook_utils.core import collectives
    from scalebook_utils.core.units import format_time

    head = f"{COLLECTIVES_PREFIX}{kind}"
    try:
        k = collectives.normalize_kind(kind)
        kw = {"hops": 1} if k == "ppermute" else {"wraparound": bool(wraparound)}
        c = collectives.collective(k, float(n_bytes), (int(axis_size),), chip, **kw)
        knee = collective_knee_bytes(k, chip, (int(axis_size),), bool(wraparound))
    except (ValueError, KeyError, TypeError) as exc:
        msg = error_text(exc)
        return f"{head} → cannot evaluate: {msg}"
    where = (
        "one hop"
        if k == "ppermute"
        else f"an axis of {int(axis_size)} ({'wraparound' if wraparound else 'no wraparound'})"
    )
    warn = ""
    if k != "ppermute":  # say when the axis cannot exist, or its wraparound is not the chip's (book ch. 2)
        from scalebook_utils.core.topology import default_wraparound

        spec = get_chip(chip)
        dims = spec.ici_torus_dims
        if int(axis_size) > max(spec.pod_shape):
            warn = f" | note: no {spec.name} axis has {int(axis_size)} chips (pod {'×'.join(map(str, spec.pod_shape))})"
        elif bool(wraparound) != default_wraparound(spec, (int(axis_size),) + (1,) * (dims - 1))[0]:
            warn = (
                f" | note: a {spec.name} axis of {int(axis_size)} "
                f"{'has no' if wraparound else 'has'} wraparound by ch. 2's rule"
            )
    return (
        f"{COLLECTIVES_PREFIX}{k} of {format_si(float(n_bytes), 'B', digits=3)} over {where} on {c.chip} → "
        f"{format_time(c.seconds)}, {c.regime}-bound | latency term {format_time(c.latency_s)}, "
        f"bandwidth term {format_time(c.bandwidth_s)} | knee {format_si(knee, 'B', digits=3)}{warn}"
    )


def render_collective(
    kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16, wraparound: bool = True, n_bytes: float = 1e6
) -> Figure:
    """Time vs bytes for this collective on `chip`, with and without wraparound, the current size starred."""
    from scalebook_utils.core import collectives

    try:
        k = collectives.normalize_kind(kind)
        fig = collective_time_figure(k, chip, (int(axis_size),), bool(wraparound), n_bytes=float(n_bytes))
        if k != "ppermute":
            collective_time_figure(k, chip, (int(axis_size),), not bool(wraparound), ax=fig.axes[0])
    except (ValueError, KeyError, TypeError) as exc:
        return message_figure(f"cannot draw: {exc}")
    return fig


def collective_cost_explorer(
    kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16, wraparound: bool = True, n_bytes: float = 1e6
) -> W.VBox:
    """Kind, chip, axis size, wraparound and a bytes slider (log); prints `collective_readout`."""
    kind_dd = W.Dropdown(options=list(COLLECTIVE_KINDS), value=kind, description="collective")
    chip_dd = W.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    axis_dd = W.Dropdown(options=[2, 4, 8, 16, 32, 64], value=axis_size, description="axis size")
    wrap_cb = W.Checkbox(value=wraparound, description="wraparound")
    bytes_sl = W.FloatLogSlider(
        value=n_bytes,
        base=10,
        min=3,
        max=10,
        step=0.05,
        description="bytes",
        readout_format=".3g",
        continuous_update=False,
        layout=W.Layout(width="60%"),
    )
    box = W.VBox()

    def view(kind, chip, axis_size, wraparound, n_bytes):
        emit(
            box,
            collective_readout(kind, chip, axis_size, wraparound, n_bytes),
            lambda: render_collective(kind, chip, axis_size, wraparound, n_bytes),
            key=(kind, chip, axis_size, wraparound),
        )

    controls = {"kind": kind_dd, "chip": chip_dd, "axis_size": axis_dd, "wraparound": wrap_cb, "n_bytes": bytes_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([kind_dd, chip_dd]), W.HBox([axis_dd, wrap_cb]), bytes_sl, out]
    values = lambda: (kind_dd.value, chip_dd.value, axis_dd.value, wrap_cb.value, bytes_sl.value)  # noqa: E731
    return attach(box, controls, out, lambda: collective_readout(*values()), lambda: render_collective(*values()))
