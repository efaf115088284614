"""DD-PPO figures: preemption of a straggler, and throughput with 1 and 2 ranks beside single-process PPO.

    python benchmarks/ddppo.py preemption --repeats 3
    python benchmarks/ddppo.py throughput --env vecfast/PointNav-v0 --num-envs 64 --seconds 60
    python benchmarks/ddppo.py throughput --env vecfast/DoomBasic-v0 --num-envs 16 --seconds 60

``preemption``: two ranks on CartPole whose vector step takes ``--step-ms`` (a sleep, so the two
cores are not what is measured); in one configuration rank 1's steps take 3x as long. Time per
update (median of the iterations after the first two) with both ranks fast, with the slow rank
and preemption (``sync_frac=0.5``: one finished rank of two ends the other's rollout), and with
the slow rank without preemption (``sync_frac=1``). Goal: with preemption within 1.3x of the fast
ranks' time, without >= 2x.

``throughput``: env frames/s of ``algo="ppo"`` in one process, and of ``algo="ddppo"`` with 1 and
2 ranks, all at the same total number of envs (2 ranks: half each; ``--per-rank``: each rank
``--num-envs``, as the PointNav recipe runs), each trained for ``--seconds`` and measured after
``--warmup``; the configurations run interleaved, ``--repeats`` times, and each reports its median:

    python benchmarks/ddppo.py throughput --configs ddppo1 ddppo2 ddppo1x2 --per-rank --repeats 2

``ddppo1x2`` is two independent one-rank runs at once (their frames/s summed): what 2 ranks would make without
averaging gradients, the ceiling of ``ddppo2`` on this machine. Each configuration also says where its
(first) rank's time goes per update (sampling: the env and inference, and coordinating with the other ranks:
preemption polls each step and at the end a count of their steps, after the slowest; learning: the gradient
steps with their all-reduce) and how many cores the machine kept busy over the measured span.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from common import parse_overrides, steady_fps

import vecfast  # noqa: F401  (registers vecfast's env ids)
from vecfast.trainers import train

PREEMPTION_SETTINGS = {
    "num_workers": 1,
    "num_envs_per_worker": 8,
    "rollout": 32,
    "batch_size": 128,
    "num_epochs": 1,
    "use_rnn": False,
    "encoder_mlp_layers": (32, 32),
    "print_every_sec": None,
    "torch_threads": 1,
}


class DelayedSteps(gym.vector.VectorWrapper):
    """Each vector step takes ``delay`` seconds more (sleeping: it costs time, not CPU)."""

    def __init__(self, env: gym.vector.VectorEnv, delay: float) -> None:
        super().__init__(env)
        self.delay = delay

    def step(self, actions: Any) -> Any:
        time.sleep(self.delay)
        return self.env.step(actions)


class StragglerEnv:
    """A picklable env factory: CartPole, 8 envs, ``step_ms`` per vector step, ``slowdown`` times that in rank 1."""

    def __init__(self, step_ms: float, slowdown: float) -> None:
        self.step_ms, self.slowdown = step_ms, slowdown

    def __call__(self) -> gym.vector.VectorEnv:
        factor = self.slowdown if os.environ.get("RANK") == "1" else 1.0
        env = gym.make_vec("CartPole-v1", 8, vectorization_mode="sync")
        return DelayedSteps(env, self.step_ms * factor / 1000)


def seconds_per_update(run_dir: Path, skip: int = 2) -> float:
    times = [json.loads(line)["time"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return float(np.median(np.diff(times[skip:])))


def preemption(args: argparse.Namespace) -> dict[str, Any]:
    configs = {
        "both ranks fast": (1.0, 0.5),
        "rank 1 3x slower, preemption (sync_frac 0.5)": (3.0, 0.5),
        "rank 1 3x slower, no preemption (sync_frac 1.0)": (3.0, 1.0),
    }
    results: dict[str, list[float]] = {name: [] for name in configs}
    total = 2 * 8 * 32 * args.updates
    for repeat in range(args.repeats):
        for name, (slowdown, sync_frac) in configs.items():
            with tempfile.TemporaryDirectory() as tmp:
                run_dir = Path(tmp) / "run"
                env = StragglerEnv(args.step_ms, slowdown)
                train(env, algo="ddppo", num_processes=2, total_env_steps=total, run_dir=run_dir,
                      sync_frac=sync_frac, **PREEMPTION_SETTINGS)  # fmt: skip
                results[name].append(seconds_per_update(run_dir))
            print(f"round {repeat + 1}: {name}: {results[name][-1] * 1000:.0f} ms per update", flush=True)
    fast = float(np.median(results["both ranks fast"]))
    summary = {}
    print(f"\n{'configuration':<50} {'ms/update (median)':>20} {'vs fast':>8}   rounds")
    for name, values in results.items():
        median = float(np.median(values))
        summary[name] = {"seconds_per_update": values, "median": median, "vs_fast": median / fast}
        rounds = ", ".join(f"{v * 1000:.0f}" for v in values)
        print(f"{name:<50} {median * 1000:>20.0f} {median / fast:>7.2f}x   {rounds}")
    return summary


THROUGHPUT_CONFIGS = {
    "ppo": ("ppo", None, 1),
    "ddppo1": ("ddppo", 1, 1),
    "ddppo2": ("ddppo", 2, 2),
    "ddppo1x2": ("ddppo", 1, 1),  # two one-rank runs at once
}


class BusyCores:
    """How many of the machine's cores were busy (all processes, from /proc/stat) between ``start`` and ``end``
    seconds after it was made, sampled every half second."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, int]] = []  # (seconds, busy jiffies, all jiffies)
        self.began, self.stop = time.perf_counter(), threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(0.5):
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
            idle = fields[3] + fields[4]  # idle, iowait
            self.samples.append((time.perf_counter() - self.began, sum(fields) - idle, sum(fields)))

    def between(self, start: float, end: float) -> float:
        self.stop.set()
        self.thread.join()
        inside = [s for s in self.samples if start <= s[0] <= end]
        (_, busy0, all0), (_, busy1, all1) = inside[0], inside[-1]
        return (busy1 - busy0) / (all1 - all0) * (os.cpu_count() or 1)


def _train_one(env: str, run_dir: Path, seconds: float, settings: dict[str, Any]) -> None:
    train(env, algo="ddppo", num_processes=1, total_env_steps=10**10, run_dir=run_dir, train_for_seconds=seconds,
          **settings)  # fmt: skip


def _per_update(run_dir: Path, warmup: float) -> dict[str, float]:
    """Median seconds per update of the run's (first) rank after ``warmup``: sampling and learning."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time_sampling" in r and r["time"] >= warmup]
    return {key: float(np.median([r[f"time_{key}"] for r in rows])) for key in ("sampling", "ranks_sync", "learning")}


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    """Each configuration trains for ``--seconds``; its frames/s are the steady ones, after ``--warmup`` seconds
    (launch, env start, the first updates). A batched env has all of a rank's envs in one simulator, a
    process-pool env gets 2 workers in one process and 1 per rank with 2 ranks (the cores are shared). Ratios are
    to the first configuration run."""
    results: dict[str, list[float]] = {name: [] for name in args.configs}
    profiles: dict[str, list[dict[str, float]]] = {name: [] for name in args.configs}
    for repeat in range(args.repeats):
        for name in args.configs:
            algo, num_processes, ranks = THROUGHPUT_CONFIGS[name]
            envs = args.num_envs if args.per_rank else args.num_envs // ranks
            workers = 1 if args.batched else 2 // ranks
            settings = {"num_workers": workers, "num_envs_per_worker": envs // workers, "print_every_sec": None}
            settings |= parse_overrides(args.set)
            cores = BusyCores()
            with tempfile.TemporaryDirectory() as tmp:
                runs = [Path(tmp) / "run", Path(tmp) / "run_b"][: 2 if name == "ddppo1x2" else 1]
                if name == "ddppo1x2":  # two independent runs at once
                    spawn = multiprocessing.get_context("spawn")
                    procs = [spawn.Process(target=_train_one, args=(args.env, run, args.seconds, settings))
                             for run in runs]  # fmt: skip
                    for proc in procs:
                        proc.start()
                    for proc in procs:
                        proc.join()
                else:
                    train(args.env, algo=algo, num_processes=num_processes, total_env_steps=10**10,
                          run_dir=runs[0], train_for_seconds=args.seconds, **settings)  # fmt: skip
                fps = sum(steady_fps(run, args.warmup) for run in runs)
                profile = {**_per_update(runs[0], args.warmup), "busy_cores": cores.between(args.warmup, args.seconds)}
            results[name].append(fps)
            profiles[name].append(profile)
            print(f"round {repeat + 1}: {name}: {fps:,.0f} env frames/s; per update: sampling "
                  f"{profile['sampling']:.2f} s (of which coordinating with the other rank "
                  f"{profile['ranks_sync']:.2f} s), "
                  f"learning {profile['learning']:.2f} s; busy cores {profile['busy_cores']:.2f}",
                  flush=True)  # fmt: skip
    base_name = args.configs[0]
    base = float(np.median(results[base_name]))
    summary = {}
    envs = f"{args.num_envs} envs per rank" if args.per_rank else f"{args.num_envs} envs in all"
    print(f"\n{args.env}, {envs}, {args.seconds:.0f} s per run, frames/s after {args.warmup:.0f} s")
    print(f"{'configuration':<20} {'frames/s (median)':>18} {'vs ' + base_name:>10}   rounds")
    for name, values in results.items():
        median = float(np.median(values))
        summary[name] = {"fps": values, "median": median, f"vs_{base_name}": median / base, "profile": profiles[name]}
        print(f"{name:<20} {median:>18,.0f} {median / base:>9.2f}x   " + ", ".join(f"{v:,.0f}" for v in values))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    pre = sub.add_parser("preemption")
    pre.add_argument("--step-ms", type=float, default=5.0, help="a fast rank's vector step (default 5 ms)")
    pre.add_argument("--updates", type=int, default=12)
    pre.add_argument("--repeats", type=int, default=3)
    thr = sub.add_parser("throughput")
    thr.add_argument("--env", default="vecfast/PointNav-v0")
    thr.add_argument("--num-envs", type=int, default=64)
    thr.add_argument("--seconds", type=float, default=60.0)
    thr.add_argument("--repeats", type=int, default=1)
    thr.add_argument("--warmup", type=float, default=20.0, help="seconds of each run left out of its frames/s")
    thr.add_argument(
        "--configs",
        nargs="+",
        choices=list(THROUGHPUT_CONFIGS),
        default=list(THROUGHPUT_CONFIGS),
        help="ppo: one process; ddppo1, ddppo2: DD-PPO with 1 or 2 ranks; ddppo1x2: two 1-rank runs at once (the "
        "first is the baseline)",
    )
    thr.add_argument(
        "--per-rank", action="store_true", help="--num-envs envs in each rank (the recipe's way) rather than in all"
    )
    thr.add_argument("--batched", action=argparse.BooleanOptionalAction, default=None,
                     help="the env is a batched simulator (default: it has a vector_entry_point)")  # fmt: skip
    thr.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every run")
    for p in (pre, thr):
        p.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.what == "throughput" and args.batched is None:
        args.batched = gym.spec(args.env).vector_entry_point is not None
    summary = preemption(args) if args.what == "preemption" else throughput(args)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **summary}, indent=2))


if __name__ == "__main__":
    main()
