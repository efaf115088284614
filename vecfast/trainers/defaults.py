"""Config layers, lowest first: TrainConfig's defaults, the env family's, the algorithm's, the caller's.

TrainConfig's own defaults are Sample Factory's, for pixels (conv encoder + GRU); envs without
image observations (classic control and the like) get a small MLP and their own learning settings.
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.models import is_image, observation_spaces
from vecfast.trainers.registry import AlgoSpec

VECTOR_FAMILY_DEFAULTS: dict[str, Any] = {
    "use_rnn": False,
    "encoder_mlp_layers": (64, 64),
    "nonlinearity": "tanh",
    "learning_rate": 1e-3,
    "max_grad_norm": 0.5,
    "exploration_loss_coeff": 0.0,
    # A small MLP's learner idled ~85% of the time while envs stepped: 4 passes over each batch,
    # so the critic keeps up when failures reappear after a policy is solved and PPO's clip, not
    # one small step, bounds each update; and the learning rate annealed to 0, so a run ends on a
    # settled policy. CartPole 500k, seeds 0-9 (benchmarks/learning_seeds.py): 1 epoch, constant:
    # 8/10 end >= 475 (2 collapse to ~230-270); 1 epoch, linear decay: 4/10; 4 epochs, constant:
    # 10/10 (worst 484); 4 epochs, linear decay: 10/10, all at 500.
    "num_epochs": 4,
    "lr_schedule": "linear_decay",
}


def family_defaults(observation_space: spaces.Space) -> dict[str, Any]:
    """Defaults for the kind of observations an env has (its single-env observation space)."""
    if any(is_image(s) for s in observation_spaces(observation_space).values()):
        return {}  # TrainConfig's defaults are Sample Factory's, for pixels
    return dict(VECTOR_FAMILY_DEFAULTS)


def config_for(observation_space: spaces.Space, spec: AlgoSpec, overrides: dict[str, Any]) -> TrainConfig:
    """The config layers, lowest first: defaults, the env family's, the algorithm's, the caller's."""
    return TrainConfig.from_overrides(**{**family_defaults(observation_space), **spec.defaults, **overrides})
