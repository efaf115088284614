"""Restarts of failed envs: what each one was, and the budget past which failures raise again.

With ``restart_failed_workers=True`` an env that raises is rebuilt from its env function in its
worker, and the call that found the failure returns it truncated (its last observation, and
``info["restarted"]``): see :class:`~vecfast.vector.AsyncSharedMemVectorEnv`. Each restart is
recorded; more than ``max_restarts`` within ``restart_window`` seconds means something is wrong
with the env itself, and the failure is raised as it would be without restarts.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass

from vecfast.vector.messages import EnvFailure

RESTARTED = "restarted"  # the info key (True) of an env that the call rebuilt after it failed


@dataclass(frozen=True)
class Restart:
    """One restart: when the owner learned of it (``time.time()``), the worker and the envs rebuilt, why
    (``cause``: ``"raised"``, an env raised or the game process it ran died; ``"died"``, the worker process
    died, with its ``exit_status`` such as ``"signal SIGSEGV"`` or ``"exit code 3"``; ``"stalled"``, the worker
    went past ``step_timeout`` and was killed), what was raised or noticed, and the env's traceback."""

    time: float
    worker: int
    env_indices: tuple[int, ...]
    cause: str
    exit_status: str | None
    exc_type: str
    message: str
    traceback: str

    def moved(self, offset: int) -> Restart:
        """The same restart with its env indices ``offset`` further on (a node's envs among a run's)."""
        return dataclasses.replace(self, env_indices=tuple(i + offset for i in self.env_indices))

    @classmethod
    def of_env(cls, failure: EnvFailure) -> Restart:
        return cls(
            time.time(),
            failure.worker_index,
            (failure.env_index,),
            "raised",
            None,
            failure.exc_type,
            failure.message,
            failure.traceback,
        )

    @classmethod
    def of_matches(cls, slots: tuple[int, ...], error: BaseException) -> Restart:
        """Doom matches torn down and started again (their games' processes, not a worker's): ``slots``, the agent
        slots of every match."""
        return cls(time.time(), -1, slots, "raised", None, type(error).__name__, str(error), "")

    @classmethod
    def of_worker(
        cls, worker: int, env_indices: tuple[int, ...], cause: str, exit_status: str | None, error: BaseException
    ) -> Restart:
        return cls(time.time(), worker, env_indices, cause, exit_status, type(error).__name__, str(error), "")


class RestartBudget:
    """At most ``max_restarts`` restarts within any ``window`` seconds."""

    def __init__(self, max_restarts: int, window: float) -> None:
        if max_restarts < 0 or window <= 0:
            raise ValueError(f"max_restarts must be >= 0 and restart_window > 0, got {max_restarts} and {window}")
        self.max_restarts, self.window = max_restarts, window
        self._times: deque[float] = deque()

    def allows(self, now: float) -> bool:
        """Whether one more restart at ``now`` (``time.monotonic()``) stays within budget; if so it is counted."""
        while self._times and now - self._times[0] > self.window:
            self._times.popleft()
        if len(self._times) >= self.max_restarts:
            return False
        self._times.append(now)
        return True
