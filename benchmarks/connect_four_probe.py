"""What a connect-four policy believes where one move decides: the probability it puts on the winning column, and
its critic's value there.

    python benchmarks/connect_four_probe.py RUN_DIR_OR_CHECKPOINT [...] --games 200

The policy plays ``--games`` games against ``--against`` (the one-ply bot by default; ``self``: itself, the positions
its own self-play reaches; ``random``: random legal moves) (seats alternated, its moves sampled) through
:func:`vecfast.selfplay.probes.probing_bot`: at each of its turns where it can win at once, the probability on the
winning column(s) and its critic's value; where it cannot win but the opponent threatens to, the probability on the
blocking column(s) (what these say: :mod:`vecfast.selfplay.probes`). Prints one line per checkpoint.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from pettingzoo.classic import connect_four_v3

from vecfast.selfplay.bots import one_ply_connect_four, random_bot
from vecfast.selfplay.matches import play_games
from vecfast.selfplay.probes import BeliefProbe, probing_bot
from vecfast.trainers import load_policy


def spread(values: list[float]) -> str:
    x = np.asarray(values)
    if not len(x):
        return "none"
    return (
        f"n {len(x)}, median {np.median(x):.3f}, mean {x.mean():.3f}, "
        f"< 0.1: {np.mean(x < 0.1):.2f}, > 0.9: {np.mean(x > 0.9):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", type=Path, help="run directories (their last policy) or .pt files")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--against", choices=("one_ply", "self", "random"), default="one_ply")
    args = parser.parse_args()
    for path in args.checkpoints:
        probe = BeliefProbe()
        torch.manual_seed(args.seed)
        policy = load_policy(path)
        opponents = {
            "one_ply": lambda: one_ply_connect_four(seed=args.seed),
            "self": lambda: lambda observation: int(policy.act(observation)),  # noqa: B023 (called at once)
            "random": lambda: random_bot(seed=args.seed),
        }
        play_games(
            probing_bot(policy, probe),
            opponents[args.against](),
            connect_four_v3.env,
            args.games,
            seed=args.seed,
        )
        sure = np.asarray(probe.win_probability) > 0.9
        values = np.asarray(probe.win_value)
        print(f"{path} against {args.against}")
        print(f"  p(winning column) where it can win: {spread(probe.win_probability)}")
        print(f"  p(blocking column) where it must block: {spread(probe.block_probability)}")
        print(
            f"  critic's value where it can win: median {np.median(values):.3f}; where p(win) > 0.9: "
            f"median {np.median(values[sure]) if sure.any() else float('nan'):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
