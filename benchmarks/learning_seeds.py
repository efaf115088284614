"""Learning reliability: train one env with vecfast's defaults for several seeds, one after another; a table of seeds.

Each seed runs ``vecfast.train(env, algo=..., total_env_steps=..., seed=s)`` in its own temporary run
directory and reads its ``metrics.jsonl``. Per seed: the final mean return (the trainer's running
mean over the last ``stats_avg`` episodes when training ends), the best mean return seen, the env
steps (and frames) when the mean first reached the target, and the wall time. Then the summary:
how many seeds end at or above the target, the median and the worst final return.

Targets (``--target`` and ``--steps``/``--frames`` override them):

- ``CartPole-v1``: mean return >= 475 at 500k env steps, in at least 9 of 10 seeds.
- ``vecfast/DoomBasic-v0``: mean return >= 70 at 1M frames (250k env steps at frame skip 4), every
  seed of 3. Sample Factory's reference APPO agents on doom_basic score 0.74-0.77 (+/- 0.10-0.12)
  in its 0.01 reward scale, i.e. 74-77 in VizDoom's units, which vecfast reports; 70 is that level
  less half its spread. A kill is +106 less 1 per tic, a miss -5, a timeout ~-300, so a mean of 70
  means nearly every episode ends in a quick kill.

    python benchmarks/learning_seeds.py CartPole-v1 --seeds 0-9 --json benchmarks/results/learning_seeds_cartpole.json
    python benchmarks/learning_seeds.py vecfast/DoomBasic-v0 --seeds 0-2 \
        --json benchmarks/results/learning_seeds_doombasic.json
    python benchmarks/learning_seeds.py CartPole-v1 --seeds 0,3 --set lr_schedule=linear_decay
    python benchmarks/learning_seeds.py CartPole-v1 --ray-nodes 2 --seeds 0-4 --json FILE   # samplers on Ray
    python benchmarks/learning_seeds.py CartPole-v1 --algo ddppo --num-processes 2 \
        --json benchmarks/results/learning_seeds_cartpole_ddppo.json \
        --curves benchmarks/results/learning_curves_cartpole_ddppo.csv

``--curves FILE.csv`` appends each seed's learning curve to FILE (a ``run`` column, ``seed<N>``, and the keys in
``CURVE_KEYS``), thinned to at most ``CURVE_ROWS`` evenly spaced rows (the last always kept): data to commit and
draw with ``benchmarks/plot_csv.py FILE... --median``, not run directories.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_AUTH_MODE", "token")  # --ray-nodes' token authentication, read when ray is imported
from common import append_row, parse_overrides, parse_seeds  # noqa: E402

import vecfast  # noqa: E402, F401  (registers the vecfast/ ids)
from vecfast.trainers import train  # noqa: E402

# env id -> (target mean return, env steps or None, frames or None, seeds that must reach it out of 10 / of all)
TARGETS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {"target": 475.0, "steps": 500_000, "frames": None, "required": 0.9},
    "vecfast/DoomBasic-v0": {"target": 70.0, "steps": None, "frames": 1_000_000, "required": 1.0},
}


CURVE_KEYS = ("env_steps", "env_frames", "time", "episodes", "mean_episode_return")
CURVE_ROWS = 300


def thin(rows: list[Any], at_most: int = CURVE_ROWS) -> list[Any]:
    """At most ``at_most`` of ``rows``, evenly spaced by index; the first and the last always among them."""
    if len(rows) <= at_most:
        return list(rows)
    if at_most < 2:
        return rows[-1:]
    return [rows[round(i * (len(rows) - 1) / (at_most - 1))] for i in range(at_most)]


def append_curve(records: list[dict[str, Any]], seed: int, out: Path) -> None:
    """Append to ``out`` (a CSV) the seed's rows that have a mean return, with only ``CURVE_KEYS``, thinned
    (:func:`thin`)."""
    rows = [m for m in records if "mean_episode_return" in m]
    for m in thin(rows):
        append_row(out, ["run", *CURVE_KEYS], {"run": f"seed{seed}", **{k: m.get(k, "") for k in CURVE_KEYS}})


def frame_skip(env_id: str) -> int:
    """Frames per env step of ``env_id`` (its ``frame_skip`` attribute, else 1)."""
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        return int(getattr(env.unwrapped, "frame_skip", 1))
    finally:
        env.close()


def run_seed(
    env_id: str,
    algo: str,
    steps: int,
    seed: int,
    target: float,
    overrides: dict[str, Any],
    keep: Path | None,
    num_processes: int | None = None,
    curves: Path | None = None,
) -> dict[str, Any]:
    start = time.perf_counter()
    launch = {} if num_processes is None else {"num_processes": num_processes}
    with tempfile.TemporaryDirectory(prefix="vecfast-seeds-") as tmp:
        run_dir = keep / f"seed{seed}" if keep is not None else Path(tmp) / "run"
        result = train(env_id, algo=algo, total_env_steps=steps, run_dir=run_dir, seed=seed, **launch, **overrides)
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        if curves is not None:
            append_curve(records, seed, curves)
    returns = [(m["env_steps"], m.get("env_frames", m["env_steps"]), m["mean_episode_return"])
               for m in records if "mean_episode_return" in m]  # fmt: skip
    reached = next(((s, f) for s, f, r in returns if r >= target), (None, None))
    return {
        "seed": seed,
        "final_mean_return": result.stats["mean_episode_return"],
        "best_mean_return": max((r for _, _, r in returns), default=float("nan")),
        "env_steps_to_target": reached[0],
        "env_frames_to_target": reached[1],
        "env_steps": result.stats["env_steps"],
        "env_frames": result.stats["env_frames"],
        "episodes": result.stats["episodes"],
        "wall_seconds": time.perf_counter() - start,
    }


def row(r: dict[str, Any], frames: bool) -> str:
    to = r["env_frames_to_target"] if frames else r["env_steps_to_target"]
    to_text = "-" if to is None else f"{to / 1000:,.0f}k"
    return (f"| {r['seed']} | {r['final_mean_return']:.1f} | {r['best_mean_return']:.1f} | {to_text} | "
            f"{r['wall_seconds']:.0f} s |")  # fmt: skip


def summary(rows: list[dict[str, Any]], target: float, required: float) -> dict[str, Any]:
    finals = [r["final_mean_return"] for r in rows]
    met = sum(f >= target for f in finals)
    needed = -(-round(required * len(rows) * 1000) // 1000)  # ceil, robust to 0.9 * 10 = 9.000000000000002
    return {
        "seeds": len(rows),
        "met": met,
        "needed": needed,
        "passed": met >= needed,
        "median_final_mean_return": statistics.median(finals),
        "worst_final_mean_return": min(finals),
        "wall_seconds": sum(r["wall_seconds"] for r in rows),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("env", nargs="?", default="CartPole-v1")
    p.add_argument("--algo", default="appo")
    p.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,3,5")
    p.add_argument("--steps", type=int, help="env steps per seed (default: the env's target)")
    p.add_argument("--frames", type=int, help="env frames per seed instead (env steps x frame skip)")
    p.add_argument("--target", type=float, help="mean return to reach (default: the env's)")
    p.add_argument("--required", type=float, help="fraction of seeds that must end >= target (default: the env's)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--json", type=Path, help="also write the table and summary here")
    p.add_argument("--keep-runs", type=Path, help="keep each seed's run directory as DIR/seed<N> (default: temporary)")
    p.add_argument("--curves", type=Path, help="append each seed's thinned learning curve to this CSV")
    p.add_argument("--num-processes", type=int, help="ranks of a distributed scheme (algo=ddppo), on this machine")
    p.add_argument("--ray-nodes", type=int, help="start this many Ray nodes here (1 CPU each) and sample on them: "
                   "one sampler per node (algo=appo)")  # fmt: skip
    args = p.parse_args()
    if args.ray_nodes:
        from vecfast.cluster.local_nodes import LocalNodes

        with LocalNodes(num_nodes=args.ray_nodes, num_cpus=1) as nodes:
            args.set = [*args.set, f"ray_address={nodes.address}", f"num_samplers={args.ray_nodes}"]
            run(p, args)
    else:
        run(p, args)


def run(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:

    known = TARGETS.get(args.env, {"target": None, "steps": 1_000_000, "frames": None, "required": 1.0})
    target = args.target if args.target is not None else known["target"]
    if target is None:
        p.error(f"no known target for {args.env}: pass --target")
    required = args.required if args.required is not None else known["required"]
    skip = frame_skip(args.env)
    frames = args.frames if args.frames is not None else (None if args.steps is not None else known["frames"])
    steps = args.steps if args.steps is not None else (known["steps"] if frames is None else -(-frames // skip))
    overrides = parse_overrides(args.set)
    seeds = parse_seeds(args.seeds)
    in_frames = skip > 1

    ranks = f" x {args.num_processes} ranks" if args.num_processes else ""
    ranks += f" on {args.ray_nodes} Ray nodes" if args.ray_nodes else ""
    print(f"{args.env} · {args.algo}{ranks}: {len(seeds)} seeds x {steps:,} env steps ({steps * skip:,} frames), "
          f"target mean return {target:g}, overrides {overrides or 'none'}", file=sys.stderr)  # fmt: skip
    unit = "frames" if in_frames else "env steps"
    header = f"| seed | final mean return | best mean return | {unit} to {target:g} | wall |"
    print(header + "\n| --- | --- | --- | --- | --- |", flush=True)
    rows = []
    for seed in seeds:
        rows.append(
            run_seed(
                args.env, args.algo, steps, seed, target, overrides, args.keep_runs, args.num_processes, args.curves
            )
        )
        print(row(rows[-1], in_frames), flush=True)
        if args.json:  # after every seed, so a long run that is stopped keeps what it measured
            s = summary(rows, target, required)
            report = {"env": args.env, "algo": args.algo, "num_processes": args.num_processes, "env_steps": steps,
                      "frame_skip": skip, "target": target, "overrides": overrides, "seeds": rows,
                      "summary": s}  # fmt: skip
            args.json.write_text(json.dumps(report, indent=2) + "\n")
    s = summary(rows, target, required)
    print(
        f"\n{s['met']}/{s['seeds']} seeds >= {target:g} (needed {s['needed']}): {'PASS' if s['passed'] else 'FAIL'}; "
        f"final mean return median {s['median_final_mean_return']:.1f}, worst {s['worst_final_mean_return']:.1f}; "
        f"wall {s['wall_seconds'] / 60:.1f} min",
        flush=True,
    )
    sys.exit(0 if s["passed"] else 1)


if __name__ == "__main__":
    main()
