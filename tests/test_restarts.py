"""Restarts of failed envs (``restart_failed_workers=True``): the env that failed comes back rebuilt, truncated,
and every other env's results are exactly those of gymnasium's SyncVectorEnv stepping the same envs."""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium.vector import AutoresetMode
from helpers import descendants, shm_entries, vizdoom_shm_left, wait_gone

from vecfast.vector import EnvError, WorkerDiedError

NUM_ENVS = 4
FAILING = 2


class FailsAtStep(gym.Wrapper):
    """Raises on step ``at`` of each env it wraps (counted over the env's life, across resets)."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action: Any):
        self.steps += 1
        if self.steps == self.at:
            raise RuntimeError(f"failed at step {self.at}")
        return self.env.step(action)


def cartpole(index: int, fail_at: int | None = None) -> gym.Env:
    env = gym.make("CartPole-v1")
    return env if fail_at is None or index != FAILING else FailsAtStep(env, fail_at)


def fns(fail_at: int | None) -> list[functools.partial]:
    return [functools.partial(cartpole, i, fail_at) for i in range(NUM_ENVS)]


def others(array: np.ndarray) -> np.ndarray:
    return np.delete(array, FAILING, axis=0)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_an_env_that_raises_is_rebuilt_and_returns_truncated_with_its_last_observation(make_async, mode):
    vec = make_async(fns(fail_at=3), num_workers=2, autoreset_mode=mode, restart_failed_workers=True)
    ref = gym.vector.SyncVectorEnv(fns(None), autoreset_mode=mode)
    obs, _ = vec.reset(seed=7)
    ref_obs, _ = ref.reset(seed=7)
    np.testing.assert_array_equal(obs, ref_obs)
    actions = np.array([1, 0, 1, 0])
    for _ in range(2):
        last = obs
        obs, rewards, terminations, truncations, infos = vec.step(actions)
        ref_obs, *_ = ref.step(actions)
        np.testing.assert_array_equal(obs, ref_obs)
    last = obs
    obs, rewards, terminations, truncations, infos = vec.step(actions)  # env 2's third step raises
    ref_obs, ref_rewards, ref_terminations, ref_truncations, _ = ref.step(actions)
    np.testing.assert_array_equal(others(obs), others(ref_obs))
    np.testing.assert_array_equal(others(rewards), others(ref_rewards))
    np.testing.assert_array_equal(others(truncations), others(ref_truncations))
    assert truncations[FAILING] and not terminations[FAILING] and rewards[FAILING] == 0.0
    assert infos["restarted"].tolist() == [False, False, True, False]
    if mode == AutoresetMode.NEXT_STEP:
        np.testing.assert_array_equal(obs[FAILING], last[FAILING])  # its last observation
    else:
        np.testing.assert_array_equal(infos["final_obs"][FAILING], last[FAILING])
        assert np.abs(obs[FAILING]).max() <= 0.05  # the new env's reset observation
    (restart,) = vec.restarts
    assert (restart.worker, restart.env_indices, restart.cause) == (1, (FAILING,), "raised")
    assert restart.exc_type == "RuntimeError" and "failed at step 3" in restart.traceback
    obs, rewards, terminations, truncations, infos = vec.step(actions)  # the others go on as before
    ref_obs, *_ = ref.step(actions)
    np.testing.assert_array_equal(others(obs), others(ref_obs))
    if mode == AutoresetMode.NEXT_STEP:  # the rebuilt env resets on its next step
        assert rewards[FAILING] == 0.0 and np.abs(obs[FAILING]).max() <= 0.05
    assert len(vec.restarts) == 1
    ref.close()


def test_past_max_restarts_within_the_window_the_failure_raises(make_async):
    vec = make_async(fns(fail_at=2), num_workers=2, restart_failed_workers=True, max_restarts=1)
    vec.reset(seed=0)
    actions = np.zeros(NUM_ENVS, np.int64)
    vec.step(actions)
    _, _, _, truncations, infos = vec.step(actions)  # the first failure: rebuilt
    assert truncations[FAILING] and infos["restarted"][FAILING]
    vec.step(actions)  # the rebuilt env resets (NEXT_STEP)
    vec.step(actions)  # and steps once
    with pytest.raises(RuntimeError, match="failed at step 2") as raised:
        vec.step(actions)  # its second failure is one restart too many
    assert isinstance(raised.value, EnvError) and raised.value.env_index == FAILING
    assert len(vec.restarts) == 1
    with pytest.raises(RuntimeError, match=r"envs \[2\] raised during their last step or reset: reset them first"):
        vec.step(actions)
    vec.reset(seed=1)
    vec.step(actions)


class FailsFirstReset(gym.Wrapper):
    """The first instance (in any process) raises on reset; ``marker`` records that it did."""

    def __init__(self, env: gym.Env, marker: Path) -> None:
        super().__init__(env)
        self.marker = marker

    def reset(self, **kwargs: Any):
        if not self.marker.exists():
            self.marker.touch()
            raise OSError("the first reset fails")
        return self.env.reset(**kwargs)


def test_a_failed_reset_is_done_again_on_the_rebuilt_env(make_async, tmp_path):
    marker = tmp_path / "failed_once"
    env_fns = [lambda: gym.make("CartPole-v1")] * NUM_ENVS
    env_fns[FAILING] = lambda: FailsFirstReset(gym.make("CartPole-v1"), marker)
    vec = make_async(env_fns, num_workers=2, restart_failed_workers=True)
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * NUM_ENVS)
    obs, infos = vec.reset(seed=3)
    ref_obs, _ = ref.reset(seed=3)
    np.testing.assert_array_equal(obs, ref_obs)  # the same seed, on the new env
    assert infos["restarted"].tolist() == [False, False, True, False]
    assert [r.exc_type for r in vec.restarts] == ["OSError"]
    ref.close()


def test_without_restarts_an_env_that_raises_raises_as_in_gymnasium(make_async):
    vec = make_async(fns(fail_at=1), num_workers=2)
    vec.reset(seed=0)
    with pytest.raises(RuntimeError, match="failed at step 1"):
        vec.step(np.zeros(NUM_ENVS, np.int64))
    assert vec.restarts == []


def doom_basic() -> gym.Env:  # runs in the workers
    import vecfast  # noqa: F401  (registers the ids)

    return gym.make("vecfast/DoomBasic-v0")


@pytest.mark.timeout(120)
def test_a_killed_vizdoom_game_counts_as_its_env_raising_and_leaves_nothing_after_close(make_async):
    """A game process SIGKILLed under a running env: the env is rebuilt with a new game, the other env's game
    goes on, and after close() no game process or VizDoom /dev/shm entry of either is left."""
    shm_before = shm_entries()
    vec = make_async([doom_basic] * 2, num_workers=2, restart_failed_workers=True)
    vec.reset(seed=0)
    workers = [psutil.Process(pid) for pid in vec.worker_pids]
    games = {w.pid: [c for c in w.children(recursive=True) if c.name() == "vizdoom"] for w in workers}
    (victim,) = games[workers[0].pid]
    (survivor,) = games[workers[1].pid]
    victim.kill()
    victim.wait(10)
    actions = np.zeros(vec.action_space.shape, vec.action_space.dtype)
    _, _, terminations, truncations, infos = vec.step(actions)
    assert truncations.tolist() == [True, False] and not terminations[0]
    assert infos["restarted"].tolist() == [True, False]
    (restart,) = vec.restarts
    assert (restart.worker, restart.env_indices, restart.cause) == (0, (0,), "raised")
    for _ in range(5):
        vec.step(actions)  # the rebuilt env resets, then plays on with its new game
    (new_game,) = [c for c in workers[0].children(recursive=True) if c.name() == "vizdoom"]
    assert new_game.pid != victim.pid and survivor.is_running()
    everything = [*workers, new_game, survivor]
    vec.close()
    assert wait_gone(everything, timeout=10) == []
    assert vizdoom_shm_left(shm_before) == set()


class DiesAtStep(gym.Wrapper):
    """Ends its worker process on its step ``at``, once (``marker`` records it): ``how`` is ``"segfault"`` (a
    real one: reading address 0), ``"exit"`` (``sys.exit(3)``), ``"sigkill"``, or ``"stop"`` (SIGSTOP)."""

    def __init__(self, env: gym.Env, at: int, how: str, marker: Path) -> None:
        super().__init__(env)
        self.at, self.how, self.marker, self.steps = at, how, marker, 0

    def step(self, action: Any):
        self.steps += 1
        if self.steps == self.at and not self.marker.exists():
            self.marker.touch()
            if self.how == "segfault":
                faulthandler.disable()  # pytest's, inherited: the crash is meant, its dump is noise
                ctypes.string_at(0)
            elif self.how == "exit":
                sys.exit(3)
            else:
                os.kill(os.getpid(), signal.SIGKILL if self.how == "sigkill" else signal.SIGSTOP)
        return self.env.step(action)


def dying(index: int, how: str, marker: Path) -> gym.Env:
    env = gym.make("CartPole-v1")
    return DiesAtStep(env, 3, how, marker) if index == FAILING else env


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "how, cause, exit_status",
    [
        ("sigkill", "died", "signal SIGKILL"),
        ("segfault", "died", "signal SIGSEGV"),
        ("exit", "died", "exit code 3"),
        ("stop", "stalled", None),
    ],
)
def test_a_dead_or_stalled_worker_is_replaced_and_its_envs_end_their_episodes_truncated(
    make_async, tmp_path, how, cause, exit_status
):
    """Env 2 ends its worker (envs 2 and 3) during its third step; the step returns envs 0 and 1 exactly as
    gymnasium's SyncVectorEnv does, envs 2 and 3 truncated with their last observations; a new worker carries on
    and nothing is left after close()."""
    marker = tmp_path / "died_once"
    env_fns = [functools.partial(dying, i, how, marker) for i in range(NUM_ENVS)]
    vec = make_async(env_fns, num_workers=2, restart_failed_workers=True, step_timeout=2.0)
    ref = gym.vector.SyncVectorEnv(fns(None))
    obs, _ = vec.reset(seed=5)
    ref.reset(seed=5)
    actions = np.array([0, 1, 0, 1])
    for _ in range(2):
        obs, *_ = vec.step(actions)
        ref.step(actions)
    dead = psutil.Process(vec.worker_pids[1])
    last = obs
    obs, rewards, terminations, truncations, infos = vec.step(actions)
    ref_obs, ref_rewards, *_ = ref.step(actions)
    np.testing.assert_array_equal(obs[:FAILING], ref_obs[:FAILING])
    np.testing.assert_array_equal(rewards[:FAILING], ref_rewards[:FAILING])
    assert truncations.tolist() == [False, False, True, True] and not terminations.any()
    assert infos["restarted"].tolist() == [False, False, True, True]
    np.testing.assert_array_equal(obs[FAILING:], last[FAILING:])
    (restart,) = vec.restarts
    assert (restart.worker, restart.env_indices, restart.cause, restart.exit_status) == (1, (2, 3), cause, exit_status)
    assert vec.worker_pids[1] != dead.pid and not dead.is_running()
    obs, rewards, *_ = vec.step(actions)  # the new envs reset (NEXT_STEP); the others go on exactly
    ref_obs, *_ = ref.step(actions)
    np.testing.assert_array_equal(obs[:FAILING], ref_obs[:FAILING])
    assert rewards[FAILING:].tolist() == [0.0, 0.0] and np.abs(obs[FAILING:]).max() <= 0.05
    obs, rewards, *_ = vec.step(actions)
    assert rewards.tolist() == [1.0] * NUM_ENVS
    processes = descendants()
    vec.close()
    assert wait_gone(processes, timeout=10) == []
    ref.close()


@pytest.mark.timeout(60)
def test_a_worker_killed_while_half_its_envs_wait_in_recv_is_replaced(make_async):
    """Double-buffered send/recv: one half of each worker's envs steps while the caller holds the other. A worker
    SIGKILLed between two sends: its envs in flight come back truncated, the envs it held end their episodes on
    their next send, and every env id keeps coming back."""
    vec = make_async(fns(None), num_workers=2, batch_size=2, restart_failed_workers=True)
    vec.async_reset(seed=0)
    seen_restarted: set[int] = set()
    for i in range(100):  # the owner looks at its workers every 0.1 s: 10 ms per round after the kill
        if i > 3:
            time.sleep(0.01)
        obs, rewards, terminations, truncations, infos = vec.recv()
        ids = infos["env_id"]
        if "restarted" in infos:
            restarted = ids[infos["restarted"]]
            assert truncations[infos["restarted"]].all()
            seen_restarted.update(restarted.tolist())
        if i == 3:
            os.kill(vec.worker_pids[0], signal.SIGKILL)
        vec.send(np.zeros(len(ids), np.int64), ids)
    assert seen_restarted == {0, 1}
    assert [r.env_indices for r in vec.restarts] == [(0, 1)]


class Suicidal(gym.Wrapper):
    def die(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_call_that_kills_the_workers_raises_and_the_envs_go_on(make_async):
    vec = make_async([lambda: Suicidal(gym.make("CartPole-v1"))] * NUM_ENVS, num_workers=2, restart_failed_workers=True)
    vec.reset(seed=0)
    with pytest.raises(WorkerDiedError, match="worker 0 .* died with signal SIGKILL while answering a call"):
        vec.call("die")
    assert [(r.worker, r.cause) for r in vec.restarts] == [(0, "died")]
    _, _, _, truncations, infos = vec.step(np.zeros(NUM_ENVS, np.int64))  # worker 1 died of the call too
    assert truncations.all() and infos["restarted"].all()
    assert [(r.worker, r.cause) for r in vec.restarts] == [(0, "died"), (1, "died")]
    assert vec.call("spec")[0].id == "CartPole-v1"
