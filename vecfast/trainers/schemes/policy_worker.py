"""APPO's sampler thread: rollout workers step envs, one policy-worker thread runs batched inference for them all.

The rollout workers are the vector env's processes: they only step envs, in two
alternating groups per worker (double-buffered sampling), and hold no copy of the policy.
The policy worker (a thread of the training process) runs :class:`~vecfast.trainers.sampling.sampler.Sampler` on
whichever envs finish first (``recv``), acting with its own copy of the policy (and, in self-play, frozen
opponents); a finished trajectory goes to
the learner's queue. The learner publishes new weights into that copy after each gradient step
(:meth:`PolicyWorker.publish`), so the next batch already acts with them. A vector env without
``send``/``recv`` (or behind a wrapper that does not forward them) is stepped whole instead, with a warning
that names the cause (:func:`~vecfast.trainers.sampling.sampler.async_api`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import torch
from gymnasium.vector import VectorEnv

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.sampling.episodes import EndedEpisode
from vecfast.trainers.sampling.sampler import PolicyMapping, Sampler, async_api, only_policy


class PolicyWorker(threading.Thread):
    """The sampler's thread: ``recv``, act, ``send``, until told to stop; an error is kept for the learner."""

    def __init__(
        self,
        env: VectorEnv,
        policies: ActorCritic | Sequence[ActorCritic],
        rollout: int,
        num_rows: int,
        seed: int | None,
        stats_avg: int,
        *,
        mapping: PolicyMapping = only_policy,
        on_episode_end: Callable[[EndedEpisode, int], None] = lambda episode, number: None,
    ) -> None:
        """``policies``: the models the sampler acts with, used as they are (the learner's acting copy first:
        :meth:`publish` copies new weights into it)."""
        super().__init__(name="vecfast-policy-worker", daemon=True)
        self.stop_event = threading.Event()
        self.sampler = Sampler(
            async_api(env),
            policies,
            rollout,
            num_rows,
            mapping=mapping,
            on_episode_end=on_episode_end,
            seed=seed,
            stats_avg=stats_avg,
            should_stop=self.stop_event.is_set,
        )
        self.error: BaseException | None = None

    def publish(self, weights: Mapping[str, torch.Tensor], version: int, policy: int = 0) -> None:
        """Copy a learner's weights (its model's ``state_dict``, normalisation statistics included) into the
        sampler's acting model ``policy``."""
        sampler = self.sampler
        acting = sampler.policies[policy].state_dict().values()
        with sampler.lock, torch.no_grad():
            for dst, src in zip(acting, weights.values(), strict=True):
                dst.copy_(src, non_blocking=True)
            sampler.versions[policy] = version

    def run(self) -> None:
        try:
            received = self.sampler.reset()
            while True:
                self.sampler.step(received)
                if self.stop_event.is_set():
                    return
                received = self.sampler.observe()
        except BaseException as e:  # handed to the learner, which raises it
            self.error = e
