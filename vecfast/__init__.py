"""vecfast: fast, Gymnasium-compatible vectorised environments with pluggable trainers."""

import importlib

import vecfast.envs  # noqa: F401  (registers vecfast's gymnasium ids)
from vecfast.vector import AsyncSharedMemVectorEnv
from vecfast.vector.make import make_vec

__version__ = "0.1.0"
__all__ = [
    "AsyncSharedMemVectorEnv",
    "EvalResult",
    "TrainResult",
    "__version__",
    "evaluate",
    "load_policy",
    "make_vec",
    "train",
]

# Subpackages that load on first use (``vecfast.wrappers.pettingzoo_to_vector`` after ``import vecfast``):
# trainers load torch, multiagent and wrappers what their adapters need.
_SUBPACKAGES = ("cluster", "envs", "multiagent", "selfplay", "trainers", "vector", "wrappers")
_TRAINER_NAMES = ("train", "TrainResult", "evaluate", "EvalResult", "load_policy")


def __getattr__(name: str) -> object:
    """Subpackages, and ``vecfast.train``/``evaluate``/``load_policy`` and their results, load only when first used."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f"vecfast.{name}")
    if name in _TRAINER_NAMES:
        return getattr(importlib.import_module("vecfast.trainers"), name)
    raise AttributeError(f"module 'vecfast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES, *_TRAINER_NAMES})
