"""Built-in trainers (APPO, PPO) behind one small protocol, the algorithm registry, and ``train()``.

Names are imported on first use, so ``vecfast.trainers.cli`` and ``vecfast.trainers.config``
load without torch (the ``vecfast`` command starts fast).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ActorCritic": "vecfast.trainers.models",
    "TrainConfig": "vecfast.trainers.config",
    "TrainResult": "vecfast.trainers.train",
    "Trainer": "vecfast.trainers.registry",
    "get_algo": "vecfast.trainers.registry",
    "load_policy": "vecfast.trainers.train",
    "register_algo": "vecfast.trainers.registry",
    "registered_algos": "vecfast.trainers.registry",
    "train": "vecfast.trainers.train",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vecfast.trainers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
