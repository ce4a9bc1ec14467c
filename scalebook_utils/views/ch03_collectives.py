"""Views for chapter 3's collectives: a collective's time against bytes, and the collective-cost explorer.

Book ch. 3, "A Deeper Dive into TPU Communication Primitives": T = max(T_min · hops, V / W) in seconds for V
bytes, latency-bound (flat in V) below the knee and bandwidth-bound (linear in V) above it; the numbers are
`core.collectives`' (`collective`, `knee_bytes`, `axis_note`).

Figures (each returns a matplotlib Figure made without pyplot; the one-panel one accepts ``ax=``):
`collective_time_figure` (one collective on one axis, the knee marked) and `allgather_axes_figure` (one panel
per ICI link bandwidth, over the axes `ALLGATHER_AXES` lists, `collectives.axes_by_link_bandwidth`), with
`collective_knee_bytes`, the regime boundary.

The collective-cost explorer is a testable triple (DESIGN §3: `collective_readout`, a pure line with the prefix
`COLLECTIVES_PREFIX`; `render_collective`, a pure render; `collective_cost_explorer`, the builder with
``.controls``, ``.readout()``, ``.last_readout``, ``.snapshot()`` from `_kit.attach`). The builder looks its
readout and render up here, so a test that replaces one patches it on this module. `ch03_sharding` re-exports
every name, and the notebooks reach them through the `plots` and `widgets` façades.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from scalebook_utils.core import collectives
from scalebook_utils.core.collectives import KINDS, axes_by_link_bandwidth
from scalebook_utils.core.collectives import knee_bytes as collective_knee_bytes
from scalebook_utils.core.hardware import ChipSpec, get_chip
from scalebook_utils.core.units import format_si, format_time
from scalebook_utils.views._kit import (
    LINE_COLORS,
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


# --- figures: a collective's time against bytes -------------------------------------------------------------


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


def _panel(group) -> tuple[str, str]:
    """(title, chip) of one link bandwidth's panel: drawn on its chip with the longest pod side (v5p of v6e, v5p)."""
    gens = ", ".join(get_chip(c).generation for c in group.chips)
    chip = max(group.chips, key=lambda c: max(get_chip(c).pod_shape))
    return f"TPU {gens}: {group.link_bytes_per_s / 1e9:.0f} GB/s one-way links", chip


_PANELS = {_panel(g): list(g.axes) for g in axes_by_link_bandwidth()}
#: Axes that exist, with the wraparound ch. 2 gives them, grouped by one-way ICI link bandwidth (the only
#: chip number the bandwidth-bound part depends on): {panel title: [(axis size, wraps?, where such an axis
#: occurs), …]}, from `collectives.axes_by_link_bandwidth`.
ALLGATHER_AXES = {title: rows for (title, _chip), rows in _PANELS.items()}
_PANEL_CHIPS = {title: chip for title, chip in _PANELS}


def allgather_axes_figure(
    kind: str = "all_gather", axes=None, *, chips=None, bytes_range=(1e3, 1e9), figsize=(12.5, 4.4)
) -> Figure:
    """One panel per link bandwidth: `kind`'s time vs bytes on axes that exist, with their wraparound.

    `axes`: {panel title: [(axis size, wraps, label), …]}, default ALLGATHER_AXES (v5e/v6e pods are
    16×16, so no axis is longer than 16 there; a v5e/v6e axis under 16 has no wraparound; v4p/v5p
    wrap in whole 4×4×4 cubes; book ch. 2). Chips with equal link bandwidth share a panel because
    their curves coincide (v4p = v5e, v5p = v6e). `chips`: {panel title: chip} for panels of your own
    (default: the chip `collectives.axes_by_link_bandwidth` gives a default panel, else tpu-v5e).
    Book ch. 3, "A Deeper Dive…".
    """
    axes = ALLGATHER_AXES if axes is None else axes
    chips = _PANEL_CHIPS | dict(chips or {})
    fig = Figure(figsize=figsize, layout="constrained")
    for ax, (title, rows) in zip(np.atleast_1d(fig.subplots(1, len(axes))), axes.items()):
        spec = get_chip(chips.get(title, "tpu-v5e"))
        for x, wrap, where in rows:
            collective_time_figure(
                kind,
                spec,
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


# --- the collective-cost explorer ---------------------------------------------------------------------------

#: The browser test waits for this prefix; do not change it.
COLLECTIVES_PREFIX = "collectives: "

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
    note = "" if k == "ppermute" else collectives.axis_note(chip, axis_size, wraparound)  # real axis? (ch. 2)
    warn = f" | note: {note}" if note else ""
    return (
        f"{COLLECTIVES_PREFIX}{k} of {format_si(float(n_bytes), 'B', digits=3)} over {where} on {c.chip} → "
        f"{format_time(c.seconds)}, {c.regime}-bound | latency term {format_time(c.latency_s)}, "
        f"bandwidth term {format_time(c.bandwidth_s)} | knee {format_si(knee, 'B', digits=3)}{warn}"
    )


def render_collective(
    kind: str = "all_gather", chip: str = "tpu-v5e", axis_size: int = 16, wraparound: bool = True, n_bytes: float = 1e6
) -> Figure:
    """Time vs bytes for this collective on `chip`, with and without wraparound, the current size starred."""
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
) -> widgets.VBox:
    """Kind, chip, axis size, wraparound and a bytes slider (log); prints `collective_readout`."""
    kind_dd = widgets.Dropdown(options=list(COLLECTIVE_KINDS), value=kind, description="collective")
    chip_dd = widgets.Dropdown(options=tpu_names(), value=get_chip(chip).name, description="chip")
    axis_dd = widgets.Dropdown(options=[2, 4, 8, 16, 32, 64], value=axis_size, description="axis size")
    wrap_cb = widgets.Checkbox(value=wraparound, description="wraparound")
    bytes_sl = widgets.FloatLogSlider(
        value=n_bytes,
        base=10,
        min=3,
        max=10,
        step=0.05,
        description="bytes",
        readout_format=".3g",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    box = widgets.VBox()

    def view(kind, chip, axis_size, wraparound, n_bytes):
        emit(
            box,
            collective_readout(kind, chip, axis_size, wraparound, n_bytes),
            lambda: render_collective(kind, chip, axis_size, wraparound, n_bytes),
            key=(kind, chip, axis_size, wraparound),
        )

    controls = {"kind": kind_dd, "chip": chip_dd, "axis_size": axis_dd, "wraparound": wrap_cb, "n_bytes": bytes_sl}
    out = widgets.interactive_output(view, controls)
    box.children = [widgets.HBox([kind_dd, chip_dd]), widgets.HBox([axis_dd, wrap_cb]), bytes_sl, out]
    values = lambda: (kind_dd.value, chip_dd.value, axis_dd.value, wrap_cb.value, bytes_sl.value)  # noqa: E731
    return attach(box, controls, out, lambda: collective_readout(*values()), lambda: render_collective(*values()))
