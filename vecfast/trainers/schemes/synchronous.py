"""The synchronous scheme: step every env ``rollout`` times with the current policies, then learn from it.

One loop, as in CleanRL. The data is on-policy, so the algorithm learns from it with the values
the policy predicted while acting. In a distributed run (:mod:`.distributed`) each rank runs this
loop over its own envs: step counts, episode statistics and loss terms are summed or averaged over
the ranks (:mod:`vecfast.trainers.base.collective`), and a :class:`RolloutEnd` may end a rollout early.

Who acts for which env is the acting plan's (:mod:`vecfast.trainers.sampling.acting_plan`): one policy, a league or a
population. In matches whose agents act in turns (a board game) only the slots to move are stepped, so the slots
fill at different times: a rollout ends once ``num_envs`` trajectories of ``rollout`` steps are complete; a slot
whose trajectory completed earlier went on acting (its move lets the opponent move) into its next trajectory,
which the next rollout learns from with those first steps one update old (PPO's clipped ratio covers that, as it
covers its own epochs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch
from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.trainers.algorithm.learners import Learners, mean_terms
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.base import collective
from vecfast.trainers.base.metrics import IterationMetrics
from vecfast.trainers.base.progress import RunProgress
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import AlgorithmFactory
from vecfast.trainers.sampling.acting_plan import PlanFactory, single_policy
from vecfast.trainers.sampling.sampler import Received, Sampler, StepAsRecv
from vecfast.trainers.schemes.checkpoint import load_scheme_state, scheme_state
from vecfast.wrappers.base import has_async_api


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


def _nothing(policy: int) -> None:
    pass


class SyncTrainer:
    """Synchronous sampling and learning over any gymnasium VectorEnv, acting by ``plan(env, learners, cfg)``."""

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        total_env_steps: int,
        *,
        plan: PlanFactory = single_policy,
        learn_with: Callable[[ActorCritic], ActorCritic] | None = None,
        rollout_end: RolloutEnd | None = None,
    ) -> None:
        check_rollout_splits(env.num_envs, cfg)
        self.env, self.cfg = env, cfg
        self.progress = RunProgress(total_env_steps, cfg.train_for_seconds)
        self.learners = Learners(env, algorithm, cfg, acting_copies=False, learn_with=learn_with)
        self.agent = self.learners.agents[0]
        self.model, self.device = self.agent.model, self.agent.device
        self.plan = plan(env, self.learners, cfg)
        layout = slot_layout_of(env)
        self.in_turns = layout is not None and layout.in_turns
        if self.in_turns and not has_async_api(env):
            raise ValueError(
                "agents that act in turns are stepped through send/recv (only the slots to move), and a wrapper of "
                "this env does not forward them: wrap it with vecfast.wrappers, which do"
            )
        # in turns, a slot acts on into its next trajectory while the others complete theirs (module docstring)
        self.sampler = Sampler(
            env if self.in_turns else StepAsRecv(env),
            self.plan.policies,
            cfg.rollout,
            3 * env.num_envs if self.in_turns else env.num_envs,
            mapping=self.plan.mapping,
            on_episode_end=self.plan.episode_ended,
            seed=cfg.seed,
            stats_avg=cfg.stats_avg,
        )
        self.rollout_end = rollout_end or FullRollouts()
        self.env_steps = 0  # by every rank

    def iterations(self) -> Iterator[IterationMetrics]:
        cfg, sampler, learners = self.cfg, self.sampler, self.learners
        n = self.env.num_envs
        received = sampler.reset()
        self.progress.start()
        while True:
            sample_start = time.perf_counter()
            ranks_sync = 0.0  # coordinating with the other ranks: preemption polls, then the steps' count
            self.rollout_end.begin()
            steps, steps_before = 0, sampler.env_steps
            while True:
                poll_start = time.perf_counter()
                stop = self._rollout_over(received, steps)
                ranks_sync += time.perf_counter() - poll_start
                if stop:
                    break
                sampler.step(received)
                received = sampler.observe()
                steps += 1
            self.rollout_end.finished()
            sampler.end_trajectories(self._completing(received))
            sync_start = time.perf_counter()  # the other ranks' rollouts end here too: waiting for the slowest
            self.env_steps += int(collective.all_sum(torch.tensor([sampler.env_steps - steps_before])).item())
            ranks_sync += time.perf_counter() - sync_start
            rows = sampler.take_full(n)
            sample_time = time.perf_counter() - sample_start

            learn_start = time.perf_counter()
            if self.in_turns:
                batch = sampler.storage.select(torch.tensor(rows, device=self.device))
            else:  # each env refills its own row (env i, row i), so the rows are the batch as they stand
                batch = sampler.storage if steps == cfg.rollout else sampler.storage.prefix(steps)  # preempted: as is
            progress = self.progress.fraction(self.env_steps)
            learned = learners.learn(batch, progress, on_policy=True, after_step=_nothing)
            self.plan.learned(learned, _nothing)  # the learners act themselves: nothing to publish
            sampler.release(rows)
            yield IterationMetrics(
                env_steps=self.env_steps,
                learner_steps=learners.learner_steps,
                episodes=sampler.episodes.summary(),
                learning=collective.all_mean(mean_terms(learned.values())),
                timings={
                    "time_sampling": sample_time,
                    "time_ranks_sync": ranks_sync,  # of the sampling
                    "time_learning": time.perf_counter() - learn_start,
                    "time_envs": sampler.timings.waiting_envs,  # cumulative, as APPO's: of the sampling above
                    "time_inference": sampler.timings.inference,
                },
                extra={"rollout_steps": steps, **self.plan.summary()},
            )

    def _rollout_over(self, received: Received, steps: int) -> bool:
        """Whether the rollout ends at ``received``: ``num_envs`` trajectories complete, or a :class:`RolloutEnd`
        ending it early (envs that all step at once)."""
        if self.in_turns:
            return self.sampler.full.qsize() + int(self._complete(received).sum()) >= self.env.num_envs
        return steps >= self.cfg.rollout or self.rollout_end.stop_early(steps)

    def _complete(self, received: Received) -> torch.Tensor:
        return self.sampler.step_in_row[received.ids] == self.cfg.rollout

    def _completing(self, received: Received) -> Received:
        """The envs of ``received`` whose trajectories end with this rollout: all of them where every env steps at
        once (a preempted rollout ends short), those that hold a whole trajectory where agents act in turns (the
        others wait to act with the new policy)."""
        return received.rows(self._complete(received)) if self.in_turns else received

    def state_dict(self) -> dict[str, Any]:
        return scheme_state(self.learners, self.sampler, self.plan, self.env_steps, self.progress)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = load_scheme_state(self.learners, self.sampler, self.plan, self.progress, state)

    def close(self) -> None:
        """Nothing to stop: everything runs in the caller's thread."""
