"""An agent that follows the env's own geodesic reaches every goal, on train and val scenes alike.

If it did not, no learner could: the episodes, the geodesic field, the dynamics or the metrics
would be at fault. It acts through the public batched env and reads only the simulator's state.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import vecfast
from vecfast.envs.nav.scenes import SPLIT_SEEDS, make_scenes
from vecfast.envs.nav.sim import MOVE_FORWARD, STOP, TURN_LEFT, TURN_RIGHT, NavSim

SCENES_PER_SPLIT = 4
NUM_ENVS = 32
EPISODES = 64


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first scenes of the default train and val sets (their seeds), as DIR/train and DIR/val."""
    out = tmp_path_factory.mktemp("nav_splits")
    for split, seed in SPLIT_SEEDS.items():
        make_scenes(SCENES_PER_SPLIT, seed, out / split)
    return out


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Small tensors: a second torch thread only contends for a shared machine's cores (3x slower here)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def oracle_actions(sim: NavSim) -> torch.Tensor:
    """STOP within the success distance; else step forward where that lowers the geodesic more than a
    step one turn to either side would, else turn towards the lower side. A step counts only if it
    stays walkable all the way, as the sim checks it."""
    cfg = sim.config
    headings = sim.heading[:, None] + torch.tensor([0.0, 1.0, -1.0]) * math.radians(cfg.turn_degrees)
    step = torch.stack([torch.cos(headings), torch.sin(headings)], dim=-1) * cfg.forward_step  # (N, 3, 2)
    fractions = torch.linspace(0.0, 1.0, 6)[:, None]
    clear = sim.walkable_at(sim.pos[:, None, None, :] + fractions * step[:, :, None, :]).all(dim=2)
    after = torch.stack([sim.geodesic(sim.pos + step[:, k]) for k in range(3)], dim=1)
    ahead, left, right = torch.where(clear, after, torch.inf).unbind(dim=1)
    forward = (ahead <= torch.minimum(left, right)) & (ahead < sim.distance)
    action = torch.where(forward, MOVE_FORWARD, torch.where(left <= right, TURN_LEFT, TURN_RIGHT))
    return torch.where(sim.distance < cfg.success_distance, STOP, action)


@pytest.mark.parametrize("split", ["train", "val"])
@pytest.mark.usefixtures("one_thread")
def test_the_geodesic_oracle_succeeds_everywhere_with_spl_near_one(split_dir: Path, split: str) -> None:
    kwargs = {"scenes": split_dir, "split": split, "max_envs_per_scene": NUM_ENVS // SCENES_PER_SPLIT}
    env = vecfast.make_vec("vecfast/PointNav-v0", NUM_ENVS, width=8, height=8, **kwargs)
    sim = env.unwrapped.sim
    success, spl, scenes = [], [], set()
    try:
        env.reset(seed=0)
        for _ in range(2000):
            scenes.update(sim.bank.place_path[s].stem for s in sim.place.tolist())
            _, _, _, _, info = env.step(oracle_actions(sim))
            done = info["_success"]
            success += info["success"][done].tolist()
            spl += info["spl"][done].tolist()
            if len(success) >= EPISODES:
                break
    finally:
        env.close()
    assert len(success) >= EPISODES and len(scenes) == SCENES_PER_SPLIT
    assert np.mean(success) == 1.0
    assert np.mean(spl) >= 0.95, f"SPL {np.mean(spl):.3f}, lowest {min(spl):.3f}"
