"""Base classes for observation wrappers that transform one entry of the observation.

Image preprocessing usually applies to one entry of a Dict observation (``"screen"``)
and must leave the others (``"measurements"``) alone, so every wrapper here takes a
``key``. :class:`BatchObservationWrapper` is gymnasium's ``VectorObservationWrapper``
plus that key and plus ``AutoresetMode.SAME_STEP`` support, which gymnasium's base
refuses: the final observations in ``info["final_obs"]`` are transformed too, so they
match what the same wrapper applied to each env would report.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorObservationWrapper, VectorWrapper
from gymnasium.vector.utils import batch_space

__all__ = ["BatchObservationWrapper", "SingleObservationWrapper", "autoreset_mode_of", "reset_mask_of"]


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


class BatchObservationWrapper(VectorObservationWrapper):
    """Transforms the ``key`` entry of a vector env's observations, the whole batch at once.

    Subclasses implement :meth:`transform` (a batch ``(n, *entry_shape)`` in, a new
    batch out) and call :meth:`set_entry_space` with the transformed entry's space.
    In SAME_STEP mode the rows of ``info["final_obs"]`` go through
    :meth:`transform_final` (default: :meth:`transform` on a batch of one).

    Args:
        env: the vector env.
        key: the Dict entry to transform; ``None`` for a Box observation.
    """

    def __init__(self, env: VectorEnv, key: str | None = None) -> None:
        # gymnasium's VectorObservationWrapper.__init__ only checks the mode and refuses
        # SAME_STEP, which this class handles.
        VectorWrapper.__init__(self, env)
        self.key = key
        self.autoreset_mode = autoreset_mode_of(env)
        self.entry_space = entry_space(env.single_observation_space, key)

    def set_entry_space(self, space: spaces.Box) -> None:
        """Declare the transformed entry's single-env space; the batched space follows."""
        self.single_observation_space = with_entry_space(self.env.single_observation_space, self.key, space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    def transform(self, batch: np.ndarray) -> np.ndarray:
        """The transformed entry of a batch of observations."""
        raise NotImplementedError

    def transform_final(self, batch: np.ndarray, row: int) -> np.ndarray:
        """The transformed entry of env ``row``'s final observation (a batch of one, SAME_STEP mode).

        Stateless transforms reuse :meth:`transform`; stateful ones override this.
        """
        return self.transform(batch)

    def observations(self, observations: Any) -> Any:
        return with_entry(observations, self.key, self.transform(get_entry(observations, self.key)))

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        return self.observations(observations), rewards, terminations, truncations, self.final_observations(infos)

    def final_observations(self, infos: dict[str, Any]) -> dict[str, Any]:
        """``infos`` with the final observations of SAME_STEP autoresets transformed."""
        if "final_obs" not in infos:
            return infos
        final = infos["final_obs"].copy()  # an object array; the env's stays untouched
        for i in np.flatnonzero(infos["_final_obs"]):
            entry = get_entry(final[i], self.key)
            final[i] = with_entry(final[i], self.key, self.transform_final(entry[None], int(i))[0])
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
