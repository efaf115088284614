"""APPO throughput on vecfast/DoomBasic-v0 (or ``--env``) and its ratio to the same sampler's pure-simulation rate.

The issue's setting: 2 workers x 8 envs, rollout 32, batch 512, Sample Factory's conv + GRU
model (convnet_simple, GRU 512). Another ``--env`` trains with its own preset (``ALE/Pong-v5``: the Atari
recipe), without the pure-simulation step (``--sim-seconds 0``). One run measures, one after the other on the same
machine:

1. pure simulation: the same AsyncSharedMemVectorEnv (double-buffered, recv/send of half
   the envs) stepped with pre-sampled random actions;
2. training: ``vecfast.trainers.train(..., algo="appo")`` for ``--seconds``.

Frames count the env's frame skip (4), as Sample Factory's reported FPS does.

    python benchmarks/train_appo.py --seconds 120
    python benchmarks/train_appo.py --seconds 120 --set encoder_bf16=False   # float32 encoder, as Sample Factory
    python benchmarks/train_appo.py --frames 1000000   # sample efficiency: mean return after 1M frames
    python benchmarks/train_appo.py --env ALE/Pong-v5 --sim-seconds 0 --seconds 100
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path

import numpy as np
from common import parse_overrides

import vecfast  # noqa: F401  (registers the Doom ids)
from vecfast.bench import recv_send_stepper, run_for
from vecfast.trainers import train
from vecfast.vector.make import make_vec

ENV_ID = "vecfast/DoomBasic-v0"
SETTINGS = {"num_workers": 2, "num_envs_per_worker": 8, "rollout": 32, "batch_size": 512}


def pure_simulation(env_id: str, seconds: float, num_workers: int, num_envs: int) -> tuple[float, int]:
    """Env steps/s of recv/send with random actions, and the frame skip."""
    env = make_vec(env_id, num_envs=num_envs, vector_kwargs={"num_workers": num_workers, "batch_size": num_envs // 2})
    try:
        frameskip = int(env.get_attr("frame_skip")[0])
        rng = np.random.default_rng(0)
        actions = rng.integers(0, env.single_action_space.n, size=(1024, num_envs // 2))
        env.async_reset(seed=0)
        run_for(recv_send_stepper(env, itertools.cycle(actions)), calls=50)  # warm up: games started, caches hot
        steps, elapsed = run_for(recv_send_stepper(env, itertools.cycle(actions)), seconds)
        return steps / elapsed, frameskip
    finally:
        env.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default=ENV_ID, help="an env id; other than DoomBasic, with its own preset")
    p.add_argument("--seconds", type=float, default=120.0, help="training time (throughput mode)")
    p.add_argument("--frames", type=int, default=None, help="train for this many env frames instead")
    p.add_argument("--sim-seconds", type=float, default=20.0, help="0: no pure-simulation step")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--live", action="store_true", help="show the live dashboard while training")
    p.add_argument("--run-dir", type=Path, help="keep the run here (default: a temporary directory)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "train_appo.json")
    args = p.parse_args()
    overrides = {**(SETTINGS if args.env == ENV_ID else {}), **parse_overrides(args.set)}

    sim_sps = None
    if args.sim_seconds > 0:
        num_envs = overrides["num_workers"] * overrides["num_envs_per_worker"]
        sim_sps, frameskip = pure_simulation(args.env, args.sim_seconds, overrides["num_workers"], num_envs)
        print(f"pure simulation: {sim_sps:,.0f} env steps/s = {sim_sps * frameskip:,.0f} frames/s", flush=True)

    if args.frames is not None:
        if sim_sps is None:
            p.error("--frames counts frames by the frame skip the pure simulation finds: give --sim-seconds > 0")
        total = args.frames // frameskip
    else:
        total, overrides["train_for_seconds"] = 10**12, args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or tmp
        result = train(args.env, algo="appo", total_env_steps=total, run_dir=run_dir, live=args.live, **overrides)
    stats = result.stats
    frameskip = stats["env_frames"] / stats["env_steps"]
    train_sps = stats["env_steps"] / stats["time"]
    report = {
        "env": args.env,
        "settings": overrides,
        "pure_simulation_frames_per_s": None if sim_sps is None else sim_sps * frameskip,
        "training_frames_per_s": train_sps * frameskip,
        "training_over_simulation": None if sim_sps is None else train_sps / sim_sps,
        "env_frames": stats["env_frames"],
        "mean_episode_return": stats["mean_episode_return"],
        "policy_lag": stats["policy_lag"],
        "seconds": stats["time"],
    }
    print(json.dumps(report, indent=2))
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
