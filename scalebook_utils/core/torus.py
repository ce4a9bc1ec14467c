"""Torus geometry: hops and shortest routes on a grid of chips, with and without wraparound (book ch. 2).

A chip links to its nearest neighbours along each axis (book ch. 2, "TPU Networking"). On one axis of n chips
positions x and y are |x − y| hops apart on a line and min(d, n − d) on a ring (an axis with wraparound), so
the longest path is n − 1 hops on a line and ⌊n/2⌋ on a ring. A route in dimension order walks axis 0 first,
the shorter way round where the axis wraps.

These functions know no chip: a shape (chips per axis), one wraparound bool per axis and coordinates are all
they read, so they answer "what if" questions on any grid. The slices of real chips — pods, the book's
wraparound rules, `hop_distance` and `max_hops` over a `Slice` — are in `topology`, which re-exports these.
"""

from __future__ import annotations

import numpy as np

from scalebook_utils.core.units import is_int, require_bool, require_int

__all__ = ["ring_hops", "axis_distance", "torus_route_args", "torus_path"]


def ring_hops(n: int, wraparound: bool) -> int:
    """Longest path along one axis of `n` chips: ⌊n/2⌋ hops on a ring, n − 1 on a line (ch. 2, ch. 3)."""
    if not is_int(n) or n < 1:
        raise ValueError(f"n (chips along the axis) must be a positive integer, got {n!r}")
    return n // 2 if wraparound else n - 1


def axis_distance(x: int, y: int, n: int, wraparound: bool) -> int:
    """Hops between positions x and y on one axis of n chips: |x − y|, or min(d, n − d) on a ring.

    n is a positive integer, x and y integers with 0 ≤ x, y < n, wraparound a bool; else an error naming them."""
    n = require_int("n (chips along the axis)", n)
    x = require_int("x", x, 0, n - 1)
    y = require_int("y", y, 0, n - 1)
    wraparound = require_bool("wraparound", wraparound)
    d = abs(x - y)
    return min(d, n - d) if wraparound else d


def torus_route_args(slice_shape, wraparound, src, dst):
    """(shape, wraparound per axis, src, dst) as int/bool tuples, checked: 1 to 3 positive sides, one wraparound
    bool (or one per axis), src and dst chips of the slice; else ValueError naming the bad argument.

    The chip-free form `torus_path` and `plots.torus_figure` take (no pod, no book wraparound rule: a "what if").
    """
    shape = tuple(int(x) for x in slice_shape)
    if not 1 <= len(shape) <= 3 or any(x < 1 for x in shape):
        raise ValueError(f"slice shape must have 1 to 3 positive sides, got {shape}")
    wrap = (
        (bool(wraparound),) * len(shape) if isinstance(wraparound, (bool, np.bool_)) else tuple(map(bool, wraparound))
    )
    if len(wrap) != len(shape):
        raise ValueError(f"wraparound has {len(wrap)} entries for a {len(shape)}-D shape {shape}")
    src, dst = tuple(int(x) for x in src), tuple(int(x) for x in dst)
    for name, p in (("src", src), ("dst", dst)):
        if len(p) != len(shape) or any(not 0 <= c < n for c, n in zip(p, shape)):
            raise ValueError(f"{name} {p} is not a chip of a {'×'.join(map(str, shape))} slice")
    return shape, wrap, src, dst


def torus_path(slice_shape, wraparound, src, dst) -> list[tuple[int, ...]]:
    """A shortest route from `src` to `dst` (dimension order: axis 0 first), as the chips visited.

    Along each axis the route takes the shorter way round when that axis wraps (ties go forward), so
    its length is Σ min(d, n − d) over wrapped axes and Σ d over the others (book ch. 2, "TPU Networking"):
    len(path) − 1 == `hop_distance` on the same slice. Arguments as `torus_route_args` reads them.
    """
    shape, wrap, src, dst = torus_route_args(slice_shape, wraparound, src, dst)
    path, cur = [src], list(src)
    for ax_i, n in enumerate(shape):
        d = (dst[ax_i] - cur[ax_i]) % n
        if wrap[ax_i] and n > 2:
            step, count = (1, d) if d <= n - d else (-1, n - d)
        else:
            step, count = (1, dst[ax_i] - cur[ax_i]) if dst[ax_i] >= cur[ax_i] else (-1, cur[ax_i] - dst[ax_i])
        for _ in range(count):
            cur[ax_i] = (cur[ax_i] + step) % n
            path.append(tuple(cur))
    return path
