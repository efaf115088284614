"""VizDoom's single-player scenarios as gymnasium envs."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from gymnasium import spaces

from vecfast.envs.doom.base_env import DoomEnvBase
from vecfast.extras import require

vzd = require("vizdoom", "vecfast's Doom envs")

# Scale of each game variable in ``measurements`` (values are divided by it): a policy's
# inputs should be O(1), and these are the variables' usual maxima in the scenarios.
MEASUREMENT_SCALES: dict[vzd.GameVariable, float] = {
    vzd.GameVariable.HEALTH: 100.0,
    vzd.GameVariable.ARMOR: 100.0,
    vzd.GameVariable.AMMO2: 50.0,
}


class DoomScenarioEnv(DoomEnvBase):
    """One VizDoom scenario (a ``.cfg`` shipped with vizdoom), headless.

    Observations: ``{"screen": uint8 (3, height, width), "measurements": float32}``;
    ``measurements`` holds the scenario's game variables scaled by
    :data:`MEASUREMENT_SCALES` and is absent when the scenario has none.

    Actions: ``Discrete(1 + buttons)``: 0 does nothing, ``i`` holds button ``i - 1`` of the
    scenario's config for ``frame_skip`` tics. The scenario's episode timeout truncates.
    At an episode's last step ``info`` holds ``episode_return`` and ``episode_length``;
    the observation of that step repeats the previous one (a finished game has no state).
    """

    def __init__(
        self,
        scenario: str,
        frame_skip: int = 4,
        resolution: tuple[int, int] = (128, 72),
        render_mode: str | None = None,
    ) -> None:
        config = os.path.join(vzd.scenarios_path, f"{scenario}.cfg")
        if not os.path.isfile(config):
            raise ValueError(f"no VizDoom scenario {scenario!r} (looked for {config})")
        super().__init__(f"{scenario}.wad", frame_skip, resolution, render_mode, config)
        buttons = len(self.game.get_available_buttons())
        self._scales = np.array(
            [MEASUREMENT_SCALES.get(v, 1.0) for v in self.game.get_available_game_variables()], np.float32
        )
        obs_spaces: dict[str, spaces.Space] = {"screen": self.screen_space()}
        if self._scales.size:
            obs_spaces["measurements"] = spaces.Box(-np.inf, np.inf, self._scales.shape, np.float32)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Discrete(1 + buttons)
        self._button_rows = np.eye(1 + buttons, buttons, k=-1).tolist()

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.check_reset()
        reward, finished = self.advance(self._button_rows[int(action)])
        self.episode_return += reward
        if not finished:
            return self.observe(self.game.get_state()), reward, False, False, {}
        truncated = self.game.is_episode_timeout_reached()
        return self.final_observation(), reward, not truncated, truncated, self.episode_summary()

    def observe(self, state: Any) -> dict[str, np.ndarray]:
        obs = {"screen": self.screen(state)}
        if self._scales.size:
            obs["measurements"] = (state.game_variables / self._scales).astype(np.float32)
        self._last_obs = obs
        return obs
