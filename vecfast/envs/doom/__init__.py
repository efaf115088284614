"""VizDoom environments (the ``doom`` extra): single-player scenarios and full-game modes."""

from vecfast.envs.doom.full_game_env import DEFAULT_REWARD_SHAPING, DoomFullGameEnv
from vecfast.envs.doom.scenario_env import DoomScenarioEnv

__all__ = ["DEFAULT_REWARD_SHAPING", "DoomFullGameEnv", "DoomScenarioEnv"]
