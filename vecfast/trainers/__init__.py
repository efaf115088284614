"""Built-in trainers (PPO under the sync, async and distributed schemes), their registry, and ``train()``.

Only :class:`TrainConfig` loads with the package; the other names load their modules (and torch)
when first used, so ``import vecfast.trainers.config`` and ``vecfast --help`` import no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vecfast.extras import require
from vecfast.trainers.config import TrainConfig

if TYPE_CHECKING:
    from vecfast.trainers.algorithm.models import ActorCritic, ActState
    from vecfast.trainers.base.metrics import EpisodeStats, IterationMetrics, PolicyLag
    from vecfast.trainers.protocols import Algorithm, Trainer
    from vecfast.trainers.registry import register_algorithm, register_scheme, registered_algos, registered_schemes
    from vecfast.trainers.run.evaluation import EvalResult, evaluate
    from vecfast.trainers.run.policies import TrainResult, load_policy
    from vecfast.trainers.run.training import train
    from vecfast.trainers.tools.export import export_policy, export_run

_LAZY = {  # name -> the module that defines it
    "EvalResult": "vecfast.trainers.run.evaluation",
    "evaluate": "vecfast.trainers.run.evaluation",
    "ActorCritic": "vecfast.trainers.algorithm.models",
    "ActState": "vecfast.trainers.algorithm.models",
    "EpisodeStats": "vecfast.trainers.base.metrics",
    "IterationMetrics": "vecfast.trainers.base.metrics",
    "PolicyLag": "vecfast.trainers.base.metrics",
    "Algorithm": "vecfast.trainers.protocols",
    "Trainer": "vecfast.trainers.protocols",
    "register_algorithm": "vecfast.trainers.registry",
    "register_scheme": "vecfast.trainers.registry",
    "registered_algos": "vecfast.trainers.registry",
    "registered_schemes": "vecfast.trainers.registry",
    "TrainResult": "vecfast.trainers.run.policies",
    "load_policy": "vecfast.trainers.run.policies",
    "train": "vecfast.trainers.run.training",
    "export_policy": "vecfast.trainers.tools.export",
    "export_run": "vecfast.trainers.tools.export",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = require(_LAZY[name], f"vecfast's {name}")
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "ActState",
    "ActorCritic",
    "Algorithm",
    "EpisodeStats",
    "EvalResult",
    "IterationMetrics",
    "PolicyLag",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "evaluate",
    "export_policy",
    "export_run",
    "load_policy",
    "register_algorithm",
    "register_scheme",
    "registered_algos",
    "registered_schemes",
    "train",
]
