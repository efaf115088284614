"""A run's trained policy: :class:`TrainResult`, what ``vecfast.train`` returns, and :func:`load_policy`, the policy
of a run directory from its checkpoint. Apart from the training loop, so that evaluation, export and the
self-play matches read a run's policy without importing the loop that trains it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vecfast.trainers import entry_defaults
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.run_dir import load_checkpoint, space_from_data


@dataclass
class TrainResult:
    """What a run produced: its directory, the trained policy (``policy.act(obs)``) and summary stats."""

    run_dir: Path
    policy: ActorCritic
    stats: dict[str, Any] = field(default_factory=dict)


def load_policy(run_dir: str | os.PathLike, which: str = entry_defaults.CHECKPOINT, policy: int = 0) -> ActorCritic:
    """The policy of a run directory, on CPU: its newest checkpoint, or with ``which="best"`` the one
    with the best mean return (the newest if it has none yet); or of one checkpoint file. ``policy``: which
    of a population's policies (``num_policies``).

    The newest by default: ``best.pt`` is only as good as the returns measured when it was
    written, a run shorter than ``save_best_every_sec`` has only its first one.
    """
    try:
        state = load_checkpoint(run_dir, which)
    except FileNotFoundError:
        if which != "best":
            raise
        state = load_checkpoint(run_dir, "last")
    cfg = TrainConfig.from_overrides(**state["config"])
    if not 0 <= policy < cfg.num_policies:
        raise ValueError(f"policy={policy}: the run has policies 0 to {cfg.num_policies - 1}")
    model = ActorCritic(space_from_data(state["observation_space"]), space_from_data(state["action_space"]), cfg)
    model.load_state_dict(state["model"] if policy == 0 else state["population"]["others"][policy - 1]["model"])
    return model.eval()
