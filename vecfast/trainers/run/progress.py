"""Progress lines on stderr while a run trains without the live dashboard (scripts, pipes, notebooks).

Writes never raise: a reader that went away (``vecfast train ... | tee log`` after Ctrl-C
killed ``tee``) must not turn a clean stop into a crash before the final checkpoint.
"""

from __future__ import annotations

import math
import sys
import time
from typing import IO, Any


class ProgressPrinter:
    """One line every ``every_sec`` seconds of training, plus notes on events; ``every_sec=None``: silent."""

    def __init__(
        self,
        every_sec: float | None,
        total_env_steps: int,
        stream: IO[str] | None = None,
        time_limit: float | None = None,
    ) -> None:
        self.every_sec = every_sec
        self.total_env_steps = total_env_steps
        self.time_limit = time_limit
        self._stream = stream
        self._broken = False
        self._last = time.perf_counter()

    def note(self, text: str) -> None:
        """Print ``text`` as one line (the start, the end, a chosen setting)."""
        if self._broken or self.every_sec is None:
            return
        try:
            print(f"vecfast train: {text}", file=self._stream or sys.stderr, flush=True)
        except (BrokenPipeError, OSError, ValueError):  # ValueError: the stream was closed
            self._broken = True

    def update(self, metrics: dict[str, Any]) -> None:
        """Print a progress line if ``every_sec`` passed since the last one."""
        now = time.perf_counter()
        if self.every_sec is None or now - self._last < self.every_sec:
            return
        self._last = now
        self.note(progress_line(metrics, self.total_env_steps, self.time_limit))


def progress_line(metrics: dict[str, Any], total_env_steps: int, time_limit: float | None = None) -> str:
    """``12 s · 24,576/500,000 env steps (4.9%) · 8,123 fps · mean return 21.3 (100 episodes) · 2 min left``;
    the time left is to the nearer of the step budget and ``time_limit`` (``train_for_seconds``)."""
    steps, seconds = int(metrics["env_steps"]), float(metrics["time"])
    parts = [
        f"{seconds:.0f} s",
        f"{steps:,}/{total_env_steps:,} env steps ({steps / total_env_steps:.1%})",
        f"{metrics.get('fps', 0.0):,.0f} fps",
    ]
    selfplay = _selfplay_parts(metrics)
    mean_return = metrics.get("mean_episode_return")
    if selfplay:  # zero-sum: the mean return of both sides' steps is ~0 whoever wins
        parts += selfplay
    elif mean_return is not None and math.isfinite(mean_return):
        parts.append(f"mean return {mean_return:.1f} ({metrics.get('episodes', 0):,} episodes)")
    if metrics.get("restarts"):
        parts.append(f"{metrics['restarts']} restart{'s' if metrics['restarts'] > 1 else ''}")
    if 0 < steps < total_env_steps and seconds > 0:
        left = (total_env_steps - steps) * seconds / steps
        if time_limit is not None:
            left = min(left, max(time_limit - seconds, 0.0))
        parts.append(f"{_duration(left)} left")
    return " · ".join(parts)


def selfplay_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """A self-play run's own figures among its metrics: a league's Elo and score against its snapshots (over how
    many games), each population policy's Elo; empty for other runs."""
    keys = ("elo", "score_vs_snapshots", "score_vs_snapshots_games", "snapshots", "win_rate_vs_hardest_snapshot")
    league = {key: metrics[key] for key in keys if metrics.get(key) is not None}
    population = {
        key: value
        for key, value in metrics.items()
        if key.startswith("policy_") and key.endswith("_elo") and value is not None
    }
    return {**league, **dict(sorted(population.items(), key=lambda item: int(item[0].split("_")[1])))}


def _selfplay_parts(metrics: dict[str, Any]) -> list[str]:
    """A league's Elo and score against its snapshots, or each population policy's Elo; empty for other runs."""
    own = selfplay_metrics(metrics)
    parts = []
    if "elo" in own:
        parts.append(f"Elo {own['elo']:.0f}")
    if "score_vs_snapshots" in own:
        parts.append(f"score vs snapshots {own['score_vs_snapshots']:.2f}")
    if "win_rate_vs_hardest_snapshot" in own:
        parts.append(f"vs hardest {own['win_rate_vs_hardest_snapshot']:.2f}")
    population = [value for key, value in own.items() if key.startswith("policy_")]
    if population:
        parts.append("Elo " + " / ".join(f"{value:.0f}" for value in population) + " (policies)")
    return parts


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
