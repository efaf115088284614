"""A long APPO run on DoomBasic that heals: a VizDoom game killed every 2 minutes and a worker every 15 (issue 36).

Each invocation trains one chunk (``--chunk-minutes``, at most 40) of the run in ``--run-dir``, resuming it when it
exists, until the run's training time reaches ``--total-minutes``. The kill schedule follows the run's own training
time, so it carries on across chunks. Every minute a row goes to ``--csv`` at once: the run's env steps, mean
return and ``restarts`` (from its ``metrics.jsonl``), the kills so far and the trainer's RSS; at the end of a chunk
a row says what was left over (processes, VizDoom's /dev/shm entries). ``--undisturbed`` runs the same without
kills: the curve to compare with.

Kills hit the training envs: a live worker of theirs, or a game of one (a worker whose games used CPU in the last
second; the evaluation envs idle between evaluations). A game of a worker that was killed already is not a new
failure: until the owner replaces that worker, its games live on, orphaned, and a kill of one would be counted
twice (chunks 1 and 2, to 80 minutes, chose among all games and counted 5 such kills, one per worker kill).

    python benchmarks/long_run_kills.py --run-dir runs/doombasic_kills --chunk-minutes 40
    python benchmarks/long_run_kills.py --run-dir runs/doombasic_calm --chunk-minutes 40 --undisturbed
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_row, host, rows_of  # noqa: E402

CSV = Path(__file__).parent / "results" / "long_run_kills.csv"
WORKER_KILL_DELAY = 30.0  # seconds after each --worker-kill-every mark
COLUMNS = [
    "run", "mode", "minutes", "env_steps", "mean_return", "eval_return", "eval_seconds", "restarts", "game_kills",
    "worker_kills", "trainer_rss_mb", "left_processes", "left_shm", "host",
]  # fmt: skip


def run_figures(run_dir: Path) -> dict:
    """The row's figures from the run's ``metrics.jsonl`` (read once): its env steps, mean return and restarts, its
    latest evaluation's mean return and the seconds all its evaluations took."""
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    last = rows[-1] if rows else {}
    evaluated = [row for row in rows if "eval/mean_return" in row]
    return {
        "env_steps": last.get("env_steps", 0),
        "mean_return": last.get("mean_episode_return", float("nan")),
        "eval_return": evaluated[-1]["eval/mean_return"] if evaluated else float("nan"),
        "eval_seconds": sum(row["eval/seconds"] for row in evaluated),
        "restarts": last.get("restarts", 0),
    }


def busy_workers(trainer: psutil.Process, cpu_before: dict[int, float]) -> list[psutil.Process]:
    """The trainer's env workers whose games used CPU since the last call (``cpu_before``, updated): the training
    envs' live workers."""
    busy = []
    for worker in trainer.children():
        games = [p for p in worker.children(recursive=True) if p.name() == "vizdoom"]
        cpu = sum(sum(g.cpu_times()[:2]) for g in games)
        if games and cpu > cpu_before.get(worker.pid, float("inf")):
            busy.append(worker)
        cpu_before[worker.pid] = cpu
    return busy


def games_of(workers: list[psutil.Process]) -> list[psutil.Process]:
    return [p for w in workers for p in w.children(recursive=True) if p.name() == "vizdoom"]


def shm_names() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("ViZDoom")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--chunk-minutes", type=float, default=40.0)
    parser.add_argument("--total-minutes", type=float, default=120.0)
    parser.add_argument("--game-kill-every", type=float, default=120.0, help="seconds of training between game kills")
    parser.add_argument("--worker-kill-every", type=float, default=900.0, help="seconds between worker kills")
    parser.add_argument("--undisturbed", action="store_true", help="no kills: the curve to compare with")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-every", type=int, default=100_000, help="env steps between evaluations (10 episodes; 0: none)"
    )
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    if args.chunk_minutes > 40:
        parser.error("chunks are at most 40 minutes: a session must be able to commit each one's rows")

    run = args.run_dir.name
    mode = "undisturbed" if args.undisturbed else "kills"
    previous = rows_of(args.csv, run)
    minutes_before = float(previous[-1]["minutes"]) if previous else 0.0
    game_kills = int(previous[-1]["game_kills"]) if previous else 0
    worker_kills = int(previous[-1]["worker_kills"]) if previous else 0
    chunk = min(args.chunk_minutes, args.total_minutes - minutes_before)
    if chunk <= 0:
        print(f"{run} has trained {minutes_before:.1f} of {args.total_minutes} minutes already")
        return
    resume = (args.run_dir / "metrics.jsonl").exists()
    command = [sys.executable, "-m", "vecfast", "train"]
    command += ["--resume", str(args.run_dir)] if resume else ["vecfast/DoomBasic-v0", "--algo", "appo"]
    command += ["--run-dir", str(args.run_dir)] if not resume else []
    command += ["--total-env-steps", str(10**10), "--train_for_seconds", str(chunk * 60), "--no-live"]
    command += ["--seed", str(args.seed)] if not resume else []
    if args.eval_every and not resume:
        command += ["--eval_every_env_steps", str(args.eval_every), "--eval_episodes", "10"]
    shm_before = shm_names()
    log = open(args.run_dir.with_name(f"{run}.log"), "a")  # noqa: SIM115  (the trainer's output, while it runs)
    trainer_proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    trainer = psutil.Process(trainer_proc.pid)
    start = time.monotonic()
    next_row = 60.0
    rss = 0.0
    cpu_before: dict[int, float] = {}
    while trainer_proc.poll() is None:
        time.sleep(1.0)
        elapsed = time.monotonic() - start
        training = (minutes_before * 60) + elapsed
        try:
            rss = trainer.memory_info().rss / 2**20 or rss  # 0 once it exited, before it is reaped
            if not args.undisturbed:
                workers = busy_workers(trainer, cpu_before)
                if training >= (game_kills + 1) * args.game_kill_every and games_of(workers):
                    games_of(workers)[0].kill()
                    game_kills += 1
                # 30 s after the game kill due at the same time (every 30 min), not with it: it could hit that
                # game's worker before the game's failure was reported, and two kills would be one failure
                elif training >= (worker_kills + 1) * args.worker_kill_every + WORKER_KILL_DELAY and workers:
                    os.kill(workers[-1].pid, signal.SIGKILL)
                    worker_kills += 1
        except psutil.Error:
            continue
        if elapsed >= next_row:
            next_row += 60.0
            append_row(
                args.csv,
                COLUMNS,
                {
                    "run": run, "mode": mode, "minutes": training / 60, **run_figures(args.run_dir),
                    "game_kills": game_kills, "worker_kills": worker_kills, "trainer_rss_mb": rss,
                    "left_processes": "", "left_shm": "", "host": host(),
                },
            )  # fmt: skip
    elapsed = time.monotonic() - start
    time.sleep(2.0)
    left = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "vizdoom"]
    figures = run_figures(args.run_dir)
    append_row(
        args.csv,
        COLUMNS,
        {
            "run": run, "mode": mode, "minutes": minutes_before + elapsed / 60, **figures,
            "game_kills": game_kills, "worker_kills": worker_kills, "trainer_rss_mb": rss,
            "left_processes": len(left), "left_shm": len(shm_names() - shm_before), "host": host(),
        },
    )  # fmt: skip
    print(f"{run}: exit {trainer_proc.returncode}, {figures['env_steps']:,} env steps, restarts "
          f"{figures['restarts']}, kills {game_kills} games + {worker_kills} workers")  # fmt: skip


if __name__ == "__main__":
    main()
