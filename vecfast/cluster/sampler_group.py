"""A run's sampler actors on a Ray cluster: placed one per node before a second on any, restarted by Ray when their
process or node dies, and removed with the run. Both ways of acting share it: central inference
(:class:`~vecfast.cluster.remote_vector_env.RemoteVectorEnv`) and local inference
(:class:`~vecfast.cluster.policy_samplers.PolicySamplers`), each a :class:`SamplersVectorEnv`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from vecfast.cluster.connection import RayConnection
from vecfast.cluster.env_sampler import SamplerInfo
from vecfast.multiagent.slots import SlotLayout
from vecfast.vector.errors import WorkerDiedError
from vecfast.vector.restarts import Restart

POLL_SECONDS = 0.2  # how often a wait on the cluster checks for Ctrl-C


class SamplerGroup:
    """One actor of class ``actor_class`` per entry of ``constructor_args`` (its arguments), on the cluster at
    ``address`` (:class:`~vecfast.cluster.connection.RayConnection`), in a SPREAD placement group of ``num_cpus``
    per actor; :attr:`infos` are what each reported once built, :attr:`offsets` where each one's envs start in the
    run's env indices. ``max_concurrency``: calls an actor serves at once (its threads)."""

    def __init__(
        self,
        actor_class: type,
        constructor_args: Sequence[tuple[Any, ...]],
        address: str,
        *,
        num_cpus: float = 1.0,
        max_restarts: int = 10,
        max_concurrency: int = 1,
        start_timeout: float | None = 600.0,
    ) -> None:
        self.connection = RayConnection(address)
        self.ray = ray = self.connection.ray
        self.max_restarts, self.start_timeout = max_restarts, start_timeout
        self.actors: list[Any] = []
        self.placement: Any = None
        try:
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            bundles = [{"CPU": num_cpus} for _ in constructor_args]
            self.placement = placement_group(bundles, strategy="SPREAD")
            ready, _ = ray.wait([self.placement.ready()], timeout=start_timeout)
            if not ready:
                raise TimeoutError(
                    f"the Ray cluster could not place {len(bundles)} samplers of num_cpus={num_cpus} within "
                    f"{start_timeout} s (it has {ray.cluster_resources().get('CPU', 0):g} CPUs on "
                    f"{len(ray.nodes())} nodes): fewer samplers, or a smaller sampler_num_cpus"
                )
            remote = ray.remote(actor_class)
            options = {"num_cpus": num_cpus, "max_restarts": max_restarts, "max_task_retries": 0}
            if max_concurrency > 1:
                options["max_concurrency"] = max_concurrency
            for i, args in enumerate(constructor_args):
                strategy = PlacementGroupSchedulingStrategy(
                    placement_group=self.placement, placement_group_bundle_index=i
                )
                self.actors.append(remote.options(**options, scheduling_strategy=strategy).remote(*args))
            calls = [actor.info.remote() for actor in self.actors]
            self.infos: list[SamplerInfo] = ray.get(calls, timeout=start_timeout)
        except BaseException:
            self.close()
            raise
        self.offsets = np.cumsum([0] + [info.num_envs for info in self.infos])

    @property
    def num_envs(self) -> int:
        return int(self.offsets[-1])

    def env_ids(self, i: int) -> np.ndarray:
        """The run's env indices that sampler ``i`` owns."""
        return np.arange(self.offsets[i], self.offsets[i + 1])

    def gone(self, i: int, error: BaseException | None) -> WorkerDiedError:
        """The error of sampler ``i``, dead of ``error``, that Ray did not restart (past its max_restarts)."""
        ids = self.env_ids(i)
        return WorkerDiedError(
            f"sampler {i} (envs {ids[0]} to {ids[-1]}) died and Ray did not restart it "
            f"(sampler_max_restarts={self.max_restarts}): {error}"
        )

    def broadcast(self, method: str, *args: Any) -> None:
        """Call ``method`` on every sampler without waiting for the replies."""
        for actor in self.actors:
            getattr(actor, method).remote(*args)

    def close(self) -> None:
        """Close every sampler's envs, end the actors and their placement, and leave the cluster."""
        ray = self.ray
        calls = []
        for actor in self.actors:
            with contextlib.suppress(Exception):  # a sampler that is gone has nothing to close
                calls.append(actor.close.remote())
        if calls:
            ray.wait(calls, num_returns=len(calls), timeout=30)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self.placement is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.placement)
            self.placement = None
        self.connection.close()


class SamplersVectorEnv(VectorEnv):
    """What both ways of acting show of the samplers as one vector env: the envs' sizes, spaces and metadata (as
    the first sampler reported them), ``get_attr`` over every env in order, each sampler's ``step_timeout``, the
    :attr:`restarts` so far, and ``close``."""

    sampler_class: type  # the Ray actor each sampler is
    sampler_threads = 1  # calls a sampler serves at once

    def __init__(
        self,
        make_envs: Sequence[Callable[[], VectorEnv]],
        address: str,
        *,
        num_cpus: float = 1.0,
        max_restarts: int = 10,
        start_timeout: float | None = 600.0,
    ) -> None:
        """``len(make_envs)`` samplers, sampler ``i`` building its vector env with ``make_envs[i]`` on a node of the
        cluster at ``address`` (:class:`~vecfast.cluster.connection.RayConnection`), spread over the nodes (one per
        node before a second on any), ``num_cpus`` reserved for each; env indices run over the samplers in order."""
        self.group = group = SamplerGroup(
            self.sampler_class,
            [(make_env,) for make_env in make_envs],
            address,
            num_cpus=num_cpus,
            max_restarts=max_restarts,
            max_concurrency=self.sampler_threads,
            start_timeout=start_timeout,
        )
        self.ray = group.ray
        first = group.infos[0]
        self.num_envs = group.num_envs
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.observation_space = batch_space(first.single_observation_space, self.num_envs)
        self.action_space = batch_space(first.single_action_space, self.num_envs)
        self.metadata = dict(first.metadata)
        self.render_mode = None
        if first.slots is not None:  # a game's matches: sampler i's start at match offsets[i] / num_agents
            matches = sum(info.slots.num_matches for info in group.infos if info.slots is not None)
            self.slots = SlotLayout(matches, first.slots.possible_agents, in_turns=first.slots.in_turns)
        self.closed = False
        self.restarts: list[Restart] = []
        self._step_timeout: float | None = None

    def restarted(self, i: int) -> None:
        """Sampler ``i`` was restarted: it takes this env's settings again."""
        if self._step_timeout is not None:
            self.group.actors[i].set_step_timeout.remote(self._step_timeout)

    @property
    def step_timeout(self) -> float | None:
        """Each sampler's vector env's ``step_timeout`` (a restarted sampler gets it again)."""
        return self._step_timeout

    @step_timeout.setter
    def step_timeout(self, seconds: float | None) -> None:
        self._step_timeout = seconds
        self.group.broadcast("set_step_timeout", seconds)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env, in env order."""
        per_sampler, errors = [], []
        for call in [actor.get_attr.remote(name) for actor in self.group.actors]:
            try:  # every reply read, so that Ray reports no error as unhandled
                per_sampler.append(self.ray.get(call))
            except Exception as error:  # the envs' own error (AttributeError for a name they lack)
                errors.append(error)
        if errors:
            raise errors[0]
        return tuple(value for values in per_sampler for value in values)

    def close(self, **kwargs: Any) -> None:
        if getattr(self, "closed", True):
            return
        self.group.close()
        self.closed = True
