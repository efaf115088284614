"""Validate a whole action batch before any env steps.

gymnasium's vector envs find a bad action only when the env that receives it
fails, after other envs already stepped; checking the batch first keeps the batch
consistent and the error message precise (which env, which value, which bound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from vecfast.vector.errors import InvalidActionError


def check_action_batch(space: spaces.Space, actions: Any, env_ids: np.ndarray, where: str = "actions") -> None:
    """Raise :class:`InvalidActionError` unless ``actions`` is a valid batch of ``space``.

    ``space`` is the batched action space (``batch_space(single, n)``); row ``i`` of the
    batch goes to env ``env_ids[i]``, which is how errors name it.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(actions, Mapping) or set(actions) != set(space.spaces):
            got = sorted(actions) if isinstance(actions, Mapping) else type(actions).__name__
            raise InvalidActionError(f"{where} must be a dict with keys {sorted(space.spaces)}, got {got}")
        for key, sub in space.spaces.items():
            check_action_batch(sub, actions[key], env_ids, f"{where}[{key!r}]")
        return
    if isinstance(space, spaces.Tuple):
        if not isinstance(actions, Sequence) or len(actions) != len(space.spaces):
            raise InvalidActionError(f"{where} must be a tuple of {len(space.spaces)} batches")
        for i, (sub, part) in enumerate(zip(space.spaces, actions, strict=True)):
            check_action_batch(sub, part, env_ids, f"{where}[{i}]")
        return
    array = np.asarray(actions)
    if array.shape != space.shape:
        raise InvalidActionError(
            f"{where} has shape {array.shape}; the batch needs shape {space.shape} (one row per env) for {space}"
        )
    if isinstance(space, spaces.MultiDiscrete):
        _check_integers(array, where, space)
        low = space.start
        high = space.start + space.nvec
        _check_bounds(array, (array >= low) & (array < high), env_ids, where, lambda: f"[{low.min()}, {high.max()})")
    elif isinstance(space, spaces.MultiBinary):
        _check_integers(array, where, space)
        _check_bounds(array, (array == 0) | (array == 1), env_ids, where, lambda: "{0, 1}")
    elif isinstance(space, spaces.Box):
        if array.dtype.kind not in "biuf":
            raise InvalidActionError(f"{where} has dtype {array.dtype}; {space} needs numbers")
        if space.dtype.kind in "iu" and array.dtype.kind == "f":
            raise InvalidActionError(f"{where} has dtype {array.dtype}; {space} needs integers")
        _check_bounds(array, (array >= space.low) & (array <= space.high), env_ids, where, lambda: "its bounds")
    else:  # pragma: no cover - spaces are checked when the vector env is built
        raise InvalidActionError(f"unsupported action space {space}")


def _check_integers(array: np.ndarray, where: str, space: spaces.Space) -> None:
    if array.dtype.kind not in "biu":
        raise InvalidActionError(
            f"{where} has dtype {array.dtype}; {space} (batched Discrete/MultiDiscrete/MultiBinary) "
            "needs integer actions"
        )


def _check_bounds(
    array: np.ndarray, inside: np.ndarray, env_ids: np.ndarray, where: str, bounds: Callable[[], str]
) -> None:
    if inside.all():
        return
    bad_rows = np.flatnonzero(~inside.reshape(inside.shape[0], -1).all(axis=1))
    row = int(bad_rows[0])
    raise InvalidActionError(
        f"{where} for env(s) {env_ids[bad_rows].tolist()} lie outside the action space "
        f"(env {env_ids[row]} got {array[row].tolist()}; allowed: {bounds()})"
    )


def check_reset_mask(mask: Any, num_envs: int) -> None:
    """Raise unless ``mask`` is a valid ``options["reset_mask"]`` (gymnasium's checks and messages)."""
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not mask.any():
        raise ValueError(
            f"`options['reset_mask']` must contain a boolean array with at least one True value, got reset_mask={mask}"
        )
