"""Reward clipping, constant scaling and return-based normalisation for a whole vector env."""

from __future__ import annotations

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorRewardWrapper
from gymnasium.wrappers.vector import ClipReward as _GymnasiumClipReward
from gymnasium.wrappers.vector import NormalizeReward as _GymnasiumNormalizeReward

from vecfast.wrappers.base import AsyncVectorWrapper, StepResult

__all__ = ["ClipReward", "NormalizeReward", "ScaleReward"]


class _BatchRewardWrapper(AsyncVectorWrapper, VectorRewardWrapper):
    """A reward transform that also serves ``recv`` batches: :meth:`rewards` gets the rows' env ids."""

    def on_step(self, result: StepResult, ids: np.ndarray, starting: np.ndarray) -> StepResult:
        observations, rewards, terminations, truncations, infos = result
        return observations, self.rewards(rewards, ids), terminations, truncations, infos

    def rewards(self, rewards: np.ndarray, ids: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The transformed rewards of envs ``ids`` (default: all)."""
        raise NotImplementedError


class ClipReward(_BatchRewardWrapper, _GymnasiumClipReward):
    """gymnasium's vector ClipReward with one ``np.clip`` over the batch.

    gymnasium's clips env by env in a Python loop (and writes into the env's reward
    array); same bounds and validation, same values, and ``min_reward``/``max_reward``
    may also be per-env arrays of shape ``(num_envs,)`` (a ``recv`` batch is clipped
    with the bounds of the envs in ``info["env_id"]``).
    """

    def __init__(
        self,
        env: VectorEnv,
        min_reward: float | np.ndarray | None = None,
        max_reward: float | np.ndarray | None = None,
    ) -> None:
        super().__init__(env, min_reward, max_reward)  # gymnasium's checks the bounds
        self.min_reward, self.max_reward = (b if np.ndim(b) == 0 else np.asarray(b) for b in (min_reward, max_reward))

    def rewards(self, rewards: np.ndarray, ids: np.ndarray | slice = slice(None)) -> np.ndarray:
        low, high = (b if np.ndim(b) == 0 else b[ids] for b in (self.min_reward, self.max_reward))
        return np.clip(rewards, low, high)


class ScaleReward(_BatchRewardWrapper):
    """Multiply rewards by a constant (e.g. 0.01 for Doom's large rewards), as float64.

    A named, picklable alternative to ``TransformReward(env, lambda r: r * scale)``.
    """

    def __init__(self, env: VectorEnv, scale: float) -> None:
        super().__init__(env)
        self.scale = float(scale)

    def rewards(self, rewards: np.ndarray, ids: np.ndarray | slice = slice(None)) -> np.ndarray:
        return np.multiply(rewards, self.scale, dtype=np.float64)


class NormalizeReward(AsyncVectorWrapper, _GymnasiumNormalizeReward):
    """gymnasium's vector NormalizeReward (rewards / std of discounted returns), correct across partial resets.

    gymnasium's ``reset`` clears every env's accumulated return, even on a partial
    reset (DISABLED mode) where the other envs are mid-episode; here only the reset
    envs start over. Its ``step`` assumes rows are envs; here the returns of a ``recv``
    batch (EnvPool's API) accumulate in the envs of ``info["env_id"]``, and the batch
    updates ``return_rms``. Everything else (NEXT_STEP/SAME_STEP handling,
    ``return_rms``, ``update_running_mean``) is gymnasium's.
    """

    def forget(self, mask: np.ndarray) -> None:
        self.accumulated_reward[mask] = 0

    def on_step(self, result: StepResult, ids: np.ndarray, starting: np.ndarray) -> StepResult:
        observations, rewards, terminated, truncated, infos = result
        active = ~starting  # a reset result (NEXT_STEP's step after an episode end) leaves the return alone
        envs = ids[active]
        self.accumulated_reward[envs] = (
            self.accumulated_reward[envs] * self.gamma * (1 - terminated[active]) + rewards[active]
        )
        if self.update_running_mean and active.any():
            self.return_rms.update(self.accumulated_reward[envs])
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            # The done envs have reset already; their next step starts a new return.
            self.accumulated_reward[ids[terminated | truncated]] = 0
        return observations, rewards / np.sqrt(self.return_rms.var + self.epsilon), terminated, truncated, infos
