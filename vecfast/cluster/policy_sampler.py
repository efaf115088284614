"""One node's share of a run's envs and its own copy of the policy, as a Ray actor: local inference (Sample
Factory's policy worker on each node, IMPALA's actors).

The actor runs the asynchronous scheme's policy worker on its node (:class:`~vecfast.trainers.schemes.policy_worker.
PolicyWorker`: the envs' worker processes, double buffering and batched inference all stay inside the node) and
hands the learner finished trajectories (:meth:`PolicySampler.take`), so that what crosses the network is one
trajectory per ``rollout`` steps of an env and, the other way, the learner's weights (:meth:`PolicySampler.
set_weights`, through Ray's object store once for all samplers). Ray names the actor's process
``ray::PolicySampler``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from gymnasium.vector import VectorEnv

from vecfast.cluster.env_sampler import EnvSampler
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.sampling.episodes import EndedEpisode
from vecfast.trainers.sampling.sampler import POLL_SECONDS, SamplerTimings
from vecfast.trainers.schemes.policy_worker import PolicyWorker
from vecfast.vector.restarts import Restart


@dataclass(frozen=True)
class Shipment:
    """What a sampler hands the learner in one call: finished trajectories, and what happened on its node since its
    last shipment. Env indices are the sampler's own (from 0)."""

    trajectories: Trajectories
    env_steps: int  # transitions recorded since the last shipment
    episodes: list[EndedEpisode]  # finished since the last shipment
    restarts: list[Restart]  # of the node's env workers, since the last shipment
    timings: SamplerTimings  # cumulative, since the sampler started
    seconds_in_call: float  # the call's time inside the actor: the rest of its round trip is the network's


@dataclass
class _Books:
    """What has happened since the last shipment (the policy worker's thread writes, :meth:`PolicySampler.take`
    reads)."""

    episodes: list[EndedEpisode] = field(default_factory=list)
    shipped_steps: int = 0
    shipped_restarts: int = 0


class PolicySampler(EnvSampler):
    """The envs ``make_env`` builds on this node, acted on by this actor's copy of the policy once :meth:`start`
    gives it one."""

    def __init__(self, make_env: Callable[[], VectorEnv]) -> None:
        super().__init__(make_env)
        self.worker: PolicyWorker | None = None
        self.books = _Books()
        self.lock = threading.Lock()
        self.closing = threading.Event()

    def start(self, model: ActorCritic, rollout: int, num_rows: int, seed: int | None, stats_avg: int) -> None:
        """Act with ``model`` (a copy of the learner's, on this node's CPU) in ``num_rows`` trajectory rows of
        ``rollout`` steps; the envs are reset with ``seed`` (env ``i`` with ``seed + i``)."""
        if seed is not None:
            torch.manual_seed(seed)  # the actions this node samples
        self.worker = PolicyWorker(
            self.env, model.cpu(), rollout, num_rows, seed, stats_avg, on_episode_end=self._episode_ended
        )
        self.worker.start()

    def _episode_ended(self, episode: EndedEpisode, number: int) -> None:
        with self.lock:
            self.books.episodes.append(episode)

    def set_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Act with the learner's weights of ``version`` from now on (an older version that arrives late is
        ignored: the calls of a threaded actor may run out of order)."""
        worker = self._started()
        if version > worker.sampler.versions[0]:
            worker.publish(weights, version)

    def take(self, count: int) -> Shipment | None:
        """``count`` finished trajectories, waiting for them (None once the sampler is closing). An error of the
        envs is raised here, of its own type."""
        start = time.perf_counter()
        worker = self._started()
        sampler = worker.sampler
        taken: list[int] = []
        while len(taken) < count:
            if worker.error is not None:
                raise worker.error
            if self.closing.is_set():
                sampler.release(taken)
                return None
            try:
                taken.append(sampler.full.get(timeout=POLL_SECONDS))
            except queue.Empty:
                continue
        trajectories = sampler.storage.select(torch.tensor(taken))
        sampler.release(taken)
        restarts = list(getattr(self.env, "restarts", ()))
        with self.lock:
            books = self.books
            episodes, books.episodes = books.episodes, []
            env_steps, books.shipped_steps = sampler.env_steps - books.shipped_steps, sampler.env_steps
            new_restarts, books.shipped_restarts = restarts[books.shipped_restarts :], len(restarts)
        timings = SamplerTimings(**vars(sampler.timings))
        return Shipment(trajectories, env_steps, episodes, new_restarts, timings, time.perf_counter() - start)

    def _started(self) -> PolicyWorker:
        if self.worker is None:
            raise RuntimeError("PolicySampler.start() first")
        return self.worker

    def close(self) -> None:
        self.closing.set()
        if self.worker is not None:
            self.worker.stop_event.set()
            self.worker.join(timeout=30)
        super().close()
