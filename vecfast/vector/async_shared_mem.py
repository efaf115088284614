"""AsyncSharedMemVectorEnv: gymnasium's AsyncVectorEnv, several envs per worker, all data in shared memory."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import send_handle
from multiprocessing.synchronize import Semaphore
from typing import Any

import numpy as np
from gymnasium import Env, Space
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import CloudpickleWrapper, batch_differing_spaces, batch_space

from vecfast.vector.action_check import check_action_batch, check_reset_mask
from vecfast.vector.errors import EnvError, StepTimeoutError, WorkerDiedError
from vecfast.vector.process_cleanup import kill_group
from vecfast.vector.protocol import EnvStatus, Job, add_control_arrays
from vecfast.vector.shared_buffers import (
    ArenaLayout,
    SharedArena,
    assign_tree,
    check_supported_space,
    map_tree,
)
from vecfast.vector.worker import run_worker

_LIVENESS_SECONDS = 0.1  # how often a blocked wait checks that workers are alive
_READY = int(EnvStatus.READY)


@dataclass
class _WorkerHandle:
    index: int
    process: BaseProcess
    conn: Connection
    cmd_sem: Semaphore
    offset: int
    size: int
    groups: list[np.ndarray]  # local env indices of each double-buffer group
    head: int = 0

    @property
    def all_local(self) -> list[np.ndarray]:
        return [np.arange(self.size)]

    @property
    def env_range(self) -> str:
        return f"envs {self.offset}-{self.offset + self.size - 1}"

    def death_note(self) -> str:
        code = self.process.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return f"worker {self.index} (pid {self.process.pid}, {self.env_range}) died with {how}"


def _shutdown(workers: list[_WorkerHandle], ring_code: np.ndarray, timeout: float, graceful: bool) -> None:
    """Stop workers (gracefully if asked and possible), then kill whatever is left of their groups."""
    if graceful:
        for w in workers:
            if w.process.is_alive():
                ring_code[w.index, w.head % ring_code.shape[1]] = Job.CLOSE
                w.head += 1
                w.cmd_sem.release()
        deadline = time.monotonic() + timeout
        for w in workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.process.is_alive():  # it may not lead its group yet if it is still starting
            w.process.kill()
        # The worker led its own process group: this also reaches simulators it started,
        # even when the worker itself already died and they were re-parented.
        kill_group(w.process.pid)
        w.process.join(1.0)
        w.conn.close()


class AsyncSharedMemVectorEnv(VectorEnv):
    """Vectorised env with ``num_workers`` processes, each stepping several envs in turn.

    A drop-in for :class:`gymnasium.vector.AsyncVectorEnv`: same spaces, seeding,
    autoreset modes and infos (bit-identical to :class:`~gymnasium.vector.SyncVectorEnv`
    for the same seeds and actions). Observations, actions, rewards and flags live in
    one shared-memory arena; per step only a job mask and a semaphore post cross
    process boundaries.

    Besides ``step`` it offers EnvPool's asynchronous API: :meth:`async_reset`, then
    :meth:`recv` (the first ``batch_size`` envs to finish, ``info["env_id"]`` says which)
    and :meth:`send` (actions for those env ids). With ``double_buffered`` each worker's
    envs form two groups that are dispatched as separate jobs, so with
    ``batch_size=num_envs // 2`` one half steps while the caller computes actions for
    the other, as in Sample Factory's double-buffered sampling.

    Args:
        env_fns: functions that create the envs (pickled with cloudpickle).
        copy: return copies of the observations (else views that the next step overwrites).
        context: multiprocessing start method (``None``: the platform default).
        daemon: start workers as daemon processes.
        observation_mode: ``"same"``, ``"different"`` or ``(batched, single)`` spaces, as in gymnasium.
        autoreset_mode: gymnasium's :class:`~gymnasium.vector.AutoresetMode`.
        num_workers: worker processes; default ``min(os.cpu_count(), num_envs)``.
        double_buffered: split each worker's envs into two groups (see above).
        batch_size: envs returned by :meth:`recv`; default ``num_envs``.
        step_timeout: seconds to wait for envs before :class:`StepTimeoutError` names the
            env that hangs; ``None`` waits forever (dead workers are still detected).
        spin_us: microseconds a worker polls for its next job before it sleeps: polling
            saves the wake-up latency when the owner answers quickly, sleeping keeps an
            idle vector env off the CPU.
        close_timeout: seconds ``close`` waits for workers to close their envs before
            killing them.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        observation_mode: str | tuple[Space, Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        num_workers: int | None = None,
        double_buffered: bool = True,
        batch_size: int | None = None,
        step_timeout: float | None = None,
        spin_us: float = 200.0,
        close_timeout: float = 10.0,
    ) -> None:
        self.num_envs = num_envs = len(env_fns)
        if num_envs == 0:
            raise ValueError("env_fns is empty: a vector env needs at least one env")
        num_workers = min(os.cpu_count() or 1, num_envs) if num_workers is None else num_workers
        if not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be in [1, num_envs={num_envs}], got {num_workers}")
        self.batch_size = num_envs if batch_size is None else batch_size
        if not 1 <= self.batch_size <= num_envs:
            raise ValueError(f"batch_size must be in [1, num_envs={num_envs}], got {batch_size}")
        if step_timeout is not None and step_timeout <= 0:
            raise ValueError(f"step_timeout must be positive or None, got {step_timeout}")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.copy = copy
        self.num_workers = num_workers
        self.double_buffered = double_buffered
        self.step_timeout = step_timeout
        self.close_timeout = close_timeout
        self._spin_seconds = spin_us * 1e-6

        ctx = mp.get_context(context)
        self._ready_sem = ctx.Semaphore(0)
        # Jobs of one step()/reset() count down on this semaphore; only the last to finish
        # wakes the owner, so a step costs one wake-up, not one per worker.
        self._countdown = ctx.Semaphore(0)
        self._workers: list[_WorkerHandle] = []
        self._ring_code = np.zeros((num_workers, 1), np.int32)  # replaced once the arena exists
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._ring_code, close_timeout, False)
        sizes = [num_envs // num_workers + (w < num_envs % num_workers) for w in range(num_workers)]
        offset = 0
        for w, size in enumerate(sizes):
            parent_conn, child_conn = ctx.Pipe()
            cmd_sem = ctx.Semaphore(0)
            fns = [CloudpickleWrapper(fn) for fn in env_fns[offset : offset + size]]
            process = ctx.Process(
                target=run_worker,
                name=f"vecfast-worker-{w}",
                args=(
                    w,
                    fns,
                    offset,
                    child_conn,
                    cmd_sem,
                    self._ready_sem,
                    self._countdown,
                    os.getpid(),
                    self.autoreset_mode,
                    self._spin_seconds,
                ),
                daemon=daemon,
            )
            process.start()
            child_conn.close()
            half = (size + 1) // 2
            groups = [np.arange(half), np.arange(half, size)] if double_buffered and size > 1 else [np.arange(size)]
            self._workers.append(_WorkerHandle(w, process, parent_conn, cmd_sem, offset, size, groups))
            offset += size
        try:
            self._attach(observation_mode)
        except BaseException:
            self._finalizer.detach()
            _shutdown(self._workers, self._ring_code, close_timeout, graceful=False)
            raise

        self._env_worker = np.repeat(np.arange(num_workers), sizes)
        self._env_local = np.concatenate([np.arange(s) for s in sizes])
        self._all_ids = np.arange(num_envs)
        self._all_ids_list = self._all_ids.tolist()
        # Double-buffer group of each env: envs of one job share a key.
        self._group_key = np.concatenate(
            [w.index * 2 + np.repeat(np.arange(len(w.groups)), [len(g) for g in w.groups]) for w in self._workers]
        )
        self._in_flight = np.zeros(num_envs, bool)  # stepping in a worker
        self._pending = np.zeros(num_envs, bool)  # sent, not yet returned by recv/step/reset
        self._ready: deque[int] = deque()  # finished, not yet returned by recv
        self._infos: dict[int, dict[str, Any]] = {}
        self._failures: list[tuple[int, int, str, str, str]] = []
        self._finished = np.zeros(num_envs, bool)  # episode over, for AutoresetMode.DISABLED
        self._must_reset = False  # an env raised: results are incomplete until reset
        self._broken: str | None = None  # a worker died or hangs: only close() makes sense
        self._next_liveness_check = 0.0
        self._batched_action_spaces: dict[int, Space] = {num_envs: self.action_space}

    # ----------------------------------------------------------------- start-up
    def _attach(self, observation_mode: str | tuple[Space, Space]) -> None:
        """Collect every env's spaces, build the arena and hand it to the workers."""
        env_spaces: list[tuple[Space, Space]] = []
        facts: dict[str, Any] = {}
        for w in self._workers:
            kind, payload, *rest = self._receive(w, "starting its envs")
            if kind == "error":
                raise EnvError(payload[0], w.index, *payload[1:])
            env_spaces.extend(payload)
            facts = facts or rest[0]
        obs_spaces = [obs for obs, _ in env_spaces]
        self.single_action_space = env_spaces[0][1]
        if isinstance(observation_mode, tuple):
            self.observation_space, self.single_observation_space = observation_mode
        elif observation_mode == "same":
            self.single_observation_space = obs_spaces[0]
            self.observation_space = batch_space(obs_spaces[0], self.num_envs)
        elif observation_mode == "different":
            self.single_observation_space = obs_spaces[0]
            self.observation_space = batch_differing_spaces(obs_spaces)
        else:
            raise ValueError(
                f"observation_mode must be 'same', 'different' or a (batched, single) tuple, got {observation_mode!r}"
            )
        for i, (obs_space, action_space) in enumerate(env_spaces):
            if observation_mode == "same" and obs_space != self.single_observation_space:
                raise RuntimeError(
                    f"env {i} has observation space {obs_space}, env 0 has {self.single_observation_space}; "
                    "use observation_mode='different' if this is intended"
                )
            if action_space != self.single_action_space:
                raise RuntimeError(f"env {i} has action space {action_space}, env 0 has {self.single_action_space}")
        check_supported_space(self.single_observation_space, "the observation space")
        check_supported_space(self.single_action_space, "the action space")
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = facts["metadata"]
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = facts["render_mode"]

        layout = ArenaLayout()
        layout.add_space("obs", self.single_observation_space, self.num_envs)
        layout.add_space("action", self.single_action_space, self.num_envs)
        layout.add("reward", (self.num_envs,), np.float64)
        layout.add("terminated", (self.num_envs,), np.bool_)
        layout.add("truncated", (self.num_envs,), np.bool_)
        add_control_arrays(layout, self.num_envs, self.num_workers, max(w.size for w in self._workers))
        arena = SharedArena(layout)
        for w in self._workers:
            w.conn.send(("attach", layout))
            send_handle(w.conn, arena.fd, w.process.pid)
        for w in self._workers:
            self._receive(w, "attaching shared memory")
        arena.close_fd()
        views = arena.views()
        self._obs = views["obs"]
        self._actions = views["action"]
        self._rewards = views["reward"]
        self._terminations = views["terminated"]
        self._truncations = views["truncated"]
        self._status = views["status"]
        self._stepping = views["stepping_env"]
        self._ring_mask = views["ring_mask"]
        self._ring_code = views["ring_code"]
        self._ring_countdown = views["ring_countdown"]
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._ring_code, self.close_timeout, True)

    def _receive(self, w: _WorkerHandle, doing: str) -> Any:
        """Read one pipe message from worker ``w``, noticing if it dies meanwhile."""
        try:
            while not w.conn.poll(_LIVENESS_SECONDS):
                if not w.process.is_alive():
                    raise EOFError
            return w.conn.recv()
        except (EOFError, OSError):
            raise self._worker_died(w, doing) from None

    def _send(self, w: _WorkerHandle, message: Any) -> None:
        try:
            w.conn.send(message)
        except OSError:
            raise self._worker_died(w, "receiving a request") from None

    def _worker_died(self, w: _WorkerHandle, doing: str) -> WorkerDiedError:
        w.process.join(_LIVENESS_SECONDS)  # reap it, so that the note has its exit status
        self._broken = f"{w.death_note()} while {doing}"
        return WorkerDiedError(self._broken)

    # ----------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all envs (or those in ``options["reset_mask"]``), as SyncVectorEnv does."""
        targets = self._reset_targets(options)
        seeds = self._seed_list(seed)
        self._drain()
        self._dispatch_reset(targets, seeds, options, split=False, countdown=True)
        self._wait_until(len(targets))
        self._ready.clear()
        self._pending[:] = False
        return self._obs_out(), self._merged_infos()

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with its row of ``actions``; results come back in env order."""
        self._check_usable()
        if self._pending.any():
            raise AlreadyPendingCallError(
                "step() called while envs from send()/async_reset() are pending; recv() them first",
                "step",
            )
        self._prepare_actions(actions, self._all_ids)
        assign_tree(self._actions, actions)
        self._start_countdown(len(self._workers))
        for w in self._workers:
            self._push_job(w, Job.STEP, w.all_local, countdown=True)
        self._in_flight[:] = True
        self._wait_until(self.num_envs)
        self._ready.clear()
        terminations = self._terminations.copy()
        truncations = self._truncations.copy()
        self._finished = terminations | truncations
        return self._obs_out(), self._rewards.copy(), terminations, truncations, self._merged_infos()

    def render(self) -> tuple[Any, ...]:
        return tuple(self._control("render", None))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (or return the attribute if not callable)."""
        return tuple(self._control("call", (name, args, kwargs)))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(self._control("get_attr", name))

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set attribute ``name`` of every env: one value each, or the same for all."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs one value per env ({self.num_envs}), got {len(values)}")
        self._control("set_attr", (name, list(values)))

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        return self.get_attr("np_random")

    def close_extras(self, timeout: float | None = None, terminate: bool = False, **kwargs: Any) -> None:
        """Ask workers to close their envs; kill whatever has not exited after ``timeout``."""
        self._finalizer.detach()
        graceful = not terminate and self._broken is None
        _shutdown(self._workers, self._ring_code, self.close_timeout if timeout is None else timeout, graceful)

    # ----------------------------------------------------------------- EnvPool-style API
    def async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env; results arrive through :meth:`recv`."""
        self._check_open()
        seeds = self._seed_list(seed)
        self._drain()
        self._dispatch_reset(self._all_ids, seeds, options, split=self.double_buffered, countdown=False)

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Start stepping envs ``env_ids`` (default: all) with the rows of ``actions``."""
        self._check_usable()
        ids = self._all_ids if env_ids is None else np.asarray(env_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) == 0:
            raise ValueError(f"env_ids must be a non-empty 1-D integer array, got {env_ids!r}")
        if ids.min() < 0 or ids.max() >= self.num_envs or np.count_nonzero(np.bincount(ids)) != len(ids):
            raise ValueError(f"env_ids must be distinct env indices in [0, {self.num_envs}), got {ids.tolist()}")
        if self._pending[ids].any():
            raise AlreadyPendingCallError(
                f"envs {ids[self._pending[ids]].tolist()} were sent and not yet returned by recv()", "send"
            )
        self._prepare_actions(actions, ids)
        assign_tree(self._actions, actions, ids)
        self._dispatch(Job.STEP, ids, self.double_buffered, countdown=False)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Return the first ``batch_size`` envs to finish; ``info["env_id"]`` names them."""
        self._check_usable()
        pending = int(np.count_nonzero(self._pending))
        if pending < self.batch_size:
            raise RuntimeError(
                f"recv() needs {self.batch_size} envs (batch_size) but only {pending} were sent; "
                "send() more envs or use a smaller batch_size"
            )
        self._wait_until(self.batch_size)
        ids = np.array([self._ready.popleft() for _ in range(self.batch_size)])
        self._pending[ids] = False
        terminations = self._terminations[ids]
        truncations = self._truncations[ids]
        self._finished[ids] = terminations | truncations
        infos = _select_rows(self._merged_infos(ids.tolist()), ids)
        infos["env_id"] = ids
        return map_tree(lambda a: a[ids], self._obs), self._rewards[ids], terminations, truncations, infos

    # ----------------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError("this vector env is closed")
        if self._broken is not None:
            raise RuntimeError(f"this vector env cannot continue ({self._broken}); close() it")

    def _check_usable(self) -> None:
        self._check_open()
        if self._must_reset:
            raise RuntimeError("an env raised during the last step: call reset() before stepping again")

    def _control(self, request: str, payload: Any) -> list[Any]:
        """Run a control request on every env (in its worker), results in env order."""
        self._check_open()
        if self._in_flight.any():
            raise AlreadyPendingCallError(f"{request} called while envs are stepping; recv() them first", request)
        for w in self._workers:
            part = payload
            if request == "set_attr":
                part = (payload[0], payload[1][w.offset : w.offset + w.size])
            self._send(w, (request, list(range(w.size)), part))
            self._push_job(w, Job.CONTROL, w.all_local, countdown=False)
        replies = [self._receive(w, f"answering {request}") for w in self._workers]
        results = []
        for w, (outcome, body) in zip(self._workers, replies, strict=True):
            if outcome == "error":
                raise EnvError(body[0], w.index, *body[1:])
            results.extend(body)
        return results

    def _prepare_actions(self, actions: Any, ids: np.ndarray) -> None:
        space = self._batched_action_spaces.get(len(ids))
        if space is None:
            space = self._batched_action_spaces[len(ids)] = batch_space(self.single_action_space, len(ids))
        check_action_batch(space, actions, ids)
        if self.autoreset_mode == AutoresetMode.DISABLED and self._finished[ids].any():
            done = ids[self._finished[ids]].tolist()
            raise ValueError(
                f"envs {done} finished their episodes and autoreset_mode is DISABLED: "
                "reset them with reset(options={'reset_mask': mask}) before stepping"
            )

    def _seed_list(self, seed: int | list[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                f"but got length={len(seed)}."
            )
        return list(seed)

    def _reset_targets(self, options: dict[str, Any] | None) -> np.ndarray:
        self._check_open()
        if options is None or "reset_mask" not in options:
            return self._all_ids
        mask = options.pop("reset_mask")  # SyncVectorEnv pops it too
        check_reset_mask(mask, self.num_envs)
        return np.flatnonzero(mask)

    def _dispatch_reset(
        self, ids: np.ndarray, seeds: list[int | None], options: Any, split: bool, countdown: bool
    ) -> None:
        self._must_reset = False
        self._finished[ids] = False
        payload = [(seeds[e], options) for e in range(self.num_envs)]
        self._dispatch(Job.RESET, ids, split, countdown, payload)

    def _dispatch(
        self, code: Job, ids: np.ndarray, split: bool, countdown: bool, payload: list[Any] | None = None
    ) -> None:
        """Queue one job per worker (two with double buffering) covering envs ``ids``.

        ``countdown``: the caller waits for all of them, so only the last one wakes it.
        """
        keys = self._group_key[ids] if split else self._env_worker[ids] * 2
        order = np.argsort(keys, kind="stable")
        sorted_ids = ids[order]
        counts = np.bincount(keys, minlength=2 * len(self._workers)).tolist()
        if countdown:
            self._start_countdown(len(counts) - counts.count(0))
        end = 0
        for key, count in enumerate(counts):
            if count == 0:
                continue
            job_ids = sorted_ids[end : end + count]
            end += count
            w = self._workers[key // 2]
            local = job_ids - w.offset
            if payload is not None:
                self._send(w, [payload[e] for e in job_ids.tolist()])
            self._push_job(w, code, [local], countdown)
        self._in_flight[ids] = True
        self._pending[ids] = True

    def _start_countdown(self, jobs: int) -> None:
        for _ in range(jobs - 1):
            self._countdown.release()

    def _push_job(self, w: _WorkerHandle, code: Job, jobs: list[np.ndarray], countdown: bool) -> None:
        ring = self._ring_code.shape[1]
        for local in jobs:
            slot = w.head % ring
            w.head += 1
            self._ring_code[w.index, slot] = code
            self._ring_countdown[w.index, slot] = countdown
            mask = self._ring_mask[w.index, slot]
            mask[:] = False
            mask[local] = True
            w.cmd_sem.release()

    def _wait_until(self, count: int) -> None:
        """Block until ``count`` results are ready, raising on env errors, deaths or timeouts.

        Every finished job posts one token; the owner sleeps on it rather than polling,
        because on a machine with as many workers as cores a polling owner takes a core
        from a worker. A token can be stale (an earlier scan took its envs): then the scan
        finds nothing and the owner sleeps again.
        """
        now = time.monotonic()
        deadline = None if self.step_timeout is None else now + self.step_timeout
        if now > self._next_liveness_check:  # a dead worker must not go unnoticed while others keep up
            self._next_liveness_check = now + _LIVENESS_SECONDS
            self._check_workers(None)
        acquire = self._ready_sem.acquire
        while len(self._ready) < count:
            while not acquire(timeout=_LIVENESS_SECONDS):
                self._check_workers(deadline)
            self._collect()

    def _collect(self) -> None:
        """Move finished envs to the ready queue, reading their infos and errors."""
        # Workers keep writing statuses; a snapshot is consistent because only the owner
        # sets a non-zero status back to zero.
        snapshot = self._status.copy()
        if not self._ready and (snapshot == _READY).all():  # step(): everything back, no infos
            self._status[:] = 0
            self._in_flight[:] = False
            self._ready.extend(self._all_ids_list)
            return
        done = snapshot.nonzero()[0]
        if done.size == 0:
            return
        if (snapshot[done] != _READY).any():
            self._receive_messages(done[snapshot[done] != _READY].tolist())
        self._status[done] = 0
        self._in_flight[done] = False
        self._ready.extend(done.tolist())
        if self._failures:
            failure = self._failures[0]
            self._failures.clear()
            self._must_reset = True
            raise EnvError(*failure)

    def _receive_messages(self, env_indices: list[int]) -> None:
        """Read the pipe messages that carry these envs' infos or errors."""
        for env_index in env_indices:
            while env_index not in self._infos and not any(f[0] == env_index for f in self._failures):
                w = self._workers[self._env_worker[env_index]]
                infos, failures = self._receive(w, f"sending the info of env {env_index}")
                self._infos.update(infos)
                self._failures.extend((e, w.index, *rest) for e, *rest in failures)

    def _check_workers(self, deadline: float | None) -> None:
        for w in self._workers:
            if not w.process.is_alive():
                raise self._worker_died(w, "stepping")
        if deadline is not None and time.monotonic() > deadline:
            hanging = [
                f"env {e} (worker {w.index})" for w in self._workers if (e := int(self._stepping[w.index, 0])) >= 0
            ]
            self._broken = f"{', '.join(hanging) or 'no env'} did not finish within step_timeout={self.step_timeout} s"
            raise StepTimeoutError(self._broken)

    def _drain(self) -> None:
        """Wait out envs still stepping (after an error) so a reset starts from a clean slate."""
        try:
            while self._in_flight.any():
                try:
                    self._wait_until(len(self._ready) + int(self._in_flight.sum()))
                except EnvError:
                    continue
        finally:
            self._ready.clear()
            self._pending[:] = False
            self._infos.clear()

    def _obs_out(self) -> Any:
        return map_tree(np.copy, self._obs) if self.copy else self._obs

    def _merged_infos(self, ids: list[int] | None = None) -> dict[str, Any]:
        """Merge (and forget) the infos of envs ``ids`` (default: all), env-indexed as gymnasium does."""
        infos: dict[str, Any] = {}
        for env_index in sorted(self._infos if ids is None else self._infos.keys() & ids):
            infos = self._add_info(infos, self._infos.pop(env_index), env_index)
        return infos


def _select_rows(infos: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
    """Re-index env-indexed info arrays (and their ``_key`` masks) to batch positions."""
    return {key: _select_rows(value, ids) if isinstance(value, dict) else value[ids] for key, value in infos.items()}
