"""A batched simulator's own asynchronous mode (EnvPool's, and ale-py's ``AtariVectorEnv`` with ``batch_size``) as
vecfast's ``async_reset``/``send``/``recv``, so that APPO double-buffers it without a process pool.

Such a simulator steps its envs on threads of its own: ``recv`` returns the ``batch_size`` envs that finished
first (``info["env_id"]``), and ``send`` gives actions to the envs of the last ``recv``. Its ``reset`` starts every
env and returns the first batch. vecfast's API names the envs in ``send`` too; this wrapper checks that they are
the ones the simulator will act on, and turns ``async_reset`` into ``reset`` plus a ``recv`` result held back.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv, VectorWrapper


def has_own_send_recv(vector_env_class: Any) -> bool:
    """Whether a vector env class steps batches of its envs asynchronously itself (``send``, ``recv`` and a
    ``batch_size`` argument)."""
    if not all(callable(getattr(vector_env_class, name, None)) for name in ("send", "recv")):
        return False
    try:
        return "batch_size" in inspect.signature(vector_env_class).parameters
    except (TypeError, ValueError):
        return False


class BatchedSendRecv(VectorWrapper):
    """``env`` (made with ``batch_size`` < ``num_envs``) with vecfast's async API; ``step`` is its own."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.batch_size = int(getattr(env, "batch_size", env.num_envs))
        self._held: tuple[Any, ...] | None = None  # the first batch, returned by reset
        self._ids: np.ndarray | None = None  # the envs the next send acts on

    def async_reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        obs, info = self.env.reset(seed=seed, options=options)
        none = np.zeros(len(info["env_id"]), dtype=bool)
        self._held = (obs, np.zeros(len(none)), none, none, info)

    def recv(self) -> tuple[Any, ...]:
        result, self._held = (self._held, None) if self._held is not None else (self.env.recv(), None)
        self._ids = np.asarray(result[4]["env_id"])
        return result

    def send(self, actions: Any, env_ids: Any = None) -> None:
        if self._ids is None:
            raise RuntimeError("send() before recv(): the simulator acts on the envs of the last recv")
        if env_ids is not None and not np.array_equal(np.asarray(env_ids), self._ids):
            raise ValueError(
                f"send() for envs {np.asarray(env_ids).tolist()}: this simulator acts on the envs of the last "
                f"recv, {self._ids.tolist()}"
            )
        self._ids = None
        self.env.send(np.asarray(actions))
