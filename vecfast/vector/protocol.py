"""The tiny messages between the owner and its workers.

Hot path (step): the owner writes actions into shared memory, appends a job
(a code plus a mask of the worker's envs) to the worker's ring in shared memory and
posts the worker's semaphore. The worker steps those envs, writes results in place,
marks each env's status and posts the one shared ``ready`` semaphore. Only infos that
are not empty, errors and control calls travel through the worker's pipe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from enum import IntEnum

from vecfast.vector.shared_buffers import ArenaLayout


class Job(IntEnum):
    STEP = 1
    RESET = 2  # per-env (seed, options) follow on the pipe
    CONTROL = 3  # call/get_attr/set_attr/render; request and reply on the pipe
    CLOSE = 4


class EnvStatus(IntEnum):
    """Per-env result state in shared memory; the owner sets it back to PENDING."""

    PENDING = 0
    READY = 1
    READY_WITH_INFO = 2  # a pipe message holds the env's non-empty info
    FAILED = 3  # a pipe message holds the exception


def add_control_arrays(layout: ArenaLayout, num_envs: int, num_workers: int, max_local_envs: int) -> None:
    """Reserve the job rings, per-env statuses and per-worker 'stepping env' markers.

    A ring holds at most one job per env plus a control job, so it never overflows.
    """
    ring = ring_size(max_local_envs)
    layout.add("ring_code", (num_workers, ring), "int32")
    layout.add("ring_mask", (num_workers, ring, max_local_envs), "bool")
    layout.add("ring_countdown", (num_workers, ring), "bool")
    layout.add("status", (num_envs,), "int8")
    # One cache line per worker: it is written before every env step.
    layout.add("stepping_env", (num_workers, 8), "int64")


def ring_size(max_local_envs: int) -> int:
    return max_local_envs + 2


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
