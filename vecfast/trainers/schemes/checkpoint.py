"""What a scheme's checkpoint holds: policy 0 (model, learner, env steps), the other policies of a population, the
window of finished episodes (the statistics a resumed run goes on from), each env's episode numbering where the
sampler runs in this process (the acting plan's input, so that a resumed run's draws go on rather than start over)
and the acting plan's books. One pair of functions for every scheme."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.base.progress import RunProgress
from vecfast.trainers.sampling.acting_plan import ActingPlan
from vecfast.trainers.sampling.episodes import EpisodeTracker


class EpisodeBooks(Protocol):
    """Where a scheme's episodes are kept: a sampler, a batch source."""

    episodes: EpisodeTracker
    episodes_started: np.ndarray | None  # per env, where the acting plan numbers episodes in this process


def scheme_state(
    learners: Learners, books: EpisodeBooks, plan: ActingPlan, env_steps: int, progress: RunProgress
) -> dict[str, Any]:
    """The checkpoint (plain data and tensors, for a ``weights_only`` load)."""
    state = learners.agents[0].state_dict(env_steps)
    state.update(progress.state_dict())
    state["episode_window"] = books.episodes.state_dict()
    if books.episodes_started is not None:
        state["episodes_started"] = books.episodes_started.tolist()
    state["acting_plan"] = plan.state_dict()
    if len(learners) > 1:
        state["population"] = learners.state_dict()
    return state


def load_scheme_state(
    learners: Learners, books: EpisodeBooks, plan: ActingPlan, progress: RunProgress, state: dict[str, Any]
) -> int:
    """Restore :func:`scheme_state`'s checkpoint; returns its env steps. Keys older checkpoints lack are skipped.
    Every rank of a distributed run takes rank 0's window: the job's means are its means."""
    env_steps = learners.agents[0].load_state_dict(state)
    progress.load_state_dict(state)
    if "episode_window" in state:
        books.episodes.load_state_dict(state["episode_window"])
    started, episodes_started = state.get("episodes_started"), books.episodes_started
    if started is not None and episodes_started is not None and len(started) == len(episodes_started):
        episodes_started[:] = started
    if len(learners) > 1:
        learners.load_state_dict(state["population"])
    if "acting_plan" in state:
        plan.load_state_dict(state["acting_plan"])
    return env_steps
