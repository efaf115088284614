"""The rollout worker process: owns several envs and steps them one after another."""

from __future__ import annotations

import sys
import traceback
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle
from multiprocessing.synchronize import Semaphore
from typing import Any

import numpy as np
from gymnasium import Env
from gymnasium.vector import AutoresetMode

from vecfast.vector.process_cleanup import become_group_leader, watch_owner
from vecfast.vector.protocol import EnvStatus, Job, ring_size, spin_acquire
from vecfast.vector.shared_buffers import SharedArena, make_row_reader, make_row_writer

_FORBIDDEN_CALLS = ("reset", "step", "close", "set_wrapper_attr")


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
    envs = []
    for k, fn in enumerate(env_fns):
        try:
            envs.append(fn())
        except Exception as exc:
            conn.send(("error", (env_offset + k, *_describe(exc))))
            _close_envs(envs)
            return
    use_one_thread_per_library()
    conn.send(("spaces", [(env.observation_space, env.action_space) for env in envs], _env_facts(envs[0])))
    message = conn.recv()
    if message[0] != "attach":  # the owner gave up (another worker failed)
        _close_envs(envs)
        return
    arena = SharedArena(message[1], fd=recv_handle(conn))
    arena.close_fd()
    worker = _Worker(index, envs, env_offset, conn, arena.views(), autoreset_mode, ready_sem, countdown)
    conn.send(("attached",))
    try:
        worker.serve(cmd_sem, spin_seconds)
    finally:
        _close_envs(envs)


def use_one_thread_per_library() -> None:
    """Limit the thread pools of OpenCV and torch, if the envs loaded them, to one thread.

    Parallelism comes from the workers, one per core: a library's own pool in every worker
    oversubscribes the cores (VizDoom's OpenCV resize ran ~10% slower with 2 threads on 2 cores).
    """
    if "cv2" in sys.modules:
        sys.modules["cv2"].setNumThreads(1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _env_facts(env: Env) -> dict[str, Any]:
    return {"metadata": dict(env.metadata), "render_mode": env.render_mode}


def _describe(exc: BaseException) -> tuple[str, str, str]:
    return type(exc).__name__, str(exc), traceback.format_exc()


def _close_envs(envs: list[Env]) -> None:
    for env in envs:
        try:
            env.close()
        except Exception:
            traceback.print_exc()


class _Worker:
    def __init__(
        self,
        index: int,
        envs: list[Env],
        env_offset: int,
        conn: Connection,
        views: dict[str, Any],
        autoreset_mode: AutoresetMode,
        ready_sem: Semaphore,
        countdown: Semaphore,
    ) -> None:
        self.index = index
        self.ready_sem = ready_sem
        self.countdown = countdown
        self.envs = envs
        self.offset = env_offset
        self.conn = conn
        self.next_step_reset = autoreset_mode == AutoresetMode.NEXT_STEP
        self.same_step_reset = autoreset_mode == AutoresetMode.SAME_STEP
        self.needs_reset = [False] * len(envs)
        self.write_obs = make_row_writer(views["obs"])
        self.read_action = make_row_reader(views["action"])
        self.reward = views["reward"]
        self.terminated = views["terminated"]
        self.truncated = views["truncated"]
        self.status = views["status"]
        self.stepping = views["stepping_env"][index]
        self.ring_code = views["ring_code"][index]
        self.ring_mask = views["ring_mask"][index]
        self.ring_countdown = views["ring_countdown"][index]
        self.step_env = self._make_step_env()

    def serve(self, cmd_sem: Semaphore, spin_seconds: float) -> None:
        ring = ring_size(self.ring_mask.shape[1])
        acquire = cmd_sem.acquire
        tail = 0
        while True:
            if not acquire(False) and not spin_acquire(acquire, spin_seconds):
                acquire()
            slot = tail % ring
            tail += 1
            code = self.ring_code[slot]
            if code == Job.CLOSE:
                self.conn.send(("closed",))
                return
            if code == Job.CONTROL:
                self.conn.send(self.control(*self.conn.recv()))
                continue
            local = np.flatnonzero(self.ring_mask[slot]).tolist()
            counts_down = bool(self.ring_countdown[slot])
            if code == Job.STEP:
                self.run_job(local, self.step_env, [None] * len(local), counts_down)
            else:
                self.run_job(local, self.reset_env, self.conn.recv(), counts_down)

    def run_job(self, local: list[int], fn: Any, args: list[Any], counts_down: bool) -> None:
        """Run ``fn`` on each env, then publish results and statuses, then infos and errors by pipe.

        Scalars and statuses are written once per job, not per env: neighbouring envs of
        another worker share their cache lines, and per-env writes would bounce them.
        """
        done: list[int] = []
        rewards: list[Any] = []
        terminations: list[Any] = []
        truncations: list[Any] = []
        infos = []
        failures = []
        stepping = self.stepping
        offset = self.offset
        for k, arg in zip(local, args, strict=True):
            env_index = offset + k
            stepping[0] = env_index
            try:
                reward, terminated, truncated, info = fn(k, env_index, arg)
            except Exception as exc:
                failures.append((env_index, *_describe(exc)))
                continue
            done.append(env_index)
            rewards.append(reward)
            terminations.append(terminated)
            truncations.append(truncated)
            if info:
                infos.append((env_index, info))
        stepping[0] = -1
        self.reward[done] = rewards
        self.terminated[done] = terminations
        self.truncated[done] = truncations
        # Each status is written once, final: the owner may read it at any moment.
        outcome = dict.fromkeys(done, EnvStatus.READY)
        outcome.update((env_index, EnvStatus.READY_WITH_INFO) for env_index, _ in infos)
        outcome.update((env_index, EnvStatus.FAILED) for env_index, *_ in failures)
        self.status[list(outcome)] = list(outcome.values())
        # In a countdown batch only the job that finds no token left wakes the owner.
        if not (counts_down and self.countdown.acquire(False)):
            self.ready_sem.release()
        # Sent after the statuses: the owner reads it as soon as it sees them, so a large
        # message (final observations) can never block both sides.
        if infos or failures:
            self.conn.send((infos, failures))

    def _make_step_env(self) -> Any:
        """Build the per-env step function with everything it touches bound to locals.

        It runs once per env step, so attribute lookups are a measurable share of a
        cheap env's step (CartPole: ~7 us).
        """
        envs = self.envs
        needs_reset = self.needs_reset
        next_step_reset = self.next_step_reset
        same_step_reset = self.same_step_reset
        read_action = self.read_action
        write_obs = self.write_obs

        def step_env(k: int, env_index: int, _: None) -> tuple[Any, Any, Any, dict[str, Any]]:
            env = envs[k]
            if needs_reset[k]:
                if not next_step_reset:  # DISABLED: the owner refuses this before sending
                    raise RuntimeError("stepped a finished episode without resetting it")
                obs, info = env.reset()
                reward, terminated, truncated = 0.0, False, False
            else:
                obs, reward, terminated, truncated, info = env.step(read_action(env_index))
                if same_step_reset and (terminated or truncated):
                    final_obs, final_info = obs, info
                    obs, reset_info = env.reset()
                    info = {"final_obs": final_obs, "final_info": final_info, **reset_info}
            needs_reset[k] = not same_step_reset and bool(terminated or truncated)
            write_obs(env_index, obs)
            return reward, terminated, truncated, info

        return step_env

    def reset_env(self, k: int, env_index: int, seed_options: tuple[Any, Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
        seed, options = seed_options
        obs, info = self.envs[k].reset(seed=seed, options=options)
        self.needs_reset[k] = False
        self.write_obs(env_index, obs)
        return 0.0, False, False, info

    def control(self, request: str, local: list[int], payload: Any) -> tuple[str, Any]:
        """Answer call/get_attr/set_attr/render for the envs ``local``; errors go back too."""
        try:
            results = []
            for position, k in enumerate(local):
                env = self.envs[k]
                if request == "render":
                    results.append(env.render())
                elif request == "get_attr":
                    results.append(env.get_wrapper_attr(payload))
                elif request == "set_attr":
                    name, values = payload
                    env.set_wrapper_attr(name, values[position])
                    results.append(None)
                else:  # call
                    name, args, kwargs = payload
                    if name in _FORBIDDEN_CALLS:
                        raise ValueError(f"call({name!r}) is not allowed: use the vector env's `{name}` instead")
                    attr = env.get_wrapper_attr(name)
                    results.append(attr(*args, **kwargs) if callable(attr) else attr)
            return "ok", results
        except Exception as exc:
            return "error", (self.offset + k, *_describe(exc))
