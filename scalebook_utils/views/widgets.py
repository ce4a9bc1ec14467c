"""Interactive widgets for chapter 1 (rooflines), each a thin view over a pure function.

Every widget has three layers (DESIGN §3):

- a pure *readout* function that returns one deterministic line of text (tests call it directly; a
  browser test waits for its prefix, e.g. ``roofline explorer: B=``);
- a pure *render* function that returns a matplotlib Figure for the same inputs;
- a *builder* that wires ipywidgets controls to both with ``widgets.interactive_output`` and returns
  the container widget. The container carries ``.controls`` (name → control widget), ``.output``
  (the Output widget), ``.readout()`` (the readout for the current control values),
  ``.last_readout`` (the line the view printed most recently) and ``.snapshot()`` (the figure the
  view drew most recently as an ``IPython.display.Image`` — right after building, the default state).

A view draws through its container's `LiveFigure` (``box.live_figure``, made by `emit`): one figure per widget at
`SCREEN_DPI`, laid out once per `key` (the arguments its layout depends on), and after that a slider step
rasterises only the parts of the new render that differ from the last one over a kept background. The render
functions stay pure (a new Figure per call) and ``box.render()`` gives the figure for the current values.

``show(widget)`` displays a widget once: one output holding both the live widget (what a running
kernel's front end draws) and the PNG of its default state (what GitHub, nbviewer and a notebook opened
without a kernel draw). ``static_png(fig)`` turns a figure into an ``IPython.display.Image``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import ipywidgets as W
from IPython.display import clear_output
from matplotlib.figure import Figure

from scalebook_utils.views import plots
from scalebook_utils.core import roofline
from scalebook_utils.core import topology
from scalebook_utils.views.live_figure import SCREEN_DPI, LiveFigure
from scalebook_utils.core.collectives import KINDS
from scalebook_utils.core.hardware import CHIPS, ChipSpec, get_chip
from scalebook_utils.core.units import format_flops, format_si, format_time
# re-exported (`widgets.show`, `widgets.INPUT_ERRORS`, … as before); they live in the kit every chapter's view shares
from scalebook_utils.views._kit import (INPUT_ERRORS, attach, emit, error_text, format_number, message_figure,  # noqa: F401
                                        plain_formatter, show, static_png)

__all__ = [
    "EXPLORER_PREFIX",
    "EXPLORER_MODES",
    "PLACER_PRESETS",
    "static_png",
    "show",
    "SCREEN_DPI",
    "LiveFigure",
    "chips_for_mode",
    "explorer_readout",
    "render_explorer",
    "roofline_explorer",
    "placer_readout",
    "render_placer",
    "intensity_placer",
    "two_chip_readout",
    "render_two_chip",
    "two_chip_explorer",
]

#: The browser test waits for this text; do not change it.
EXPLORER_PREFIX = "roofline explorer: B="
#: Matmul dtype modes offered by the explorer (fp32 is only for measured CPU rooflines).
EXPLORER_MODES: tuple[str, ...] = tuple(m for m in roofline.MATMUL_MODES if m != "fp32")


















_num = format_number


def _compute_dtype(mode: str) -> str:
    if mode not in roofline.MATMUL_MODES:
        raise ValueError(f"unknown matmul mode {mode!r}; known modes: {', '.join(roofline.MATMUL_MODES)}")
    return roofline.MATMUL_MODES[mode][2]


def chips_for_mode(mode: str) -> list[str]:
    """Names of the chips in `hardware.CHIPS` that have a matmul peak for `mode`'s compute dtype."""
    compute = _compute_dtype(mode)
    return [name for name, spec in CHIPS.items() if compute in spec.peak_flops_per_s]


# --- (a) the roofline explorer: a matmul on one chip, against the batch B ----------------------------


def explorer_readout(chip: str | ChipSpec, mode: str, D: int, F: int, B: int) -> str:
    """One line: the bound of X[B, D] · W[D, F] on `chip` in `mode`, T_math, T_comms, crossover B.

    ``roofline explorer: B=512 → compute-bound | T_math=… T_comms=… | crossover B≈255``.
    A chip without the mode's compute dtype, or an invalid size, gives a readable line, never an
    exception. Book ch. 1, "Matrix multiplication".
    """
    head = f"{EXPLORER_PREFIX}{_num(B)}"
    try:
        spec = get_chip(chip)
        compute = _compute_dtype(mode)
        if compute not in spec.peak_flops_per_s:
            return (f"{head} → {spec.name} has no {compute} matmul peak for mode {mode} "
                    f"(its dtypes: {', '.join(spec.supported_dtypes)}); pick another chip or mode")
        r = roofline.matmul_roofline(B, D, F, spec, mode)
        b_cross = roofline.crossover_batch(D, F, spec, mode)
    except (ValueError, KeyError) as exc:
        return f"{head} → cannot evaluate: {exc}"
    cross = (f"crossover B≈{b_cross:.0f}" if math.isfinite(b_cross)
             else "no crossover (never compute-bound at this D, F)")
    return f"{head} → {r.bound} | T_math={format_time(r.t_math_s)} T_comms={format_time(r.t_comms_s)} | {cross}"


def render_explorer(chip: str | ChipSpec, mode: str, D: int, F: int, B: int, *, B_max: int = 4096) -> Figure:
    """Achievable FLOPs/s against B (crossover and current B marked) beside a T_math/T_comms bar chart."""
    try:
        spec = get_chip(chip)
        compute = _compute_dtype(mode)
        if compute not in spec.peak_flops_per_s:
            return message_figure(f"{spec.name} has no {compute} matmul peak — pick another chip or mode")
        r = roofline.matmul_roofline(B, D, F, spec, mode)
    except (ValueError, KeyError) as exc:
        return message_figure(f"cannot draw: {exc}")
    fig = Figure(figsize=(10.5, 4.3), layout="constrained")
    ax_main, ax_bars = fig.subplots(1, 2, width_ratios=[3.3, 1])
    plots.achievable_flops_figure(D, F, spec, mode, B_max=max(B_max, int(B)), B=B, ax=ax_main)
    plots.time_bars(r.t_math_s, r.t_comms_s, ax=ax_bars,
                    title=f"B = {_num(B)}: {r.bound}\n" + r"$T_\mathrm{math}$ vs $T_\mathrm{comms}$")
    return fig


def roofline_explorer(chip: str = "tpu-v5e", mode: str = "bf16", D: int = 8192, F: int = 8192, B: int = 128,
                      *, B_max: int = 4096) -> W.VBox:
    """Dropdowns for chip and dtype mode, boxes for D and F, a slider "B"; prints `explorer_readout`."""
    mode_dd = W.Dropdown(options=list(EXPLORER_MODES), value=mode, description="mode")
    chip_names = chips_for_mode(mode)
    try:
        chip_name = get_chip(chip).name
    except KeyError:
        chip_name = str(chip)  # unknown name: kept, and the readout lists the known chips
    if chip_name not in chip_names:
        chip_names = [chip_name] + chip_names  # keep the caller's choice; the readout explains it
    chip_dd = W.Dropdown(options=chip_names, value=chip_name, description="chip")
    d_box = W.IntText(value=D, description="D")
    f_box = W.IntText(value=F, description="F")
    b_slider = W.IntSlider(value=B, min=1, max=max(B_max, B), step=1, description="B", continuous_update=False,
                           layout=W.Layout(width="60%"))

    def on_mode(change):  # registered before interactive_output, so it runs first
        names = chips_for_mode(change["new"])
        current = chip_dd.value
        chip_dd.options = names
        chip_dd.value = current if current in names else names[0]

    mode_dd.observe(on_mode, names="value")
    box = W.VBox()

    def view(chip, mode, D, F, B):
        emit(box, explorer_readout(chip, mode, D, F, B),
              lambda: render_explorer(chip, mode, D, F, B, B_max=b_slider.max),
              key=(chip, mode, D, F, b_slider.max))

    controls = {"chip": chip_dd, "mode": mode_dd, "D": d_box, "F": f_box, "B": b_slider}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, mode_dd]), W.HBox([d_box, f_box]), b_slider, out]
    values = lambda: (chip_dd.value, mode_dd.value, d_box.value, f_box.value, b_slider.value)  # noqa: E731
    return attach(box, controls, out, lambda: explorer_readout(*values()),
                   lambda: render_explorer(*values(), B_max=b_slider.max))


# --- (b) placing algorithms on the roofline by their intensity ----------------------------------------

#: Preset algorithms (label → FLOPs/byte), all bf16 (book ch. 1, "Arithmetic intensity" and "Matrix multiplication").
PLACER_PRESETS: dict[str, float] = {
    "elementwise add x+y (bf16)": 1 / 6,  # 1 FLOP per element; 2 + 2 bytes read, 2 written
    "dot product, N=1e6 (bf16)": roofline.dot_product_intensity(1e6),  # → 1/2
    "matmul B=64, D=F=8192 (bf16)": float(roofline.matmul_intensity(64, 8192, 8192)),
    "matmul B=256, D=F=8192 (bf16)": float(roofline.matmul_intensity(256, 8192, 8192)),
    "matmul B=1024, D=F=8192 (bf16)": float(roofline.matmul_intensity(1024, 8192, 8192)),
}
_CUSTOM = "custom (use the slider)"


def _placer_dtype(spec: ChipSpec) -> str:
    return "bf16" if "bf16" in spec.peak_flops_per_s else spec.supported_dtypes[0]


def placer_readout(chip: str | ChipSpec, intensity: float) -> str:
    """``placer: intensity=0.5 FLOPs/byte → memory-bound at 410 GFLOP/s (0.21% of peak) on tpu-v5e …``.

    Uses the chip's bf16 peak (or its only dtype, e.g. fp16 on a V100, fp32 for a calibrated CPU) and
    its HBM bandwidth: attainable = min(peak, intensity × bandwidth).
    """
    head = f"placer: intensity={intensity:.3g} FLOPs/byte"
    try:
        spec = get_chip(chip)
        dtype = _placer_dtype(spec)
        peak, bw = spec.peak_flops(dtype), spec.hbm_bandwidth_bytes_per_s
        got = roofline.attainable_flops_per_s(intensity, peak, bw)
    except (ValueError, KeyError) as exc:
        return f"{head} → cannot evaluate: {exc}"
    alpha = peak / bw
    bound = "compute-bound" if intensity >= alpha else "memory-bound"
    return (f"{head} → {bound} at {format_flops(got)} ({100 * got / peak:.3g}% of peak) on {spec.name} {dtype} "
            f"(critical intensity {alpha:.3g})")


def render_placer(chip: str | ChipSpec, intensity: float, label: str = "algorithm") -> Figure:
    """The chip's HBM roofline (log-log) with one algorithm placed at `intensity`."""
    try:
        spec = get_chip(chip)
        dtype = _placer_dtype(spec)
        peak, bw = spec.peak_flops(dtype), spec.hbm_bandwidth_bytes_per_s
        if not intensity > 0:
            raise ValueError(f"intensity must be positive, got {intensity!r}")
    except (ValueError, KeyError) as exc:
        return message_figure(f"cannot draw: {exc}")
    return plots.roofline_figure(peak, {f"{spec.name} HBM": bw}, {label: intensity}, intensity_range=(0.01, 1e4),
                                 title=f"{spec.name} ({dtype} peak {format_flops(peak)}): where does '{label}' land?")


def intensity_placer(chip: str = "tpu-v5e", intensity: float = 0.5, *,
                     extra_chips: Mapping[str, ChipSpec] | None = None) -> W.VBox:
    """A chip preset, an algorithm preset and an intensity slider (log); prints `placer_readout`.

    `extra_chips` adds named specs to the chip list, e.g. ``{"this CPU": calibration.as_chip()}``.
    """
    specs: dict[str, ChipSpec] = dict(CHIPS)
    specs.update(extra_chips or {})
    chip_dd = W.Dropdown(options=list(specs), value=get_chip(chip).name if chip not in specs else chip,
                         description="chip")
    preset_dd = W.Dropdown(options=[_CUSTOM] + list(PLACER_PRESETS), value=_CUSTOM, description="preset",
                           layout=W.Layout(width="45%"))
    slider = W.FloatLogSlider(value=intensity, base=10, min=-2, max=4, step=0.01, description="intensity",
                              readout_format=".3g", continuous_update=False, layout=W.Layout(width="60%"))

    def on_preset(change):
        if change["new"] in PLACER_PRESETS:
            slider.value = PLACER_PRESETS[change["new"]]

    preset_dd.observe(on_preset, names="value")
    box = W.VBox()

    def label_for(x: float) -> str:
        for name, v in PLACER_PRESETS.items():
            if math.isclose(x, v, rel_tol=1e-6):
                return name
        return "your algorithm"

    def view(chip, intensity):
        spec = specs[chip]
        emit(box, placer_readout(spec, intensity), lambda: render_placer(spec, intensity, label_for(intensity)),
              key=(chip,))

    controls = {"chip": chip_dd, "intensity": slider}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, preset_dd]), slider, out]
    return attach(box, {"chip": chip_dd, "preset": preset_dd, "intensity": slider}, out,
                   lambda: placer_readout(specs[chip_dd.value], slider.value),
                   lambda: render_placer(specs[chip_dd.value], slider.value, label_for(slider.value)))


# --- (e) the two-chip network roofline ----------------------------------------------------------------


def two_chip_readout(D: float, link_bytes_per_s: float = 4.5e10, *, B: float = 1024, F: float = 8192,
                     flops_per_s: float = 1.97e14) -> str:
    """``two-chip: D=8192 → communication-bound (threshold D≈8756) | T_math=… T_comms=…``.

    The threshold 2·C/W does not depend on B or F (book ch. 1, "Network communication rooflines").
    """
    head = f"two-chip: D={_num(D)}"
    try:
        r = roofline.two_chip_roofline(B, D, F, flops_per_s, link_bytes_per_s)
    except ValueError as exc:
        return f"{head} → cannot evaluate: {exc}"
    return (f"{head} → {r.bound} (threshold D≈{r.d_threshold:.0f}) | "
            f"T_math={format_time(r.t_math_s)} T_comms={format_time(r.t_comms_s)}")


def render_two_chip(D: float, link_bytes_per_s: float = 4.5e10, *, B: float = 1024, F: float = 8192,
                    flops_per_s: float = 1.97e14) -> Figure:
    """T_math and T_comms against D with the threshold and the current D marked."""
    try:
        return plots.two_chip_figure(B, F, flops_per_s, link_bytes_per_s, D=D)
    except ValueError as exc:
        return message_figure(f"cannot draw: {exc}")


def two_chip_explorer(D: int = 8192, link_bytes_per_s: float = 4.5e10, *, B: int = 1024, F: int = 8192,
                      flops_per_s: float = 1.97e14) -> W.VBox:
    """Sliders for D and the link bandwidth W (B/s, one way); prints `two_chip_readout`."""
    d_slider = W.IntSlider(value=D, min=256, max=65536, step=256, description="D", continuous_update=False,
                           layout=W.Layout(width="60%"))
    w_slider = W.FloatLogSlider(value=link_bytes_per_s, base=10, min=9, max=12, step=0.05, description="W (B/s)",
                                readout_format=".3g", continuous_update=False, layout=W.Layout(width="60%"))
    box = W.VBox()

    def view(D, W_link):
        emit(box, two_chip_readout(D, W_link, B=B, F=F, flops_per_s=flops_per_s),
              lambda: render_two_chip(D, W_link, B=B, F=F, flops_per_s=flops_per_s), key=(B, F, flops_per_s))

    controls = {"D": d_slider, "W_link": w_slider}
    out = W.interactive_output(view, controls)
    info = W.HTML(f"B = {_num(B)}, F = {_num(F)}, C = {format_si(flops_per_s, 'FLOP/s')} per chip "
                  "(the threshold does not depend on B or F)")
    box.children = [info, d_slider, w_slider, out]
    return attach(box, {"D": d_slider, "W": w_slider}, out,
                   lambda: two_chip_readout(d_slider.value, w_slider.value, B=B, F=F, flops_per_s=flops_per_s),
                   lambda: render_two_chip(d_slider.value, w_slider.value, B=B, F=F, flops_per_s=flops_per_s))


# --- chapter 2: the slice / pod calculator and the torus explorer --------------------------------------

__all__ += ["SLICE_PREFIX", "TORUS_PREFIX", "slice_readout", "render_slice", "slice_calculator",
            "torus_readout", "render_torus", "torus_explorer"]

#: The browser test waits for these prefixes; do not change them.
SLICE_PREFIX = "slice calculator: "
TORUS_PREFIX = "torus: "


def _tpu_names() -> list[str]:
    from scalebook_utils.core.hardware import chip_names

    return chip_names("tpu")


def _fmt_shape(shape) -> str:
    return "x".join(str(n) for n in shape)


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
    return (f"{SLICE_PREFIX}{s.chip} {_fmt_shape(s.shape)} → {s.n_chips:,} chips, {s.n_hosts:,} hosts, "
            f"{s.n_tensorcores:,} TensorCores, {format_flops(s.peak_flops('bf16'))} bf16, "
            f"{format_si(s.hbm_bytes, 'B')} HBM | wraparound per axis: {_yes_no(s.wraparound)} | "
            f"farthest pair: {topology.max_hops(s)} hops")


def render_slice(chip: str | ChipSpec, shape_text: str) -> Figure:
    """The slice as a grid of chips (one plane for 3-D slices) with the route between its farthest pair."""
    from scalebook_utils.core import topology

    try:
        s = topology.make_slice(chip, shape_text)
    except (ValueError, KeyError, TypeError) as exc:
        return message_figure(f"cannot draw: {exc}")
    far = tuple(n // 2 if w else n - 1 for n, w in zip(s.shape, s.wraparound))
    fig = plots.torus_figure(s.shape, s.wraparound, (0,) * s.ndim, far)
    ax = fig.axes[0]
    ax.set_title(f"{s.chip} {_fmt_shape(s.shape)}: {s.n_chips:,} chips on {s.n_hosts:,} hosts, "
                 f"{s.n_tensorcores:,} TensorCores, {format_flops(s.peak_flops('bf16'))} bf16, "
                 f"{format_si(s.hbm_bytes, 'B')} HBM\nroute to the farthest chip: {topology.max_hops(s)} hops "
                 + ("(dashed stubs = wraparound links)" if any(s.wraparound) else "(no wraparound)")
                 + "".join("\n" + line for line in ax.get_title().split("\n")[2:]), fontsize=9)
    return fig


def slice_calculator(chip: str = "tpu-v5e", shape: str = "4x4") -> W.VBox:
    """A TPU dropdown and a shape box ("4x4", "16x20x28"); prints `slice_readout` and draws the slice."""
    names = _tpu_names()
    chip_dd = W.Dropdown(options=names, value=get_chip(chip).name, description="chip")
    shape_box = W.Text(value=shape, description="shape", continuous_update=False,
                       placeholder="e.g. 4x4 or 16x20x28")
    pod_btn = W.Button(description="full pod", tooltip="set the shape to this chip's pod")

    def on_pod(_):
        shape_box.value = _fmt_shape(get_chip(chip_dd.value).pod_shape)

    pod_btn.on_click(on_pod)
    box = W.VBox()

    def view(chip, shape):
        emit(box, slice_readout(chip, shape), lambda: render_slice(chip, shape), key=(chip, shape.count("x")))

    controls = {"chip": chip_dd, "shape": shape_box}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, shape_box, pod_btn]), out]
    return attach(box, controls, out, lambda: slice_readout(chip_dd.value, shape_box.value),
                   lambda: render_slice(chip_dd.value, shape_box.value))


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
    return (f"{TORUS_PREFIX}{s.chip} {_fmt_shape(s.shape)}, {a} → {b}: {h_line} hops without wraparound, "
            f"{h_ring} with | this slice (wraparound {_yes_no(s.wraparound)}): {h} hops | farthest pair: "
            f"{topology.max_hops(line)} without, {topology.max_hops(ring)} with")


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
        plots.torus_figure(sl.shape, sl.wraparound, a, b, ax=ax,
                           title=f"{label}: {a} → {b} = {hops} hops\n(farthest pair: {far} hops)")
    actual = "this slice has it" if all(s.wraparound) else "none on this slice" if not any(s.wraparound) \
        else f"this slice: {_yes_no(s.wraparound)} per axis"
    fig.suptitle(f"{s.chip} {_fmt_shape(s.shape)} — wraparound by the book's rule: {actual}"
                 "  (dashed stubs: wraparound links)", fontsize=10)
    return fig


def torus_explorer(chip: str = "tpu-v5e", shape: str = "4x4", src: str = "0,0", dst: str = "3,3") -> W.VBox:
    """A TPU dropdown, a shape box and src/dst boxes ("0,0"); prints `torus_readout`, draws both routes."""
    chip_dd = W.Dropdown(options=_tpu_names(), value=get_chip(chip).name, description="chip")
    shape_box = W.Text(value=shape, description="shape", continuous_update=False)
    src_box = W.Text(value=src, description="src", continuous_update=False, layout=W.Layout(width="180px"))
    dst_box = W.Text(value=dst, description="dst", continuous_update=False, layout=W.Layout(width="180px"))
    box = W.VBox()

    def view(chip, shape, src, dst):
        emit(box, torus_readout(chip, shape, src, dst), lambda: render_torus(chip, shape, src, dst), key=(chip, shape))

    controls = {"chip": chip_dd, "shape": shape_box, "src": src_box, "dst": dst_box}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([chip_dd, shape_box]), W.HBox([src_box, dst_box]), out]
    values = lambda: (chip_dd.value, shape_box.value, src_box.value, dst_box.value)  # noqa: E731
    return attach(box, controls, out, lambda: torus_readout(*values()), lambda: render_torus(*values()))


# --- chapter 3: the sharding explorer and the collective-cost explorer ----------------------------------

__all__ += ["SHARDING_PREFIX", "COLLECTIVES_PREFIX", "SHARDING_MESHES", "SHARDING_PRESETS", "matmul_text",
            "compile_matmul", "sharding_readout", "sharding_details", "render_sharding", "sharding_explorer",
            "COLLECTIVE_KINDS", "collective_readout", "render_collective", "collective_cost_explorer"]

#: The browser test waits for these prefixes; do not change them.
SHARDING_PREFIX = "sharding explorer: "
COLLECTIVES_PREFIX = "collectives: "

#: Mesh shapes the explorer offers (label → the book's mesh notation); 8 devices each.
SHARDING_MESHES: dict[str, str] = {
    "1×8": "{X: 1, Y: 8}", "2×4": "{X: 2, Y: 4}", "4×2": "{X: 4, Y: 2}", "8×1": "{X: 8, Y: 1}",
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
    text = f"{a.spec()} ·_{''.join(shared) if all(len(d) == 1 for d in shared) else '{' + ','.join(shared) + '}'} {b.spec()}"
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
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        spec = f"{a_spec} · {b_spec}" + (f" → {target}" if target else "")
        return f"{head}{spec} → invalid: {msg}", [], None
    from scalebook_utils.core.units import format_time
    pred = " + ".join(f"{s.kind}({''.join(s.axes)}) {format_time(s.seconds)}" for s in p.steps)
    line = f"{head}{m.spec()} | case {int(p.case)} | predicted {pred or 'no communication'}"
    wraps = sh.mesh_wraparound(mesh_t, chip)
    details = [f"plan: {p.summary()}",
               f"  wraparound on {p.chip} (ch. 2's rule): " + ", ".join(f"{a} {'ring' if w else 'line'}"
                                                                   for a, w in wraps.items())]
    for s in p.steps:
        details.append(f"  {s.describe()}: {s.n_bytes / 1e6:.3g} MB to the cost model, {format_time(s.seconds)} on {p.chip}")
    details += [f"  note: {n}" for n in p.notes]
    if p.alternatives:
        details.append("  other strategies: " + " | ".join(
            f"{a.strategy}: {'; '.join(s.describe() for s in a.steps) or 'no communication'}"
            for a in p.alternatives[:3]))
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
        details.append(f"XLA on 8 CPU devices (every dim 128, float32): {kinds}, {c['dynamic_slices']} dynamic-slice(s); {c['why']}")
    else:
        line += " | XLA: not compiled"
    return line, details, p


def sharding_readout(mesh="2×4", a_spec="A[I, J_X]", b_spec="B[J, K_Y]", target: str | None = "C[I, K_Y]",
                     chip: str = "tpu-v5e", compile: bool = False, *, dim_size: int = 8192) -> str:
    """``sharding explorer: {X: 2, Y: 4} A[I, J_X] ·_J B[J, K_Y] → C[I, K_Y] | case 2 | predicted all_gather(X) … | XLA: …``.

    The book's case of the matmul, the collectives `sharding.plan` predicts with their time on `chip`
    (every dim `dim_size`, bf16), and with compile=True what XLA compiled on 8 simulated CPU devices
    (`compile_matmul`): collective kinds ×count, whether C equals the unsharded product, and whether
    prediction and HLO agree. `mesh`: a label of SHARDING_MESHES ("2×4") or the book's notation.
    An invalid spec gives a readable '→ invalid: …' line, never an exception.
    """
    return _sharding_eval(mesh, a_spec, b_spec, target, chip, compile, dim_size)[0]


def sharding_details(mesh="2×4", a_spec="A[I, J_X]", b_spec="B[J, K_Y]", target: str | None = "C[I, K_Y]",
                     chip: str = "tpu-v5e", compile: bool = False, *, dim_size: int = 8192) -> list[str]:
    """The explorer's lines under the readout: plan summary, each step's bytes and time, notes, XLA's explanation."""
    return _sharding_eval(mesh, a_spec, b_spec, target, chip, compile, dim_size)[1]


def render_sharding(mesh="2×4", a_spec="A[I, J_X]", b_spec="B[J, K_Y]", target: str | None = "C[I, K_Y]",
                    chip: str = "tpu-v5e", caption: str | None = None) -> Figure:
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
        plots.sharding_blocks_figure(arr, mesh_t, {d: 8192 for d in arr.dims}, ax=ax)
        ax.set_title(f"{what} " + ax.get_title(), fontsize=9)
    steps = "; ".join(s.describe() for s in p.steps) or "no communication"
    fig.suptitle(f"case {int(p.case)}: {steps}", fontsize=10)
    if caption:
        parts = caption.removeprefix(SHARDING_PREFIX).split(" | ")
        fig.supxlabel("\n".join([" | ".join(parts[:3]), " | ".join(parts[3:])]), fontsize=9)
    return fig


def sharding_explorer(mesh: str = "2×4", preset: str = _DEFAULT_PRESET, chip: str = "tpu-v5e",
                      compile: bool = True) -> W.VBox:
    """Mesh, preset, A / B / target boxes, chip, 'compile on CPU devices'; prints `sharding_readout` + details.

    Choosing a preset fills the three boxes; editing a box keeps the preset dropdown as it is.
    """
    a0, b0, t0 = SHARDING_PRESETS[preset]
    mesh_dd = W.Dropdown(options=list(SHARDING_MESHES), value=mesh, description="mesh")
    preset_dd = W.Dropdown(options=list(SHARDING_PRESETS), value=preset, description="preset",
                           layout=W.Layout(width="55%"))
    a_box = W.Text(value=a0, description="A", continuous_update=False)
    b_box = W.Text(value=b0, description="B", continuous_update=False)
    t_box = W.Text(value=t0 or "", description="target", continuous_update=False, placeholder="e.g. C[I, K_Y] (optional)")
    chip_dd = W.Dropdown(options=_tpu_names(), value=get_chip(chip).name, description="chip")
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
        emit(box, line, lambda: render_sharding(mesh, a, b, target or None, chip, caption=line), key=(mesh,),
              lines=details)

    controls = {"mesh": mesh_dd, "a": a_box, "b": b_box, "target": t_box, "chip": chip_dd, "compile": comp_cb}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([mesh_dd, preset_dd]), W.HBox([a_box, b_box, t_box]), W.HBox([chip_dd, comp_cb]), out]
    values = lambda: (mesh_dd.value, a_box.value, b_box.value, t_box.value or None, chip_dd.value)  # noqa: E731
    return attach(box, {**controls, "preset": preset_dd}, out,
                   lambda: sharding_readout(*values(), compile=comp_cb.value), lambda: render_sharding(*values()))


#: Collective kinds offered by the collective-cost explorer (`collectives.KINDS`, as `collectives.collective`
#: spells them).
COLLECTIVE_KINDS = KINDS


def collective_readout(kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16,
                       wraparound: bool = True, n_bytes: float = 1e6) -> str:
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
        knee = plots.collective_knee_bytes(k, chip, (int(axis_size),), bool(wraparound))
    except (ValueError, KeyError, TypeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return f"{head} → cannot evaluate: {msg}"
    where = "one hop" if k == "ppermute" else \
        f"an axis of {int(axis_size)} ({'wraparound' if wraparound else 'no wraparound'})"
    warn = ""
    if k != "ppermute":  # say when the axis cannot exist, or its wraparound is not the chip's (book ch. 2)
        from scalebook_utils.core.topology import default_wraparound
        spec = get_chip(chip)
        dims = spec.ici_torus_dims
        if int(axis_size) > max(spec.pod_shape):
            warn = f" | note: no {spec.name} axis has {int(axis_size)} chips (pod {'×'.join(map(str, spec.pod_shape))})"
        elif bool(wraparound) != default_wraparound(spec, (int(axis_size),) + (1,) * (dims - 1))[0]:
            warn = (f" | note: a {spec.name} axis of {int(axis_size)} "
                    f"{'has no' if wraparound else 'has'} wraparound by ch. 2's rule")
    return (f"{COLLECTIVES_PREFIX}{k} of {format_si(float(n_bytes), 'B', digits=3)} over {where} on {c.chip} → "
            f"{format_time(c.seconds)}, {c.regime}-bound | latency term {format_time(c.latency_s)}, "
            f"bandwidth term {format_time(c.bandwidth_s)} | knee {format_si(knee, 'B', digits=3)}{warn}")


def render_collective(kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16,
                      wraparound: bool = True, n_bytes: float = 1e6) -> Figure:
    """Time vs bytes for this collective on `chip`, with and without wraparound, the current size starred."""
    from scalebook_utils.core import collectives

    try:
        k = collectives.normalize_kind(kind)
        fig = plots.collective_time_figure(k, chip, (int(axis_size),), bool(wraparound), n_bytes=float(n_bytes))
        if k != "ppermute":
            plots.collective_time_figure(k, chip, (int(axis_size),), not bool(wraparound), ax=fig.axes[0])
    except (ValueError, KeyError, TypeError) as exc:
        return message_figure(f"cannot draw: {exc}")
    return fig


def collective_cost_explorer(kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16,
                             wraparound: bool = True, n_bytes: float = 1e6) -> W.VBox:
    """Kind, chip, axis size, wraparound and a bytes slider (log); prints `collective_readout`."""
    kind_dd = W.Dropdown(options=list(COLLECTIVE_KINDS), value=kind, description="collective")
    chip_dd = W.Dropdown(options=_tpu_names(), value=get_chip(chip).name, description="chip")
    axis_dd = W.Dropdown(options=[2, 4, 8, 16, 32, 64], value=axis_size, description="axis size")
    wrap_cb = W.Checkbox(value=wraparound, description="wraparound")
    bytes_sl = W.FloatLogSlider(value=n_bytes, base=10, min=3, max=10, step=0.05, description="bytes",
                                readout_format=".3g", continuous_update=False, layout=W.Layout(width="60%"))
    box = W.VBox()

    def view(kind, chip, axis_size, wraparound, n_bytes):
        emit(box, collective_readout(kind, chip, axis_size, wraparound, n_bytes),
              lambda: render_collective(kind, chip, axis_size, wraparound, n_bytes),
              key=(kind, chip, axis_size, wraparound))

    controls = {"kind": kind_dd, "chip": chip_dd, "axis_size": axis_dd, "wraparound": wrap_cb, "n_bytes": bytes_sl}
    out = W.interactive_output(view, controls)
    box.children = [W.HBox([kind_dd, chip_dd]), W.HBox([axis_dd, wrap_cb]), bytes_sl, out]
    values = lambda: (kind_dd.value, chip_dd.value, axis_dd.value, wrap_cb.value, bytes_sl.value)  # noqa: E731
    return attach(box, controls, out, lambda: collective_readout(*values()), lambda: render_collective(*values()))
