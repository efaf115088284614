"""The asynchronous scheme, Sample Factory's design: sampling, central batched inference and learning overlap.

Three activities overlap: the vector env's worker processes step envs (two groups each,
double-buffered), the policy-worker thread runs :mod:`vecfast.trainers.sampling.sampler` on whichever half of the
envs is ready (:mod:`.policy_worker`), and the learner (the caller's thread) takes ``batch_size`` samples
of finished trajectories, which a batcher thread gathers in the background while the
algorithm learns from the previous batch. The data may have been acted on by an older
policy (the algorithm is told it is not on-policy: PPO corrects it with V-trace); how old
it was (the policy lag, in learner steps) is measured on every batch. PPO under this
scheme is APPO.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from vecfast.trainers.algorithm.learners import Learners, mean_terms
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.base.metrics import IterationMetrics, PolicyLag
from vecfast.trainers.base.progress import RunProgress
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import AlgorithmFactory, BatchSource, RemoteSampling
from vecfast.trainers.sampling.acting_plan import ActingPlan, PlanFactory, single_policy
from vecfast.trainers.sampling.sampler import POLL_SECONDS, Sampler, SamplerTimings
from vecfast.trainers.schemes.checkpoint import load_scheme_state, scheme_state
from vecfast.trainers.schemes.policy_worker import PolicyWorker


class Batcher(threading.Thread):
    """Copies ``trajectories`` finished storage rows into one contiguous batch and frees the rows: one batch at a
    time, the next once the learner has taken the last (:meth:`take`), so that finished rows, not copies, hold
    whatever else waits for the learner."""

    def __init__(self, sampler: Sampler, trajectories: int) -> None:
        super().__init__(name="vecfast-batcher", daemon=True)
        self.sampler = sampler
        self.trajectories = trajectories
        self.batches: queue.Queue[Trajectories] = queue.Queue()
        self.room = threading.Semaphore(1)  # released when the learner takes the batch gathered for it
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                if not self.room.acquire(timeout=POLL_SECONDS):
                    continue
                taken = self.sampler.take_full(self.trajectories)
                if taken is None:
                    return
                batch = self.sampler.storage.select(torch.tensor(taken, device=self.sampler.device))
                self.sampler.release(taken)
                self.batches.put(batch)
        except BaseException as e:  # handed to the learner, which raises it
            self.error = e

    def take(self) -> Trajectories:
        """The batch gathered for the learner (queue.Empty after a poll's wait); the next one starts gathering."""
        batch = self.batches.get(timeout=POLL_SECONDS)
        self.room.release()
        return batch


class LocalBatches:
    """Batches sampled on this machine: the policy-worker thread acts on the vector env's envs, the batcher
    thread gathers ``trajectories`` finished ones at a time (:class:`~vecfast.trainers.protocols.BatchSource`)."""

    network_seconds = None  # nothing crosses a network

    def __init__(self, env: VectorEnv, plan: ActingPlan, cfg: TrainConfig, trajectories: int) -> None:
        # each env fills one row; one batch waits in the batcher, the others in finished rows
        self.worker = PolicyWorker(
            env,
            plan.policies,
            rollout=cfg.rollout,
            num_rows=env.num_envs + (cfg.num_batches_to_accumulate - 1) * trajectories,
            seed=cfg.seed,
            stats_avg=cfg.stats_avg,
            mapping=plan.mapping,
            on_episode_end=plan.episode_ended,
        )
        self.sampler = self.worker.sampler
        self.episodes, self.episodes_started = self.sampler.episodes, self.sampler.episodes_started
        self.batcher = Batcher(self.sampler, trajectories)
        self._started = False

    @property
    def env_steps(self) -> int:
        return self.sampler.env_steps

    @env_steps.setter
    def env_steps(self, steps: int) -> None:
        self.sampler.env_steps = steps

    @property
    def timings(self) -> SamplerTimings:
        return self.sampler.timings

    @property
    def queued(self) -> int:
        return self.sampler.full.qsize()

    def publish(self, weights: Mapping[str, torch.Tensor], version: int, policy: int = 0) -> None:
        self.worker.publish(weights, version, policy)

    def next_batch(self) -> Trajectories:
        if not self._started:
            self._started = True
            self.worker.start()
            self.batcher.start()
        while True:
            for thread in (self.worker, self.batcher):
                if thread.error is not None:  # its own type, so that callers can catch what the env raised
                    error, thread.error = thread.error, None
                    error.add_note(f"raised in the asynchronous scheme's {thread.name} thread")
                    raise error
            try:
                return self.batcher.take()
            except queue.Empty:
                continue

    def stop(self) -> None:
        """Stop the policy worker and the batcher (the env stays open: its owner closes it)."""
        self.batcher.stop_event.set()
        self.worker.stop_event.set()
        for thread in (self.batcher, self.worker):
            if thread.is_alive():
                thread.join()


class AsyncTrainer:
    """Asynchronous sampling and learning over a vector env with ``send``/``recv`` (any VectorEnv works, without
    overlap). The learning side is :class:`~vecfast.trainers.algorithm.learners.Learners` (one policy, or
    ``cfg.num_policies`` as in Sample Factory); who acts for which slot is the acting plan ``plan(env, learners, cfg)``
    builds (:mod:`vecfast.trainers.sampling.acting_plan`; ``vecfast.train`` passes :func:`vecfast.selfplay.plan_for`'s:
    self-play in matches, populations).
    """

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        total_env_steps: int,
        *,
        plan: PlanFactory = single_policy,
    ) -> None:
        self.cfg = cfg
        self.progress = RunProgress(total_env_steps, cfg.train_for_seconds)
        self.learners = learners = Learners(env, algorithm, cfg, acting_copies=True)
        self.agent = learners.agents[0]
        self.model = self.agent.model
        self.plan = plan(env, learners, cfg)
        batch = (cfg.batch_size // cfg.rollout) * cfg.num_batches_per_epoch  # trajectories per iteration
        if isinstance(env, RemoteSampling):  # samplers that act on their own nodes
            if len(self.plan.policies) > 1:
                raise ValueError("samplers with local inference act with one policy: no populations or self-play")
            env.start(self.plan.policies[0], cfg.rollout, batch, cfg.seed, cfg.stats_avg)
            self.batches: BatchSource = env
        else:
            self.batches = LocalBatches(env, self.plan, cfg, batch)
        self.device = next(self.model.parameters()).device

    def iterations(self) -> Iterator[IterationMetrics]:
        batches, learners, plan = self.batches, self.learners, self.plan

        def publish(policy: int) -> None:
            agent = learners.agents[policy]
            batches.publish(agent.model.state_dict(), agent.algorithm.version, policy)

        for p in range(len(learners)):
            publish(p)
        self.progress.start()
        while True:
            wait_start = time.perf_counter()
            batch = batches.next_batch()
            if batch.first.device != self.device:  # shipped from another node
                batch = batch.apply(lambda x: x.to(self.device, non_blocking=True))
            learn_start = time.perf_counter()
            lag = learners.lag_of(batch)
            progress = self.progress.fraction(batches.env_steps)
            learned = learners.learn(batch, progress, on_policy=False, after_step=publish)
            plan.learned(learned, publish)
            timings = batches.timings
            yield IterationMetrics(
                env_steps=batches.env_steps,
                learner_steps=learners.learner_steps,
                episodes=batches.episodes.summary(),
                policy_lag=PolicyLag(lag.min().item(), lag.mean().item(), lag.max().item()) if len(lag) else None,
                learning=mean_terms(learned.values()),
                timings={
                    "time_learner_waiting": learn_start - wait_start,
                    "time_learning": time.perf_counter() - learn_start,
                    "time_envs": timings.waiting_envs,
                    "time_inference": timings.inference,
                    "time_sampler_waiting_rows": timings.waiting_rows,
                    **({} if batches.network_seconds is None else {"time_batch_network": batches.network_seconds}),
                },
                extra={"full_trajectories": batches.queued, **plan.summary()},
            )

    def state_dict(self) -> dict[str, Any]:
        return scheme_state(self.learners, self.batches, self.plan, self.batches.env_steps, self.progress)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.env_steps = load_scheme_state(self.learners, self.batches, self.plan, self.progress, state)
        for p, agent in enumerate(self.learners.agents):
            self.batches.publish(agent.model.state_dict(), agent.algorithm.version, p)

    def close(self) -> None:
        """Stop sampling into this trainer (the env stays open: its owner closes it)."""
        self.batches.stop()
