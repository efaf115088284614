"""Base classes of vecfast's vector wrappers: EnvPool's asynchronous API, and one-entry observation transforms.

:class:`AsyncVectorWrapper` lets a wrapper serve ``recv`` as well as ``step``: its step
logic sees which envs the rows belong to, so a partial batch from ``recv`` is
transformed as ``step`` would transform those envs' rows.

Image preprocessing usually applies to one entry of a Dict observation (``"screen"``)
and must leave the others (``"measurements"``) alone, so every observation wrapper
here takes a ``key``. :class:`BatchObservationWrapper` is gymnasium's
``VectorObservationWrapper`` plus that key and plus ``AutoresetMode.SAME_STEP``
support, which gymnasium's base refuses: the final observations in
``info["final_obs"]`` are transformed too, so they match what the same wrapper applied
to each env would report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorObservationWrapper, VectorWrapper
from gymnasium.vector.utils import batch_space

__all__ = [
    "ASYNC_API",
    "AsyncVectorWrapper",
    "BatchObservationWrapper",
    "SingleObservationWrapper",
    "autoreset_mode_of",
    "has_async_api",
    "reset_mask_of",
]

ASYNC_API = ("async_reset", "send", "recv")

StepResult = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


def entry_space(space: spaces.Space, key: str | None) -> spaces.Box:
    """The Box that a wrapper with ``key`` transforms (the whole space when ``key`` is None)."""
    if key is not None:
        if not isinstance(space, spaces.Dict):
            raise TypeError(f"key={key!r} needs a Dict observation space, got {space}")
        if key not in space.spaces:
            raise KeyError(f"key={key!r} is not in the observation space (keys: {list(space.spaces)})")
        space = space.spaces[key]
    if not isinstance(space, spaces.Box):
        hint = "" if key is not None else " (pass key=... to pick an entry of a Dict observation)"
        raise TypeError(f"expected a Box observation space{hint}, got {space}")
    return space


def with_entry_space(space: spaces.Space, key: str | None, new: spaces.Box) -> spaces.Space:
    """``space`` with its ``key`` entry (or itself, when ``key`` is None) replaced by ``new``."""
    if key is None:
        return new
    return spaces.Dict({k: new if k == key else sub for k, sub in space.spaces.items()})


def get_entry(obs: Any, key: str | None) -> np.ndarray:
    return obs if key is None else obs[key]


def with_entry(obs: Any, key: str | None, value: np.ndarray) -> Any:
    """A new observation with the ``key`` entry replaced; the caller's dict is not modified."""
    return value if key is None else {**obs, key: value}


def autoreset_mode_of(env: VectorEnv) -> AutoresetMode:
    """The vector env's autoreset mode; gymnasium assumes NEXT_STEP when metadata lacks it."""
    return AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))


def reset_mask_of(options: dict[str, Any] | None, num_envs: int) -> np.ndarray:
    """The envs a ``reset(options=...)`` call resets, as a boolean mask.

    Must be read before the call reaches the vector env: SyncVectorEnv and
    AsyncSharedMemVectorEnv pop ``options["reset_mask"]``, so a wrapper that looks
    afterwards (as gymnasium's RecordEpisodeStatistics and NormalizeReward do) takes
    a partial reset for a full one.
    """
    if options is None or options.get("reset_mask") is None:
        return np.ones(num_envs, bool)
    mask = options["reset_mask"]
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must be a bool array of shape ({num_envs},), got {mask!r}")
    return mask.copy()


def has_async_api(env: VectorEnv) -> bool:
    """Whether ``env`` offers EnvPool's ``async_reset``/``send``/``recv`` (through all its wrappers).

    True for vecfast's AsyncSharedMemVectorEnv, and for an :class:`AsyncVectorWrapper`
    only where the env it wraps has the API; other wrappers do not forward it.
    """
    return all(hasattr(env, name) for name in ASYNC_API)


class AsyncVectorWrapper(VectorWrapper):
    """A vector wrapper that also forwards EnvPool's ``async_reset``/``send``/``recv``.

    ``recv`` returns the envs that finished first, named by ``info["env_id"]``. The
    wrapper's step logic lives in :meth:`on_step`, which gets the env ids of the rows
    (all envs for ``step``), so per-env state is indexed by env, never by batch
    position: each env's results equal those of the same wrapper over ``step``.
    :meth:`on_reset` transforms ``reset`` results and :meth:`forget` restarts per-env
    state of the envs being reset. The API is there only where the wrapped env has it
    (``hasattr(wrapper, "send")`` is False otherwise), so a caller can tell.

    The rows that ``recv`` returns after ``async_reset`` are reset results (reward 0,
    not done); :meth:`on_step` gets them flagged in ``starting``, like NEXT_STEP's
    autoreset steps (the step after an episode end), which also start an episode
    without ending a step of one.

    Its state is created on first use: it has no ``__init__``, so that it can be mixed
    into gymnasium's wrappers (RecordEpisodeStatistics, NormalizeReward, ClipReward).
    """

    @functools.cached_property
    def autoreset_mode(self) -> AutoresetMode:
        return autoreset_mode_of(self.env)

    @functools.cached_property
    def _starting(self) -> np.ndarray:
        """Per env: its next result starts an episode without ending a step (a reset result)."""
        return np.zeros(self.num_envs, bool)

    # ----------------------------------------------------------------- hooks
    def on_reset(self, observations: Any, infos: dict[str, Any], mask: np.ndarray) -> tuple[Any, dict[str, Any]]:
        """The wrapper's view of a ``reset`` of the envs in ``mask`` (other rows repeat their last observation)."""
        return observations, infos

    def on_step(self, result: StepResult, ids: np.ndarray, starting: np.ndarray) -> StepResult:
        """The wrapper's view of a step result whose rows are envs ``ids``; ``starting`` flags reset results."""
        return result

    def forget(self, mask: np.ndarray) -> None:
        """Restart the per-env state of the envs in ``mask``, which are being reset."""

    # ----------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        mask = reset_mask_of(options, self.num_envs)  # before the vector env pops it
        observations, infos = self.env.reset(seed=seed, options=options)
        self._starting[mask] = False
        self.forget(mask)
        return self.on_reset(observations, infos, mask)

    def step(self, actions: Any) -> StepResult:
        return self._stepped(self.env.step(actions), np.arange(self.num_envs))

    def _stepped(self, result: StepResult, ids: np.ndarray) -> StepResult:
        starting = self._starting[ids]
        result = self.on_step(result, ids, starting)
        # NEXT_STEP: the step after an episode end is the env's reset
        self._starting[ids] = (result[2] | result[3]) if self.autoreset_mode == AutoresetMode.NEXT_STEP else False
        return result

    # ----------------------------------------------------------------- EnvPool-style API
    def _wrapped(self, name: str) -> Any:
        """The wrapped env's ``name``; an AttributeError (``hasattr`` False) where it has none."""
        try:
            return getattr(self.env, name)
        except AttributeError:
            raise AttributeError(f"{type(self).__name__} wraps {self.env}, which has no {name}") from None

    @property
    def batch_size(self) -> int:
        """Envs that each ``recv`` returns."""
        return self._wrapped("batch_size")

    @property
    def async_reset(self) -> Callable[..., None]:
        """``async_reset(seed=None, options=None)``: start resetting every env; the results come through ``recv``."""
        self._wrapped("async_reset")
        return self._async_reset

    @property
    def send(self) -> Callable[..., None]:
        """``send(actions, env_ids)``: start stepping envs ``env_ids`` (the wrapped env's: actions pass unchanged)."""
        return self._wrapped("send")

    @property
    def recv(self) -> Callable[[], StepResult]:
        """``recv()``: the first ``batch_size`` envs to finish, transformed; ``info["env_id"]`` names them."""
        self._wrapped("recv")
        return self._recv

    def _async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.async_reset(seed=seed, options=options)
        self._starting[:] = True
        self.forget(np.ones(self.num_envs, bool))

    def _recv(self) -> StepResult:
        result = self.env.recv()
        return self._stepped(result, np.asarray(result[4]["env_id"]))


class BatchObservationWrapper(AsyncVectorWrapper, VectorObservationWrapper):
    """Transforms the ``key`` entry of a vector env's observations, the whole batch at once.

    Subclasses implement :meth:`transform` (a batch ``(n, *entry_shape)`` in, a new
    batch out) and call :meth:`set_entry_space` with the transformed entry's space.
    In SAME_STEP mode the rows of ``info["final_obs"]`` go through
    :meth:`transform_final` (default: :meth:`transform` on a batch of one). Batches
    from ``recv`` take the same path (see :class:`AsyncVectorWrapper`).

    Args:
        env: the vector env.
        key: the Dict entry to transform; ``None`` for a Box observation.
    """

    def __init__(self, env: VectorEnv, key: str | None = None) -> None:
        # gymnasium's VectorObservationWrapper.__init__ only checks the mode and refuses
        # SAME_STEP, which this class handles.
        VectorWrapper.__init__(self, env)
        self.key = key
        self.entry_space = entry_space(env.single_observation_space, key)

    def set_entry_space(self, space: spaces.Box) -> None:
        """Declare the transformed entry's single-env space; the batched space follows."""
        self.single_observation_space = with_entry_space(self.env.single_observation_space, self.key, space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    def transform(self, batch: np.ndarray) -> np.ndarray:
        """The transformed entry of a batch of observations."""
        raise NotImplementedError

    def transform_final(self, batch: np.ndarray, env_id: int) -> np.ndarray:
        """The transformed entry of env ``env_id``'s final observation (a batch of one, SAME_STEP mode).

        Stateless transforms reuse :meth:`transform`; stateful ones override this.
        """
        return self.transform(batch)

    def observations(self, observations: Any) -> Any:
        return with_entry(observations, self.key, self.transform(get_entry(observations, self.key)))

    def on_reset(self, observations: Any, infos: dict[str, Any], mask: np.ndarray) -> tuple[Any, dict[str, Any]]:
        return self.observations(observations), infos

    def on_step(self, result: StepResult, ids: np.ndarray, starting: np.ndarray) -> StepResult:
        observations, rewards, terminations, truncations, infos = result
        return self.observations(observations), rewards, terminations, truncations, self.final_observations(infos, ids)

    def final_observations(self, infos: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
        """``infos`` of envs ``ids`` with the final observations of SAME_STEP autoresets transformed."""
        if "final_obs" not in infos:
            return infos
        final = infos["final_obs"].copy()  # an object array; the env's stays untouched
        for row in np.flatnonzero(infos["_final_obs"]):
            entry = get_entry(final[row], self.key)
            final[row] = with_entry(final[row], self.key, self.transform_final(entry[None], int(ids[row]))[0])
        return {**infos, "final_obs": final}


class SingleObservationWrapper(gym.ObservationWrapper):
    """Single-env counterpart of :class:`BatchObservationWrapper`, for use inside workers.

    It runs the same batched ``transform`` on a batch of one, so both placements
    compute bit-identical observations.
    """

    def __init__(self, env: gym.Env, key: str | None = None) -> None:
        super().__init__(env)
        self.key = key
        self.entry_space = entry_space(env.observation_space, key)

    def set_entry_space(self, space: spaces.Box) -> None:
        self.observation_space = with_entry_space(self.env.observation_space, self.key, space)

    def transform(self, batch: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def observation(self, observation: Any) -> Any:
        entry = get_entry(observation, self.key)
        return with_entry(observation, self.key, self.transform(entry[None])[0])
