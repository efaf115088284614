"""The owner's one record of every env: where it is in the job cycle and what it left to return."""

from __future__ import annotations

from typing import Any

import numpy as np

from vecfast.vector.messages import EnvFailure, JobReport
from vecfast.vector.shared_buffers import PickledBuffer


class Phase:
    """Where an env is (plain ints: read on every step, where enum lookups cost microseconds)."""

    IDLE = 0  # results returned (or never asked for)
    RUNNING = 1  # in a job that a worker has not finished
    DONE = 2  # finished, results not yet returned to the caller


class EnvTable:
    """Per-env state; every entry point of the vector env moves envs through it.

    ``dispatch`` -> :meth:`start` (IDLE -> RUNNING); collecting -> :meth:`finish`
    (RUNNING -> DONE, in finishing order) after :meth:`absorb` took the env's report
    from the pipe; returning results -> :meth:`take` (DONE -> IDLE).
    """

    def __init__(self, num_envs: int, pickled_obs: PickledBuffer | None) -> None:
        self.phase = np.zeros(num_envs, np.int8)
        self.finished_at = np.zeros(num_envs, np.int64)  # finishing order of DONE envs, for recv
        self.episode_over = np.zeros(num_envs, bool)  # terminated or truncated last (AutoresetMode.DISABLED)
        self.must_reset = np.zeros(num_envs, bool)  # raised: its row is stale until it is reset
        self.infos: dict[int, dict[str, Any]] = {}
        self.failures: dict[int, EnvFailure] = {}
        self.reported: set[int] = set()  # a report arrived before the env's status was collected
        self.pickled_obs = pickled_obs
        self._finish_count = 0

    def start(self, ids: np.ndarray | slice) -> None:
        self.phase[ids] = Phase.RUNNING

    def absorb(self, report: JobReport) -> None:
        """Keep what a worker's report carries until its envs' results are taken."""
        self.infos.update(report.infos)
        self.failures.update(report.failures)
        for env_index, obs in report.observations.items():
            self.pickled_obs.write(env_index, obs)
        self.reported.update(report.infos, report.observations, report.failures)

    def finish(self, ids: np.ndarray) -> None:
        self.phase[ids] = Phase.DONE
        self.finished_at[ids] = self._finish_count
        self._finish_count += 1
        if self.reported:
            self.reported.difference_update(ids.tolist())

    def in_phase(self, phase: Phase, ids: np.ndarray | None = None) -> np.ndarray:
        """Env indices (of ``ids``, default all) in ``phase``."""
        if ids is None:
            return np.flatnonzero(self.phase == phase)
        return ids[self.phase[ids] == phase]

    def first_done(self, count: int) -> np.ndarray:
        """The ``count`` DONE envs that finished first."""
        done = self.in_phase(Phase.DONE)
        return done[np.argsort(self.finished_at[done], kind="stable")[:count]]

    def take(self, ids: np.ndarray | slice) -> tuple[list[tuple[int, dict[str, Any]]], EnvFailure | None]:
        """Return DONE envs to IDLE: their infos in env order, and the first failure among them."""
        self.phase[ids] = Phase.IDLE
        if not self.infos and not self.failures:
            return [], None
        if isinstance(ids, slice):
            ids = np.arange(len(self.phase))[ids]
        env_list = sorted(ids.tolist())
        infos = [(e, self.infos.pop(e)) for e in env_list if e in self.infos]
        failures = [self.failures.pop(e) for e in env_list if e in self.failures]
        for failure in failures:
            self.must_reset[failure.env_index] = True
        return infos, failures[0] if failures else None
