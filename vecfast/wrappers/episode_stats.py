"""Episode returns, lengths and durations in ``info["episode"]``."""

from __future__ import annotations

import time

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics as _GymnasiumRecordEpisodeStatistics

from vecfast.wrappers.base import AsyncVectorWrapper, StepResult

__all__ = ["RecordEpisodeStatistics"]


class RecordEpisodeStatistics(AsyncVectorWrapper, _GymnasiumRecordEpisodeStatistics):
    """gymnasium's vector RecordEpisodeStatistics, correct across partial resets and over ``recv``.

    ``info["episode"] = {"r", "l", "t"}`` with the ``info["_episode"]`` mask, exactly
    as gymnasium's (NEXT_STEP and SAME_STEP alike). Its ``reset`` looks for
    ``options["reset_mask"]`` after the vector env has popped it, so a partial reset
    (DISABLED mode) wipes the running statistics of envs that are mid-episode
    (Gymnasium PR #1696, open); here only the reset envs start over. Its ``step``
    assumes rows are envs; here the statistics of ``recv`` batches (EnvPool's API) go
    to the envs in ``info["env_id"]``. Same arguments, statistics and queues as gymnasium's.
    """

    def forget(self, mask: np.ndarray) -> None:
        self.episode_start_times[mask] = time.perf_counter()
        self.episode_returns[mask] = 0.0
        self.episode_lengths[mask] = 0

    def on_step(self, result: StepResult, ids: np.ndarray, starting: np.ndarray) -> StepResult:
        observations, rewards, terminations, truncations, infos = result
        # A reset result (NEXT_STEP's step after an episode end, or after async_reset)
        # starts an episode and does not count towards it.
        self.forget(ids[starting])
        going = ids[~starting]
        self.episode_returns[going] += rewards[~starting]
        self.episode_lengths[going] += 1
        dones = terminations | truncations
        if not dones.any():
            return result
        if self._stats_key in infos or f"_{self._stats_key}" in infos:
            raise ValueError(
                f"Attempted to add episode stats with key '{self._stats_key}' but this key already exists "
                f"in info: {list(infos.keys())}"
            )
        returns, lengths = self.episode_returns[ids], self.episode_lengths[ids]
        durations = np.round(time.perf_counter() - self.episode_start_times[ids], 6)
        stats = {
            "r": np.where(dones, returns, 0.0),
            "l": np.where(dones, lengths, 0),
            "t": np.where(dones, durations, 0.0),
        }
        infos = {**infos, self._stats_key: stats, f"_{self._stats_key}": dones}
        self.episode_count += int(dones.sum())
        self.time_queue.extend(durations[dones])
        self.return_queue.extend(returns[dones])
        self.length_queue.extend(lengths[dones])
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self.forget(ids[dones])  # those envs have reset already: their next step counts
        return observations, rewards, terminations, truncations, infos
