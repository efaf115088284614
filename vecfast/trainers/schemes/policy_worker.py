"""APPO's sampler: rollout workers step envs, one policy-worker thread runs batched inference for them all.

The rollout workers are the vector env's processes: they only step envs, in two
alternating groups per worker (double-buffered sampling), and hold no copy of the policy.
The policy worker (a thread of the training process) receives the first half of the envs
to finish (``recv``), runs the policy on that batch, sends their actions (``send``) and
writes every step into trajectory slots; a finished trajectory goes to the learner's
queue. The learner publishes new weights into the policy worker's model after each
gradient step (:meth:`PolicyWorker.publish`), so the next batch already acts with them.
A vector env without ``send``/``recv`` (or behind a wrapper that does not forward them)
is stepped whole instead (:class:`StepAsRecv`), with a warning that names the cause.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
import warnings
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from vecfast.trainers.episodes import EpisodeTracker
from vecfast.trainers.models import ActorCritic, as_obs_dict, obs_to_tensors
from vecfast.trainers.storage import Trajectories
from vecfast.wrappers.base import has_async_api

POLL_SECONDS = 0.1  # how often a blocked thread checks whether it must stop


class StepAsRecv:
    """``async_reset``/``send``/``recv`` for a vector env that only has ``reset``/``step``: all envs every time."""

    def __init__(self, env: VectorEnv) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self._result: tuple[Any, ...] | None = None
        self._ids = np.arange(env.num_envs)

    def async_reset(self, seed: int | None = None) -> None:
        obs, info = self.env.reset(seed=seed)
        zeros = np.zeros(self.num_envs, dtype=bool)
        self._result = (obs, np.zeros(self.num_envs), zeros, zeros, info)

    def send(self, actions: Any, env_ids: np.ndarray) -> None:
        self._result = self.env.step(actions)

    def recv(self) -> tuple[Any, ...]:
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


class PolicyWorker(threading.Thread):
    """Runs inference for the vector env's workers and fills trajectory slots.

    Slots cycle: ``free`` -> filled by one env for ``rollout`` steps -> ``full`` (the
    learner's batcher takes them, copies them out and frees them). With no free slot the
    policy worker waits, which bounds how far sampling runs ahead of learning.
    """

    def __init__(
        self, env: VectorEnv, model: ActorCritic, rollout: int, num_slots: int, seed: int | None, stats_avg: int
    ) -> None:
        super().__init__(name="vecfast-policy-worker", daemon=True)
        self.env = async_api(env)
        self.num_envs = env.num_envs
        self.seed = seed
        self.device = next(model.parameters()).device
        self.model = copy.deepcopy(model).requires_grad_(False)
        self.lock = threading.Lock()  # held while acting and while new weights are copied in
        self.version = 0  # of the weights in self.model
        self.rollout = rollout
        self.slots = Trajectories.allocate(model, num_slots, rollout, self.device)
        self.free: queue.Queue[int] = queue.Queue()
        for i in range(num_slots):
            self.free.put(i)
        self.full: queue.Queue[int] = queue.Queue()
        self.episodes = EpisodeTracker(self.num_envs, stats_avg)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.env_steps = 0
        self.time_waiting_envs = 0.0
        self.time_inference = 0.0
        self.time_waiting_slots = 0.0

    def publish(self, model: ActorCritic, version: int) -> None:
        """Copy the learner's weights (and normalisation statistics) into the acting model."""
        with self.lock, torch.no_grad():
            for dst, src in zip(self.model.state_dict().values(), model.state_dict().values(), strict=True):
                dst.copy_(src, non_blocking=True)
            self.version = version

    def run(self) -> None:
        try:
            self._sample()
        except BaseException as e:  # handed to the learner, which raises it
            self.error = e

    def _take_free_slots(self, count: int) -> torch.Tensor | None:
        taken = []
        start = time.perf_counter()
        while len(taken) < count:
            try:
                taken.append(self.free.get(timeout=POLL_SECONDS))
            except queue.Empty:
                if self.stop_event.is_set():
                    return None
        self.time_waiting_slots += time.perf_counter() - start
        return torch.tensor(taken, device=self.device)

    def _sample(self) -> None:
        n, s, dev = self.num_envs, self.slots, self.device
        slot = self._take_free_slots(n)
        if slot is None:
            return
        step = torch.zeros(n, dtype=torch.long, device=dev)  # where each env's next observation goes
        state = self.model.initial_state(n, dev)
        first = torch.ones(n, dtype=torch.bool, device=dev)
        valid = torch.ones(n, dtype=torch.bool, device=dev)  # of the step each env takes next
        stepped = np.zeros(n, dtype=bool)
        s.initial_state[slot] = state
        self.env.async_reset(seed=self.seed)
        while not self.stop_event.is_set():
            wait_start = time.perf_counter()
            obs, rewards, terminated, truncated, info = self.env.recv()
            infer_start = time.perf_counter()
            self.time_waiting_envs += infer_start - wait_start
            slot_wait_before = self.time_waiting_slots
            ids_np = np.asarray(info["env_id"])
            ids = torch.from_numpy(ids_np).to(dev)
            # 1. the step these envs just finished (none right after the reset)
            had = torch.from_numpy(stepped[ids_np]).to(dev)
            prev = ids[had]
            if len(prev):
                rows, cols = slot[prev], step[prev] - 1
                done = torch.from_numpy(terminated | truncated).to(dev)[had]
                s.rewards[rows, cols] = torch.as_tensor(rewards, dtype=torch.float32, device=dev)[had]
                s.terminated[rows, cols] = torch.from_numpy(terminated).to(dev)[had]
                s.done[rows, cols] = done
                self.episodes.record(
                    ids_np[stepped[ids_np]],
                    rewards[stepped[ids_np]],
                    (terminated | truncated)[stepped[ids_np]],
                    valid[prev].cpu().numpy(),
                    info,
                    np.flatnonzero(stepped[ids_np]),
                )
                first[prev] = ~valid[prev]  # the step after a reset step starts an episode
                valid[prev] = ~done  # the step after an episode end only resets the env
                self.env_steps += len(prev)
            # 2. act on the new observations
            obs_t = obs_to_tensors(as_obs_dict(obs), dev)
            with self.lock, torch.no_grad():
                dist, value, new_state = self.model.step(obs_t, state[ids], first[ids])
                actions = dist.sample()
                log_probs = dist.log_prob(actions)
                version = self.version
            rows, cols = slot[ids], step[ids]
            self._write_observation(rows, cols, obs_t, first[ids], value)
            # 3. envs whose trajectory is complete (this observation was its bootstrap) get a new slot
            complete = cols == self.rollout
            if complete.any():
                for i in rows[complete].tolist():
                    self.full.put(i)
                envs = ids[complete]
                fresh = self._take_free_slots(len(envs))
                if fresh is None:
                    return
                slot[envs] = fresh
                step[envs] = 0
                s.initial_state[fresh] = state[envs]
                obs_c = {k: v[complete] for k, v in obs_t.items()}
                self._write_observation(fresh, step[envs], obs_c, first[envs], value[complete])
                rows, cols = slot[ids], step[ids]
            s.actions[rows, cols] = actions
            s.log_probs[rows, cols] = log_probs
            s.valid[rows, cols] = valid[ids]
            s.policy_version[rows, cols] = version
            state[ids] = self.model.with_action(new_state, actions)
            step[ids] += 1
            stepped[ids_np] = True
            slot_wait = self.time_waiting_slots - slot_wait_before
            self.time_inference += time.perf_counter() - infer_start - slot_wait  # acting and bookkeeping
            self.env.send(self.model.actor.to_env(actions), ids_np)

    def _write_observation(
        self,
        rows: torch.Tensor,
        cols: torch.Tensor,
        obs: dict[str, torch.Tensor],
        first: torch.Tensor,
        value: torch.Tensor,
    ) -> None:
        for key, o in obs.items():
            self.slots.obs[key][rows, cols] = o
        self.slots.first[rows, cols] = first
        self.slots.values[rows, cols] = value
