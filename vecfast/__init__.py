"""vecfast: fast, Gymnasium-compatible vectorised environments with pluggable trainers."""

import vecfast.envs  # noqa: F401  (registers vecfast's gymnasium ids)
from vecfast.vector import AsyncSharedMemVectorEnv
from vecfast.vector.make import make_vec

__version__ = "0.1.0"
__all__ = ["AsyncSharedMemVectorEnv", "EvalResult", "TrainResult", "__version__", "evaluate", "make_vec", "train"]


def __getattr__(name: str) -> object:
    """``vecfast.train``/``evaluate`` and their results load the trainers (and torch) only when first used."""
    if name in ("train", "TrainResult", "evaluate", "EvalResult"):
        import vecfast.trainers

        return getattr(vecfast.trainers, name)
    raise AttributeError(f"module 'vecfast' has no attribute {name!r}")
