"""Built-in trainers (APPO, PPO) behind one small protocol, the algorithm registry, and ``train()``.

Only :class:`TrainConfig` loads with the package; the other names load their modules (and torch)
when first used, so ``import vecfast.trainers.config`` and ``vecfast --help`` import no torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from vecfast.trainers.config import TrainConfig

if TYPE_CHECKING:
    from vecfast.trainers.evaluate import EvalResult, evaluate
    from vecfast.trainers.models import ActorCritic
    from vecfast.trainers.registry import Trainer, get_algo, register_algo, registered_algos
    from vecfast.trainers.train import TrainResult, load_policy, train

_LAZY = {  # name -> the module that defines it
    "EvalResult": "vecfast.trainers.evaluate",
    "evaluate": "vecfast.trainers.evaluate",
    "ActorCritic": "vecfast.trainers.models",
    "Trainer": "vecfast.trainers.registry",
    "get_algo": "vecfast.trainers.registry",
    "register_algo": "vecfast.trainers.registry",
    "registered_algos": "vecfast.trainers.registry",
    "TrainResult": "vecfast.trainers.train",
    "load_policy": "vecfast.trainers.train",
    "train": "vecfast.trainers.train",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """``train`` and ``evaluate`` name a submodule and its function: importing the submodule binds its
    name on the package, and the function keeps the name, as when this module imported them all."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ == _LAZY.get(name):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
