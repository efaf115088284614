"""``vecfast.train()``: resolve the run once (:mod:`vecfast.trainers.run.run_spec`), then decide where it runs: in
this process (:func:`vecfast.trainers.run.runner.run`), as this rank of a distributed run that torchrun or srun
started, or in ranks that this call launches on this machine.

A distributed scheme's launcher (``train(..., algo="ddppo")`` here, or torchrun whose ranks each call ``train``)
starts ranks that each run the spec: rank 0 writes the run directory, all ranks stop together
(:class:`vecfast.trainers.run.loop.StopConsensus`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from vecfast import chatter
from vecfast.trainers import entry_defaults
from vecfast.trainers.base.runtime import resolve_device
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.registry import resolve
from vecfast.trainers.run.launch import (
    RankInfo,
    init_process_group,
    launch_local,
    leave_process_group,
    rank_from_environment,
)
from vecfast.trainers.run.policies import TrainResult
from vecfast.trainers.run.run_spec import RunSpec, resolve_run, train_arguments
from vecfast.trainers.run.runner import run
from vecfast.trainers.run.tune import available_cores
from vecfast.vector.process_cleanup import watch_owner


def train(
    env: str | Callable[[], VectorEnv] | VectorEnv,
    algo: str = entry_defaults.ALGO,
    total_env_steps: int = entry_defaults.TOTAL_ENV_STEPS,
    run_dir: str | os.PathLike | None = None,
    live: bool = False,
    resume: bool = False,
    *,
    scheme: str | None = None,
    num_processes: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    num_envs: int | None = None,
    policy_mapping: Callable[[Any, Any], int] | None = None,
    **overrides: Any,
) -> TrainResult:
    """Train ``algo`` on ``env`` for ``total_env_steps`` env steps (transitions), one line.

    ``env``: a registered gymnasium id (vecfast builds the env's batched ``vector_entry_point``
    where it has one, else an AsyncSharedMemVectorEnv of ``num_workers * num_envs_per_worker``
    envs, double-buffered for the asynchronous scheme), a function that returns a VectorEnv,
    or a VectorEnv (which is left open). A PettingZoo env (``pettingzoo.classic.connect_four_v3``,
    ``vecfast.envs.doom.doom_duel_v0``: the module, an env, or a function making one) trains on
    ``num_workers * num_envs_per_worker`` matches as one vector env of agent slots
    (:mod:`vecfast.multiagent.from_pettingzoo`); under every scheme the learner plays itself and its past
    snapshots (:mod:`vecfast.selfplay.league`; ``opponent_seats=0``: itself only), and ``metrics.jsonl`` holds its
    Elo (the acting plan: :func:`vecfast.selfplay.plan_for`). ``algo``: a registered algorithm (``"ppo"``) run under
    ``scheme`` (``"sync"``, the default, ``"async"`` or ``"distributed"``), or a pair's name:
    ``"appo"`` (PPO, async) or ``"ddppo"`` (PPO, distributed). ``overrides``: any
    :class:`TrainConfig` key, e.g. ``num_workers=2, rollout=32, learning_rate=3e-4``. ``env_kwargs``:
    keyword arguments for the env an id makes (``gymnasium.make_vec(env, **env_kwargs)``: PointNav's
    ``scenes``, Doom's ``frame_skip``); the run stores them (plain data), so that ``resume`` and
    ``vecfast.evaluate(run_dir)`` rebuild the same env. ``num_envs``: envs in all (per rank), split
    over ``num_workers`` as ``vecfast bench`` does (instead of ``num_envs_per_worker``).
    ``num_policies=N`` (the sync and async schemes) trains a population of N policies on the envs, each agent's
    episodes played by ``policy_mapping(agent_id, episode)`` (an :class:`~vecfast.selfplay.EpisodeId`; default a
    random policy, re-drawn every ``resample_policy_every_episodes``), ``policies_to_train`` learning and
    ``with_pbt=True`` evolving them (:mod:`vecfast.selfplay.population`); ``policy_mapping`` is code, so pass it
    again to ``resume``.
    ``num_workers="auto"`` measures env step and inference time first and chooses
    ``num_workers`` and ``num_envs_per_worker`` (:mod:`vecfast.trainers.run.tune`); the choice
    and its reasons go to ``config.json``. ``run_dir`` (default ``runs/<env>_<algo>_<time>_<random>``)
    receives the config, metrics (JSONL and TensorBoard event files) and checkpoints; it must
    be new or empty unless ``resume``, and is locked while the run lives.
    ``live``: show the live dashboard (:mod:`vecfast.trainers.run.viewer`) in the terminal.
    ``resume``: continue the run in ``run_dir`` from its newest readable checkpoint: its
    config (plus ``overrides``), counters, weights, optimiser and normalisation statistics.
    Ctrl-C, SIGTERM or SIGUSR1 stops training after the current iteration: a final checkpoint
    is saved and the result returned (``stats["interrupted"]``); a second Ctrl-C stops at once.
    ``stats["stopped_by"]`` says why the run stopped: ``"total_env_steps"``, ``"train_for_seconds"``, the signal
    this process received (``"SIGINT"``, ``"SIGTERM"``, ``"SIGUSR1"``) or ``"signal to another rank"``. A
    self-play run's stats add its Elo and score against its snapshots (a population: each policy's Elo).

    A distributed scheme runs in ``num_processes`` ranks (default: one per core, one per GPU on
    CUDA) that this call starts on this machine
    through torch.distributed's elastic launcher (each with its own vector env of the configured
    size, seeds offset by rank; ``env`` must then be an id or a picklable function), or, under
    ``torchrun`` or SLURM, in the ranks they started (each calls ``train``). Rank 0 writes the run
    directory; a launcher's restart (``torchrun --max-restarts``) resumes from its newest checkpoint.

    ``stats["env_frames"]`` counts frames as Sample Factory does (env steps times the
    env's frame skip); ``fps`` is env frames per second.
    """
    rank = rank_from_environment()  # under torchrun or srun: every rank calls train()
    arguments = {
        "scheme": scheme,
        "num_processes": num_processes,
        "env_kwargs": env_kwargs,
        "num_envs": num_envs,
        "policy_mapping": policy_mapping,
        "overrides": overrides,
        "valid_arguments": train_arguments(train),
    }
    if rank is not None and resolve(algo, scheme).scheme_spec.distributed:
        device = overrides.get("device", TrainConfig.device)
        with _in_process_group(rank, resolve_device(TrainConfig(device=device))):
            return run(resolve_run(env, algo, total_env_steps, run_dir, live, resume, rank=rank, **arguments), rank)
    spec = resolve_run(env, algo, total_env_steps, run_dir, live, resume, rank=None, **arguments)
    if not spec.recipe.scheme_spec.distributed:
        return run(spec, None)
    ranks = num_processes or _default_num_processes(spec)
    with chatter.logging_to(spec.run_dir):  # what the launch prints (c10d's warnings) goes to the run's env.log
        return launch_local(ranks, _run_in_launched_rank, spec, run_id=_local_run_id())


def _default_num_processes(spec: RunSpec) -> int:
    """Ranks that use this machine: one per GPU on CUDA, else one per core this process may run on (each
    rank with one torch thread by default: ranks beat threads at the small batches of acting)."""
    device = resolve_device(spec.sampling_config())
    return torch.cuda.device_count() if device.type == "cuda" else available_cores()


def _exit_orphaned() -> None:
    """The launcher is gone (SIGKILLed, say): leave at once; the env workers see this rank go and follow."""
    os._exit(1)


def _local_run_id() -> str:
    """The launcher's run id (``TORCHELASTIC_RUN_ID`` in the ranks): its time and a random part."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}_{secrets.token_hex(3)}"


@contextlib.contextmanager
def _in_process_group(rank: RankInfo, device: torch.device) -> Iterator[None]:
    """This rank in its run's process group, dying with its launcher; on its own device (CUDA: its local GPU)."""
    watch_owner(os.getppid(), when_gone=_exit_orphaned)  # a rank dies with its launcher
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", rank.local_rank)
    init_process_group(rank, device)
    try:
        yield
    finally:
        leave_process_group()


def _run_in_launched_rank(spec: RunSpec) -> TrainResult:
    """A rank that :func:`launch_local` started: runs the launcher's spec."""
    rank = rank_from_environment()
    if rank is None:
        raise RuntimeError("a launched rank without RANK and WORLD_SIZE in its environment")
    with _in_process_group(rank, resolve_device(spec.sampling_config())):
        return run(spec, rank)


__all__ = ["train"]
