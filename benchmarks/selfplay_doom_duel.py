"""A population self-playing Doom duels: each policy's frags per episode against a built-in bot, and its Elo, over time.

    python benchmarks/selfplay_doom_duel.py --minutes 40 --policies 4 --checkpoint-every-min 10
    python benchmarks/selfplay_doom_duel.py --minutes 20 --resume          # the next chunk of the same run

Trains ``vecfast.train(doom_duel_v0, num_policies=--policies)`` (APPO; each agent of each duel plays a random
policy of the population, re-drawn every few episodes, and every policy learns from its own steps) for
``--minutes`` in ``--run-dir``, keeping a checkpoint every ``--checkpoint-every-min``. Then every policy of every
checkpoint not yet in ``--csv`` plays ``--episodes`` whole episodes of ``vecfast/DoomDuelBots-v0`` (the same map,
screen and actions, against one built-in bot) with sampled actions, and its row (run, minutes, env steps, policy,
its Elo among the population from ``metrics.jsonl``, mean frags, deaths and return against the bot) is appended
at once. ``--resume`` trains the run on, so the curve grows in chunks across sessions (issue 25: a 60-minute
curve of frags against bots and the population's Elo). ``--kill-games-every S`` SIGKILLs one of the run's VizDoom
games every S seconds of training (issue 36: the matches heal; compare with a run without kills).

    python benchmarks/selfplay_doom_duel.py --minutes 10 --policies 2 --checkpoint-every-min 2 \
        --run-dir runs/duel_kills --kill-games-every 60 --csv benchmarks/results/selfplay_doom_duel_kills.csv
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import psutil
from common import append_row, checkpoints_to_measure, parse_overrides, rows_of

from vecfast.envs.doom import doom_duel_v0
from vecfast.trainers import ActorCritic, EvalResult, evaluate, load_policy, train
from vecfast.trainers.tools.plot import read_metrics

CSV = Path(__file__).parent / "results" / "selfplay_doom_duel.csv"
COLUMNS = ["run", "minutes", "env_steps", "policy", "elo", "episodes", "frags", "deaths", "return"]


def _play_bot(policy: ActorCritic, episodes: int, seed: int) -> EvalResult:
    """``episodes`` episodes against the bot (a game that crashes, as VizDoom's engine did at the 30-minute point of
    a 60-min curve, is rebuilt by evaluate's healing envs and its episode played again)."""
    return evaluate(policy, env="vecfast/DoomDuelBots-v0", episodes=episodes, deterministic=False, seed=seed)


def curve(run_dir: Path, policies: int, episodes: int, csv_path: Path) -> None:
    """Play each policy of the run's checkpoints not yet in ``csv_path`` against the bot, a row each at once."""
    done = {int(row["env_steps"]) for row in rows_of(csv_path, run_dir.name)}
    metrics = {m["env_steps"]: m for m in read_metrics(run_dir)}
    for point in checkpoints_to_measure(run_dir, done):
        for policy in range(policies):
            result = _play_bot(load_policy(point.path, policy=policy), episodes, seed=policy)
            row: dict[str, Any] = {
                "run": run_dir.name,
                "minutes": point.minutes,
                "env_steps": point.env_steps,
                "policy": policy,
                "elo": metrics.get(point.env_steps, {}).get(f"policy_{policy}_elo", float("nan")),
                "episodes": episodes,
                "frags": result.metrics["frags"],
                "deaths": result.metrics["deaths"],
                "return": result.mean_return,
            }
            append_row(csv_path, COLUMNS, row)
            print(json.dumps(row), flush=True)


class GameKiller(threading.Thread):
    """SIGKILLs one of this process's VizDoom games every ``every`` seconds while it runs (a context manager)."""

    def __init__(self, every: float) -> None:
        super().__init__(daemon=True)
        self.every, self.kills, self.stop = every, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            games = [p for p in psutil.Process().children(recursive=True) if p.name() == "vizdoom"]
            if games:
                games[self.kills % len(games)].kill()
                self.kills += 1

    def __enter__(self) -> GameKiller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=40.0, help="training time of this chunk (0: play only)")
    parser.add_argument("--policies", type=int, default=4)
    parser.add_argument("--matches", type=int, default=4, help="duels at once (2 agent slots each)")
    parser.add_argument("--checkpoint-every-min", type=float, default=10.0)
    parser.add_argument("--episodes", type=int, default=8, help="episodes against the bot per policy per point")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/selfplay_doom_duel"))
    parser.add_argument("--resume", action="store_true", help="train --run-dir's run on for --minutes more")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--csv", type=Path, default=CSV, help="the curve's file, one row appended per point")
    parser.add_argument("--kill-games-every", type=float, help="SIGKILL one VizDoom game every this many seconds")
    args = parser.parse_args()
    if args.minutes > 0:
        killer = GameKiller(args.kill_games_every) if args.kill_games_every else contextlib.nullcontext()
        with killer:
            result = train(
                doom_duel_v0,
                algo="appo",
                total_env_steps=10**12,
                run_dir=args.run_dir,
                resume=args.resume,
                num_workers=1,
                num_envs_per_worker=args.matches,
                num_policies=args.policies,
                seed=args.seed,
                train_for_seconds=args.minutes * 60,
                save_every_sec=args.checkpoint_every_min * 60,
                keep_checkpoints=1000,
                save_best_every_sec=None,
                **parse_overrides(args.set),
            )
        kills = killer.kills if args.kill_games_every else 0
        restarts = read_metrics(args.run_dir)[-1].get("restarts", 0)
        print(json.dumps({"env_steps": result.stats["env_steps"], "fps": result.stats["fps"], "game_kills": kills,
                          "restarts": restarts}), flush=True)  # fmt: skip
    curve(args.run_dir, args.policies, args.episodes, args.csv)


if __name__ == "__main__":
    main()
