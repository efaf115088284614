"""What a trainer reports after each iteration: a typed record whose optional parts a trainer may leave out.

:func:`vecfast.train` adds what it measures itself (``env_frames``, ``fps``, ``time``) and flattens
the record into the names that ``metrics.jsonl``, TensorBoard, the progress line and the live
dashboard read (:meth:`IterationMetrics.to_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EpisodeStats:
    """Finished episodes: how many so far, the mean return/length over the last ``stats_avg`` of them, and
    ``metrics``: the mean of each of the env's figures of an episode (its final info's numbers: PointNav's
    ``success`` and ``spl``) over the last ``stats_avg`` episodes that reported it."""

    episodes: int = 0
    mean_return: float | None = None
    max_return: float | None = None
    mean_length: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, float]:
        out: dict[str, float] = {"episodes": self.episodes}
        for key, value in (
            ("mean_episode_return", self.mean_return),
            ("max_episode_return", self.max_return),
            ("mean_episode_length", self.mean_length),
        ):
            if value is not None:
                out[key] = value
        return {**self.metrics, **out}  # the trainer's own names win over an env's


@dataclass(frozen=True)
class PolicyLag:
    """How many learner steps older than the learner's the policy that acted was, over a batch."""

    min: float
    avg: float
    max: float


@dataclass(frozen=True)
class IterationMetrics:
    """One iteration of a trainer. Only ``env_steps`` (transitions sampled so far, by all ranks) is required.

    ``policy_lag`` is None where the acting policy is the learning one (synchronous schemes);
    ``learning`` holds the algorithm's loss terms by name (``policy_loss``, ``entropy``, ...);
    ``timings`` the seconds each activity took (``time_learning``, ``time_sampling``, ...);
    ``extra`` any other number the trainer measures.
    """

    env_steps: int
    learner_steps: int | None = None
    episodes: EpisodeStats | None = None
    policy_lag: PolicyLag | None = None
    learning: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, float]:
        """The flat names of ``metrics.jsonl`` (absent parts leave their names out)."""
        out: dict[str, float] = {"env_steps": self.env_steps}
        if self.learner_steps is not None:
            out["learner_steps"] = self.learner_steps
        if self.episodes is not None:
            out.update(self.episodes.to_dict())
        if self.policy_lag is not None:
            lag = self.policy_lag
            out.update(policy_lag_min=lag.min, policy_lag_avg=lag.avg, policy_lag_max=lag.max)
        return {**out, **self.learning, **self.timings, **self.extra}
