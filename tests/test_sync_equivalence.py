"""AsyncSharedMemVectorEnv is bit-identical to gymnasium's SyncVectorEnv.

Same seeds and same actions must give the same observations (nested ones included),
rewards, terminations, truncations and infos (``_key`` masks, ``final_obs`` and
``final_info`` included) in every autoreset mode, for every kind of space.
"""

from __future__ import annotations

import numpy as np
import pytest
from envs_for_tests import SPACE_KINDS, counter_env_fns, env_fns
from gymnasium.vector import AutoresetMode
from helpers import assert_boundaries_seen, assert_step_equal, assert_tree_equal, run_lockstep, tree_leaves

NUM_ENVS = 7
NUM_WORKERS = 3  # 7 envs over 3 workers: 3 + 2 + 2
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("double_buffered", [True, False], ids=["double", "single"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("kind", SPACE_KINDS)
def test_step_results_match_sync(make_async, make_sync, kind, mode, double_buffered):
    fns = env_fns(NUM_ENVS, kind)
    sync = make_sync(fns, autoreset_mode=mode)
    vec = make_async(fns, num_workers=NUM_WORKERS, autoreset_mode=mode, double_buffered=double_buffered)

    seen = run_lockstep(sync, vec, steps=200, seed=11, mode=mode)

    assert_boundaries_seen(seen, mode)
    assert seen["infos"] > 0, seen


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 2, NUM_ENVS])
def test_any_number_of_workers_matches_sync(make_async, make_sync, num_workers):
    fns = env_fns(NUM_ENVS, "dict_nested")
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=num_workers)
    assert vec.num_workers == num_workers
    run_lockstep(sync, vec, steps=60, seed=3, mode=AutoresetMode.NEXT_STEP)


@pytest.mark.timeout(90)
def test_many_steps_with_sparse_infos_match_sync(make_async, make_sync):
    """More workers than cores and infos on some envs only, for thousands of steps.

    Workers publish their results while the owner collects those of other workers;
    an info (or status) read half-way through being published shows up here as a
    missing, duplicated or late info.
    """
    fns = counter_env_fns(16)
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=8)
    run_lockstep(sync, vec, steps=3000, seed=5, mode=AutoresetMode.NEXT_STEP)


@pytest.mark.parametrize("kind", SPACE_KINDS)
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_spaces_and_metadata_match_sync(make_async, make_sync, kind, mode):
    fns = env_fns(NUM_ENVS, kind)
    sync = make_sync(fns, autoreset_mode=mode)
    vec = make_async(fns, num_workers=NUM_WORKERS, autoreset_mode=mode)

    assert vec.num_envs == sync.num_envs == NUM_ENVS
    assert vec.single_observation_space == sync.single_observation_space
    assert vec.observation_space == sync.observation_space
    assert vec.single_action_space == sync.single_action_space
    assert vec.action_space == sync.action_space
    assert vec.metadata == sync.metadata
    assert vec.metadata["autoreset_mode"] == mode
    assert vec.autoreset_mode == mode
    assert vec.render_mode == sync.render_mode


def test_autoreset_mode_given_as_string(make_async):
    vec = make_async(env_fns(2), autoreset_mode="SameStep")
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP


def test_reset_with_int_seed_equals_list_of_seeds(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "dict_nested")
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=NUM_WORKERS)

    from_int = vec.reset(seed=40)
    assert vec.np_random_seed == tuple(40 + i for i in range(NUM_ENVS))
    assert_tree_equal(from_int, sync.reset(seed=40), "reset(seed=40)")
    seeds = [40 + i for i in range(NUM_ENVS)]
    assert_tree_equal(vec.reset(seed=seeds), sync.reset(seed=seeds), "reset(seed=list)")
    assert_tree_equal(vec.reset(seed=seeds)[0], from_int[0], "reset(seed=list) obs")


def test_reset_with_seed_list_matches_sync(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "tuple_nested")
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    seeds = [97, 3, 3, 1000, 12, 0, 55]

    assert_tree_equal(vec.reset(seed=seeds), sync.reset(seed=seeds), "reset(seed=list)")
    assert vec.np_random_seed == sync.np_random_seed == tuple(seeds)
    # Envs 1 and 2 got the same seed, so they start identically.
    assert vec.get_attr("_state")[1] == vec.get_attr("_state")[2]
    # Different seeds reach the envs: the start states differ.
    assert vec.get_attr("_state")[0] != vec.get_attr("_state")[3]

    with pytest.raises(ValueError, match="length must match"):
        vec.reset(seed=seeds[:-1])


def test_reset_options_reach_every_env(make_async, make_sync):
    fns = env_fns(NUM_ENVS)
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    actual = vec.reset(seed=1, options={"tag": 7})
    assert_tree_equal(actual, sync.reset(seed=1, options={"tag": 7}), "reset(options)")
    assert actual[1]["_tag"].all()


def test_partial_reset_in_next_step_mode_matches_sync(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "multidiscrete")
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    run_lockstep(sync, vec, steps=5, seed=8, mode=AutoresetMode.NEXT_STEP)
    mask = np.array([True, False, False, True, False, False, True])
    actual = vec.reset(seed=9, options={"reset_mask": mask.copy()})
    assert_tree_equal(actual, sync.reset(seed=9, options={"reset_mask": mask.copy()}), "masked reset")
    assert vec.get_attr("reset_count") == sync.get_attr("reset_count")
    sync.action_space.seed(0)
    for t in range(20):
        actions = sync.action_space.sample()
        assert_step_equal(vec.step(actions), sync.step(actions), f"step {t} after masked reset")


def test_call_get_attr_set_attr_match_sync(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "box_int")
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    run_lockstep(sync, vec, steps=10, seed=2, mode=AutoresetMode.NEXT_STEP)

    assert vec.call("scaled_state", 3, offset=2) == sync.call("scaled_state", 3, offset=2)
    assert vec.call("reward_scale") == (1.0,) * NUM_ENVS  # an attribute, not a method
    assert vec.get_attr("index") == tuple(range(NUM_ENVS))
    assert vec.get_attr("step_count") == sync.get_attr("step_count")
    assert min(vec.get_attr("step_count")) > 0

    scales = [0.5 * i for i in range(NUM_ENVS)]
    vec.set_attr("reward_scale", scales)
    sync.set_attr("reward_scale", scales)
    assert vec.get_attr("reward_scale") == tuple(scales)
    sync.action_space.seed(1)
    for t in range(10):
        actions = sync.action_space.sample()
        assert_step_equal(vec.step(actions), sync.step(actions), f"step {t} after set_attr")

    vec.set_attr("reward_scale", 2.0)  # one value for every env
    assert vec.get_attr("reward_scale") == (2.0,) * NUM_ENVS
    with pytest.raises(ValueError):
        vec.set_attr("reward_scale", [1.0, 2.0])


def test_render_matches_sync(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "discrete", render_mode="rgb_array")
    sync = make_sync(fns)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    assert vec.render_mode == "rgb_array"
    run_lockstep(sync, vec, steps=6, seed=4, mode=AutoresetMode.NEXT_STEP)

    frames = vec.render()
    assert isinstance(frames, tuple) and len(frames) == NUM_ENVS
    assert_tree_equal(frames, sync.render(), "render()")
    assert len({int(frame[0, 0, 0]) for frame in frames}) > 1  # frames differ per env


def reset_then_step(make_async, kind: str, copy: bool) -> tuple[list, list, list]:
    """Leaves of the reset observation, copies of them taken at once, and leaves of the next step's."""
    vec = make_async(env_fns(NUM_ENVS, kind), num_workers=NUM_WORKERS, copy=copy)
    vec.action_space.seed(0)
    obs0, _ = vec.reset(seed=0)
    first = [leaf.copy() for leaf in tree_leaves(obs0)]
    obs1 = vec.step(vec.action_space.sample())[0]
    assert any(not np.array_equal(b, n) for b, n in zip(first, tree_leaves(obs1), strict=True))
    return tree_leaves(obs0), first, tree_leaves(obs1)


@pytest.mark.parametrize("kind", ["box_u8_image", "dict_nested"])
def test_copy_false_returns_views_that_the_next_step_overwrites(make_async, kind):
    reset_obs, _, step_obs = reset_then_step(make_async, kind, copy=False)
    for old, new in zip(reset_obs, step_obs, strict=True):
        assert np.shares_memory(old, new)
        np.testing.assert_array_equal(old, new)  # the reset observation was overwritten in place


@pytest.mark.parametrize("kind", ["box_u8_image", "dict_nested"])
def test_copy_true_returns_independent_arrays(make_async, kind):
    reset_obs, first, step_obs = reset_then_step(make_async, kind, copy=True)
    for old, new, before in zip(reset_obs, step_obs, first, strict=True):
        assert not np.shares_memory(old, new)
        np.testing.assert_array_equal(old, before)  # untouched by the step
