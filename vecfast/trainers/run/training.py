"""``vecfast.train()``: resolve the run once (:mod:`vecfast.trainers.run.run_spec`), then run it: build the env and
the trainer, train until the budget, keep a run directory.

A distributed scheme's launcher (``train(..., algo="ddppo")`` here, or torchrun whose ranks each call ``train``)
starts ranks that each :func:`run` the spec: rank 0 writes the run directory, all ranks stop together
(:func:`collective.all_max` of their stop requests).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import inspect
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from gymnasium.envs.registration import _find_spec, load_env_creator  # make_vec's own id lookup
from gymnasium.vector import VectorEnv

from vecfast import chatter
from vecfast.selfplay import plan_for
from vecfast.trainers import entry_defaults
from vecfast.trainers.base import collective
from vecfast.trainers.base.metrics import IterationMetrics
from vecfast.trainers.base.runtime import resolve_device
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import Trainer
from vecfast.trainers.registry import Recipe, resolve
from vecfast.trainers.run.env_source import EnvSource
from vecfast.trainers.run.launch import (
    RankInfo,
    init_process_group,
    launch_local,
    leave_process_group,
    rank_from_environment,
)
from vecfast.trainers.run.metric_sinks import WeightsAndBiases
from vecfast.trainers.run.policies import TrainResult
from vecfast.trainers.run.progress import ProgressPrinter, selfplay_metrics
from vecfast.trainers.run.run_dir import (
    RunDir,
    default_run_dir,
    plain_data,
    space_to_data,
)
from vecfast.trainers.run.run_spec import RunSpec, resolve_run, train_arguments
from vecfast.trainers.run.step_timeout import RunStepTimeout
from vecfast.trainers.run.tune import available_cores
from vecfast.trainers.run.viewer import LiveDashboard, dashboard_unavailable
from vecfast.vector.process_cleanup import watch_owner

if TYPE_CHECKING:
    from vecfast.trainers.run.periodic_evaluation import PeriodicEvaluation
    from vecfast.trainers.run.periodic_video import PeriodicVideo


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


class _StopRequest:
    """SIGTERM, SIGUSR1 and Ctrl-C ask the loop to stop after the current iteration, then save and clean up.

    Handling SIGINT as a request (rather than a KeyboardInterrupt at a random point) keeps
    a checkpoint from being interrupted mid-write; a second Ctrl-C interrupts at once.
    SIGUSR1 is what cluster schedulers (SLURM's ``--signal``) send before they preempt a job.
    """

    _SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)

    def __init__(self) -> None:
        self.requested = False
        self.signal: str | None = None  # the first signal's name
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in self._SIGNALS}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = self.signal or signal.Signals(signum).name

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


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


def run(spec: RunSpec, rank: RankInfo | None) -> TrainResult:
    """Run ``spec`` in this process: alone (``rank`` None) or as one rank of a distributed run, whose rank 0
    writes the run directory."""
    main = rank is None or rank.is_main
    recipe, source = spec.recipe, spec.source
    state = spec.newest_state()
    sampling = spec.sampling_config()
    vectorization = source.vectorization(recipe.scheme_spec.double_buffered)
    restore_log = chatter.log_to(spec.run_dir)
    try:
        vec_env = (
            source.on_ray(sampling)
            if sampling.ray_address is not None
            else source.build(
                sampling.num_envs,
                vectorization,
                num_workers=sampling.num_workers,
                batch_size=sampling.num_envs // 2
                if recipe.scheme_spec.double_buffered and sampling.num_envs >= 2
                else None,
                start_timeout=sampling.env_start_timeout,
                restart_failed_workers=sampling.restart_failed_workers,
                extra_kwargs=_rank_env_kwargs(source, rank),  # not stored: evaluate and resume see it all
            )
        )
    except BaseException:
        restore_log()
        raise
    owns_env = vec_env is not source.env
    trainer = None
    run_dir = None
    evaluation = None
    video = None
    try:
        cfg = spec.layers.config(vec_env.single_observation_space)
        frameskip = _frameskip(vec_env, cfg)
        env_name = source.name(vec_env)
        resumed_at = int(state["metrics"]["env_steps"]) if state is not None else None
        path = collective.from_main(lambda: Path(spec.run_dir or default_run_dir(env_name, recipe.label)))
        if main:
            run_dir = RunDir(path, cfg.keep_checkpoints, resumed_at=resumed_at, resume=spec.resume)
            run_config = {
                "algo": recipe.algo,
                "scheme": recipe.scheme,
                "env": env_name,
                "env_kwargs": dict(source.kwargs),
                "vectorization": vectorization,
                "total_env_steps": spec.total_env_steps,
                "env_frameskip": frameskip,
                "num_envs": vec_env.num_envs,
                "world_size": collective.world_size(),
                "vecfast_version": _version(),
                "config": cfg.to_dict(),
                **({"auto_tune": spec.tuning.to_dict()} if spec.tuning is not None else {}),
            }
            run_dir.write_config(run_config)
            if cfg.with_wandb:
                run_dir.sinks.append(WeightsAndBiases(run_dir.path, run_config, cfg))
        factory = recipe.scheme_spec.factory
        if recipe.scheme_spec.takes_plan:
            factory = functools.partial(factory, plan=plan_for(spec.policy_mapping))
        trainer = factory(vec_env, recipe.algorithm.factory, _for_rank(cfg, rank), spec.total_env_steps)
        if state is not None:
            trainer.load_state_dict(state)
        best = state.get("best_return", -np.inf) if state is not None else -np.inf
        step_timeout = RunStepTimeout(vec_env if owns_env else None, cfg.step_timeout)
        carried = {key: int(state["metrics"].get(key, 0)) for key in CARRIED_COUNTS} if state is not None else {}
        if main and cfg.eval_every_env_steps is not None:
            # here, not at the top: evaluation (a user tool) loads policies through this module
            from vecfast.trainers.run.periodic_evaluation import PeriodicEvaluation

            evaluation = PeriodicEvaluation(trainer.model, source, vectorization, cfg, resumed_at or 0)
        if run_dir is not None and cfg.video_every_env_steps is not None:
            from vecfast.trainers.run.periodic_video import PeriodicVideo

            video = PeriodicVideo(trainer.model, source, vectorization, cfg, resumed_at or 0, run_dir)
        loop = _TrainingLoop(
            trainer, run_dir, cfg, recipe, env_name, dict(source.kwargs), vec_env, frameskip, best, step_timeout,
            carried, evaluation, video,
        )  # fmt: skip
        stats = loop.run(spec.total_env_steps, spec.live and main, steps_at_start=resumed_at or 0)
        return TrainResult(path, trainer.model.eval(), stats)
    finally:
        if evaluation is not None:
            evaluation.close()
        if trainer is not None:
            trainer.close()
        if run_dir is not None:
            run_dir.close()
        if owns_env:
            vec_env.close()
        restore_log()


CARRIED_COUNTS = ("episodes", "restarts")  # metrics that count from the start of the run, resumed or not


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


class _TrainingLoop:
    """Iterates a trainer until a limit or a stop request, logging and checkpointing (rank 0).

    Every way out saves a final checkpoint once an iteration completed: the limit, Ctrl-C,
    SIGTERM or SIGUSR1, and an error (a crashed or stalled env, a failing learner), which is
    raised after.
    """

    def __init__(
        self,
        trainer: Trainer,
        run: RunDir | None,
        cfg: TrainConfig,
        recipe: Recipe,
        env_name: str,
        env_kwargs: dict[str, Any],
        env: VectorEnv,
        frameskip: int,
        best_return: float,
        step_timeout: RunStepTimeout,
        carried: dict[str, int],
        evaluation: PeriodicEvaluation | None,
        video: PeriodicVideo | None,
    ) -> None:
        self.trainer, self.run_dir, self.cfg, self.recipe = trainer, run, cfg, recipe
        self.env_name, self.env_kwargs, self.env, self.frameskip = env_name, env_kwargs, env, frameskip
        self.carried = carried  # a resumed run's counts carry on
        self.evaluation = evaluation
        self.video = video
        # what a healing vector env (vecfast's, Doom matches) has restarted so far: a list of Restart records
        self.restarts = getattr(env.unwrapped, "restarts", None)
        self.best_return = best_return
        self.step_timeout = step_timeout
        self.metrics: dict[str, Any] = {"env_steps": 0}
        self.iterations = 0
        self.lags: list[tuple[float, float, float]] = []

    def checkpoint(self, numbered: bool = True, is_best: bool = False) -> Path | None:
        """Save the run's state as its numbered checkpoint and/or as ``best.pt``; the path written (the numbered
        one if both)."""
        if self.run_dir is None:
            return None
        env = self.env
        state = {  # tensors and plain data only: loading it runs no code (run_dir.load_checkpoint)
            **self.trainer.state_dict(),
            # the env steps reported with the weights (an asynchronous sampler has gone on since): its file name
            "env_steps": int(self.metrics["env_steps"]),
            "algo": self.recipe.algo,
            "scheme": self.recipe.scheme,
            "env": self.env_name,
            "env_kwargs": self.env_kwargs,
            "config": self.cfg.to_dict(),
            "observation_space": space_to_data(env.single_observation_space),
            "action_space": space_to_data(env.single_action_space),
            "metrics": plain_data(self.metrics),
            "best_return": float(self.best_return),  # so a resumed run keeps best.pt unless it does better
        }
        return self.run_dir.save(state, numbered=numbered, best=is_best)

    def score(self) -> float | None:
        """What ``best.pt`` ranks: with evaluation on, the mean return of an evaluation in the latest record; else
        the running mean return, once over enough episodes to mean something."""
        if self.evaluation is not None:
            return self.metrics.get(self.evaluation.RETURN_KEY)
        enough = self.metrics.get("episodes", 0) >= min(self.cfg.stats_avg, 10)
        return self.metrics.get("mean_episode_return") if enough else None

    def improved(self) -> bool:
        score = self.score()
        return score is not None and score > self.best_return

    def final_checkpoint(self) -> Path | None:
        if not self.iterations:
            return None  # nothing learned since the run (or the resumed checkpoint) started
        is_best = self.cfg.save_best_every_sec is not None and self.improved()  # a run shorter than the period
        if is_best:
            self.best_return = self.score()
        return self.checkpoint(is_best=is_best)

    def record(self, metrics: IterationMetrics, elapsed: float, steps_at_start: int) -> float | None:
        """Flatten ``metrics``, add env frames, fps and time, and keep them as :attr:`metrics`; the step
        timeout if "auto" chose it just now."""
        env_steps_per_second = (metrics.env_steps - steps_at_start) / max(elapsed, 1e-9)
        per_rank = env_steps_per_second / collective.world_size()
        chosen = self.step_timeout.observe(elapsed, per_rank)
        self.metrics = {
            **metrics.to_dict(),
            "env_frames": metrics.env_steps * self.frameskip,
            "fps": env_steps_per_second * self.frameskip,
            "time": elapsed,
        }
        if self.restarts is not None:  # the job's: every rank's envs, and rank 0's evaluation envs
            mine = len(self.restarts) + (self.evaluation.restarts if self.evaluation is not None else 0)
            self.metrics["restarts"] = int(collective.all_sum(torch.tensor([mine]))[0])
        for key, before in self.carried.items():
            if key in self.metrics:
                self.metrics[key] += before
        self.iterations += 1
        if metrics.policy_lag is not None:
            lag = metrics.policy_lag
            self.lags.append((lag.min, lag.avg, lag.max))
        return chosen

    def run(self, total_env_steps: int, live: bool, steps_at_start: int) -> dict[str, Any]:
        """Train until ``total_env_steps`` (by all ranks), the time limit or a stop request; the summary stats."""
        cfg, run = self.cfg, self.run_dir
        cannot_draw = dashboard_unavailable() if live else None
        live = live and cannot_draw is None
        every = None if live or run is None else cfg.print_every_sec
        progress = ProgressPrinter(every, total_env_steps, time_limit=cfg.train_for_seconds)
        start = time.perf_counter()
        last_save, last_best = start, -np.inf
        interrupted = False
        stopped_by = "total_env_steps"  # unless the loop stops for another reason
        title = f"{self.env_name} · {self.recipe.label}"
        dashboard = LiveDashboard(total_env_steps, cfg.batch_size, title, cfg.train_for_seconds) if live else None
        progress.note(
            f"{self.recipe.label} on {self.env_name}, {self.env.num_envs} envs"
            + (f" per rank x {collective.world_size()} ranks" if collective.is_distributed() else "")
            + f", {total_env_steps:,} env steps; run dir {run.path if run else '(rank 0)'}"
            + (f"; resumed from {run.checkpoint_path(run.resumed_at)}" if run and run.resumed_at is not None else "")
        )
        if cannot_draw is not None:
            progress.note(cannot_draw)
        with _StopRequest() as stop, dashboard or contextlib.nullcontext():
            try:
                for iteration in self.trainer.iterations():
                    elapsed = time.perf_counter() - start
                    chosen = self.record(iteration, elapsed, steps_at_start)
                    if chosen is not None:
                        progress.note(f"step_timeout={chosen:.0f} s (auto: from the env cycle measured so far)")
                    metrics = self.metrics
                    if self.evaluation is not None and self.evaluation.due(metrics["env_steps"]):
                        metrics.update(self.evaluation.evaluate(self.trainer.model, metrics["env_steps"]))
                    if self.video is not None and self.video.due(metrics["env_steps"]):
                        metrics.update(self.video.record(self.trainer.model, metrics["env_steps"]))
                    if run is not None:
                        run.log(metrics)
                    if dashboard is not None:
                        dashboard.update(metrics)
                    progress.update(metrics)
                    now = time.perf_counter()
                    every_best = self.evaluation is not None or now - last_best >= (cfg.save_best_every_sec or 0)
                    best = cfg.save_best_every_sec is not None and every_best  # each evaluation may be the best
                    best = best and self.improved()
                    if best:
                        self.best_return, last_best = self.score(), now
                    periodic = now - last_save >= cfg.save_every_sec
                    if best or periodic:  # a best one is best.pt alone: the numbered ones are periodic, and the last
                        self.checkpoint(numbered=periodic, is_best=best)
                        last_save = now if periodic else last_save
                    out_of_time = cfg.train_for_seconds is not None and elapsed >= cfg.train_for_seconds
                    # every rank stops at the same iteration: one rank's signal or clock stops them all
                    stop_now = collective.all_max(torch.tensor([stop.requested, out_of_time], dtype=torch.float64))
                    if metrics["env_steps"] >= total_env_steps or stop_now.any():
                        interrupted = bool(stop_now[0])
                        stopped_by = _stop_reason(stop.signal, *stop_now.tolist())
                        break
            except KeyboardInterrupt:
                interrupted = True
                stop.signal = stopped_by = stop.signal or "SIGINT"
            except Exception as error:
                _save_after(error, self.final_checkpoint, progress)
                raise
            saved = self.final_checkpoint()
            env_steps = int(self.metrics["env_steps"])
            stopped = "interrupted" if interrupted else "done"
            ending = f"{stopped} at {env_steps:,} env steps; " + (f"saved {saved}" if saved else "nothing to save")
            if dashboard is not None:
                dashboard.finish(stopped, ending)  # its last frame says how the run ended and where it is
        progress.note(ending)
        lags = np.array(self.lags) if self.lags else np.zeros((1, 3))
        return {
            "env_steps": env_steps,
            "env_frames": env_steps * self.frameskip,
            "fps": self.metrics.get("fps", 0.0),
            "mean_episode_return": self.metrics.get("mean_episode_return", float("nan")),
            "episodes": self.metrics.get("episodes", 0),
            "policy_lag": {
                "min": float(lags[:, 0].min()),
                "avg": float(lags[:, 1].mean()),
                "max": float(lags[:, 2].max()),
            },
            "learner_steps": self.metrics.get("learner_steps", 0),
            **selfplay_metrics(self.metrics),
            "time": time.perf_counter() - start,
            "interrupted": interrupted,
            "stopped_by": stopped_by,
            "step_timeout": self.step_timeout.chosen,
        }


def _stop_reason(signal_name: str | None, requested: float, out_of_time: float) -> str:
    """Why the loop stopped where ``stop_now`` (a stop request, the time limit: any rank's) or the steps said
    so: the signal this process received, ``"signal to another rank"``, ``"train_for_seconds"`` or
    ``"total_env_steps"``."""
    if requested:
        return signal_name or "signal to another rank"
    return "train_for_seconds" if out_of_time else "total_env_steps"


def _save_after(error: Exception, final_checkpoint: Callable[[], Path | None], progress: ProgressPrinter) -> None:
    """Save what was learned before ``error`` ends the run; say so on it (and on stderr)."""
    try:
        saved = final_checkpoint()
    except Exception as save_error:  # the original error matters more; keep both
        error.add_note(f"vecfast train: the final checkpoint could not be saved either: {save_error!r}")
        return
    if saved is not None:
        error.add_note(f"vecfast train: the final checkpoint was saved as {saved}")
        progress.note(f"stopped by {type(error).__name__}: {error}; saved {saved}")


__all__ = ["train"]
