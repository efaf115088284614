"""Vector envs: the shared-memory multi-process :class:`AsyncSharedMemVectorEnv` and ``make_vec``."""

from vecfast.vector.async_shared_mem import AsyncSharedMemVectorEnv
from vecfast.vector.errors import EnvError, InvalidActionError, StartTimeoutError, StepTimeoutError, WorkerDiedError
from vecfast.vector.restarts import Restart

__all__ = [
    "AsyncSharedMemVectorEnv",
    "EnvError",
    "InvalidActionError",
    "Restart",
    "StartTimeoutError",
    "StepTimeoutError",
    "WorkerDiedError",
]
