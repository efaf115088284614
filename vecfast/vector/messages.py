"""The pipe half of the owner-worker protocol: one typed message per purpose.

Per step nothing crosses the pipe unless an env has something that does not fit the
shared arrays: a non-empty info, an error, an observation of a space that is not kept
in shared memory, or actions that do not fit the action buffer.
"""

from __future__ import annotations

import traceback as tb
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from typing import Any

from gymnasium import Space

from vecfast.vector.errors import EnvError, make_env_error, pickle_exception, unpickle_exception
from vecfast.vector.shared_buffers import ArenaLayout


@dataclass(frozen=True)
class EnvFailure:
    """An exception raised by one env, as it crosses the pipe."""

    env_index: int
    worker_index: int
    exc_type: str
    message: str
    traceback: str
    pickled: bytes | None  # the exception itself, when it pickles

    @classmethod
    def capture(cls, exc: BaseException, env_index: int, worker_index: int) -> EnvFailure:
        """Call inside the ``except`` block, so the traceback is the env's."""
        return cls(env_index, worker_index, type(exc).__name__, str(exc), tb.format_exc(), pickle_exception(exc))

    def to_error(self) -> EnvError:
        return make_env_error(
            unpickle_exception(self.pickled),
            self.env_index,
            self.worker_index,
            self.exc_type,
            self.message,
            self.traceback,
        )


# ---------------------------------------------------------------- start-up
@dataclass(frozen=True)
class WorkerStarted:
    """A worker built its envs: their spaces, and the first env's metadata."""

    spaces: list[tuple[Space, Space]]  # (observation, action) per env
    metadata: dict[str, Any]
    render_mode: str | None


@dataclass(frozen=True)
class StartFailed:
    failure: EnvFailure


@dataclass(frozen=True)
class Attach:
    """The arena's layout (its file descriptor follows on the pipe, or ``arena_name`` names a portable block:
    :func:`~vecfast.vector.shared_buffers.portable_shared_memory`) and the spaces kept in it.

    A space of None is not in shared memory: observations go back pickled in job
    reports, actions come pickled in job payloads. Observations are kept
    ``observation_banks`` times over (:mod:`vecfast.vector.observation_banks`).
    """

    layout: ArenaLayout
    observation_space: Space | None
    action_space: Space | None
    observation_banks: int = 1
    restart_failed_envs: bool = False  # rebuild an env that raises from its env function (vecfast.vector.restarts)
    last_obs: list[Any] | None = None  # a replacement worker's: its predecessor's envs' last observations
    arena_name: str | None = None


@dataclass(frozen=True)
class Attached:
    pass


# ---------------------------------------------------------------- jobs
def pickled(message: Any) -> bytes:
    """``message`` as ``Connection.send`` would pickle it, for ``send_bytes``."""
    return bytes(ForkingPickler.dumps(message))


@dataclass(frozen=True)
class JobPayload:
    """Per-env arguments of a job, in the job's env order: ``(seed, options)`` for a reset,
    the action for a step whose actions do not fit the shared action buffer."""

    args: list[Any]


@dataclass
class JobReport:
    """What a finished job could not write into shared memory, per env index."""

    infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    observations: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, EnvFailure] = field(default_factory=dict)
    restarted: dict[int, EnvFailure] = field(default_factory=dict)  # envs rebuilt after they raised this

    def __bool__(self) -> bool:
        return bool(self.infos or self.observations or self.failures or self.restarted)


@dataclass(frozen=True)
class ControlRequest:
    """``call``/``get_attr``/``set_attr``/``render`` on each of a worker's envs."""

    kind: str
    name: str | Callable[..., Any] = ""  # call: a function of the env runs as fn(env, *args, **kwargs)
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    values: list[Any] | None = None  # set_attr: one value per env of the worker

    def for_envs(self, start: int, stop: int) -> ControlRequest:
        """The request as the worker of envs ``start..stop-1`` gets it (its share of ``values``)."""
        return ControlRequest(self.kind, self.name, self.args, self.kwargs, self.values[start:stop])


@dataclass(frozen=True)
class ControlReply:
    results: list[Any]
    failure: EnvFailure | None = None


@dataclass(frozen=True)
class Closed:
    pass
