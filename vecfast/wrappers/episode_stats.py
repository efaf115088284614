"""Episode returns, lengths and durations in ``info["episode"]``."""

from __future__ import annotations

import time
from typing import Any

from gymnasium.wrappers.vector import RecordEpisodeStatistics as _GymnasiumRecordEpisodeStatistics

from vecfast.wrappers.base import reset_mask_of

__all__ = ["RecordEpisodeStatistics"]


class RecordEpisodeStatistics(_GymnasiumRecordEpisodeStatistics):
    """gymnasium's vector RecordEpisodeStatistics, correct across partial resets.

    ``info["episode"] = {"r", "l", "t"}`` with the ``info["_episode"]`` mask, exactly
    as gymnasium's (NEXT_STEP and SAME_STEP handled by its ``step``). Its ``reset``
    looks for ``options["reset_mask"]`` after the vector env has popped it, so a
    partial reset (DISABLED mode) wipes the running statistics of envs that are
    mid-episode (Gymnasium PR #1696, open); here only the reset envs start over.
    """

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        mask = reset_mask_of(options, self.num_envs)  # before the vector env pops it
        obs, infos = self.env.reset(seed=seed, options=options)
        self.episode_start_times[mask] = time.perf_counter()
        self.episode_returns[mask] = 0.0
        self.episode_lengths[mask] = 0
        self.prev_dones[mask] = False
        return obs, infos
