"""What a connect-four policy believes where one move decides: the probability it puts on the winning column, and
its critic's value there.

    python benchmarks/connect_four_probe.py RUN_DIR_OR_CHECKPOINT [...] --games 200

The policy plays ``--games`` games against the one-ply bot (seats alternated, its moves sampled). At each of its
turns where it can win at once, the probe reads its distribution: the probability on the winning column(s), and the
value its critic gives the position; where it cannot win but the opponent threatens to, the probability on the
blocking column(s). A policy that half-takes its wins because it is unsure puts ~0.5 on them everywhere; one that
has learned some patterns and not others puts ~1 on some and ~0 on the rest. The critic should value a position
it wins at once with probability p at about p (a win is worth 1): a much lower value says the critic does not see
the win either. Prints one line per checkpoint.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pettingzoo.classic import connect_four_v3

from vecfast.selfplay.bots import one_move_tactics, one_ply_connect_four
from vecfast.selfplay.matches import play_games
from vecfast.trainers import load_policy
from vecfast.trainers.algorithm.models import ActorCritic, obs_to_tensors


@dataclass
class Probe:
    """The policy's probability on the tactical columns at each decisive turn, and its value where it could win."""

    win_probability: list[float] = field(default_factory=list)
    win_value: list[float] = field(default_factory=list)
    block_probability: list[float] = field(default_factory=list)


def probed(policy: ActorCritic, probe: Probe) -> Any:
    """``policy`` as a bot that samples its moves and records its beliefs at decisive turns into ``probe``."""

    def bot(observation: Mapping[str, Any]) -> int:
        entries = {key: np.asarray(observation[key])[None] for key in policy.obs_spaces}
        with torch.no_grad():
            dist, value, _ = policy.step(
                obs_to_tensors(entries, "cpu"), policy.initial_state(1), torch.ones(1, dtype=torch.bool)
            )
        probs = dist.dists[0].probs[0].numpy()
        wins, blocks = one_move_tactics(observation)
        if wins:
            probe.win_probability.append(float(probs[wins].sum()))
            probe.win_value.append(float(value[0]))
        elif blocks:
            probe.block_probability.append(float(probs[blocks].sum()))
        return int(dist.sample()[0])

    return bot


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
    args = parser.parse_args()
    for path in args.checkpoints:
        probe = Probe()
        torch.manual_seed(args.seed)
        play_games(
            probed(load_policy(path), probe),
            one_ply_connect_four(seed=args.seed),
            connect_four_v3.env,
            args.games,
            seed=args.seed,
        )
        sure = np.asarray(probe.win_probability) > 0.9
        values = np.asarray(probe.win_value)
        print(f"{path}")
        print(f"  p(winning column) where it can win: {spread(probe.win_probability)}")
        print(f"  p(blocking column) where it must block: {spread(probe.block_probability)}")
        print(
            f"  critic's value where it can win: median {np.median(values):.3f}; where p(win) > 0.9: "
            f"median {np.median(values[sure]) if sure.any() else float('nan'):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
