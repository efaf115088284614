"""APPO's training frames/s on Pong, on ale-py's AtariVectorEnv (what ``vecfast train ALE/Pong-v5`` steps) against
EnvPool's Pong-v5, with the same model and settings (vecfast's Atari recipe) and the same preprocessing (84x84 gray
frames stacked 4, frame skip 4, noop starts, rewards clipped): both double-buffered through their own async mode.

Rounds interleave the two (A B, A B, ...); each run trains for ``--seconds`` and reports its frames/s over its
steady span (after ``--warmup`` seconds). One row per run goes to ``--csv`` at once.

    python benchmarks/atari_throughput.py --rounds 3 --seconds 120
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_row, host, steady_fps  # noqa: E402

from vecfast.trainers import train  # noqa: E402
from vecfast.trainers.run.defaults import ATARI_PRESET  # noqa: E402

CSV = Path(__file__).parent / "results" / "atari_throughput.csv"
COLUMNS = ["round", "backend", "num_envs", "seconds", "frames_per_second", "host"]


def envpool_pong(num_envs: int, seed: int) -> object:
    """EnvPool's Pong-v5 as ale-py's vector env is by default (rewards clipped; EnvPool's default is raw), with
    half the envs per batch: its own double buffering."""
    import envpool

    return envpool.make_gymnasium("Pong-v5", num_envs=num_envs, batch_size=num_envs // 2, reward_clip=True, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    num_envs = ATARI_PRESET["num_workers"] * ATARI_PRESET["num_envs_per_worker"]
    for round_index in range(args.rounds):
        backends = {
            "ale-py AtariVectorEnv": "ALE/Pong-v5",
            "EnvPool Pong-v5": functools.partial(envpool_pong, num_envs, round_index),
        }
        for backend, env in backends.items():
            with tempfile.TemporaryDirectory() as tmp:
                run_dir = Path(tmp) / "run"
                train(env, algo="appo", total_env_steps=10**10, run_dir=run_dir, train_for_seconds=args.seconds,
                      print_every_sec=None, seed=round_index, **ATARI_PRESET)  # fmt: skip
                row = {
                    "round": round_index, "backend": backend, "num_envs": num_envs, "seconds": args.seconds,
                    "frames_per_second": steady_fps(run_dir, args.warmup), "host": host(),
                }  # fmt: skip
            append_row(args.csv, COLUMNS, row)
            print(row, flush=True)


if __name__ == "__main__":
    main()
