"""PettingZoo module: 1v1 Doom duels between learning agents on vizdoom's ``multi_duel.wad``.

``parallel_env(num_agents=2, num_bots=0, frame_skip=2, timelimit_minutes=4.0, resolution=(128, 72),
reward_shaping=None, ...)`` returns a :class:`~vecfast.envs.doom.multiplayer.match.DoomMatch`;
``env(...)`` its AEC version; ``vector_env(num_matches, ...)`` many matches as one flat vector
env of agent slots (:class:`~vecfast.envs.doom.multiplayer.matches.DoomMatchesVectorEnv`, which also plays the
match of ``parallel_env``).
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.conversions import parallel_to_aec

from vecfast.envs.doom.multiplayer.match import DoomMatch
from vecfast.envs.doom.multiplayer.matches import DoomMatchesVectorEnv

__all__ = ["env", "parallel_env", "vector_env"]


def parallel_env(num_agents: int = 2, **kwargs: Any) -> DoomMatch:
    return DoomMatch("multi_duel.wad", "doom_duel_v0", num_agents=num_agents, **kwargs)


def env(**kwargs: Any) -> AECEnv:
    return parallel_to_aec(parallel_env(**kwargs))


def vector_env(num_matches: int, num_agents: int = 2, **kwargs: Any) -> DoomMatchesVectorEnv:
    return DoomMatchesVectorEnv("multi_duel.wad", num_matches, num_agents, **kwargs)
