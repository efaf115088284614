"""Built-in trainers (APPO, PPO) behind one small protocol, the algorithm registry, and ``train()``.

Only :class:`TrainConfig` loads with the package; the other names load their modules (and torch)
when first used, so ``import vecfast.trainers.config`` and ``vecfast --help`` import no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vecfast.trainers.config import TrainConfig

if TYPE_CHECKING:
    from vecfast.trainers.evaluation import EvalResult, evaluate
    from vecfast.trainers.models import ActorCritic
    from vecfast.trainers.registry import Trainer, get_algo, register_algo, registered_algos
    from vecfast.trainers.training import TrainResult, load_policy, train

_LAZY = {  # name -> the module that defines it
    "EvalResult": "vecfast.trainers.evaluation",
    "evaluate": "vecfast.trainers.evaluation",
    "ActorCritic": "vecfast.trainers.models",
    "Trainer": "vecfast.trainers.registry",
    "get_algo": "vecfast.trainers.registry",
    "register_algo": "vecfast.trainers.registry",
    "registered_algos": "vecfast.trainers.registry",
    "TrainResult": "vecfast.trainers.training",
    "load_policy": "vecfast.trainers.training",
    "train": "vecfast.trainers.training",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "ActorCritic",
    "EvalResult",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "evaluate",
    "get_algo",
    "load_policy",
    "register_algo",
    "registered_algos",
    "train",
]
