"""A benchmark's figure for this checkout against an earlier commit, interleaved in one run: a refactor keeps its
speed.

Each round runs the command in the earlier commit's tree (a temporary ``git worktree``) and in this checkout, one
after the other (the earlier commit first in odd rounds, second in even ones, so that whatever drifts over a run,
the machine's clock or its caches, weighs on both alike), in a fresh interpreter whose working directory is that
tree; ``{out}`` in the command becomes a
JSON file whose ``--metric`` key is read. Reports every round's figures, the medians and their ratio.

    python benchmarks/commits_ab.py --against c28a90c --rounds 3 --metric training_frames_per_s -- \\
        python benchmarks/train_appo.py --seconds 60 --sim-seconds 10 --out {out}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, worktree


def measure(tree: Path, command: list[str], metric: str, out: Path) -> float:
    """Run ``command`` in ``tree`` (its vecfast first on the path); the ``metric`` it wrote to ``out``."""
    argv = [sys.executable if word == "python" else word.replace("{out}", str(out)) for word in command]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(argv, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return float(json.loads(out.read_text())[metric])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--metric", required=True, help="the key of the command's JSON output to compare")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command, with {out} for its JSON")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    figures: dict[str, list[float]] = {args.against: [], "this checkout": []}
    with tempfile.TemporaryDirectory() as tmp, worktree(args.against) as baseline:
        for round_ in range(args.rounds):
            trees = [(args.against, baseline), ("this checkout", REPO)]
            for name, tree in trees if round_ % 2 == 0 else trees[::-1]:
                value = measure(tree, command, args.metric, Path(tmp) / f"{round_}.json")
                figures[name].append(value)
                print(f"round {round_ + 1}: {name}: {args.metric} {value:,.1f}", flush=True)
    medians = {name: statistics.median(values) for name, values in figures.items()}
    for name, values in figures.items():
        print(f"{name}: median {medians[name]:,.1f} (min {min(values):,.1f}, max {max(values):,.1f})")
    print(f"ratio (this checkout / {args.against}): {medians['this checkout'] / medians[args.against]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
