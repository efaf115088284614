"""vecfast/Timed-v0, the env of the scaling benchmarks: a step that costs wall time and no CPU, gymnasium's
contract (its own env checker), episodes of a set length."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import vecfast  # noqa: F401  (registers the id)


def test_the_timed_env_passes_gymnasium_s_checker() -> None:
    env = gym.make("vecfast/Timed-v0", step_seconds=0.0)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_a_step_costs_wall_time_and_no_cpu() -> None:
    env = gym.make("vecfast/Timed-v0", step_seconds=0.05, obs_size=8, episode_steps=3)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (8,) and obs.dtype == np.float32
    wall, cpu = time.perf_counter(), time.process_time()
    results = [env.step(0) for _ in range(3)]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= 0.15 and cpu < 0.05, (wall, cpu)
    assert [r[1] for r in results] == [1.0, 1.0, 1.0]  # action 0 earns 1
    assert [r[3] for r in results] == [False, False, True] and [r[0][0] for r in results] == [1.0, 2.0, 3.0]
    env.reset()
    assert env.step(1)[1] == 0.0
    env.close()


def test_the_timed_env_refuses_impossible_settings() -> None:
    with pytest.raises(ValueError, match="step_seconds >= 0"):
        gym.make("vecfast/Timed-v0", step_seconds=-1.0)
