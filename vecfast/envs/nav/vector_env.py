"""``BatchedPointNavEnv``: PointGoal navigation for a whole batch of envs in one simulator call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vecfast.envs.nav.scenes import read_index, split_scene_dir
from vecfast.envs.nav.sim import NavConfig, NavSim, entropy_seed

_EPISODE_METRICS = ("success", "spl", "episode_return", "episode_length")
# split -> default max_envs_per_scene: training shares scenes between many envs (Large Batch Simulation);
# val gives each env its own scene, rotating every 4 episodes, so that a few envs evaluate on every held-out
# scene (with 8 envs sharing one, 200 episodes would see 2 of them) and many envs spread over them evenly
DEFAULT_ENVS_PER_SCENE = {"train": 32, "val": 1}

Array = np.ndarray | torch.Tensor


def observation_space(config: NavConfig) -> gym.spaces.Dict:
    """One env's observations: Habitat's depth sensor (metres), optional RGB, and the goal as (distance, angle)."""
    spaces: dict[str, gym.Space] = {
        "depth": gym.spaces.Box(0.0, config.max_depth, (config.height, config.width, 1), np.float32),
        "pointgoal_with_gps_compass": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
    }
    if config.rgb:
        spaces["rgb"] = gym.spaces.Box(0, 255, (config.height, config.width, 3), np.uint8)
    return gym.spaces.Dict(spaces)


def make_sim(
    num_envs: int,
    scenes: str | Path | None,
    split: str,
    max_envs_per_scene: int | None,
    rotation_episodes: int | None,
    scene_seed: int,
    device: str | torch.device,
    config_kwargs: dict[str, Any],
    scene_shard: tuple[int, int] | None = None,
) -> NavSim:
    """The simulator both env classes build on; ``scenes=None`` uses the default sets in the user cache."""
    index = read_index(split_scene_dir(scenes, split))
    if scene_shard is not None:
        index = index.share(*scene_shard)
    if max_envs_per_scene is None:
        max_envs_per_scene = DEFAULT_ENVS_PER_SCENE[split]
    config = NavConfig(**config_kwargs)
    return NavSim(num_envs, index, max_envs_per_scene, rotation_episodes, scene_seed, config, device)


class BatchedPointNavEnv(VectorEnv):
    """PointGoal navigation (Habitat's task) for ``num_envs`` agents, stepped, rendered and reset as one batch.

    Actions: 0 STOP, 1 MOVE_FORWARD (0.25 m), 2 TURN_LEFT, 3 TURN_RIGHT (10 deg). Reward:
    decrease of the geodesic distance to the goal, +2.5 on success (STOP within
    ``success_distance`` of the goal), -0.01 per step; episodes end on STOP or after 500 steps.

    Observations, rewards (float64), flags and info arrays are numpy arrays on the CPU, as
    gymnasium's vector envs return them (observations without a copy on a CPU ``device``).
    ``as_torch=True`` returns torch tensors on ``device`` instead (rewards float32), so that
    a policy on the same device reads them without a copy. Actions may be numpy or torch. Autoreset follows
    gymnasium's NEXT_STEP mode. ``info`` holds ``distance_to_goal`` for every env and, for
    envs whose episode ended on this step (mask ``info["_success"]`` and alike), ``success``,
    ``spl``, ``episode_return`` and ``episode_length``.

    Scenes come from ``scenes`` (a directory made by ``vecfast nav make-scenes``; default:
    small sets in the user cache), of ``split``: "train" (the default) or "val", scenes never
    trained on (:func:`~vecfast.envs.nav.scenes.split_scene_dir`). Groups of ``max_envs_per_scene`` envs
    (default: 32 for train, 1 for val, so that an evaluation visits every held-out scene) share a scene,
    ``ceil(num_envs / max_envs_per_scene)`` are referenced (plus one while a group moves to
    its next scene) and each resident scene is held once; after ``rotation_episodes``
    episodes a group moves on to the next scene of the dataset, loaded in the background.
    ``scene_shard=(i, n)`` keeps to the i-th of n disjoint shares of the scenes, which together
    are the whole set: rank i of an n-rank DD-PPO run trains on other floor plans than the
    other ranks (:meth:`~vecfast.envs.nav.scenes.SceneIndex.share`).
    Other keyword arguments are :class:`NavConfig` fields (``width``, ``height``, ``rgb``, ...).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int,
        scenes: str | Path | None = None,
        max_envs_per_scene: int | None = None,
        device: str | torch.device = "cpu",
        rotation_episodes: int | None = None,
        scene_seed: int = 0,
        as_torch: bool = False,
        split: str = "train",
        scene_shard: tuple[int, int] | None = None,
        **config_kwargs: Any,
    ) -> None:
        self.as_torch = as_torch
        sim_args = (scenes, split, max_envs_per_scene, rotation_episodes, scene_seed, device, config_kwargs)
        self.sim = make_sim(num_envs, *sim_args, scene_shard=scene_shard)
        self.num_envs = num_envs
        self.device = self.sim.device
        self.single_observation_space = observation_space(self.sim.config)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.single_action_space = gym.spaces.Discrete(4)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._needs_reset = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._all = torch.ones(num_envs, dtype=torch.bool, device=self.device)
        self.sim.seed(torch.arange(num_envs, device=self.device) + entropy_seed())

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Array], dict[str, Array]]:
        """Start a new episode in every env; an int ``seed`` seeds env i with ``seed + i``."""
        if options and options.get("reset_mask") is not None:
            raise ValueError("BatchedPointNavEnv resets automatically (NEXT_STEP); reset_mask is not supported")
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
            self.sim.seed(torch.tensor(seeds, device=self.device))
        self.sim.reset_envs(self._all)
        self._needs_reset.zero_()
        return self._arrays(self.sim.observe()), self._arrays(self._distance_info())

    def step(
        self, actions: np.ndarray | torch.Tensor
    ) -> tuple[dict[str, Array], Array, Array, Array, dict[str, Array]]:
        sim = self.sim
        actions = torch.as_tensor(actions, device=self.device).long().view(-1)
        if actions.shape[0] != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {actions.shape[0]}")
        if ((actions < 0) | (actions > 3)).any():
            bad = int(torch.nonzero((actions < 0) | (actions > 3))[0])
            raise ValueError(f"env {bad}: action {int(actions[bad])} is not in Discrete(4)")
        resetting = self._needs_reset
        if resetting.any():
            sim.reset_envs(resetting)
        result = sim.act(actions, ~resetting)
        done = result.terminated | result.truncated
        info = {
            **self._distance_info(),
            "success": result.success,
            "spl": sim.spl(result.success),
            "episode_return": sim.episode_return.clone(),
            "episode_length": sim.steps.clone(),
        }
        for key in _EPISODE_METRICS:
            info[f"_{key}"] = done
        self._needs_reset = done.clone()  # the masks handed out may be changed in place
        reward = self._array(result.reward if self.as_torch else result.reward.double())
        flags = self._array(result.terminated), self._array(result.truncated)
        return self._arrays(sim.observe()), reward, *flags, self._arrays(info)

    def _distance_info(self) -> dict[str, torch.Tensor]:
        """``distance_to_goal`` of every env, and the all-true mask gymnasium's vector infos pair with each key."""
        return {"distance_to_goal": self.sim.distance.clone(), "_distance_to_goal": self._all.clone()}

    def _array(self, tensor: torch.Tensor) -> Array:
        """``tensor`` as handed out: a numpy array on the CPU unless ``as_torch``."""
        return tensor if self.as_torch else tensor.cpu().numpy()

    def _arrays(self, tensors: dict[str, torch.Tensor]) -> dict[str, Array]:
        return {key: self._array(value) for key, value in tensors.items()}

    @property
    def resident_scenes(self) -> list[str]:
        """Names of the scenes held in memory, by place (``""`` for a free place)."""
        return self.sim.bank.resident

    def close_extras(self, **kwargs: Any) -> None:
        self.sim.close()
