"""Full Doom deathmatch against VizDoom's built-in bots, with Sample Factory's action heads and shaping."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from vecfast.envs.doom.base_env import DoomEnvBase
from vecfast.extras import require

vzd = require("vizdoom", "vecfast's Doom envs")

GV = vzd.GameVariable
WEAPONS = 7  # weapon slots 1-7 of Doom II

# Heads of the action space (Sample Factory, Table A.4), in this order.
MOVE, STRAFE, ATTACK, SPRINT, USE, WEAPON, AIM = range(7)
ACTION_HEADS = np.array([3, 3, 2, 2, 2, 1 + WEAPONS, 21])
AIM_STEP_DEGREES = 1.25  # AIM head i turns (i - 10) * 1.25 degrees to the right per env step

BUTTONS = [
    vzd.Button.MOVE_FORWARD,
    vzd.Button.MOVE_BACKWARD,
    vzd.Button.MOVE_RIGHT,
    vzd.Button.MOVE_LEFT,
    vzd.Button.ATTACK,
    vzd.Button.SPEED,
    vzd.Button.USE,
    *(getattr(vzd.Button, f"SELECT_WEAPON{k}") for k in range(1, WEAPONS + 1)),
    vzd.Button.TURN_LEFT_RIGHT_DELTA,
]

AMMO = [GV.AMMO2, GV.AMMO3, GV.AMMO4, GV.AMMO5]  # bullets, shells, rockets, cells
WEAPON_OWNED = [getattr(GV, f"WEAPON{k}") for k in range(1, WEAPONS + 1)]
FIGURES = {  # info key -> game variable: the raw, cumulative figures of the episode
    "frags": GV.FRAGCOUNT,
    "deaths": GV.DEATHCOUNT,
    "damage_dealt": GV.DAMAGECOUNT,
    "damage_taken": GV.DAMAGE_TAKEN,
    "hits": GV.HITCOUNT,
    "hits_taken": GV.HITS_TAKEN,
}
VARIABLES = [GV.HEALTH, GV.ARMOR, GV.SELECTED_WEAPON, GV.SELECTED_WEAPON_AMMO, GV.DEAD, *AMMO, *WEAPON_OWNED]
VARIABLES += [*FIGURES.values(), GV.ANGLE]  # ANGLE: VizDoom reports only variables it was asked for
_INDEX = {v: i for i, v in enumerate(VARIABLES)}

DEFAULT_REWARD_SHAPING: dict[str, float] = {
    "frag": 1.0,
    "death": -0.5,
    "damage_dealt": 0.01,  # per hit point
    "damage_taken": -0.01,  # per hit point
    "health_pickup": 0.005,  # per hit point gained while alive
    "armor_pickup": 0.005,  # per armor point gained
    "ammo_pickup": 0.0005,  # per unit of any ammo type gained
    "weapon_pickup": 0.1,  # per weapon newly owned
    "weapon_switch": -0.02,  # per switch within `weapon_switch_window` steps of the previous one
}


def checked_reward_shaping(coefficients: dict[str, float]) -> dict[str, float]:
    """``coefficients`` if each names a known term of :data:`DEFAULT_REWARD_SHAPING`, else a ValueError."""
    unknown = set(coefficients) - set(DEFAULT_REWARD_SHAPING)
    if unknown:
        raise ValueError(f"unknown reward shaping keys {sorted(unknown)}; known: {sorted(DEFAULT_REWARD_SHAPING)}")
    return coefficients


# The deathmatch rules of a full game, as VizDoom arguments (the host's hold for a whole
# networked match): players respawn (after respawn_delay() s), protected and away from the others; no
# autoaim, no crouching.
MATCH_RULES = (
    "-deathmatch +timelimit {timelimit_minutes} +sv_forcerespawn 1 +sv_noautoaim 1 "
    "+sv_respawnprotect 1 +sv_spawnfarthest 1 +sv_nocrouch 1 +viz_respawn_delay {respawn_delay}"
)

# The HUD: health, armor, selected weapon and its ammo, weapons owned, ammo per type, frags.
MEASUREMENT_SCALES = np.array([100.0, 100.0, WEAPONS, 50.0, *[50.0] * len(AMMO), *[1.0] * WEAPONS, 10.0], np.float32)


class DoomFullGameEnv(DoomEnvBase):
    """A deathmatch on one of vizdoom's multiplayer maps against ``num_bots`` built-in bots.

    Observations: ``{"screen": uint8 (3, height, width) with the HUD, "measurements":
    float32}`` (what the HUD shows, scaled to O(1)). Actions: ``MultiDiscrete`` of seven
    heads: move (none/forward/backward), strafe (none/right/left), attack, sprint, use,
    weapon select (none or slot 1-7) and horizontal aim (21 steps of 1.25 degrees over
    +-12.5 degrees per env step, positive to the right) through VizDoom's delta turn button.

    Reward: ``reward_shaping`` coefficients (defaults :data:`DEFAULT_REWARD_SHAPING`;
    pass a dict to change some) times the change of each game figure during the step;
    ``set_reward_shaping`` changes them on a running env (population-based training).
    ``info`` carries the raw figures (frags, deaths, damage dealt and taken, hits) every
    step and the episode return and length at its end. The match ends (truncated) at
    ``timelimit_minutes``; players respawn, so episodes never terminate.
    """

    def __init__(
        self,
        wad: str = "multi_duel.wad",
        num_bots: int = 1,
        frame_skip: int = 2,
        resolution: tuple[int, int] = (128, 72),
        timelimit_minutes: float = 4.0,
        reward_shaping: dict[str, float] | None = None,
        weapon_switch_window: int = 10,
        render_mode: str | None = None,
    ) -> None:
        if num_bots < 0:
            raise ValueError(f"num_bots must be >= 0, got {num_bots}")
        if timelimit_minutes <= 0:
            raise ValueError(f"timelimit_minutes must be positive, got {timelimit_minutes}")
        super().__init__(wad, frame_skip, resolution, render_mode)
        self.num_bots = num_bots
        self.match_rules = MATCH_RULES.format(timelimit_minutes=timelimit_minutes, respawn_delay=self.respawn_delay())
        self.weapon_switch_window = weapon_switch_window
        self.reward_shaping = dict(DEFAULT_REWARD_SHAPING)
        self.set_reward_shaping(reward_shaping or {})
        game = self.game
        game.set_doom_map("map01")
        game.set_render_hud(True)
        game.set_available_buttons(BUTTONS)
        game.set_available_game_variables(VARIABLES)
        game.add_game_args(self.game_args())
        self.observation_space = spaces.Dict(
            {
                "screen": self.screen_space(),
                "measurements": spaces.Box(-np.inf, np.inf, MEASUREMENT_SCALES.shape, np.float32),
            }
        )
        self.action_space = spaces.MultiDiscrete(ACTION_HEADS)
        self._variables = np.zeros(len(VARIABLES))
        self._steps_since_switch = weapon_switch_window

    def game_args(self) -> str:
        """VizDoom's arguments for this env's game: host a match of one player under ``match_rules``."""
        return f"-host 1 {self.match_rules}"

    def respawn_delay(self) -> int:
        """Seconds a dead player waits before the forced respawn."""
        return 0

    def respawn_if_dead(self) -> bool:
        """Bring a dead player back at once; whether it was dead.

        VizDoom may call a death the episode's end, while the match goes on.
        """
        if not self.game.is_player_dead():
            return False
        self.game.respawn_player()
        return True

    def player_count(self) -> int:
        """Players in this game as it sees them, built-in bots included."""
        return int(self.game.get_game_variable(vzd.GameVariable.PLAYER_COUNT))

    def set_reward_shaping(self, coefficients: dict[str, float]) -> None:
        self.reward_shaping.update(checked_reward_shaping(coefficients))

    def on_new_episode(self) -> None:
        self.game.send_game_command("removebots")
        for _ in range(self.num_bots):
            self.game.send_game_command("addbot")
        self._variables = np.asarray(self.game.get_state().game_variables, np.float64)
        self._steps_since_switch = self.weapon_switch_window

    def buttons(self, action: np.ndarray) -> list[float]:
        """The VizDoom button vector of one multi-head action."""
        row = [0.0] * len(BUTTONS)
        if action[MOVE]:
            row[action[MOVE] - 1] = 1.0  # forward, backward
        if action[STRAFE]:
            row[1 + action[STRAFE]] = 1.0  # right, left
        row[4] = float(action[ATTACK])
        row[5] = float(action[SPRINT])
        row[6] = float(action[USE])
        if action[WEAPON]:
            row[6 + action[WEAPON]] = 1.0
        # The delta button turns by its value on every tic: spread the step's turn over them.
        row[-1] = (int(action[AIM]) - 10) * AIM_STEP_DEGREES / self.frame_skip
        return row

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.check_reset()
        action = np.asarray(action)
        _, finished = self.advance(self.buttons(action))
        if self.respawn_if_dead():
            finished = self.game.is_episode_finished()
        state = None if finished else self.game.get_state()
        variables = self._variables if state is None else np.asarray(state.game_variables, np.float64)
        reward = self._shaped_reward(self._variables, variables)
        self._variables = variables
        self.episode_return += reward
        info = {key: float(variables[_INDEX[v]]) for key, v in FIGURES.items()}
        if finished:
            info.update(self.episode_summary())
            return self.final_observation(), reward, False, True, info
        return self.observe(state), reward, False, False, info

    def _shaped_reward(self, before: np.ndarray, after: np.ndarray) -> float:
        c = self.reward_shaping
        delta = after - before

        def d(variable: vzd.GameVariable) -> float:
            return float(delta[_INDEX[variable]])

        reward = (
            c["frag"] * d(GV.FRAGCOUNT)
            + c["death"] * d(GV.DEATHCOUNT)
            + c["damage_dealt"] * d(GV.DAMAGECOUNT)
            + c["damage_taken"] * d(GV.DAMAGE_TAKEN)
        )
        # Pickups and switches count only while alive: a respawn refills health, resets weapons.
        self._steps_since_switch += 1
        if not before[_INDEX[GV.DEAD]] and not after[_INDEX[GV.DEAD]]:
            reward += c["health_pickup"] * max(d(GV.HEALTH), 0.0)
            reward += c["armor_pickup"] * max(d(GV.ARMOR), 0.0)
            reward += c["ammo_pickup"] * sum(max(d(v), 0.0) for v in AMMO)
            reward += c["weapon_pickup"] * sum(max(d(v), 0.0) for v in WEAPON_OWNED)
            if d(GV.SELECTED_WEAPON):
                if self._steps_since_switch < self.weapon_switch_window:
                    reward += c["weapon_switch"]
                self._steps_since_switch = 0
        return reward

    def observe(self, state: Any) -> dict[str, np.ndarray]:
        v = np.asarray(state.game_variables, np.float32)
        hud = np.concatenate(
            [
                v[[_INDEX[GV.HEALTH], _INDEX[GV.ARMOR], _INDEX[GV.SELECTED_WEAPON], _INDEX[GV.SELECTED_WEAPON_AMMO]]],
                v[[_INDEX[a] for a in AMMO]],
                v[[_INDEX[w] for w in WEAPON_OWNED]],
                v[[_INDEX[GV.FRAGCOUNT]]],
            ]
        )
        self._last_obs = {"screen": self.screen(state), "measurements": hud / MEASUREMENT_SCALES}
        return self._last_obs
