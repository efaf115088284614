"""Set-ups for the wrapper tests' lockstep runs: a batched wrapper against per-env wrappers.

The reference is a SyncVectorEnv whose envs carry single-env wrappers (gymnasium's
where they exist); the vector env under test is vecfast's AsyncSharedMemVectorEnv or
gymnasium's SyncVectorEnv with the batched wrapper on top. ``helpers.run_lockstep``
gives both the same seeds and actions and compares every step result.

For EnvPool's asynchronous API, where ``recv`` returns whichever envs finish first,
:func:`run_recv_send` and :func:`run_step` collect results per env, each env acting
from its own action stream, so the two runs can be compared env by env.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array
from helpers import info_row, tree_row

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


# An env's result: (observation, reward, terminated, truncated, info), as one env would report it.
EnvResult = tuple[Any, float, bool, bool, dict[str, Any]]


def action_streams(space: spaces.Space, num_envs: int, seed: int) -> list[spaces.Space]:
    """A seeded copy of the single-env action space per env: env i's k-th action is the same however envs interleave."""
    streams = [copy.deepcopy(space) for _ in range(num_envs)]
    for i, stream in enumerate(streams):
        stream.seed(seed + i)
    return streams


def batch_of(space: spaces.Space, items: Sequence[Any]) -> Any:
    """Single-env values stacked into one batch of ``space``."""
    return concatenate(space, items, create_empty_array(space, len(items)))


def _info_row(infos: dict[str, Any], row: int) -> dict[str, Any]:
    """``helpers.info_row``, plus RecordEpisodeStatistics' ``episode`` (whose entries have no masks of their
    own) without its wall-clock durations ``t``."""
    info = info_row(info_without(infos, "episode"), row)
    if infos.get("_episode", np.zeros(row + 1, bool))[row]:
        info["episode"] = {k: v[row] for k, v in infos["episode"].items() if k != "t"}
    return info


def _rows(result: tuple, envs: Sequence[int], received: list[list[EnvResult]]) -> None:
    """Append each row of a batched step result to the list of the env it belongs to."""
    obs, rewards, terminations, truncations, infos = result
    for row, env in enumerate(envs):
        received[env].append(
            (
                tree_row(obs, row),
                float(rewards[row]),
                bool(terminations[row]),
                bool(truncations[row]),
                _info_row(infos, row),
            )
        )


def run_recv_send(vec: Any, seed: int, min_results: int, max_rounds: int = 3000) -> list[list[EnvResult]]:
    """Per-env results of ``async_reset(seed)`` and recv/send rounds, until every env has ``min_results``.

    The first result of each env is its reset (reward 0, not done). An env that
    ``recv`` starves for ``max_rounds`` fails the run.
    """
    streams = action_streams(vec.single_action_space, vec.num_envs, 1000 + seed)
    received: list[list[EnvResult]] = [[] for _ in range(vec.num_envs)]
    vec.async_reset(seed=seed)
    for _ in range(max_rounds):
        if min(map(len, received)) >= min_results:
            return received
        *result, infos = vec.recv()
        ids = infos["env_id"]
        assert len(ids) == vec.batch_size < vec.num_envs, ids
        _rows((*result, infos), ids.tolist(), received)
        vec.send(batch_of(vec.single_action_space, [streams[i].sample() for i in ids]), ids)
    raise AssertionError(f"recv() starved some env: results per env {list(map(len, received))}")


def run_step(
    vec: VectorEnv, seed: int, steps: int, record: Callable[[], Any] = lambda: None
) -> tuple[list[list[EnvResult]], list[Any]]:
    """Per-env results of ``reset(seed)`` and ``steps`` calls of ``step`` with :func:`run_recv_send`'s action streams.

    Also returns ``record()`` after the reset and after each step (e.g. a copy of per-env state).
    """
    streams = action_streams(vec.single_action_space, vec.num_envs, 1000 + seed)
    results: list[list[EnvResult]] = [[] for _ in range(vec.num_envs)]
    obs, infos = vec.reset(seed=seed)
    zeros = np.zeros(vec.num_envs, bool)
    _rows((obs, np.zeros(vec.num_envs), zeros, zeros, infos), range(vec.num_envs), results)
    records = [record()]
    for _ in range(steps):
        actions = batch_of(vec.single_action_space, [stream.sample() for stream in streams])
        _rows(vec.step(actions), range(vec.num_envs), results)
        records.append(record())
    return results, records
