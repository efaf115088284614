"""Live terminal dashboard of a run: ``vecfast view RUN_DIR`` and ``train(..., live=True)``.

:class:`Dashboard` turns the metrics records of ``metrics.jsonl`` into what is shown
(rates over the last interval and over the run, history sparklines, component times);
:func:`render` draws it with rich; :func:`view` follows a run directory, redrawing in place
(no flicker: one ``Live`` region, refreshed only when a record arrives or the terminal
resizes) until the run finishes, or ``q`` / Ctrl-C.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import select
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

_SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int) -> str:
    """The last ``width`` values as block characters scaled between their min and max; a steady series (CartPole's
    return held at 500) as a level line half-way up, not as the lowest bars, which read as a collapse."""
    values = [v for v in values if math.isfinite(v)][-width:]
    if not values:
        return ""
    low, high = min(values), max(values)
    if high == low:
        return _SPARKS[len(_SPARKS) // 2] * len(values)
    span = high - low
    return "".join(_SPARKS[min(len(_SPARKS) - 1, int((v - low) / span * len(_SPARKS)))] for v in values)


def _fmt_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Dashboard:
    """What the dashboard shows, computed from metrics records (one per learner iteration)."""

    def __init__(
        self,
        total_env_steps: int,
        batch_size: int,
        title: str = "",
        history: int = 200,
        time_limit: float | None = None,
    ) -> None:
        self.total_env_steps = total_env_steps
        self.time_limit = time_limit  # train_for_seconds: progress is whichever limit is nearer
        self.batch_size = batch_size
        self.title = title
        self.first: dict[str, Any] | None = None
        self.previous: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.returns: deque[float] = deque(maxlen=history)
        self.fps_history: deque[float] = deque(maxlen=history)
        self.evaluation: dict[str, Any] = {}  # the latest evaluation's eval/ records, and its env steps
        self.finished = False

    def update(self, record: dict[str, Any]) -> None:
        if self.first is None:
            self.first = record
        self.previous, self.last = self.last, record
        if "mean_episode_return" in record:
            self.returns.append(record["mean_episode_return"])
        if "eval/mean_return" in record:
            self.evaluation = {key: value for key, value in record.items() if key.startswith("eval/")}
            self.evaluation["env_steps"] = record["env_steps"]
        self.fps_history.append(self.current("env_frames"))
        if self.progress() >= 1.0:
            self.finished = True

    def progress(self) -> float:
        """Fraction of the run done: of the env steps, or of the time limit if that is nearer."""
        return self.progress_of()[0]

    def progress_of(self) -> tuple[float, str]:
        """:meth:`progress`, and which limit it is the fraction of: ``"steps"`` or ``"time"``."""
        if self.last is None:
            return 0.0, "steps"
        done, kind = (self.last["env_steps"] / self.total_env_steps if self.total_env_steps else 1.0), "steps"
        if self.time_limit and self.last["time"] / self.time_limit > done:
            done, kind = self.last["time"] / self.time_limit, "time"
        return min(1.0, done), kind

    def _rate(self, key: str, since: dict[str, Any] | None) -> float:
        last = self.last
        if last is None or since is None or last["time"] <= since["time"] or key not in last or key not in since:
            return float("nan")
        return (last[key] - since[key]) / (last["time"] - since["time"])

    def current(self, key: str) -> float:
        """Rate of ``key`` per second over the last interval."""
        return self._rate(key, self.previous)

    def average(self, key: str) -> float:
        """Rate of ``key`` per second since the first record."""
        return self._rate(key, self.first)

    def samples_per_second(self, current: bool) -> float:
        return (self.current if current else self.average)("learner_steps") * self.batch_size

    def eta(self) -> float:
        rate = self.average("env_steps")
        if self.last is None or not rate > 0:
            return float("nan")
        eta = max(0.0, (self.total_env_steps - self.last["env_steps"]) / rate)
        if self.time_limit:
            eta = min(eta, max(0.0, self.time_limit - self.last["time"]))
        return eta

    def component_shares(self) -> dict[str, float]:
        """Share of wall time of each activity over the last interval (the sampler: APPO's policy worker, or the
        synchronous loop's sampling; the learner)."""
        last, prev = self.last, self.previous
        if last is None or prev is None or last["time"] <= prev["time"]:
            return {}
        wall = last["time"] - prev["time"]
        shares = {}
        for key, name in (
            ("time_envs", "sampler: waiting for envs"),
            ("time_inference", "sampler: inference"),
            ("time_sampler_waiting_rows", "sampler: waiting for buffers"),
        ):
            if key in last and key in prev:
                shares[name] = (last[key] - prev[key]) / wall
        if "time_learning" in last:
            shares["learner: learning"] = last["time_learning"] / wall
            shares["learner: waiting for data"] = last.get("time_learner_waiting", 0.0) / wall
        if "time_sampling" in last:  # synchronous PPO
            shares["sampling"] = last["time_sampling"] / wall
        return shares


def render(board: Dashboard, width: int = 100, hint: str = "q or Ctrl-C quits", status: str | None = None) -> Panel:
    """The dashboard as one rich renderable; ``status`` in its title (default: running, or finished)."""
    m = board.last
    status = status or ("finished" if board.finished else "running")
    if m is None:
        waiting = Text("waiting for the first learner iteration ...", style="dim")
        return Panel(waiting, title=Text(f"{board.title} ({status})"), subtitle=Text(hint))
    throughput = Table.grid(padding=(0, 2))
    throughput.add_column(style="bold")
    throughput.add_column(justify="right")
    throughput.add_column(justify="right", style="dim")
    throughput.add_row("", "current", "average")
    for name, key, fmt in (("env frames/s", "env_frames", ",.0f"), ("learner steps/s", "learner_steps", ".2f")):
        throughput.add_row(name, f"{board.current(key):{fmt}}", f"{board.average(key):{fmt}}")
    throughput.add_row(
        "samples/s (learner)", f"{board.samples_per_second(True):,.0f}", f"{board.samples_per_second(False):,.0f}"
    )
    if "policy_lag_avg" in m:  # asynchronous schemes
        throughput.add_row(
            "policy lag", f"{m['policy_lag_avg']:.1f}", f"min {m['policy_lag_min']:.0f} max {m['policy_lag_max']:.0f}"
        )
    if "full_trajectories" in m:
        throughput.add_row("buffer: full trajectories", str(m["full_trajectories"]), "")

    learning = Table.grid(padding=(0, 2))
    learning.add_column(style="bold")
    learning.add_column(justify="right")
    for key in ("policy_loss", "value_loss", "entropy", "kl", "clip_fraction", "grad_norm", "learning_rate"):
        if key in m:  # what the algorithm reports
            learning.add_row(key.replace("_", " "), f"{m[key]:.4g}")

    spark_width = max(10, width - 40)
    episodes = Table.grid(padding=(0, 2))
    episodes.add_column(style="bold")
    episodes.add_column()
    if "mean_episode_return" in m:
        episodes.add_row(
            "return (mean / max)", f"{m['mean_episode_return']:.2f} / {m.get('max_episode_return', float('nan')):.2f}"
        )
        episodes.add_row("return history", Text(sparkline(list(board.returns), spark_width), style="green"))
        episodes.add_row("episode length", f"{m.get('mean_episode_length', float('nan')):.1f}")
    episodes.add_row("episodes", f"{m.get('episodes', 0):,}")
    evaluation = board.evaluation
    if evaluation:  # eval_every_env_steps
        shown = [f"{k.removeprefix('eval/win_rate_vs_')} {v:.2f}" for k, v in evaluation.items() if "win_rate_vs_" in k]
        text = " / ".join(shown) if shown else f"{evaluation['eval/mean_return']:.2f}"
        episodes.add_row(
            "evaluation" + (" (win rates)" if shown else " (mean return)"),
            f"{text} at {evaluation['env_steps']:,} steps",
        )
    if m.get("restarts"):  # envs rebuilt, workers replaced (restart_failed_workers)
        episodes.add_row("restarts", Text(f"{m['restarts']:,}", style="yellow"))
    episodes.add_row("env frames/s history", Text(sparkline(list(board.fps_history), spark_width), style="cyan"))

    components = Table.grid(padding=(0, 2))
    components.add_column(style="bold")
    components.add_column(justify="right")
    components.add_column()
    for name, share in board.component_shares().items():
        bar = ProgressBar(total=1.0, completed=min(1.0, max(0.0, share)), width=20)
        components.add_row(name, f"{100 * share:5.1f}%", bar)

    selfplay = _selfplay_table(m)
    done, kind = board.progress_of()
    limit = f"/{_fmt_duration(board.time_limit)}" if board.time_limit else ""
    fraction = f"{100 * done:5.1f}% of the {kind}"
    details = (
        f"steps {m['env_steps']:,}/{board.total_env_steps:,}  frames {m['env_frames']:,}  "
        f"time {_fmt_duration(m['time'])}{limit}  ETA {_fmt_duration(board.eta())}"
    )
    room = width - 4 - 2  # inside the panel (borders and padding: 4), beside the bar (2)
    one_line = len(fraction) + 2 + len(details) <= room - 10  # with a bar of 10 at least
    header = f"{fraction}  {details}" if one_line else fraction
    progress = Table.grid(padding=(0, 2))
    progress.add_column()
    progress.add_column(no_wrap=True)
    progress.add_row(ProgressBar(total=1.0, completed=done, width=max(10, room - len(header))), header)
    if not one_line:  # a narrow terminal: the details under the bar
        progress = Group(progress, Text(details, no_wrap=True, overflow="ellipsis"))
    top = Table.grid(padding=(0, 4))
    top.add_column()
    top.add_column()
    top.add_row(throughput, learning)
    parts = [progress, Text(""), top, Text(""), episodes, Text(""), components]
    if selfplay is not None:
        parts[5:5] = [Text(""), selfplay]
    return Panel(
        Group(*parts),
        title=Text(f"{board.title} ({status})"),
        subtitle=Text(hint),
    )


def _selfplay_table(m: dict[str, Any]) -> Table | None:
    """Self-play's figures where the run reports them: a population's policies (Elo, objective, learning rate), or
    the one learner's league (Elo, score against its snapshots, the win rates its draws go by, snapshots, games)."""
    policies = sorted(
        int(k[len("policy_") : -len("_elo")]) for k in m if k.startswith("policy_") and k.endswith("_elo")
    )
    if policies:
        table = Table(box=None, padding=(0, 2), show_edge=False)
        for name in ("policy", "Elo", "objective", "learning rate"):
            table.add_column(
                name, justify="left" if name == "policy" else "right", style="bold" if name == "policy" else None
            )
        for p in policies:
            objective = m.get(f"policy_{p}_objective")
            table.add_row(
                str(p),
                f"{m[f'policy_{p}_elo']:.0f}",
                "-" if objective is None else f"{objective:.3g}",
                f"{m.get(f'policy_{p}_learning_rate', float('nan')):.3g}",
            )
        return table
    if "elo" not in m:
        return None
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("Elo (learner)", f"{m['elo']:.0f}")
    if "score_vs_snapshots" in m:
        table.add_row("score vs snapshots", f"{m['score_vs_snapshots']:.3f}")
    if "win_rate_vs_hardest_snapshot" in m:  # the win rates the draws go by, and the hardest one's share of them
        share = m.get("hardest_snapshot_draw_share", float("nan"))
        table.add_row("win rate vs hardest snapshot", f"{m['win_rate_vs_hardest_snapshot']:.3f} ({share:.0%} of draws)")
        table.add_row("mean win rate vs snapshots", f"{m.get('win_rate_vs_snapshots_mean', float('nan')):.3f}")
    table.add_row("snapshots", f"{m.get('snapshots', 0):.0f}")
    table.add_row(
        "games vs latest / snapshots", f"{m.get('games_vs_latest', 0):,.0f} / {m.get('games_vs_snapshots', 0):,.0f}"
    )
    return table


def dashboard_unavailable() -> str | None:
    """Why ``train(live=True)`` cannot draw here, or None: in a notebook, rich draws through ipywidgets, and
    without it only warns at every frame; training then prints its progress lines instead."""
    if not Console().is_jupyter or _installed("ipywidgets"):
        return None
    return "live=True in a notebook needs ipywidgets (pip install 'vecfast[notebook]'): progress lines instead"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules: not importable
        return False


class LiveDashboard:
    """In-process dashboard for ``train(live=True)``: ``update(metrics)`` after each iteration.

    Drawing never raises: when the terminal's reader goes away (``| tee log`` killed by the
    same Ctrl-C that asks training to stop) the dashboard goes quiet, and training still
    saves its final checkpoint.
    """

    def __init__(self, total_env_steps: int, batch_size: int, title: str, time_limit: float | None = None) -> None:
        self.board = Dashboard(total_env_steps, batch_size, title, time_limit=time_limit)
        self.console = Console()
        self.live = Live(render(self.board), console=self.console, auto_refresh=False, transient=False)
        self._drawing = True

    def __enter__(self) -> LiveDashboard:
        self._draw(self.live.__enter__)
        return self

    def update(self, metrics: dict[str, Any]) -> None:
        self.board.update(metrics)
        self._draw(self.live.update, render(self.board, self.console.width, "Ctrl-C stops training"), refresh=True)

    def finish(self, status: str, ending: str) -> None:
        """The last frame: ``status`` ("interrupted", "done") in its title and how the run ended ("... at N env
        steps; saved <checkpoint>") in its footer."""
        self._draw(self.live.update, render(self.board, self.console.width, ending, status), refresh=True)

    def __exit__(self, *exc: object) -> None:
        self._draw(self.live.__exit__, None, None, None)

    def _draw(self, draw: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        if not self._drawing:
            return
        try:
            draw(*args, **kwargs)
        except (BrokenPipeError, ValueError, SystemExit):
            # rich answers a broken pipe with SystemExit(1) (stdout now /dev/null); ValueError: a closed stream
            self._drawing = False


def read_records(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Complete JSON lines of ``path`` from byte ``offset`` (a line still being written waits)."""
    if not path.exists():
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    records = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
    return records, offset + end


@contextlib.contextmanager
def _keys() -> Iterator[Any]:
    """Yield a function returning the keys pressed so far (none when stdin is not a terminal)."""
    if not sys.stdin.isatty():
        yield lambda: ""
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield lambda: os.read(fd, 64).decode(errors="ignore") if select.select([fd], [], [], 0)[0] else ""
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def view(run_dir: str | os.PathLike, poll_seconds: float = 0.5, follow: bool = True) -> Dashboard:
    """Show the dashboard of ``run_dir``, following new records until the run finishes or ``q``/Ctrl-C."""
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    cfg = config["config"]
    title = " · ".join(config[key] for key in ("env", "algo", "scheme") if key in config)
    board = Dashboard(config["total_env_steps"], cfg["batch_size"], title, time_limit=cfg.get("train_for_seconds"))
    console = Console()
    records, offset = read_records(run_dir / "metrics.jsonl", 0)
    for record in records:
        board.update(record)
    size = console.size
    with Live(render(board, console.width), console=console, auto_refresh=False) as live, _keys() as pressed:
        try:
            while follow and not board.finished:
                if "q" in pressed().lower():
                    break
                records, offset = read_records(run_dir / "metrics.jsonl", offset)
                for record in records:
                    board.update(record)
                if records or console.size != size:
                    size = console.size
                    live.update(render(board, console.width), refresh=True)
                time.sleep(poll_seconds)
        except KeyboardInterrupt:
            pass
        live.update(render(board, console.width), refresh=True)
    return board
