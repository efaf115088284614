"""Finished episodes: returns and lengths counted by the trainer from rewards (any wrapper stack works), and
the env's own figures of each episode (PointNav's success and SPL, Doom's frags) read from its final info.

Training's sampler and :func:`vecfast.evaluate` share one rule for where episodes begin and end
(:class:`EpisodeBoundaries`), one count of their returns and lengths (:class:`EpisodeTracker`, whose means go to
``metrics.jsonl``) and one reading of their final infos (:func:`episode_metrics`).
"""

from __future__ import annotations

import dataclasses
import numbers
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from vecfast.trainers.base import collective
from vecfast.trainers.base.metrics import EpisodeStats
from vecfast.vector.restarts import RESTARTED

# info keys that are not the env's figures of an episode: RecordEpisodeStatistics' {"r", "l", "t"}
# (the return and length are counted from the rewards; "t" is wall time), SAME_STEP's final
# observation and info (read as the final info instead), recv's env ids, the flag of an env that was restarted
# (and Doom matches' reason for it), the multi-agent vector envs' slot bookkeeping, and ALE's frame counters and
# lives (0 at every game's end)
_NOT_METRICS = (
    *("episode", "final_obs", "final_info", "env_id", RESTARTED, "match_restarted"),
    *("agent_id", "match_id", "active"),
    *("lives", "episode_frame_number", "frame_number"),
)


def episode_metrics(info: Mapping[str, Any], i: int, mode: AutoresetMode) -> dict[str, float]:
    """The numeric scalars of the final info of the episode that row ``i`` of a vector info ends (SAME_STEP
    keeps it in ``info["final_info"]``); nested dicts as ``a/b``."""
    if mode == AutoresetMode.SAME_STEP:
        if "final_info" not in info or not _numpy(info.get("_final_info", np.ones(i + 1, bool)))[i]:
            return {}
        info = info["final_info"]
    return _scalars(info, i)


def _scalars(info: Mapping[str, Any], i: int, prefix: str = "") -> dict[str, float]:
    """Row ``i`` of a gymnasium vector info (arrays and ``_key`` masks): its numeric scalars."""
    out: dict[str, float] = {}
    for key, value in info.items():
        if key.startswith("_") or (not prefix and key in _NOT_METRICS):
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not bool(_numpy(mask)[i]):
            continue
        if isinstance(value, Mapping):
            out.update(_scalars(value, i, f"{prefix}{key}/"))
            continue
        try:
            item = _numpy(value)[i]
        except (IndexError, TypeError):
            continue
        if np.ndim(item) == 0 and isinstance(item, (numbers.Real, np.bool_)):
            out[prefix + key] = float(item)
    return out


def _flag(info: Mapping[str, Any], key: str, i: int) -> bool:
    """Row ``i`` of a vector info's boolean ``key`` (False where its ``_key`` mask says it is absent)."""
    if key not in info or not bool(_numpy(info.get(f"_{key}", np.ones(i + 1, bool)))[i]):
        return False
    return bool(_numpy(info[key])[i])


def _numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


class EpisodeBoundaries:
    """Per env, under gymnasium autoreset ``mode``: whether the step it takes next is a transition (``valid``) and
    whether its next observation starts an episode (``first``: the policy's recurrent state restarts there).

    NEXT_STEP: the step after an episode's end only resets the env (not a transition), and the observation it
    returns starts the next episode. SAME_STEP: the observation returned with an episode's end already starts
    the next one. DISABLED (and any partial reset): the caller resets the env and says so, :meth:`restarted`.
    Tensors on ``device``, updated in place (the sampler indexes them per env batch).
    """

    def __init__(self, num_envs: int, mode: AutoresetMode = AutoresetMode.NEXT_STEP, device: Any = None) -> None:
        self.mode = AutoresetMode(mode)
        self._next_step = self.mode is AutoresetMode.NEXT_STEP  # decided once: the sampler's hot path asks often
        self.first = torch.ones(num_envs, dtype=torch.bool, device=device)
        self.valid = torch.ones(num_envs, dtype=torch.bool, device=device)

    def stepped(self, envs: torch.Tensor | slice, valid: torch.Tensor, done: torch.Tensor) -> None:
        """``envs`` took a step, a transition where ``valid`` (their ``self.valid`` before it: the caller has it
        already), that ended an episode where ``done``."""
        if self._next_step:
            self.first[envs] = ~valid  # the step after a reset step starts an episode
            self.valid[envs] = ~done  # the step after an episode's end only resets the env
        else:
            self.first[envs] = done
            self.valid[envs] = True

    def restarted(self, envs: torch.Tensor) -> None:
        """``envs`` were reset: their next observation starts an episode, and their next step is a transition."""
        self.first[envs] = True
        self.valid[envs] = True


@dataclass(frozen=True)
class EndedEpisode:
    """One finished episode of env ``env``: its return and length (reset steps not counted), the env's own
    figures from its final info, and the sampler's policy that played it. ``restarted``: not finished but cut
    short, truncated because its env failed and was rebuilt (``info["restarted"]``): the statistics, the Elo books
    and evaluations leave it out."""

    env: int
    episode_return: float
    length: int
    metrics: dict[str, float]
    policy: int = 0
    restarted: bool = False

    def moved(self, offset: int) -> EndedEpisode:
        """The same episode of env ``env + offset`` (a node's envs among a run's)."""
        return dataclasses.replace(self, env=self.env + offset)


class EpisodeTracker:
    """Running return and length per env; the last ``window`` finished episodes' returns, lengths and env
    metrics (read from final infos as autoreset ``mode`` places them). A sampler thread records while the
    learner's thread summarises: a lock keeps them apart."""

    def __init__(self, num_envs: int, window: int = 100, mode: AutoresetMode = AutoresetMode.NEXT_STEP) -> None:
        self.mode = AutoresetMode(mode)
        self.returns_so_far = np.zeros(num_envs, np.float64)
        self.lengths_so_far = np.zeros(num_envs, np.int64)
        self.window = window
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self.metrics: dict[str, deque[float]] = {}
        self.episodes = 0
        self._lock = threading.Lock()

    def record(
        self,
        env_ids: np.ndarray | slice,
        rewards: np.ndarray,
        done: np.ndarray,
        valid: np.ndarray,
        info: Mapping[str, Any] | None = None,
        info_rows: np.ndarray | None = None,
    ) -> list[EndedEpisode]:
        """One step of envs ``env_ids``; steps that only reset an env (``valid`` False) do not count.
        ``info``: the step's vector info, whose row ``info_rows[j]`` (default ``j``) is the ``j``-th env's.
        Returns the episodes that ended."""
        with self._lock:
            self.returns_so_far[env_ids] += np.where(valid, rewards, 0.0)
            self.lengths_so_far[env_ids] += valid
            ended = np.flatnonzero(done)
            if not ended.size:
                return []
            ids = np.arange(len(self.returns_so_far))[env_ids][ended]
            rows = ended if info_rows is None else np.asarray(info_rows)[ended]
            episodes = [
                EndedEpisode(
                    int(env),
                    float(self.returns_so_far[env]),
                    int(self.lengths_so_far[env]),
                    {} if info is None else episode_metrics(info, int(row), self.mode),
                    restarted=info is not None and _flag(info, RESTARTED, int(row)),
                )
                for env, row in zip(ids.tolist(), rows.tolist(), strict=True)
            ]
            self._ended(ids, episodes)
            return episodes

    def cut(self, env_ids: np.ndarray) -> list[EndedEpisode]:
        """End the episodes of ``env_ids`` where they stand (stopped short: they have no final info)."""
        with self._lock:
            episodes = [
                EndedEpisode(env, float(self.returns_so_far[env]), int(self.lengths_so_far[env]), {})
                for env in np.asarray(env_ids).tolist()
            ]
            self._ended(env_ids, episodes)
            return episodes

    def _ended(self, ids: np.ndarray, episodes: list[EndedEpisode]) -> None:
        self.returns_so_far[ids] = 0.0
        self.lengths_so_far[ids] = 0
        self._count(episodes)

    def extend(self, episodes: list[EndedEpisode]) -> None:
        """Count episodes that ended elsewhere (recorded by a sampler on another node)."""
        with self._lock:
            self._count(episodes)

    def _count(self, episodes: list[EndedEpisode]) -> None:
        finished = [episode for episode in episodes if not episode.restarted]
        self.episodes += len(finished)
        for episode in finished:
            self.returns.append(episode.episode_return)
            self.lengths.append(episode.length)
            for key, value in episode.metrics.items():
                self.metrics.setdefault(key, deque(maxlen=self.window)).append(value)

    def state_dict(self) -> dict[str, Any]:
        """The window of finished episodes (plain data), for a checkpoint: a resumed run's statistics and its
        best-so-far judgement go on from the episodes before it rather than from the first few after it."""
        with self._lock:
            return {
                "returns": list(self.returns),
                "lengths": list(self.lengths),
                "metrics": {key: list(values) for key, values in self.metrics.items()},
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The window of :meth:`state_dict` (the count of episodes is the run loop's, which carries it)."""
        with self._lock:
            self.returns = deque(state["returns"], maxlen=self.window)
            self.lengths = deque(state["lengths"], maxlen=self.window)
            self.metrics = {key: deque(values, maxlen=self.window) for key, values in state["metrics"].items()}

    def summary(self) -> EpisodeStats:
        """Episodes so far and the window's means; in a distributed run, of every rank's envs together."""
        with self._lock:
            counts = [self.episodes, len(self.returns), sum(self.returns), sum(self.lengths)]
            best_here = max(self.returns, default=-np.inf)
            mine = {key: (len(values), sum(values)) for key, values in self.metrics.items()}
        episodes, count, return_sum, length_sum = collective.all_sum(torch.tensor(counts, dtype=torch.float64)).tolist()
        best = collective.all_max(torch.tensor([best_here], dtype=torch.float64)).item()
        names = collective.all_names(mine)
        sums = collective.all_sum(torch.tensor([mine.get(k, (0, 0.0)) for k in names], dtype=torch.float64))
        metrics = {key: total / n for key, (n, total) in zip(names, sums.reshape(-1, 2).tolist(), strict=True) if n}
        if not count:
            return EpisodeStats(int(episodes), metrics=metrics)
        return EpisodeStats(int(episodes), return_sum / count, best, length_sum / count, metrics)
