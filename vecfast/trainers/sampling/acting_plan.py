"""The acting plan: which policy acts for which env or agent slot, and where the results of the episodes go.

Every scheme runs one (RLlib's ``policy_mapping_fn`` with the books around it): the sampler acts with its
:attr:`~ActingPlan.policies` as :meth:`~ActingPlan.mapping` chooses when an episode starts and reports each finished
episode to :meth:`~ActingPlan.episode_ended`; the learners (:class:`~vecfast.trainers.algorithm.learners.Learners`)
learn from the steps of their own policies, and the scheme calls :meth:`~ActingPlan.learned` after every learning
step. One policy for every env (:class:`SinglePolicy`) is the plain case; :mod:`vecfast.selfplay` implements the
league (a learner against its snapshots) and the population (N policies, Elo, PBT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.episodes import EndedEpisode


class ActingPlan(Protocol):
    """Who acts, and where results go. ``policies``: the modules the sampler acts with, the learners' acting models
    first (policy ``p < len(learners)`` is learner ``p``'s), frozen opponents after them."""

    policies: Sequence[ActorCritic]

    def mapping(self, env: int, episode: int) -> int:
        """The policy that plays episode ``episode`` (from 0) of env (or agent slot) ``env``; the sampler's thread
        calls it when the episode starts."""
        ...

    def episode_ended(self, ended: EndedEpisode, episode: int) -> None:
        """Episode ``episode`` of env ``ended.env`` has ended (played by ``ended.policy``); the sampler's thread."""
        ...

    def learned(self, policies: Iterable[int], publish: Callable[[int], None]) -> None:
        """The learners ``policies`` have just learned (the learner's thread; ``publish(p)`` copies learner ``p``'s
        weights to its acting model). In a distributed run every rank calls it at the same point of every
        iteration, so the job's books (Elo, snapshots) can be agreed on here through collectives."""
        ...

    def summary(self) -> dict[str, float]:
        """Numbers for the metrics (Elo, win rates); empty if none."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The plan's books for a checkpoint (plain data)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


PlanFactory = Callable[[VectorEnv, Learners, TrainConfig], ActingPlan]
"""(env, learners, config) -> the plan a scheme acts by (``vecfast.train`` passes
:func:`vecfast.selfplay.plan_for`'s)."""


class SinglePolicy:
    """One learning policy acts for every env: nothing to choose, nothing to record."""

    def __init__(self, learners: Learners) -> None:
        if len(learners) != 1:
            raise ValueError(f"a single policy acts alone; a population of {len(learners)} needs a population's plan")
        self.policies = learners.acting

    def mapping(self, env: int, episode: int) -> int:
        return 0

    def episode_ended(self, ended: EndedEpisode, episode: int) -> None:
        pass

    def learned(self, policies: Iterable[int], publish: Callable[[int], None]) -> None:
        pass

    def summary(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


def single_policy(env: VectorEnv, learners: Learners, cfg: TrainConfig) -> ActingPlan:
    """A scheme's plan when none is given: one policy on a vector env of single-agent envs. Matches of several
    agents are refused rather than given one silently shared policy: ``vecfast.train`` chooses their plan."""
    layout = slot_layout_of(env)
    if layout is not None and layout.num_agents >= 2:
        raise ValueError(
            f"a vector env of {layout.num_agents}-agent matches needs an acting plan that says who plays whom: pass "
            "plan=vecfast.selfplay.plan_for() (self-play against snapshots, or a population), as vecfast.train does"
        )
    return SinglePolicy(learners)
