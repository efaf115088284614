"""VizDoom environments (the ``doom`` extra): single-player scenarios and full-game modes."""

from vecfast.envs.doom.scenario_env import DoomScenarioEnv

__all__ = ["DoomScenarioEnv"]
