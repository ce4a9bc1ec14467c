"""Views for chapter 2 (TPUs): the ICI torus and the bandwidth hierarchy, as figures and widgets.

Figures (each returns a matplotlib Figure made without pyplot; one-panel ones accept ``ax=``):
`torus_figure` (a slice's chips, its ICI and wraparound links, a shortest route; "TPU Networking") and
`bandwidth_hierarchy_figure` (each channel's bandwidth and critical intensity C/W; "Key Takeaways").

Widgets, each a testable triple (DESIGN §3: a pure *readout* line with a fixed prefix, a pure *render*, a
*builder* with ``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()`` from `_kit.attach`): the slice
calculator (`slice_readout`, `render_slice`, `slice_calculator`; Question 2) and the torus explorer
(`torus_readout`, `render_torus`, `torus_explorer`). The slice arithmetic (shapes, wraparound, hops) is
`core.topology`'s.

The systolic array's figures (Appendix B: `systolic_frame_figure`, `systolic_utilisation_figure`) live in
`ch02_systolic`; this module re-exports them, so every chapter-2 view name still resolves here. The notebooks
reach these names through the `plots` and `widgets` façades.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from scalebook_utils.core import topology
from scalebook_utils.core.hardware import ChipSpec, bandwidth_channels, get_chip
from scalebook_utils.core.topology import ring_hops, torus_path, torus_route_args
from scalebook_utils.core.units import format_flops, format_si
from scalebook_utils.views._kit import attach, emit, format_shape, message_figure, new_figure, si_tick, tpu_names
from scalebook_utils.views.ch02_systolic import systolic_frame_figure, systolic_utilisation_figure

__all__ = [
    "torus_figure",
    "bandwidth_hierarchy_figure",
    "SLICE_PREFIX",
    "TORUS_PREFIX",
    "slice_readout",
    "render_slice",
    "slice_calculator",
    "torus_readout",
    "render_torus",
    "torus_explorer",
    # re-exported from ch02_systolic (moved there; kept so `ch02_tpus.X` resolves as before)
    "systolic_frame_figure",
    "systolic_utilisation_figure",
]


# --- the ICI torus --------------------------------------------------------------------------------


def torus_figure(slice_shape, wraparound, src, dst, *, ax=None, figsize=None, title: str | None = None) -> Figure:
    """Chips of a slice as a grid with their ICI links, wraparound links as arcs, a shortest src→dst path in red.

    slice_shape: 1 to 3 sides, e.g. (4, 4) or (4, 4, 8). wraparound: one bool, or one per axis. src, dst:
    chip coordinates. A 3-D slice is drawn as the plane of its first two axes that holds `src`; the title
    says so and how many hops the route spends along axis 2. Book ch. 2, "TPU Networking".
    """
    shape, wrap, src, dst = torus_route_args(slice_shape, wraparound, src, dst)
    path = torus_path(shape, wrap, src, dst)
    shape2 = shape + (1,) * (2 - len(shape)) if len(shape) < 2 else shape[:2]
    rows, cols = shape2
    if figsize is None:
        figsize = (max(6.4, min(10.0, 2.6 + 0.55 * cols)), min(8.5, 2.3 + 0.5 * rows))
    fig, ax = new_figure(figsize, ax)

    lw = 1.6 if max(rows, cols) <= 16 else 0.8
    z = src[2] if len(shape) == 3 else None

    def xy(c):  # chip coordinate → (x, y): axis 1 across, axis 0 down
        r = c[0]
        col = c[1] if len(c) > 1 else 0
        return col, -r

    from matplotlib.collections import LineCollection

    # ordinary links: one collection (a Line2D per link costs ms each on a 16×16 pod)
    segs = [((c, -r), (c + 1, -r)) for r in range(rows) for c in range(cols - 1)]
    segs += [((c, -r), (c, -r - 1)) for r in range(rows - 1) for c in range(cols)]
    ax.add_collection(LineCollection(segs, colors="0.6", linewidths=lw, zorder=1, gid="links"), autolim=False)
    # wraparound links: a dashed stub leaving each edge chip outwards (it joins the stub on the opposite edge)
    stub = 0.55
    wrap1 = len(shape) >= 2 and wrap[1] and cols > 2
    wrap0 = wrap[0] and rows > 2
    stubs = _wrap_stubs(rows, cols, stub, wrap0, wrap1)
    if stubs:  # one segment per stub
        ax.add_collection(
            LineCollection(stubs, colors="#7b3294", linewidths=lw, linestyles="--", zorder=1, gid="wrap-link"),
            autolim=False,
        )
    # the route (only the steps inside the drawn plane); a step over a wraparound link is drawn as its two stubs
    red = dict(color="#d62728", lw=lw * 2.6, zorder=3, solid_capstyle="round")
    for a, b in zip(path[:-1], path[1:]):
        if z is not None and (a[2] != z or b[2] != z):
            continue
        (xa, ya), (xb, yb) = xy(a), xy(b)
        if abs(xa - xb) > 1:  # wrap along axis 1
            ax.plot([-stub, 0], [ya, ya], gid="path-wrap", **red)
            ax.plot([cols - 1, cols - 1 + stub], [ya, ya], gid="path-wrap", **red)
        elif abs(ya - yb) > 1:  # wrap along axis 0
            ax.plot([xa, xa], [0, stub], gid="path-wrap", **red)
            ax.plot([xa, xa], [-(rows - 1), -(rows - 1) - stub], gid="path-wrap", **red)
        else:
            ax.plot([xa, xb], [ya, yb], gid="path", **red)
    # chips: one marker line per fill colour (end points, on the route, off it)
    show_labels = rows * cols <= 64
    on_route = set(path)
    groups: dict[str, list] = {"#d62728": [], "#fcbba1": [], "#deebf7": []}
    for r in range(rows):
        for c in range(cols):
            coord = (r, c) if len(shape) >= 2 else (r,)
            full = coord + ((z,) if z is not None else ())
            fc = "#d62728" if full in (src, dst) else "#fcbba1" if full in on_route else "#deebf7"
            groups[fc].append((c, -r))
            if show_labels:
                ax.text(
                    c,
                    -r,
                    ",".join(map(str, coord)),
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    zorder=5,
                    color="white" if full in (src, dst) else "black",
                    in_layout=False,
                )  # inside the axes
    for fc, pts in groups.items():
        if pts:
            ax.plot(*zip(*pts), marker="s", ms=18 if show_labels else 7, mfc=fc, mec="0.25", zorder=4, ls="")
    pad = 0.75
    ax.set_xlim(-pad, cols - 1 + pad)
    ax.set_ylim(-(rows - 1) - pad, pad)
    ax.set_aspect("equal")
    tick = lambda n: 1 if n <= 8 else 2 if n <= 16 else 4  # noqa: E731 - every chip index, then every 2nd/4th
    ax.set_xticks(range(0, cols, tick(cols)))
    ax.set_yticks([-r for r in range(0, rows, tick(rows))], [str(r) for r in range(0, rows, tick(rows))])
    ax.tick_params(labelsize=7, length=0)
    for sp in ax.spines.values():
        sp.set_visible(False)
    ax.set_xlabel("axis 1 (chip index)" if len(shape) >= 2 else "(one axis: chips in a line)")
    ax.set_ylabel("axis 0 (chip index)")
    ax.set_title(title or _torus_title(shape, wrap, src, dst, path, z), fontsize=9)
    return fig


def _wrap_stubs(rows: int, cols: int, stub: float, wrap0: bool, wrap1: bool) -> list:
    """`torus_figure`'s wraparound links: a segment of length `stub` leaving each edge chip outwards."""
    stubs = []
    if wrap1:
        stubs += [s for r in range(rows) for s in (((-stub, -r), (0, -r)), ((cols - 1, -r), (cols - 1 + stub, -r)))]
    if wrap0:
        stubs += [s for c in range(cols) for s in (((c, 0), (c, stub)), ((c, -(rows - 1)), (c, -(rows - 1) - stub)))]
    return stubs


def _torus_title(shape, wrap, src, dst, path, z) -> str:
    """`torus_figure`'s default title: the slice, its wraparound, the route's hops, the farthest pair."""
    hops = len(path) - 1
    shape_s = "×".join(map(str, shape))
    wrap_s = "wraparound on " + (
        ", ".join(f"axis {i}" for i, w in enumerate(wrap) if w and shape[i] > 2)
        if any(w and n > 2 for w, n in zip(wrap, shape))
        else "no axis"
    )
    head = f"{shape_s} slice, {wrap_s}: {src} → {dst} = {hops} hop{'s' if hops != 1 else ''}"
    far = sum(ring_hops(n, w) for n, w in zip(shape, wrap))  # the slice's diameter (topology.max_hops of a Slice)
    sub = f"(farthest pair in this slice: {far} hops; dashed stubs = wraparound links)"
    if z is not None:
        dz = sum(1 for a, b in zip(path[:-1], path[1:]) if a[2] != b[2])
        sub += f"\ndrawn: the plane axis 2 = {z} (of {shape[2]}); {dz} of the hops run along axis 2, not drawn"
    return f"{head}\n{sub}"


# --- the bandwidth hierarchy ----------------------------------------------------------------------


def bandwidth_hierarchy_figure(
    chip: ChipSpec | str = "tpu-v5e", dtype: str = "bf16", *, ax=None, figsize=(8.5, 3.6)
) -> Figure:
    """Horizontal log bars of each channel's bandwidth, each labelled with its critical intensity C/W.

    C is the chip's `dtype` peak; C/W (FLOPs per byte) is the intensity an operation needs to stay
    compute-bound when its bytes come over that channel (book ch. 2, "Key Takeaways": HBM > ICI > PCIe
    > DCN; VMEM ≈ 22 × HBM). Channels the book gives no number for are listed but not drawn.
    """
    spec = get_chip(chip)
    peak = spec.peak_flops(dtype)
    rows = bandwidth_channels(spec, dtype)
    fig, ax = new_figure(figsize, ax)
    names = [f"{n}\n({note})" for n, _, note in rows]
    ys = np.arange(len(rows))[::-1]
    colors = ["#1a9850", "#1f4e9c", "#7b3294", "#e6550d", "#b2182b", "#636363"]
    known = [bw for _, bw, _ in rows if bw]
    lo = 10 ** math.floor(math.log10(min(known) / 10))
    hi = 10 ** math.ceil(math.log10(max(known) * 40))
    for y, (name, bw, _note), color in zip(ys, rows, colors):
        if bw:
            ax.barh(y, bw, left=lo, color=color, height=0.6, gid=f"channel:{name}")
            cw = peak / bw
            sub = "link" if name == "ICI" else name  # ICI: one link, one way (W_link); α_ici uses both directions
            label = (
                f"{format_si(bw, 'B/s')} → C/W_{sub} = {cw:,.0f} FLOPs/byte"
                if cw >= 100
                else f"{format_si(bw, 'B/s')} → C/W_{sub} = {cw:.3g} FLOPs/byte"
            )
            if name == "ICI":
                label += f"\n(both directions, W_ici = 2·W_link: α_ici = C/W_ici = {cw / 2:,.0f})"
            ax.text(bw * 1.3, y, label, va="center", fontsize=8.5)
        else:
            ax.text(
                lo * 1.3,
                y,
                "no number in the book for this chip",
                va="center",
                fontsize=8.5,
                color="0.4",
                style="italic",
            )
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(si_tick("B/s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(ys, names, fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("bandwidth (bytes/s, log scale)")
    ax.set_ylabel("channel")
    ax.set_title(
        f"{spec.name}: bandwidth hierarchy and critical intensity C/W (C = {format_si(peak, 'FLOP/s')} {dtype})",
        fontsize=10,
    )
    ax.grid(True, axis="x", which="major", alpha=0.3)
    return fig


# --- the slice / pod calculator and the torus explorer --------------------------------------

#: The browser test waits for these prefixes; do not change them.
SLICE_PREFIX = "slice calculator: "
TORUS_PREFIX = "torus: "


def _yes_no(wrap) -> str:
    return "/".join("yes" if w else "no" for w in wrap)


def slice_readout(chip: str | ChipSpec, shape_text: str) -> str:
    """``slice calculator: tpu-v5e 4x4 → 16 chips, 2 hosts, 16 TensorCores, 3.15 PFLOP/s bf16, 256 GB HBM, …``.

    Adds the wraparound of each axis (the book's rule) and the farthest pair in hops. A bad shape, a
    shape larger than the pod, or a GPU gives a readable line, never an exception. Book ch. 2, "TPU
    Networking" and Question 2.
    """
    from scalebook_utils.core import topology

    head = f"{SLICE_PREFIX}{getattr(chip, 'name', chip)} {str(shape_text).strip()}"
    try:
        s = topology.make_slice(chip, shape_text)
    except (ValueError, KeyError, TypeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return f"{head} → cannot build this slice: {msg}"
    return (
        f"{SLICE_PREFIX}{s.chip} {format_shape(s.shape)} → {s.n_chips:,} chips, {s.n_hosts:,} hosts, "
        f"{s.n_tensorcores:,} TensorCores, {format_flops(s.peak_flops('bf16'))} bf16, "
        f"{format_si(s.hbm_bytes, 'B')} HBM | wraparound per axis: {_yes_no(s.wraparound)} | "
        f"farthest pair: {topology.max_hops(s)} hops"
    )


def render_slice(chip: str | ChipSpec, shape_text: str) -> Figure:
    """The slice as a grid of chips (one plane for 3-D slices) with the route between its farthest pair."""
    from scalebook_utils.core import topology

    try:
        s = topology.make_slice(chip, shape_text)
    except (ValueError, KeyError, TypeError) as exc:
        return message_figure(f"cannot draw: {exc}")
    far = tuple(n // 2 if w else n - 1 for n, w in zip(s.shape, s.wraparound))
    fig = torus_figure(s.shape, s.wraparound, (0,) * s.ndim, far)
    ax = fig.axes[0]
    ax.set_title(
        f"{s.chip} {format_shape(s.shape)}: {s.n_chips:,} chips on {s.n_hosts:,} hosts, "
        f"{s.n_tensorcores:,} TensorCores, {format_flops(s.peak_flops('bf16'))} bf16, "
        f"{format_si(s.hbm_bytes, 'B')} HBM\nroute to the farthest chip: {topology.max_hops(s)} hops "
        + ("(dashed stubs = wraparound links)" if any(s.wraparound) else "(no wraparound)")
        + "".join("\n" + line for line in ax.get_title().split("\n")[2:]),
        fontsize=9,
    )
    return fig


def slice_calculator(chip: str = "tpu-v5e", shape: str = "4x4") -> widgets.VBox:
    """A TPU dropdown and a shape box ("4x4", "16x20x28"); prints `slice_readout` and draws the slice."""
    names = tpu_names()
    chip_dd = widgets.Dropdown(options=names, value=get_chip(chip).name, description="chip")
    shape_box = widgets.Text(
        value=shape, description="shape", continuous_update=False, placeholder="e.g. 4x4 or 16x20x28"
    )
    pod_btn = widgets.Button(description="full pod", tooltip="set the shape to this chip's pod")

    def on_pod(_):
        shape_box.value = format_shape(get_chip(chip_dd.value).pod_shape)

    pod_btn.on_click(on_pod)
    box = widgets.VBox()

    def view(chip, shape):
        emit(box, slice_readout(chip, shape), lambda: render_slice(chip, shape), key=(chip, shape.count("x")))

    controls = {"chip": chip_dd, "shape": shape_box}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([chip_dd, shape_box, pod_btn]), out]
    return attach(
        box,
        controls,
        out,
        lambda: slice_readout(chip_dd.value, shape_box.value),
        lambda: render_slice(chip_dd.value, shape_box.value),
    )


def _parse_coord(text) -> tuple[int, ...]:
    if isinstance(text, (tuple, list)):
        return tuple(int(x) for x in text)
    cleaned = str(text).strip().strip("()[]{}").replace(" ", "")
    try:
        return tuple(int(p) for p in cleaned.split(",") if p != "")
    except ValueError:
        raise ValueError(f"chip coordinate {text!r} is not of the form '0,0' or '3,3,1'") from None


def _torus_slices(chip, shape_text, src, dst):
    from scalebook_utils.core import topology

    s = topology.make_slice(chip, shape_text)
    a, b = _parse_coord(src), _parse_coord(dst)
    pad = lambda c: c + (0,) * (s.ndim - len(c)) if len(c) < s.ndim else c  # noqa: E731 - "0,0" on a 3-D chip
    a, b = s.check_coord(pad(a), "src"), s.check_coord(pad(b), "dst")
    line = topology.Slice(s.chip, s.shape, False)
    ring = topology.Slice(s.chip, s.shape, True)
    return s, line, ring, a, b


def torus_readout(chip: str | ChipSpec, shape_text: str, src="0,0", dst="3,3") -> str:
    """``torus: tpu-v5e 4x4, (0, 0) → (3, 3): 6 hops without wraparound, 2 with | this slice (wraparound no/no): …``.

    Hop counts on the same shape with no wraparound and with wraparound on every axis, then the slice
    as the book's rule builds it (e.g. a 4×4 v5e has none; a 16×16 v5e pod wraps both axes). Farthest
    pair: n − 1 per axis on a line, ⌊n/2⌋ on a ring. Bad input gives a readable line. Book ch. 2.
    """
    from scalebook_utils.core import topology

    head = f"{TORUS_PREFIX}{getattr(chip, 'name', chip)} {str(shape_text).strip()}"
    try:
        s, line, ring, a, b = _torus_slices(chip, shape_text, src, dst)
    except (ValueError, KeyError, TypeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return f"{head} → cannot evaluate: {msg}"
    h_line, h_ring, h = (topology.hop_distance(x, a, b) for x in (line, ring, s))
    return (
        f"{TORUS_PREFIX}{s.chip} {format_shape(s.shape)}, {a} → {b}: {h_line} hops without wraparound, "
        f"{h_ring} with | this slice (wraparound {_yes_no(s.wraparound)}): {h} hops | farthest pair: "
        f"{topology.max_hops(line)} without, {topology.max_hops(ring)} with"
    )


def render_torus(chip: str | ChipSpec, shape_text: str, src="0,0", dst="3,3") -> Figure:
    """Side by side: the route on the slice without wraparound and with wraparound on every axis."""
    try:
        s, line, ring, a, b = _torus_slices(chip, shape_text, src, dst)
    except (ValueError, KeyError, TypeError) as exc:
        return message_figure(f"cannot draw: {exc}")
    rows, cols = s.shape[0], (s.shape[1] if s.ndim > 1 else 1)
    w = min(14.0, 2 * max(5.0, 1.6 + 0.5 * cols))
    fig = Figure(figsize=(w, min(8.5, 2.4 + 0.5 * rows)), layout="constrained")
    for ax, sl, label in zip(fig.subplots(1, 2), (line, ring), ("without wraparound", "with wraparound")):
        hops, far = topology.hop_distance(sl, a, b), topology.max_hops(sl)
        # a short title per panel: the long default ones run into each other side by side
        torus_figure(
            sl.shape, sl.wraparound, a, b, ax=ax, title=f"{label}: {a} → {b} = {hops} hops\n(farthest pair: {far} hops)"
        )
    actual = (
        "this slice has it"
        if all(s.wraparound)
        else "none on this slice"
        if not any(s.wraparound)
        else f"this slice: {_yes_no(s.wraparound)} per axis"
    )
    fig.suptitle(
        f"{s.chip} {format_shape(s.shape)} — wraparound by the book's rule: {actual}  (dashed stubs: wraparound links)",
        fontsize=10,
    )
    return fig


def torus_explorer(chip: str = "tpu-v5e", shape: str = "4x4", src: str = "0,0", dst: str = "3,3") -> widgets.VBox:
    """A TPU dropdown, a shape box and src/dst boxes ("0,0"); prints `torus_readout`, draws both routes."""
    chip_dd = widgets.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    shape_box = widgets.Text(value=shape, description="shape", continuous_update=False)
    src_box = widgets.Text(value=src, description="src", continuous_update=False, layout=widgets.Layout(width="180px"))
    dst_box = widgets.Text(value=dst, description="dst", continuous_update=False, layout=widgets.Layout(width="180px"))
    box = widgets.VBox()

    def view(chip, shape, src, dst):
        emit(box, torus_readout(chip, shape, src, dst), lambda: render_torus(chip, shape, src, dst), key=(chip, shape))

    controls = {"chip": chip_dd, "shape": shape_box, "src": src_box, "dst": dst_box}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([chip_dd, shape_box]), widgets.HBox([src_box, dst_box]), out]
    values = lambda: (chip_dd.value, shape_box.value, src_box.value, dst_box.value)  # noqa: E731
    return attach(box, controls, out, lambda: torus_readout(*values()), lambda: render_torus(*values()))
