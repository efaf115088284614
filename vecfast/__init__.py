"""vecfast: fast, Gymnasium-compatible vectorised environments with pluggable trainers."""

import vecfast.envs  # noqa: F401  (registers vecfast's gymnasium ids)
from vecfast.vector import AsyncSharedMemVectorEnv
from vecfast.vector.make import make_vec

__version__ = "0.1.0"
__all__ = ["AsyncSharedMemVectorEnv", "__version__", "make_vec"]
