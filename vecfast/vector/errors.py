"""Errors raised by vecfast's vector envs; each names the env and worker involved."""

from __future__ import annotations


class EnvError(RuntimeError):
    """An env raised inside its worker; the message carries the worker's traceback."""

    def __init__(self, env_index: int, worker_index: int, exc_type: str, message: str, traceback: str):
        super().__init__(
            f"env {env_index} (worker {worker_index}) raised {exc_type}: {message}\n\n"
            f"Traceback in the worker:\n{traceback}"
        )
        self.env_index = env_index
        self.worker_index = worker_index
        self.exc_type = exc_type
        self.worker_traceback = traceback


class WorkerDiedError(RuntimeError):
    """A worker process ended without being asked to (segfault, kill -9, OOM killer)."""


class StepTimeoutError(TimeoutError):
    """Envs did not answer within ``step_timeout``; the message names the env that hangs."""


class InvalidActionError(ValueError):
    """The action batch does not fit the action space; nothing was stepped."""
