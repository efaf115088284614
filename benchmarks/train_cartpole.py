"""APPO on CartPole-v1 with vecfast's defaults for vector observations: env steps to a mean return of 475.

The issue's figure: mean return (last 100 episodes) >= 475 within 500k env steps.

    python benchmarks/train_cartpole.py [--seed 1] [--set use_rnn=True rnn_size=64]
"""

from __future__ import annotations

import argparse
import ast
import json
import tempfile
from pathlib import Path

from vecfast.trainers import train

TARGET = 475.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    args = p.parse_args()
    overrides = {k: ast.literal_eval(v) for k, _, v in (item.partition("=") for item in args.set)}
    with tempfile.TemporaryDirectory() as run_dir:
        result = train("CartPole-v1", algo="appo", total_env_steps=args.steps, run_dir=run_dir, seed=args.seed,
                       **overrides)  # fmt: skip
        records = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    reached = next((m["env_steps"] for m in records if m.get("mean_episode_return", 0) >= TARGET), None)
    report = {
        "target_mean_return": TARGET,
        "env_steps_to_target": reached,
        "final_mean_return": result.stats["mean_episode_return"],
        "best_mean_return": max(m.get("mean_episode_return", 0) for m in records),
        "env_steps": result.stats["env_steps"],
        "fps": result.stats["fps"],
        "seconds": result.stats["time"],
        "overrides": overrides,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
