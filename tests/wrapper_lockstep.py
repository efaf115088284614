"""Set-ups for the wrapper tests' lockstep runs: a batched wrapper against per-env wrappers.

The reference is a SyncVectorEnv whose envs carry single-env wrappers (gymnasium's
where they exist); the vector env under test is vecfast's AsyncSharedMemVectorEnv or
gymnasium's SyncVectorEnv with the batched wrapper on top. ``helpers.run_lockstep``
gives both the same seeds and actions and compares every step result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

BACKENDS = ("sync", "async")
MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
NUM_ENVS = 5
NUM_WORKERS = 2


def _apply(fn: Callable[[], gym.Env], wrappers: Sequence[Callable[[gym.Env], gym.Env]]) -> gym.Env:
    env = fn()
    for wrapper in wrappers:
        env = wrapper(env)
    return env


def wrapped_fns(fns: Sequence[Callable[[], gym.Env]], *wrappers: Callable[[gym.Env], gym.Env]) -> list:
    """Env factories with single-env ``wrappers`` applied in order (picklable if their parts are)."""
    return [functools.partial(_apply, fn, list(wrappers)) for fn in fns]


def make_vector(backend: str, fns: Sequence[Callable[[], gym.Env]], mode: AutoresetMode, make_sync, make_async):
    """The vector env under test: vecfast's (2 workers) or gymnasium's SyncVectorEnv."""
    if backend == "async":
        return make_async(fns, num_workers=NUM_WORKERS, autoreset_mode=mode)
    return make_sync(fns, autoreset_mode=mode)


def info_without(infos: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in infos.items() if k not in keys and k.lstrip("_") not in keys}
