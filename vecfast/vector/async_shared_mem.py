"""AsyncSharedMemVectorEnv: gymnasium's AsyncVectorEnv, several envs per worker, all data in shared memory."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
from gymnasium import Env, Space, logger
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_differing_spaces, batch_space, iterate

from vecfast.vector.action_check import check_action_batch, check_reset_mask
from vecfast.vector.env_states import EnvState, EnvStates
from vecfast.vector.errors import WorkerDiedError
from vecfast.vector.messages import Attach, ControlReply, ControlRequest, JobPayload, JobReport, pickled
from vecfast.vector.observation_banks import LENDING_BANKS, ObservationBanks, worth_lending
from vecfast.vector.protocol import Job, JobRing, ResultCounters, reserve_result_arrays
from vecfast.vector.restarts import Restart, RestartBudget
from vecfast.vector.shared_buffers import (
    ArenaLayout,
    PickledBuffer,
    SharedArena,
    bank_buffers,
    fits_shared_memory,
    space_buffer,
)
from vecfast.vector.stall_watch import StallWatch
from vecfast.vector.worker_pool import LIVENESS_SECONDS, WorkerHandle, WorkerPool

_BUSY_CLOSE_GRACE = 1.0  # seconds close() waits for envs still inside an abandoned call


class _WorkerReplaced(Exception):
    """A collect pass waited on a worker that was replaced meanwhile."""


@dataclass
class _PendingCall:
    """A gymnasium-style call started by ``*_async`` and not yet collected by ``*_wait``."""

    name: str  # "reset", "step" or "call", as gymnasium's AsyncState names them
    ids: np.ndarray  # the envs it runs on
    reached: list[int] = field(default_factory=list)  # call: the workers it was sent to
    replies: dict[int, ControlReply] = field(default_factory=dict)  # call: worker -> reply, as they arrive


class AsyncSharedMemVectorEnv(VectorEnv):
    """Vectorised env with ``num_workers`` processes, each stepping several envs in turn.

    A drop-in for :class:`gymnasium.vector.AsyncVectorEnv`: the same constructor, spaces,
    seeding, autoreset modes, infos and split API (``reset_async``/``reset_wait``,
    ``step_async``/``step_wait``, ``call_async``/``call_wait`` with gymnasium's errors),
    and the results of :class:`~gymnasium.vector.SyncVectorEnv` for the same seeds and
    actions. Observations of fixed-size spaces, actions, rewards and flags live in one
    shared-memory arena; per step only a job mask and a semaphore post cross process
    boundaries. An env's exception is raised as its own type (and as
    :class:`~vecfast.vector.EnvError`, naming the env and carrying its traceback).

    Besides ``step`` it offers EnvPool's asynchronous API: :meth:`async_reset`, then
    :meth:`recv` (the first ``batch_size`` envs to finish, ``info["env_id"]`` says which)
    and :meth:`send` (actions for those env ids). With ``double_buffered`` each worker's
    envs form two groups that are dispatched as separate jobs, so with
    ``batch_size=num_envs // 2`` one half steps while the caller computes actions for
    the other, as in Sample Factory's double-buffered sampling.

    Spaces: Box, Discrete, MultiDiscrete, MultiBinary, Text and OneOf (nested in Dict
    and Tuple) live in shared memory. Graph, Sequence and custom spaces, or every space
    with ``shared_memory=False``, travel pickled through the worker's pipe: one message
    per env per step, which costs tens of microseconds plus the pickling of the value.
    Each env receives its action as gymnasium's ``iterate(action_space, actions)`` gives
    it: a batch that is a numpy array of the action space's dtype goes through shared
    memory, any other (another dtype, lists, Python numbers) is pickled element by element,
    so a float64 batch for a float32 Box reaches the envs as float64, as in gymnasium.

    Args:
        env_fns: functions that create the envs (pickled with cloudpickle).
        shared_memory: keep observations in shared memory where their space allows it.
        copy: return copies of the observations (else views that the next step overwrites).
        context: multiprocessing start method (``None``: the platform default; spawn where shared memory
            takes the portable path, :func:`~vecfast.vector.shared_buffers.portable_shared_memory`).
        daemon: start workers as daemon processes.
        worker: gymnasium's custom worker function; vecfast's workers cannot run one.
        observation_mode: ``"same"``, ``"different"`` or ``(batched, single)`` spaces, as in gymnasium.
        autoreset_mode: gymnasium's :class:`~gymnasium.vector.AutoresetMode`.
        max_concurrency: the most envs stepping at once; vecfast's workers step their envs
            one after another, so this caps ``num_workers``.
        num_workers: worker processes; default ``min(os.cpu_count(), num_envs)``.
        double_buffered: split each worker's envs into two groups (see above).
        batch_size: envs returned by :meth:`recv`; default ``num_envs``.
        step_timeout: longest an env's step (or reset) may take, and longest a worker that
            owes results may go without starting one: past it, :class:`~vecfast.vector.StepTimeoutError`
            names the env and the worker (stuck in an env, or stopped), even while other
            workers keep ``recv`` busy. ``None`` waits forever (dead workers are still detected).
            Settable on a live env.
        start_timeout: longest the env constructors (``env_fns``) may take: past it,
            :class:`~vecfast.vector.StartTimeoutError` names the workers still building
            envs, and every worker is stopped. ``None`` waits forever, as gymnasium does.
        spin_us: microseconds a worker polls for its next job before it sleeps: polling
            saves the wake-up latency when the owner answers quickly, sleeping keeps an
            idle vector env off the CPU.
        close_timeout: seconds ``close`` waits for workers to close their envs before
            killing them.
        check_actions: also check that actions lie in the action space (bounds,
            integer values, no NaN) before any env steps, raising
            :class:`~vecfast.vector.InvalidActionError`; by default, as gymnasium, the
            env gets whatever the caller passed.
        restart_failed_workers: heal instead of raising. An env that raises (or whose game process
            died) is rebuilt from its env function in its worker; the call that found the failure returns
            it with ``truncated=True``, its last observation and ``info["restarted"]`` (under SAME_STEP, the
            new env's reset observation, the last one as ``final_obs``), and the other envs' results as they
            are. A failed reset is done again on the new env. Each restart is appended to :attr:`restarts`.
            Default False: raise, as gymnasium does.
        max_restarts, restart_window: past ``max_restarts`` restarts within ``restart_window`` seconds a
            failure raises as it would without restarts (an env that fails that often is broken).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: str | tuple[Space, Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        max_concurrency: int | None = None,
        *,
        num_workers: int | None = None,
        double_buffered: bool = True,
        batch_size: int | None = None,
        step_timeout: float | None = None,
        start_timeout: float | None = None,
        spin_us: float = 200.0,
        close_timeout: float = 10.0,
        check_actions: bool = False,
        restart_failed_workers: bool = False,
        max_restarts: int = 20,
        restart_window: float = 600.0,
    ) -> None:
        if worker is not None:
            raise ValueError(
                "AsyncSharedMemVectorEnv runs several envs per worker process with its own worker loop; "
                "a custom gymnasium `worker` function cannot run in it (use gymnasium.vector.AsyncVectorEnv)"
            )
        self.env_fns = env_fns
        self.num_envs = num_envs = len(env_fns)
        if num_envs == 0:
            raise ValueError("env_fns is empty: a vector env needs at least one env")
        if max_concurrency is not None:  # gymnasium's checks and words
            if not isinstance(max_concurrency, (int, np.integer)):
                raise ValueError(
                    f"`max_concurrency` must be an integer or None, got {type(max_concurrency)} ({max_concurrency!r})."
                )
            if max_concurrency < 1:
                raise ValueError(f"`max_concurrency` must be a positive or None, got {max_concurrency}.")
        most = min(os.cpu_count() or 1, num_envs, max_concurrency or num_envs)
        num_workers = most if num_workers is None else num_workers
        if not 1 <= num_workers <= min(num_envs, max_concurrency or num_envs):
            cap = "" if max_concurrency is None else f" and max_concurrency={max_concurrency}"
            raise ValueError(f"num_workers must be in [1, num_envs={num_envs}{cap}], got {num_workers}")
        self.batch_size = num_envs if batch_size is None else batch_size
        if not 1 <= self.batch_size <= num_envs:
            raise ValueError(f"batch_size must be in [1, num_envs={num_envs}], got {batch_size}")
        for name, value in (("step_timeout", step_timeout), ("start_timeout", start_timeout)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        if isinstance(observation_mode, tuple):
            if len(observation_mode) != 2 or not all(isinstance(s, Space) for s in observation_mode):
                raise TypeError(f"observation_mode as a tuple must be (batched, single) Spaces, got {observation_mode}")
        elif observation_mode not in ("same", "different"):
            raise ValueError(
                "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch "
                f"observation space, actual got {observation_mode}"
            )
        self.shared_memory = shared_memory
        self.copy = copy
        self.context = context
        self.daemon = daemon
        self.observation_mode = observation_mode
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.max_concurrency = max_concurrency
        self.num_workers = num_workers
        self.double_buffered = double_buffered
        self.step_timeout = step_timeout
        self.close_timeout = close_timeout
        self.check_actions = check_actions
        self.restart_failed_workers = restart_failed_workers
        self.restarts: list[Restart] = []  # every restart so far, oldest first
        self._restart_budget = RestartBudget(max_restarts, restart_window)
        self._reset_args: dict[int, tuple[Any, Any]] = {}  # each env's last reset's (seed, options), with restarts
        self._start_timeout = start_timeout

        self._pool = WorkerPool(
            env_fns, num_workers, context, daemon, self.autoreset_mode, spin_us * 1e-6, double_buffered, close_timeout
        )
        try:
            self._attach(start_timeout)
        except BaseException:
            self._pool.shutdown(close_timeout, graceful=False)
            raise
        self._all_ids = np.arange(num_envs)
        self._call: _PendingCall | None = None
        self._next_liveness_check = 0.0
        self._batched_action_spaces: dict[int, Space] = {num_envs: self.action_space}
        self._jobs_of_all: dict[bool, list[tuple[Any, np.ndarray]]] = {}  # split -> the jobs covering every env

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes (each leads a process group with what its envs start)."""
        return self._pool.pids

    @property
    def processes(self) -> list[BaseProcess]:
        """The worker processes, as gymnasium's AsyncVectorEnv names them (one per worker here, not per env)."""
        return [w.process for w in self._pool.workers]

    # ----------------------------------------------------------------- start-up
    def _attach(self, start_timeout: float | None) -> None:
        """Check every env's spaces, build the arena and hand it to the workers."""
        reports = self._pool.started(start_timeout)
        env_spaces = [spaces for report in reports for spaces in report.spaces]
        self._set_spaces(env_spaces)
        self.metadata = reports[0].metadata
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = reports[0].render_mode

        obs_space = self.single_observation_space
        obs_shared = self.shared_memory and fits_shared_memory(obs_space)
        obs_banks = LENDING_BANKS if obs_shared and self.copy and worth_lending(obs_space, self.num_envs) else 1
        actions_shared = fits_shared_memory(self.single_action_space)
        layout = ArenaLayout()
        if obs_shared:
            layout.add_space("obs", obs_space, self.num_envs, banks=obs_banks)
        if actions_shared:
            layout.add_space("action", self.single_action_space, self.num_envs)
        layout.add("reward", (self.num_envs,), np.float64)
        layout.add("terminated", (self.num_envs,), np.bool_)
        layout.add("truncated", (self.num_envs,), np.bool_)
        reserve_result_arrays(layout, self.num_envs, self.num_workers)
        JobRing.reserve(layout, self.num_workers, max(w.size for w in self._pool.workers))
        arena = SharedArena(layout)
        self._pool.attach(
            arena,
            Attach(
                layout,
                obs_space if obs_shared else None,
                self.single_action_space if actions_shared else None,
                obs_banks,
                restart_failed_envs=self.restart_failed_workers,
            ),
            keep=self.restart_failed_workers,  # replacement workers attach to it too
        )
        if not self.restart_failed_workers:
            arena.seal()
        views = arena.views()
        pickled_obs = None if obs_shared else PickledBuffer(obs_space, self.num_envs)
        if obs_shared:
            lending = (arena, layout.specs["obs"]) if obs_banks > 1 else (None, None)
            self._obs = ObservationBanks(bank_buffers(obs_space, views["obs"], obs_banks), self.num_envs, *lending)
        else:
            self._obs = ObservationBanks([pickled_obs], self.num_envs)
        self._actions = space_buffer(self.single_action_space, views["action"]) if actions_shared else None
        self._rewards = views["reward"]
        self._terminations = views["terminated"]
        self._truncations = views["truncated"]
        self._stall_watch = StallWatch(views["progress"], self._pool.env_worker)
        self._envs = EnvStates(
            self.num_envs,
            ResultCounters(views),
            pickled_obs,
            track_jobs=self.restart_failed_workers,
        )

    def _set_spaces(self, env_spaces: list[tuple[Space, Space]]) -> None:
        """gymnasium's spaces and its checks of every env's spaces against them."""
        obs_spaces = [obs for obs, _ in env_spaces]
        self.single_action_space = env_spaces[0][1]
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        if isinstance(self.observation_mode, tuple):
            self.observation_space, self.single_observation_space = self.observation_mode
        else:
            self.single_observation_space = obs_spaces[0]
            same = self.observation_mode == "same"
            self.observation_space = (
                batch_space(obs_spaces[0], self.num_envs) if same else batch_differing_spaces(obs_spaces)
            )
        for i, (obs_space, action_space) in enumerate(env_spaces):
            if self.observation_mode == "same" and obs_space != self.single_observation_space:
                raise RuntimeError(
                    "AsyncSharedMemVectorEnv(..., observation_mode='same') however some of the sub-environments "
                    f"observation spaces are not equivalent: env {i}'s {obs_space} differs from env 0's "
                    f"{self.single_observation_space}. If this is intentional, use `observation_mode='different'` "
                    "instead."
                )
            if self.observation_mode != "same" and not is_space_dtype_shape_equiv(
                self.single_observation_space, obs_space
            ):
                raise RuntimeError(
                    "AsyncSharedMemVectorEnv(..., observation_mode='different' or custom space) however the "
                    "sub-environment's observation spaces do not share a common shape and dtype: "
                    f"env {i}'s {obs_space} against the single observation space {self.single_observation_space}."
                )
            if action_space != self.single_action_space:
                raise RuntimeError(
                    f"Env {i} has action space {action_space}, different from `{self.single_action_space}`. "
                    "In order to batch actions, the action spaces from all environments must be equal."
                )

    # ----------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all envs (or those in ``options["reset_mask"]``), as SyncVectorEnv does."""
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting; :meth:`reset_wait` returns the results."""
        self._check_no_call("reset_async")
        seeds = self._seed_list(seed)
        targets = self._reset_targets(options)
        self._discard_sent()
        self._start_reset(targets, seeds, options, split=False, countdown=True)
        self._call = _PendingCall("reset", targets)

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """Wait for the reset started by :meth:`reset_async` (``multiprocessing.TimeoutError``
        after ``timeout`` seconds; the reset stays pending and can be waited for again)."""
        call = self._collect_call("reset", timeout)
        infos = self._take(self._rows(call.ids))
        return self._obs.read(None, self.copy), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with its row of ``actions``; results come back in env order."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Start stepping every env; :meth:`step_wait` returns the results."""
        self._check_no_call("step_async")
        if self._envs.any_busy():
            raise AlreadyPendingCallError(
                "step() called while envs sent with send()/async_reset() (or by an interrupted call) are out; "
                "recv() them, or reset()",
                "send",
            )
        args = self._prepare_step(actions, self._all_ids)
        self._dispatch(Job.STEP, self._all_ids, split=False, countdown=True, args=args)
        self._call = _PendingCall("step", self._all_ids)

    def step_wait(self, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Wait for the step started by :meth:`step_async` (``multiprocessing.TimeoutError``
        after ``timeout`` seconds; the step stays pending and can be waited for again)."""
        call = self._collect_call("step", timeout)
        infos = self._take(self._rows(call.ids))
        terminations = self._terminations.copy()
        truncations = self._truncations.copy()
        return self._obs.read(None, self.copy), self._rewards.copy(), terminations, truncations, infos

    def call(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (or return the attribute if not callable).

        vecfast also takes a picklable function for ``name``: each worker runs
        ``name(env, *args, **kwargs)`` on its envs, for code that must run next to the env
        (inspecting its wrapper chain, say) and whose results pickle where the env may not.
        """
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str | Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        self._check_no_call("call_async")
        self._control(ControlRequest("call", name, args, kwargs))

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        self._check_open()
        if self._call is None or self._call.name != "call":
            raise NoAsyncCallError("Calling `call_wait` without any prior call to `call_async`.", "call")
        return tuple(self._control_results(timeout))

    def render(self) -> tuple[Any, ...] | None:
        return self.call("render")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env; a method is called, as gymnasium's AsyncVectorEnv does."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set attribute ``name`` of every env: one value each, or the same for all."""
        self._check_open()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        self._check_no_call("set_attr")
        self._control(ControlRequest("set_attr", name, values=list(values)))
        self._control_results(None)

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        return self.get_attr("np_random")

    def close_extras(self, timeout: float | None = None, terminate: bool = False, **kwargs: Any) -> None:
        """Ask workers to close their envs; kill whatever has not exited after ``timeout``.

        A call still pending (started and not waited for, or whose wait timed out or was
        interrupted) is warned about as gymnasium does, finished or not, and with
        ``terminate`` too. Envs still inside an abandoned call get a second to finish;
        workers still busy then are killed, not waited for.
        """
        if not hasattr(self, "_envs"):  # the constructor failed; it stopped the workers itself
            return
        if self._call is not None:
            logger.warn(f"Calling `close` while waiting for a pending call to `{self._call.name}` to complete.")
        timeout = self.close_timeout if timeout is None else timeout
        busy: set[int] = set()
        if not terminate and self._pool.broken is None and self._envs.any_running():
            with contextlib.suppress(Exception):  # a failure there is no reason not to close
                self._wait(lambda: not self._envs.any_running(), min(timeout, _BUSY_CLOSE_GRACE))
            running = self._envs.in_state(EnvState.RUNNING)
            busy = set(self._pool.env_worker[running].tolist())
        self._pool.shutdown(timeout, graceful=not terminate, busy=busy)

    # ----------------------------------------------------------------- EnvPool-style API
    def async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env; results arrive through :meth:`recv`."""
        self._check_no_call("async_reset")
        seeds = self._seed_list(seed)
        self._discard_sent()
        self._start_reset(self._all_ids, seeds, options, split=self.double_buffered, countdown=False)

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Start stepping envs ``env_ids`` (default: all) with the rows of ``actions``."""
        self._check_no_call("send")
        ids = self._all_ids if env_ids is None else np.asarray(env_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) == 0:
            raise ValueError(f"env_ids must be a non-empty 1-D integer array, got {env_ids!r}")
        if ids.min() < 0 or ids.max() >= self.num_envs or np.count_nonzero(np.bincount(ids)) != len(ids):
            raise ValueError(f"env_ids must be distinct env indices in [0, {self.num_envs}), got {ids.tolist()}")
        busy = self._envs.busy(ids)
        if len(busy):
            raise AlreadyPendingCallError(f"envs {busy.tolist()} were sent and not yet returned by recv()", "send")
        args = self._prepare_step(actions, ids)
        self._dispatch(Job.STEP, ids, split=self.double_buffered, countdown=False, args=args)

    def recv(
        self, env_ids: Sequence[int] | np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Return the first ``batch_size`` envs to finish, or envs ``env_ids`` (sent and not yet returned) once they
        all have; ``info["env_id"]`` names them."""
        self._check_no_call("recv")
        if env_ids is None:
            outstanding = len(self._envs.busy())
            if outstanding < self.batch_size:
                raise RuntimeError(
                    f"recv() needs {self.batch_size} envs (batch_size) but only {outstanding} were sent; "
                    "send() more envs or use a smaller batch_size"
                )
            self._wait(lambda: self._envs.count(EnvState.DONE) >= self.batch_size)
            ids = self._envs.first_done(self.batch_size)
        else:
            ids = np.asarray(env_ids)
            unsent = np.setdiff1d(ids, self._envs.busy(ids))
            if len(unsent):
                raise NoAsyncCallError(f"recv() of envs {unsent.tolist()}, which were not sent", "recv")
            self._wait(lambda: len(self._envs.in_state(EnvState.DONE, ids)) == len(ids))
        infos = _select_rows(self._take(ids), ids)
        infos["env_id"] = ids
        return (
            self._obs.read(ids, self.copy),
            self._rewards[ids],
            self._terminations[ids],
            self._truncations[ids],
            infos,
        )

    # ----------------------------------------------------------------- dispatch
    def _dispatch(
        self, code: int, ids: np.ndarray, split: bool, countdown: bool, args: dict[int, Any] | None = None
    ) -> None:
        """Queue one job per worker (one per double-buffer group with ``split``) covering envs ``ids``.

        ``countdown``: the caller waits for all of them, so only the last one wakes it.
        ``args``: per-env arguments that travel with the jobs (see :class:`JobPayload`).
        """
        jobs = self._jobs(ids, split)
        # Pickled before any job starts: a payload that does not pickle fails the call, not half of it.
        payloads = [
            None if args is None else pickled(JobPayload([args[e] for e in env_ids.tolist()])) for _, env_ids in jobs
        ]
        if countdown:
            self._pool.start_countdown(len(jobs))
        obs_bank = self._obs.write_bank
        pushed = 0
        try:
            for (w, job_ids), payload in zip(jobs, payloads, strict=True):
                self._pool.push(w, code, job_ids - w.offset, countdown, payload, obs_bank)
                pushed += 1
        finally:  # only the pushed jobs' envs started (Ctrl-C may come between two pushes)
            sent = self._rows(ids)
            if pushed < len(jobs):
                sent = np.concatenate([np.empty(0, np.int64), *(job_ids for _, job_ids in jobs[:pushed])])
            self._envs.send(sent, code)
            self._obs.writing(sent)

    def _jobs(self, ids: np.ndarray, split: bool) -> list[tuple[Any, np.ndarray]]:
        """(worker, env ids) of each job; the jobs covering every env are computed once."""
        every = ids is self._all_ids
        if every and split in self._jobs_of_all:
            return self._jobs_of_all[split]
        keys = self._pool.group_key[ids] if split else self._pool.env_worker[ids] * 2
        order = np.argsort(keys, kind="stable")
        bounds = np.cumsum(np.bincount(keys, minlength=2 * self.num_workers))
        sorted_ids = ids[order]
        jobs = [
            (self._pool.workers[key // 2], sorted_ids[start:end])
            for key, (start, end) in enumerate(zip(np.concatenate([[0], bounds[:-1]]), bounds, strict=True))
            if end > start
        ]
        if every:
            self._jobs_of_all[split] = jobs
        return jobs

    def _start_reset(
        self, ids: np.ndarray, seeds: list[int | None], options: Any, split: bool, countdown: bool
    ) -> None:
        args = {e: (seeds[e], options) for e in ids.tolist()}
        if self.restart_failed_workers:  # what a replacement worker needs to do a reset its predecessor lost
            self._reset_args.update(args)
        self._dispatch(Job.RESET, ids, split, countdown, args)

    def _prepare_step(self, actions: Any, ids: np.ndarray) -> dict[int, Any] | None:
        """Check that envs ``ids`` can step and place their actions; per-env actions if they travel pickled."""
        rows = self._rows(ids)
        if self._envs.any_failed and len(stale := self._envs.in_state(EnvState.FAILED, ids)):
            raise RuntimeError(f"envs {stale.tolist()} raised during their last step or reset: reset them first")
        space = self._batched_action_space(len(ids))
        if self.check_actions:
            check_action_batch(space, actions, ids)
        if self._actions is not None and self._actions.assign(rows, actions):
            return None
        # As gymnasium does: split the batch per env (its TypeError for a batch that is not
        # one), and hand each env its own value.
        per_env = list(iterate(space, actions))
        if len(per_env) != len(ids):
            raise ValueError(f"got {len(per_env)} actions for {len(ids)} envs: the batch needs one action per env")
        return dict(zip(ids.tolist(), per_env, strict=True))

    def _batched_action_space(self, n: int) -> Space:
        if n not in self._batched_action_spaces:
            self._batched_action_spaces[n] = batch_space(self.single_action_space, n)
        return self._batched_action_spaces[n]

    def _control(self, request: ControlRequest) -> None:
        """Start a control request on every env (in its worker); :meth:`_control_results` collects it."""
        if self._envs.any_busy():
            raise AlreadyPendingCallError(
                f"`{request.kind}` called while envs sent with send() are not yet returned by recv()", "send"
            )
        workers = self._pool.workers
        # Pickled before any worker gets one: arguments that do not pickle fail the call, not half of it.
        messages = [
            pickled(request if request.values is None else request.for_envs(w.offset, w.offset + w.size))
            for w in workers
        ]
        call = self._call = _PendingCall("call", self._all_ids)
        for w, message in zip(workers, messages, strict=True):
            self._pool.send(w, message)
            self._pool.push(w, Job.CONTROL, np.arange(w.size))
            call.reached.append(w.index)

    def _control_results(self, timeout: float | None) -> list[Any]:
        """Every worker's reply to the pending control request, results in env order."""
        call = self._call
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in (self._pool.workers[i] for i in call.reached):
            if w.index not in call.replies:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    reply = self._pool.receive(w, "answering a call", left)
                except WorkerDiedError as died:  # the call is lost; with restarts the envs go on
                    self._call = None
                    self._heal(w, "died", died)
                    raise
                if reply is None:
                    raise mp.TimeoutError(f"The call to `call_wait` has timed out after {timeout} second(s).")
                call.replies[w.index] = reply
        self._call = None
        if len(call.reached) < self.num_workers:
            raise RuntimeError(
                "the call was interrupted before it reached every worker; its partial results were dropped: call again"
            )
        replies = [call.replies[w.index] for w in self._pool.workers]
        failure = next((r.failure for r in replies if r.failure is not None), None)
        if failure is not None:
            raise failure.to_error()
        return [result for reply in replies for result in reply.results]

    # ----------------------------------------------------------------- collect
    def _collect_call(self, name: str, timeout: float | None) -> _PendingCall:
        """Wait until every env of the pending ``name`` call is done; the call is then over."""
        self._check_open()
        call = self._call
        if call is None or call.name != name:
            raise NoAsyncCallError(f"Calling `{name}_wait` without any prior call to `{name}_async`.", name)
        rows = self._rows(call.ids)
        doing = "resetting" if name == "reset" else "stepping"
        if not self._wait(lambda: not self._envs.any_running(rows), timeout, doing):
            raise mp.TimeoutError(f"The call to `{name}_wait` has timed out after {timeout} second(s).")
        self._call = None
        return call

    def _wait(self, until: Callable[[], bool], timeout: float | None = None, doing: str = "stepping") -> bool:
        """Collect finished envs until ``until()`` holds; False if ``timeout`` passes first.

        Every finished job (or batch of countdown jobs) posts one token; the owner sleeps
        on it rather than polling, because on a machine with as many workers as cores a
        polling owner takes a core from a worker. A token can be stale (an earlier scan
        took its envs): then the scan finds nothing and the owner sleeps again. Raises if
        a worker dies, or if a worker makes no progress for ``step_timeout``.
        """
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        if now > self._next_liveness_check:  # a dead or stalled worker must not go unnoticed while others keep up
            self._next_liveness_check = now + LIVENESS_SECONDS
            self._check_workers(now, doing)
        acquire = self._pool.ready_sem.acquire
        while not until():
            wake = LIVENESS_SECONDS if deadline is None else min(LIVENESS_SECONDS, max(0.0, deadline - now))
            if not acquire(timeout=wake):
                now = time.monotonic()
                self._check_workers(now, doing)
                if deadline is not None and now >= deadline:
                    self._collect()
                    return until()
            self._collect()
        return True

    def _check_workers(self, now: float, doing: str) -> None:
        """Raise (or with restarts, replace the worker) if a worker died, or (with a ``step_timeout``) stalled while
        it owes results."""
        for w in self._pool.dead():
            self._heal(w, "died", self._pool.died(w, doing))
        if self.step_timeout is None:
            return
        owed = self._envs.owed()
        stalled = self._stall_watch.stalled(now, owed, self.step_timeout)
        if len(stalled):
            progress, env_worker = self._stall_watch.marks, self._pool.env_worker
            error = self._pool.hung(
                {
                    int(w): (
                        int(progress[w, 0]),
                        owed[env_worker[owed] == w].tolist(),
                        self._stall_watch.quiet_for(w, now),
                    )
                    for w in stalled
                },
                self.step_timeout,
            )
            for w in stalled.tolist():
                self._heal(self._pool.workers[w], "stalled", error)

    def _heal(self, w: WorkerHandle, cause: str, error: Exception) -> None:
        """Replace worker ``w`` (``cause``: it ``"died"`` or ``"stalled"``), or raise ``error`` without restarts or
        past their budget. Its envs' jobs in progress are sent again to the replacement, which ends each of its
        envs' episodes on their next job, truncated with their last observation (as for an env that raised)."""
        if not self.restart_failed_workers or not self._restart_budget.allows(time.monotonic()):
            raise error
        exit_status = w.exit_status() if cause == "died" else None
        ids = np.arange(w.offset, w.offset + w.size)
        running = self._envs.lost(ids)
        last = self._obs.last_written(ids, np.isin(ids, running))
        batch = batch_space(self.single_observation_space, len(ids))
        self._pool.replace(w, list(iterate(batch, last)), self._start_timeout)
        self.restarts.append(Restart.of_worker(w.index, tuple(ids.tolist()), cause, exit_status, error))
        for code in (Job.STEP, Job.RESET):
            again = running[self._envs.job[running] == code]
            for bank in np.unique(self._obs.latest[again]).tolist():
                job_ids = again[self._obs.latest[again] == bank]
                payload = None
                if code == Job.RESET:
                    payload = pickled(JobPayload([self._reset_args.get(e, (None, None)) for e in job_ids.tolist()]))
                self._pool.push(w, code, job_ids - w.offset, False, payload, bank)

    def _collect(self) -> None:
        """Move envs whose workers finished them to DONE, reading the reports they left on the pipe."""
        while True:
            try:
                self._envs.collect(self._report_of)
                return
            except _WorkerReplaced:  # the pass waited on a worker that died: look again
                continue

    def _report_of(self, env_index: int) -> JobReport:
        """The next report on the pipe of env ``env_index``'s worker, which counted the env finished before sending it:
        a worker stopped between the two owes no env step, so only this wait can time it."""
        w = self._pool.workers[self._pool.env_worker[env_index]]
        try:
            report: JobReport | None = self._pool.receive(
                w, f"sending the results of env {env_index}", self.step_timeout
            )
        except WorkerDiedError as died:
            self._heal(w, "died", died)
            raise _WorkerReplaced from None
        if report is None:
            self._heal(w, "stalled", self._pool.silent(w, env_index, self.step_timeout))
            raise _WorkerReplaced
        for restarted, failure in report.restarted.items():
            if self._restart_budget.allows(time.monotonic()):
                self.restarts.append(Restart.of_env(failure))
            else:  # over budget: the failure is raised as it would be without restarts
                report.failures[restarted] = failure
        return report

    def _rows(self, ids: np.ndarray) -> np.ndarray | slice:
        """``ids`` as an index: a slice for every env, which numpy handles without a gather."""
        return slice(None) if ids is self._all_ids else ids

    def _take(self, ids: np.ndarray | slice) -> dict[str, Any]:
        """Return DONE envs ``ids`` to IDLE: their infos merged as gymnasium does; an env's failure raises."""
        infos, failure = self._envs.take(ids)
        if failure is not None:
            raise failure.to_error()
        merged: dict[str, Any] = {}
        for env_index, info in infos:
            merged = self._add_info(merged, info, env_index)
        return merged

    def _discard_sent(self) -> None:
        """Finish and drop envs sent with send()/async_reset() and not received, so a reset starts clean."""
        self._wait(lambda: not self._envs.any_running())
        self._envs.take(self._envs.in_state(EnvState.DONE))

    # ----------------------------------------------------------------- checks
    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(f"Trying to operate on `{type(self).__name__}`, after a call to `close()`.")
        if self._pool.broken is not None:
            raise RuntimeError(f"this vector env cannot continue ({self._pool.broken}); close() it")

    def _check_no_call(self, method: str) -> None:
        self._check_open()
        if self._call is not None:
            name = self._call.name
            raise AlreadyPendingCallError(
                f"Calling `{method}` while waiting for a pending call to `{name}` to complete "
                f"(an earlier call was interrupted or not waited for): call `{name}_wait()` to collect it, "
                "or close() the vector env",
                name,
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
        if options is None or "reset_mask" not in options:
            return self._all_ids
        mask = options.pop("reset_mask")  # gymnasium's vector envs pop it too
        check_reset_mask(mask, self.num_envs)
        return np.flatnonzero(mask)


def _select_rows(infos: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
    """Re-index env-indexed info arrays (and their ``_key`` masks) to batch positions."""
    return {key: _select_rows(value, ids) if isinstance(value, dict) else value[ids] for key, value in infos.items()}
