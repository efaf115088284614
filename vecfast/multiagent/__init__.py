"""Multi-agent envs: PettingZoo matches as gymnasium envs, and many matches as one vector env.

:class:`RandomOpenings` subclasses PettingZoo's wrapper, so it loads (with PettingZoo) when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vecfast.extras import require
from vecfast.multiagent.match_env import MatchEnv
from vecfast.multiagent.turn_based import TurnBasedVectorEnv
from vecfast.multiagent.vector_env import MultiAgentVectorEnv

if TYPE_CHECKING:
    from vecfast.multiagent.random_openings import RandomOpenings


def __getattr__(name: str) -> Any:
    if name != "RandomOpenings":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = require("vecfast.multiagent.random_openings", "vecfast's RandomOpenings").RandomOpenings
    globals()[name] = value
    return value


__all__ = ["MatchEnv", "MultiAgentVectorEnv", "RandomOpenings", "TurnBasedVectorEnv"]
