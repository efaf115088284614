"""The shared-memory half of the owner-worker protocol: job rings and per-env result counters.

Hot path (step): the owner writes actions into shared memory, pushes a job (a code plus
a mask of the worker's envs) onto the worker's :class:`JobRing` and posts the worker's
semaphore. The worker steps those envs, writes results in place, counts them finished in
:class:`ResultCounters` and posts the one shared ``ready`` semaphore. Everything that does
not fit in fixed-size arrays (non-empty infos, errors, pickled observations, reset
arguments, control calls) travels as a typed message (:mod:`vecfast.vector.messages`)
through the worker's pipe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vecfast.vector.shared_buffers import ArenaLayout


class Job:
    """Job codes (plain ints: read on every step, where enum lookups cost microseconds)."""

    STEP = 1
    RESET = 2
    CONTROL = 3  # call/get_attr/set_attr/render; request and reply on the pipe
    CLOSE = 4


@dataclass(frozen=True)
class JobEntry:
    """One job as the worker reads it."""

    code: int  # a Job code
    local_envs: list[int]  # the worker's own env positions
    counts_down: bool  # part of a batch that wakes the owner once, when its last job ends
    has_payload: bool  # a :class:`~vecfast.vector.messages.JobPayload` follows on the pipe
    obs_bank: int  # which copy of the observation batch the envs write (see observation_banks)


class JobRing:
    """One worker's ring of job entries in the shared arena.

    The owner writes at ``head`` and the worker reads at ``tail``; the worker's
    semaphore counts the entries written and not yet read. Every env is in at most one
    job at a time, and a control or close job waits for an idle worker, so
    ``max_local_envs + 2`` entries never overflow.
    """

    def __init__(self, views: dict[str, np.ndarray], worker_index: int) -> None:
        self.code = views["ring_code"][worker_index]
        self.mask = views["ring_mask"][worker_index]
        self.counts_down = views["ring_countdown"][worker_index]
        self.has_payload = views["ring_payload"][worker_index]
        self.obs_bank = views["ring_obs_bank"][worker_index]
        self.head = 0
        self.tail = 0

    @staticmethod
    def reserve(layout: ArenaLayout, num_workers: int, max_local_envs: int) -> None:
        entries = max_local_envs + 2
        layout.add("ring_code", (num_workers, entries), "int32")
        layout.add("ring_mask", (num_workers, entries, max_local_envs), "bool")
        layout.add("ring_countdown", (num_workers, entries), "bool")
        layout.add("ring_payload", (num_workers, entries), "bool")
        layout.add("ring_obs_bank", (num_workers, entries), "int8")

    def push(
        self,
        code: int,
        local_envs: Any = None,
        counts_down: bool = False,
        has_payload: bool = False,
        obs_bank: int = 0,
    ) -> None:
        """Owner side: write the next entry (the caller then posts the worker's semaphore)."""
        entry = self.head % len(self.code)
        self.head += 1
        self.counts_down[entry] = counts_down
        self.has_payload[entry] = has_payload
        self.obs_bank[entry] = obs_bank
        mask = self.mask[entry]
        mask[:] = False
        if local_envs is not None:
            mask[local_envs] = True
        self.code[entry] = code

    def pop(self) -> JobEntry:
        """Worker side: read the next entry (after its semaphore was acquired)."""
        entry = self.tail % len(self.code)
        self.tail += 1
        return JobEntry(
            int(self.code[entry]),
            np.flatnonzero(self.mask[entry]).tolist(),
            bool(self.counts_down[entry]),
            bool(self.has_payload[entry]),
            int(self.obs_bank[entry]),
        )


class ResultCounters:
    """Per env, in shared memory, and written by its worker only: ``finished``, the jobs of the env that the worker
    has finished; ``with_report``, the ``finished`` count of the env's last job whose report (its info, observation
    or error) went by pipe. The worker writes ``with_report`` before ``finished``, so an owner that sees a job
    finished also sees whether a report follows. The owner keeps its own count of what it has seen
    (:class:`~vecfast.vector.env_states.EnvStates`): no array is written from both sides."""

    def __init__(self, views: dict[str, np.ndarray]) -> None:
        self.finished = views["finished"]
        self.with_report = views["with_report"]
        # The worker's own copy of the counts (a replacement's continues its predecessor's): it only ever writes the
        # shared line, which the owner reads all the time, and never reads it back.
        self._counts = self.finished.copy()

    def count_finished(self, env_indices: list[int], reported: Any) -> None:
        """Worker side: the job of ``env_indices`` (ascending) is finished; ``reported``: those of them that its
        report covers."""
        counts = self._counts
        first, last = env_indices[0], env_indices[-1]
        rows = slice(first, last + 1) if last - first + 1 == len(env_indices) else env_indices  # a run: a slice
        counts[rows] += 1
        if reported:
            marked = [e for e in env_indices if e in reported]
            self.with_report[marked] = counts[marked]
        self.finished[rows] = counts[rows]


def reserve_result_arrays(layout: ArenaLayout, num_envs: int, num_workers: int) -> None:
    """Per-env result counters and, per worker, its progress marks (vecfast.vector.stall_watch).

    ``progress[w, 0]``: the env worker ``w`` is stepping (-1 between jobs); ``progress[w, 1]``:
    the jobs it has started. One cache line per worker: it is written before every env step.
    """
    layout.add("finished", (num_envs,), "int64")
    layout.add("with_report", (num_envs,), "int64")
    layout.add("progress", (num_workers, 8), "int64")


def spin_acquire(try_acquire: Callable[[bool], bool], seconds: float) -> bool:
    """Poll a semaphore for ``seconds`` before the caller blocks on it.

    Catching a post while polling saves the sleep/wake-up round trip (tens of us);
    yielding between polls hands the core to a runnable worker or owner, which
    matters when processes outnumber cores.
    """
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if try_acquire(False):
            return True
        os.sched_yield()
    return False
