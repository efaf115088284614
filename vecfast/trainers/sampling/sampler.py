"""The one sampler every scheme runs: acts on a vector env through ``send``/``recv`` and writes trajectories.

Each env has its own clock: the trajectory row it fills, the step within it, its recurrent state, and
where its episodes begin and end (:class:`~vecfast.trainers.sampling.episodes.EpisodeBoundaries`, the rule
:func:`vecfast.evaluate` follows too: under gymnasium's NEXT_STEP autoreset the step after an episode's end
only resets the env, stored with ``valid`` False, and the step after it starts an episode, ``first``). A row
holds ``rollout`` steps and the observation after them, whose value bootstraps the last step; a complete row goes to
:attr:`Sampler.full`, and the env takes a fresh one from :attr:`Sampler.free` (waiting while there is none,
which bounds how far sampling runs ahead of learning).

Several policies can share the envs (self-play, populations): each env's episode is played by one of them,
chosen by ``mapping(env, episode)`` when the episode starts (RLlib's ``policy_mapping_fn``), and every step
runs one inference batch per policy. A row records which policy took each step (``policy_id``), so that
each policy learns from its own steps only.

The schemes differ only in when they call it. Synchronous: :meth:`Sampler.step` ``rollout`` times, then
:meth:`Sampler.end_trajectories` bootstraps every env's row with the current policy, the learner learns from
the full rows and frees them, and the next step acts with the new policy. Asynchronous: a thread calls
:meth:`Sampler.step` on whichever envs ``recv`` returns, and a row completes inside it, bootstrapping from
the same inference that chooses the next action. A vector env without ``send``/``recv`` is stepped whole
(:class:`StepAsRecv`).
"""

from __future__ import annotations

import dataclasses
import inspect
import queue
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from vecfast.trainers.algorithm.models import ActorCritic, as_obs_dict, obs_to_tensors
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.sampling.episodes import EndedEpisode, EpisodeBoundaries, EpisodeTracker
from vecfast.wrappers.base import has_async_api

POLL_SECONDS = 0.1  # how often a blocked thread checks whether it must stop


class StepAsRecv:
    """``async_reset``/``send``/``recv`` for a vector env that only has ``reset``/``step``: all envs every time.
    ``send`` keeps the actions and ``recv`` steps, so that the time the envs take is spent waiting in ``recv``, as
    with envs that step on their own."""

    def __init__(self, env: VectorEnv) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self._result: tuple[Any, ...] | None = None
        self._actions: Any = None
        self._ids = np.arange(env.num_envs)

    def async_reset(self, seed: int | None = None) -> None:
        obs, info = self.env.reset(seed=seed)
        zeros = np.zeros(self.num_envs, dtype=bool)
        self._result = (obs, np.zeros(self.num_envs), zeros, zeros, info)

    def send(self, actions: Any, env_ids: np.ndarray) -> None:
        self._actions = actions

    def recv(self) -> tuple[Any, ...]:
        if self._actions is not None:
            actions, self._actions, self._result = self._actions, None, None
            self._result = self.env.step(actions)
        if self._result is None:  # never an old step's result again
            raise RuntimeError("recv() after a step that failed or was interrupted: reset first")
        obs, rewards, terminated, truncated, info = self._result
        return obs, rewards, terminated, truncated, {**info, "env_id": self._ids}


def async_api(env: VectorEnv) -> Any:
    """The env itself if it can ``send``/``recv``, else :class:`StepAsRecv`, with a warning that says why.

    vecfast's AsyncSharedMemVectorEnv can, also through vecfast's wrappers; other
    wrappers (gymnasium's) do not forward the API, and other vector envs lack it.
    """
    if has_async_api(env):
        return env
    warnings.warn(
        f"APPO samples with synchronous steps of all {env.num_envs} envs at once, without double buffering "
        f"(about half as fast): {_async_api_missing(env)}. vecfast's AsyncSharedMemVectorEnv has "
        "send/recv/async_reset, and the wrappers in vecfast.wrappers forward them.",
        stacklevel=2,
    )
    return StepAsRecv(env)


def _async_api_missing(env: VectorEnv) -> str:
    """What stops the async API: the innermost layer of ``env``'s wrapper stack that lacks it."""
    layers = [env]
    while isinstance(layers[-1], VectorWrapper):
        layers.append(layers[-1].env)
    culprit = next(layer for layer in reversed(layers) if not has_async_api(layer))
    name = f"{type(culprit).__module__}.{type(culprit).__qualname__}"
    if isinstance(culprit, VectorWrapper):
        return f"the wrapper {name} does not forward send/recv/async_reset"
    return f"the vector env {name} has no send/recv/async_reset"


@dataclass(frozen=True)
class Received:
    """What one ``recv`` returned, once its finished step is recorded: the envs and their new observations."""

    ids_np: np.ndarray
    ids: torch.Tensor
    obs: dict[str, torch.Tensor]

    def rows(self, mask: torch.Tensor) -> Received:
        """The envs that ``mask`` (one entry per env received) selects."""
        return Received(self.ids_np[mask.cpu().numpy()], self.ids[mask], {k: v[mask] for k, v in self.obs.items()})


@dataclass(frozen=True)
class Acted:
    """The policies' outputs for one batch of envs: actions (None when only valuing), their log-probabilities,
    values, next recurrent states (with the actions recorded), and which policy and version produced each row."""

    actions: torch.Tensor | None
    log_probs: torch.Tensor | None
    values: torch.Tensor
    next_state: torch.Tensor
    policy_id: torch.Tensor
    version: torch.Tensor


PolicyMapping = Callable[[int, int], int]
"""(env index, episode number of that env, from 0) -> the index of the policy that plays the episode."""


def only_policy(env: int, episode: int) -> int:
    """Every episode is played by policy 0."""
    return 0


@dataclass
class SamplerTimings:
    """Seconds the sampler spent, cumulative: waiting for envs, acting (inference and bookkeeping), waiting
    for a free row."""

    waiting_envs: float = 0.0
    inference: float = 0.0
    waiting_rows: float = 0.0


def _scattered(parts: list[tuple[torch.Tensor, Acted]], size: int) -> Acted:
    """One :class:`Acted` of ``size`` rows from each policy's rows."""

    def gather(field: str) -> torch.Tensor | None:
        pieces = [(rows, getattr(part, field)) for rows, part in parts]
        if pieces[0][1] is None:
            return None
        like = pieces[0][1]
        out = like.new_empty((size, *like.shape[1:]))
        for rows, piece in pieces:
            out[rows] = piece
        return out

    return Acted(**{f.name: gather(f.name) for f in dataclasses.fields(Acted)})


class Sampler:
    """Acts with ``policies`` (one model or several of one architecture) on ``env`` (with ``send``/``recv``:
    :func:`async_api` or :class:`StepAsRecv`) and writes every step into ``num_rows`` trajectory rows of
    ``rollout`` steps. ``mapping`` chooses each episode's policy (default: policy 0); ``on_episode_end`` hears
    of every finished episode with its number (of its env, from 0), e.g. to rate the policies that played it.

    ``lock`` is held while acting, so a learner can copy new weights into a policy between two batches
    (:attr:`versions` says which weights acted). ``should_stop``: polled while waiting for a free row.
    """

    def __init__(
        self,
        env: Any,
        policies: ActorCritic | Sequence[ActorCritic],
        rollout: int,
        num_rows: int,
        *,
        mapping: PolicyMapping = only_policy,
        on_episode_end: Callable[[EndedEpisode, int], None] = lambda episode, number: None,
        seed: int | None = None,
        stats_avg: int = 100,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.policies = [policies] if isinstance(policies, ActorCritic) else list(policies)
        self.env, self.rollout, self.seed, self.mapping = env, rollout, seed, mapping
        self.on_episode_end = on_episode_end
        self.num_envs = n = env.num_envs
        model = self.policies[0]
        self.device = dev = next(model.parameters()).device
        self.should_stop = should_stop
        self.lock = threading.Lock()
        self.versions = [0] * len(self.policies)  # of the weights each policy acts with
        self.storage = Trajectories.allocate(model, num_rows, rollout, dev)
        self.free: queue.Queue[int] = queue.Queue()
        for i in range(num_rows):
            self.free.put(i)
        self.full: queue.Queue[int] = queue.Queue()
        self.episodes = EpisodeTracker(n, stats_avg)
        self.env_steps = 0  # transitions recorded, reset steps included (what "env steps" count everywhere)
        self.timings = SamplerTimings()
        # the per-env clock
        self.row = torch.full((n,), -1, dtype=torch.long, device=dev)  # -1: needs a fresh row
        self.step_in_row = torch.zeros(n, dtype=torch.long, device=dev)  # where the env's next observation goes
        self.state = model.initial_state(n, dev)
        self.boundaries = EpisodeBoundaries(n, device=dev)  # the trainers' envs autoreset on the next step
        # the next observation starts an episode; the step the env takes next is a transition (the same tensors)
        self.first, self.valid = self.boundaries.first, self.boundaries.valid
        self.stepped = np.zeros(n, dtype=bool)  # the env has taken a step since the reset
        self.policy_id = torch.zeros(n, dtype=torch.long, device=dev)  # of the env's current episode
        self.episodes_started = np.zeros(n, dtype=np.int64)

    def reset(self) -> Received:
        """Reset every env (seeded with ``seed``, where the env's ``async_reset`` takes one: EnvPool's envs are
        seeded when made) and return the first observations."""
        if "seed" in inspect.signature(self.env.async_reset).parameters:
            self.env.async_reset(seed=self.seed)
        else:
            self.env.async_reset()
        self._choose_policies(np.arange(self.num_envs))
        return self.observe()

    def observe(self) -> Received:
        """``recv`` the next envs to finish a step, record that step, and return their new observations."""
        wait_start = time.perf_counter()
        obs, rewards, terminated, truncated, info = self.env.recv()
        self.timings.waiting_envs += time.perf_counter() - wait_start
        ids_np = np.asarray(info["env_id"])
        dev, s = self.device, self.storage
        ids = torch.from_numpy(ids_np).to(dev)
        had_np = self.stepped[ids_np]  # none right after the reset
        if had_np.any():
            had = torch.from_numpy(had_np).to(dev)
            prev = ids[had]
            rows, cols = self.row[prev], self.step_in_row[prev] - 1
            done_np = terminated | truncated
            done = torch.from_numpy(done_np).to(dev)[had]
            s.rewards[rows, cols] = torch.as_tensor(rewards, dtype=torch.float32, device=dev)[had]
            s.terminated[rows, cols] = torch.from_numpy(terminated).to(dev)[had]
            s.done[rows, cols] = done
            valid = self.valid[prev]
            valid_np = valid.cpu().numpy()
            ended = self.episodes.record(
                ids_np[had_np], rewards[had_np], done_np[had_np], valid_np, info, np.flatnonzero(had_np)
            )
            for episode in ended:
                played = dataclasses.replace(episode, policy=int(self.policy_id[episode.env]))
                self.on_episode_end(played, int(self.episodes_started[episode.env]) - 1)
            self.boundaries.stepped(prev, valid, done)
            self.env_steps += len(prev)
            self._choose_policies(ids_np[had_np][~valid_np])
        return Received(ids_np, ids, obs_to_tensors(as_obs_dict(obs), dev))

    def step(self, received: Received) -> None:
        """Act on ``received``'s observations, write them into the envs' rows, and ``send`` the actions. A row
        that holds ``rollout`` steps takes this observation as its bootstrap and goes to :attr:`full`."""
        start = time.perf_counter()
        row_wait_before = self.timings.waiting_rows
        ids = received.ids
        acted = self._act(received, sample=True)
        complete = self.step_in_row[ids] == self.rollout
        if complete.any():
            self._complete(ids[complete], {k: v[complete] for k, v in received.obs.items()}, acted.values[complete])
        if not self._give_rows(ids):
            return
        rows, cols = self.row[ids], self.step_in_row[ids]
        self._write_observation(rows, cols, received.obs, self.first[ids], acted.values)
        s = self.storage
        s.actions[rows, cols] = acted.actions
        s.log_probs[rows, cols] = acted.log_probs
        s.valid[rows, cols] = self.valid[ids]
        s.policy_version[rows, cols] = acted.version
        s.policy_id[rows, cols] = acted.policy_id
        self.state[ids] = acted.next_state
        self.step_in_row[ids] += 1
        self.stepped[received.ids_np] = True
        self.timings.inference += time.perf_counter() - start - (self.timings.waiting_rows - row_wait_before)
        self.env.send(self.policies[0].actor.to_env(acted.actions), received.ids_np)

    def end_trajectories(self, received: Received) -> None:
        """End every row of ``received``'s envs here, however many steps it holds, bootstrapping from these
        observations with the current policies; the next :meth:`step` acts on them in fresh rows."""
        self._complete(received.ids, received.obs, self._act(received, sample=False).values)

    def take_full(self, count: int) -> list[int] | None:
        """``count`` complete rows, in the order they completed (None if told to stop while waiting)."""
        taken: list[int] = []
        while len(taken) < count:
            try:
                taken.append(self.full.get(timeout=POLL_SECONDS))
            except queue.Empty:
                if self.should_stop():
                    return None
        return taken

    def release(self, rows: list[int]) -> None:
        """Hand learned-from rows back for filling."""
        for i in rows:
            self.free.put(i)

    def _act(self, received: Received, sample: bool) -> Acted:
        """Every policy's batch of ``received``'s envs through that policy: one inference call per policy."""
        ids, obs = received.ids, received.obs
        policy_id = self.policy_id[ids]
        state, first = self.state[ids], self.first[ids]
        parts: list[tuple[torch.Tensor, Acted]] = []
        with self.lock, torch.no_grad():
            for p in policy_id.unique().tolist() if len(self.policies) > 1 else [0]:
                rows = (policy_id == p).nonzero().squeeze(1)
                whole = len(rows) == len(ids)  # one policy for the batch: no copies
                model = self.policies[p]
                mine = obs if whole else {k: v[rows] for k, v in obs.items()}
                dist, value, next_state = model.step(
                    mine, state if whole else state[rows], first if whole else first[rows]
                )
                actions = dist.sample() if sample else None
                log_probs = dist.log_prob(actions) if sample else None
                if sample:
                    next_state = model.with_action(next_state, actions)
                version = torch.full_like(rows, self.versions[p])
                part = Acted(actions, log_probs, value, next_state, torch.full_like(rows, p), version)
                if whole:
                    return part
                parts.append((rows, part))
        return _scattered(parts, len(ids))

    def _choose_policies(self, envs: np.ndarray) -> None:
        """The policy of each of ``envs``' episodes, which start with their next observation."""
        for env in envs.tolist():
            self.policy_id[env] = self.mapping(env, int(self.episodes_started[env]))
            self.episodes_started[env] += 1

    def _complete(self, envs: torch.Tensor, obs: dict[str, torch.Tensor], value: torch.Tensor) -> None:
        self._write_observation(self.row[envs], self.step_in_row[envs], obs, self.first[envs], value)
        for i in self.row[envs].tolist():
            self.full.put(i)
        self.row[envs], self.step_in_row[envs] = -1, 0

    def _give_rows(self, ids: torch.Tensor) -> bool:
        """A fresh row for each of ``ids`` that needs one, starting from its current recurrent state (False if
        told to stop while waiting)."""
        envs = ids[self.row[ids] < 0]
        if not len(envs):
            return True
        start, taken = time.perf_counter(), []
        while len(taken) < len(envs):
            try:
                taken.append(self.free.get(timeout=POLL_SECONDS))
            except queue.Empty:
                if self.should_stop():
                    return False
        self.timings.waiting_rows += time.perf_counter() - start
        fresh = torch.tensor(taken, device=self.device)
        self.row[envs] = fresh
        self.storage.initial_state[fresh] = self.state[envs]
        return True

    def _write_observation(
        self,
        rows: torch.Tensor,
        cols: torch.Tensor,
        obs: dict[str, torch.Tensor],
        first: torch.Tensor,
        value: torch.Tensor,
    ) -> None:
        for key, o in obs.items():
            stored = self.storage.obs[key]
            stored[rows, cols] = o.to(stored.dtype)  # int8 board games are stored as float32
        self.storage.first[rows, cols] = first
        self.storage.values[rows, cols] = value
