"""A population of learning policies sharing one sampler (Sample Factory's ``num_policies``), rated and evolved.

Why: several policies trained side by side on the same envs play each other (the opponents get better as the learner
does, without snapshots) and, with PBT, tune their hyperparameters as they learn. Each agent slot's episode is
played by the policy ``policy_mapping(agent_id, EpisodeId)`` chooses when it starts (RLlib's ``policy_mapping_fn``;
default :class:`RandomPolicyMapping`, Sample Factory's); each policy learns from its own steps
(:class:`~vecfast.trainers.algorithm.learners.Learners`). Finished episodes give each policy its objective (the env's
``true_objective``, else the return), which ranks the population for PBT (it mutates the hyperparameters and, where
the layout declares per-slot reward shaping, the reward shaping a policy's agents get from their next episode); a
finished match between different policies updates their Elo ratings.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.selfplay.elo import Elo
from vecfast.selfplay.pbt import PBTController, PBTDecision, hyperparameters_of
from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.episodes import EndedEpisode


@dataclass(frozen=True)
class EpisodeId:
    """The ``number``-th episode (from 0) of match ``match`` (of env ``match`` in a single-agent vector env): every
    agent of a match sees the same id for the same game."""

    match: int
    number: int


PolicyMappingFn = Callable[[Any, EpisodeId], int]
"""(agent id: the PettingZoo agent name, or the env index of a single-agent vector env; episode) -> policy index."""


class RandomPolicyMapping:
    """Sample Factory's default mapping: each agent plays a policy drawn at random, the same for ``every_episodes``
    consecutive episodes of its match. A pure function of its arguments and ``seed``, so every caller (and a
    resumed run) sees the same draws.

    The draws of a block of episodes are dealt, not drawn one by one: slot ``match * len(agents) + a`` (agent
    ``agents[a]``; ``agents``: the ids of one match's agents in order, as a PettingZoo env's ``possible_agents``)
    takes its place in a shuffled deck of the policies, a new shuffle per ``num_policies`` slots. Each slot's policy
    is still uniform at random, but with at least ``num_policies`` slots every policy plays, where independent draws
    leave one out of a few long Doom duels for as long as ``every_episodes`` episodes (and out of learning).
    """

    def __init__(
        self, num_policies: int, every_episodes: int = 10, seed: int | None = None, agents: Sequence[Any] = ()
    ) -> None:
        self.num_policies, self.every_episodes = num_policies, every_episodes
        self.agents = tuple(agents)
        self.entropy = np.random.SeedSequence(seed).entropy

    def __call__(self, agent_id: Any, episode: EpisodeId) -> int:
        agent = self.agents.index(agent_id) if agent_id in self.agents else 0
        slot = episode.match * max(len(self.agents), 1) + agent
        block = episode.number // self.every_episodes
        deck, place = divmod(slot, self.num_policies)
        return int(np.random.default_rng([self.entropy, block, deck]).permutation(self.num_policies)[place])


def policy_name(policy: int) -> str:
    return f"policy_{policy}"


def objective_of(episode: EndedEpisode) -> float:
    """What ranks a policy: the env's ``true_objective`` of the episode where it reports one, else its return."""
    return float(episode.metrics.get("true_objective", episode.episode_return))


class Population:
    """The acting plan of ``learners``' ``cfg.num_policies`` policies on ``env``: :attr:`policies` (the learners' acting
    models), :meth:`mapping` (each agent slot's episode to a policy), :meth:`episode_ended` (objectives, Elo) and
    :meth:`learned` (PBT), for a :class:`~vecfast.trainers.sampling.sampler.Sampler` and a scheme."""

    def __init__(
        self,
        env: VectorEnv,
        learners: Learners,
        cfg: TrainConfig,
        policy_mapping: PolicyMappingFn | None = None,
    ) -> None:
        n = len(learners)
        self.learners = learners
        self.policies = learners.acting
        layout = slot_layout_of(env)
        self.in_matches = layout is not None and layout.num_agents >= 2
        self.agent_ids = np.asarray(layout.agent_ids) if self.in_matches else np.arange(env.num_envs)
        self.match_ids = np.asarray(layout.match_ids) if self.in_matches else np.arange(env.num_envs)
        self.num_agents = layout.num_agents if self.in_matches else 1
        self.policy_mapping = policy_mapping or RandomPolicyMapping(
            n,
            cfg.resample_policy_every_episodes,
            cfg.seed,
            self.agent_ids[: self.num_agents].tolist() if self.in_matches else (),
        )
        self.objectives = [deque(maxlen=cfg.stats_avg) for _ in range(n)]
        self.elo = Elo()
        self.pending: dict[EpisodeId, list[tuple[int, float]]] = {}  # (policy, objective) per ended slot of a match
        # PBT mutates the reward shaping too where the layout says each slot takes its own (Doom matches)
        self.shaping_env = env if cfg.with_pbt and self.in_matches and layout.reward_shaping else None
        shaping = dict(env.get_attr("reward_shaping")[0]) if self.shaping_env is not None else {}
        self.slot_shaping = [shaping] * env.num_envs  # the coefficients each slot's rewards use
        self.pbt = (
            PBTController(n, hyperparameters_of(cfg), shaping, config=cfg, seed=cfg.seed) if cfg.with_pbt else None
        )
        self.pbt_decisions: list[PBTDecision] = []
        self.lock = threading.Lock()

    @property
    def num_policies(self) -> int:
        return len(self.learners)

    # ---------------------------------------------------------------- the sampler's side (its thread)
    def mapping(self, env: int, episode: int) -> int:
        """The policy that plays slot ``env``'s episode ``episode``."""
        policy = int(self.policy_mapping(self.agent_ids[env].item(), EpisodeId(int(self.match_ids[env]), episode)))
        if not 0 <= policy < self.num_policies:
            raise ValueError(f"policy_mapping returned {policy!r}: policies are 0 to {self.num_policies - 1}")
        if self.shaping_env is not None:  # between the slot's steps: the sampler calls this before it acts
            with self.lock:
                wanted = self.pbt.settings(policy).reward_shaping
            if wanted != self.slot_shaping[env]:
                self.slot_shaping[env] = wanted
                self.shaping_env.set_attr("reward_shaping", list(self.slot_shaping))
        return policy

    def episode_ended(self, ended: EndedEpisode, episode: int) -> None:
        """Slot ``ended.env`` finished its episode ``episode``: its policy's objective; once every agent of the
        match has finished the game, the Elo of the different policies that played it."""
        if ended.restarted:  # cut short by a restart: no objective, no result (its match's slots all are)
            return
        policy, objective = ended.policy, objective_of(ended)
        with self.lock:
            self.objectives[policy].append(objective)
            if not self.in_matches:
                return
            key = EpisodeId(int(self.match_ids[ended.env]), episode)
            results = self.pending.setdefault(key, [])
            results.append((policy, objective))
            if len(results) == self.num_agents:
                del self.pending[key]
                self.elo.record_match([policy_name(p) for p, _ in results], [score for _, score in results])

    # ---------------------------------------------------------------- the learner's side
    def learned(self, policies: Iterable[int], publish: Callable[[int], None]) -> None:
        """``policies`` have learned: each takes its PBT step if one is due."""
        for policy in policies:
            self._pbt_step(policy, publish)

    def _pbt_step(self, policy: int, publish: Callable[[int], None]) -> None:
        steps = self.learners.own_env_steps[policy]
        if self.pbt is None or not self.pbt.due(policy, steps):
            return
        with self.lock:
            objectives = [float(np.mean(o)) if o else -np.inf for o in self.objectives]
            decision = self.pbt.update(policy, steps, objectives)
        if decision is None:
            return
        target = self.learners.agents[policy]
        if decision.source is not None:
            self.learners.copy_policy(decision.source, policy)
            publish(policy)
        target.algorithm.cfg = dataclasses.replace(target.algorithm.cfg, **decision.after.hyperparameters)
        self.pbt_decisions.append(decision)

    def summary(self) -> dict[str, float]:
        """Each policy's Elo, mean objective, learning rate (PBT changes it) and the PBT steps so far."""
        out: dict[str, float] = {}
        with self.lock:
            for p, agent in enumerate(self.learners.agents):
                name = policy_name(p)
                out[f"{name}_elo"] = self.elo.rating(name)
                if self.objectives[p]:
                    out[f"{name}_objective"] = float(np.mean(self.objectives[p]))
                out[f"{name}_learning_rate"] = agent.algorithm.learning_rate
        if self.pbt is not None:
            out["pbt_replacements"] = float(sum(d.replaced for d in self.pbt_decisions))
        return out

    # ---------------------------------------------------------------- checkpoints (plain data)
    def state_dict(self) -> dict[str, Any]:
        """Every policy's hyperparameters, Elo, objectives and PBT (the learners keep their own weights)."""
        with self.lock:
            return {
                "hyperparameters": [hyperparameters_of(a.algorithm.cfg) for a in self.learners.agents],
                "objectives": [list(o) for o in self.objectives],
                "elo": self.elo.to_dict(),
                "pbt": None if self.pbt is None else self.pbt.state_dict(),
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for agent, hyper in zip(self.learners.agents, state["hyperparameters"], strict=True):
            agent.algorithm.cfg = dataclasses.replace(agent.algorithm.cfg, **hyper)
        with self.lock:
            for kept, saved in zip(self.objectives, state["objectives"], strict=True):
                kept.clear()
                kept.extend(saved)
            self.elo = Elo.from_dict(state["elo"])
        if self.pbt is not None and state["pbt"] is not None:
            self.pbt.load_state_dict(state["pbt"])


__all__ = ["EpisodeId", "Population", "PolicyMappingFn", "RandomPolicyMapping", "objective_of", "policy_name"]
