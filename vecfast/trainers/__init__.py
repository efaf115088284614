"""Built-in trainers (APPO, PPO) behind one small protocol, and the algorithm registry."""

from vecfast.trainers import appo, ppo  # noqa: F401  (register "appo" and "ppo")
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.models import ActorCritic
from vecfast.trainers.registry import Trainer, get_algo, register_algo, registered_algos

__all__ = ["ActorCritic", "TrainConfig", "Trainer", "get_algo", "register_algo", "registered_algos"]
