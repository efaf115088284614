"""Samplers on the nodes of a Ray cluster that act with their own copy of the policy (local inference): the
asynchronous scheme's source of batches when its samplers are remote.

The learner's process keeps one :meth:`~vecfast.cluster.policy_sampler.PolicySampler.take` in flight per sampler
and builds each batch from the trajectories that arrive first, from whichever nodes; after each gradient step it
puts the new weights into Ray's object store once and tells every sampler their version. How long each shipment
spent between the samplers and the learner (its round trip less its time in the actor: the network's and
serialisation's share) is reported per batch beside the policy lag.

A sampler whose process or node dies is restarted by Ray (``max_restarts``) and given the policy again; the
trajectories it had not shipped are lost with it (its episodes then in progress are never reported), and
:attr:`PolicySamplers.restarts` records the loss. The learner does not wait for the restart: the other samplers'
batches go on meanwhile.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vecfast.cluster.policy_sampler import PolicySampler, Shipment
from vecfast.cluster.sampler_group import POLL_SECONDS, SamplersVectorEnv
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.sampling.episodes import EpisodeTracker
from vecfast.trainers.sampling.sampler import SamplerTimings
from vecfast.vector.restarts import Restart


@dataclass
class _Call:
    """A call in flight to a sampler: a take, or the start of a sampler that Ray is restarting after it died of
    ``died_of``; when it was made and when its reply arrived (``time.monotonic()``)."""

    sampler: int
    sent: float
    died_of: BaseException | None = None  # a restart's start call: what the sampler died of
    arrived: float | None = None

    def arrive(self, _: Any) -> None:
        self.arrived = time.monotonic()


# calls a sampler serves at once: take (waits for trajectories), set_weights, and get_attr or close
SAMPLER_THREADS = 4


class PolicySamplers(SamplersVectorEnv):
    """Samplers that act themselves (see :class:`~vecfast.cluster.sampler_group.SamplersVectorEnv` for the
    constructor): a vector env's description whose envs are stepped by their samplers, not by the caller;
    :meth:`start` gives them a policy, :meth:`next_batch` returns what they sampled."""

    sampler_class = PolicySampler
    sampler_threads = SAMPLER_THREADS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env_steps = 0
        self.episodes = EpisodeTracker(self.num_envs)
        self.episodes_started: np.ndarray | None = None  # local inference plays one policy: no episode numbering
        self.network_seconds = 0.0  # mean over the last batch's shipments
        self._timings = [SamplerTimings() for _ in self.group.actors]
        self._start_args: tuple[Any, ...] | None = None
        self._weights: tuple[Any, int] | None = None  # the newest weights in the object store, and their version
        self._in_flight: dict[Any, _Call] = {}  # take call -> its sampler and times
        self._pending: list[Trajectories] = []
        self._pending_network: list[float] = []

    # ------------------------------------------------------------------ the asynchronous scheme's source of batches
    def start(self, model: ActorCritic, rollout: int, trajectories: int, seed: int | None, stats_avg: int) -> None:
        """Give every sampler a copy of ``model`` to act with; :meth:`next_batch` then returns ``trajectories`` of
        ``rollout`` steps at a time. Sampler ``i`` seeds its envs from ``seed`` plus its first env's index."""
        self.batch = trajectories
        self.per_call = max(1, trajectories // len(self.group.actors))
        self.episodes = EpisodeTracker(self.num_envs, stats_avg)
        self._start_args = (self.ray.put(copy.deepcopy(model).cpu()), rollout, stats_avg)
        samplers = range(len(self.group.actors))
        self.ray.get([self._start(i, None if seed is None else seed + int(self.group.offsets[i])) for i in samplers])
        for i in samplers:
            self._take(i)

    def _start(self, i: int, seed: int | None) -> Any:
        """Sampler ``i``'s start call, with the policy :meth:`start` was given."""
        assert self._start_args is not None
        model_ref, rollout, stats_avg = self._start_args
        num_rows = self.group.infos[i].num_envs + 2 * self.per_call
        return self.group.actors[i].start.remote(model_ref, rollout, num_rows, seed, stats_avg)

    def publish(self, weights: Mapping[str, torch.Tensor], version: int, policy: int = 0) -> None:
        """Every sampler acts with ``weights`` (a model's ``state_dict``) of ``version`` once they arrive."""
        ref = self.ray.put({name: tensor.detach().cpu() for name, tensor in weights.items()})
        self._weights = (ref, version)
        self.group.broadcast("set_weights", ref, version)

    def next_batch(self) -> Trajectories:
        """The next ``trajectories`` finished trajectories, from whichever samplers shipped first."""
        while sum(len(t) for t in self._pending) < self.batch:
            if not self._in_flight:
                raise RuntimeError("PolicySamplers.start() first")
            done, _ = self.ray.wait(list(self._in_flight), num_returns=1, timeout=POLL_SECONDS)
            if done:  # (else: a pause for Ctrl-C)
                self._receive(done[0])
        batch = Trajectories.concatenate(self._pending)
        self.network_seconds = float(np.mean(self._pending_network))
        self._pending, self._pending_network = [], []
        if len(batch) > self.batch:  # the rest starts the next batch
            self._pending.append(batch.select(torch.arange(self.batch, len(batch))))
            self._pending_network.append(self.network_seconds)
            batch = batch.select(torch.arange(self.batch))
        return batch

    def stop(self) -> None:
        """Nothing runs in this process: the samplers stop when the env closes."""

    @property
    def timings(self) -> SamplerTimings:
        """Every sampler's seconds, summed."""
        return SamplerTimings(*(sum(getattr(t, f) for t in self._timings) for f in vars(SamplerTimings())))

    @property
    def queued(self) -> int:
        """Trajectories received and not yet in a batch."""
        return sum(len(t) for t in self._pending)

    def _take(self, i: int) -> None:
        call = self.group.actors[i].take.remote(self.per_call)
        record = self._in_flight[call] = _Call(i, time.monotonic())
        call.future().add_done_callback(record.arrive)  # (in a thread of Ray's, as soon as the reply is here)

    def _receive(self, call: Any) -> None:
        record = self._in_flight.pop(call)
        if record.died_of is not None:
            self._restarted(call, record)
            return
        i = record.sampler
        try:
            shipment: Shipment | None = self.ray.get(call)
        except self.ray.exceptions.RayActorError as error:
            self._lost(i, error)
            return
        if shipment is None:
            return
        self._take(i)
        offset = int(self.group.offsets[i])
        self.env_steps += shipment.env_steps
        self.episodes.extend([episode.moved(offset) for episode in shipment.episodes])
        self.restarts.extend(restart.moved(offset) for restart in shipment.restarts)
        self._timings[i] = shipment.timings
        self._pending.append(shipment.trajectories)
        arrived = record.arrived if record.arrived is not None else time.monotonic()
        self._pending_network.append(max(0.0, arrived - record.sent - shipment.seconds_in_call))

    def _lost(self, i: int, error: BaseException) -> None:
        """Sampler ``i`` died: the restart is counted, and the policy goes to the sampler Ray restarts (without
        waiting for it: the others go on meanwhile)."""
        ids = self.group.env_ids(i)
        self.restarts.append(Restart.of_worker(i, tuple(ids.tolist()), "died", None, error))
        self._in_flight[self._start(i, None)] = _Call(i, time.monotonic(), died_of=error)

    def _restarted(self, call: Any, record: _Call) -> None:
        """The start of a sampler that died has returned: once Ray restarted it, it acts with the newest weights."""
        i, exceptions = record.sampler, self.ray.exceptions
        try:
            self.ray.get(call)
        except exceptions.ActorUnavailableError:  # still restarting: ask again
            if time.monotonic() - record.sent > (self.group.start_timeout or float("inf")):
                raise
            self._in_flight[self._start(i, None)] = record
            return
        except exceptions.RayActorError as final:
            raise self.group.gone(i, record.died_of) from final
        if self._weights is not None:
            self.group.actors[i].set_weights.remote(*self._weights)
        self.restarted(i)
        self._take(i)
