"""One node's share of a run's envs, as a Ray actor.

The actor builds its vector env on its node (vecfast's :class:`~vecfast.vector.AsyncSharedMemVectorEnv`: the
envs' worker processes and shared memory stay inside the node) and steps the envs the learner sends, returning
their results in one reply: ``send`` and ``recv`` of the same envs in one call, so that an observation crosses
the network once each way per step. The learner's process keeps two halves of each sampler's envs in flight
(:class:`~vecfast.cluster.remote_vector_env.RemoteVectorEnv`), so the node steps one half while the learner acts
for the other. Ray names the actor's process ``ray::EnvSampler``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import SlotLayout, slot_layout_of
from vecfast.wrappers.base import StepResult, has_async_api


@dataclass(frozen=True)
class SamplerInfo:
    """What a sampler reports of itself once its envs are built (``slots``: the layout of a vector env of agent
    slots, a PettingZoo game's matches)."""

    num_envs: int
    single_observation_space: spaces.Space
    single_action_space: spaces.Space
    metadata: dict[str, Any]
    node_id: str
    hostname: str
    pid: int
    slots: SlotLayout | None = None


class EnvSampler:
    """A vector env that ``make_env`` builds on this actor's node, stepped through :meth:`step` and :meth:`reset`."""

    def __init__(self, make_env: Callable[[], VectorEnv]) -> None:
        self.env = make_env()
        if not has_async_api(self.env):
            self.env.close()
            raise TypeError(
                f"a sampler's vector env needs send/recv (vecfast's AsyncSharedMemVectorEnv), got {self.env}"
            )
        layout = slot_layout_of(self.env)
        if layout is not None and not layout.in_turns:
            self.env.close()
            raise TypeError(
                "a sampler steps a game's matches where its agents take turns (a board game), not all at once"
            )
        self.in_turns = layout is not None

    def info(self) -> SamplerInfo:
        import ray

        return SamplerInfo(
            self.env.num_envs,
            self.env.single_observation_space,
            self.env.single_action_space,
            dict(self.env.metadata),
            ray.get_runtime_context().get_node_id(),
            socket.gethostname(),
            os.getpid(),
            slot_layout_of(self.env),
        )

    def reset(self, seed: int | None) -> StepResult:
        """Reset every env (env ``i`` with ``seed + i``; a game's match ``m`` with ``seed + m``) and return what
        ``recv`` returns then: every env's first observation (rewards and ends zero), or, in a turn-based game,
        those of the agents to move first."""
        self.env.async_reset(seed=seed)
        return self.env.recv()

    def step(self, actions: Any, env_ids: np.ndarray) -> StepResult:
        """Step envs ``env_ids`` with the rows of ``actions``; their results (``info["env_id"]`` names them), or
        in a turn-based game those of the agents whose turn these moves bring."""
        self.env.send(actions, env_ids)
        return self.env.recv() if self.in_turns else self.env.recv(env_ids)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.env.get_attr(name)

    def set_step_timeout(self, seconds: float | None) -> None:
        """How long the vector env waits for a worker that owes results before it replaces it."""
        self.env.step_timeout = seconds

    def close(self) -> None:
        self.env.close()
