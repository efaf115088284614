"""PointGoal navigation: the batched simulator against one env per slot under process-based vector envs.

For each ``--num-envs`` value this measures, each backend in a fresh subprocess (so that
memory figures do not mix), env steps per second with uniformly random actions
(pre-sampled, not timed), CPU time per env step (user + system, summed over the owner and
its workers: robust when other jobs share the machine) and resident memory per env (RSS
summed over the owner and all its worker processes, after stepping; USS, the memory no
other process shares, too). Processes that hold one env each run torch with one thread
(``OMP_NUM_THREADS=1``), as any per-env process should; the batched env uses
``--batched-threads`` (default 1: on 2 cores torch's intra-op threads cost more than they
gain on tensors this size, ~20k against ~16k steps/s at 256 envs; with
``OMP_WAIT_POLICY=PASSIVE`` unless set: spinning OpenMP threads stall badly when other
jobs share the cores).

- ``batched``: ``BatchedPointNavEnv(num_envs)``, one simulator call per batch step
- ``vecfast``: ``PointNavEnv`` (the same simulator with a batch of one) under
  ``vecfast.AsyncSharedMemVectorEnv`` (several envs per worker, one worker per core)
- ``gym-async``: ``PointNavEnv`` under ``gymnasium.vector.AsyncVectorEnv`` (one process
  per env), capped at ``--gym-async-max`` envs: thousands of processes do not fit the machine

    python benchmarks/nav_throughput.py                              # 64, 256, 1024 envs, 5 s each
    python benchmarks/nav_throughput.py --num-envs 256 --seconds 3 --json nav.json
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BACKENDS = ("batched", "vecfast", "gym-async")
ENV_ID = "vecfast/PointNav-v0"


def _processes() -> list[Any]:
    import psutil

    return [psutil.Process()] + psutil.Process().children(recursive=True)


def _memory() -> tuple[float, float]:
    """(RSS, USS) in MiB summed over this process and its descendants."""
    rss = uss = 0
    for proc in _processes():
        info = proc.memory_full_info()
        rss += info.rss
        uss += info.uss
    return rss / 2**20, uss / 2**20


def _make_env(backend: str, num_envs: int, scenes: str) -> Any:
    import gymnasium as gym

    import vecfast
    from vecfast.envs.nav import BatchedPointNavEnv

    if backend == "batched":
        return BatchedPointNavEnv(num_envs, scenes=scenes)
    make = functools.partial(gym.make, ENV_ID, scenes=scenes)
    if backend == "vecfast":
        return vecfast.AsyncSharedMemVectorEnv([make] * num_envs)
    return gym.vector.AsyncVectorEnv([make] * num_envs)


def measure(backend: str, num_envs: int, seconds: float, warmup: float, scenes: str) -> dict[str, Any]:
    """Steps/s and memory of one backend (run in its own process)."""
    import numpy as np
    import psutil
    import torch

    from vecfast.bench import batch_stepper, cpu_seconds, run_for

    start = time.perf_counter()
    env = _make_env(backend, num_envs, scenes)
    build_s = time.perf_counter() - start
    try:
        rng = np.random.default_rng(0)
        pool = [rng.integers(0, 4, size=num_envs) for _ in range(64)]
        if backend == "batched":  # a policy on the simulation device hands over tensors
            pool = [torch.as_tensor(a) for a in pool]
        env.reset(seed=0)
        run_for(batch_stepper(env, itertools.cycle(pool), num_envs), warmup)
        workers = psutil.Process().children(recursive=True)
        cpu0 = cpu_seconds(workers)
        steps, elapsed = run_for(batch_stepper(env, itertools.cycle(pool), num_envs), seconds)
        rate = steps / elapsed
        cpu_us = (cpu_seconds(workers) - cpu0) / steps * 1e6
        rss, uss = _memory()
    finally:
        env.close()
    return {
        "backend": backend,
        "num_envs": num_envs,
        "steps_per_s": rate,
        "cpu_us_per_step": cpu_us,
        "rss_mib": rss,
        "uss_mib": uss,
        "rss_per_env_mib": rss / num_envs,
        "uss_per_env_mib": uss / num_envs,
        "build_s": build_s,
    }


def _in_subprocess(backend: str, num_envs: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", backend, "--num-envs", str(num_envs), "--seconds", str(args.seconds)]
    cmd += ["--warmup", str(args.warmup), "--scenes", args.scenes]
    threads = args.batched_threads if backend == "batched" else 1
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    # Busy-waiting OpenMP threads stall on a machine shared with other jobs; sleeping ones do not.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=args.timeout, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| num_envs | backend | steps/s | batched speed-up | CPU us/step | batched CPU gain "
        "| RSS/env MiB | USS/env MiB | batched memory ratio (RSS) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        base = next(b for b in results if b["num_envs"] == r["num_envs"] and b["backend"] == "batched")
        speedup = base["steps_per_s"] / r["steps_per_s"]
        memory = r["rss_per_env_mib"] / base["rss_per_env_mib"]
        cpu_gain = r["cpu_us_per_step"] / base["cpu_us_per_step"]
        lines.append(
            f"| {r['num_envs']} | {r['backend']} | {r['steps_per_s']:,.0f} | {speedup:.1f}x | "
            f"{r['cpu_us_per_step']:,.0f} | {cpu_gain:.1f}x | "
            f"{r['rss_per_env_mib']:.2f} | {r['uss_per_env_mib']:.2f} | 1/{memory:.1f} |"
        )
    return "\n".join(lines)


def _marginal_table(results: list[dict[str, Any]]) -> str:
    """Memory each added env costs, between consecutive batch sizes of one backend.

    Per-env totals include each process's fixed cost (Python, torch: ~250 MiB RSS), which
    the batched env pays once and a process-based vector env once per process; the slope
    is what an env itself costs, i.e. how memory grows with the batch.
    """
    lines = [
        "| backend | num_envs | added MiB/env (RSS) | batched memory ratio |",
        "| --- | --- | ---: | ---: |",
    ]
    slopes: dict[tuple[str, int, int], float] = {}  # (backend, from, to) -> MiB per added env
    for backend in dict.fromkeys(r["backend"] for r in results):
        runs = sorted((r for r in results if r["backend"] == backend), key=lambda r: r["num_envs"])
        for small, large in itertools.pairwise(runs):
            added = large["num_envs"] - small["num_envs"]
            slopes[backend, small["num_envs"], large["num_envs"]] = (large["rss_mib"] - small["rss_mib"]) / added
    for (backend, small, large), slope in slopes.items():
        base = slopes.get(("batched", small, large))
        ratio = f"1/{slope / base:.0f}" if base and base > 0 else "n/a"
        lines.append(f"| {backend} | {small} -> {large} | {slope:.3f} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", default="64,256,1024", help="comma-separated batch sizes")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"from {','.join(BACKENDS)}")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per measurement")
    parser.add_argument("--warmup", type=float, default=1.0, help="untimed seconds first")
    parser.add_argument("--gym-async-max", type=int, default=64, help="most envs (= processes) for gym-async")
    parser.add_argument("--batched-threads", type=int, default=1, help="torch threads of the batched env (default: 1)")
    parser.add_argument("--scenes", help="scene directory (default: the default set in the user cache)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per measurement")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--one", choices=BACKENDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenes is None:
        from vecfast.envs.nav.scenes import default_scene_dir

        args.scenes = str(default_scene_dir())
    if args.one:
        print(json.dumps(measure(args.one, int(args.num_envs), args.seconds, args.warmup, args.scenes)))
        return 0
    results = []
    for num_envs in (int(n) for n in args.num_envs.split(",")):
        for backend in args.backends.split(","):
            if backend == "gym-async" and num_envs > args.gym_async_max:
                print(f"gym-async skipped at {num_envs} envs (> --gym-async-max {args.gym_async_max})", file=sys.stderr)
                continue
            result = _in_subprocess(backend, num_envs, args)
            print(json.dumps(result), file=sys.stderr)
            results.append(result)
    table = _table(
        [r for r in results if any(b["backend"] == "batched" and b["num_envs"] == r["num_envs"] for b in results)]
    )
    print(f"{os.cpu_count()} CPUs; {args.seconds:g} s per measurement\n\n{table}\n\n{_marginal_table(results)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
