"""FrameStackObservation equals gymnasium's single-env FrameStackObservation on each env, across episode ends."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from envs_for_tests import env_fns
from gymnasium.vector import AutoresetMode
from helpers import assert_boundaries_seen, assert_tree_equal, run_lockstep
from wrapper_lockstep import (
    BACKENDS,
    MODES,
    NUM_ENVS,
    info_without,
    make_vector,
    wrapped_fns,
)

from vecfast.wrappers import FrameStackObservation


@pytest.mark.parametrize("padding_type", ["reset", "zero"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_gymnasium_per_env(make_sync, make_async, backend, mode, padding_type):
    fns = env_fns(NUM_ENVS, "box_f32")
    stack = functools.partial(gym.wrappers.FrameStackObservation, stack_size=4, padding_type=padding_type)
    expected = make_sync(wrapped_fns(fns, stack), autoreset_mode=mode)
    actual = FrameStackObservation(make_vector(backend, fns, mode, make_sync, make_async), 4, padding_type=padding_type)

    assert actual.single_observation_space == expected.single_observation_space
    assert actual.observation_space == expected.observation_space
    seen = run_lockstep(expected, actual, 80, seed=4, mode=mode)
    assert_boundaries_seen(seen, mode)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_classic_control_image_free(make_sync, make_async, mode):
    """CartPole on vecfast's vector env: terminations end episodes at varied steps."""
    fns = [functools.partial(gym.make, "CartPole-v1", max_episode_steps=30)] * 4
    expected = make_sync(
        wrapped_fns(fns, functools.partial(gym.wrappers.FrameStackObservation, stack_size=3)), autoreset_mode=mode
    )
    actual = FrameStackObservation(make_vector("async", fns, mode, make_sync, make_async), 3)
    seen = run_lockstep(expected, actual, 120, seed=0, mode=mode)
    assert seen["terminated"] + seen["truncated"] > 4, seen


def _check_dict_entry_stacked(got: tuple, want: tuple, what: str) -> None:
    """``got`` stacks only the screen; ``want`` (gymnasium's) stacks every entry of the Dict."""
    obs, *rest, infos = got
    want_obs, *want_rest, want_infos = want
    assert_tree_equal(obs["screen"], want_obs["screen"], f"{what}.screen")
    assert_tree_equal(obs["measurements"], want_obs["measurements"][:, -1], f"{what}.measurements")
    assert_tree_equal(tuple(rest), tuple(want_rest), what)
    assert_tree_equal(info_without(infos, "final_obs"), info_without(want_infos, "final_obs"), f"{what}.info")
    for i in np.flatnonzero(want_infos.get("_final_obs", [])):
        assert_tree_equal(infos["final_obs"][i]["screen"], want_infos["final_obs"][i]["screen"], f"{what}.final[{i}]")
        assert_tree_equal(
            infos["final_obs"][i]["measurements"], want_infos["final_obs"][i]["measurements"][-1], f"{what}.final[{i}]"
        )


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_dict_key_stacks_one_entry(make_sync, make_async, mode):
    fns = env_fns(NUM_ENVS, "dict_image_chw")
    stack = functools.partial(gym.wrappers.FrameStackObservation, stack_size=3)
    expected = make_sync(wrapped_fns(fns, stack), autoreset_mode=mode)
    actual = FrameStackObservation(make_vector("async", fns, mode, make_sync, make_async), 3, key="screen")

    space = actual.single_observation_space
    assert space["screen"] == expected.single_observation_space["screen"]  # Box(0, 255, (3, 3, 24, 32), uint8)
    assert space["measurements"] == actual.unwrapped.single_observation_space["measurements"]
    want_reset = expected.reset(seed=3)
    got_reset = actual.reset(seed=3)
    _check_dict_entry_stacked(got_reset, want_reset, "reset")
    expected.action_space.seed(3)
    for t in range(60):
        actions = expected.action_space.sample()
        want = expected.step(actions)
        _check_dict_entry_stacked(actual.step(actions), want, f"step {t}")
        done = want[2] | want[3]
        if mode == AutoresetMode.DISABLED and done.any():
            want_reset = expected.reset(options={"reset_mask": done.copy()})
            got_reset = actual.reset(options={"reset_mask": done.copy()})
            _check_dict_entry_stacked(got_reset, want_reset, f"partial reset {t}")


def test_returned_stacks_are_never_overwritten(make_sync):
    vec = FrameStackObservation(make_sync(env_fns(3, "box_f32")), 2)
    first, _ = vec.reset(seed=0)
    kept = first.copy()
    second = vec.step(vec.action_space.sample())[0]
    assert np.array_equal(first, kept)
    assert np.array_equal(second[:, 0], first[:, 1])  # shifted by one


def test_invalid_arguments(make_sync):
    vec = make_sync(env_fns(2, "box_f32"))
    with pytest.raises(ValueError, match="stack_size"):
        FrameStackObservation(vec, 0)
    with pytest.raises(ValueError, match="padding_type"):
        FrameStackObservation(vec, 2, padding_type="same")
