"""Errors raised by vecfast's vector envs; each names the env and worker involved.

An env's own exception reaches the caller as an instance of both :class:`EnvError` and
the env's exception type (``except ValueError`` catches an env's ``ValueError``, as with
gymnasium's vector envs), with the env index, the worker and the worker's traceback in
its message and attributes.
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle


class EnvError(Exception):
    """An env raised inside its worker.

    Attributes:
        env_index: the env's index in the vector env.
        worker_index: the worker process that ran it.
        exc_type: the name of the env's exception type.
        env_message: ``str()`` of the env's exception.
        worker_traceback: the traceback, formatted in the worker.
    """

    env_index: int
    worker_index: int
    exc_type: str
    env_message: str
    worker_traceback: str

    def __str__(self) -> str:
        return f"{self.headline}\n\nTraceback in the worker:\n{self.worker_traceback}"

    @property
    def headline(self) -> str:
        """The message without the worker's traceback: which env raised what."""
        return f"env {self.env_index} (worker {self.worker_index}) raised {self.exc_type}: {self.env_message}"

    def __reduce__(self) -> tuple[Any, ...]:
        original = next((c for c in type(self).__mro__[1:] if not issubclass(c, EnvError)), Exception)
        details = (self.env_index, self.worker_index, self.exc_type, self.env_message, self.worker_traceback)
        return _rebuild, (original, self.args, details, dict(self.__dict__))


_CLASSES: dict[type[BaseException], type[EnvError]] = {}


def _error_class(original: type[BaseException]) -> type[EnvError]:
    """``EnvError`` combined with ``original`` (plain ``EnvError`` if they cannot combine)."""
    if original not in _CLASSES:
        try:
            combined = type(f"EnvError({original.__name__})", (EnvError, original), {"__module__": __name__})
        except TypeError:  # a final class, or one whose instance layout cannot be shared
            combined = EnvError
        _CLASSES[original] = combined
    return _CLASSES[original]


def make_env_error(
    original: BaseException | None,
    env_index: int,
    worker_index: int,
    exc_type: str,
    message: str,
    traceback: str,
) -> EnvError:
    """An :class:`EnvError` that is also an instance of ``type(original)`` when that can be."""
    cls = EnvError if original is None else _error_class(type(original))
    args = () if original is None else original.args
    error = _instance(cls, args)
    if original is not None:
        vars(error).update({k: v for k, v in vars(original).items() if not k.startswith("__")})
        if isinstance(original, ImportError):  # which module is missing (not in vars: one of ImportError's __slots__)
            error.name, error.path = original.name, original.path
    error.env_index = env_index
    error.worker_index = worker_index
    error.exc_type = exc_type
    error.env_message = message
    error.worker_traceback = traceback
    return error


def _instance(cls: type[EnvError], args: tuple[Any, ...]) -> EnvError:
    try:
        error = cls(*args)
    except Exception:  # a constructor with its own signature: keep the args, skip its __init__
        error = cls.__new__(cls)
        error.args = args
    return error


def _rebuild(
    original: type[BaseException], args: tuple[Any, ...], details: tuple[Any, ...], state: dict[str, Any]
) -> EnvError:
    error = _instance(_error_class(original) if original is not Exception else EnvError, args)
    vars(error).update(state)
    error.env_index, error.worker_index, error.exc_type, error.env_message, error.worker_traceback = details
    return error


def pickle_exception(exc: BaseException) -> bytes | None:
    """The exception as bytes for the owner, or None if it does not pickle (its text still travels)."""
    try:
        return cloudpickle.dumps(exc)
    except Exception:
        return None


def unpickle_exception(data: bytes | None) -> BaseException | None:
    if data is None:
        return None
    try:
        exc = pickle.loads(data)
    except Exception:
        return None
    return exc if isinstance(exc, BaseException) else None


class WorkerDiedError(RuntimeError):
    """A worker process ended without being asked to (segfault, kill -9, OOM killer)."""


class StepTimeoutError(TimeoutError):
    """Envs did not answer within ``step_timeout``; the message names the env that hangs."""


class StartTimeoutError(TimeoutError):
    """Env constructors did not finish within ``start_timeout``; the message names their workers."""


class InvalidActionError(ValueError):
    """The action batch does not fit the action space (``check_actions=True``); nothing was stepped."""
