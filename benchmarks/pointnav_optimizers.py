"""PointNav's depth agent under optimiser settings, side by side: how soon it leaves the STOP-at-once start, and
where it stands after a fixed training time.

    python benchmarks/pointnav_optimizers.py --minutes 30 --episodes 200
    python benchmarks/pointnav_optimizers.py --minutes 30 --only lamb adam --set normalize_advantage=False

Each setting trains ``vecfast train vecfast/PointNav-v0 --algo ddppo --num-processes 1`` with the env's recipe
(``vecfast.trainers.run.defaults.POINTNAV_PRESET``) plus its own overrides, all at once (one process each, one
torch thread each: the machine's load is the same for all), for ``--minutes`` of training. Per setting:
the env frames at which the mean episode length (last 100 episodes) first exceeds 10 steps (a random
policy's episodes, which STOP with probability 1/4 per step, last ~4), and the success and SPL of sampled
actions on ``--episodes`` episodes of the training scenes and of the held-out ones. Rows are appended to
``--csv`` (default ``benchmarks/results/pointnav_optimizers.csv``).

The settings: ``lamb``, the recipe's LAMB (with the exemption of tensors that start too small for the
trust ratio: Fixup's zeroed convolutions, the actor's output layer); ``adam``, Adam at the learning rate
of DD-PPO's reference PointNav agents (2.5e-4, no square-root scaling).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import parse_overrides

from vecfast.trainers import evaluate

ENV_ID = "vecfast/PointNav-v0"
SETTINGS: dict[str, dict[str, Any]] = {
    "lamb": {},
    "adam": {"optimizer": "adam", "learning_rate": 2.5e-4, "lr_scaling": "none"},
}
LEAVES_STOP_AT_ONCE = 10.0  # mean episode length that marks it


def train_command(run_dir: Path, seconds: float, seed: int, overrides: dict[str, Any]) -> list[str]:
    options = [(f"--{key}" if value else f"--no-{key}") if isinstance(value, bool) else f"--{key}={value}"
               for key, value in overrides.items()]  # fmt: skip
    return [sys.executable, "-m", "vecfast", "train", ENV_ID, "--algo", "ddppo", "--num-processes", "1",
            "--total-env-steps", str(10**10), "--train_for_seconds", str(seconds), "--seed", str(seed),
            "--run-dir", str(run_dir), "--no-live", "--print_every_sec", "60", *options]  # fmt: skip


def frames_to_leave_stop(run_dir: Path) -> int | None:
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("mean_episode_length", 0.0) > LEAVES_STOP_AT_ONCE:
            return int(record["env_frames"])
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", nargs="*", choices=list(SETTINGS), default=list(SETTINGS))
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every setting")
    p.add_argument("--out", type=Path, default=Path("runs/pointnav_optimizers"), help="the runs' directories")
    p.add_argument("--csv", type=Path, default=Path("benchmarks/results/pointnav_optimizers.csv"))
    args = p.parse_args()
    common = parse_overrides(args.set)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = {name: args.out / f"{stamp}_{name}_seed{args.seed}" for name in args.only}
    procs = [subprocess.Popen(train_command(run, args.minutes * 60, args.seed, {**SETTINGS[name], **common}),
                              stdout=subprocess.DEVNULL)  # progress lines on stderr; their JSON summary is read here
             for name, run in runs.items()]  # fmt: skip
    for proc in procs:
        if proc.wait() != 0:
            sys.exit(f"a training run failed (exit {proc.returncode})")
    for name, run in runs.items():
        last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        row: dict[str, Any] = {"setting": name, "seed": args.seed, "minutes": args.minutes,
                               "env_frames": last["env_frames"], "frames_to_leave_stop": frames_to_leave_stop(run),
                               "overrides": json.dumps({**SETTINGS[name], **common})}  # fmt: skip
        for split in ("train", "val"):
            result = evaluate(run, episodes=args.episodes, deterministic=False, env_kwargs={"split": split})
            row.update({f"{split}_success": result.success, f"{split}_spl": result.spl})
        print(row, flush=True)
        new = not args.csv.exists()
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)


if __name__ == "__main__":
    main()
