"""RecordEpisodeStatistics: gymnasium's vector semantics, and per-env truth across partial resets."""

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

from vecfast.wrappers import RecordEpisodeStatistics


def _cartpole_fns(n: int) -> list:
    return [functools.partial(gym.make, "CartPole-v1", max_episode_steps=25)] * n


def _check_same_as_gymnasium_vector(got: tuple, want: tuple, what: str) -> None:
    """Everything identical except the durations ``t``, which are wall-clock."""
    assert_tree_equal(got[:4], want[:4], what)
    infos, want_infos = got[4], want[4]
    assert_tree_equal(info_without(infos, "episode"), info_without(want_infos, "episode"), f"{what}.info")
    assert ("episode" in infos) == ("episode" in want_infos), what
    if "episode" in want_infos:
        mask = want_infos["_episode"]
        assert_tree_equal(infos["_episode"], mask, f"{what}._episode")
        for k in ("r", "l"):
            assert_tree_equal(infos["episode"][k], want_infos["episode"][k], f"{what}.episode.{k}")
        t = infos["episode"]["t"]
        assert t.dtype == want_infos["episode"]["t"].dtype and np.all(t[mask] >= 0) and np.all(t[~mask] == 0), what


@pytest.mark.parametrize("mode", MODES[:2], ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("envs", ["cartpole", "box_f32"])
def test_matches_gymnasium_vector_wrapper(make_sync, make_async, envs, backend, mode):
    fns = _cartpole_fns(4) if envs == "cartpole" else env_fns(NUM_ENVS, "box_f32")
    expected = gym.wrappers.vector.RecordEpisodeStatistics(make_sync(fns, autoreset_mode=mode))
    actual = RecordEpisodeStatistics(make_vector(backend, fns, mode, make_sync, make_async))
    seen = run_lockstep(expected, actual, 150, seed=1, mode=mode, check=_check_same_as_gymnasium_vector)
    assert seen["terminated"] + seen["truncated"] > 4, seen
    assert actual.episode_count == expected.episode_count > 4
    assert list(actual.return_queue) == list(expected.return_queue)
    assert list(actual.length_queue) == list(expected.length_queue)


def _check_same_as_single_env(mode: AutoresetMode, got: tuple, want: tuple, what: str) -> None:
    """Episode returns and lengths equal those of gymnasium's single-env wrapper on each env.

    That wrapper puts its stats into the env's own info, which SyncVectorEnv batches
    into ``info["episode"]`` (or, with SAME_STEP, ``info["final_info"]["episode"]``).
    """
    assert_tree_equal(got[:4], want[:4], what)
    infos = got[4]
    want_infos = want[4].get("final_info", {}) if mode == AutoresetMode.SAME_STEP else want[4]
    done = want[2] | want[3]
    if not done.any():
        assert "episode" not in infos, what
        return
    assert_tree_equal(infos["_episode"], done, f"{what}._episode")
    assert_tree_equal(want_infos["_episode"], done, f"{what}: single-env wrapper reported episodes")
    for k, dtype in (("r", np.float64), ("l", np.int64)):
        np.testing.assert_array_equal(infos["episode"][k][done], want_infos["episode"][k][done].astype(dtype), what)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_single_env_wrapper(make_sync, make_async, backend, mode):
    """Also in DISABLED mode, where gymnasium's vector wrapper loses running stats on partial resets."""
    fns = env_fns(NUM_ENVS, "box_f32")
    expected = make_sync(wrapped_fns(fns, gym.wrappers.RecordEpisodeStatistics), autoreset_mode=mode)
    actual = RecordEpisodeStatistics(make_vector(backend, fns, mode, make_sync, make_async))
    check = functools.partial(_check_same_as_single_env, mode)
    seen = run_lockstep(expected, actual, 150, seed=6, mode=mode, check=check)
    assert_boundaries_seen(seen, mode)


def test_partial_reset_keeps_running_episodes(make_sync):
    vec = RecordEpisodeStatistics(make_sync(_cartpole_fns(3), autoreset_mode=AutoresetMode.DISABLED))
    vec.reset(seed=0)
    for _ in range(3):
        vec.step(np.zeros(3, np.int64))
    vec.reset(options={"reset_mask": np.array([True, False, False])})
    assert vec.episode_lengths.tolist() == [0, 3, 3]
    assert vec.episode_returns.tolist() == [0.0, 3.0, 3.0]
    vec.reset()
    assert vec.episode_lengths.tolist() == [0, 0, 0]
