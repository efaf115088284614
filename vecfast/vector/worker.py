"""The rollout worker process: owns several envs and steps them one after another."""

from __future__ import annotations

import contextlib
import functools
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle
from multiprocessing.synchronize import Semaphore
from typing import Any

from gymnasium import Env
from gymnasium.vector import AutoresetMode

from vecfast.vector.messages import (
    Attach,
    Attached,
    Closed,
    ControlReply,
    ControlRequest,
    EnvFailure,
    JobReport,
    StartFailed,
    WorkerStarted,
)
from vecfast.vector.process_cleanup import become_group_leader, watch_owner
from vecfast.vector.protocol import Job, JobRing, ResultCounters, spin_acquire
from vecfast.vector.restarts import RESTARTED
from vecfast.vector.shared_buffers import SharedArena, bank_buffers, space_buffer

FORBIDDEN_CALLS = ("reset", "step", "close")  # the vector env's own methods do these
FROM_BUFFER = object()  # the env's action is in the shared action buffer (a pickled action may be None)


def run_worker(
    index: int,
    env_fns: list[Any],
    env_offset: int,
    conn: Connection,
    cmd_sem: Semaphore,
    ready_sem: Semaphore,
    countdown: Semaphore,
    owner_pid: int,
    autoreset_mode: AutoresetMode,
    spin_seconds: float,
) -> None:
    """Process entry point: build the envs, report their spaces, then serve jobs."""
    become_group_leader()
    watch_owner(owner_pid)
    opencv_inherited = sys.modules.get("cv2") is not None  # loaded by the owner before it forked this process
    envs: list[Env] = []
    for k, fn in enumerate(env_fns):
        try:
            env = fn()
            for j, other in enumerate(envs):
                if env is other:
                    raise ValueError(
                        f"env_fns[{env_offset + k}] returned the same env object as env_fns[{env_offset + j}]; "
                        "each env function must create a new env"
                    )
            envs.append(env)
        except Exception as exc:
            conn.send(StartFailed(EnvFailure.capture(exc, env_offset + k, index)))
            _close_envs(envs)
            return
    use_one_thread_per_library(opencv=not opencv_inherited)
    first = envs[0]
    conn.send(
        WorkerStarted(
            [(env.observation_space, env.action_space) for env in envs], dict(first.metadata), first.render_mode
        )
    )
    message = conn.recv()
    if not isinstance(message, Attach):  # the owner gave up (another worker failed)
        _close_envs(envs)
        return
    if message.arena_name is not None:
        arena = SharedArena(message.layout, name=message.arena_name)
    else:
        arena = SharedArena(message.layout, fd=recv_handle(conn))
    arena.seal()
    worker = _Worker(
        index, envs, env_fns, env_offset, conn, arena.views(), message, autoreset_mode, ready_sem, countdown
    )
    conn.send(Attached())
    try:
        worker.serve(cmd_sem, spin_seconds)
    finally:
        _close_envs(envs)


def use_one_thread_per_library(opencv: bool = True) -> None:
    """Limit the thread pools of OpenCV and torch, if the envs loaded them, to one thread.

    Parallelism comes from the workers, one per core: a library's own pool in every worker
    oversubscribes the cores (VizDoom's OpenCV resize ran ~10% slower with 2 threads on 2 cores).
    ``opencv=False`` leaves OpenCV alone: in a child forked after the parent ran OpenCV's pool,
    ``setNumThreads`` waits forever for pool threads that only the parent has.
    """
    if opencv and sys.modules.get("cv2") is not None:
        sys.modules["cv2"].setNumThreads(1)
    if sys.modules.get("torch") is not None:
        sys.modules["torch"].set_num_threads(1)


def _close_envs(envs: list[Env]) -> None:
    for env in envs:
        try:
            env.close()
        except Exception:
            traceback.print_exc()


StepResult = tuple[Any, Any, Any, Any, dict[str, Any]]  # obs, reward, terminated, truncated, info


class _Worker:
    def __init__(
        self,
        index: int,
        envs: list[Env],
        env_fns: list[Any],
        env_offset: int,
        conn: Connection,
        views: dict[str, Any],
        attach: Attach,
        autoreset_mode: AutoresetMode,
        ready_sem: Semaphore,
        countdown: Semaphore,
    ) -> None:
        self.index = index
        self.ready_sem = ready_sem
        self.countdown = countdown
        self.envs = envs
        self.env_fns = env_fns
        self.restart_failed_envs = attach.restart_failed_envs
        # What each env last returned: its final observation if it must be rebuilt. A replacement worker gets its
        # predecessor's, and owes each env's caller the end of the episode that was lost (settle_owed).
        self.last_obs: list[Any] = [None] * len(envs) if attach.last_obs is None else list(attach.last_obs)
        self.owing: set[int] = set() if attach.last_obs is None else set(range(len(envs)))
        self.offset = env_offset
        self.conn = conn
        self.ring = JobRing(views, index)
        self.next_step_reset = autoreset_mode == AutoresetMode.NEXT_STEP
        self.same_step_reset = autoreset_mode == AutoresetMode.SAME_STEP
        self.needs_reset = [False] * len(envs)
        # Observations of a space kept out of shared memory go back in the job's report;
        # actions that do not fit the action buffer come in the job's payload.
        # The observation batch is kept attach.observation_banks times over; each job says which one to write.
        obs_space = attach.observation_space
        self.obs_buffers = (
            None if obs_space is None else bank_buffers(obs_space, views["obs"], attach.observation_banks)
        )
        self.action_buffer = None if attach.action_space is None else space_buffer(attach.action_space, views["action"])
        self.reward = views["reward"]
        self.terminated = views["terminated"]
        self.truncated = views["truncated"]
        self.counters = ResultCounters(views)
        self.progress = views["progress"][index]  # [env being stepped, jobs started]
        self.progress[0] = -1  # none yet
        self.step_env = self._make_step_env()

    def serve(self, cmd_sem: Semaphore, spin_seconds: float) -> None:
        acquire = cmd_sem.acquire
        while True:
            if not acquire(False) and not spin_acquire(acquire, spin_seconds):
                acquire()
            job = self.ring.pop()
            if job.code == Job.CLOSE:
                self.conn.send(Closed())
                return
            if job.code == Job.CONTROL:
                self.conn.send(self.control(job.local_envs, self.conn.recv()))
                continue
            args = self.conn.recv().args if job.has_payload else None
            resetting = job.code == Job.RESET
            if self.owing:  # a replacement's first job for an env: the episode its predecessor lost ends here
                fn = functools.partial(self.settle_owed, resetting)
            else:
                fn = self.reset_env if resetting else self.step_env
            self.run_job(job.local_envs, fn, args, job.counts_down, job.obs_bank, resetting)

    def run_job(
        self,
        local: list[int],
        fn: Callable[[int, int, Any], StepResult],
        args: list[Any] | None,
        counts_down: bool,
        obs_bank: int,
        resetting: bool,
    ) -> None:
        """Run ``fn`` on each env, then publish results and count the envs finished, then a report by pipe.

        Scalars and counters are written once per job, not per env: neighbouring envs of
        another worker share their cache lines, and per-env writes would bounce them.
        """
        done: list[int] = []
        obs_buffer = None if self.obs_buffers is None else self.obs_buffers[obs_bank]
        rewards: list[Any] = []
        terminations: list[Any] = []
        truncations: list[Any] = []
        report = JobReport()
        progress = self.progress
        progress[1] += 1
        offset = self.offset
        from_buffer = FROM_BUFFER
        for position, k in enumerate(local):
            env_index = offset + k
            progress[0] = env_index
            try:
                obs, reward, terminated, truncated, info = fn(
                    k, env_index, from_buffer if args is None else args[position]
                )
                if obs_buffer is None:
                    report.observations[env_index] = obs
                else:
                    obs_buffer.write(env_index, obs)
            except Exception as exc:
                failure = EnvFailure.capture(exc, env_index, self.index)
                if not self.restart_failed_envs:
                    report.failures[env_index] = failure
                    continue
                try:
                    obs, reward, terminated, truncated, info = self.rebuilt(
                        k, None if args is None else args[position], resetting
                    )
                    if obs_buffer is None:
                        report.observations[env_index] = obs
                    else:
                        obs_buffer.write(env_index, obs)
                except Exception as rebuild_exc:
                    report.failures[env_index] = EnvFailure.capture(rebuild_exc, env_index, self.index)
                    continue
                report.restarted[env_index] = failure
            done.append(env_index)
            rewards.append(reward)
            terminations.append(terminated)
            truncations.append(truncated)
            if info:
                report.infos[env_index] = info
        progress[0] = -1
        self.reward[done] = rewards
        self.terminated[done] = terminations
        self.truncated[done] = truncations
        # Counted once per job, final: the owner may read the counters at any moment.
        reported = (
            report.infos.keys() | report.observations.keys() | report.failures.keys() | report.restarted.keys()
            if report
            else None
        )
        self.counters.count_finished([offset + k for k in local], reported)
        # In a countdown batch only the job that finds no token left wakes the owner.
        if not (counts_down and self.countdown.acquire(False)):
            self.ready_sem.release()
        # Sent after the counts: the owner reads it as soon as it sees them, so a large
        # message (observations) can never block both sides.
        if report:
            self.conn.send(report)

    def _make_step_env(self) -> Callable[[int, int, Any], StepResult]:
        """Build the per-env step function with everything it touches bound to locals.

        It runs once per env step, so attribute lookups are a measurable share of a
        cheap env's step (CartPole: ~7 us).
        """
        envs = self.envs
        needs_reset = self.needs_reset
        last_obs = self.last_obs
        next_step_reset = self.next_step_reset
        same_step_reset = self.same_step_reset
        read_action = None if self.action_buffer is None else self.action_buffer.read_row
        from_buffer = FROM_BUFFER

        def step_env(k: int, env_index: int, action: Any) -> StepResult:
            env = envs[k]
            # NEXT_STEP's reset, or a replaced env's (under DISABLED an ended episode is stepped, as gymnasium does)
            if needs_reset[k]:
                obs, info = env.reset()
                reward, terminated, truncated = 0.0, False, False
            else:
                obs, reward, terminated, truncated, info = env.step(
                    read_action(env_index) if action is from_buffer else action
                )
                if same_step_reset and (terminated or truncated):
                    final_obs, final_info = obs, info
                    obs, reset_info = env.reset()
                    info = {"final_obs": final_obs, "final_info": final_info, **reset_info}
            needs_reset[k] = next_step_reset and bool(terminated or truncated)
            last_obs[k] = obs
            return obs, reward, terminated, truncated, info

        return step_env

    def reset_env(self, k: int, env_index: int, seed_options: tuple[Any, Any]) -> StepResult:
        seed, options = seed_options
        obs, info = self.envs[k].reset(seed=seed, options=options)
        self.needs_reset[k] = False
        self.last_obs[k] = obs
        return obs, 0.0, False, False, info

    def rebuilt(self, k: int, reset_args: tuple[Any, Any] | None, resetting: bool) -> StepResult:
        """Replace env ``k``, which just raised, by a new one from its env function; the job's result for it
        (:meth:`restarted`)."""
        with contextlib.suppress(Exception):  # a broken env may not close cleanly; its worker group is reaped
            self.envs[k].close()
        self.envs[k] = self.env_fns[k]()
        return self.restarted(k, reset_args, resetting)

    def restarted(self, k: int, reset_args: tuple[Any, Any] | None, resetting: bool) -> StepResult:
        """The result of a job for env ``k``, new in place of one that failed.

        A reset is done on the new env. A step ends the lost episode as truncated with the last observation
        the old env returned; the new env then resets where the autoreset mode says: on the next step
        (NEXT_STEP, DISABLED: the caller resets it), or now (SAME_STEP: the reset observation, the last one as
        ``final_obs``)."""
        if resetting:
            obs, _, _, _, info = self.reset_env(k, -1, reset_args if reset_args is not None else (None, None))
            return obs, 0.0, False, False, {**info, RESTARTED: True}
        final_obs = self.last_obs[k]
        if self.same_step_reset:
            obs, info = self.envs[k].reset()
            self.needs_reset[k] = False
            self.last_obs[k] = obs
            return obs, 0.0, False, True, {"final_obs": final_obs, "final_info": {}, **info, RESTARTED: True}
        self.needs_reset[k] = True
        return final_obs, 0.0, False, True, {RESTARTED: True}

    def settle_owed(self, resetting: bool, k: int, env_index: int, arg: Any) -> StepResult:
        """A job's env function while some envs are new in a replacement worker: an env's first job ends the
        episode its predecessor lost (:meth:`restarted`); the others run as usual."""
        if k in self.owing:
            self.owing.discard(k)
            return self.restarted(k, arg if resetting else None, resetting)
        return self.reset_env(k, env_index, arg) if resetting else self.step_env(k, env_index, arg)

    def control(self, local: list[int], request: ControlRequest) -> ControlReply:
        """Answer call/get_attr/set_attr/render for the envs ``local``; errors go back too."""
        results = []
        for position, k in enumerate(local):
            env = self.envs[k]
            try:
                if request.kind == "render":
                    results.append(env.render())
                elif request.kind == "get_attr":
                    results.append(env.get_wrapper_attr(request.name))
                elif request.kind == "set_attr":
                    env.set_wrapper_attr(request.name, request.values[position])
                    results.append(None)
                else:  # call
                    if request.name in FORBIDDEN_CALLS:
                        name = request.name
                        raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly.")
                    if callable(request.name):  # vecfast's extension: a function of the env
                        results.append(request.name(env, *request.args, **request.kwargs))
                        continue
                    attr = env.get_wrapper_attr(request.name)
                    results.append(attr(*request.args, **request.kwargs) if callable(attr) else attr)
            except Exception as exc:
                return ControlReply(results, EnvFailure.capture(exc, self.offset + k, self.index))
        return ControlReply(results)
