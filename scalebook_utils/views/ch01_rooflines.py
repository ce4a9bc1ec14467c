"""Widgets for chapter 1 (rooflines): the roofline explorer, the intensity placer and the two-chip roofline.

Each widget is a testable triple over a pure function in `roofline` (DESIGN §3; the plumbing is `views._kit`'s):

- a pure *readout* that returns one deterministic line of text (tests call it directly; the browser test
  waits for its prefix, e.g. ``roofline explorer: B=``): `explorer_readout`, `placer_readout`,
  `two_chip_readout`;
- a pure *render* that returns a matplotlib Figure for the same inputs (drawn with `ch01_figures` and `ch01_roofline_plots`):
  `render_explorer`, `render_placer`, `render_two_chip`;
- a *builder* that wires ipywidgets controls to both and returns the container, with ``.controls``,
  ``.output``, ``.readout()``, ``.last_readout`` and ``.snapshot()`` (`_kit.attach`): `roofline_explorer`,
  `intensity_placer`, `two_chip_explorer`.

Book ch. 1, "Rooflines", "Matrix multiplication" and "Network communication rooflines". Bad input gives a
readable line and a message figure, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import ipywidgets as widgets
from matplotlib.figure import Figure

from scalebook_utils.core import roofline
from scalebook_utils.core.hardware import CHIPS, ChipSpec, get_chip
from scalebook_utils.core.units import format_flops, format_si, format_time
from scalebook_utils.views._kit import attach, emit, format_number, message_figure
from scalebook_utils.views.ch01_figures import achievable_flops_figure, time_bars, two_chip_figure
from scalebook_utils.views.ch01_roofline_plots import roofline_figure

__all__ = [
    "EXPLORER_PREFIX",
    "EXPLORER_MODES",
    "PLACER_PRESETS",
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


def chips_for_mode(mode: str) -> list[str]:
    """Names of the chips in `hardware.CHIPS` that have a matmul peak for `mode`'s compute dtype."""
    return [name for name, spec in CHIPS.items() if roofline.has_matmul_peak(spec, mode)]


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
        compute = roofline.compute_dtype(mode)
        if compute not in spec.peak_flops_per_s:
            return (
                f"{head} → {spec.name} has no {compute} matmul peak for mode {mode} "
                f"(its dtypes: {', '.join(spec.supported_dtypes)}); pick another chip or mode"
            )
        r = roofline.matmul_roofline(B, D, F, spec, mode)
        b_cross = roofline.crossover_batch(D, F, spec, mode)
    except (ValueError, KeyError) as exc:
        return f"{head} → cannot evaluate: {exc}"
    cross = (
        f"crossover B≈{b_cross:.0f}" if math.isfinite(b_cross) else "no crossover (never compute-bound at this D, F)"
    )
    return f"{head} → {r.bound} | T_math={format_time(r.t_math_s)} T_comms={format_time(r.t_comms_s)} | {cross}"


def render_explorer(chip: str | ChipSpec, mode: str, D: int, F: int, B: int, *, B_max: int = 4096) -> Figure:
    """Achievable FLOPs/s against B (crossover and current B marked) beside a T_math/T_comms bar chart."""
    try:
        spec = get_chip(chip)
        compute = roofline.compute_dtype(mode)
        if compute not in spec.peak_flops_per_s:
            return message_figure(f"{spec.name} has no {compute} matmul peak — pick another chip or mode")
        r = roofline.matmul_roofline(B, D, F, spec, mode)
    except (ValueError, KeyError) as exc:
        return message_figure(f"cannot draw: {exc}")
    fig = Figure(figsize=(10.5, 4.3), layout="constrained")
    ax_main, ax_bars = fig.subplots(1, 2, width_ratios=[3.3, 1])
    achievable_flops_figure(D, F, spec, mode, B_max=max(B_max, int(B)), B=B, ax=ax_main)
    time_bars(
        r.t_math_s,
        r.t_comms_s,
        ax=ax_bars,
        title=f"B = {_num(B)}: {r.bound}\n" + r"$T_\mathrm{math}$ vs $T_\mathrm{comms}$",
    )
    return fig


def roofline_explorer(
    chip: str = "tpu-v5e", mode: str = "bf16", D: int = 8192, F: int = 8192, B: int = 128, *, B_max: int = 4096
) -> widgets.VBox:
    """Dropdowns for chip and dtype mode, boxes for D and F, a slider "B"; prints `explorer_readout`."""
    mode_dd = widgets.Dropdown(options=list(EXPLORER_MODES), value=mode, description="mode")
    chip_names = chips_for_mode(mode)
    try:
        chip_name = get_chip(chip).name
    except KeyError:
        chip_name = str(chip)  # unknown name: kept, and the readout lists the known chips
    if chip_name not in chip_names:
        chip_names = [chip_name] + chip_names  # keep the caller's choice; the readout explains it
    chip_dd = widgets.Dropdown(options=chip_names, value=chip_name, description="chip")
    d_box = widgets.IntText(value=D, description="D")
    f_box = widgets.IntText(value=F, description="F")
    b_slider = widgets.IntSlider(
        value=B,
        min=1,
        max=max(B_max, B),
        step=1,
        description="B",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )

    def on_mode(change):  # registered before interactive_output, so it runs first
        names = chips_for_mode(change["new"])
        current = chip_dd.value
        chip_dd.options = names
        chip_dd.value = current if current in names else names[0]

    mode_dd.observe(on_mode, names="value")
    box = widgets.VBox()

    def view(chip, mode, D, F, B):
        emit(
            box,
            explorer_readout(chip, mode, D, F, B),
            lambda: render_explorer(chip, mode, D, F, B, B_max=b_slider.max),
            key=(chip, mode, D, F, b_slider.max),
        )

    controls = {"chip": chip_dd, "mode": mode_dd, "D": d_box, "F": f_box, "B": b_slider}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([chip_dd, mode_dd]), widgets.HBox([d_box, f_box]), b_slider, out]
    values = lambda: (chip_dd.value, mode_dd.value, d_box.value, f_box.value, b_slider.value)  # noqa: E731
    return attach(
        box, controls, out, lambda: explorer_readout(*values()), lambda: render_explorer(*values(), B_max=b_slider.max)
    )


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
    return (
        f"{head} → {bound} at {format_flops(got)} ({100 * got / peak:.3g}% of peak) on {spec.name} {dtype} "
        f"(critical intensity {alpha:.3g})"
    )


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
    return roofline_figure(
        peak,
        {f"{spec.name} HBM": bw},
        {label: intensity},
        intensity_range=(0.01, 1e4),
        title=f"{spec.name} ({dtype} peak {format_flops(peak)}): where does '{label}' land?",
    )


def intensity_placer(
    chip: str = "tpu-v5e", intensity: float = 0.5, *, extra_chips: Mapping[str, ChipSpec] | None = None
) -> widgets.VBox:
    """A chip preset, an algorithm preset and an intensity slider (log); prints `placer_readout`.

    `extra_chips` adds named specs to the chip list, e.g. ``{"this CPU": calibration.as_chip()}``.
    """
    specs: dict[str, ChipSpec] = dict(CHIPS)
    specs.update(extra_chips or {})
    chip_dd = widgets.Dropdown(
        options=list(specs), value=get_chip(chip).name if chip not in specs else chip, description="chip"
    )
    preset_dd = widgets.Dropdown(
        options=[_CUSTOM] + list(PLACER_PRESETS),
        value=_CUSTOM,
        description="preset",
        layout=widgets.Layout(width="45%"),
    )
    slider = widgets.FloatLogSlider(
        value=intensity,
        base=10,
        min=-2,
        max=4,
        step=0.01,
        description="intensity",
        readout_format=".3g",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )

    def on_preset(change):
        if change["new"] in PLACER_PRESETS:
            slider.value = PLACER_PRESETS[change["new"]]

    preset_dd.observe(on_preset, names="value")
    box = widgets.VBox()

    def label_for(x: float) -> str:
        for name, v in PLACER_PRESETS.items():
            if math.isclose(x, v, rel_tol=1e-6):
                return name
        return "your algorithm"

    def view(chip, intensity):
        spec = specs[chip]
        emit(
            box,
            placer_readout(spec, intensity),
            lambda: render_placer(spec, intensity, label_for(intensity)),
            key=(chip,),
        )

    controls = {"chip": chip_dd, "intensity": slider}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([chip_dd, preset_dd]), slider, out]
    return attach(
        box,
        {"chip": chip_dd, "preset": preset_dd, "intensity": slider},
        out,
        lambda: placer_readout(specs[chip_dd.value], slider.value),
        lambda: render_placer(specs[chip_dd.value], slider.value, label_for(slider.value)),
    )


# --- (e) the two-chip network roofline ----------------------------------------------------------------


def two_chip_readout(
    D: float, link_bytes_per_s: float = 4.5e10, *, B: float = 1024, F: float = 8192, flops_per_s: float = 1.97e14
) -> str:
    """``two-chip: D=8192 → communication-bound (threshold D≈8756) | T_math=… T_comms=…``.

    The threshold 2·C/W does not depend on B or F (book ch. 1, "Network communication rooflines").
    """
    head = f"two-chip: D={_num(D)}"
    try:
        r = roofline.two_chip_roofline(B, D, F, flops_per_s, link_bytes_per_s)
    except ValueError as exc:
        return f"{head} → cannot evaluate: {exc}"
    return (
        f"{head} → {r.bound} (threshold D≈{r.d_threshold:.0f}) | "
        f"T_math={format_time(r.t_math_s)} T_comms={format_time(r.t_comms_s)}"
    )


def render_two_chip(
    D: float, link_bytes_per_s: float = 4.5e10, *, B: float = 1024, F: float = 8192, flops_per_s: float = 1.97e14
) -> Figure:
    """T_math and T_comms against D with the threshold and the current D marked."""
    try:
        return two_chip_figure(B, F, flops_per_s, link_bytes_per_s, D=D)
    except ValueError as exc:
        return message_figure(f"cannot draw: {exc}")


def two_chip_explorer(
    D: int = 8192, link_bytes_per_s: float = 4.5e10, *, B: int = 1024, F: int = 8192, flops_per_s: float = 1.97e14
) -> widgets.VBox:
    """Sliders for D and the link bandwidth W (B/s, one way); prints `two_chip_readout`."""
    d_slider = widgets.IntSlider(
        value=D,
        min=256,
        max=65536,
        step=256,
        description="D",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    w_slider = widgets.FloatLogSlider(
        value=link_bytes_per_s,
        base=10,
        min=9,
        max=12,
        step=0.05,
        description="W (B/s)",
        readout_format=".3g",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    box = widgets.VBox()

    def view(D, W_link):
        emit(
            box,
            two_chip_readout(D, W_link, B=B, F=F, flops_per_s=flops_per_s),
            lambda: render_two_chip(D, W_link, B=B, F=F, flops_per_s=flops_per_s),
            key=(B, F, flops_per_s),
        )

    controls = {"D": d_slider, "W_link": w_slider}
    out = widgets.interactive_output(view, controls)
    info = widgets.HTML(
        f"B = {_num(B)}, F = {_num(F)}, C = {format_si(flops_per_s, 'FLOP/s')} per chip "
        "(the threshold does not depend on B or F)"
    )
    box.children = [info, d_slider, w_slider, out]
    return attach(
        box,
        {"D": d_slider, "W": w_slider},
        out,
        lambda: two_chip_readout(d_slider.value, w_slider.value, B=B, F=F, flops_per_s=flops_per_s),
        lambda: render_two_chip(d_slider.value, w_slider.value, B=B, F=F, flops_per_s=flops_per_s),
    )
