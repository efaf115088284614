"""One run of a resolved :class:`~vecfast.trainers.run.run_spec.RunSpec` in this process (alone, or as one rank of
a distributed run, whose rank 0 writes the run directory): build the env, open the run directory, build the
trainer, then the training loop (:mod:`vecfast.trainers.run.loop`) with its hooks and checkpoint policy."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.envs.registration import _find_spec, load_env_creator  # make_vec's own id lookup
from gymnasium.vector import VectorEnv

from vecfast import chatter
from vecfast.selfplay import plan_for
from vecfast.trainers.base import collective
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import Trainer
from vecfast.trainers.run.env_source import EnvSource
from vecfast.trainers.run.launch import RankInfo
from vecfast.trainers.run.loop import CARRIED_COUNTS, CheckpointPolicy, Hook, RunLabel, TrainingLoop
from vecfast.trainers.run.metric_sinks import WeightsAndBiases
from vecfast.trainers.run.periodic_evaluation import PeriodicEvaluation
from vecfast.trainers.run.periodic_video import PeriodicVideo
from vecfast.trainers.run.policies import TrainResult
from vecfast.trainers.run.run_dir import RunDir, default_run_dir, space_to_data
from vecfast.trainers.run.run_spec import RunSpec
from vecfast.trainers.run.step_timeout import RunStepTimeout


def run(spec: RunSpec, rank: RankInfo | None) -> TrainResult:
    """Run ``spec`` in this process: alone (``rank`` None) or as one rank of a distributed run."""
    restore_log = chatter.log_to(spec.run_dir)
    with contextlib.ExitStack() as cleanup:  # closed in the reverse order of opening, whatever happens
        cleanup.callback(restore_log)
        vectorization = spec.source.vectorization(spec.recipe.scheme_spec.double_buffered)  # (a registry lookup)
        env = _build_env(spec, vectorization, rank)
        if env is not spec.source.env:  # a given vector env is the caller's to close
            cleanup.callback(env.close)
        state = spec.newest_state()  # (read once: in a launched rank each read is a collective)
        opened = _open_run(spec, env, vectorization, state, main=rank is None or rank.is_main)
        if opened.run_dir is not None:
            cleanup.callback(opened.run_dir.close)
        trainer = _build_trainer(spec, env, opened.cfg, rank, state)
        cleanup.callback(trainer.close)
        loop = _training_loop(spec, env, vectorization, opened, trainer, state, cleanup)
        steps_at_start = opened.resumed_at or 0
        stats = loop.run(spec.total_env_steps, spec.live and opened.main, steps_at_start=steps_at_start)
        return TrainResult(opened.path, trainer.model.eval(), stats)


@dataclass(frozen=True)
class OpenedRun:
    """The run as its env made it: the config with the env's family known, where it is written (rank 0 holds the
    run directory), what it is called, its frames per env step, and the env steps it resumed at."""

    cfg: TrainConfig
    path: Path
    run_dir: RunDir | None
    main: bool
    env_name: str
    frameskip: int
    resumed_at: int | None


def _build_env(spec: RunSpec, vectorization: str | None, rank: RankInfo | None) -> VectorEnv:
    """The run's vector env: on the Ray cluster that ``ray_address`` names, else on this machine."""
    sampling, source = spec.sampling_config(), spec.source
    if sampling.ray_address is not None:
        return source.on_ray(sampling)
    double_buffered = spec.recipe.scheme_spec.double_buffered
    return source.build(
        sampling.num_envs,
        vectorization,
        num_workers=sampling.num_workers,
        batch_size=sampling.num_envs // 2 if double_buffered and sampling.num_envs >= 2 else None,
        start_timeout=sampling.env_start_timeout,
        restart_failed_workers=sampling.restart_failed_workers,
        extra_kwargs=_rank_env_kwargs(source, rank),  # not stored: evaluate and resume see it all
        random_opening_moves=sampling.random_opening_moves,
    )


def _open_run(
    spec: RunSpec, env: VectorEnv, vectorization: str | None, state: dict[str, Any] | None, main: bool
) -> OpenedRun:
    """The run directory (rank 0's) with the run's ``config.json``, and its W&B sink if asked for."""
    cfg = spec.layers.config(env.single_observation_space)
    frameskip = _frameskip(env, cfg)
    env_name = spec.source.name(env)
    resumed_at = int(state["metrics"]["env_steps"]) if state is not None else None
    path = collective.from_main(lambda: Path(spec.run_dir or default_run_dir(env_name, spec.recipe.label)))
    run_dir = None
    if main:
        run_dir = RunDir(path, cfg.keep_checkpoints, resumed_at=resumed_at, resume=spec.resume)
        run_config = {
            "algo": spec.recipe.algo,
            "scheme": spec.recipe.scheme,
            "env": env_name,
            "env_kwargs": dict(spec.source.kwargs),
            "vectorization": vectorization,
            "total_env_steps": spec.total_env_steps,
            "env_frameskip": frameskip,
            "num_envs": env.num_envs,
            "world_size": collective.world_size(),
            "vecfast_version": _version(),
            "config": cfg.to_dict(),
            **({"auto_tune": spec.tuning.to_dict()} if spec.tuning is not None else {}),
        }
        run_dir.write_config(run_config)
        if cfg.with_wandb:
            run_dir.sinks.append(WeightsAndBiases(run_dir.path, run_config, cfg))
    return OpenedRun(cfg, path, run_dir, main, env_name, frameskip, resumed_at)


def _build_trainer(
    spec: RunSpec, env: VectorEnv, cfg: TrainConfig, rank: RankInfo | None, state: dict[str, Any] | None
) -> Trainer:
    """The recipe's scheme over its algorithm (with the acting plan where the scheme takes one), restored from the
    checkpoint the run continues."""
    factory = spec.recipe.scheme_spec.factory
    if spec.recipe.scheme_spec.takes_plan:
        factory = functools.partial(factory, plan=plan_for(spec.policy_mapping))
    trainer = factory(env, spec.recipe.algorithm.factory, _for_rank(cfg, rank), spec.total_env_steps)
    if state is not None:
        trainer.load_state_dict(state)
    return trainer


def _training_loop(
    spec: RunSpec,
    env: VectorEnv,
    vectorization: str | None,
    opened: OpenedRun,
    trainer: Trainer,
    state: dict[str, Any] | None,
    cleanup: contextlib.ExitStack,
) -> TrainingLoop:
    """The loop and its hooks, in order: evaluation while training (rank 0), videos, the run directory's sinks."""
    cfg, source = opened.cfg, spec.source
    steps = opened.resumed_at or 0
    hooks: list[Hook] = []
    evaluation = None
    if opened.main and cfg.eval_every_env_steps is not None:
        evaluation = PeriodicEvaluation(trainer.model, source, vectorization, cfg, steps)
        cleanup.callback(evaluation.close)
        hooks.append(functools.partial(evaluation.on_iteration, trainer.model))
    if opened.run_dir is not None and cfg.video_every_env_steps is not None:
        video = PeriodicVideo(trainer.model, source, vectorization, cfg, steps, opened.run_dir)
        hooks.append(functools.partial(video.on_iteration, trainer.model))
    if opened.run_dir is not None:
        hooks.append(opened.run_dir.log)
    env_restarts = getattr(env.unwrapped, "restarts", None)  # a healing vector env's (vecfast's, Doom matches)

    def restarts() -> int:  # the job's: every rank's envs, and rank 0's evaluation envs
        return len(env_restarts) + (evaluation.restarts if evaluation is not None else 0)

    def describe() -> dict[str, Any]:
        return {
            "algo": spec.recipe.algo,
            "scheme": spec.recipe.scheme,
            "env": opened.env_name,
            "env_kwargs": dict(source.kwargs),
            "config": cfg.to_dict(),
            "observation_space": space_to_data(env.single_observation_space),
            "action_space": space_to_data(env.single_action_space),
        }

    best = state.get("best_return", -np.inf) if state is not None else -np.inf
    score_key = evaluation.RETURN_KEY if evaluation is not None else None
    checkpoints = CheckpointPolicy(opened.run_dir, cfg, trainer, describe, best, score_key)
    carried = {key: int(state["metrics"].get(key, 0)) for key in CARRIED_COUNTS} if state is not None else {}
    label = RunLabel(spec.recipe.label, opened.env_name, env.num_envs)
    step_timeout = RunStepTimeout(env if env is not source.env else None, cfg.step_timeout)
    return TrainingLoop(
        trainer, opened.run_dir, cfg, label, opened.frameskip, checkpoints, hooks, step_timeout,
        restarts if env_restarts is not None else None, carried,
    )  # fmt: skip


def _version() -> str:
    try:
        return importlib.metadata.version("vecfast")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _frameskip(env: VectorEnv, cfg: TrainConfig) -> int:
    """Frames per env step: ``env_frameskip`` if set, else the envs' ``frame_skip`` attribute, else 1."""
    if cfg.env_frameskip is not None:
        return cfg.env_frameskip
    try:
        values = env.get_attr("frame_skip")
    except Exception:  # the envs have no such attribute
        return 1
    return int(values[0]) if len(set(values)) == 1 and isinstance(values[0], (int, np.integer)) else 1


def _for_rank(cfg: TrainConfig, rank: RankInfo | None) -> TrainConfig:
    """A rank's config: its envs' seeds follow the previous rank's (rank 0 keeps the run's seed)."""
    if rank is None or cfg.seed is None:
        return cfg
    return dataclasses.replace(cfg, seed=cfg.seed + rank.rank * cfg.num_envs)


def _rank_env_kwargs(source: EnvSource, rank: RankInfo | None) -> dict[str, Any]:
    """A rank's own share of the env's data where its batched env takes one (PointNav's ``scene_shard``): without
    it every rank would draw the same scenes."""
    if rank is None or source.id is None:
        return {}
    entry = _find_spec(source.id).vector_entry_point
    if entry is None or "scene_shard" not in inspect.signature(load_env_creator(entry)).parameters:
        return {}
    return {"scene_shard": (rank.rank, rank.world_size)}
