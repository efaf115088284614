"""VizDoom's single-player scenarios as gymnasium envs with small, channels-first observations."""

from __future__ import annotations

import os
from typing import Any

import cv2
import gymnasium as gym
import numpy as np
import vizdoom as vzd
from gymnasium import spaces

from vecfast.envs.doom.game_process import GameProcess

# Scale of each game variable in ``measurements`` (values are divided by it): a policy's
# inputs should be O(1), and these are the variables' usual maxima in the scenarios.
MEASUREMENT_SCALES: dict[vzd.GameVariable, float] = {
    vzd.GameVariable.HEALTH: 100.0,
    vzd.GameVariable.ARMOR: 100.0,
    vzd.GameVariable.AMMO2: 50.0,
    vzd.GameVariable.AMMO3: 50.0,
    vzd.GameVariable.SELECTED_WEAPON: 7.0,
    vzd.GameVariable.SELECTED_WEAPON_AMMO: 50.0,
    vzd.GameVariable.FRAGCOUNT: 10.0,
}


class DoomScenarioEnv(gym.Env):
    """One VizDoom scenario (a ``.cfg`` shipped with vizdoom), headless.

    Observations: ``{"screen": uint8 (3, height, width), "measurements": float32}``;
    ``measurements`` holds the scenario's game variables scaled by
    :data:`MEASUREMENT_SCALES` and is absent when the scenario has none. The game renders
    at 160x120 and the screen is downscaled with OpenCV's area interpolation (default
    128x72, as in Sample Factory): rendering small is the cheapest part of a Doom step.

    Actions: ``Discrete(1 + buttons)``: 0 does nothing, ``i`` holds button ``i - 1`` of the
    scenario's config for ``frame_skip`` tics. The scenario's episode timeout truncates.
    At an episode's last step ``info`` holds ``episode_return`` and ``episode_length``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 35}

    def __init__(
        self,
        scenario: str,
        frame_skip: int = 4,
        resolution: tuple[int, int] = (128, 72),
        render_mode: str | None = None,
    ) -> None:
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}")
        width, height = resolution
        if width < 1 or height < 1:
            raise ValueError(f"resolution must be positive (width, height), got {resolution}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        config = os.path.join(vzd.scenarios_path, f"{scenario}.cfg")
        if not os.path.isfile(config):
            raise ValueError(f"no VizDoom scenario {scenario!r} (looked for {config})")
        self.frame_skip = frame_skip
        self.resolution = (width, height)
        self.render_mode = render_mode
        game = vzd.DoomGame()
        game.load_config(config)
        game.set_doom_scenario_path(os.path.join(vzd.scenarios_path, os.path.basename(game.get_doom_scenario_path())))
        game.set_screen_resolution(vzd.ScreenResolution.RES_160X120)
        game.set_screen_format(vzd.ScreenFormat.RGB24)
        game.set_window_visible(False)
        game.set_sound_enabled(False)
        game.set_mode(vzd.Mode.PLAYER)
        self._process = GameProcess(game)
        self.game = game
        self._buttons = len(game.get_available_buttons())
        self._scales = np.array(
            [MEASUREMENT_SCALES.get(v, 1.0) for v in game.get_available_game_variables()], np.float32
        )
        obs_spaces: dict[str, spaces.Space] = {"screen": spaces.Box(0, 255, (3, height, width), np.uint8)}
        if self._scales.size:
            obs_spaces["measurements"] = spaces.Box(-np.inf, np.inf, self._scales.shape, np.float32)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Discrete(1 + self._buttons)
        self._button_rows = np.eye(1 + self._buttons, self._buttons, k=-1, dtype=np.float64).tolist()
        self._last_obs: dict[str, np.ndarray] | None = None
        self._frame: np.ndarray | None = None
        self._return = 0.0
        self._length = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.game.set_seed(int(self.np_random.integers(0, 2**31 - 1)))
        if self._process.pid is None:
            self._process.start()
        else:
            self.game.new_episode()
        self._return = 0.0
        self._length = 0
        return self._observe(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self._last_obs is None:
            raise RuntimeError("call reset() before step()")
        reward = self.game.make_action(self._button_rows[int(action)], self.frame_skip)
        self._return += reward
        self._length += 1
        finished = self.game.is_episode_finished()
        truncated = finished and self.game.is_episode_timeout_reached()
        obs = self._last_obs if finished else self._observe()  # a finished episode has no state
        info = {"episode_return": self._return, "episode_length": self._length} if finished else {}
        return obs, reward, finished and not truncated, truncated, info

    def _observe(self) -> dict[str, np.ndarray]:
        state = self.game.get_state()
        self._frame = state.screen_buffer
        screen = cv2.resize(self._frame, self.resolution, interpolation=cv2.INTER_AREA)
        obs = {"screen": np.ascontiguousarray(screen.transpose(2, 0, 1))}
        if self._scales.size:
            obs["measurements"] = (state.game_variables / self._scales).astype(np.float32)
        self._last_obs = obs
        return obs

    def render(self) -> np.ndarray | None:
        """The last full-resolution frame (height, width, 3), for ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        return self._frame.copy()

    def close(self) -> None:
        self._process.close()
