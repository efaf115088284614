"""One PettingZoo ParallelEnv (a "match") as a gymnasium Env over all of its agents at once.

:class:`MatchEnv` is what :class:`~vecfast.multiagent.MultiAgentVectorEnv` runs inside
vecfast's worker processes: a plain gymnasium Env, so the shared-memory machinery of
:class:`~vecfast.vector.AsyncSharedMemVectorEnv` carries matches unchanged. Its action is
the stacked per-agent actions (one row per agent, in ``possible_agents`` order) and its
observation a Dict that carries every per-agent output of a step, so that all of them
live in shared memory rather than being pickled through a pipe:

* ``"obs"``: the stacked per-agent observations;
* ``"reward"``, ``"terminated"``, ``"truncated"``: one entry per agent;
* ``"active"``: which agents acted in this step.

Agents that end before the others (PettingZoo removes them from ``env.agents``) keep
their slot: from the step after they end until the match resets they get reward 0,
repeat the ``terminated``/``truncated`` flag they ended with, keep their last
observation and have ``active`` False; their actions are ignored. The match (this Env's
episode) ends when every agent has ended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, create_empty_array

from vecfast.vector.shared_buffers import space_buffer

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv

__all__ = ["MatchEnv"]


class MatchEnv(gym.Env):
    """A PettingZoo ParallelEnv with fixed agents, stepped for all agents at once.

    The Env's scalar reward is the sum over agents and its episode ends when every agent
    has ended (``terminated`` if all agents terminated, else ``truncated``); per-agent
    values are in the observation (see the module docstring). Attributes this Env lacks
    are looked up on the ParallelEnv by ``get_wrapper_attr``/``has_wrapper_attr``/
    ``set_wrapper_attr``, so that a vector env's ``call("state")`` reaches it.

    Args:
        parallel_env_fn: creates the PettingZoo ParallelEnv (called here, in the worker).
        match_id: this match's index in its vector env; errors name it.

    Raises:
        ValueError: the env does not declare ``possible_agents``, or its agents differ in
            observation or action space.
    """

    def __init__(self, parallel_env_fn: Callable[[], ParallelEnv], match_id: int = 0) -> None:
        self.match_id = match_id
        self.parallel_env = env = parallel_env_fn()
        agents = getattr(env, "possible_agents", None)
        if not agents:
            raise ValueError(
                f"match {match_id}: {type(env).__name__} declares no possible_agents; "
                "a multi-agent vector env needs a fixed, non-empty set of agents"
            )
        self.possible_agents: tuple[Any, ...] = tuple(agents)
        self.agent_observation_space = _common_space(env, self.possible_agents, "observation_space", match_id)
        self.agent_action_space = _common_space(env, self.possible_agents, "action_space", match_id)
        n = len(self.possible_agents)
        self.observation_space = spaces.Dict(
            {
                "obs": batch_space(self.agent_observation_space, n),
                "reward": spaces.Box(-np.inf, np.inf, (n,), np.float64),
                "terminated": spaces.MultiBinary(n),
                "truncated": spaces.MultiBinary(n),
                "active": spaces.MultiBinary(n),
            }
        )
        self.action_space = batch_space(self.agent_action_space, n)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)

        self._agent_obs = create_empty_array(self.agent_observation_space, n)
        self._write_agent_obs = space_buffer(self.agent_observation_space, self._agent_obs).write
        self._reward = np.zeros(n, np.float64)
        self._terminated = np.zeros(n, np.int8)
        self._truncated = np.zeros(n, np.int8)
        self._active = np.zeros(n, np.int8)
        self._live = np.zeros(n, bool)  # started the next step in play
        self._observation = {
            "obs": self._agent_obs,
            "reward": self._reward,
            "terminated": self._terminated,
            "truncated": self._truncated,
            "active": self._active,
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        observations, infos = self.parallel_env.reset(seed=seed, options=options)
        missing = [agent for agent in self.possible_agents if agent not in observations]
        if missing or set(self.parallel_env.agents) != set(self.possible_agents):
            raise ValueError(
                f"match {self.match_id}: after reset the agents are {list(self.parallel_env.agents)} "
                f"(observations for {list(observations)}), not possible_agents {list(self.possible_agents)}; "
                "a multi-agent vector env needs every agent in play at the start of a match"
            )
        for i, agent in enumerate(self.possible_agents):
            self._write_agent_obs(i, observations[agent])
        self._reward[:] = 0.0
        self._terminated[:] = 0
        self._truncated[:] = 0
        self._active[:] = 0
        self._live[:] = True
        return self._observation, self._agent_infos(infos)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        live = self._live
        read_action = space_buffer(self.agent_action_space, action).read_row
        agents = self.possible_agents
        actions = {agent: read_action(i) for i, agent in enumerate(agents) if live[i]}
        observations, rewards, terminations, truncations, infos = self.parallel_env.step(actions)
        self._check_agents(observations, actions)
        self._active[:] = live
        self._reward[:] = 0.0
        for i, agent in enumerate(agents):
            if not live[i]:
                continue  # ended earlier: keeps its last observation and flags
            if agent in observations:
                self._write_agent_obs(i, observations[agent])
            self._reward[i] = rewards.get(agent, 0.0)
            self._terminated[i] = terminations.get(agent, False)
            self._truncated[i] = truncations.get(agent, False)
        live &= (self._terminated == 0) & (self._truncated == 0)
        in_play = set(self.parallel_env.agents)
        vanished = [agent for i, agent in enumerate(agents) if live[i] and agent not in in_play]
        if vanished:
            raise ValueError(
                f"match {self.match_id}: agents {vanished} left env.agents without being terminated or truncated"
            )
        over = not live.any()
        terminated = over and bool(self._terminated.all())
        truncated = over and not terminated
        return self._observation, float(self._reward.sum()), terminated, truncated, self._agent_infos(infos)

    def render(self) -> Any:
        return self.parallel_env.render()

    def close(self) -> None:
        self.parallel_env.close()

    # The ParallelEnv's own attributes (``state``, ``unwrapped``, ...) through the vector env's call/get_attr.
    def get_wrapper_attr(self, name: str) -> Any:
        try:
            return getattr(self, name)
        except AttributeError:
            return getattr(self.parallel_env, name)

    def has_wrapper_attr(self, name: str) -> bool:
        return hasattr(self, name) or hasattr(self.parallel_env, name)

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        target = self if hasattr(self, name) or not hasattr(self.parallel_env, name) else self.parallel_env
        setattr(target, name, value)
        return True

    def _check_agents(self, observations: dict[Any, Any], actions: dict[Any, Any]) -> None:
        """Agents may only leave a match: one that appears (or comes back) breaks fixed slots."""
        extra = observations.keys() - actions.keys()
        if extra:
            unknown = sorted(map(str, extra - set(self.possible_agents)))
            what = f"agents {unknown} are not in possible_agents" if unknown else f"agents {sorted(map(str, extra))}"
            raise ValueError(
                f"match {self.match_id}: {what} returned observations though they were not in play; "
                "a multi-agent vector env needs fixed agents that, once ended, stay out until the match resets"
            )

    def _agent_infos(self, infos: dict[Any, dict[str, Any]]) -> dict[str, Any]:
        """Per-agent infos in agent order, or nothing when all are empty (no pipe message then)."""
        rows = tuple(infos.get(agent) or {} for agent in self.possible_agents)
        return {"agent_infos": rows} if any(rows) else {}


def _common_space(env: Any, agents: Sequence[Any], kind: str, match_id: int) -> spaces.Space:
    space_of = getattr(env, kind)
    first = space_of(agents[0])
    for agent in agents[1:]:
        other = space_of(agent)
        if other != first:
            raise ValueError(
                f"match {match_id}: agent {agents[0]!r} has {kind} {first} but agent {agent!r} has {other}; "
                "one policy for all agents needs the same spaces (pad them, e.g. with SuperSuit's "
                "pad_observations_v0/pad_action_space_v0)"
            )
    return first
