"""DD-PPO on PointNav with the Large Batch Simulation recipe: success and SPL on held-out scenes over env frames
and wall-clock minutes.

    python benchmarks/pointnav_learning.py --minutes 60 --num-processes 2 --checkpoint-every-min 5 --episodes 200

Trains ``vecfast.train("vecfast/PointNav-v0", algo="ddppo", num_processes=N)`` with the env's recipe
(``vecfast.trainers.defaults.POINTNAV_RECIPE``: SE-ResNet9 over 64x64 depth, LAMB, square-root lr
scaling with warm-up and cosine decay, rollouts of 32 in 2 minibatches) for ``--minutes``, keeping a
checkpoint every ``--checkpoint-every-min``. Then it evaluates the untrained policy and every
checkpoint on the validation scenes (``split="val"``, never trained on) with
``vecfast.evaluate(..., episodes=--episodes)`` and prints the curve: minutes, env frames, success,
SPL, return. ``--run-dir`` keeps the run (and evaluates an existing one with ``--minutes 0``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from train_appo import parse_overrides

from vecfast.trainers import ActorCritic, TrainConfig, evaluate, train
from vecfast.trainers.plot import training_seconds
from vecfast.trainers.run_dir import last_checkpoints, load_checkpoint, space_from_data
from vecfast.trainers.training import load_policy

ENV_ID = "vecfast/PointNav-v0"


def untrained_policy(run_dir: Path) -> ActorCritic:
    """A fresh model of the run's config (as its first update would have started from)."""
    state = load_checkpoint(run_dir)
    cfg = TrainConfig.from_overrides(**state["config"])
    spaces = (space_from_data(state["observation_space"]), space_from_data(state["action_space"]))
    return ActorCritic(*spaces, cfg).eval()


def curve(run_dir: Path, episodes: int, num_envs: int) -> list[dict[str, Any]]:
    seconds_at = training_seconds(run_dir)  # a resumed run's sittings end to end
    points = [(0, 0.0, untrained_policy(run_dir))]
    for path in sorted(last_checkpoints(run_dir)):
        steps = load_checkpoint(path)["env_steps"]
        points.append((steps, seconds_at.get(steps, float("nan")) / 60, load_policy(path)))
    rows = []
    for steps, minutes, policy in points:
        result = evaluate(policy, env=ENV_ID, episodes=episodes, num_envs=num_envs, env_kwargs={"split": "val"})
        row = {
            "minutes": minutes,
            "env_frames": steps,
            "success": result.success,
            "spl": result.spl,
            "mean_return": result.mean_return,
        }
        rows.append(row)
        print(
            f"{minutes:7.1f} min {steps:>11,} frames  success {row['success']:.3f}  SPL {row['spl']:.3f}  "
            f"return {row['mean_return']:6.2f}",
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
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        if args.minutes > 0:
            result = train(
                ENV_ID,
                algo="ddppo",
                num_processes=args.num_processes,
                total_env_steps=10**10,
                run_dir=run_dir,
                resume=args.resume,
                train_for_seconds=args.minutes * 60,
                save_every_sec=args.checkpoint_every_min * 60,
                keep_checkpoints=1000,
                save_best_every_sec=None,
                **parse_overrides(args.set),
            )
            print(f"trained {result.stats['env_frames']:,} frames at {result.stats['fps']:,.0f} frames/s", flush=True)
        rows = curve(run_dir, args.episodes, args.eval_envs)
        if args.json:
            args.json.write_text(json.dumps({"run_dir": str(run_dir), "curve": rows}, indent=2))


if __name__ == "__main__":
    main()
