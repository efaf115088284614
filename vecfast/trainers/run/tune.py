"""Auto-tuning of double-buffered sampling: measure this machine, then apply Sample Factory's condition.

A rollout worker steps its ``k`` envs in two alternating groups of ``k/2``: while the
policy acts for one group, the worker steps the other (``k/2`` env steps of ``t_env``
each). The worker never waits for actions when ``k/2 > ceil(t_inf / t_env)`` (Petrenko
et al., Sample Factory, 2020), ``t_inf`` being the time to act for a batch: one group
from every worker. On a GPU ``t_inf`` hardly depends on the batch; on a CPU it grows by
``t_inf_per_env`` per env, and once that growth alone outpaces ``t_env`` no ``k`` keeps
the workers busy (inference-bound). :func:`decide` takes the fewest envs per worker that
meet the condition (more only add memory and policy lag), one worker per available core;
:func:`tune` measures ``t_env`` with a real env and ``t_inf`` with the model the trainer
would build, on two batch sizes, on the trainer's device.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from vecfast.trainers import entry_defaults
from vecfast.trainers.algorithm.models import ActorCritic, as_obs_dict, obs_to_tensors
from vecfast.trainers.base.runtime import setup_torch
from vecfast.trainers.config import AUTO, TUNED_KEYS
from vecfast.trainers.registry import resolve
from vecfast.trainers.run.defaults import ConfigLayers

MAX_WORKERS = 64
MAX_ENVS_PER_WORKER = 64  # beyond this, memory (a simulator per env) costs more than waiting saves


@dataclass(frozen=True)
class TuneChoice:
    """A sampling layout and why: ``num_workers`` workers of ``num_envs_per_worker`` envs in two groups."""

    num_workers: int
    num_envs_per_worker: int
    condition_holds: bool  # k/2 > ceil(t_inf / t_env): workers never wait for actions
    reasons: tuple[str, ...]

    @property
    def envs_per_group(self) -> int:
        return self.num_envs_per_worker // 2

    @property
    def inference_batch(self) -> int:
        """Envs the policy worker acts for at once: one group of every worker (``recv``'s batch, half the envs)."""
        return self.num_workers * self.envs_per_group


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, which containers and ``taskset`` narrow)."""
    return len(os.sched_getaffinity(0))


def decide(
    t_env: float,
    t_inf: float,
    cores: int,
    t_inf_per_env: float = 0.0,
    max_workers: int = MAX_WORKERS,
    max_envs_per_worker: int = MAX_ENVS_PER_WORKER,
) -> TuneChoice:
    """The layout for env step time ``t_env`` on ``cores`` cores, in seconds.

    Acting for a batch of ``B`` envs takes ``t_inf + t_inf_per_env * B``.
    """
    if not (t_env > 0 and t_inf >= 0 and t_inf_per_env >= 0 and t_inf + t_inf_per_env > 0):
        raise ValueError(
            f"t_env must be > 0 and t_inf, t_inf_per_env >= 0 (not both 0), got {t_env, t_inf, t_inf_per_env}"
        )
    if cores < 1 or max_workers < 1 or max_envs_per_worker < 2:
        raise ValueError("cores and max_workers must be >= 1 and max_envs_per_worker >= 2")
    workers = min(cores, max_workers)
    most = max_envs_per_worker // 2  # envs per group

    def inference(half: int) -> float:
        return t_inf + t_inf_per_env * workers * half

    capped = f", at most {max_workers}" if cores > max_workers else ""
    reasons = [f"num_workers={workers}: one rollout worker per available core ({cores}{capped})"]
    half = next((h for h in range(1, most + 1) if h > math.ceil(inference(h) / t_env)), None)
    if half is not None:
        ratio = math.ceil(inference(half) / t_env)
        reasons.append(
            f"t_inf = {_duration(inference(half))} for a batch of {workers * half}: ceil(t_inf / t_env) = "
            f"ceil({_duration(inference(half))} / {_duration(t_env)}) = {ratio}, so k/2 = {half} is the fewest "
            f"envs per group with k/2 > {ratio}: a worker steps one group ({half} x {_duration(t_env)} = "
            f"{_duration(half * t_env)}) while the policy acts for the other"
        )
    elif workers * t_inf_per_env >= t_env:
        # Workers wait whatever k is; larger batches only spread the fixed cost: stop at 90% of the
        # rate the policy approaches with ever larger batches (B / t_inf(B) >= 0.9 / t_inf_per_env).
        half = min(most, max(1, math.ceil(9 * t_inf / (t_inf_per_env * workers))))
        reasons.append(
            f"inference-bound: acting costs {_duration(t_inf_per_env)} per env, {_duration(workers * t_inf_per_env)} "
            f"for one env of each of the {workers} workers, no less than t_env = {_duration(t_env)}: workers wait "
            f"for actions whatever k is; k/2 = {half} is the fewest envs per group with which the policy acts at "
            f"90% of its rate on unbounded batches (its fixed {_duration(t_inf)} spread over {workers * half} envs)"
        )
    else:
        half = most
        wait = _duration(max(0.0, inference(half) - half * t_env))
        reasons.append(
            f"t_inf = {_duration(inference(half))} for a batch of {workers * half}: k/2 > ceil(t_inf / t_env) needs "
            f"more than the maximum of {max_envs_per_worker} envs per worker, so k = {2 * half}: workers may wait "
            f"for actions, up to {wait} per group"
        )
    reasons.append(
        f"num_envs_per_worker={2 * half}: two groups of {half} per worker (double-buffered); "
        f"the policy acts on batches of {workers * half} envs, half of the {workers * 2 * half}"
    )
    return TuneChoice(workers, 2 * half, half > math.ceil(inference(half) / t_env), tuple(reasons))


@dataclass(frozen=True)
class Tuning:
    """What :func:`tune` measured and chose; times in seconds."""

    env_id: str
    cores: int
    device: str
    t_env: float
    env_steps: int  # timed to measure t_env
    t_inf: float  # acting for a batch takes t_inf + t_inf_per_env * batch
    t_inf_per_env: float
    inference_timings: tuple[tuple[int, float], ...]  # (batch, seconds per act) measured
    choice: TuneChoice

    def lines(self) -> list[str]:
        """The measurements and the reasoning, for a terminal."""
        c = self.choice
        timed = ", ".join(f"{_duration(t)} for {batch}" for batch, t in self.inference_timings)
        return [
            f"auto-tune {self.env_id}: {self.cores} cores available, policy on {self.device}",
            f"  t_env = {_duration(self.t_env)} per env step (one env, random actions, resets included;"
            f" {self.env_steps} steps timed)",
            f"  t_inf = {_duration(self.t_inf)} + {_duration(self.t_inf_per_env)} per env in the batch"
            f" (acting timed: {timed})",
            f"choice: num_workers={c.num_workers} num_envs_per_worker={c.num_envs_per_worker}"
            f" (two groups of {c.envs_per_group} per worker)",
            *(f"  - {reason}" for reason in c.reasons),
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tune(
    env_id: str,
    algo: str = entry_defaults.TUNE_ALGO,
    seconds: float = entry_defaults.TUNE_SECONDS,
    cores: int | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    layers: ConfigLayers | None = None,
    **overrides: Any,
) -> Tuning:
    """Measure ``env_id`` and the policy ``algo`` would train on this machine; choose the sampling layout.

    ``seconds``: how long env steps are timed, and acting (on the smallest and the largest
    batch the choice can give) as long again. ``cores``: default :func:`available_cores`.
    ``env_kwargs``: keyword arguments for ``gymnasium.make(env_id)``, as training will make it.
    ``overrides``: :class:`TrainConfig` keys that shape the model or its device, over ``layers`` (a run's config
    layers, as :func:`vecfast.train` resolved them; ``num_workers``/``num_envs_per_worker`` are ignored: they are
    what is chosen).
    Everything is validated before anything is measured.
    """

    recipe = resolve(algo)
    if not recipe.scheme_spec.double_buffered:
        raise ValueError(
            f"algorithm {algo!r} does not sample double-buffered, which auto-tuning chooses the layout of: "
            "give num_workers and num_envs_per_worker"
        )
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    cores = available_cores() if cores is None else cores
    model_layers = (layers or ConfigLayers(recipe, env_id)).with_user(**overrides).without(TUNED_KEYS)
    model_layers.config()  # bad keys or values raise before measuring
    env = gym.make(env_id, **(env_kwargs or {}))
    try:
        t_env, env_steps = time_env_step(env, seconds)
        observation_space, action_space = env.observation_space, env.action_space
    finally:
        env.close()
    cfg = model_layers.config(observation_space)
    device = setup_torch(cfg)
    model = ActorCritic(observation_space, action_space, cfg).to(device).requires_grad_(False)
    workers = min(cores, MAX_WORKERS)
    batches = (workers, workers * (MAX_ENVS_PER_WORKER // 2))  # one env per group, the most per group
    timings = tuple((batch, time_inference(model, observation_space, batch, seconds / 2)) for batch in batches)
    (small, t_small), (large, t_large) = timings
    per_env = max(0.0, (t_large - t_small) / (large - small))
    fixed = max(0.0, t_small - per_env * small)
    choice = decide(t_env, fixed, cores, per_env)
    return Tuning(env_id, cores, str(device), t_env, env_steps, fixed, per_env, timings, choice)


def time_env_step(env: gym.Env, seconds: float) -> tuple[float, int]:
    """Seconds per step of ``env`` with random actions, resetting finished episodes as a worker does."""
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(64)]  # sampled beforehand: a worker receives its actions
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while True:
        _, _, terminated, truncated, _ = env.step(actions[steps % len(actions)])
        if terminated or truncated:
            env.reset()
        steps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / steps, steps


@torch.no_grad()
def time_inference(model: ActorCritic, observation_space: spaces.Space, batch: int, seconds: float) -> float:
    """Seconds per act of ``model`` for ``batch`` random observations, as the policy worker acts.

    One act: the forward pass, sampling the actions and their log-probabilities, and the
    actions back on the host (which also waits for a GPU to finish).
    """
    device = next(model.parameters()).device
    obs_space = batch_space(observation_space, batch)
    obs_space.seed(0)
    obs = obs_to_tensors(as_obs_dict(obs_space.sample()), device)
    state = model.initial_state(batch, device)
    first = torch.zeros(batch, dtype=torch.bool, device=device)

    def act() -> np.ndarray:
        dist, _, _ = model.step(obs, state, first)
        actions = dist.sample()
        dist.log_prob(actions)
        return model.actor.to_env(actions)

    for _ in range(3):  # warm-up: allocator, oneDNN/cuDNN kernel choice
        act()
    passes, start = 0, time.perf_counter()
    while True:
        act()
        passes += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and passes >= 3:
            return elapsed / passes


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


__all__ = ["AUTO", "TuneChoice", "Tuning", "available_cores", "decide", "time_env_step", "time_inference", "tune"]
