"""APPO's training frames/s with its samplers on a Ray cluster of nodes on this machine against APPO on one
machine with the same envs (issue 43), interleaved, and the bytes an env frame puts on the network.

``machine``: ``num_workers=2 x 8`` envs in one AsyncSharedMemVectorEnv. On Ray: ``--nodes`` nodes started with
``ray start`` (:class:`vecfast.cluster.local_nodes.LocalNodes`), one sampler on each, the same envs in all
(``8 * 2 / nodes`` per sampler, in one worker each); ``central``: the learner's process acts for all of them
(SEED RL); ``local``: each sampler acts with its own copy of the policy and ships trajectories. Rounds interleave
the modes; each run trains for ``--seconds`` and reports its frames/s over its steady span (after ``--warmup``).
One row per run goes to ``--csv`` at once; with ``--cpu-csv``, the CPU seconds each role of the run took per
1,000 env frames (:class:`CpuMeter`).

    python benchmarks/ray_appo.py --rounds 3 --seconds 90
    python benchmarks/ray_appo.py --env CartPole-v1 --rounds 1 --seconds 30 --modes machine,local
    python benchmarks/ray_appo.py --rounds 1 --seconds 60 --cpu-csv benchmarks/results/ray_appo_cpu.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "token")  # the nodes' token authentication, read when ray is imported
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from common import CpuMeter, append_row, host, parse_overrides, steady_fps  # noqa: E402

import vecfast  # noqa: E402, F401  (registers the Doom ids)
from vecfast.cluster.local_nodes import LocalNodes  # noqa: E402
from vecfast.trainers import train  # noqa: E402

CSV = Path(__file__).parent / "results" / "ray_appo_inference.csv"
COLUMNS = ["round", "mode", "env", "num_envs", "samplers", "seconds", "frames_per_second", "bytes_per_frame", "host"]
CPU_COLUMNS = ["round", "mode", "role", "cpu_seconds_per_kframe", "host"]
NUM_ENVS = 16


def central_bytes_per_frame(env_id: str, frameskip: int) -> float:
    """What one env step puts on the network between a sampler and the learner under central inference, per env
    frame: its observation, reward, ends and env id one way, its action the other."""
    env = gym.make(env_id)
    try:
        obs_bytes = sum(np.asarray(v).nbytes for v in _leaves(env.observation_space.sample()))
        action_bytes = np.asarray(env.action_space.sample()).nbytes  # (Discrete: an int64)
    finally:
        env.close()
    return (obs_bytes + 8 + 1 + 1 + 8 + action_bytes) / frameskip


def local_bytes_per_frame(run_dir: Path, samplers: int) -> float:
    """What local inference puts on the network per env frame, from the run's own records: every trajectory's
    tensors one way and, the other, the weights each sampler gets after every learner step."""
    from vecfast.trainers.algorithm.trajectories import Trajectories
    from vecfast.trainers.run.policies import load_policy

    rollout = json.loads((run_dir / "config.json").read_text())["config"]["rollout"]
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    model = load_policy(run_dir)
    weight_bytes = sum(t.nbytes for t in model.state_dict().values())
    one = Trajectories.allocate(model, 1, rollout)
    tensors = [*one.obs.values(), *(getattr(one, f.name) for f in dataclasses.fields(one) if f.name != "obs")]
    trajectory_bytes = sum(t.nbytes for t in tensors)
    shipped = trajectory_bytes * last["env_steps"] / rollout + weight_bytes * samplers * last["learner_steps"]
    return shipped / last["env_frames"]


def _leaves(obs):
    if isinstance(obs, dict):
        return [leaf for value in obs.values() for leaf in _leaves(value)]
    return [obs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="vecfast/DoomBasic-v0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--modes", default="machine,central,local", help="which runs, in order within a round")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for both")
    parser.add_argument("--csv", type=Path, default=CSV)
    parser.add_argument("--cpu-csv", type=Path, help="also write CPU seconds per 1,000 env frames by role here")
    args = parser.parse_args()
    common = {"rollout": 32, "batch_size": 512, "print_every_sec": None, **parse_overrides(args.set)}
    per_sampler = NUM_ENVS // args.nodes
    on_ray = {"num_workers": 1, "num_envs_per_worker": per_sampler, "num_samplers": args.nodes}
    settings = {
        "machine": {"num_workers": 2, "num_envs_per_worker": NUM_ENVS // 2},
        "central": {**on_ray, "sampler_inference": "central"},
        "local": {**on_ray, "sampler_inference": "local"},
    }
    with LocalNodes(num_nodes=args.nodes, num_cpus=1) as nodes:
        for round_index in range(args.rounds):
            for mode in args.modes.split(","):
                extra = {"ray_address": nodes.address} if mode != "machine" else {}
                with tempfile.TemporaryDirectory() as tmp:
                    run_dir = Path(tmp) / "run"
                    meter = CpuMeter() if args.cpu_csv else None
                    result = train(args.env, algo="appo", total_env_steps=10**10, run_dir=run_dir,
                                   train_for_seconds=args.seconds, seed=round_index, **common, **settings[mode],
                                   **extra)  # fmt: skip
                    frameskip = result.stats["env_frames"] // max(result.stats["env_steps"], 1)
                    if meter is not None:
                        kframes = result.stats["env_frames"] / 1000
                        for role, seconds in sorted(meter.stop().items()):
                            cpu = {"round": round_index, "mode": mode, "role": role,
                                   "cpu_seconds_per_kframe": round(seconds / kframes, 4), "host": host()}  # fmt: skip
                            append_row(args.cpu_csv, CPU_COLUMNS, cpu)
                            print(cpu, flush=True)
                    if mode == "central":
                        network = central_bytes_per_frame(args.env, frameskip)
                    else:
                        network = local_bytes_per_frame(run_dir, args.nodes) if mode == "local" else 0.0
                    row = {
                        "round": round_index, "mode": mode, "env": args.env, "num_envs": NUM_ENVS,
                        "samplers": args.nodes if mode != "machine" else 0, "seconds": args.seconds,
                        "frames_per_second": round(steady_fps(run_dir, args.warmup), 1),
                        "bytes_per_frame": round(network, 1),
                        "host": host(),
                    }  # fmt: skip
                append_row(args.csv, COLUMNS, row)
                print(row, flush=True)


if __name__ == "__main__":
    main()
