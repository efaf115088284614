"""The learning side every scheme runs: one or more policies, each a model and the algorithm training it.

A batch of trajectories may hold several policies' steps (self-play, populations: the sampler records which policy
took each step). Each policy in ``policies_to_train`` learns from its own steps only, the others stay frozen. As
Sample Factory's learners do, a policy of a population gathers its trajectories until it holds a whole batch (as many
as the sampler's batch), so that N policies take the gradient steps per env frame that one policy takes (trajectories
still gathering are not in a checkpoint). Policy switches happen only where episodes start, so a trajectory holding
two policies' steps has an episode end (and its reset step) between them: masking the other policy's steps cuts no
return or advantage recursion.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from vecfast.trainers.algorithm.agent import Agent
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import AlgorithmFactory


class Learners:
    """``cfg.num_policies`` agents (model and algorithm each) for ``env``'s spaces.

    :attr:`acting` holds the models the sampler acts with: copies that the learner publishes into after each gradient
    step (``acting_copies``, the asynchronous scheme, whose sampler runs while the learner learns), else the models
    themselves (the synchronous schemes, which act and learn in turn). ``learn_with``: as for :class:`Agent`.
    """

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        *,
        acting_copies: bool,
        learn_with: Callable[[ActorCritic], ActorCritic] | None = None,
    ) -> None:
        n = cfg.num_policies
        # each policy its own initial weights; policy 0 last, so the generators continue as in a one-policy run
        agents = {p: Agent(env, algorithm, _seeded(cfg, p), learn_with) for p in reversed(range(n))}
        self.agents = [agents[p] for p in range(n)]
        models = [agent.model for agent in self.agents]
        self.acting = [copy.deepcopy(m).requires_grad_(False) for m in models] if acting_copies else models
        self.to_train = tuple(range(n)) if cfg.policies_to_train is None else tuple(cfg.policies_to_train)
        self.own_env_steps = [0] * n  # steps each policy has learned from (PBT's clock)
        self.gathered: list[list[Trajectories]] = [[] for _ in range(n)]  # each policy's, toward its next batch

    def __len__(self) -> int:
        return len(self.agents)

    def learn(
        self, batch: Trajectories, progress: float, *, on_policy: bool, after_step: Callable[[int], None]
    ) -> dict[int, dict[str, float]]:
        """Each policy to train takes its own steps of ``batch``; one that holds a batch's worth of trajectories
        learns from them (``after_step(p)`` after each gradient step). Returns the loss terms of those that learned."""
        learned = {}
        for p in self.to_train:
            mine = batch.valid & (batch.policy_id == p)
            if len(self) > 1 and not mine.any():
                continue
            self.gathered[p].append(batch if bool((mine == batch.valid).all()) else _own_steps(batch, mine))
            if len(self) > 1 and sum(map(len, self.gathered[p])) < len(batch):
                continue
            own, self.gathered[p] = Trajectories.concatenate(self.gathered[p]), []
            self.own_env_steps[p] += int(own.valid.sum())
            algorithm = self.agents[p].algorithm
            learned[p] = algorithm.learn(own, progress, on_policy=on_policy, after_step=lambda p=p: after_step(p))
        return learned

    def lag_of(self, batch: Trajectories) -> torch.Tensor:
        """Learner steps between the weights that acted and their policy's weights now, per valid step of the
        learners' policies (frozen opponents, numbered after them, do not learn)."""
        versions = torch.tensor([a.algorithm.version for a in self.agents], device=batch.policy_id.device)
        ours = batch.valid & (batch.policy_id < len(self))
        return (versions[batch.policy_id[ours]] - batch.policy_version[ours]).float()

    @property
    def learner_steps(self) -> int:
        return sum(agent.algorithm.version for agent in self.agents)

    def copy_policy(self, source: int, target: int) -> None:
        """Policy ``target`` takes ``source``'s weights and optimiser state (PBT's exploit step)."""
        src, dst = self.agents[source], self.agents[target]
        dst.model.load_state_dict(src.model.state_dict())
        dst.algorithm.optimizer.load_state_dict(copy.deepcopy(src.algorithm.optimizer.state_dict()))

    # ---------------------------------------------------------------- checkpoints (plain data)
    def state_dict(self) -> dict[str, Any]:
        """Policies 1..N-1's models and learners (policy 0's are the checkpoint's ``model`` and ``learner``) and the
        steps each policy has learned from."""
        others = [{"model": a.model.state_dict(), "learner": a.algorithm.state_dict()} for a in self.agents[1:]]
        return {"others": others, "own_env_steps": list(self.own_env_steps)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        others = state["others"]
        if len(others) != len(self) - 1:
            raise ValueError(
                f"the checkpoint holds a population of {len(others) + 1} policies; this run has "
                f"num_policies={len(self)}"
            )
        for agent, saved in zip(self.agents[1:], others, strict=True):
            agent.model.load_state_dict(saved["model"])
            agent.algorithm.load_state_dict(saved["learner"])
        self.own_env_steps = [int(s) for s in state["own_env_steps"]]


def mean_terms(learned: Iterable[dict[str, float]]) -> dict[str, float]:
    """The loss terms averaged over the policies that learned (one policy: its own)."""
    learned = list(learned)
    if len(learned) == 1:
        return learned[0]
    return {key: sum(terms[key] for terms in learned) / len(learned) for key in (learned[0] if learned else {})}


def _own_steps(batch: Trajectories, mine: torch.Tensor) -> Trajectories:
    """The trajectories of ``batch`` with a step in ``mine``, valid where ``mine`` is."""
    rows = mine.any(dim=1).nonzero().squeeze(1)
    if len(rows) == len(batch):
        return dataclasses.replace(batch, valid=mine)
    return dataclasses.replace(batch.select(rows), valid=mine[rows])


def _seeded(cfg: TrainConfig, policy: int) -> TrainConfig:
    return cfg if cfg.seed is None or policy == 0 else dataclasses.replace(cfg, seed=cfg.seed + 7919 * policy)
