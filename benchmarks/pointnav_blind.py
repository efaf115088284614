"""The blind PointNav agent: the goal sensor only (no depth), an MLP, sync PPO with Adam. A diagnostic of the
learner apart from vision, and the baseline that a seeing agent must beat.

    python benchmarks/pointnav_blind.py --scenes open --frames 2000000 --seeds 0-2
    python benchmarks/pointnav_blind.py --scenes default --frames 2000000 --seeds 0

``--scenes open``: rooms without inner walls or furniture (``vecfast nav make-scenes --open``), where the
straight line is the shortest path and a goal-seeking policy needs no sight: target success >= 0.9 on
the held-out split within 2M frames. ``--scenes default``: the training set every PointNav run uses,
where the blind agent learns what it can without seeing walls (the baseline for depth).

Each seed trains ``vecfast.train`` on ``--num-envs`` envs of the train split with the goal observation
read as (distance, cos, sin), unnormalised; then evaluates the untrained policy and the trained one on
``--episodes`` val episodes, with actions sampled and most likely. Rows go to ``--csv`` (appended).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import parse_overrides
from gymnasium.wrappers.vector import FilterObservation

import vecfast
from vecfast.envs.nav.scenes import SPLIT_SEEDS, make_scenes  # generator streams: no scene in both
from vecfast.trainers import ActorCritic, evaluate, train
from vecfast.trainers.registry import resolve
from vecfast.trainers.run.defaults import ConfigLayers

ENV_ID = "vecfast/PointNav-v0"
GOAL = "pointgoal_with_gps_compass"
BLIND = {  # the goal as habitat-lab's PointNav policy reads it: raw distance, the angle as (cos, sin)
    "polar_inputs": (GOAL,),
    "unnormalized_inputs": (GOAL,),
    "optimizer": "adam",
    "use_rnn": False,
}


def open_scenes(out: Path, num_train: int, num_val: int) -> Path:
    """Open-room scenes in ``out/train`` and ``out/val``."""
    for split, num in (("train", num_train), ("val", num_val)):
        make_scenes(num, seed=SPLIT_SEEDS[split], out_dir=out / split, open_rooms=True)
    return out


def blind_env(num_envs: int, split: str, scenes: Path | None) -> Any:
    """PointNav's batched env with the depth sensor taken away."""
    kwargs = {"split": split} | ({"scenes": str(scenes)} if scenes is not None else {})
    return FilterObservation(vecfast.make_vec(ENV_ID, num_envs, **kwargs), [GOAL])


def val_metrics(policy: ActorCritic, scenes: Path | None, episodes: int, num_envs: int) -> dict[str, float]:
    out = {}
    for mode, deterministic in (("sampled", False), ("argmax", True)):
        result = evaluate(policy, lambda: blind_env(num_envs, "val", scenes), episodes=episodes,
                          deterministic=deterministic)  # fmt: skip
        out.update({f"success_{mode}": result.success, f"spl_{mode}": result.spl,
                    f"length_{mode}": result.mean_length})  # fmt: skip
    return out


def run_seed(seed: int, frames: int, scenes: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    env = blind_env(args.num_envs, "train", scenes)
    layers = ConfigLayers(resolve("ppo"), None, user={**BLIND, **args.overrides})  # as train's
    cfg = layers.config(env.single_observation_space)
    untrained = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    env.close()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vecfast-blind-") as tmp:
        result = train(lambda: blind_env(args.num_envs, "train", scenes), algo="ppo", total_env_steps=frames,
                       run_dir=Path(tmp) / "run", seed=seed, **BLIND, **args.overrides)  # fmt: skip
    minutes = (time.perf_counter() - start) / 60
    before = val_metrics(untrained, scenes, args.episodes, args.eval_envs)
    after = val_metrics(result.policy, scenes, args.episodes, args.eval_envs)
    return {"scenes": args.scenes, "seed": seed, "frames": result.stats["env_frames"], "minutes": round(minutes, 1),
            "train_return": result.stats["mean_episode_return"],
            **{f"untrained_{k}": v for k, v in before.items()}, **after}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", choices=["open", "default"], default="open")
    p.add_argument("--frames", type=int, default=2_000_000)
    p.add_argument("--seeds", default="0", help="e.g. 0-2 or 0,3")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--episodes", type=int, default=200, help="val episodes per evaluation")
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--num-train-scenes", type=int, default=64, help="open rooms only")
    p.add_argument("--csv", type=Path, help="append each seed's row here")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides (Python literals)")
    args = p.parse_args()

    args.overrides = parse_overrides(args.set)
    seeds = [s for part in args.seeds.split(",") for s in _range(part)]
    with tempfile.TemporaryDirectory(prefix="vecfast-open-scenes-") as tmp:
        scenes = open_scenes(Path(tmp), args.num_train_scenes, 16) if args.scenes == "open" else None
        for seed in seeds:
            row = run_seed(seed, args.frames, scenes, args)
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
            if args.csv is not None:
                new = not args.csv.exists()
                with open(args.csv, "a", newline="") as f:
                    writer = csv.DictWriter(f, fieldnames=list(row))
                    if new:
                        writer.writeheader()
                    writer.writerow(row)
    sys.exit(0)


def _range(part: str) -> list[int]:
    lo, dash, hi = part.strip().partition("-")
    return list(range(int(lo), int(hi) + 1)) if dash else [int(lo)]


if __name__ == "__main__":
    main()
