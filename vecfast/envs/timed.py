"""An env whose step takes a set wall time and no CPU: for measuring what a sampling and learning pipeline itself
can carry (how it scales with samplers, where the learner or inference saturates), apart from what simulators
cost. EnvPool's dummy env plays the same part.

``vecfast/Timed-v0``: each step sleeps ``step_seconds``, returns an observation of ``obs_size`` float32 values (the
step's index within the episode, then zeros) and a reward of 1 for action 0, 0 otherwise (something to learn);
episodes last ``episode_steps`` steps (truncated).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class TimedEnv(gym.Env[np.ndarray, np.int64]):
    metadata = {"render_modes": []}

    def __init__(
        self, step_seconds: float = 0.005, obs_size: int = 64, num_actions: int = 4, episode_steps: int = 100
    ) -> None:
        if step_seconds < 0 or obs_size < 1 or num_actions < 1 or episode_steps < 1:
            raise ValueError(
                f"step_seconds >= 0, obs_size, num_actions and episode_steps >= 1; got {step_seconds}, "
                f"{obs_size}, {num_actions}, {episode_steps}"
            )
        self.step_seconds, self.episode_steps = step_seconds, episode_steps
        self.observation_space = spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
        self.action_space = spaces.Discrete(num_actions)
        self._obs = np.zeros(obs_size, np.float32)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._observation(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(self.step_seconds)
        self._t += 1
        return self._observation(), float(int(action) == 0), False, self._t >= self.episode_steps, {}

    def _observation(self) -> np.ndarray:
        self._obs[0] = self._t
        return self._obs.copy()
