"""``vecfast.train()``: build the env and the trainer, run until the budget, keep a run directory.

The config comes in layers (:mod:`vecfast.trainers.defaults`): TrainConfig's defaults, the env
family's, the algorithm's registered ones, then the caller's overrides.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

from vecfast.trainers.config import AUTO, TrainConfig
from vecfast.trainers.defaults import config_for
from vecfast.trainers.models import ActorCritic
from vecfast.trainers.progress import ProgressPrinter
from vecfast.trainers.registry import get_algo
from vecfast.trainers.run_dir import (
    RunDir,
    check_run_dir,
    default_run_dir,
    load_checkpoint,
    plain_data,
    space_from_data,
    space_to_data,
)
from vecfast.trainers.step_timeout import RunStepTimeout
from vecfast.trainers.tune import Tuning, tune
from vecfast.trainers.viewer import LiveDashboard
from vecfast.vector.make import make_vec


@dataclass
class TrainResult:
    """What a run produced: its directory, the trained policy (``policy.act(obs)``) and summary stats."""

    run_dir: Path
    policy: ActorCritic
    stats: dict[str, Any] = field(default_factory=dict)


def _auto_tune(env: str | Callable[[], VectorEnv] | VectorEnv, algo: str, overrides: dict[str, Any]) -> Tuning:
    """``num_workers="auto"``: measure and choose before anything else starts; print why."""
    if not isinstance(env, str):
        raise ValueError(
            "num_workers='auto' needs an env id: vecfast tunes the vector env it builds "
            "(a given env or factory has its workers already)"
        )
    tuning = tune(env, algo, **overrides)
    print("\n".join(tuning.lines()), file=sys.stderr)
    return tuning


def _build_env(env: str | Callable[[], VectorEnv] | VectorEnv, cfg: TrainConfig, double_buffered: bool) -> VectorEnv:
    if isinstance(env, VectorEnv):
        return env
    if callable(env):
        built = env()
        if not isinstance(built, VectorEnv):
            raise TypeError(f"the env factory returned {type(built).__name__}, not a gymnasium VectorEnv")
        return built
    vector_kwargs: dict[str, Any] = {
        "num_workers": cfg.num_workers,
        "start_timeout": cfg.env_start_timeout,
    }
    if double_buffered and cfg.num_envs >= 2:
        vector_kwargs["batch_size"] = cfg.num_envs // 2
    return make_vec(env, num_envs=cfg.num_envs, vectorization_mode="shared_memory", vector_kwargs=vector_kwargs)


def _env_name(env: str | Callable[[], VectorEnv] | VectorEnv, built: VectorEnv) -> str:
    if isinstance(env, str):
        return env
    spec = getattr(built.unwrapped, "spec", None) or getattr(built, "spec", None)
    return spec.id if spec is not None else type(built.unwrapped).__name__


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
    """SIGTERM and Ctrl-C ask the loop to stop after the current iteration, then save and clean up.

    Handling SIGINT as a request (rather than a KeyboardInterrupt at a random point) keeps
    a checkpoint from being interrupted mid-write; a second Ctrl-C interrupts at once.
    """

    _SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in self._SIGNALS}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def train(
    env: str | Callable[[], VectorEnv] | VectorEnv,
    algo: str = "appo",
    total_env_steps: int = 1_000_000,
    run_dir: str | os.PathLike | None = None,
    live: bool = False,
    resume: bool = False,
    **overrides: Any,
) -> TrainResult:
    """Train ``algo`` on ``env`` for ``total_env_steps`` env steps (transitions), one line.

    ``env``: a registered gymnasium id (vecfast builds an AsyncSharedMemVectorEnv of
    ``num_workers * num_envs_per_worker`` envs, double-buffered for APPO), a function that
    returns a VectorEnv, or a VectorEnv (which is left open). ``overrides``: any
    :class:`TrainConfig` key, e.g. ``num_workers=2, rollout=32, learning_rate=3e-4``.
    ``num_workers="auto"`` measures env step and inference time first and chooses
    ``num_workers`` and ``num_envs_per_worker`` (:mod:`vecfast.trainers.tune`); the choice
    and its reasons go to ``config.json``. ``run_dir`` (default ``runs/<env>_<algo>_<time>_<random>``)
    receives the config, metrics (JSONL and TensorBoard event files) and checkpoints; it must
    be new or empty unless ``resume``, and is locked while the run lives.
    ``live``: show the live dashboard (:mod:`vecfast.trainers.viewer`) in the terminal.
    ``resume``: continue the run in ``run_dir`` from its newest readable checkpoint: its
    config (plus ``overrides``), counters, weights, optimiser and normalisation statistics.
    Ctrl-C or SIGTERM stops training after the current iteration: a final checkpoint is
    saved and the result returned (``stats["interrupted"]``); a second Ctrl-C stops at once.

    ``stats["env_frames"]`` counts frames as Sample Factory does (env steps times the
    env's frame skip); ``fps`` is env frames per second.
    """
    state = None
    if run_dir is not None:
        check_run_dir(run_dir, resume)  # before the envs start, which can take minutes
    if resume:
        if run_dir is None:
            raise ValueError("resume=True needs the run_dir to resume")
        state = load_checkpoint(run_dir, "last")
        if state["algo"] != algo:
            raise ValueError(f"{run_dir} was trained with algo={state['algo']!r}, not {algo!r}")
        overrides = {**state["config"], **overrides}
    spec = get_algo(algo)
    tuning = None
    if overrides.get("num_workers") == AUTO:
        tuning = _auto_tune(env, algo, overrides)
        choice = tuning.choice
        overrides = {**overrides, "num_workers": choice.num_workers, "num_envs_per_worker": choice.num_envs_per_worker}
    sampling = TrainConfig.from_overrides(**{**spec.defaults, **overrides})
    vec_env = _build_env(env, sampling, spec.double_buffered)
    owns_env = vec_env is not env
    trainer = None
    run = None
    try:
        cfg = config_for(vec_env.single_observation_space, spec, overrides)
        frameskip = _frameskip(vec_env, cfg)
        env_name = _env_name(env, vec_env)
        resumed_at = int(state["metrics"]["env_steps"]) if state is not None else None
        path = run_dir if run_dir is not None else default_run_dir(env_name, algo)
        run = RunDir(path, cfg.keep_checkpoints, resumed_at=resumed_at, resume=resume)
        run.write_config(
            {
                "algo": algo,
                "env": env_name,
                "total_env_steps": total_env_steps,
                "env_frameskip": frameskip,
                "num_envs": vec_env.num_envs,
                "vecfast_version": _version(),
                "config": cfg.to_dict(),
                **({"auto_tune": tuning.to_dict()} if tuning is not None else {}),
            }
        )
        trainer = spec.factory(vec_env, cfg, total_env_steps)
        if state is not None:
            trainer.load_state_dict(state)
        best = state.get("best_return", -np.inf) if state is not None else -np.inf
        step_timeout = RunStepTimeout(vec_env if owns_env else None, cfg.step_timeout)
        stats = _run(trainer, run, cfg, total_env_steps, frameskip, algo, env_name, vec_env, live, best, step_timeout)
        return TrainResult(run.path, trainer.model.eval(), stats)
    finally:
        if trainer is not None:
            trainer.close()
        if run is not None:
            run.close()
        if owns_env:
            vec_env.close()


def _run(
    trainer: Any,
    run: RunDir,
    cfg: TrainConfig,
    total_env_steps: int,
    frameskip: int,
    algo: str,
    env_name: str,
    env: VectorEnv,
    live: bool,
    best_return: float,
    step_timeout: RunStepTimeout,
) -> dict[str, Any]:
    """Iterate the trainer until a limit or a stop request, logging and checkpointing; the summary stats.

    Every way out saves a final checkpoint once an iteration completed: the limit, Ctrl-C or
    SIGTERM, and an error (a crashed or stalled env, a failing learner), which is raised after.
    """
    start = time.perf_counter()
    last_save, last_best = start, -np.inf
    lag_min, lag_max, lag_sum, iterations = np.inf, -np.inf, 0.0, 0
    metrics: dict[str, Any] = {"env_steps": 0}
    interrupted = False
    progress = ProgressPrinter(None if live else cfg.print_every_sec, total_env_steps)

    def checkpoint(is_best: bool = False) -> Path:
        state = {  # tensors and plain data only: loading it runs no code (run_dir.load_checkpoint)
            **trainer.state_dict(),
            "algo": algo,
            "env": env_name,
            "config": cfg.to_dict(),
            "observation_space": space_to_data(env.single_observation_space),
            "action_space": space_to_data(env.single_action_space),
            "metrics": plain_data(metrics),
            "best_return": float(best_return),  # so a resumed run keeps best.pt unless it does better
        }
        return run.save(state, best=is_best)

    def improved() -> bool:
        """Whether the running mean return, over enough episodes to mean something, beats the best."""
        enough = metrics.get("episodes", 0) >= min(cfg.stats_avg, 10)
        return enough and metrics.get("mean_episode_return", -np.inf) > best_return

    def final_checkpoint() -> Path | None:
        nonlocal best_return
        if not iterations:
            return None  # nothing learned since the run (or the resumed checkpoint) started
        is_best = cfg.save_best_every_sec is not None and improved()  # a run shorter than the period included
        if is_best:
            best_return = metrics["mean_episode_return"]
        return checkpoint(is_best=is_best)

    title = f"{env_name} · {algo}"
    dashboard = LiveDashboard(total_env_steps, cfg.batch_size, title, cfg.train_for_seconds) if live else None
    progress.note(f"{algo} on {env_name}, {env.num_envs} envs, {total_env_steps:,} env steps; run dir {run.path}")
    with _StopRequest() as stop, dashboard or contextlib.nullcontext():
        try:
            for metrics in trainer.iterations():
                elapsed = time.perf_counter() - start
                chosen = step_timeout.observe(elapsed, metrics["fps"])
                if chosen is not None:
                    progress.note(f"step_timeout={chosen:.0f} s (auto: from the env cycle measured so far)")
                metrics = {
                    **metrics,
                    "env_frames": metrics["env_steps"] * frameskip,
                    "fps": metrics["fps"] * frameskip,
                    "time": elapsed,
                }
                iterations += 1
                lag_min = min(lag_min, metrics["policy_lag_min"])
                lag_max = max(lag_max, metrics["policy_lag_max"])
                lag_sum += metrics["policy_lag_avg"]
                run.log(metrics)
                if dashboard is not None:
                    dashboard.update(metrics)
                progress.update(metrics)
                now = time.perf_counter()
                best = cfg.save_best_every_sec is not None and now - last_best >= cfg.save_best_every_sec and improved()
                if best:
                    best_return, last_best = metrics["mean_episode_return"], now
                if best or now - last_save >= cfg.save_every_sec:
                    checkpoint(is_best=best)
                    last_save = now
                out_of_time = cfg.train_for_seconds is not None and elapsed >= cfg.train_for_seconds
                if metrics["env_steps"] >= total_env_steps or out_of_time or stop.requested:
                    interrupted = stop.requested
                    break
        except KeyboardInterrupt:
            interrupted = True
        except Exception as error:
            _save_after(error, final_checkpoint, progress)
            raise
    saved = final_checkpoint()
    stopped = "interrupted" if interrupted else "done"
    progress.note(
        f"{stopped} at {int(metrics['env_steps']):,} env steps; " + (f"saved {saved}" if saved else "nothing to save")
    )
    elapsed = time.perf_counter() - start
    return {
        "env_steps": int(metrics["env_steps"]),
        "env_frames": int(metrics["env_steps"]) * frameskip,
        "fps": metrics.get("fps", 0.0),
        "mean_episode_return": metrics.get("mean_episode_return", float("nan")),
        "episodes": metrics.get("episodes", 0),
        "policy_lag": {
            "min": float(lag_min) if iterations else 0.0,
            "avg": lag_sum / iterations if iterations else 0.0,
            "max": float(lag_max) if iterations else 0.0,
        },
        "learner_steps": metrics.get("learner_steps", 0),
        "time": elapsed,
        "interrupted": interrupted,
        "step_timeout": step_timeout.chosen,
    }


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


def load_policy(run_dir: str | os.PathLike, which: str = "last") -> ActorCritic:
    """The policy of a run directory, on CPU: its newest checkpoint, or with ``which="best"`` the one
    with the best mean return (the newest if it has none yet).

    The newest by default: ``best.pt`` is only as good as the returns measured when it was
    written, a run shorter than ``save_best_every_sec`` has only its first one.
    """
    try:
        state = load_checkpoint(run_dir, which)
    except FileNotFoundError:
        if which != "best":
            raise
        state = load_checkpoint(run_dir, "last")
    cfg = TrainConfig.from_overrides(**state["config"])
    model = ActorCritic(space_from_data(state["observation_space"]), space_from_data(state["action_space"]), cfg)
    model.load_state_dict(state["model"])
    return model.eval()


__all__ = ["TrainResult", "load_policy", "train"]
