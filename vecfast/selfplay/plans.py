"""Which acting plan a run of ``vecfast.train`` plays by, from its env and config: the one place that decides.

* ``num_policies`` > 1: a :class:`~vecfast.selfplay.population.Population` (``policy_mapping`` maps agents to
  policies, a random draw by default);
* one policy on matches of >= 2 agents: a :class:`~vecfast.selfplay.league.League`, the learner against itself and its
  snapshots (``opponent_seats=0``: the learner on every seat, one policy learning from every agent's steps);
* one policy on single-agent envs: :class:`~vecfast.trainers.sampling.acting_plan.SinglePolicy`.
"""

from __future__ import annotations

from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.selfplay.league import league_for
from vecfast.selfplay.population import PolicyMappingFn, Population
from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.acting_plan import ActingPlan, PlanFactory, SinglePolicy


def plan_for(policy_mapping: PolicyMappingFn | None = None) -> PlanFactory:
    """The plan factory a scheme builds its acting plan with (``policy_mapping``: a population's, see above)."""

    def build(env: VectorEnv, learners: Learners, cfg: TrainConfig) -> ActingPlan:
        if len(learners) > 1:
            return Population(env, learners, cfg, policy_mapping)
        layout = slot_layout_of(env)
        if layout is not None and layout.num_agents >= 2 and cfg.opponent_seats > 0:
            return league_for(env, learners, cfg)
        return SinglePolicy(learners)

    return build
