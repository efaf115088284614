"""A refactor changes no number: the same short run trained by this checkout and by an earlier commit, compared
tensor by tensor (weights, normalisers, optimiser state, update count) in their final checkpoints.

Both runs go on this machine, one after the other (floating point differs between CPUs, so a stored
reference would not do): the earlier commit from a temporary ``git worktree``, each in a fresh
interpreter whose first path entry is its own source tree.

    python benchmarks/refactor_identity.py                        # sync PPO, CartPole-v1, seed 0, 8,192 env steps
    python benchmarks/refactor_identity.py --against c28a90c --algo ppo --env-steps 8192

Exit status 0 when every tensor is equal bit for bit, 1 otherwise (the differing entries are listed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from common import REPO, worktree

BASELINE = "c28a90c"  # the commit before the trainers' rebuild (issue 35)

TRAIN = """
import json, sys, vecfast
from pathlib import Path
assert Path(vecfast.__file__).resolve().is_relative_to(Path.cwd().resolve()), vecfast.__file__
args = json.loads(sys.argv[1])
vecfast.train(args["env"], algo=args["algo"], total_env_steps=args["env_steps"], run_dir=args["run_dir"],
              seed=args["seed"], print_every_sec=None)
"""


def train_with(source: Path, run_dir: Path, args: argparse.Namespace) -> Path:
    """Train in a fresh interpreter that imports vecfast from ``source``; the final checkpoint's path."""
    spec = {"env": args.env, "algo": args.algo, "env_steps": args.env_steps, "seed": args.seed, "run_dir": str(run_dir)}
    subprocess.run([sys.executable, "-c", TRAIN, json.dumps(spec)], cwd=source, check=True)
    (last,) = sorted((run_dir / "checkpoints").glob("last_*.pt"))[-1:]
    return last


def tensors(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every tensor and number under ``value`` (a checkpoint's nested dicts and lists) by its path."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in tensors(item, f"{prefix}{key}/").items()}
    if isinstance(value, (list, tuple)):
        return {k: v for i, item in enumerate(value) for k, v in tensors(item, f"{prefix}{i}/").items()}
    if isinstance(value, (torch.Tensor, int, float)) and not isinstance(value, bool):
        return {prefix.rstrip("/"): value}
    return {}


def learned_state(checkpoint: Path) -> dict[str, Any]:
    """What training computed: the weights and normalisers, the optimiser's state, the update count and env steps
    (not the metrics, whose times differ from run to run)."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    return {k: v for k, v in tensors(state).items() if k.split("/")[0] not in ("metrics", "config", "best_return")}


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """What the earlier checkpoint holds that ours lacks or holds otherwise (entries new in ours are bookkeeping
    added since, listed apart)."""
    out = [f"{k}: missing" for k in sorted(set(theirs) - set(ours))]
    for key in sorted(set(ours) & set(theirs)):
        a, b = ours[key], theirs[key]
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
        if not same:
            out.append(f"{key}: differs")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default=BASELINE, help="the earlier commit (default %(default)s)")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--env-steps", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vecfast-identity-") as tmp, worktree(args.against) as baseline:
        theirs = learned_state(train_with(baseline, Path(tmp) / "run_baseline", args))
        ours = learned_state(train_with(REPO, Path(tmp) / "run_here", args))
    diff = differences(ours, theirs)
    new = sorted(set(ours) - set(theirs))
    print(f"{args.algo} on {args.env}, seed {args.seed}, {args.env_steps} env steps: {len(theirs)} entries of "
          f"{args.against} compared; {len(diff)} differ; {len(new)} new entries")  # fmt: skip
    print("\n".join(diff[:50]))
    if new:
        print("new:", ", ".join(sorted({key.split("/")[0] for key in new})))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
