"""sharding_figures: pictures of real sharded JAX arrays and of the collective matmul's ring (book ch. 10).

- `array_blocks_figure({"In": a, "W": w, ...})`: each 2-D (or 1-D) array cut into the blocks the devices
  hold, read from the array itself (`x.sharding.devices_indices_map(x.shape)`), one colour per distinct
  block, each labelled with the devices that hold it — the picture `jax.debug.visualize_array_sharding`
  prints as text, for several arrays side by side.
- `ring_schedule_figure(n, measured_s=..., book_us=...)`: the collective matmul's schedule on a ring of
  `n` devices (book ch. 10, "Collective matmul"): at step s device j multiplies A-block (j + s) mod n and
  passes it to device j − 1, next to the measured times of the plain and the collective matmul.

Shell module (matplotlib); it needs no jax import: arrays are read through their `.shape` and `.sharding`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from scalebook_utils.views._kit import SHARD_COLORS

__all__ = ["device_blocks", "array_blocks_figure", "ring_schedule", "ring_schedule_figure"]


def _bounds(sl: slice, size: int) -> tuple[int, int]:
    start, stop, _ = sl.indices(size)
    return start, stop


def device_blocks(array) -> dict[tuple, list[int]]:
    """{((r0, r1), (c0, c1)): [device ids]} for a 1-D or 2-D sharded array (1-D: rows (0, 1)).

    Read from `array.sharding.devices_indices_map(array.shape)`; devices holding the same block (a
    replicated axis) are listed together, sorted by id.
    """
    shape = tuple(array.shape)
    if len(shape) not in (1, 2):
        raise ValueError(f"array_blocks_figure draws 1-D or 2-D arrays, got shape {shape}")
    blocks: dict[tuple, list[int]] = {}
    for dev, idx in array.sharding.devices_indices_map(shape).items():
        idx = tuple(idx) + (slice(None),) * (len(shape) - len(tuple(idx)))
        if len(shape) == 1:
            key = ((0, 1), _bounds(idx[0], shape[0]))
        else:
            key = (_bounds(idx[0], shape[0]), _bounds(idx[1], shape[1]))
        blocks.setdefault(key, []).append(int(dev.id))
    return {k: sorted(v) for k, v in sorted(blocks.items())}


def _label(devs: list[int]) -> str:
    if len(devs) > 4:
        return f"d{devs[0]}…d{devs[-1]}\n({len(devs)} copies)"
    return "\n".join("d" + ",".join(map(str, devs[k : k + 2])) for k in range(0, len(devs), 2))


def _dtype_str(array) -> str:
    name = str(getattr(array, "dtype", ""))
    short = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32", "int8": "i8"}
    return short.get(name, name)


def array_blocks_figure(arrays: Mapping[str, Any], *, figsize=None, title: str | None = None) -> Figure:
    """One panel per named array: its per-device blocks, coloured by block, labelled with device ids.

    Panel titles give name, dtype, global shape, the PartitionSpec (when the sharding has one) and the
    per-device block shape. Book ch. 3 notation: In[B_X, D_Y] on a 4×2 mesh is 8 blocks of B/4 × D/2.
    """
    items = list(arrays.items())
    if not items:
        raise ValueError("give at least one array")
    n = len(items)
    fig = Figure(figsize=figsize or (3.3 * n, 3.0), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (name, arr) in zip(axes, items):
        shape = tuple(arr.shape)
        rows = shape[0] if len(shape) == 2 else 1
        cols = shape[-1]
        blocks = device_blocks(arr)
        for i, (((r0, r1), (c0, c1)), devs) in enumerate(blocks.items()):
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
            frac = min((c1 - c0) / cols, (r1 - r0) / rows)
            ax.text(
                (c0 + c1) / 2,
                (r0 + r1) / 2,
                _label(devs),
                ha="center",
                va="center",
                fontsize=max(6.5, min(10.0, 40 * frac)),
            )
        ax.set_xlim(0, cols)
        ax.set_ylim(rows, 0)
        ax.set_xticks([])
        ax.set_yticks([])
        (r0, r1), (c0, c1) = next(iter(blocks))
        local = f"{r1 - r0}×{c1 - c0}" if len(shape) == 2 else f"{c1 - c0}"
        spec = getattr(arr.sharding, "spec", None)
        spec_s = f"\nP{tuple(spec)!r}".replace(",)", ")") if spec is not None else ""
        ax.set_title(
            f"{name}: {_dtype_str(arr)}{list(shape)}{spec_s}\nper device {local}, {len(blocks)} block"
            f"{'s' if len(blocks) > 1 else ''}",
            fontsize=9,
        )
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def ring_schedule(n: int) -> np.ndarray:
    """held[s, j] = the A-block device j multiplies at step s of the collective matmul: (j + s) mod n.

    Each step every device sends its block to device j − 1 (`ppermute` with pairs (j, j − 1 mod n)), so
    after n steps every device has multiplied every block once and sent n − 1 of them.
    """
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    s, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return (j + s) % n


def ring_schedule_figure(
    n: int,
    measured_s: Mapping[str, float] | None = None,
    book_us: Mapping[str, float] | None = None,
    *,
    figsize=None,
    machine: str = "this machine",
) -> Figure:
    """Left: the ring schedule (`ring_schedule`), steps across, devices down, arrows for the shifts.
    Middle: `measured_s` (seconds, e.g. {"plain": t0, "collective": t1}) as bars in µs. Right:
    `book_us` (µs, the book's TPU numbers: plain 311, collective 244, no communication 224)."""
    held = ring_schedule(n)
    panels = 1 + (measured_s is not None) + (book_us is not None)
    fig = Figure(figsize=figsize or (4.0 + 2.6 * (panels - 1), 2.9), layout="constrained")
    ratios = [1.6] + [1.0] * (panels - 1)
    axes = fig.subplots(1, panels, squeeze=False, gridspec_kw={"width_ratios": ratios})[0]
    ax = axes[0]
    for s in range(n):
        for j in range(n):
            b = int(held[s, j])
            ax.add_patch(
                Rectangle(
                    (s, j), 0.8, 0.8, facecolor=SHARD_COLORS[b % len(SHARD_COLORS)], edgecolor="black", linewidth=0.8
                )
            )
            ax.text(s + 0.4, j + 0.4, f"A{b}·W{b}", ha="center", va="center", fontsize=7.5)
            if s < n - 1 and j > 0:  # the block moves to device j − 1 for the next step
                ax.add_patch(
                    FancyArrowPatch(
                        (s + 0.8, j + 0.2),
                        (s + 1.0, j - 0.4),
                        arrowstyle="->",
                        mutation_scale=7,
                        color="#555555",
                        linewidth=0.8,
                    )
                )
    ax.set_xlim(-0.1, n)
    ax.set_ylim(n, -0.3)
    ax.set_xticks([s + 0.4 for s in range(n)], [f"step {s}" for s in range(n)], fontsize=8)
    ax.set_yticks([j + 0.4 for j in range(n)], [f"device {j}" for j in range(n)], fontsize=8)
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(
        f"ring of {n}: at step s device j multiplies block (j+s) mod {n};\n"
        f"arrows: ppermute j → j−1 (0 → {n - 1} wraps), {n - 1} shifts",
        fontsize=8.5,
    )
    k = 1
    for data, label, scale in ((measured_s, f"{machine}, measured (µs)", 1e6), (book_us, "book, TPU (µs)", 1.0)):
        if data is None:
            continue
        ax = axes[k]
        k += 1
        names, vals = list(data), [float(v) * scale for v in data.values()]
        bars = ax.barh(range(len(names)), vals, color=["#fb8072", "#80b1d3", "#b3de69"][: len(names)])
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        for bar, v in zip(bars, vals):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:.0f}", va="center", fontsize=8)
        ax.set_xlim(0, max(vals) * 1.35)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(label, fontsize=8.5)
    return fig
