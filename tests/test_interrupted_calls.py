"""A call that is interrupted (Ctrl-C, a wait timeout) never makes a later call return wrong data.

After an interrupted ``step()`` the next call either returns exactly its own results or
raises gymnasium's ``AlreadyPendingCallError`` saying how to collect the pending one;
waiting again collects it; an env that hangs makes calls fail fast, not block.
"""

from __future__ import annotations

import functools
import multiprocessing
import signal
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError

NUM_ENVS = 6


class SleepyCounter(gym.Env):
    """Observation ``[index, steps since reset]``; each reset and step sleeps ``seconds`` (env ``hang``'s
    steps sleep an hour)."""

    observation_space = spaces.Box(0, np.inf, (2,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self, index: int, seconds: float, hang: int | None = None) -> None:
        self.index = index
        self.seconds = 3600.0 if index == hang else seconds
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        time.sleep(self.seconds if self.seconds < 60 else 0.0)
        self.t = 0
        return np.array([self.index, 0.0]), {}

    def step(self, action: Any):
        time.sleep(self.seconds)
        self.t += 1
        return np.array([self.index, float(self.t)]), 0.0, False, False, {}

    def ping(self) -> int:
        time.sleep(self.seconds)
        return self.index


def sleepy_fns(seconds: float, hang: int | None = None) -> list[functools.partial]:
    return [functools.partial(SleepyCounter, i, seconds, hang) for i in range(NUM_ENVS)]


def interrupt_after(seconds: float) -> threading.Timer:
    """Ctrl-C in the main thread after ``seconds`` (as a user would press it)."""
    timer = threading.Timer(seconds, signal.raise_signal, (signal.SIGINT,))
    timer.start()
    return timer


ACTIONS = np.zeros(NUM_ENVS, np.int64)


@pytest.mark.timeout(60)
def test_after_an_interrupted_step_the_next_step_never_returns_stale_rows(make_async):
    """Old behaviour: envs still running the interrupted step finished later and the next
    step() returned their (older) rows for some envs."""
    vec = make_async(sleepy_fns(0.05), num_workers=3)  # 2 envs per worker: a step takes 0.1 s
    vec.reset(seed=0)
    interrupt_after(0.03)
    with pytest.raises(KeyboardInterrupt):
        vec.step(ACTIONS)
    with pytest.raises(AlreadyPendingCallError, match=r"step_wait\(\)"):
        vec.step(ACTIONS)
    with pytest.raises(AlreadyPendingCallError):
        vec.reset()
    obs, *_ = vec.step_wait()  # the interrupted step, whole
    assert obs[:, 1].tolist() == [1.0] * NUM_ENVS
    obs, *_ = vec.step(ACTIONS)  # then exactly its own results
    assert obs[:, 1].tolist() == [2.0] * NUM_ENVS
    obs, _ = vec.reset()
    assert obs[:, 1].tolist() == [0.0] * NUM_ENVS


@pytest.mark.timeout(60)
@pytest.mark.parametrize("call", ["step", "reset"])
def test_a_wait_timeout_leaves_the_call_pending_and_waiting_again_collects_it(make_async, call):
    vec = make_async(sleepy_fns(0.1), num_workers=3)
    vec.reset(seed=0)
    if call == "step":
        vec.step_async(ACTIONS)
    else:
        vec.reset_async(seed=1)
    wait = getattr(vec, f"{call}_wait")
    with pytest.raises(multiprocessing.TimeoutError):
        wait(timeout=0.01)
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(ACTIONS)
    results = wait(timeout=10)
    assert results[0][:, 1].tolist() == [1.0 if call == "step" else 0.0] * NUM_ENVS
    with pytest.raises(NoAsyncCallError):
        wait()


@pytest.mark.timeout(60)
def test_a_hanging_env_after_an_interrupted_step_fails_fast(make_async):
    """Old behaviour: reset() blocked forever (step_timeout=None), then close() waited close_timeout."""
    vec = make_async(sleepy_fns(0.0, hang=4), num_workers=3, close_timeout=30)
    vec.reset(seed=0)
    interrupt_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        vec.step(ACTIONS)
    started = time.monotonic()
    with pytest.raises(AlreadyPendingCallError):
        vec.reset()
    with pytest.raises(multiprocessing.TimeoutError):
        vec.step_wait(timeout=0.2)
    with pytest.warns(UserWarning, match="pending call to `step`"):
        vec.close()
    assert time.monotonic() - started < 5.0, "close() waited for the hanging env"
    assert all(not p.is_alive() for p in vec.processes)


@pytest.mark.timeout(60)
def test_an_interrupted_call_wait_keeps_the_replies_that_arrived(make_async):
    vec = make_async(sleepy_fns(0.0), num_workers=3)
    vec.reset(seed=0)
    vec.call_async("index")  # an attribute: returned as it is
    assert vec.call_wait(timeout=10) == tuple(range(NUM_ENVS))
    vec.set_attr("seconds", [0.0, 0.0, 0.0, 0.0, 0.5, 0.5])  # the last worker answers late
    vec.call_async("ping")
    with pytest.raises(AlreadyPendingCallError):
        vec.call_async("index")
    with pytest.raises(multiprocessing.TimeoutError):
        vec.call_wait(timeout=0.1)
    assert vec.call_wait(timeout=10) == tuple(range(NUM_ENVS))


def test_env_fns_returning_one_env_object_are_refused(process_guard):
    """Old behaviour: envs on one worker shared the object and stepped it several times per step."""
    from vecfast import AsyncSharedMemVectorEnv

    shared = SleepyCounter(0, 0.0)
    with pytest.raises(ValueError, match="same env object"):
        AsyncSharedMemVectorEnv([lambda: shared] * 4, num_workers=2, context="fork")


@pytest.mark.timeout(60)
def test_actions_that_do_not_pickle_fail_the_step_before_any_env_steps(make_async):
    """Actions that do not fit the action buffer travel pickled; one that cannot be pickled
    must fail the whole step, not leave half the envs stepped and the next step short."""
    vec = make_async(sleepy_fns(0.0), num_workers=3)
    vec.reset(seed=0)
    unpicklable = [0] * (NUM_ENVS - 1) + [lambda: 0]  # an object array: it travels pickled
    with pytest.raises(Exception, match="pickle|lambda"):
        vec.step(unpicklable)
    obs, *_ = vec.step(ACTIONS)
    assert obs[:, 1].tolist() == [1.0] * NUM_ENVS
    with pytest.raises(Exception, match="pickle|lambda"):
        vec.call("ping", lambda: 0)  # an argument that does not pickle: no worker is asked
    assert vec.call("ping") == tuple(range(NUM_ENVS))


class RaisesOnOne(gym.Env):
    """Observation ``[index, steps since reset]``; action 1 raises."""

    observation_space = spaces.Box(0, np.inf, (2,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self, index: int) -> None:
        self.index, self.t = index, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.index, 0.0]), {}

    def step(self, action: Any):
        if action == 1:
            raise ValueError(f"env {self.index} was told to fail")
        self.t += 1
        return np.array([self.index, float(self.t)]), 0.0, False, False, {}


@pytest.mark.timeout(60)
def test_an_env_that_raised_needs_a_reset_still_after_a_reset_interrupted_before_it_reached_its_worker(
    make_async, monkeypatch
):
    """Old behaviour: starting a reset cleared every target's "raised" mark before the jobs went out, so Ctrl-C
    between two of them left an env that had raised, and was never reset, ready to step its stale state."""
    vec = make_async([functools.partial(RaisesOnOne, i) for i in range(NUM_ENVS)], num_workers=3)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="env 4 was told to fail"):
        vec.step(np.array([0, 0, 0, 0, 1, 0]))
    push, pushes = vec._pool.push, []

    def interrupted_push(*args: Any, **kwargs: Any) -> None:
        pushes.append(args)
        if len(pushes) == 2:  # Ctrl-C after the first job (env 0: a double-buffered env splits each worker's) went out
            raise KeyboardInterrupt
        push(*args, **kwargs)

    monkeypatch.setattr(vec._pool, "push", interrupted_push)
    with pytest.raises(KeyboardInterrupt):
        vec.async_reset(seed=1)
    monkeypatch.setattr(vec._pool, "push", push)
    obs, *_, info = vec.recv([0])  # the env whose reset went out
    assert obs[:, 1].tolist() == [0.0] and info["env_id"].tolist() == [0]
    with pytest.raises(RuntimeError, match=r"envs \[4\] raised during their last step or reset: reset them first"):
        vec.send(np.array([0]), env_ids=[4])
    vec.send(np.array([0, 0]), env_ids=[2, 3])  # the others that never left are as they were
    obs, *_ = vec.recv([2, 3])
    assert obs[:, 1].tolist() == [2.0, 2.0]  # their second step since the reset before
    obs, _ = vec.reset()
    assert obs[:, 1].tolist() == [0.0] * NUM_ENVS
