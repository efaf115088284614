"""Every space gymnasium's vector envs support: results equal SyncVectorEnv's.

Text and OneOf are kept in shared memory; Graph, Sequence and custom spaces (or any
space with ``shared_memory=False``) travel pickled through the workers' pipes.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from helpers import assert_tree_equal

from vecfast.vector.shared_buffers import fits_shared_memory

NUM_ENVS = 5


class Colour(spaces.Space):
    """A custom space: one of a few colour names."""

    NAMES = ("red", "green", "blue")

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(None, None, seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return self.NAMES[int(self.np_random.integers(len(self.NAMES)))]

    def contains(self, x: Any) -> bool:
        return x in self.NAMES

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Colour)


def _obs_space(kind: str) -> spaces.Space:
    return {
        "text": spaces.Text(6, min_length=0, charset="abcxyz"),
        "oneof": spaces.OneOf([spaces.Discrete(4), spaces.Box(-1, 1, (2,), np.float32)]),
        "dict_text_oneof": spaces.Dict(
            {
                "name": spaces.Text(4, min_length=1, charset="ab"),
                "pick": spaces.OneOf([spaces.MultiBinary(3), spaces.Discrete(2, start=5)]),
                "pos": spaces.Box(0, 9, (2,), np.int16),
            }
        ),
        "graph": spaces.Graph(spaces.Box(0, 1, (3,), np.float32), spaces.Discrete(4)),
        "sequence": spaces.Sequence(spaces.Box(-2, 2, (2,), np.float32)),
        "custom": Colour(),
        "dict_with_sequence": spaces.Dict(
            {"items": spaces.Sequence(spaces.Discrete(5)), "pos": spaces.Box(0, 1, (2,), np.float32)}
        ),
    }[kind]


class SpaceSampler(gym.Env):
    """Observations sampled from its space by its own seeded generator; episodes of 3-6 steps.

    Its action space is Text, so actions travel in shared memory as character indices.
    """

    action_space = spaces.Text(3, min_length=1, charset="lr")

    def __init__(self, kind: str, index: int) -> None:
        self.observation_space = _obs_space(kind)
        self.index = index
        self.t = 0

    def _obs(self) -> Any:
        return self.observation_space.sample()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {"index": self.index}

    def step(self, action: str):
        assert isinstance(action, str) and self.action_space.contains(action), action
        self.t += 1
        done = self.t >= 3 + self.index
        return self._obs(), float(len(action)), done, False, {"action": action}


KINDS = ["text", "oneof", "dict_text_oneof", "graph", "sequence", "custom", "dict_with_sequence"]


def fns(kind: str) -> list[functools.partial]:
    return [functools.partial(SpaceSampler, kind, i) for i in range(NUM_ENVS)]


def test_fixed_size_spaces_are_told_apart_from_the_rest() -> None:
    shared = {kind: fits_shared_memory(_obs_space(kind)) for kind in KINDS}
    assert shared == {
        "text": True,
        "oneof": True,
        "dict_text_oneof": True,
        "graph": False,
        "sequence": False,
        "custom": False,
        "dict_with_sequence": False,
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shared_memory", [True, False], ids=["shared_memory", "pickled"])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("kind", KINDS)
def test_results_equal_sync_vector_env(make_async, make_sync, kind, mode, shared_memory) -> None:
    vec = make_async(fns(kind), num_workers=2, autoreset_mode=mode, shared_memory=shared_memory)
    sync = make_sync(fns(kind), autoreset_mode=mode)
    assert vec.single_observation_space == sync.single_observation_space
    assert vec.observation_space == sync.observation_space
    assert_tree_equal(vec.reset(seed=3), sync.reset(seed=3), "reset")
    sync.action_space.seed(0)
    for t in range(12):
        actions = sync.action_space.sample()
        assert_tree_equal(vec.step(actions), sync.step(actions), f"step {t}")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["text", "graph"])
def test_recv_returns_the_rows_of_the_envs_it_names(make_async, make_sync, kind) -> None:
    vec = make_async(fns(kind), num_workers=2, batch_size=2)
    sync = make_sync(fns(kind))
    sync_obs, _ = sync.reset(seed=1)
    vec.async_reset(seed=1)
    seen = 0
    while seen < NUM_ENVS - 1:  # 2 + 2 of the 5 envs
        obs, *_, info = vec.recv()
        for row, env_id in enumerate(info["env_id"]):
            assert_tree_equal(_row(obs, row), _row(sync_obs, env_id), f"env {env_id}")
        seen += len(info["env_id"])


def _row(batch: Any, i: int) -> Any:
    """Row ``i`` of a batch as gymnasium lays it out (tuples for Text/Graph/OneOf)."""
    if isinstance(batch, dict):
        return {k: _row(v, i) for k, v in batch.items()}
    return batch[i]
