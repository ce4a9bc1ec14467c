"""A cycle-by-cycle systolic array for small matrices (book ch. 2, Appendix B: "How does a systolic array work?").

The MXU of a TPU is a grid of multiply-add cells. This module simulates one, register by register, for
``A @ B`` with ``A``: [M, K] (the LHS, activations) and ``B``: [K, N] (the RHS, weights), on a grid of
K rows × N columns (one cell per weight; a real MXU is 128×128, or 256×256 from v6e on).

Two phases, as in the book's animation:

1. **Weight load** (K cycles): the rows of ``B`` are pushed in at the top and shift down one row per
   cycle, last row first, until cell (k, n) holds ``B[k, n]``. (The book's animation also skews the
   weights diagonally; loading them row by row takes the same K cycles and keeps the picture simple.
   On the real chip the next weights load while the current ones compute, so this phase is usually hidden.)
2. **Compute** (M + K + N − 2 cycles): row k of the grid receives column k of ``A`` from the left,
   delayed by k cycles (the diagonal skew), so ``A[m, k]`` enters at cycle m + k and moves one column
   right per cycle. Each cell multiplies the activation passing through by its weight and adds the
   partial sum handed down by the cell above; partial sums move one row down per cycle and leave the
   bottom of column n as finished outputs ``C[m, n]``.

The skew makes every cell's two inputs meet at the right cycle: ``A[m, k]`` reaches cell (k, n) at
cycle m + k + n, exactly when the partial sum of ``C[m, n]`` arrives from above. The price is a
pipeline bubble: the array fills along anti-diagonals at the start and drains at the end, so the
utilisation (the fraction of cells doing a multiply-add) rises, stays at 1 only while M ≥ K + N − 1,
and falls. Pure numpy; no JAX.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_DIM", "Snapshot", "SystolicRun", "cycle_count", "simulate", "utilisation_curve"]

#: Largest M, K or N accepted: the run keeps a snapshot of the whole grid every cycle.
MAX_DIM = 64


@dataclass(frozen=True)
class Snapshot:
    """The array's state at the end of one cycle.

    All grid arrays have shape (K, N), one entry per cell (k = row, n = column); NaN or −1 mark empty.
    """

    cycle: int  # 0-based, counting from the first cycle of the weight load
    phase: str  # "load" or "compute"
    weights: np.ndarray  # (K, N) weight held by each cell (NaN: not loaded yet)
    activation: np.ndarray  # (K, N) activation in each cell this cycle (NaN: none)
    act_row: np.ndarray  # (K, N) int, the row m of A that activation belongs to (−1: none)
    psum: np.ndarray  # (K, N) partial sum each cell hands down this cycle (NaN: none)
    active: np.ndarray  # (K, N) bool, the cells that did a multiply-add this cycle
    outputs: np.ndarray  # (M, N) the finished entries of C so far (NaN: not yet)
    feed: np.ndarray  # (K, M) activations still waiting on the left: feed[k, m] = A[m, k] or NaN
    utilisation: float  # active cells ÷ all cells

    @property
    def n_active(self) -> int:
        return int(self.active.sum())


@dataclass(frozen=True)
class SystolicRun:
    """The result of `simulate`: the product, the cycle counts and every cycle's `Snapshot`."""

    A: np.ndarray
    B: np.ndarray
    result: np.ndarray  # (M, N), equal to A @ B
    load_cycles: int  # K (0 when the weights were preloaded)
    compute_cycles: int  # M + K + N − 2
    snapshots: tuple[Snapshot, ...]

    @property
    def shape(self) -> tuple[int, int, int]:
        """(M, K, N)."""
        return self.A.shape[0], self.A.shape[1], self.B.shape[1]

    @property
    def cycles(self) -> int:
        """Total cycles, weight load included: `cycle_count(M, K, N, load_weights)`."""
        return self.load_cycles + self.compute_cycles

    @property
    def utilisation(self) -> np.ndarray:
        """Per cycle, the fraction of the K × N cells that did a multiply-add (0 during the weight load)."""
        return np.array([s.utilisation for s in self.snapshots])

    @property
    def mean_compute_utilisation(self) -> float:
        """Average utilisation over the compute phase: M·K·N multiply-adds ÷ (K·N · compute cycles)."""
        M, K, N = self.shape
        return M * K * N / (K * N * self.compute_cycles)

    def first_output_cycle(self) -> int:
        """The cycle (0-based) at the end of which the first finished entry of C leaves the array."""
        for s in self.snapshots:
            if np.isfinite(s.outputs).any():
                return s.cycle
        raise RuntimeError("no output produced")  # unreachable for a valid run


def cycle_count(M: int, K: int, N: int, load_weights: bool = True) -> int:
    """Cycles for A[M, K] @ B[K, N] on a K × N systolic array: (K if loading weights) + M + K + N − 2.

    The last output C[M−1, N−1] is computed by the bottom-right cell at compute cycle
    (M−1) + (K−1) + (N−1), so the compute phase lasts M + K + N − 2 cycles.
    """
    for name, v in (("M", M), ("K", K), ("N", N)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return (K if load_weights else 0) + M + K + N - 2


def utilisation_curve(M: int, K: int, N: int) -> np.ndarray:
    """Closed form of the compute-phase utilisation: at cycle t, #{(m, k, n): m + k + n = t} ÷ (K·N)."""
    cycle_count(M, K, N)  # validates
    t = np.arange(M + K + N - 2)
    counts = np.zeros(len(t))
    for k in range(K):
        for n in range(N):
            m = t - k - n
            counts += (m >= 0) & (m < M)
    return counts / (K * N)


def _as_matrix(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be a numeric matrix, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got a complex matrix")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {arr.shape} ({arr.ndim}-D)")
    if 0 in arr.shape:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if max(arr.shape) > MAX_DIM:
        raise ValueError(
            f"{name} has shape {arr.shape}; this simulator keeps every cycle's state and accepts "
            f"sides up to {MAX_DIM} (a real MXU is 128×128 — the behaviour is the same)"
        )
    out = arr.astype(np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return out


def simulate(A, B, *, load_weights: bool = True) -> SystolicRun:
    """Multiply A[M, K] @ B[K, N] on a K × N weight-stationary systolic array, one cycle at a time.

    load_weights: include the K cycles in which the weights shift in from the top (default); with False
    the weights start in place (as when the previous matmul's compute hid their load).
    Raises ValueError for shapes that do not multiply or are too large, TypeError for non-numeric input.
    """
    A = _as_matrix(A, "A (the LHS, activations)")
    B = _as_matrix(B, "B (the RHS, weights)")
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise ValueError(
            f"shapes do not multiply: A is {M}×{K} and B is {K2}×{N}; A's columns ({K}) must equal B's rows ({K2})"
        )

    nan_grid = lambda: np.full((K, N), np.nan)  # noqa: E731
    snaps: list[Snapshot] = []
    outputs = np.full((M, N), np.nan)
    feed_full = A.T.copy()  # feed[k, m] = A[m, k]: row k of the grid is fed column k of A

    # --- phase 1: weights shift down from the top, last row of B first ----------------------------
    w = nan_grid()
    if load_weights:
        for t in range(K):
            w[1:] = w[:-1].copy()
            w[0] = B[K - 1 - t]
            snaps.append(
                Snapshot(
                    cycle=t,
                    phase="load",
                    weights=w.copy(),
                    activation=nan_grid(),
                    act_row=np.full((K, N), -1),
                    psum=nan_grid(),
                    active=np.zeros((K, N), bool),
                    outputs=outputs.copy(),
                    feed=feed_full.copy(),
                    utilisation=0.0,
                )
            )
    else:
        w = B.copy()
    assert np.array_equal(w, B)
    load_cycles = len(snaps)

    # --- phase 2: skewed activations from the left, partial sums down ------------------------------
    act, act_row = nan_grid(), np.full((K, N), -1)
    psum, psum_row = nan_grid(), np.full((K, N), -1)
    feed = feed_full.copy()
    n_compute = M + K + N - 2
    for t in range(n_compute):
        # activations move one cell right; column 0 takes A[t - k, k] from the feeder (skew of k cycles)
        new_act, new_row = nan_grid(), np.full((K, N), -1)
        new_act[:, 1:], new_row[:, 1:] = act[:, :-1], act_row[:, :-1]
        for k in range(K):
            m = t - k
            if 0 <= m < M:
                new_act[k, 0], new_row[k, 0] = A[m, k], m
                feed[k, m] = np.nan
        # partial sums arrive from the cell above (row 0 starts from zero)
        psum_in, psum_in_row = nan_grid(), np.full((K, N), -1)
        psum_in[1:], psum_in_row[1:] = psum[:-1], psum_row[:-1]
        active = new_row >= 0
        psum_in[0] = np.where(active[0], 0.0, np.nan)
        psum_in_row[0] = new_row[0]
        # the two inputs of a busy cell must belong to the same output row — the skew guarantees it
        if not np.array_equal(psum_in_row[active], new_row[active]):
            raise AssertionError(f"cycle {t}: activation and partial sum out of step")  # pragma: no cover
        new_psum = np.where(active, psum_in + new_act * w, np.nan)
        new_psum_row = np.where(active, new_row, -1)
        # the bottom row hands finished outputs out of the array
        for n in range(N):
            if new_psum_row[K - 1, n] >= 0:
                outputs[new_psum_row[K - 1, n], n] = new_psum[K - 1, n]
        act, act_row, psum, psum_row = new_act, new_row, new_psum, new_psum_row
        snaps.append(
            Snapshot(
                cycle=load_cycles + t,
                phase="compute",
                weights=w.copy(),
                activation=act.copy(),
                act_row=act_row.copy(),
                psum=psum.copy(),
                active=active.copy(),
                outputs=outputs.copy(),
                feed=feed.copy(),
                utilisation=float(active.sum()) / (K * N),
            )
        )

    if not np.isfinite(outputs).all():  # pragma: no cover - would be a simulator bug
        raise AssertionError("some outputs never left the array")
    return SystolicRun(
        A=A, B=B, result=outputs, load_cycles=load_cycles, compute_cycles=n_compute, snapshots=tuple(snaps)
    )
