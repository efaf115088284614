"""Reward clipping, constant scaling and return-based normalisation for a whole vector env."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv, VectorRewardWrapper
from gymnasium.wrappers.vector import ClipReward as _GymnasiumClipReward
from gymnasium.wrappers.vector import NormalizeReward as _GymnasiumNormalizeReward

from vecfast.wrappers.base import reset_mask_of

__all__ = ["ClipReward", "NormalizeReward", "ScaleReward"]


class ClipReward(_GymnasiumClipReward):
    """gymnasium's vector ClipReward with one ``np.clip`` over the batch.

    gymnasium's clips env by env in a Python loop (and writes into the env's reward
    array); same bounds and validation, same values, and ``min_reward``/``max_reward``
    may also be per-env arrays of shape ``(num_envs,)``.
    """

    def rewards(self, rewards: np.ndarray) -> np.ndarray:
        return self.wrapper.func(rewards)


class ScaleReward(VectorRewardWrapper):
    """Multiply rewards by a constant (e.g. 0.01 for Doom's large rewards), as float64.

    A named, picklable alternative to ``TransformReward(env, lambda r: r * scale)``.
    """

    def __init__(self, env: VectorEnv, scale: float) -> None:
        super().__init__(env)
        self.scale = float(scale)

    def rewards(self, rewards: np.ndarray) -> np.ndarray:
        return np.multiply(rewards, self.scale, dtype=np.float64)


class NormalizeReward(_GymnasiumNormalizeReward):
    """gymnasium's vector NormalizeReward (rewards / std of discounted returns), correct across partial resets.

    gymnasium's ``reset`` clears every env's accumulated return, even on a partial
    reset (DISABLED mode) where the other envs are mid-episode; here only the reset
    envs start over. Everything else (NEXT_STEP/SAME_STEP handling, ``return_rms``,
    ``update_running_mean``) is gymnasium's.
    """

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        mask = reset_mask_of(options, self.num_envs)  # before the vector env pops it
        self.accumulated_reward[mask] = 0
        self._prev_dones[mask] = 0
        return self.env.reset(seed=seed, options=options)
