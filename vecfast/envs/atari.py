"""ale-py's Atari games as single envs that see what its batched ``AtariVectorEnv`` shows a policy.

A run of an ``ALE/`` id trains on the ``AtariVectorEnv`` (84x84 gray frames stacked 4, frame skip 4, noop
starts), which renders no frames. Videos of such a run (``enjoy --video``, ``video_every_env_steps``) and its
evaluation step single envs that render: :class:`AtariFrames` and a 4-frame stack over a game with no frame skip
of its own give them the same observations, up to the fire-on-reset the vector env adds for games that need it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from ale_py.vector_env import AtariVectorEnv
from gymnasium.wrappers import FrameStackObservation

from vecfast.envs.area_resize import AreaResize

# ALE greets on stderr with its version and Stella's banner whenever a game is made: errors only (imported in the
# workers before they make their games)
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

# the vector env's options of its batching alone, which one game does without
BATCHING_OPTIONS = {"batch_size", "num_threads", "thread_affinity_offset", "autoreset_mode"}
SCREEN = 84
FRAME_SKIP = 4
NOOP_MAX = 30


class AtariFrames(gym.Wrapper):
    """gymnasium's ``AtariPreprocessing(noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)``, the
    same observations (tests compare them), resized by :class:`~vecfast.envs.area_resize.AreaResize` so that it
    needs no OpenCV: 1 to 30 no-ops after a reset, each action repeated 4 frames, the last two frames' gray
    screens max-pooled and area-resized to 84x84."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        height, width = env.observation_space.shape[:2]
        self.resize = AreaResize((SCREEN, SCREEN), source=(width, height))
        self.screens = np.zeros((2, height, width), np.uint8)  # the last frame's, the one before it
        self.observation_space = gym.spaces.Box(0, 255, (SCREEN, SCREEN), np.uint8)

    def _observation(self) -> np.ndarray:
        return self.resize(self.screens.max(axis=0))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        _, info = self.env.reset(seed=seed, options=options)
        for _ in range(self.env.unwrapped.np_random.integers(1, NOOP_MAX + 1)):
            _, _, terminated, truncated, step_info = self.env.step(0)
            info.update(step_info)
            if terminated or truncated:
                _, info = self.env.reset(seed=seed, options=options)
        ale = self.env.unwrapped.ale
        ale.getScreenGrayscale(self.screens[0])
        self.screens[1] = 0
        return self._observation(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        ale = self.env.unwrapped.ale
        total, terminated, truncated, info = 0.0, False, False, {}
        for frame in range(FRAME_SKIP):
            _, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
            if frame >= FRAME_SKIP - 2:  # the last two frames: pooled into the observation
                ale.getScreenGrayscale(self.screens[FRAME_SKIP - 1 - frame])
        return self._observation(), total, terminated, truncated, info


def single_env_kwargs(vector_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of one game that plays the game of ``AtariVectorEnv(**vector_kwargs)``: its options
    of the game itself (sticky actions, the action set, the frames an episode may last) as given, the id's own for
    the rest, and no frame skip (:func:`as_the_vector_env_sees_it` skips). The vector env's options of its
    preprocessing must be its defaults, which the wrapper reproduces: others are a ValueError."""
    game_options = inspect.signature(AtariEnv).parameters
    vector_defaults = {
        name: parameter.default for name, parameter in inspect.signature(AtariVectorEnv).parameters.items()
    }
    unmatched = {
        name: value
        for name, value in vector_kwargs.items()
        if name not in game_options and name not in BATCHING_OPTIONS and value != vector_defaults.get(name, value)
    }
    if unmatched:
        raise ValueError(
            f"a single game cannot show what the Atari vector env made with {unmatched} shows (its preprocessing "
            "options other than their defaults): render or evaluate with the run's defaults"
        )
    return {name: value for name, value in vector_kwargs.items() if name in game_options} | {"frameskip": 1}


def as_the_vector_env_sees_it(env: gym.Env) -> gym.Env:
    """``env`` (an ``ALE/`` game made with :func:`single_env_kwargs`) with the vector env's preprocessing."""
    return FrameStackObservation(AtariFrames(env), stack_size=4)
