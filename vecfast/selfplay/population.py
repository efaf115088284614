"""A population of learning policies sharing one sampler (Sample Factory's ``num_policies``), rated and evolved.

Why: several policies trained side by side on the same envs play each other (the opponents get better as the learner
does, without snapshots) and, with PBT, tune their hyperparameters as they learn. Each agent slot's episode is
played by the policy ``policy_mapping(agent_id, EpisodeId)`` chooses when it starts (RLlib's ``policy_mapping_fn``;
default :class:`RandomPolicyMapping`, Sample Factory's). A batch of trajectories is split by the policy that took
each step: each policy in ``policies_to_train`` learns from its own steps only, the others stay frozen. As Sample
Factory's learners do, a policy of a population gathers its trajectories until it holds a whole batch (as many as
the sampler's batch), so that N policies take the gradient steps per env frame that one policy takes (trajectories
still gathering are not in a checkpoint). Finished
episodes give each policy its objective (the env's ``true_objective``, else the return), which ranks the population
for PBT (it mutates the hyperparameters and, where the env has ``set_reward_shaping`` per slot, the reward shaping a
policy's agents get from their next episode); a finished match between different policies updates their Elo ratings.

Policy switches happen only where episodes start, so a trajectory holding two policies' steps has an episode end
(and its reset step) between them: masking the other policy's steps cuts no return or advantage recursion.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.selfplay.elo import Elo
from vecfast.selfplay.pbt import PBTConfig, PBTController, PBTDecision, hyperparameters_of
from vecfast.trainers.agent import Agent
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.episodes import EndedEpisode
from vecfast.trainers.protocols import AlgorithmFactory
from vecfast.trainers.storage import Trajectories


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
    """``cfg.num_policies`` agents (model and algorithm each) for ``env``'s spaces and their acting copies, which a
    :class:`~vecfast.trainers.sampler.Sampler` acts with (:attr:`acting`, :meth:`mapping`, :meth:`episode_ended`).
    One policy (the default) is the plain single-learner case."""

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        policy_mapping: PolicyMappingFn | None = None,
    ) -> None:
        n = cfg.num_policies
        # each policy its own initial weights; policy 0 last, so the generators continue as in a one-policy run
        agents = {p: Agent(env, algorithm, _seeded(cfg, p)) for p in reversed(range(n))}
        self.agents = [agents[p] for p in range(n)]
        self.acting = [copy.deepcopy(agent.model).requires_grad_(False) for agent in self.agents]
        self.to_train = tuple(range(n)) if cfg.policies_to_train is None else tuple(cfg.policies_to_train)
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
        self.own_env_steps = [0] * n  # steps each policy has learned from (PBT's clock)
        self.gathered: list[list[Trajectories]] = [[] for _ in range(n)]  # each policy's, toward its next batch
        self.elo = Elo()
        self.pending: dict[EpisodeId, list[tuple[int, float]]] = {}  # (policy, objective) per ended slot of a match
        # PBT mutates the reward shaping too where the env gives each slot its own (Doom matches)
        unwrapped = env.unwrapped
        self.shaping_env = unwrapped if cfg.with_pbt and hasattr(unwrapped, "set_reward_shaping") else None
        shaping = dict(unwrapped.get_attr("reward_shaping")[0]) if self.shaping_env is not None else {}
        self.slot_shaping = [shaping] * env.num_envs  # the coefficients each slot's rewards use
        self.pbt = (
            PBTController(n, hyperparameters_of(cfg), shaping, config=PBTConfig.of(cfg), seed=cfg.seed)
            if cfg.with_pbt
            else None
        )
        self.pbt_decisions: list[PBTDecision] = []
        self.lock = threading.Lock()

    @property
    def num_policies(self) -> int:
        return len(self.agents)

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
                self.shaping_env.set_reward_shaping(wanted, [env])
                self.slot_shaping[env] = wanted
        return policy

    def episode_ended(self, ended: EndedEpisode, episode: int) -> None:
        """Slot ``ended.env`` finished its episode ``episode``: its policy's objective; once every agent of the
        match has finished the game, the Elo of the different policies that played it."""
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
    def learn(
        self, batch: Trajectories, progress: float, publish: Callable[[int], None]
    ) -> dict[int, dict[str, float]]:
        """Each policy to train takes its own steps of ``batch``; one that holds a batch's worth of trajectories
        learns from them (``publish(p)`` after each gradient step), then takes its PBT step if one is due. Returns
        each policy's loss terms (of those that learned here)."""
        learned = {}
        for p in self.to_train:
            mine = batch.valid & (batch.policy_id == p)
            if not mine.any():
                continue
            rows = mine.any(dim=1).nonzero().squeeze(1)
            own = batch if len(rows) == len(batch) else batch.select(rows)
            self.gathered[p].append(dataclasses.replace(own, valid=mine[rows] if len(rows) < len(batch) else mine))
            if self.num_policies > 1 and sum(map(len, self.gathered[p])) < len(batch):
                continue
            own, self.gathered[p] = Trajectories.concatenate(self.gathered[p]), []
            self.own_env_steps[p] += int(own.valid.sum())
            algorithm = self.agents[p].algorithm
            learned[p] = algorithm.learn(own, progress, on_policy=False, after_step=lambda p=p: publish(p))
            self._pbt_step(p, publish)
        return learned

    def _pbt_step(self, policy: int, publish: Callable[[int], None]) -> None:
        if self.pbt is None or not self.pbt.due(policy, self.own_env_steps[policy]):
            return
        with self.lock:
            objectives = [float(np.mean(o)) if o else -np.inf for o in self.objectives]
            decision = self.pbt.update(policy, self.own_env_steps[policy], objectives)
        if decision is None:
            return
        target = self.agents[policy]
        if decision.source is not None:
            source = self.agents[decision.source]
            target.model.load_state_dict(source.model.state_dict())
            target.algorithm.optimizer.load_state_dict(copy.deepcopy(source.algorithm.optimizer.state_dict()))
            publish(policy)
        target.algorithm.cfg = dataclasses.replace(target.algorithm.cfg, **decision.after.hyperparameters)
        self.pbt_decisions.append(decision)

    def lag_of(self, batch: Trajectories) -> torch.Tensor:
        """Learner steps between the weights that acted and their policy's weights now, per valid step of the
        population's policies (a league's snapshot seats, numbered after them, do not learn)."""
        versions = torch.tensor([a.algorithm.version for a in self.agents], device=batch.policy_id.device)
        ours = batch.valid & (batch.policy_id < self.num_policies)
        return (versions[batch.policy_id[ours]] - batch.policy_version[ours]).float()

    @property
    def learner_steps(self) -> int:
        return sum(agent.algorithm.version for agent in self.agents)

    def summary(self) -> dict[str, float]:
        """Each policy's Elo, mean objective, learning rate (PBT changes it) and the PBT steps so far (one-policy
        runs: nothing)."""
        if self.num_policies == 1:
            return {}
        out: dict[str, float] = {}
        with self.lock:
            for p, agent in enumerate(self.agents):
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
        """Policies 1..N-1's models, learners and hyperparameters (policy 0's are the checkpoint's ``model`` and
        ``learner``), Elo, objectives, per-policy steps and PBT."""
        with self.lock:
            return {
                "others": [
                    {"model": a.model.state_dict(), "learner": a.algorithm.state_dict()} for a in self.agents[1:]
                ],
                "hyperparameters": [hyperparameters_of(a.algorithm.cfg) for a in self.agents],
                "objectives": [list(o) for o in self.objectives],
                "own_env_steps": list(self.own_env_steps),
                "elo": self.elo.to_dict(),
                "pbt": None if self.pbt is None else self.pbt.state_dict(),
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state["others"]) != self.num_policies - 1:
            raise ValueError(
                f"the checkpoint holds a population of {len(state['others']) + 1} policies; this run has "
                f"num_policies={self.num_policies}"
            )
        for agent, saved in zip(self.agents[1:], state["others"], strict=True):
            agent.model.load_state_dict(saved["model"])
            agent.algorithm.load_state_dict(saved["learner"])
        for agent, hyper in zip(self.agents, state["hyperparameters"], strict=True):
            agent.algorithm.cfg = dataclasses.replace(agent.algorithm.cfg, **hyper)
        with self.lock:
            for kept, saved in zip(self.objectives, state["objectives"], strict=True):
                kept.clear()
                kept.extend(saved)
            self.own_env_steps = [int(s) for s in state["own_env_steps"]]
            self.elo = Elo.from_dict(state["elo"])
        if self.pbt is not None and state["pbt"] is not None:
            self.pbt.load_state_dict(state["pbt"])


def _seeded(cfg: TrainConfig, policy: int) -> TrainConfig:
    return cfg if cfg.seed is None or policy == 0 else dataclasses.replace(cfg, seed=cfg.seed + 7919 * policy)


__all__ = ["EpisodeId", "Population", "PolicyMappingFn", "RandomPolicyMapping", "objective_of", "policy_name"]
