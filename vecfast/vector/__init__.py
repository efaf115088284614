"""Vector envs: the shared-memory multi-process :class:`AsyncSharedMemVectorEnv` and ``make_vec``."""

from vecfast.vector.async_shared_mem import AsyncSharedMemVectorEnv
from vecfast.vector.errors import EnvError, InvalidActionError, StartTimeoutError, StepTimeoutError, WorkerDiedError

__all__ = [
    "AsyncSharedMemVectorEnv",
    "EnvError",
    "InvalidActionError",
    "StartTimeoutError",
    "StepTimeoutError",
    "WorkerDiedError",
]
