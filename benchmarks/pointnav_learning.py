"""DD-PPO on PointNav with the Large Batch Simulation recipe: success and SPL on held-out scenes over env frames
and wall-clock minutes, with actions sampled and deterministic.

    python benchmarks/pointnav_learning.py --minutes 60 --num-processes 2 --checkpoint-every-min 5 --episodes 200

Trains ``vecfast.train("vecfast/PointNav-v0", algo="ddppo", num_processes=N)`` with the env's recipe
(``vecfast.trainers.run.defaults.POINTNAV_PRESET``: SE-ResNet9 over raw 64x64 depth, Adam, square-root lr
scaling with warm-up and cosine decay, rollouts of 32 in 2 minibatches) for ``--minutes``, keeping a
checkpoint every ``--checkpoint-every-min``. Then it evaluates the untrained policy and every
checkpoint on the validation scenes (``split="val"``, never trained on) with
``vecfast.evaluate(..., episodes=--episodes)``, twice: actions sampled (as the reference code
evaluates) and deterministic (the most likely action, which can loop where sampling does not).

Each point is appended to ``--csv`` (default ``benchmarks/results/pointnav_curve.csv``) as soon as
it is evaluated: run, seed, minutes, env frames, episodes, then success, SPL, mean return and mean
episode length of each mode, and the host (CPU model and flags). Points of the run already in the file are not
evaluated again, so a curve grows in chunks: ``--run-dir DIR --resume --minutes 40`` trains on from the newest
checkpoint and adds the new checkpoints' rows (minutes count the sittings end to end), and ``--minutes 0``
evaluates what a stopped chunk left unevaluated. ``--total-minutes`` makes the curve's sittings one run bounded by
that time, so that the recipe's cosine decay (which follows training time where ``train_for_seconds`` bounds a run)
spans the curve: each sitting trains ``--minutes`` of it and is stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Sitting, append_row, host, parse_overrides, rows_of

from vecfast.trainers import ActorCritic, TrainConfig, evaluate, train
from vecfast.trainers.run.policies import load_policy
from vecfast.trainers.run.run_dir import last_checkpoints, load_checkpoint, space_from_data
from vecfast.trainers.tools.plot import training_seconds

ENV_ID = "vecfast/PointNav-v0"
CSV = Path(__file__).parent / "results" / "pointnav_curve.csv"
MODES = {"sampled": False, "deterministic": True}  # column suffix -> evaluate's deterministic
COLUMNS = (
    ["run", "seed", "minutes", "env_frames", "episodes"]
    + [f"{name}_{mode}" for mode in MODES for name in ("success", "spl", "return", "length")]
    + ["host"]
)


def untrained_policy(run_dir: Path) -> ActorCritic:
    """A fresh model of the run's config (as its first update would have started from)."""
    state = load_checkpoint(run_dir)
    cfg = TrainConfig.from_overrides(**state["config"])
    spaces = (space_from_data(state["observation_space"]), space_from_data(state["action_space"]))
    return ActorCritic(*spaces, cfg).eval()


def evaluated_frames(csv_path: Path, run: str) -> set[int]:
    """The env frames of the run's points already in the file."""
    return {int(row["env_frames"]) for row in rows_of(csv_path, run)}


def curve(run_dir: Path, episodes: int, num_envs: int, csv_path: Path) -> list[dict[str, Any]]:
    """Evaluate the run's points not yet in ``csv_path``, appending each as soon as it is done."""
    config = json.loads((run_dir / "config.json").read_text())
    frameskip = config.get("env_frameskip", 1)
    env_kwargs = {**config.get("env_kwargs", {}), "split": "val"}  # the run's scenes' held-out split
    seconds_at = training_seconds(run_dir)  # a resumed run's sittings end to end
    done = evaluated_frames(csv_path, run_dir.name)
    points = [(0, None)] + sorted((load_checkpoint(p)["env_steps"], p) for p in last_checkpoints(run_dir))
    rows = []
    for steps, path in points:
        if steps * frameskip in done:
            continue
        policy = untrained_policy(run_dir) if path is None else load_policy(path)
        minutes = seconds_at.get(steps, math.nan) / 60 if steps else 0.0
        row: dict[str, Any] = {
            "run": run_dir.name,
            "seed": config["config"].get("seed"),
            "minutes": minutes,
            "env_frames": steps * frameskip,
            "episodes": episodes,
        }
        for mode, deterministic in MODES.items():
            result = evaluate(
                policy,
                env=ENV_ID,
                episodes=episodes,
                deterministic=deterministic,
                num_envs=num_envs,
                env_kwargs=env_kwargs,
            )
            row[f"success_{mode}"] = result.success
            row[f"spl_{mode}"] = result.spl
            row[f"return_{mode}"] = result.mean_return
            row[f"length_{mode}"] = result.mean_length
        row["host"] = host()
        append_row(csv_path, COLUMNS, row)
        rows.append(row)
        print(
            f"{minutes:7.1f} min {row['env_frames']:>11,} frames  "
            + "  ".join(
                f"{mode}: success {row[f'success_{mode}']:.3f} SPL {row[f'spl_{mode}']:.3f} "
                f"return {row[f'return_{mode}']:6.2f} length {row[f'length_{mode}']:5.1f}"
                for mode in MODES
            ),
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="training time (0: evaluate --run-dir only)")
    parser.add_argument("--num-processes", type=int, default=2, help="DD-PPO ranks")
    parser.add_argument("--checkpoint-every-min", type=float, default=5.0)
    parser.add_argument("--episodes", type=int, default=200, help="validation episodes per point of the curve")
    parser.add_argument("--eval-envs", type=int, default=64)
    parser.add_argument("--run-dir", type=Path)
    parser.add_argument("--resume", action="store_true", help="train --run-dir's run on for --minutes more")
    parser.add_argument(
        "--total-minutes",
        type=float,
        help="the run's time bound across its sittings (default: each sitting's --minutes is its bound), so that "
        "the recipe's cosine schedule spans the whole curve: each sitting trains --minutes of it",
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--csv", type=Path, default=CSV, help="the curve's file, one row appended per point")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or Path(tmp) / time.strftime("pointnav_%Y%m%d-%H%M%S")  # names the run's rows
        if args.minutes > 0:
            sitting = Sitting(args.minutes, args.total_minutes)
            with sitting.stopped_in_time(run_dir):
                result = train(
                    ENV_ID,
                    algo="ddppo",
                    num_processes=args.num_processes,
                    total_env_steps=10**10,
                    run_dir=run_dir,
                    resume=args.resume,
                    train_for_seconds=sitting.train_for_seconds(run_dir),
                    save_every_sec=args.checkpoint_every_min * 60,
                    keep_checkpoints=1000,
                    save_best_every_sec=None,
                    **parse_overrides(args.set),
                )
                print(f"trained {result.stats['env_frames']:,} frames at {result.stats['fps']:,.0f} frames/s")
        rows = curve(run_dir, args.episodes, args.eval_envs, args.csv)
        if args.json:
            args.json.write_text(json.dumps({"run_dir": str(run_dir), "curve": rows}, indent=2))


if __name__ == "__main__":
    main()
