"""PettingZoo ParallelEnvs as one gymnasium VectorEnv, the job of SuperSuit's ``pettingzoo_env_to_vec_env``
plus ``concat_vec_envs``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vecfast.multiagent import MultiAgentVectorEnv

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv

__all__ = ["pettingzoo_to_vector"]


def pettingzoo_to_vector(
    parallel_env_fn: Callable[[], ParallelEnv], num_envs: int, **kwargs: Any
) -> MultiAgentVectorEnv:
    """``num_envs`` copies of a PettingZoo ParallelEnv as one VectorEnv with a slot per agent.

    The result has ``num_envs * num_agents`` slots; ``kwargs`` go to
    :class:`~vecfast.multiagent.MultiAgentVectorEnv` (``num_workers``, ``copy``, ...),
    whose docstring describes slots, autoreset and agents that end early.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1, got {num_envs}")
    return MultiAgentVectorEnv([parallel_env_fn] * num_envs, **kwargs)
