"""Episode returns and lengths, counted by the trainer from rewards (any wrapper stack works)."""

from __future__ import annotations

from collections import deque

import numpy as np
import torch

from vecfast.trainers import collective
from vecfast.trainers.metrics import EpisodeStats


class EpisodeTracker:
    """Running return and length per env; finished episodes in a window of the last ``window``."""

    def __init__(self, num_envs: int, window: int = 100) -> None:
        self.returns_so_far = np.zeros(num_envs, np.float64)
        self.lengths_so_far = np.zeros(num_envs, np.int64)
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self.episodes = 0

    def record(self, env_ids: np.ndarray | slice, rewards: np.ndarray, done: np.ndarray, valid: np.ndarray) -> None:
        """One step of envs ``env_ids``; steps that only reset an env (``valid`` False) do not count."""
        self.returns_so_far[env_ids] += np.where(valid, rewards, 0.0)
        self.lengths_so_far[env_ids] += valid
        ended = np.flatnonzero(done)
        if ended.size:
            ids = np.arange(len(self.returns_so_far))[env_ids][ended]
            self.returns.extend(self.returns_so_far[ids].tolist())
            self.lengths.extend(self.lengths_so_far[ids].tolist())
            self.returns_so_far[ids] = 0.0
            self.lengths_so_far[ids] = 0
            self.episodes += ended.size

    def summary(self) -> EpisodeStats:
        """Episodes so far and the window's means; in a distributed run, of every rank's envs together."""
        sums = torch.tensor(
            [self.episodes, len(self.returns), sum(self.returns), sum(self.lengths)], dtype=torch.float64
        )
        episodes, count, return_sum, length_sum = collective.all_sum(sums).tolist()
        best = collective.all_max(torch.tensor([max(self.returns, default=-np.inf)], dtype=torch.float64)).item()
        if not count:
            return EpisodeStats(int(episodes))
        return EpisodeStats(int(episodes), return_sum / count, best, length_sum / count)
