"""The synchronous scheme: step every env ``rollout`` times with the current policy, then learn from it.

One loop, as in CleanRL. The data is on-policy, so the algorithm learns from it with the values
the policy predicted while acting. In a distributed run (:mod:`.distributed`) each rank runs this
loop over its own envs: step counts, episode statistics and loss terms are summed or averaged over
the ranks (:mod:`vecfast.trainers.collective`), and a :class:`RolloutEnd` may end a rollout early.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch
from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.multiagent.turn_based import TurnBasedVectorEnv
from vecfast.trainers import collective
from vecfast.trainers.agent import Agent
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.metrics import IterationMetrics
from vecfast.trainers.models import ActorCritic
from vecfast.trainers.protocols import AlgorithmFactory
from vecfast.trainers.sampler import Sampler, StepAsRecv


class RolloutEnd(Protocol):
    """Decides when a rollout ends before ``rollout`` steps (DD-PPO's preemption of stragglers)."""

    def begin(self) -> None:
        """A rollout starts."""

    def stop_early(self, steps: int) -> bool:
        """Whether to end the rollout now, after ``steps`` steps of it."""
        ...

    def finished(self) -> None:
        """This process's rollout has ended."""


class FullRollouts:
    """Every rollout runs its ``rollout`` steps."""

    def begin(self) -> None:
        pass

    def stop_early(self, steps: int) -> bool:
        return False

    def finished(self) -> None:
        pass


def check_rollout_splits(num_envs: int, cfg: TrainConfig) -> None:
    """A synchronous rollout of ``num_envs`` envs must split into whole minibatches of ``cfg.batch_size``."""
    samples = num_envs * cfg.rollout
    if samples % cfg.batch_size:
        raise ValueError(
            f"a synchronous rollout has num_envs * rollout = {samples} samples; batch_size={cfg.batch_size} must "
            "divide it"
        )


def refuse_turn_based(env: VectorEnv) -> None:
    """A ValueError for matches whose agents act in turns: this scheme steps every slot at once, so the rows of the
    slots waiting for their turn would be learned from as moves (the asynchronous scheme acts on the slots whose
    turn it is, and self-plays)."""
    layout = slot_layout_of(env)
    if layout is not None and isinstance(env.unwrapped, TurnBasedVectorEnv):
        raise ValueError(
            f"the synchronous scheme steps every slot at once, and the {layout.num_agents} agents of a turn-based "
            "game (a PettingZoo AEC env such as connect four) act in turns: train it with algo='appo', which "
            "self-plays against its snapshots and reports its Elo"
        )


def _nothing() -> None:
    pass


class SyncTrainer:
    """Synchronous sampling and learning over any gymnasium VectorEnv."""

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        total_env_steps: int,
        *,
        learn_with: Callable[[ActorCritic], ActorCritic] | None = None,
        rollout_end: RolloutEnd | None = None,
    ) -> None:
        if cfg.num_policies > 1:
            raise ValueError(
                f"num_policies={cfg.num_policies}: populations train under the asynchronous scheme (algo='appo'), "
                "as in Sample Factory"
            )
        check_rollout_splits(env.num_envs, cfg)
        refuse_turn_based(env)
        self.env, self.cfg, self.total_env_steps = env, cfg, total_env_steps
        self.agent = Agent(env, algorithm, cfg, learn_with)
        self.model, self.device = self.agent.model, self.agent.device
        self.sampler = Sampler(
            StepAsRecv(env), self.model, cfg.rollout, env.num_envs, seed=cfg.seed, stats_avg=cfg.stats_avg
        )
        self.rollout_end = rollout_end or FullRollouts()
        self.env_steps = 0  # by every rank

    def iterations(self) -> Iterator[IterationMetrics]:
        cfg, sampler = self.cfg, self.sampler
        n = self.env.num_envs
        received = sampler.reset()
        while True:
            sample_start = time.perf_counter()
            ranks_sync = 0.0  # coordinating with the other ranks: preemption polls, then the steps' count
            self.rollout_end.begin()
            steps = 0
            while True:
                poll_start = time.perf_counter()
                stop = steps >= cfg.rollout or self.rollout_end.stop_early(steps)
                ranks_sync += time.perf_counter() - poll_start
                if stop:
                    break
                sampler.step(received)
                received = sampler.observe()
                steps += 1
            self.rollout_end.finished()
            sampler.end_trajectories(received)
            sync_start = time.perf_counter()  # the other ranks' rollouts end here too: waiting for the slowest
            self.env_steps += int(collective.all_sum(torch.tensor([n * steps])).item())
            ranks_sync += time.perf_counter() - sync_start
            slots = sampler.take_full(n)
            sample_time = time.perf_counter() - sample_start

            learn_start = time.perf_counter()
            # each env refills its own slot (env i, slot i), so the slots are the batch as they stand
            batch = sampler.slots if steps == cfg.rollout else sampler.slots.prefix(steps)  # preempted: as is
            progress = self.env_steps / self.total_env_steps
            learned = self.agent.algorithm.learn(batch, progress, on_policy=True, after_step=_nothing)
            sampler.release(slots)
            yield IterationMetrics(
                env_steps=self.env_steps,
                learner_steps=self.agent.algorithm.version,
                episodes=sampler.episodes.summary(),
                learning=collective.all_mean(learned),
                timings={
                    "time_sampling": sample_time,
                    "time_ranks_sync": ranks_sync,  # of the sampling
                    "time_learning": time.perf_counter() - learn_start,
                    "time_envs": sampler.timings.waiting_envs,  # cumulative, as APPO's: of the sampling above
                    "time_inference": sampler.timings.inference,
                },
                extra={"rollout_steps": steps},
            )

    def state_dict(self) -> dict[str, Any]:
        return self.agent.state_dict(self.env_steps)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = self.agent.load_state_dict(state)

    def close(self) -> None:
        """Nothing to stop: everything runs in the caller's thread."""
