"""The owner's one record of every env: a state per env, and the only code that changes it.

Each env is in one :class:`EnvState`. Idle envs say whether they can step (READY) or raised in
their last job (FAILED); the others are in a job a worker has not finished (RUNNING) or hold
results for the caller (DONE)::

    READY ---step--> RUNNING ---worker finished--> DONE ---taken--> READY | FAILED
    any idle ----reset--> RUNNING                               (by the job's results)
    RUNNING --lost (its worker died or stalled and was replaced)--> RUNNING, its job sent again

An env becomes RUNNING once its job is pushed: one whose push a Ctrl-C prevented stays as it was.

A worker tells the owner which envs it finished through counters in shared memory that only the
worker writes (:class:`~vecfast.vector.protocol.ResultCounters`); this class keeps the owner's side
of the count, so no array is written from both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vecfast.vector.messages import EnvFailure, JobReport
from vecfast.vector.protocol import ResultCounters
from vecfast.vector.shared_buffers import PickledBuffer


class EnvState:
    """Where an env is (plain ints: read on every step, where enum lookups cost microseconds)."""

    READY = 0  # idle; it can step (also an env whose episode ended: under AutoresetMode.DISABLED, as gymnasium
    # does, stepping it is left to the env)
    FAILED = 1  # idle; it raised in its last job: its row is stale until it is reset
    RUNNING = 2  # in a job that a worker has not finished
    DONE = 3  # finished; its results are held for the caller

    IDLE_MAX = FAILED  # READY and FAILED are the idle states


class EnvStates:
    """Per-env state of a vector env's envs, changed only through the transitions below.

    ``counters``: what the workers finished. ``track_jobs``: keep each RUNNING env's job code
    (:attr:`job`), which sending a lost job again needs.
    """

    def __init__(
        self,
        num_envs: int,
        counters: ResultCounters,
        pickled_obs: PickledBuffer | None,
        track_jobs: bool = False,
    ) -> None:
        self.state = np.full(num_envs, EnvState.READY, np.int8)  # read freely; written only here
        self.any_failed = False  # whether some env is FAILED (checked before every step: a bool is cheapest)
        self._counters = counters
        self._collected = np.zeros(num_envs, np.int64)  # the jobs of each env that the owner has seen finish
        self._finished_at = np.zeros(num_envs, np.int64)  # finishing order of DONE envs, for recv
        self._finish_count = 0
        self._track_jobs = track_jobs
        self.job = np.zeros(num_envs, np.int8)  # the code of each RUNNING env's job (vecfast.vector.protocol.Job)
        self._infos: dict[int, dict[str, Any]] = {}
        self._failures: dict[int, EnvFailure] = {}
        self._reported: set[int] = set()  # a report arrived before the env was seen finished
        self._pickled_obs = pickled_obs

    # ------------------------------------------------------------------ queries
    # (``nonzero()[0]`` rather than ``np.flatnonzero``, and ``any()`` where a bool does: these run on every step)
    def in_state(self, state: int, ids: np.ndarray | None = None) -> np.ndarray:
        """Env indices (of ``ids``, default all) in ``state``."""
        if ids is None:
            return (self.state == state).nonzero()[0]
        return ids[self.state[ids] == state]

    def busy(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Env indices (of ``ids``, default all) sent and not yet taken (RUNNING or DONE)."""
        if ids is None:
            return (self.state > EnvState.IDLE_MAX).nonzero()[0]
        return ids[self.state[ids] > EnvState.IDLE_MAX]

    def any_busy(self) -> bool:
        return (self.state > EnvState.IDLE_MAX).any()

    def any_running(self, rows: np.ndarray | slice = slice(None)) -> bool:
        return (self.state[rows] == EnvState.RUNNING).any()

    def count(self, state: int) -> int:
        return int(np.count_nonzero(self.state == state))

    def owed(self) -> np.ndarray:
        """RUNNING envs whose workers have not finished them yet (the envs a stalled worker holds up)."""
        running = self.in_state(EnvState.RUNNING)
        return running[self._counters.finished[running] == self._collected[running]]

    def first_done(self, count: int) -> np.ndarray:
        """The ``count`` DONE envs that finished first."""
        done = self.in_state(EnvState.DONE)
        return done[np.argsort(self._finished_at[done], kind="stable")[:count]]

    # ------------------------------------------------------------------ transitions
    def send(self, rows: np.ndarray | slice, job: int) -> None:
        """Idle envs whose job with code ``job`` was pushed: -> RUNNING (the caller checked that they may run it)."""
        self.state[rows] = EnvState.RUNNING
        if self._track_jobs:
            self.job[rows] = job
        if self.any_failed:  # a reset of failed envs
            self.any_failed = bool((self.state == EnvState.FAILED).any())

    def lost(self, ids: np.ndarray) -> np.ndarray:
        """Envs ``ids`` lost their worker: its counts are taken as seen, and what a RUNNING env's report had brought
        is dropped (its job is sent again to the replacement). The RUNNING ones among ``ids``."""
        self._collected[ids] = self._counters.finished[ids]
        running = self.in_state(EnvState.RUNNING, ids)
        for env_index in running.tolist():
            self._infos.pop(env_index, None)
            self._failures.pop(env_index, None)
            self._reported.discard(env_index)
        return running

    def collect(self, receive: Callable[[int], JobReport]) -> None:
        """RUNNING envs that their workers finished -> DONE, in finishing order. ``receive(env)`` reads the report
        that env's worker sent after finishing it (its infos, pickled observations, errors)."""
        finished = self._counters.finished.copy()
        changed = finished != self._collected
        if not changed.any():
            return
        done = changed.nonzero()[0]
        # The worker marks a job's report before counting the job finished: what is read after the count holds.
        with_report = changed & (self._counters.with_report == finished)
        if with_report.any():
            for env_index in with_report.nonzero()[0].tolist():
                while env_index not in self._reported:
                    self._absorb(receive(env_index))
        if self._reported:
            self._reported.difference_update(done.tolist())
        self._collected = finished  # the others' counts are unchanged
        self.state[done] = EnvState.DONE
        self._finished_at[done] = self._finish_count
        self._finish_count += 1

    def take(self, ids: np.ndarray | slice) -> tuple[list[tuple[int, dict[str, Any]]], EnvFailure | None]:
        """DONE envs -> READY, or FAILED where they raised: their infos in env
        order, and the first failure among them."""
        self.state[ids] = EnvState.READY
        if not self._infos and not self._failures:
            return [], None
        if isinstance(ids, slice):
            ids = np.arange(len(self.state))[ids]
        env_list = sorted(ids.tolist())
        infos = [(e, self._infos.pop(e)) for e in env_list if e in self._infos]
        failures = [self._failures.pop(e) for e in env_list if e in self._failures]
        for failure in failures:
            self.state[failure.env_index] = EnvState.FAILED
        self.any_failed = self.any_failed or bool(failures)
        return infos, failures[0] if failures else None

    def _absorb(self, report: JobReport) -> None:
        """Keep what a worker's report carries until its envs' results are taken."""
        self._infos.update(report.infos)
        self._failures.update(report.failures)
        for env_index, obs in report.observations.items():
            self._pickled_obs.write(env_index, obs)
        self._reported.update(report.infos, report.observations, report.failures)
