"""Env frames/s of APPO on Doom duels with a population of N policies against one learning policy.

A population acts with one inference batch per policy per step and learns each policy from its own share of every
batch (:mod:`vecfast.selfplay.population`), so it should cost little: the issue's target is >= 0.8x the frames/s of
1-policy APPO (which self-plays against its snapshots) on the same env. Runs alternate (1, N, 1, N, ...) so that
both see the same machine; each run's frames/s is measured after ``--warmup`` seconds (games start, the first
batches), from its ``metrics.jsonl``. Prints each run and the median ratio, and appends rows to ``--csv``.

    python benchmarks/doom_population.py --policies 4 --rounds 3 --seconds 120

``--one N --out FILE`` runs N policies once and writes ``{"env_frames_per_s": ...}`` to FILE, for
``commits_ab.py`` (a 2-policy population against an earlier commit: issue 35's double-buffered Doom matches):

    python benchmarks/commits_ab.py --against c28a90c --rounds 3 --metric env_frames_per_s -- \
        python $PWD/benchmarks/doom_population.py --one 2 --seconds 90 --double-buffered on --out {out}
    python benchmarks/doom_population.py --one 2 --seconds 90 --double-buffered off   # this checkout, stepped whole

Needs ``pip install vecfast[doom,pettingzoo]``.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import append_row, steady_fps, steady_share

import vecfast

try:
    from vecfast.envs.doom import doom_duel_v0
except ImportError:  # commits before Doom's multiplayer code moved under envs/doom (commits_ab.py runs them)
    from vecfast.multiagent import doom_duel_v0


def run(
    policies: int, seconds: float, matches: int, warmup: float, seed: int, double_buffered: bool | None = None
) -> tuple[float, float, float]:
    """Steady env frames/s, and the shares of wall time the sampler spent in inference and waiting for the envs over
    the same span. ``double_buffered``: the duels' (None: their default; commits before Doom matches had send/recv
    take none)."""
    env: Any = doom_duel_v0
    if (
        double_buffered is not None
        and "double_buffered" in inspect.signature(doom_duel_v0.DoomMatchesVectorEnv).parameters
    ):
        env = functools.partial(doom_duel_v0.vector_env, matches, double_buffered=double_buffered)
    with tempfile.TemporaryDirectory(prefix="vecfast-doom-population-") as tmp:
        run_dir = Path(tmp) / "run"
        vecfast.train(
            env,
            algo="appo",
            total_env_steps=10**12,
            run_dir=run_dir,
            num_workers=1,
            num_envs_per_worker=matches,
            num_policies=policies,
            train_for_seconds=seconds,
            print_every_sec=None,
            save_every_sec=10**9,
            save_best_every_sec=None,
            seed=seed,
        )
        return (
            steady_fps(run_dir, warmup),
            steady_share(run_dir, warmup, "time_inference"),
            steady_share(run_dir, warmup, "time_envs"),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=120.0, help="training time of each run")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of each run left out of its frames/s")
    parser.add_argument("--matches", type=int, default=4, help="duels at once (2 agent slots each)")
    parser.add_argument("--csv", type=Path, default=Path(__file__).parent / "results" / "doom_population.csv")
    parser.add_argument("--one", type=int, default=None, help="one run of this many policies (with --out)")
    parser.add_argument("--out", type=Path, default=None, help="--one's JSON result")
    parser.add_argument(
        "--double-buffered",
        choices=("auto", "on", "off"),
        default="auto",
        help="--one: the duels double-buffered or not (auto: their default, which depends on the cores)",
    )
    args = parser.parse_args()
    if args.one is not None:
        double_buffered = {"auto": None, "on": True, "off": False}[args.double_buffered]
        value, inference, envs = run(args.one, args.seconds, args.matches, args.warmup, 0, double_buffered)
        result = {"policies": args.one, "env_frames_per_s": value, "inference_share": inference, "envs_share": envs}
        print(json.dumps(result))
        if args.out is not None:
            args.out.write_text(json.dumps(result))
        return
    fps: dict[int, list[float]] = {1: [], args.policies: []}
    for r in range(args.rounds):
        for n in (1, args.policies):
            value, inference, _ = run(n, args.seconds, args.matches, args.warmup, seed=r)
            fps[n].append(value)
            row = {
                "when": time.strftime("%Y-%m-%d %H:%M"),
                "round": r,
                "policies": n,
                "matches": args.matches,
                "seconds": args.seconds,
                "env_frames_per_s": round(value, 1),
            }
            append_row(args.csv, list(row), row)
            print(json.dumps({**row, "inference_share": round(inference, 3)}), flush=True)
    ratios = [p / o for p, o in zip(fps[args.policies], fps[1], strict=True)]
    print(
        json.dumps(
            {
                "median_fps_1_policy": statistics.median(fps[1]),
                f"median_fps_{args.policies}_policies": statistics.median(fps[args.policies]),
                "ratios_by_round": [round(x, 3) for x in ratios],
                "median_ratio": round(statistics.median(ratios), 3),
                "worst_ratio": round(min(ratios), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
