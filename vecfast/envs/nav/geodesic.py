"""Geodesic distance fields on the walkable grid.

A shortest path between two cells is searched in the 16-neighbour grid graph (the 8
neighbours plus the 8 knight moves), whose distances are within 2.7% of the Euclidean
shortest path in free space (8 neighbours alone are off by up to 8%). A move is allowed
only when every cell its segment crosses is walkable, so paths never cut a corner.

The search is Dial's bucketed Dijkstra, vectorised in numpy: round t settles every cell
whose distance lies in [t - 1, t) cells at once (no move is shorter than one cell, so
none of them can improve another) and relaxes their 16 moves. Each cell is expanded once
and a field costs one round per cell of path length (tens of ms for a 300x300 grid); it
runs once per (scene, goal), off the step path.
"""

from __future__ import annotations

import math

import numpy as np

# (dy, dx, cells that the segment from (0, 0) to (dy, dx) crosses besides its ends)
_MOVES: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...] = (
    (0, 1, ()),
    (0, -1, ()),
    (1, 0, ()),
    (-1, 0, ()),
    (1, 1, ((0, 1), (1, 0))),
    (1, -1, ((0, -1), (1, 0))),
    (-1, 1, ((0, 1), (-1, 0))),
    (-1, -1, ((0, -1), (-1, 0))),
    (1, 2, ((0, 1), (1, 1))),
    (2, 1, ((1, 0), (1, 1))),
    (1, -2, ((0, -1), (1, -1))),
    (2, -1, ((1, 0), (1, -1))),
    (-1, 2, ((0, 1), (-1, 1))),
    (-2, 1, ((-1, 0), (-1, 1))),
    (-1, -2, ((0, -1), (-1, -1))),
    (-2, -1, ((-1, 0), (-1, -1))),
)
_PAD = 2  # the longest move spans two cells


def grid_moves() -> list[tuple[int, int, tuple[tuple[int, int], ...], float]]:
    """The graph's moves as ``(dy, dx, crossed cells, length in cells)`` (for reference searches)."""
    return [(dy, dx, crossed, math.hypot(dy, dx)) for dy, dx, crossed in _MOVES]


def _shifted(padded: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``padded[y + dy, x + dx]`` for every unpadded cell (y, x)."""
    h, w = padded.shape[0] - 2 * _PAD, padded.shape[1] - 2 * _PAD
    return padded[_PAD + dy : _PAD + dy + h, _PAD + dx : _PAD + dx + w]


def distance_field(walkable: np.ndarray, goal_cell: tuple[int, int], resolution: float) -> np.ndarray:
    """Geodesic distance in metres from every cell centre to the centre of ``goal_cell``.

    ``walkable`` is a (rows, cols) bool grid, ``goal_cell`` (row, col) one of its
    walkable cells. Unreachable and blocked cells get ``inf``. Returns float32.
    """
    walkable = np.asarray(walkable, dtype=bool)
    h, w = walkable.shape
    gy, gx = goal_cell
    if not (0 <= gy < h and 0 <= gx < w and walkable[gy, gx]):
        raise ValueError(f"goal cell {goal_cell} is not a walkable cell of the {h}x{w} grid")
    padded = np.zeros((h + 2 * _PAD, w + 2 * _PAD), dtype=bool)
    padded[_PAD:-_PAD, _PAD:-_PAD] = walkable
    width = w + 2 * _PAD
    # allowed[k] on the padded flat grid: move k may start at this cell.
    allowed = np.zeros((len(_MOVES), padded.size), dtype=bool)
    for k, (dy, dx, crossed) in enumerate(_MOVES):
        ok = walkable & _shifted(padded, dy, dx)
        for cy, cx in crossed:
            ok &= _shifted(padded, cy, cx)
        allowed[k].reshape(padded.shape)[_PAD:-_PAD, _PAD:-_PAD] = ok
    offsets = np.array([dy * width + dx for dy, dx, _ in _MOVES], dtype=np.int64)
    costs = np.array([math.hypot(dy, dx) for dy, dx, _ in _MOVES], dtype=np.float64)

    dist = np.full(padded.size, np.inf)
    settled = np.zeros(padded.size, dtype=bool)
    start = (gy + _PAD) * width + gx + _PAD
    dist[start] = 0.0
    pending = np.array([start], dtype=np.int64)  # cells whose distance dropped, not yet settled
    bucket_end = 1.0
    while pending.size:
        due = dist[pending] < bucket_end
        if not due.any():
            bucket_end = float(dist[pending].min()) + 1.0
            continue
        active = np.unique(pending[due])
        active = active[~settled[active]]
        settled[active] = True
        neighbours = active[:, None] + offsets[None, :]
        candidates = dist[active][:, None] + costs[None, :]
        better = allowed[:, active].T & (candidates < dist[neighbours])
        targets = neighbours[better]
        np.minimum.at(dist, targets, candidates[better])
        pending = np.concatenate([pending[~due], targets])
        bucket_end += 1.0
    field = dist.reshape(padded.shape)[_PAD:-_PAD, _PAD:-_PAD] * resolution
    return field.astype(np.float32)
