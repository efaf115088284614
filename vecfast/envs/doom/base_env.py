"""What every vecfast Doom env shares: a headless game, a small channels-first screen, the game's lifecycle."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vecfast.envs.doom.downscale import Downscale
from vecfast.envs.doom.game_process import GameProcess
from vecfast.extras import require

vzd = require("vizdoom", "vecfast's Doom envs")

DOOM_TICS_PER_SECOND = 35


class DoomEnvBase(gym.Env):
    """Owns the :class:`vizdoom.DoomGame` of one env.

    The game renders at 160x120 and the screen is downscaled with area interpolation
    (:mod:`~vecfast.envs.doom.downscale`) to ``resolution`` (width, height; 128x72 by default,
    as in Sample Factory) and returned channels-first: rendering small is the cheapest part of a step.
    Subclasses configure the game, define the spaces and turn actions into buttons.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": DOOM_TICS_PER_SECOND}

    def __init__(
        self,
        wad: str,
        frame_skip: int,
        resolution: tuple[int, int],
        render_mode: str | None,
        config: str | None = None,
    ) -> None:
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}")
        width, height = resolution
        if width < 1 or height < 1:
            raise ValueError(f"resolution must be positive (width, height), got {resolution}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.frame_skip = frame_skip
        # one rendered frame per step: a video at Doom's 35 tics/s plays in real time at 35 / frame_skip frames/s
        self.metadata = {**self.metadata, "render_fps": DOOM_TICS_PER_SECOND / frame_skip}
        self.resolution = (width, height)
        self.render_mode = render_mode
        self.game = vzd.DoomGame()
        if config is not None:  # settings below override the config's
            self.game.load_config(config)
        self.game.set_doom_scenario_path(os.path.join(vzd.scenarios_path, wad))
        self.game.set_screen_resolution(vzd.ScreenResolution.RES_160X120)
        self._downscale = Downscale(self.resolution, source=(160, 120))
        self.game.set_screen_format(vzd.ScreenFormat.RGB24)
        self.game.set_window_visible(False)
        self.game.set_sound_enabled(False)
        self.game.set_mode(vzd.Mode.PLAYER)
        self._process = GameProcess(self.game)
        self._frame: np.ndarray | None = None
        self._last_obs: dict[str, np.ndarray] | None = None  # set by the subclass's observe()
        self.episode_return = 0.0
        self.episode_length = 0

    def screen_space(self) -> spaces.Box:
        width, height = self.resolution
        return spaces.Box(0, 255, (3, height, width), np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.game.set_seed(int(self.np_random.integers(0, 2**31 - 1)))
        if self._process.pid is None:
            self._process.start()
        else:
            self.game.new_episode()
        self.episode_return = 0.0
        self.episode_length = 0
        self.on_new_episode()
        return self.observe(self.game.get_state()), {}

    def on_new_episode(self) -> None:
        """Hook for subclasses (e.g. adding bots) after the game started an episode."""

    def advance(self, buttons: list[float]) -> tuple[float, bool]:
        """Hold ``buttons`` for ``frame_skip`` tics; returns the game's reward and whether it ended."""
        reward = self.game.make_action(buttons, self.frame_skip)
        self.episode_length += 1
        return reward, self.game.is_episode_finished()

    def screen(self, state: vzd.GameState) -> np.ndarray:
        self._frame = state.screen_buffer
        return self._downscale(self._frame)

    def observe(self, state: vzd.GameState) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def check_reset(self) -> None:
        if self._last_obs is None:
            raise RuntimeError("call reset() before step()")

    def final_observation(self) -> dict[str, np.ndarray]:
        """The observation of the step that ends an episode.

        The finished game has no state, so the last observation is repeated, as a copy:
        gymnasium expects new observation data from every step.
        """
        return {key: value.copy() for key, value in self._last_obs.items()}

    def episode_summary(self) -> dict[str, Any]:
        return {"episode_return": self.episode_return, "episode_length": self.episode_length}

    def render(self) -> np.ndarray | None:
        """The last full-resolution frame (height, width, 3), for ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        return self._frame.copy()

    def close(self) -> None:
        self._process.close()
