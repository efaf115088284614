"""Multi-agent envs: PettingZoo matches as gymnasium envs, and many matches as one vector env."""

from vecfast.multiagent.match_env import MatchEnv
from vecfast.multiagent.random_openings import RandomOpenings
from vecfast.multiagent.turn_based import TurnBasedVectorEnv
from vecfast.multiagent.vector_env import MultiAgentVectorEnv

__all__ = ["MatchEnv", "MultiAgentVectorEnv", "RandomOpenings", "TurnBasedVectorEnv"]
