"""Lending observation batches against copying them (``copy=True``), A/B in alternating runs.

    python benchmarks/observation_lending.py VizdoomBasic-v1 --num-envs 8 --rounds 4

Each round runs ``step()`` of an AsyncSharedMemVectorEnv for ``--seconds`` with batches
lent (the default for batches of 64 KB and more) and then with every batch copied out of
shared memory, and prints steps/s and the owner's CPU per env step of both.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import vecfast.vector.observation_banks as observation_banks
from vecfast import AsyncSharedMemVectorEnv
from vecfast.bench import BenchConfig, default_num_workers


def run(cfg: BenchConfig, lend: bool) -> tuple[float, float]:
    """Steps/s and owner CPU microseconds per env step."""
    observation_banks.LENDING_MIN_BYTES = 64 * 1024 if lend else 1 << 62
    env = AsyncSharedMemVectorEnv(cfg.env_fns(), num_workers=cfg.num_workers)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        actions = [env.action_space.sample() for _ in range(64)]
        for k in range(20):
            env.step(actions[k % 64])
        start, cpu, steps = time.perf_counter(), time.process_time(), 0
        while time.perf_counter() - start < cfg.seconds:
            obs = env.step(actions[steps % 64])[0]  # held until the next step, as a training loop holds it
            steps += 1
        del obs
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        env.close()
    return steps * cfg.num_envs / elapsed, cpu / (steps * cfg.num_envs) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    cfg = BenchConfig(args.env_id, args.num_envs, default_num_workers(args.num_envs), seconds=args.seconds)
    ratios = []
    with tempfile.TemporaryDirectory() as home:
        os.chdir(home)  # VizDoom writes into the working directory
        for r in range(args.rounds):
            (lent, lent_cpu), (copied, copied_cpu) = (run(cfg, lend) for lend in (True, False))
            ratios.append(lent / copied)
            print(
                f"round {r}: lent {lent:,.0f} steps/s (owner {lent_cpu:.1f} us/step) | "
                f"copied {copied:,.0f} (owner {copied_cpu:.1f} us/step) | {lent / copied:.2f}x",
                flush=True,
            )
    print(f"lent / copied: median {np.median(ratios):.2f}x, worst {min(ratios):.2f}x, best {max(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
