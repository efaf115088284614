"""``PointNavEnv``: one PointGoal navigation env, the batched simulator with a batch of one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vecfast.envs.nav.sim import entropy_seed
from vecfast.envs.nav.vector_env import make_sim, observation_space


class PointNavEnv(gym.Env):
    """A single gymnasium env with exactly the dynamics of :class:`BatchedPointNavEnv`.

    Same seed and actions give the same trajectory as env 0 of a batch (until the batch's
    scene group rotates to another scene, which depends on the other envs of the group).
    Observations are numpy arrays; see :class:`BatchedPointNavEnv` for the task and arguments.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        scenes: str | Path | None = None,
        max_envs_per_scene: int | None = None,
        device: str | torch.device = "cpu",
        rotation_episodes: int | None = None,
        scene_seed: int = 0,
        split: str = "train",
        **config_kwargs: Any,
    ) -> None:
        self.sim = make_sim(1, scenes, split, max_envs_per_scene, rotation_episodes, scene_seed, device, config_kwargs)
        self.observation_space = observation_space(self.sim.config)
        self.action_space = gym.spaces.Discrete(4)
        self._one = torch.ones(1, dtype=torch.bool, device=self.sim.device)
        self.sim.seed(torch.tensor([entropy_seed()]))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.sim.seed(torch.tensor([seed]))
        self.sim.reset_envs(self._one)
        return self._obs(), {"distance_to_goal": float(self.sim.distance[0])}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        sim = self.sim
        result = sim.act(torch.tensor([int(action)], device=sim.device), self._one)
        info: dict[str, Any] = {"distance_to_goal": float(sim.distance[0])}
        terminated, truncated = bool(result.terminated[0]), bool(result.truncated[0])
        if terminated or truncated:
            info.update(
                success=bool(result.success[0]),
                spl=float(sim.spl(result.success)[0]),
                episode_return=float(sim.episode_return[0]),
                episode_length=int(sim.steps[0]),
            )
        return self._obs(), float(result.reward[0]), terminated, truncated, info

    def _obs(self) -> dict[str, np.ndarray]:
        return {key: value[0].cpu().numpy() for key, value in self.sim.observe().items()}

    def close(self) -> None:
        self.sim.close()
