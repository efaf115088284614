"""What several benchmark scripts share: their command-line values (``--set KEY=VALUE`` read by the CLI's own
``--env-kwarg`` rule, ``--seeds 0-2,7``) and result files that grow across sessions, one CSV row appended per
point as soon as it is measured."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from vecfast.command_line import env_kwarg
from vecfast.trainers.run.run_dir import last_checkpoints, load_checkpoint
from vecfast.trainers.tools.plot import training_seconds

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def worktree(revision: str) -> Iterator[Path]:
    """A temporary checkout of ``revision`` (``git worktree``), removed afterwards: an earlier commit's code to run
    beside this checkout's (in a fresh interpreter whose working directory, and first path entry, it is)."""
    with tempfile.TemporaryDirectory(prefix="vecfast-worktree-") as tmp:
        path = Path(tmp) / revision
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), revision], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=True)


def host() -> str:
    """The CPU model and whether it has AVX512-BF16 (VizDoom's and the encoder's speed differ with it)."""
    info = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    return f"{os.cpu_count()}-core {model}{' AVX512-BF16' if 'avx512_bf16' in info else ''}"


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE ...`` as config overrides: each VALUE a Python literal, else a string, as ``vecfast train``'s
    ``--env-kwarg`` reads them."""
    return dict(env_kwarg(item) for item in items)


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,5"`` or a mix: ``"0-2,7"``."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        seeds.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    return seeds


def append_row(csv_path: Path, columns: list[str], row: dict[str, Any]) -> None:
    """Append one row, writing the header first into a new file (a file of other columns is refused, so that two
    benchmarks never mix their rows in one file)."""
    new = not csv_path.exists() or csv_path.stat().st_size == 0
    if not new:
        with open(csv_path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != columns:
            raise ValueError(f"{csv_path} has the columns {header}, not {columns}: write to another --csv")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "a", newline="") as f:
        writer = csv.DictWriter(f, columns)
        if new:
            writer.writeheader()
        writer.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in row.items()})


def rows_of(csv_path: Path, run: str) -> list[dict[str, str]]:
    """The rows of run ``run`` already in the file (none if there is no file)."""
    if not csv_path.exists():
        return []
    with open(csv_path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["run"] == run]


@dataclass(frozen=True)
class Sitting:
    """One sitting of a run, ``minutes`` long. Where the run's time bound spans several sittings (a learning curve
    grown in chunks, ``total_minutes``), the run is given what is left of it as its ``train_for_seconds``, so that
    a schedule by training time (issue 45) spans the whole curve, and is stopped after ``minutes`` as a user would
    stop it (Ctrl-C: it finishes its iteration and saves a checkpoint that the next sitting resumes). Without
    ``total_minutes`` the sitting is the bound."""

    minutes: float
    total_minutes: float | None = None

    def train_for_seconds(self, run_dir: Path) -> float:
        """The run's bound for this sitting: what is left of ``total_minutes`` after its training so far (its
        sittings end to end), else ``minutes``."""
        if self.total_minutes is None:
            return self.minutes * 60
        done = max(training_seconds(run_dir).values(), default=0.0) if (run_dir / "metrics.jsonl").exists() else 0.0
        return max(self.total_minutes * 60 - done, 0.0)

    @contextlib.contextmanager
    def stopped_in_time(self, run_dir: Path) -> Iterator[None]:
        """Run the ``with`` body (the training call), stopping it after :attr:`minutes` where the bound ends later,
        as Ctrl-C would: SIGINT to this process and every process under it (a single process's loop and each rank of
        DD-PPO stop after their iteration and save; the launcher and the env workers leave it to them)."""
        timer = None
        if self.minutes * 60 < self.train_for_seconds(run_dir):
            timer = threading.Timer(self.minutes * 60, _interrupt_process_tree)
            timer.daemon = True
            timer.start()
        try:
            yield
        finally:
            if timer is not None:
                timer.cancel()


def _interrupt_process_tree() -> None:
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGINT)


@dataclass(frozen=True)
class CheckpointPoint:
    """A checkpoint of a run as a point of its curve: the file, its env steps and the training minutes to it (a
    resumed run's sittings end to end)."""

    path: Path
    env_steps: int
    minutes: float


def checkpoints_to_measure(run_dir: Path, measured_steps: set[int]) -> list[CheckpointPoint]:
    """The run's checkpoints whose env steps are not in ``measured_steps``, oldest first."""
    seconds_at = training_seconds(run_dir)
    steps_of = {path: load_checkpoint(path)["env_steps"] for path in last_checkpoints(run_dir)}
    return [
        CheckpointPoint(path, steps, seconds_at.get(steps, float("nan")) / 60)
        for path, steps in sorted(steps_of.items(), key=lambda item: item[1])
        if steps not in measured_steps
    ]


def _steady_span(run_dir: Path, warmup: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run's first metrics record after ``warmup`` seconds and its last (leaving out the launch, the envs'
    start and the first updates)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "env_frames" in r]
    return next(r for r in rows if r["time"] >= warmup), rows[-1]


def steady_fps(run_dir: Path, warmup: float) -> float:
    """A run's env frames per second over its steady span."""
    start, end = _steady_span(run_dir, warmup)
    return (end["env_frames"] - start["env_frames"]) / (end["time"] - start["time"])


def steady_share(run_dir: Path, warmup: float, timer: str) -> float:
    """The share of the steady span's wall time that cumulative timer ``timer`` (``time_inference``) counted."""
    start, end = _steady_span(run_dir, warmup)
    return (end[timer] - start[timer]) / (end["time"] - start["time"])


class CpuMeter:
    """CPU seconds the processes of a run take, by role: the learner's process, the env workers it forked (one
    machine), the samplers (Ray actors and the env workers forked from them, which inherit their title), VizDoom's
    game processes, and Ray's own daemons (raylet, GCS, idle workers, agents). Sampled every half second, so a
    process that lives less than that is missed."""

    def __init__(self) -> None:
        self.me = os.getpid()
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}  # a process's role and CPU seconds when last seen (a Ray
        # worker starts idle, becomes a sampler, and may be titled idle again as it exits: its first role but Ray's)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _role(self, proc: psutil.Process) -> str | None:
        name = proc.name()
        if proc.pid == self.me:
            return "learner"
        if name == "vizdoom":
            return "vizdoom"
        if name.startswith(("ray::PolicySampler", "ray::EnvSampler")):
            return "samplers"
        if self.me in {parent.pid for parent in proc.parents()}:
            return "env workers"
        if name in ("raylet", "gcs_server") or name.startswith("ray::") or "/ray/" in " ".join(proc.cmdline()[:3]):
            return "ray"
        return None

    def _sample(self) -> None:
        for proc in psutil.process_iter():
            try:
                seen = self.last.get(proc.pid, ("ray", 0.0))[0]
                role = seen if seen != "ray" else self._role(proc)  # a worker's role sticks once it has one
                if role is None:
                    continue
                times = proc.cpu_times()
                used = times.user + times.system
            except psutil.Error:
                continue
            self.first.setdefault(proc.pid, used)
            self.last[proc.pid] = (role, used)

    def _run(self) -> None:
        while not self.stop_event.wait(0.5):
            self._sample()

    def stop(self) -> dict[str, float]:
        """CPU seconds by role since the meter started."""
        self.stop_event.set()
        self.thread.join()
        self._sample()
        used: dict[str, float] = {}
        for pid, (role, end) in self.last.items():
            used[role] = used.get(role, 0.0) + end - self.first[pid]
        return used
