"""Lockstep runs for the wrapper tests: a batched wrapper against per-env wrappers.

The reference is a SyncVectorEnv whose envs carry single-env wrappers (gymnasium's
where they exist); the vector env under test is vecfast's AsyncSharedMemVectorEnv or
gymnasium's SyncVectorEnv with the batched wrapper on top. Both get the same seeds and
actions, and every step result is compared.
"""

from __future__ import annotations

import copy
import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from helpers import assert_step_equal, assert_tree_equal

BACKENDS = ("sync", "async")
MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
NUM_ENVS = 5
NUM_WORKERS = 2

StepCheck = Callable[[tuple, tuple, str], None]


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


def run_lockstep(
    expected: VectorEnv,
    actual: VectorEnv,
    steps: int,
    seed: int,
    mode: AutoresetMode,
    check: StepCheck = assert_step_equal,
    check_reset: StepCheck = assert_tree_equal,
) -> Counter:
    """Step both with the same seeds and actions, checking steps with ``check``, resets with ``check_reset``.

    In DISABLED mode finished envs are reset with ``reset_mask``, seeded and unseeded
    by turns. Returns counts of episode ends, SAME_STEP final observations and partial
    resets, so callers can assert that the boundaries were exercised.
    """
    check_reset(actual.reset(seed=seed), expected.reset(seed=seed), "reset")
    expected.action_space.seed(seed)
    seen: Counter = Counter()
    for t in range(steps):
        actions = expected.action_space.sample()
        want = expected.step(copy.deepcopy(actions))
        got = actual.step(copy.deepcopy(actions))
        check(got, want, f"step {t}")
        done = want[2] | want[3]
        seen["terminated"] += int(want[2].sum())
        seen["truncated"] += int(want[3].sum())
        seen["final_obs"] += int(want[4].get("_final_obs", np.zeros(1, bool)).sum())
        if mode == AutoresetMode.DISABLED and done.any():
            reset_seed = None if t % 2 else seed + 1000 + t
            want_reset = expected.reset(seed=reset_seed, options={"reset_mask": done.copy()})
            got_reset = actual.reset(seed=reset_seed, options={"reset_mask": done.copy()})
            check_reset(got_reset, want_reset, f"partial reset after step {t}")
            seen["partial_resets"] += 1
    return seen


def assert_boundaries_seen(seen: Counter, mode: AutoresetMode) -> None:
    """The run crossed episode ends (both kinds) and the mode's autoreset path."""
    assert seen["terminated"] > 0 and seen["truncated"] > 0, seen
    if mode == AutoresetMode.SAME_STEP:
        assert seen["final_obs"] > 0, seen
    if mode == AutoresetMode.DISABLED:
        assert seen["partial_resets"] > 0, seen


def info_without(infos: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in infos.items() if k not in keys and k.lstrip("_") not in keys}
