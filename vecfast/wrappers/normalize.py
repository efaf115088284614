"""Running observation normalisation over the batch, with statistics that can be saved and restored."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv
from gymnasium.wrappers.utils import RunningMeanStd

from vecfast.wrappers.base import BatchObservationWrapper, get_entry, with_entry

__all__ = ["NormalizeObservation"]


class NormalizeObservation(BatchObservationWrapper):
    """Normalise an observation entry to zero mean, unit variance with running statistics.

    Every batch updates the statistics at once with the parallel (Chan et al.) mean and
    variance merge of gymnasium's ``RunningMeanStd``. Compared with gymnasium's vector
    NormalizeObservation, which handles a Box observation in NEXT_STEP mode only:

    * ``key`` normalises one entry of a Dict observation (e.g. ``"measurements"``);
    * SAME_STEP works (``info["final_obs"]`` is normalised, without updating);
    * partial resets work, updating only with the envs that were reset (the others'
      rows repeat their last observation);
    * ``recv`` batches (EnvPool's API) update the statistics with the envs they hold;
    * statistics are float64 whatever the observation dtype (gymnasium's are float32,
      whose running means stall after millions of samples); outputs agree with
      gymnasium's to float32 precision;
    * :meth:`state_dict` / :meth:`load_state_dict` and :meth:`save` / :meth:`load`
      carry the statistics from training to evaluation (set
      ``update_running_mean = False`` there);
    * ``clip`` bounds the output, as SB3's VecNormalize ``clip_obs``.

    Args:
        env: the vector env.
        key: the Dict entry to normalise.
        epsilon: added to the variance before the square root.
        clip: clip the normalised values to ``[-clip, clip]``; ``None`` does not clip.
    """

    def __init__(
        self, env: VectorEnv, *, key: str | None = None, epsilon: float = 1e-8, clip: float | None = None
    ) -> None:
        super().__init__(env, key)
        if epsilon <= 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        if clip is not None and clip <= 0:
            raise ValueError(f"clip must be positive or None, got {clip}")
        self.epsilon = epsilon
        self.clip = clip
        self.update_running_mean = True
        self.obs_rms = RunningMeanStd(shape=self.entry_space.shape, dtype=np.float64)
        bound = np.inf if clip is None else clip
        self.set_entry_space(spaces.Box(-bound, bound, self.entry_space.shape, np.float32))

    def normalize(self, batch: np.ndarray) -> np.ndarray:
        """``batch`` normalised with the current statistics (which it does not update)."""
        normalized = ((batch - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon)).astype(np.float32)
        return normalized if self.clip is None else np.clip(normalized, -self.clip, self.clip, out=normalized)

    def transform(self, batch: np.ndarray) -> np.ndarray:
        if self.update_running_mean:
            self.obs_rms.update(batch)
        return self.normalize(batch)

    def transform_final(self, batch: np.ndarray, env_id: int) -> np.ndarray:
        return self.normalize(batch)

    def on_reset(self, observations: Any, infos: dict[str, Any], mask: np.ndarray) -> tuple[Any, dict[str, Any]]:
        batch = get_entry(observations, self.key)
        if self.update_running_mean:
            self.obs_rms.update(batch[mask])
        return with_entry(observations, self.key, self.normalize(batch)), infos

    # ----------------------------------------------------------------- statistics
    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the running statistics: ``mean``, ``var`` (float64) and ``count``."""
        return {
            "mean": self.obs_rms.mean.copy(),
            "var": self.obs_rms.var.copy(),
            "count": np.asarray(self.obs_rms.count, np.float64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore statistics from :meth:`state_dict` (shapes must match this entry's)."""
        mean = np.asarray(state["mean"], np.float64)
        var = np.asarray(state["var"], np.float64)
        if mean.shape != self.entry_space.shape or var.shape != self.entry_space.shape:
            raise ValueError(
                f"statistics of shape {mean.shape}/{var.shape} do not fit entries of shape {self.entry_space.shape}"
            )
        self.obs_rms.mean = mean.copy()
        self.obs_rms.var = var.copy()
        self.obs_rms.count = float(state["count"])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the statistics to an ``.npz`` file."""
        with open(path, "wb") as f:  # np.savez would append ".npz" to a path without it
            np.savez(f, **self.state_dict())

    def load(self, path: str | os.PathLike[str]) -> None:
        """Read statistics written by :meth:`save`."""
        with np.load(path) as data:
            self.load_state_dict(dict(data))
