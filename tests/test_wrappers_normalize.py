"""NormalizeObservation: gymnasium's math, batch statistics, every autoreset mode, saved statistics."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from envs_for_tests import env_fns
from gymnasium.vector import AutoresetMode
from helpers import assert_tree_equal, run_lockstep
from wrapper_lockstep import BACKENDS, NUM_ENVS, make_vector, wrapped_fns

from vecfast.wrappers import NormalizeObservation

CARTPOLE_F64 = wrapped_fns(
    [functools.partial(gym.make, "CartPole-v1", max_episode_steps=40)] * 4,
    functools.partial(gym.wrappers.DtypeObservation, dtype=np.float64),
)


def _assert_close(got: tuple, want: tuple, what: str) -> None:
    """Step or reset results equal but for float32 rounding of the observations."""
    assert_tree_equal(got[1:], want[1:], what)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5, err_msg=what)
    assert got[0].dtype == want[0].dtype == np.float32


@pytest.mark.parametrize("fns", [CARTPOLE_F64, env_fns(NUM_ENVS, "box_f32")], ids=["cartpole_f64", "box_f32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_gymnasium(make_sync, make_async, backend, fns):
    """Same outputs as gymnasium's wrapper, to float32 precision: its statistics are float32 (or, for
    float64 observations, start as float32 and turn float64), vecfast's are float64."""
    expected = gym.wrappers.vector.NormalizeObservation(make_sync(fns))
    actual = NormalizeObservation(make_vector(backend, fns, AutoresetMode.NEXT_STEP, make_sync, make_async))
    assert actual.single_observation_space == expected.single_observation_space
    seen = run_lockstep(
        expected, actual, 100, seed=2, mode=AutoresetMode.NEXT_STEP, check=_assert_close, check_reset=_assert_close
    )
    assert seen["terminated"] > 0
    assert actual.obs_rms.mean.dtype == np.float64
    np.testing.assert_allclose(actual.obs_rms.mean, expected.obs_rms.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(actual.obs_rms.var, expected.obs_rms.var, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED], ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
def test_statistics_are_those_of_every_observation_returned(make_sync, make_async, backend, mode):
    """Batch (parallel) updates give the plain mean and variance of all returned observations.

    SAME_STEP final observations are normalised with the current statistics but do not
    update them; a partial reset adds only the reset envs' observations.
    """
    fns = env_fns(NUM_ENVS, "dict_image_hwc")
    raw = make_sync(fns, autoreset_mode=mode)
    actual = NormalizeObservation(make_vector(backend, fns, mode, make_sync, make_async), key="measurements")
    seen_obs = []

    def normalized(x: np.ndarray) -> np.ndarray:
        return ((x - actual.obs_rms.mean) / np.sqrt(actual.obs_rms.var + 1e-8)).astype(np.float32)

    def check(got: tuple, want: tuple) -> None:
        assert_tree_equal(got[0]["screen"], want[0]["screen"])
        assert_tree_equal(got[0]["measurements"], normalized(want[0]["measurements"]))

    want_reset = raw.reset(seed=8)
    check(actual.reset(seed=8), want_reset)
    seen_obs.append(want_reset[0]["measurements"])
    raw.action_space.seed(8)
    finals = resets = 0
    for _ in range(120):
        actions = raw.action_space.sample()
        want, got = raw.step(actions), actual.step(actions)
        check(got, want)
        assert_tree_equal(got[1:4], want[1:4])
        seen_obs.append(want[0]["measurements"])
        for i in np.flatnonzero(want[4].get("_final_obs", [])):
            assert_tree_equal(got[4]["final_obs"][i]["screen"], want[4]["final_obs"][i]["screen"])
            assert_tree_equal(
                got[4]["final_obs"][i]["measurements"], normalized(want[4]["final_obs"][i]["measurements"])
            )
            finals += 1
        done = want[2] | want[3]
        if mode == AutoresetMode.DISABLED and done.any():
            want_reset = raw.reset(options={"reset_mask": done.copy()})
            check(actual.reset(options={"reset_mask": done.copy()}), want_reset)
            seen_obs.append(want_reset[0]["measurements"][done])
            resets += 1
    assert finals > 0 if mode == AutoresetMode.SAME_STEP else resets > 0
    everything = np.concatenate(seen_obs).astype(np.float64)
    assert actual.obs_rms.count == pytest.approx(len(everything) + 1e-4)
    np.testing.assert_allclose(actual.obs_rms.mean, everything.mean(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(actual.obs_rms.var, everything.var(axis=0), rtol=1e-5, atol=1e-6)


def test_save_and_load_statistics(make_sync, tmp_path):
    fns = env_fns(NUM_ENVS, "box_f32")
    trained = NormalizeObservation(make_sync(fns), clip=2.0)
    trained.reset(seed=0)
    for _ in range(30):
        obs = trained.step(trained.action_space.sample())[0]
        assert np.all(np.abs(obs) <= 2.0)
    path = tmp_path / "obs_stats"
    trained.save(path)
    assert path.exists()  # no ".npz" appended

    evaluating = NormalizeObservation(make_sync(fns), clip=2.0)
    evaluating.load(path)
    evaluating.update_running_mean = trained.update_running_mean = False
    assert_tree_equal(evaluating.state_dict(), trained.state_dict())
    assert_tree_equal(evaluating.reset(seed=5)[0], trained.reset(seed=5)[0])  # infos count earlier resets
    actions = trained.action_space.sample()
    assert_tree_equal(evaluating.step(actions)[:4], trained.step(actions)[:4])
    assert_tree_equal(evaluating.state_dict(), trained.state_dict())  # frozen
    assert trained.single_observation_space == gym.spaces.Box(-2.0, 2.0, (3,), np.float32)

    with pytest.raises(ValueError, match="shape"):
        NormalizeObservation(make_sync(env_fns(2, "box_int")), epsilon=1e-8).load_state_dict(trained.state_dict())
