"""Self-play on connect four: win rates against the initial policy and a one-ply bot over training time, per seed.

    python benchmarks/selfplay_connect_four.py --minutes 30 --seeds 0-2 --checkpoint-every-min 5 --games 200

Each seed trains ``vecfast.train(connect_four_v3, algo=--algo)`` (APPO by default; the learner against itself and
its snapshots) for ``--minutes``, keeping a checkpoint every ``--checkpoint-every-min``, in ``--runs/seed<N>``. Every
checkpoint then plays ``--games`` games (seats alternated) against random legal moves, the untrained policy of the
same config
(``opponent="initial"``; both sides sample their moves, as deterministic play of two fixed policies repeats the
same two games) and against a one-ply bot (it takes a winning move if there is one, blocks the opponent's if there
is one, else plays a random legal move) twice: sampling its moves, and playing its most likely move (``argmax``:
the bot's random moves vary the games). Its row (run: ``--runs``'s name and the seed's, so that trials of several
settings share a file; seed, minutes, env steps, the learner's Elo, win/draw/loss rates against each, and from as
many more games against the one-ply bot its one-move tactics, sampled and argmax: the share of its chances to win
at once that it took, and of the opponent's threats it blocked) is appended to ``--csv`` as soon as it is
measured. Points already in the file are not played again, and ``--resume`` trains a seed's run on for
``--minutes`` more, so a curve grows in chunks across sessions. The target (issue 25): win rate >= 0.9 against
the initial policy and >= 0.5 against the one-ply bot within 30 minutes, on 3 seeds.

``--against one_ply`` is the baseline self-play must beat (issue 35): the same model and APPO settings trained
directly against the fixed one-ply bot (:class:`vecfast.selfplay.against_bot.AgainstBotEnv`, 16 envs in 2
workers as self-play's 16 matches), no self-play. If it climbs where self-play stays flat, the self-play plan
limits learning (whom it plays, the steps it learns from, the bootstrap across the opponent's moves); if not, the
learner or the model does.

    python benchmarks/selfplay_connect_four.py --against one_ply --minutes 30 --seeds 0 --runs runs/c4_vs_bot \
        --csv benchmarks/results/selfplay_connect_four_vs_bot.csv
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from common import Sitting, append_row, checkpoints_to_measure, parse_overrides, parse_seeds, rows_of
from pettingzoo.classic import connect_four_v3

from vecfast import AsyncSharedMemVectorEnv
from vecfast.selfplay import one_ply_connect_four
from vecfast.selfplay.against_bot import AgainstBotEnv
from vecfast.selfplay.bots import TacticsCount, count_connect_four_tactics
from vecfast.selfplay.matches import play_games
from vecfast.trainers import evaluate, load_policy, train
from vecfast.trainers.tools.plot import read_metrics

CSV = Path(__file__).parent / "results" / "selfplay_connect_four.csv"


@dataclass(frozen=True)
class Opponent:
    """One opponent of the curve, and whether the policy plays its most likely moves against it."""

    make: Callable[[], Any]
    argmax: bool


OPPONENTS = {
    "random": Opponent(lambda: "random", argmax=False),
    "initial": Opponent(lambda: "initial", argmax=False),
    "one_ply": Opponent(lambda: one_ply_connect_four(seed=0), argmax=False),
    "one_ply_argmax": Opponent(lambda: one_ply_connect_four(seed=0), argmax=True),
}
TACTICS = {"": False, "_argmax": True}  # column suffix: argmax
COLUMNS = (
    ["run", "seed", "minutes", "env_steps", "elo", "games"]
    + [f"{outcome}_vs_{name}" for name in OPPONENTS for outcome in ("win", "draw", "loss")]
    + [f"{column}{suffix}" for suffix in TACTICS for column in ("wins_taken", "blocks_made")]
)


def against_one_ply(num_envs: int = 16, num_workers: int = 2) -> AsyncSharedMemVectorEnv:
    """Connect four against the one-ply bot, double-buffered as APPO samples self-play's matches."""
    make = functools.partial(AgainstBotEnv, connect_four_v3.env, one_ply_connect_four)
    return AsyncSharedMemVectorEnv([make] * num_envs, num_workers=num_workers, batch_size=num_envs // 2)


TRAINED_AGAINST = {"self": connect_four_v3, "one_ply": against_one_ply}


def tactics(path: Path, seed: int, games: int, argmax: bool) -> TacticsCount:
    """The checkpoint's one-move tactics over ``games`` more games against the one-ply bot."""
    policy, count = load_policy(path), TacticsCount()
    torch.manual_seed(seed)
    watched = count_connect_four_tactics(lambda observation: int(policy.act(observation, argmax)), count)
    play_games(watched, one_ply_connect_four(seed=seed), connect_four_v3.env, games, seed=seed)
    return count


def curve(run_dir: Path, seed: int, games: int, csv_path: Path) -> list[dict[str, Any]]:
    """Play the run's checkpoints not yet in ``csv_path`` against each opponent, appending each row at once."""
    run = f"{run_dir.parent.name}/{run_dir.name}"  # --runs's name and the seed's: one file holds several --runs
    done = {int(row["env_steps"]) for row in rows_of(csv_path, run)}
    elo_at = {m["env_steps"]: m["elo"] for m in read_metrics(run_dir) if "elo" in m}
    rows = []
    for point in checkpoints_to_measure(run_dir, done):
        path, steps = point.path, point.env_steps
        row: dict[str, Any] = {
            "run": run,
            "seed": seed,
            "minutes": point.minutes,
            "env_steps": steps,
            "elo": elo_at.get(steps, float("nan")),
            "games": games,
        }
        for name, opponent in OPPONENTS.items():
            result = evaluate(
                path,
                env=connect_four_v3,
                opponent=opponent.make(),
                episodes=games,
                seed=seed,
                deterministic=opponent.argmax,
            )
            for outcome in ("win", "draw", "loss"):
                row[f"{outcome}_vs_{name}"] = result.metrics[f"{outcome}_rate"]
        for suffix, argmax in TACTICS.items():
            count = tactics(path, seed, games, argmax)
            row[f"wins_taken{suffix}"], row[f"blocks_made{suffix}"] = count.win_taken_rate, count.block_rate
        append_row(csv_path, COLUMNS, row)
        rows.append(row)
        print(
            f"seed {seed} {row['minutes']:6.1f} min {steps:>11,} steps  elo {row['elo']:7.1f}  "
            + "  ".join(f"vs {name}: win {row[f'win_vs_{name}']:.3f}" for name in OPPONENTS)
            + f"  wins taken {row['wins_taken']:.3f} blocks {row['blocks_made']:.3f}"
            + f" (argmax {row['wins_taken_argmax']:.3f}, {row['blocks_made_argmax']:.3f})",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="training time per seed (0: play only)")
    parser.add_argument("--seeds", type=parse_seeds, default=[0, 1, 2])
    parser.add_argument("--checkpoint-every-min", type=float, default=5.0)
    parser.add_argument("--games", type=int, default=200, help="games per opponent per point, seats alternated")
    parser.add_argument("--runs", type=Path, default=Path("runs/selfplay_connect_four"), help="seed<N>/ per seed")
    parser.add_argument("--resume", action="store_true", help="train each seed's run on for --minutes more")
    parser.add_argument(
        "--total-minutes",
        type=float,
        help="each run's time bound across its sittings (default: each sitting's --minutes is its bound), so that "
        "the learning rate's decay spans the whole curve: each sitting trains --minutes of it",
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--csv", type=Path, default=CSV, help="the curve's file, one row appended per point")
    parser.add_argument("--algo", default="appo", help="appo (default), ppo (sync) or ddppo")
    parser.add_argument(
        "--against",
        choices=sorted(TRAINED_AGAINST),
        default="self",
        help="train by self-play (default) or directly against the one-ply bot (the baseline self-play must beat)",
    )
    args = parser.parse_args()
    for seed in args.seeds:
        run_dir = args.runs / f"seed{seed}"
        if args.minutes > 0:
            sitting = Sitting(args.minutes, args.total_minutes)
            with sitting.stopped_in_time(run_dir):
                result = train(
                    TRAINED_AGAINST[args.against],
                    algo=args.algo,
                    total_env_steps=10**10,
                    run_dir=run_dir,
                    resume=args.resume,
                    seed=seed,
                    train_for_seconds=sitting.train_for_seconds(run_dir),
                    save_every_sec=args.checkpoint_every_min * 60,
                    keep_checkpoints=1000,
                    save_best_every_sec=None,
                    **parse_overrides(args.set),
                )
                print(json.dumps({"seed": seed, "env_steps": result.stats["env_steps"], "fps": result.stats["fps"]}))
        curve(run_dir, seed, args.games, args.csv)


if __name__ == "__main__":
    main()
