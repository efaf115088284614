"""A blind agent (the goal sensor only, an MLP, sync PPO with Adam) learns to reach goals in open rooms.

The learner's check apart from vision: in a room without walls the straight line is the shortest path,
so a policy that turns to the goal, walks and stops within 0.2 m needs no sight. It must beat the
untrained policy, which never succeeds. (``benchmarks/pointnav_blind.py`` reports it at 2M frames.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gymnasium.wrappers.vector import FilterObservation

import vecfast
from vecfast.envs.nav.scenes import SPLIT_SEEDS, make_scenes
from vecfast.trainers import ActorCritic, TrainConfig
from vecfast.trainers.run.run_dir import load_checkpoint

pytestmark = pytest.mark.slow  # an agent trained to reach goals

GOAL = "pointgoal_with_gps_compass"
BLIND = {"polar_inputs": (GOAL,), "unnormalized_inputs": (GOAL,), "optimizer": "adam", "use_rnn": False}


def blind_env(scenes: Path, split: str, num_envs: int) -> FilterObservation:
    return FilterObservation(vecfast.make_vec("vecfast/PointNav-v0", num_envs, scenes=scenes, split=split), [GOAL])


@pytest.mark.timeout(300)
def test_a_blind_agent_learns_to_reach_goals_in_open_rooms(tmp_path: Path) -> None:
    for split, seed in SPLIT_SEEDS.items():
        make_scenes(4, seed, tmp_path / "scenes" / split, open_rooms=True)
    scenes = tmp_path / "scenes"
    result = vecfast.train(lambda: blind_env(scenes, "train", 32), algo="ppo", total_env_steps=40_000,
                           run_dir=tmp_path / "run", seed=0, print_every_sec=None, **BLIND)  # fmt: skip
    cfg = TrainConfig.from_overrides(**load_checkpoint(tmp_path / "run")["config"])  # the same model, untrained
    untrained = ActorCritic(result.policy.observation_space, result.policy.action_space, cfg)
    val = lambda: blind_env(scenes, "val", 16)  # noqa: E731
    before = vecfast.evaluate(untrained, val, episodes=48, deterministic=False)
    after = vecfast.evaluate(result.policy, val, episodes=48, deterministic=False)
    assert before.success == 0.0
    assert after.success >= 0.4 and after.spl >= 0.3, after.metrics
