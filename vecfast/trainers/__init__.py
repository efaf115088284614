"""Built-in trainers (APPO, PPO) behind one small protocol, the algorithm registry, and ``train()``."""

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.models import ActorCritic
from vecfast.trainers.registry import Trainer, get_algo, register_algo, registered_algos
from vecfast.trainers.train import TrainResult, load_policy, train

__all__ = [
    "ActorCritic",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "get_algo",
    "load_policy",
    "register_algo",
    "registered_algos",
    "train",
]
