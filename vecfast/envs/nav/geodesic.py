"""Geodesic distance fields on the walkable grid.

A shortest path between two cells is searched in the 16-neighbour grid graph (the 8
neighbours plus the 8 knight moves), whose distances are within 2.7% of the Euclidean
shortest path in free space (8 neighbours alone are off by up to 8%). A move is allowed
only when every cell its segment crosses is walkable, so paths never cut a corner.

The search is Dial's bucketed Dijkstra, vectorised in numpy: round t settles every cell
whose distance lies in [t - 1, t) cells at once (no move is shorter than one cell, so
none of them can improve another) and relaxes their 16 moves. Each cell is expanded once
and a field costs one round per cell of path length; the fields of a scene's goals are
searched together (:func:`distance_fields`), once per scene load, off the step path.
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
    return distance_fields(walkable, np.array([goal_cell]), resolution)[0]


def distance_fields(walkable: np.ndarray, goal_cells: np.ndarray, resolution: float) -> np.ndarray:
    """:func:`distance_field` of each of ``goal_cells`` (G, 2), as (G, rows, cols) float32.

    The G searches run as one, over G copies of the grid side by side: a round's numpy calls
    then serve every goal, which makes a scene's goals several times cheaper than one by one.
    """
    walkable = np.asarray(walkable, dtype=bool)
    goal_cells = np.asarray(goal_cells, dtype=np.int64).reshape(-1, 2)
    h, w = walkable.shape
    for gy, gx in goal_cells:
        if not (0 <= gy < h and 0 <= gx < w and walkable[gy, gx]):
            raise ValueError(f"goal cell {(int(gy), int(gx))} is not a walkable cell of the {h}x{w} grid")
    padded = np.zeros((h + 2 * _PAD, w + 2 * _PAD), dtype=bool)
    padded[_PAD:-_PAD, _PAD:-_PAD] = walkable
    width, size = w + 2 * _PAD, padded.size
    # allowed[i, k]: move k may start at cell i of the padded flat grid (a row per cell: a round gathers rows)
    allowed = np.zeros((size, len(_MOVES)), dtype=bool)
    for k, (dy, dx, crossed) in enumerate(_MOVES):
        ok = walkable & _shifted(padded, dy, dx)
        for cy, cx in crossed:
            ok &= _shifted(padded, cy, cx)
        allowed[:, k].reshape(padded.shape)[_PAD:-_PAD, _PAD:-_PAD] = ok
    offsets = np.array([dy * width + dx for dy, dx, _ in _MOVES], dtype=np.int64)
    costs = np.array([math.hypot(dy, dx) for dy, dx, _ in _MOVES], dtype=np.float64)

    # Goal g's grid is cells [g * size, (g + 1) * size): the padding keeps every move inside its own grid.
    num_goals = len(goal_cells)
    dist = np.full(num_goals * size, np.inf)
    settled = np.zeros(num_goals * size, dtype=bool)
    last = np.zeros(num_goals * size, dtype=np.int64)  # scratch for dropping duplicates in O(n), no sort
    starts = np.arange(num_goals) * size + (goal_cells[:, 0] + _PAD) * width + goal_cells[:, 1] + _PAD
    dist[starts] = 0.0
    pending = starts  # cells whose distance dropped, not yet settled (with repeats)
    bucket_end = 1.0
    while pending.size:
        due = dist[pending] < bucket_end
        if not due.any():
            bucket_end = float(dist[pending].min()) + 1.0
            continue
        active = pending[due]
        active = active[~settled[active]]
        order = np.arange(active.size)
        last[active] = order
        active = active[last[active] == order]  # each cell once: its last occurrence
        settled[active] = True
        neighbours = active[:, None] + offsets
        candidates = dist[active][:, None] + costs
        better = allowed[active % size] & (candidates < dist[neighbours])
        targets = neighbours[better]
        np.minimum.at(dist, targets, candidates[better])
        pending = np.concatenate([pending[~due], targets])
        bucket_end += 1.0
    fields = dist.reshape(num_goals, *padded.shape)[:, _PAD:-_PAD, _PAD:-_PAD] * resolution
    return fields.astype(np.float32)
