"""What a scheme's checkpoint holds: policy 0 (model, learner, env steps), the other policies of a population, each
env's episode numbering where the sampler runs in this process (the acting plan's input, so that a resumed run's draws
go on rather than start over) and the acting plan's books. One pair of functions for every scheme."""

from __future__ import annotations

from typing import Any

import numpy as np

from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.base.progress import RunProgress
from vecfast.trainers.sampling.acting_plan import ActingPlan


def scheme_state(
    learners: Learners, episodes_started: np.ndarray | None, plan: ActingPlan, env_steps: int, progress: RunProgress
) -> dict[str, Any]:
    """The checkpoint (plain data and tensors, for a ``weights_only`` load)."""
    state = learners.agents[0].state_dict(env_steps)
    state.update(progress.state_dict())
    if episodes_started is not None:
        state["episodes_started"] = episodes_started.tolist()
    state["acting_plan"] = plan.state_dict()
    if len(learners) > 1:
        state["population"] = learners.state_dict()
    return state


def load_scheme_state(
    learners: Learners,
    episodes_started: np.ndarray | None,
    plan: ActingPlan,
    progress: RunProgress,
    state: dict[str, Any],
) -> int:
    """Restore :func:`scheme_state`'s checkpoint; returns its env steps. Keys older checkpoints lack are skipped."""
    env_steps = learners.agents[0].load_state_dict(state)
    progress.load_state_dict(state)
    started = state.get("episodes_started")
    if started is not None and episodes_started is not None and len(started) == len(episodes_started):
        episodes_started[:] = started
    if len(learners) > 1:
        learners.load_state_dict(state["population"])
    if "acting_plan" in state:
        plan.load_state_dict(state["acting_plan"])
    return env_steps
