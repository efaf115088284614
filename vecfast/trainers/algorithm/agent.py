"""The learning components every scheme assembles: the model, the algorithm that trains it, their device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gymnasium.vector import AutoresetMode, VectorEnv

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.base.runtime import setup_torch
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import AlgorithmFactory


def check_next_step_autoreset(env: VectorEnv) -> None:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if AutoresetMode(mode) != AutoresetMode.NEXT_STEP:
        raise ValueError(f"the trainers need autoreset_mode NEXT_STEP (gymnasium's default), got {mode}")


class Agent:
    """A model for ``env``'s spaces and ``algorithm(model, cfg)`` training it.

    ``learn_with`` wraps the model the algorithm learns through (the distributed scheme's
    gradient averaging); acting and checkpoints use the model itself.
    """

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        learn_with: Callable[[ActorCritic], ActorCritic] | None = None,
    ) -> None:
        check_next_step_autoreset(env)
        self.device = setup_torch(cfg)
        self.model = ActorCritic(env.single_observation_space, env.single_action_space, cfg).to(self.device)
        self.algorithm = algorithm(learn_with(self.model) if learn_with else self.model, cfg)

    def state_dict(self, env_steps: int) -> dict[str, Any]:
        """A checkpoint: the model, the algorithm's state and the env steps sampled (resume and enjoy read it)."""
        return {"model": self.model.state_dict(), "learner": self.algorithm.state_dict(), "env_steps": env_steps}

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Restore from :meth:`state_dict`; returns its env steps."""
        self.model.load_state_dict(state["model"])
        self.algorithm.load_state_dict(state["learner"])
        return state["env_steps"]
