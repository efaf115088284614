"""The training loop: iterate a trainer until its budget, a stop request or an error.

Each iteration's metrics pass through the run's hooks in order (periodic evaluation and videos add theirs, the run
directory logs them, the dashboard or the progress lines show them); :class:`CheckpointPolicy` decides what is
saved and when; :class:`StopConsensus` decides when to stop, at the same iteration on every rank. Every way out
saves a final checkpoint once an iteration completed: the budget, Ctrl-C, SIGTERM or SIGUSR1, and an error (a
crashed or stalled env, a failing learner), which is raised after.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vecfast.trainers.base import collective
from vecfast.trainers.base.metrics import IterationMetrics
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import Trainer
from vecfast.trainers.run.progress import ProgressPrinter, selfplay_metrics
from vecfast.trainers.run.run_dir import RunDir, plain_data
from vecfast.trainers.run.step_timeout import RunStepTimeout
from vecfast.trainers.run.viewer import LiveDashboard, dashboard_unavailable

Hook = Callable[[dict[str, Any]], None]
"""Called with each iteration's metrics, after the hooks before it; may add to them."""

CARRIED_COUNTS = ("episodes", "restarts")  # metrics that count from the start of the run, resumed or not


@dataclass(frozen=True)
class RunLabel:
    """How the run names itself on the terminal: ``<recipe> on <env>, <num_envs> envs``."""

    recipe: str
    env_name: str
    num_envs: int


class StopRequest:
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

    def __enter__(self) -> StopRequest:
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


class StopConsensus:
    """When the loop stops: ``total_env_steps`` reached, a signal to any rank, or ``train_for_seconds`` on any
    rank's clock; every rank stops at the same iteration. :attr:`stopped_by` says why (``stats["stopped_by"]``)."""

    def __init__(self, total_env_steps: int, train_for_seconds: float | None) -> None:
        self.total_env_steps, self.train_for_seconds = total_env_steps, train_for_seconds
        self.request = StopRequest()
        self.interrupted = False
        self.stopped_by = "total_env_steps"  # unless the loop stops for another reason

    def __enter__(self) -> StopConsensus:
        self.request.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.request.__exit__(*exc)

    def after(self, env_steps: int, elapsed: float) -> bool:
        """Whether the iteration that reached ``env_steps`` after ``elapsed`` seconds is the last (a collective)."""
        out_of_time = self.train_for_seconds is not None and elapsed >= self.train_for_seconds
        stop_now = collective.all_max(torch.tensor([self.request.requested, out_of_time], dtype=torch.float64))
        if env_steps < self.total_env_steps and not stop_now.any():
            return False
        self.interrupted = bool(stop_now[0])
        self.stopped_by = _stop_reason(self.request.signal, *stop_now.tolist())
        return True

    def interrupted_at_once(self) -> None:
        """A second Ctrl-C (a KeyboardInterrupt) ended the iteration."""
        self.interrupted = True
        self.request.signal = self.stopped_by = self.request.signal or "SIGINT"


class CheckpointPolicy:
    """What the run saves, and when: the numbered checkpoint every ``save_every_sec``; ``best.pt`` when the score
    improves, looked at after every evaluation where evaluation is on (``score_key``), else every
    ``save_best_every_sec``; a final checkpoint on every way out once an iteration completed. The score: the
    evaluation's mean return, else the running mean return once over enough episodes to mean something.

    A checkpoint holds tensors and plain data only (loading it runs no code): ``trainer``'s state, the env steps
    reported with the weights (an asynchronous sampler has gone on since: the file's name), ``describe()`` (the
    run's algorithm, env and config, its spaces), the metrics and the best score so far (a resumed run keeps
    ``best.pt`` unless it does better).
    """

    def __init__(
        self,
        run_dir: RunDir | None,
        cfg: TrainConfig,
        trainer: Trainer,
        describe: Callable[[], dict[str, Any]],
        best_return: float,
        score_key: str | None,
    ) -> None:
        self.run_dir, self.cfg, self.trainer, self.describe = run_dir, cfg, trainer, describe
        self.best_return, self.score_key = best_return, score_key
        self.last_save = self.last_best = -np.inf

    def start(self, now: float) -> None:
        self.last_save = now

    def score(self, metrics: dict[str, Any]) -> float | None:
        if self.score_key is not None:
            return metrics.get(self.score_key)
        enough = metrics.get("episodes", 0) >= min(self.cfg.stats_avg, 10)
        return metrics.get("mean_episode_return") if enough else None

    def improved(self, metrics: dict[str, Any]) -> bool:
        score = self.score(metrics)
        return score is not None and score > self.best_return

    def after_iteration(self, metrics: dict[str, Any], now: float) -> None:
        cfg = self.cfg
        looks = self.score_key is not None or now - self.last_best >= (cfg.save_best_every_sec or 0)
        best = cfg.save_best_every_sec is not None and looks and self.improved(metrics)
        if best:
            self.best_return, self.last_best = self.score(metrics), now
        periodic = now - self.last_save >= cfg.save_every_sec
        if best or periodic:  # a best one is best.pt alone: the numbered ones are periodic, and the last
            self.save(metrics, numbered=periodic, is_best=best)
            self.last_save = now if periodic else self.last_save

    def final(self, metrics: dict[str, Any], iterations: int) -> Path | None:
        if not iterations:
            return None  # nothing learned since the run (or the resumed checkpoint) started
        is_best = self.cfg.save_best_every_sec is not None and self.improved(metrics)  # a run shorter than the period
        if is_best:
            self.best_return = self.score(metrics)
        return self.save(metrics, is_best=is_best)

    def save(self, metrics: dict[str, Any], numbered: bool = True, is_best: bool = False) -> Path | None:
        """The numbered checkpoint and/or ``best.pt``; the path written (the numbered one if both)."""
        if self.run_dir is None:
            return None
        state = {
            **self.trainer.state_dict(),
            "env_steps": int(metrics["env_steps"]),
            **self.describe(),
            "metrics": plain_data(metrics),
            "best_return": float(self.best_return),
        }
        return self.run_dir.save(state, numbered=numbered, best=is_best)


class TrainingLoop:
    """Iterates ``trainer`` and passes each iteration's metrics through ``hooks``, saving as ``checkpoints`` says
    (rank 0 has the run directory ``run``); ``restarts``: the job's envs restarted so far (None: envs that do not
    heal), ``carried``: a resumed run's counts, which carry on."""

    def __init__(
        self,
        trainer: Trainer,
        run: RunDir | None,
        cfg: TrainConfig,
        label: RunLabel,
        frameskip: int,
        checkpoints: CheckpointPolicy,
        hooks: list[Hook],
        step_timeout: RunStepTimeout,
        restarts: Callable[[], int] | None,
        carried: dict[str, int],
    ) -> None:
        self.trainer, self.run_dir, self.cfg, self.label, self.frameskip = trainer, run, cfg, label, frameskip
        self.checkpoints, self.hooks, self.step_timeout = checkpoints, hooks, step_timeout
        self.restarts, self.carried = restarts, carried
        self.metrics: dict[str, Any] = {"env_steps": 0}
        self.iterations = 0
        self.lags: list[tuple[float, float, float]] = []

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
            self.metrics["restarts"] = int(collective.all_sum(torch.tensor([self.restarts()]))[0])
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
        cfg, run, label = self.cfg, self.run_dir, self.label
        cannot_draw = dashboard_unavailable() if live else None
        live = live and cannot_draw is None
        every = None if live or run is None else cfg.print_every_sec
        progress = ProgressPrinter(every, total_env_steps, time_limit=cfg.train_for_seconds)
        title = f"{label.env_name} · {label.recipe}"
        dashboard = LiveDashboard(total_env_steps, cfg.batch_size, title, cfg.train_for_seconds) if live else None
        shows = [dashboard.update] if dashboard is not None else []
        hooks = [*self.hooks, *shows, progress.update]
        progress.note(
            f"{label.recipe} on {label.env_name}, {label.num_envs} envs"
            + (f" per rank x {collective.world_size()} ranks" if collective.is_distributed() else "")
            + f", {total_env_steps:,} env steps; run dir {run.path if run else '(rank 0)'}"
            + (f"; resumed from {run.checkpoint_path(run.resumed_at)}" if run and run.resumed_at is not None else "")
        )
        if cannot_draw is not None:
            progress.note(cannot_draw)
        start = time.perf_counter()
        self.checkpoints.start(start)
        stop = StopConsensus(total_env_steps, cfg.train_for_seconds)
        with stop, dashboard or contextlib.nullcontext():
            try:
                for iteration in self.trainer.iterations():
                    elapsed = time.perf_counter() - start
                    chosen = self.record(iteration, elapsed, steps_at_start)
                    if chosen is not None:
                        progress.note(f"step_timeout={chosen:.0f} s (auto: from the env cycle measured so far)")
                    for hook in hooks:
                        hook(self.metrics)
                    self.checkpoints.after_iteration(self.metrics, time.perf_counter())
                    if stop.after(self.metrics["env_steps"], elapsed):
                        break
            except KeyboardInterrupt:
                stop.interrupted_at_once()
            except Exception as error:
                _save_after(error, self.final_checkpoint, progress)
                raise
            saved = self.final_checkpoint()
            env_steps = int(self.metrics["env_steps"])
            stopped = "interrupted" if stop.interrupted else "done"
            ending = f"{stopped} at {env_steps:,} env steps; " + (f"saved {saved}" if saved else "nothing to save")
            if dashboard is not None:
                dashboard.finish(stopped, ending)  # its last frame says how the run ended and where it is
        progress.note(ending)
        return self.summary(time.perf_counter() - start, stop)

    def final_checkpoint(self) -> Path | None:
        return self.checkpoints.final(self.metrics, self.iterations)

    def summary(self, seconds: float, stop: StopConsensus) -> dict[str, Any]:
        """The run's stats (``TrainResult.stats``)."""
        env_steps = int(self.metrics["env_steps"])
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
            "time": seconds,
            "interrupted": stop.interrupted,
            "stopped_by": stop.stopped_by,
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
