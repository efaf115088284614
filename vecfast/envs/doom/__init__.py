"""VizDoom environments (the ``doom`` extra): single-player scenarios and full-game modes.

The envs load on first use: every vecfast process imports :mod:`vecfast.envs.doom.ipc`,
and with it this package, which therefore must not import VizDoom (an optional dependency).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vecfast.envs.doom.full_game_env import DEFAULT_REWARD_SHAPING, DoomFullGameEnv
    from vecfast.envs.doom.scenario_env import DoomScenarioEnv

__all__ = ["DEFAULT_REWARD_SHAPING", "DoomFullGameEnv", "DoomScenarioEnv"]
_MODULES = {
    "DEFAULT_REWARD_SHAPING": "full_game_env",
    "DoomFullGameEnv": "full_game_env",
    "DoomScenarioEnv": "scenario_env",
}


def __getattr__(name: str) -> object:
    if name in _MODULES:
        return getattr(importlib.import_module(f"vecfast.envs.doom.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'vecfast.envs.doom' has no attribute {name!r}")
