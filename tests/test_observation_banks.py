"""copy=True without a copy: batches are lent banks of shared memory, never overwritten while held."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from envs_for_tests import env_fns
from helpers import assert_tree_equal

NUM_ENVS = 5


@pytest.fixture(autouse=True)
def lend_every_batch(monkeypatch):
    """The test envs' batches are small, which vecfast copies rather than lends: lend them all."""
    monkeypatch.setattr("vecfast.vector.observation_banks.LENDING_MIN_BYTES", 0)


def _data_address(batch: dict | np.ndarray) -> int:
    leaf = batch["screen"] if isinstance(batch, dict) else batch
    return leaf.__array_interface__["data"][0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["box_u8_image", "dict_nested", "tuple_nested"])
def test_held_batches_are_never_overwritten(make_async, make_sync, kind):
    """Every batch kept (more than there are banks) still equals what SyncVectorEnv returned for it."""
    fns = env_fns(NUM_ENVS, kind)
    vec, sync = make_async(fns, num_workers=2), make_sync(fns)
    kept = [(vec.reset(seed=0)[0], sync.reset(seed=0)[0])]
    sync.action_space.seed(1)
    for _ in range(8):
        actions = sync.action_space.sample()
        kept.append((vec.step(actions)[0], sync.step(actions)[0]))
    for t, (ours, reference) in enumerate(kept):
        assert_tree_equal(ours, reference, f"batch {t}")


@pytest.mark.timeout(60)
def test_dropped_batches_are_lent_again_instead_of_copied(make_async):
    vec = make_async(env_fns(NUM_ENVS, "box_u8_image"), num_workers=2)
    vec.reset(seed=0)
    vec.action_space.seed(0)
    addresses = set()
    for _ in range(12):
        obs = vec.step(vec.action_space.sample())[0]
        assert not obs.flags.owndata, "a step copied its observations"
        addresses.add(_data_address(obs))
        del obs
    assert len(addresses) <= 3, f"{len(addresses)} buffers for 12 dropped batches"


@pytest.mark.timeout(60)
def test_views_and_tensors_of_a_batch_keep_it_lent(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "box_u8_image")
    vec, sync = make_async(fns, num_workers=2), make_sync(fns)
    vec.reset(seed=0)
    sync.reset(seed=0)
    sync.action_space.seed(2)
    actions = sync.action_space.sample()
    obs, reference = vec.step(actions)[0], sync.step(actions)[0]
    row, tensor = obs[3], torch.from_numpy(obs)
    del obs
    gc.collect()
    for _ in range(6):  # more steps than banks
        actions = sync.action_space.sample()
        vec.step(actions)
        sync.step(actions)
    np.testing.assert_array_equal(row, reference[3])
    np.testing.assert_array_equal(tensor.numpy(), reference)
