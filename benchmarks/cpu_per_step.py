"""Where the CPU of an env step goes: one env alone against vecfast and PufferLib, by process.

Wall-time ratios on a shared 2-core host drift by 10-20% between runs; CPU time per env
step does not (much), and split by process it shows what a vector env adds to the work of
the env itself: the owner (checking actions, copying results out of shared memory), the
worker processes (stepping the envs, copying observations into shared memory, waking the
owner) and the processes the envs start (VizDoom's game, whose cost grows when many games
share a core's caches). For each backend of ``vecfast bench`` named in ``--backends`` (by
default the single env, vecfast's and PufferLib's two modes; one that cannot run here is n/a):

    python benchmarks/cpu_per_step.py VizdoomBasic-v1 --num-envs 8
    python benchmarks/cpu_per_step.py vecfast/DoomDuelBots-v0 --num-envs 16 --seconds 6

``overhead`` is CPU per step over the single env's; ``cores`` the CPUs the backend kept busy.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile

import psutil

from vecfast.bench import BACKENDS, BenchConfig, default_num_workers, process_cpu_seconds, run_for


def _role(proc: psutil.Process, owner: int) -> str:
    if proc.pid == owner:
        return "owner"
    name = proc.name()
    return "python workers" if name.startswith("python") else name


def profile(name: str, cfg: BenchConfig) -> tuple[float, dict[str, float], float]:
    """(steps/s, CPU us per step by role, cores busy) of one backend."""
    owner = os.getpid()
    with BACKENDS[name].run(cfg) as step:
        run_for(step, cfg.warmup)
        procs = [psutil.Process(owner), *psutil.Process(owner).children(recursive=True)]
        before = [process_cpu_seconds(proc) for proc in procs]
        steps, elapsed = run_for(step, cfg.seconds)
        per_role: dict[str, float] = collections.Counter()
        for proc, start in zip(procs, before, strict=True):
            per_role[_role(proc, owner)] += process_cpu_seconds(proc) - start
    us = {role: seconds / steps * 1e6 for role, seconds in per_role.items()}
    return steps / elapsed, us, sum(per_role.values()) / elapsed


def _us(value: float) -> str:
    """Microseconds, with a decimal where they are few (a CartPole step is ~6 us)."""
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--backends", default="single,vecfast,vecfast-async,puffer,puffer-async")
    args = parser.parse_args()
    os.environ.update(OPENCV_FOR_THREADS_NUM="1", OMP_NUM_THREADS="1")  # as vecfast bench
    cfg = BenchConfig(args.env_id, args.num_envs, default_num_workers(args.num_envs), seconds=args.seconds)
    names = args.backends.split(",")
    rows: dict[str, tuple[float, dict[str, float], float]] = {}
    unavailable: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="vecfast-cpu-") as scratch:
        os.chdir(scratch)  # VizDoom's own envs write _vizdoom/ into the working directory
        for name in names:
            reason = BACKENDS[name].unavailable(cfg)
            if reason is None:
                rows[name] = profile(name, cfg)
            else:
                unavailable[name] = reason
    roles = list(dict.fromkeys(role for _, us, _ in rows.values() for role in us))
    base = sum(next(iter(rows.values()))[1].values())
    print(f"{cfg.env_id}: {cfg.num_envs} envs, {cfg.num_workers} workers, {cfg.seconds:g} s each\n")
    header = " | ".join(f"{r} us/step" for r in roles)
    print(f"| backend | steps/s | {header} | total us/step | overhead | cores |")
    print("| --- | ---: | " + " | ".join("---:" for _ in roles) + " | ---: | ---: | ---: |")
    for name in names:
        if name in unavailable:
            print(f"| {BACKENDS[name].label} | n/a ({unavailable[name]}) |" + " |" * (len(roles) + 3))
            continue
        rate, us, cores = rows[name]
        total = sum(us.values())
        cells = " | ".join(_us(us.get(r, 0.0)) for r in roles)
        print(f"| {BACKENDS[name].label} | {rate:,.0f} | {cells} | {_us(total)} | {total / base:.2f}x | {cores:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
