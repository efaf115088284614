"""The two pluggable components of a trainer: the algorithm (how batches change the model) and the scheme
(how batches are collected and learned from: synchronously, asynchronously, across processes).

Any algorithm runs under any scheme (the composition of the PyTorch RL-experimentation paper):
a scheme builds the model, hands it to the algorithm's factory, feeds it batches of
:class:`~vecfast.trainers.algorithm.trajectories.Trajectories` and reports
:class:`~vecfast.trainers.base.metrics.IterationMetrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # names for the annotations only: every layer imports the protocols, which import none
    import numpy as np
    import torch
    from gymnasium.vector import VectorEnv

    from vecfast.trainers.algorithm.models import ActorCritic
    from vecfast.trainers.algorithm.trajectories import Trajectories
    from vecfast.trainers.base.metrics import IterationMetrics
    from vecfast.trainers.config import TrainConfig
    from vecfast.trainers.sampling.episodes import EpisodeTracker
    from vecfast.trainers.sampling.sampler import SamplerTimings


class Algorithm(Protocol):
    """A learning rule, built by ``factory(model, cfg)``.

    ``model`` is what to learn with: it has :class:`ActorCritic`'s methods (in a distributed run
    it is a wrapper whose ``evaluate`` averages gradients over the ranks, so call
    ``model.evaluate`` rather than the model's modules directly). ``version`` counts gradient
    steps: schemes compare it with the version that acted to measure the policy lag.
    """

    version: int

    def learn(
        self, batch: Trajectories, progress: float, *, on_policy: bool, after_step: Callable[[], None]
    ) -> dict[str, float]:
        """Learn from ``batch`` (``progress``: the share of training done, in [0, 1]); returns loss terms by name.

        ``on_policy``: the policy that acted is the one learning (synchronous schemes); else the
        data may be some gradient steps old (the asynchronous scheme). ``after_step`` must run
        after every gradient step (the asynchronous scheme publishes the new weights there).
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything but the model (which the scheme saves): optimiser state, counters."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


AlgorithmFactory = Callable[["ActorCritic", "TrainConfig"], "Algorithm"]


class Trainer(Protocol):
    """What :func:`vecfast.train` drives: a scheme running an algorithm over a vector env.

    ``iterations()`` trains for ever, yielding an :class:`IterationMetrics` after each
    iteration; the caller stops when it has enough, then calls ``close()`` (which must not
    close the env). ``state_dict()`` is the checkpoint (``model``, ``env_steps`` and the
    rest), ``load_state_dict`` resumes from it.
    """

    model: ActorCritic

    def iterations(self) -> Iterator[IterationMetrics]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class BatchSource(Protocol):
    """Where the asynchronous scheme's batches come from: a policy-worker thread on this machine's envs, or samplers
    on the nodes of a cluster that act with their own copy of the policy. The learner publishes its weights to it
    after every gradient step."""

    env_steps: int  # transitions sampled so far (settable: a resumed run continues its count)
    episodes: EpisodeTracker  # the finished episodes' statistics
    episodes_started: np.ndarray | None  # per env, where the acting plan numbers episodes in this process
    network_seconds: float | None  # the last batch's mean time between a sampler and the learner (None: no network)

    @property
    def timings(self) -> SamplerTimings: ...

    @property
    def queued(self) -> int:
        """Finished trajectories waiting for a batch."""
        ...

    def publish(self, weights: Mapping[str, torch.Tensor], version: int, policy: int = 0) -> None: ...

    def next_batch(self) -> Trajectories: ...

    def stop(self) -> None: ...


@runtime_checkable
class RemoteSampling(Protocol):
    """A vector env whose envs are stepped by samplers that act themselves (local inference on a cluster's nodes):
    :meth:`start` gives them the policy, and it is then the scheme's :class:`BatchSource`."""

    def start(self, model: ActorCritic, rollout: int, trajectories: int, seed: int | None, stats_avg: int) -> None: ...

    def next_batch(self) -> Trajectories: ...


# (env, algorithm factory, config, total_env_steps) -> Trainer
SchemeFactory = Callable[["VectorEnv", AlgorithmFactory, "TrainConfig", int], "Trainer"]
