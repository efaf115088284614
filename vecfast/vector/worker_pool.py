"""The owner's side of the worker processes: start, message, watch and stop them."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import signal
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import send_handle
from multiprocessing.synchronize import Semaphore
from typing import Any

import numpy as np
import psutil
from gymnasium import Env
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import CloudpickleWrapper

from vecfast.vector.errors import StartTimeoutError, StepTimeoutError, WorkerDiedError
from vecfast.vector.messages import Attach, StartFailed, WorkerStarted
from vecfast.vector.process_cleanup import kill_group
from vecfast.vector.protocol import Job, JobRing
from vecfast.vector.shared_buffers import SharedArena, portable_shared_memory
from vecfast.vector.worker import run_worker

LIVENESS_SECONDS = 0.1  # how often a blocked wait checks that workers are alive


@dataclass
class WorkerHandle:
    index: int
    process: BaseProcess
    conn: Connection
    cmd_sem: Semaphore
    offset: int
    size: int
    groups: list[np.ndarray]  # local env indices of each double-buffer group
    ring: JobRing | None = field(default=None, repr=False)  # once the arena exists

    @property
    def env_range(self) -> str:
        return f"envs {self.offset}-{self.offset + self.size - 1}"

    def exit_status(self) -> str:
        """``"signal SIGKILL"``, ``"exit code 3"``: how the process ended (``"exit code None"``: it has not)."""
        code = self.process.exitcode
        return f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"

    def death_note(self) -> str:
        return f"worker {self.index} (pid {self.process.pid}, {self.env_range}) died with {self.exit_status()}"


class WorkerPool:
    """``num_workers`` processes, each owning a contiguous slice of the envs.

    Knows nothing about what a job means: it starts workers, passes messages and jobs,
    notices deaths and hangs (then ``broken`` says why the pool cannot go on), and stops
    every process it started, on :meth:`shutdown` or when it is garbage-collected.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int,
        context: str | None,
        daemon: bool,
        autoreset_mode: AutoresetMode,
        spin_seconds: float,
        double_buffered: bool,
        close_timeout: float,
    ) -> None:
        if context is None and portable_shared_memory():
            context = "spawn"  # where a worker cannot inherit a memfd: a fresh interpreter, as on macOS and Windows
        ctx = self._ctx = mp.get_context(context)
        self.ready_sem = ctx.Semaphore(0)
        # Jobs of one batch count down on this semaphore; only the last to finish wakes
        # the owner, so a step costs one wake-up, not one per worker.
        self.countdown = ctx.Semaphore(0)
        self.workers: list[WorkerHandle] = []
        self.broken: str | None = None
        self.close_timeout = close_timeout
        self._finalizer = weakref.finalize(self, _shutdown, self.workers, close_timeout, False)
        self._env_fns = [CloudpickleWrapper(fn) for fn in env_fns]
        self._worker_settings = (autoreset_mode, spin_seconds)
        self._daemon = daemon
        self._attach: tuple[SharedArena, Attach] | None = None  # kept for replacements
        num_envs = len(env_fns)
        sizes = [num_envs // num_workers + (w < num_envs % num_workers) for w in range(num_workers)]
        offset = 0
        for w, size in enumerate(sizes):
            half = (size + 1) // 2
            groups = [np.arange(half), np.arange(half, size)] if double_buffered and size > 1 else [np.arange(size)]
            self.workers.append(WorkerHandle(w, *self._spawn(w, offset, size), offset, size, groups))
            offset += size
        self.env_worker = np.repeat(np.arange(num_workers), sizes)
        # Double-buffer group of each env: envs of one job share a key.
        self.group_key = np.concatenate(
            [w.index * 2 + np.repeat(np.arange(len(w.groups)), [len(g) for g in w.groups]) for w in self.workers]
        )

    def _spawn(self, index: int, offset: int, size: int) -> tuple[BaseProcess, Connection, Semaphore]:
        """Start worker ``index``'s process for envs ``offset..offset+size-1``."""
        parent_conn, child_conn = self._ctx.Pipe()
        cmd_sem = self._ctx.Semaphore(0)
        args = (index, self._env_fns[offset : offset + size], offset, child_conn, cmd_sem, self.ready_sem)
        process = self._ctx.Process(
            target=run_worker,
            name=f"vecfast-worker-{index}",
            args=(*args, self.countdown, os.getpid(), *self._worker_settings),
            daemon=self._daemon,
        )
        process.start()
        child_conn.close()
        return process, parent_conn, cmd_sem

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers]

    def started(self, timeout: float | None = None) -> list[WorkerStarted]:
        """Each worker's report once its envs exist; an env that failed to build raises here, and
        :class:`StartTimeoutError` if some are not built within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reports = []
        for w in self.workers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            message = self.receive(w, "starting its envs", left)
            if message is None:
                late = [v for v in self.workers[w.index :] if not v.conn.poll()]
                raise StartTimeoutError(
                    f"{_worker_list(late)} did not build {'its' if len(late) == 1 else 'their'} envs within "
                    f"start_timeout={timeout} s: an env constructor hangs, or takes longer than that"
                )
            if isinstance(message, StartFailed):
                raise message.failure.to_error()
            reports.append(message)
        return reports

    def attach(self, arena: SharedArena, attach: Attach, keep: bool = False) -> None:
        """Hand every worker the arena; from then on jobs go through its rings. ``keep``: keep the arena's file
        descriptor open, to attach replacements (:meth:`replace`)."""
        attach = dataclasses.replace(attach, arena_name=arena.name)
        for w in self.workers:
            self._send_arena(w, arena, attach)
        for w in self.workers:
            self.receive(w, "attaching shared memory")
        views = arena.views()
        for w in self.workers:
            w.ring = JobRing(views, w.index)
        if keep:
            self._attach = (arena, attach)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self.workers, self.close_timeout, True)

    def _send_arena(self, w: WorkerHandle, arena: SharedArena, attach: Attach) -> None:
        self.send(w, attach)
        if attach.arena_name is None:  # a memfd: its descriptor follows the message
            send_handle(w.conn, arena.fd, w.process.pid)

    def replace(self, w: WorkerHandle, last_obs: list[Any], start_timeout: float | None) -> None:
        """Replace worker ``w`` (dead, or stalled: it is killed first) by a new process with new envs, attached to
        the same arena; its envs owe the caller a truncation, with ``last_obs`` as their final observations. A new
        process that fails to build its envs raises here, and the pool is broken."""
        kill_group(w.process.pid)
        w.process.kill()
        w.process.join(LIVENESS_SECONDS)
        w.conn.close()
        w.process, w.conn, w.cmd_sem = self._spawn(w.index, w.offset, w.size)
        w.ring = None
        started = self.receive(w, "starting its envs after a restart", start_timeout)
        if started is None:
            self.broken = f"worker {w.index}'s replacement did not build its envs within {start_timeout} s"
            raise StartTimeoutError(self.broken)
        if isinstance(started, StartFailed):
            self.broken = f"worker {w.index}'s replacement failed to build env {started.failure.env_index}"
            raise started.failure.to_error()
        arena, attach = self._attach
        self._send_arena(w, arena, dataclasses.replace(attach, last_obs=last_obs))
        self.receive(w, "attaching shared memory after a restart")
        w.ring = JobRing(arena.views(), w.index)
        while self.countdown.acquire(False):  # a token the lost job would have taken: each job now wakes the owner
            pass
        self.broken = None

    def push(
        self,
        w: WorkerHandle,
        code: int,
        local_envs: Any = None,
        counts_down: bool = False,
        payload: bytes | None = None,
        obs_bank: int = 0,
    ) -> None:
        """Queue a job; ``payload``: its pickled :class:`~vecfast.vector.messages.JobPayload`, sent first."""
        if payload is not None:
            self.send(w, payload)
        w.ring.push(code, local_envs, counts_down, payload is not None, obs_bank)
        w.cmd_sem.release()

    def start_countdown(self, jobs: int) -> None:
        """The next ``jobs`` countdown jobs form one batch: only the last one wakes the owner."""
        for _ in range(jobs - 1):
            self.countdown.release()

    def receive(self, w: WorkerHandle, doing: str, timeout: float | None = None) -> Any:
        """Read one pipe message from worker ``w``, noticing if it dies meanwhile.

        Returns None if ``timeout`` passes first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not w.conn.poll(LIVENESS_SECONDS if deadline is None else min(LIVENESS_SECONDS, timeout)):
                if not w.process.is_alive():
                    raise EOFError
                if deadline is not None:
                    timeout = deadline - time.monotonic()
                    if timeout <= 0:
                        return None
            return w.conn.recv()
        except (EOFError, OSError):
            raise self.died(w, doing) from None

    def send(self, w: WorkerHandle, message: Any) -> None:
        """Send a message, or one pickled already (bytes, from :func:`~vecfast.vector.messages.pickled`)."""
        try:
            if isinstance(message, bytes):
                w.conn.send_bytes(message)
            else:
                w.conn.send(message)
        except OSError:
            raise self.died(w, "receiving a request") from None

    def dead(self) -> list[WorkerHandle]:
        return [w for w in self.workers if not w.process.is_alive()]

    def hung(self, stalled: dict[int, tuple[int, list[int], float]], step_timeout: float) -> StepTimeoutError:
        """Mark the pool broken by stalled workers: ``stalled[w]`` = (env it is stepping or -1, envs it owes,
        seconds without progress)."""
        notes = []
        for index, (stepping, owed, quiet) in stalled.items():
            w = self.workers[index]
            who = f"worker {index} (pid {w.process.pid}{_process_state(w.process.pid)})"
            if stepping >= 0:
                behind = [e for e in owed if e != stepping]
                waiting = f"; {_env_list(behind)} wait behind it" if behind else ""
                notes.append(f"env {stepping} of {who} did not finish its step within {quiet:.1f} s{waiting}")
            else:
                notes.append(f"{who} started no env step for {quiet:.1f} s while {_env_list(owed)} waited on it")
        self.broken = f"{'; '.join(notes)} (step_timeout={step_timeout} s)"
        return StepTimeoutError(self.broken)

    def silent(self, w: WorkerHandle, env_index: int, step_timeout: float) -> StepTimeoutError:
        """Mark the pool broken by worker ``w``, which finished env ``env_index``'s step but did not send the
        message with its results within ``step_timeout``."""
        self.broken = (
            f"worker {w.index} (pid {w.process.pid}{_process_state(w.process.pid)}) finished the step of env "
            f"{env_index} but did not send its results within {step_timeout:.1f} s (step_timeout={step_timeout} s)"
        )
        return StepTimeoutError(self.broken)

    def died(self, w: WorkerHandle, doing: str) -> WorkerDiedError:
        """Mark the pool broken by worker ``w``, which died while the owner was ``doing`` something."""
        w.process.join(LIVENESS_SECONDS)  # reap it, so that the note has its exit status
        self.broken = f"{w.death_note()} while {doing}"
        return WorkerDiedError(self.broken)

    def shutdown(self, timeout: float, graceful: bool, busy: set[int] = frozenset()) -> None:
        """Stop the workers; ``busy`` ones (still inside a job) are killed, not asked."""
        self._finalizer.detach()
        _shutdown(self.workers, timeout, graceful and self.broken is None, busy)
        if self._attach is not None:
            self._attach[0].seal()


def _worker_list(workers: list[WorkerHandle]) -> str:
    return ", ".join(f"worker {w.index} ({w.env_range}, pid {w.process.pid})" for w in workers)


def _env_list(envs: list[int], shown: int = 4) -> str:
    listed = ", ".join(f"env {e}" for e in envs[:shown])
    return listed + (f" and {len(envs) - shown} more" if len(envs) > shown else "")


def _process_state(pid: int) -> str:
    """``", stopped"`` for a process stopped by a signal (or another noteworthy state), else ``""``."""
    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return ""
    return {psutil.STATUS_STOPPED: ", stopped", psutil.STATUS_TRACING_STOP: ", stopped by a tracer"}.get(status, "")


def _shutdown(workers: list[WorkerHandle], timeout: float, graceful: bool, busy: set[int] = frozenset()) -> None:
    """Stop workers (gracefully if asked and possible), then kill whatever is left of their groups."""
    if graceful:
        polite = [w for w in workers if w.ring is not None and w.index not in busy and w.process.is_alive()]
        for w in polite:
            w.ring.push(Job.CLOSE)
            w.cmd_sem.release()
        deadline = time.monotonic() + timeout
        for w in polite:
            w.process.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.process.is_alive():  # it may not lead its group yet if it is still starting
            w.process.kill()
        # The worker led its own process group: this also reaches simulators it started,
        # even when the worker itself already died and they were re-parented.
        kill_group(w.process.pid)
        w.process.join(1.0)
        w.conn.close()
