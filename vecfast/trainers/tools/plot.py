"""Learning curves of run directories as a picture: ``vecfast plot RUN_DIR... --out FILE.png``.

:func:`load_run` reads a run directory (``metrics.jsonl``, and ``config.json`` where there is one)
into a :class:`RunCurves`; :func:`plot_runs` draws the mean episode return and the env's metrics
against env steps and against wall-clock training time, one panel per metric and x axis, and
writes a PNG (matplotlib's Agg backend: no display needed). Runs of one config (seeds) share a
colour: each is drawn thin, their median bold, and the legend says how many seeds.

A run resumed with ``--resume`` starts its clock again at 0 from its checkpoint;
:func:`stitch_resumed` puts its sittings end to end (:func:`training_seconds`).

matplotlib is an optional extra (``pip install 'vecfast[plot]'``), imported only by :func:`plot_runs`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vecfast.extras import require
from vecfast.trainers.run.viewer import read_records

X_AXES = {"env_steps": "env steps", "env_frames": "env frames", "time": "training time"}
DEFAULT_X = ("env_steps", "time")
RETURN = "mean_episode_return"
# what the trainers log about themselves (counters, losses, timings); any other number is the env's
TRAINER_KEYS = frozenset(
    {
        "env_steps",
        "env_frames",
        "time",
        "fps",
        "learner_steps",
        "episodes",
        "max_episode_return",
        "mean_episode_length",
        "policy_loss",
        "value_loss",
        "entropy",
        "kl",
        "clip_fraction",
        "grad_norm",
        "learning_rate",
        "rollout_steps",
        "full_trajectories",
        "restarts",
        "eval/episodes",
        "eval/seconds",
        "eval/std_return",
        "eval/mean_length",
    }
)
_TRAINER_PREFIXES = ("time_", "policy_lag_")
_MEDIAN_POINTS = 200
_SEED_DIR = re.compile(r"^seed[_-]?(\d+)$")


def is_env_metric(key: str) -> bool:
    """Whether ``metrics.jsonl``'s ``key`` is a number the env reports (success, SPL, ...), not the trainer's own."""
    return key != RETURN and key not in TRAINER_KEYS and not key.startswith(_TRAINER_PREFIXES)


def read_metrics(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of ``run_dir/metrics.jsonl`` (complete lines only); FileNotFoundError naming the directory
    if it has none."""
    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        runs = sorted(p.parent.name for p in run_dir.glob("*/metrics.jsonl")) if run_dir.is_dir() else []
        hint = f" (it holds runs: {', '.join(runs[:5])}{', ...' if len(runs) > 5 else ''}; pass {run_dir}/*)"
        raise FileNotFoundError(f"{run_dir} is not a run directory: no metrics.jsonl{hint if runs else ''}")
    return read_records(path, 0)[0]


def stitch_resumed(records: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """The records of a run's sittings put end to end: ``(record, seconds of training up to it)``.

    Each sitting's ``time`` counts from its own start; a resumed one starts from a checkpoint, so
    its first record has fewer env steps than the record before it or an earlier time. Records of
    the previous sittings at or beyond that step count were written after the checkpoint it was
    resumed from and never trained on: they are dropped. The sitting's times are added to the
    time of the last record kept (the one its checkpoint was saved at: a checkpoint is saved just
    after an iteration's record).
    """
    kept: list[tuple[dict[str, Any], float]] = []
    offset, last_time, last_steps = 0.0, -math.inf, -math.inf
    for record in records:
        steps, seconds = record["env_steps"], float(record.get("time", math.nan))
        if kept and (seconds < last_time or steps < last_steps):
            kept = [(r, s) for r, s in kept if r["env_steps"] < steps]
            offset = kept[-1][1] if kept else 0.0
        kept.append((record, offset + seconds))
        last_time, last_steps = seconds, steps
    return kept


def training_seconds(run_dir: str | os.PathLike) -> dict[int, float]:
    """env steps -> seconds of training up to that record, resumed sittings put end to end (:func:`stitch_resumed`)."""
    return {record["env_steps"]: seconds for record, seconds in stitch_resumed(read_metrics(run_dir))}


@dataclass(frozen=True)
class RunCurves:
    """One run directory's curves: per kept record (:func:`stitch_resumed`), its env steps, env frames,
    seconds of training, and every other number logged (NaN where a record lacks it)."""

    path: Path
    config: dict[str, Any]
    env_steps: np.ndarray
    env_frames: np.ndarray
    time: np.ndarray
    metrics: dict[str, np.ndarray]

    @property
    def seed(self) -> int | None:
        """The config's seed, else the ``seedN`` of the directory's name."""
        seed = self.config.get("config", {}).get("seed")
        if seed is None and (match := _SEED_DIR.match(self.path.name)):
            seed = int(match.group(1))
        return seed

    @property
    def env_metrics(self) -> list[str]:
        """The env's metrics this run logged (success, SPL, ...), sorted."""
        return sorted(key for key, values in self.metrics.items() if is_env_metric(key) and np.isfinite(values).any())

    def x(self, axis: str) -> np.ndarray:
        """The x values of ``axis``: ``env_steps``, ``env_frames`` or ``time`` (seconds)."""
        if axis not in X_AXES:
            raise ValueError(f"unknown x axis {axis!r}; choose from {', '.join(X_AXES)}")
        return getattr(self, axis)

    def has(self, metric: str) -> bool:
        return metric in self.metrics and bool(np.isfinite(self.metrics[metric]).any())


def load_run(run_dir: str | os.PathLike) -> RunCurves:
    """:class:`RunCurves` of ``run_dir``: a directory with ``metrics.jsonl`` (``config.json`` is optional)."""
    run_dir = Path(run_dir)
    kept = stitch_resumed(read_metrics(run_dir))
    if not kept:
        raise ValueError(f"{run_dir}/metrics.jsonl holds no records yet")
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    records = [record for record, _ in kept]
    numeric = {k for r in records for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    metrics = {key: np.array([_number(r.get(key)) for r in records]) for key in sorted(numeric)}
    steps = metrics.pop("env_steps")
    frames = metrics.pop("env_frames", steps * config.get("env_frameskip", 1))
    metrics.pop("time", None)
    return RunCurves(run_dir, config, steps, frames, np.array([s for _, s in kept]), metrics)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


@dataclass(frozen=True)
class Line:
    """A curve as drawn: ``run`` is its run directory, None for a group's median."""

    label: str
    x: np.ndarray
    y: np.ndarray
    run: Path | None
    width: float


@dataclass(frozen=True)
class Panel:
    """One panel: ``metric`` against ``x``; the x values drawn are those of ``x`` divided by ``x_scale`` (time:
    ``x_unit`` "seconds", "minutes" or "hours", ``x_scale`` seconds per unit; counts: "" and 1)."""

    metric: str
    x: str
    x_unit: str
    x_scale: float
    lines: list[Line] = field(default_factory=list)


@dataclass(frozen=True)
class PlotResult:
    """What :func:`plot_runs` drew: the PNG's ``path`` (also ``os.fspath(result)``) and its panels, row by row."""

    path: Path
    panels: list[Panel]
    groups: dict[str, list[Path]]

    def __fspath__(self) -> str:
        return str(self.path)

    def panel(self, metric: str, x: str) -> Panel:
        return next(p for p in self.panels if p.metric == metric and p.x == x)


def group_runs(runs: Sequence[RunCurves], labels: Sequence[str] | None = None) -> dict[str, list[RunCurves]]:
    """Label -> runs drawn as one: runs with the same label, or without labels, of the same config but for
    its seed (runs without ``config.json`` stand alone)."""
    if labels is not None:
        if len(labels) != len(runs):
            raise ValueError(f"got {len(labels)} labels for {len(runs)} runs: give one per run, or none")
        grouped: dict[str, list[RunCurves]] = {}
        for run, label in zip(runs, labels, strict=True):
            grouped.setdefault(label, []).append(run)
        return grouped
    by_config: dict[str, list[RunCurves]] = {}
    for run in runs:
        by_config.setdefault(_config_key(run), []).append(run)
    grouped = {}
    for members in by_config.values():
        label = _default_label(members)
        unique, n = label, 2
        while unique in grouped:
            unique, n = f"{label} ({n})", n + 1
        grouped[unique] = members
    return grouped


def _config_key(run: RunCurves) -> str:
    if not run.config:
        return f"path:{run.path.resolve()}"
    config = {k: v for k, v in run.config.items() if k not in ("vecfast_version", "config")}
    config["config"] = {k: v for k, v in run.config.get("config", {}).items() if k != "seed"}
    return json.dumps(config, sort_keys=True, default=str)


def _default_label(members: list[RunCurves]) -> str:
    first = members[0]
    if len(members) == 1 and not _SEED_DIR.match(first.path.name):
        return first.path.name or str(first.path)
    parents = {run.path.resolve().parent for run in members}
    if all(_SEED_DIR.match(run.path.name) for run in members) and len(parents) == 1:
        return next(iter(parents)).name  # DIR/seed0, DIR/seed1, ...: DIR
    config = first.config
    return " · ".join(str(config[k]) for k in ("env", "algo") if k in config) or first.path.name


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` finite values (fewer at the start); NaNs stay NaN."""
    if window <= 1:
        return values
    out = np.full_like(values, np.nan, dtype=float)
    finite = np.isfinite(values)
    kept = values[finite].astype(float)
    sums = np.concatenate([[0.0], np.cumsum(kept)])
    idx = np.arange(1, len(kept) + 1)
    start = np.maximum(idx - window, 0)
    out[finite] = (sums[idx] - sums[start]) / (idx - start)
    return out


def median_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]], points: int = _MEDIAN_POINTS) -> Line | None:
    """The median of ``(x, y)`` curves over the x range all of them cover, at ``points`` evenly spaced x
    (each curve linearly interpolated); None if they share no range."""
    curves = [(x[np.isfinite(y)], y[np.isfinite(y)]) for x, y in curves]
    curves = [(x, y) for x, y in curves if len(x)]
    if len(curves) < 2:
        return None
    lo, hi = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    if not hi > lo:
        return None
    grid = np.linspace(lo, hi, points)
    y = np.median([np.interp(grid, x, y) for x, y in curves], axis=0)
    return Line("median", grid, y, None, 2.4)


def _time_unit(seconds: float) -> tuple[str, float]:
    if seconds >= 2 * 3600:
        return "hours", 3600.0
    if seconds >= 120:
        return "minutes", 60.0
    return "seconds", 1.0


def _count(value: float, _pos: Any = None) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:.4g}"


def _title(metric: str) -> str:
    return {RETURN: "mean episode return", "spl": "SPL"}.get(metric, metric.replace("_", " "))


def import_pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display); a :class:`~vecfast.extras.MissingExtraError` that
    names the ``plot`` extra if matplotlib is not installed."""
    matplotlib = require("matplotlib", "plotting")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_runs(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    metrics: Sequence[str] | None = None,
    x: Sequence[str] = DEFAULT_X,
    labels: Sequence[str] | None = None,
    title: str | None = None,
    smooth_window: int = 1,
    dpi: int = 100,
) -> PlotResult:
    """Draw the runs of ``run_dirs`` into the PNG ``out``: a panel per metric (rows) and x axis (columns).

    ``metrics``: default the mean episode return and every env metric any run logged (success, SPL,
    ...). ``x``: ``env_steps``, ``env_frames``, ``time``. ``labels``: one per run; runs with one label
    (by default: runs of one config but for the seed) are drawn in one colour, thin, with their
    median bold. ``smooth_window``: a trailing mean over that many records first. Returns what was
    drawn (:class:`PlotResult`, read back from the figure's lines).
    """
    if not run_dirs:
        raise ValueError("no run directories to plot")
    x = list(x)
    for axis in x:
        if axis not in X_AXES:
            raise ValueError(f"unknown x axis {axis!r}; choose from {', '.join(X_AXES)}")
    runs = [load_run(run_dir) for run_dir in run_dirs]
    metrics = list(metrics) if metrics else _default_metrics(runs)
    if not metrics:
        raise ValueError("the runs hold no mean episode return or env metric yet: nothing to draw")
    missing = [m for m in metrics if not any(run.has(m) for run in runs)]
    if missing:
        known = sorted({k for run in runs for k in run.metrics if run.has(k)})
        raise ValueError(f"no run logged {', '.join(missing)}; they logged: {', '.join(known)}")
    groups = group_runs(runs, labels)
    plt = import_pyplot()
    from matplotlib.ticker import FuncFormatter

    most_seconds = max(float(np.nanmax(run.time)) if np.isfinite(run.time).any() else 0.0 for run in runs)
    time_unit, time_scale = _time_unit(most_seconds)
    fig, axes = plt.subplots(
        len(metrics),
        len(x),
        figsize=(5.6 * len(x), 3.4 * len(metrics) + 0.5),
        dpi=dpi,
        squeeze=False,
        layout="constrained",
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    panels = []
    for row, metric in enumerate(metrics):
        for col, axis in enumerate(x):
            ax = axes[row][col]
            unit, scale = (time_unit, time_scale) if axis == "time" else ("", 1.0)
            drawn = []
            for index, (label, members) in enumerate(groups.items()):
                colour = colours[index % len(colours)]
                drawn += _draw_group(ax, label, members, metric, axis, scale, colour, smooth_window)
            ax.set_xlabel(X_AXES[axis] + (f" ({unit})" if unit else ""))
            ax.set_ylabel(_title(metric))
            ax.grid(True, alpha=0.3)
            if axis != "time":
                ax.xaxis.set_major_formatter(FuncFormatter(_count))
            panels.append(Panel(metric, axis, unit, scale, _lines(drawn)))
    axes[0][0].legend(fontsize="small", loc="best")
    fig.suptitle(title or _default_title(runs))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return PlotResult(out, panels, {label: [run.path for run in members] for label, members in groups.items()})


def _default_metrics(runs: Sequence[RunCurves]) -> list[str]:
    env_metrics = sorted({key for run in runs for key in run.env_metrics})
    return ([RETURN] if any(run.has(RETURN) for run in runs) else []) + env_metrics


def _default_title(runs: Sequence[RunCurves]) -> str:
    envs = list(dict.fromkeys(str(run.config["env"]) for run in runs if "env" in run.config))
    return ", ".join(envs) if envs else "learning curves"


def _draw_group(
    ax: Any, label: str, members: list[RunCurves], metric: str, axis: str, scale: float, colour: str, window: int
) -> list[tuple[Any, str, Path | None]]:
    """Draw one group's curves on ``ax``: each run thin and the median bold, or a lone run plain; the lines
    drawn, each with its group's label and its run (None: the median)."""
    drawn, curves = [], []
    one = len(members) == 1
    for run in members:
        if not run.has(metric):
            continue
        xs, ys = run.x(axis) / scale, smooth(run.metrics[metric], window)
        finite = np.isfinite(ys) & np.isfinite(xs)
        curves.append((xs[finite], ys[finite]))
        (line,) = ax.plot(
            xs[finite],
            ys[finite],
            color=colour,
            linewidth=1.8 if one else 0.9,
            alpha=1.0 if one else 0.35,
            label=label if one else "_nolegend_",
        )
        drawn.append((line, label, run.path))
    if not one:
        median = median_curve(curves)
        seeds = f"{len(members)} seeds"
        if median is None:  # no common range: the legend still names the group
            ax.plot([], [], color=colour, linewidth=2.4, label=f"{label} ({seeds}, no common range)")
        else:
            (line,) = ax.plot(
                median.x, median.y, color=colour, linewidth=median.width, label=f"{label} (median of {seeds})"
            )
            drawn.append((line, label, None))
    return drawn


def _lines(drawn: list[tuple[Any, str, Path | None]]) -> list[Line]:
    """The curves as matplotlib holds them."""
    lines = []
    for line, label, run in drawn:
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        lines.append(Line(label, x, y, run, float(line.get_linewidth())))
    return lines
