"""Sampling alone (no learning): env frames/s of samplers on Ray nodes of this machine stepped through
:class:`vecfast.cluster.remote_vector_env.RemoteVectorEnv` with constant actions, against the same envs in one
AsyncSharedMemVectorEnv stepped the same way (double-buffered). What the learner's process could get at most.

``--inline-bytes`` starts the nodes with Ray's ``max_direct_call_object_size`` (replies up to that size travel in
the call's reply rather than through the object store); 0 leaves Ray's default (100 KiB). Rounds interleave the
modes; one row per measurement goes to ``--csv`` at once.

    python benchmarks/ray_sampling.py --rounds 2 --seconds 15
    python benchmarks/ray_sampling.py --rounds 2 --seconds 15 --inline-bytes 0
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "token")  # the nodes' token authentication, read when ray is imported
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from common import append_row, host  # noqa: E402

import vecfast  # noqa: E402, F401  (registers the Doom ids)
from vecfast.bench import run_for  # noqa: E402
from vecfast.cluster import local_nodes  # noqa: E402
from vecfast.cluster.connection import INLINE_REPLY_BYTES  # noqa: E402
from vecfast.cluster.remote_vector_env import RemoteVectorEnv  # noqa: E402
from vecfast.vector.make import make_vec  # noqa: E402

CSV = Path(__file__).parent / "results" / "ray_sampling.csv"
COLUMNS = ["round", "mode", "env", "num_envs", "samplers", "inline_bytes", "frames_per_second", "host"]


def frames_per_second(env, seconds: float, frameskip: int) -> float:
    """recv, then send constant actions for what came back, for ``seconds`` (after 50 calls of warm-up)."""
    env.async_reset(seed=0)

    def step() -> int:
        _, _, _, _, info = env.recv()
        ids = info["env_id"]
        env.send(np.zeros(len(ids), np.int64), ids)
        return len(ids)

    run_for(step, calls=50)
    steps, elapsed = run_for(step, seconds)
    return steps / elapsed * frameskip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="vecfast/DoomBasic-v0")
    parser.add_argument("--envs-per-sampler", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--inline-bytes", type=int, default=INLINE_REPLY_BYTES)
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    n = args.envs_per_sampler
    inline = args.inline_bytes or 100 * 1024  # 0: Ray's default
    with local_nodes.LocalNodes(num_nodes=args.nodes, num_cpus=1, inline_bytes=inline) as nodes:
        for round_index in range(args.rounds):
            local = make_vec(args.env, n * args.nodes, vector_kwargs={"num_workers": args.nodes, "batch_size": n})
            frameskip = int(local.get_attr("frame_skip")[0]) if args.env.startswith("vecfast/Doom") else 1
            runs = {"local": local}
            make = functools.partial(make_vec, args.env, n, "shared_memory", {"num_workers": 1})
            for mode in ("local", "ray"):
                env = runs.get(mode) or RemoteVectorEnv([make] * args.nodes, nodes.address)
                try:
                    fps = frames_per_second(env, args.seconds, frameskip)
                finally:
                    env.close()
                row = {
                    "round": round_index, "mode": mode, "env": args.env, "num_envs": n * args.nodes,
                    "samplers": args.nodes if mode == "ray" else 0, "inline_bytes": args.inline_bytes,
                    "frames_per_second": round(fps, 1), "host": host(),
                }  # fmt: skip
                append_row(args.csv, COLUMNS, row)
                print(row, flush=True)


if __name__ == "__main__":
    main()
