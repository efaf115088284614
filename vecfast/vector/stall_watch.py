"""Stall detection: a worker that starts no env step for ``step_timeout`` seconds while it owes results.

Each worker publishes, in its cache line of shared memory, the env it is stepping and
the number of jobs it has started; the owner compares them whenever it waits. Progress is
judged per worker and per env step, not per call: with double buffering the owner keeps
receiving the healthy workers' envs, and a stopped or stuck worker must be noticed all the
same, while a worker stepping many slow envs one after another is not stalled.
"""

from __future__ import annotations

import numpy as np

# Longer than this between two looks (the owner was busy elsewhere, not waiting), the
# owner did not watch the workers: it starts over rather than blame them for the gap.
WATCH_GAP_SECONDS = 1.0


class StallWatch:
    """Remembers, per worker, when its progress marks last changed while the owner watched."""

    def __init__(self, marks: np.ndarray, env_worker: np.ndarray) -> None:
        """``marks[w]``: worker ``w``'s (env being stepped, jobs started); ``env_worker[e]``: env ``e``'s worker."""
        self.marks = marks
        self._env_worker = env_worker
        num_workers = len(marks)
        self._seen = np.full((num_workers, 2), -2, np.int64)
        self._since = np.zeros(num_workers)
        self._last_look = -np.inf

    def stalled(self, now: float, owed_envs: np.ndarray, step_timeout: float) -> np.ndarray:
        """Workers that owe results for ``owed_envs`` and made no progress for ``step_timeout`` seconds."""
        marks = self.marks[:, :2].copy()
        owing = np.zeros(len(marks), bool)
        owing[self._env_worker[owed_envs]] = True
        fresh = (marks != self._seen).any(axis=1) | ~owing
        if now - self._last_look > WATCH_GAP_SECONDS:
            fresh[:] = True
        self._since[fresh] = now
        self._seen = marks
        self._last_look = now
        return np.flatnonzero(now - self._since > step_timeout)

    def quiet_for(self, worker: int, now: float) -> float:
        """Seconds since worker ``worker`` last showed progress to the owner."""
        return now - self._since[worker]
