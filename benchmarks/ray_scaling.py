"""How APPO on Ray scales with samplers, by simulation (issue 43): envs whose step costs wall time and no CPU
(``vecfast/Timed-v0``, a sleep), a small model, 1, 2, 4 and 8 samplers, each way of acting; beside them the learner's
own limit (synthetic batches, the learner alone) and a projection to 16 and 64 nodes.

Each sampler steps ``--envs`` envs (``--workers`` workers) whose steps sleep ``--step-ms``; its envs alone could give
``envs / step`` frames/s. Every run trains for ``--seconds`` on ``--nodes`` Ray nodes of this machine (logical CPUs:
the samplers share this machine's cores, so the simulation shows where the pipeline itself saturates, not what
more machines would add to it). Rows per run: frames/s, the linear figure (the 1-sampler run's times the samplers),
the efficiency, and the share of the learner's time spent waiting for batches (near 0: the learner's process is the
limit; under central inference it also acts for every env). ``learner`` rows: frames/s of ``learn`` on synthetic
batches alone. CPU seconds per 1,000 frames of the learner's process, the samplers and Ray's daemons
(:class:`common.CpuMeter`) say what each would need of its own machine's cores, from which the README projects
16 and 64 nodes.

    python benchmarks/ray_scaling.py --samplers 1,2,4,8 --seconds 40
    python benchmarks/ray_scaling.py --samplers 1,2 --modes local --seconds 20 --csv /tmp/x.csv
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "token")  # the nodes' token authentication, read when ray is imported
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from common import CpuMeter, append_row, host, steady_fps  # noqa: E402

import vecfast  # noqa: E402, F401  (registers vecfast/Timed-v0)
from vecfast.cluster.local_nodes import LocalNodes  # noqa: E402
from vecfast.trainers import train  # noqa: E402

CSV = Path(__file__).parent / "results" / "ray_scaling.csv"
COLUMNS = ["mode", "samplers", "envs_per_sampler", "step_ms", "seconds", "frames_per_second", "linear",
           "efficiency", "learner_waiting_share", "learner_cpu_per_kframe", "samplers_cpu_per_kframe",
           "ray_cpu_per_kframe", "host"]  # fmt: skip
ENV = "vecfast/Timed-v0"


def learner_limit(step_ms: float, seconds: float, common: dict) -> float:
    """Frames/s the learner alone takes in: ``learn`` on synthetic batches of the run's shape, for ``seconds``."""
    import gymnasium as gym

    from vecfast.trainers.algorithm.learners import Learners
    from vecfast.trainers.algorithm.trajectories import Trajectories
    from vecfast.trainers.registry import resolve
    from vecfast.trainers.run.defaults import ConfigLayers

    recipe = resolve("appo", None)
    env = gym.make_vec(ENV, num_envs=1, vectorization_mode="sync", step_seconds=step_ms / 1000)
    cfg = ConfigLayers(recipe, ENV, user=common).config(env.single_observation_space)
    learners = Learners(env, recipe.algorithm.factory, cfg, acting_copies=True)
    env.close()
    trajectories = (cfg.batch_size // cfg.rollout) * cfg.num_batches_per_epoch
    batch = Trajectories.allocate(learners.acting[0], trajectories, cfg.rollout)
    batch.obs["obs"].normal_()
    batch.actions.random_(0, 4)
    batch.rewards.bernoulli_(0.25)
    batch.valid.fill_(True)
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        learners.learn(batch, 0.0, on_policy=False, after_step=lambda p: None)
        frames += trajectories * cfg.rollout
    return frames / (time.perf_counter() - start)


def waiting_share(run_dir: Path, warmup: float) -> float:
    """The share of the steady span (after ``warmup`` s) the learner spent waiting for batches."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = [r for r in records if r["time"] >= warmup]
    if len(steady) < 2:
        return float("nan")
    return sum(r["time_learner_waiting"] for r in steady[1:]) / (steady[-1]["time"] - steady[0]["time"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samplers", default="1,2,4,8")
    parser.add_argument("--modes", default="central,local")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--envs", type=int, default=8, help="envs per sampler")
    parser.add_argument("--workers", type=int, default=2, help="env workers per sampler")
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    counts = [int(n) for n in args.samplers.split(",")]
    common = {"rollout": 32, "batch_size": 1024, "print_every_sec": None}
    base = {"mode": "learner", "samplers": 0, "envs_per_sampler": args.envs, "step_ms": args.step_ms,
            "seconds": args.seconds, "linear": "", "efficiency": "", "learner_waiting_share": 0.0,
            "learner_cpu_per_kframe": "", "samplers_cpu_per_kframe": "", "ray_cpu_per_kframe": "",
            "host": host()}  # fmt: skip
    torch.manual_seed(0)
    row = {**base, "frames_per_second": round(learner_limit(args.step_ms, min(args.seconds, 20.0), common), 1)}
    append_row(args.csv, COLUMNS, row)
    print(row, flush=True)
    cpus = -(-max(counts) // args.nodes)
    with LocalNodes(num_nodes=args.nodes, num_cpus=cpus) as nodes:
        for mode in args.modes.split(","):
            single = None
            for n in counts:
                with tempfile.TemporaryDirectory() as tmp:
                    run_dir = Path(tmp) / "run"
                    meter = CpuMeter()
                    result = train(ENV, algo="appo", total_env_steps=10**10, run_dir=run_dir, seed=0,
                                   train_for_seconds=args.seconds, ray_address=nodes.address, num_samplers=n,
                                   sampler_inference=mode, num_workers=args.workers,
                                   num_envs_per_worker=args.envs // args.workers,
                                   env_kwargs={"step_seconds": args.step_ms / 1000}, **common)  # fmt: skip
                    kframes = result.stats["env_frames"] / 1000
                    cpu = {role: round(seconds / kframes, 4) for role, seconds in meter.stop().items()}
                    fps = steady_fps(run_dir, args.warmup)
                    waiting = waiting_share(run_dir, args.warmup)
                    config = json.loads((run_dir / "config.json").read_text())
                    assert config["num_envs"] == n * args.envs
                single = single if single is not None else fps / n
                row = {**base, "mode": mode, "samplers": n, "frames_per_second": round(fps, 1),
                       "linear": round(single * n, 1), "efficiency": round(fps / (single * n), 3),
                       "learner_waiting_share": round(waiting, 3), "learner_cpu_per_kframe": cpu.get("learner", 0.0),
                       "samplers_cpu_per_kframe": cpu.get("samplers", 0.0),
                       "ray_cpu_per_kframe": cpu.get("ray", 0.0)}  # fmt: skip
                append_row(args.csv, COLUMNS, row)
                print(row, flush=True)


if __name__ == "__main__":
    main()
