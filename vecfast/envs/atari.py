"""ale-py's Atari games as single envs that see what its batched ``AtariVectorEnv`` shows a policy.

A run of an ``ALE/`` id trains on the ``AtariVectorEnv`` (84x84 gray frames stacked 4, frame skip 4, noop
starts), which renders no frames. Videos of such a run (``enjoy --video``, ``video_every_env_steps``) step single
envs that render: gymnasium's ``AtariPreprocessing`` and a 4-frame stack over a game with no frame skip of its
own give them the same observations, up to the fire-on-reset the vector env adds for games that need it.
"""

from __future__ import annotations

import ale_py
import gymnasium as gym
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

# ALE greets on stderr with its version and Stella's banner whenever a game is made: errors only (imported in the
# workers before they make their games)
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

# keyword arguments of the single env under the preprocessing (which skips the frames itself)
SINGLE_ENV_KWARGS = {"frameskip": 1, "repeat_action_probability": 0.0}


def as_the_vector_env_sees_it(env: gym.Env) -> gym.Env:
    """``env`` (an ``ALE/`` game made with :data:`SINGLE_ENV_KWARGS`) with the vector env's preprocessing."""
    return FrameStackObservation(
        AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True), stack_size=4
    )
