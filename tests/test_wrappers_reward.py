"""Reward wrappers: batched clipping and scaling, and NormalizeReward across partial resets."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from envs_for_tests import env_fns
from gymnasium.vector import AutoresetMode
from helpers import assert_boundaries_seen, assert_tree_equal, run_lockstep
from wrapper_lockstep import BACKENDS, MODES, NUM_ENVS, make_vector

from vecfast.wrappers import ClipReward, NormalizeReward, ScaleReward


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_matches_gymnasium(make_sync, make_async, backend):
    fns = env_fns(NUM_ENVS, "box_f32")  # rewards spread over about [-4, 4]
    expected = gym.wrappers.vector.ClipReward(make_sync(fns), -1.0, 0.5)
    actual = ClipReward(make_vector(backend, fns, AutoresetMode.NEXT_STEP, make_sync, make_async), -1.0, 0.5)
    run_lockstep(expected, actual, 40, seed=0, mode=AutoresetMode.NEXT_STEP)


def test_clip_per_env_bounds_and_scale(make_sync):
    fns = env_fns(NUM_ENVS, "box_f32")
    low, high = -np.arange(1.0, NUM_ENVS + 1), np.arange(1.0, NUM_ENVS + 1) / 2
    raw, clipped, scaled = make_sync(fns), ClipReward(make_sync(fns), low, high), ScaleReward(make_sync(fns), 0.01)
    for env in (raw, clipped, scaled):
        env.reset(seed=1)
    raw.action_space.seed(1)
    for _ in range(20):
        actions = raw.action_space.sample()
        reward = raw.step(actions)[1]
        assert_tree_equal(clipped.step(actions)[1], np.clip(reward, low, high))
        assert_tree_equal(scaled.step(actions)[1], reward * 0.01)
    with pytest.raises(gym.error.InvalidBound):
        ClipReward(raw, 1.0, 0.0)


@pytest.mark.parametrize("mode", MODES[:2], ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
def test_normalize_matches_gymnasium(make_sync, make_async, backend, mode):
    fns = env_fns(NUM_ENVS, "box_f32")
    expected = gym.wrappers.vector.NormalizeReward(make_sync(fns, autoreset_mode=mode), gamma=0.9)
    actual = NormalizeReward(make_vector(backend, fns, mode, make_sync, make_async), gamma=0.9)
    seen = run_lockstep(expected, actual, 80, seed=3, mode=mode)
    assert_boundaries_seen(seen, mode)
    assert_tree_equal(actual.return_rms.var, expected.return_rms.var)


def test_normalize_partial_reset_keeps_running_returns(make_sync):
    fns = [functools.partial(gym.make, "CartPole-v1")] * 3
    vec = NormalizeReward(make_sync(fns, autoreset_mode=AutoresetMode.DISABLED), gamma=0.5)
    vec.reset(seed=0)
    for _ in range(3):
        vec.step(np.zeros(3, np.int64))
    assert vec.accumulated_reward.tolist() == [1.75, 1.75, 1.75]
    vec.reset(options={"reset_mask": np.array([False, True, False])})
    assert vec.accumulated_reward.tolist() == [1.75, 0.0, 1.75]
