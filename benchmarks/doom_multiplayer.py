"""Agent-steps/s of networked 1v1 Doom duels (M matches at once) against single-player Doom vs bots.

For each M it runs, one after another in one run, with random actions (pre-sampled, not
timed):

* ``shared``: ``doom_duel_v0.vector_env(M)`` (2M agent slots; with two workers each holds
  one player position of every match; games in lockstep);
* ``vs bots``: ``vecfast/DoomDuelBots-v0`` (one learning player against one built-in bot,
  the same map, screen and action heads) with 2M envs in an ``AsyncSharedMemVectorEnv``.

"per agent" is duel agent-steps/s divided by single-player env-steps/s (the issue's target:
>= 0.5; Sample Factory reports networked multiplayer 2-3x slower than single player). CPU
time of all processes per 1000 agent-steps is reported too: it stays meaningful when other
jobs share the machine.

    python benchmarks/doom_multiplayer.py                      # M = 1, 2, 4
    python benchmarks/doom_multiplayer.py --matches 1 2 --seconds 3

Needs ``pip install vecfast[doom,pettingzoo]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

import psutil

import vecfast
from vecfast.bench import batch_stepper, cpu_seconds, run_for
from vecfast.envs.doom import doom_duel_v0


def _shared(num_matches: int, num_workers: int) -> Any:
    return doom_duel_v0.vector_env(num_matches, num_workers=num_workers)


def _vs_bots(num_envs: int, num_workers: int) -> Any:
    return vecfast.make_vec("vecfast/DoomDuelBots-v0", num_envs, vector_kwargs={"num_workers": num_workers})


def measure(env: Any, seconds: float) -> tuple[float, float]:
    """Slot-steps per second of wall time, and CPU milliseconds (all processes) per 1000 slot-steps."""
    try:
        env.action_space.seed(0)
        actions = [env.action_space.sample() for _ in range(64)]
        env.reset(seed=0)
        # games settle, each game process's reaper starts
        run_for(batch_stepper(env, itertools.repeat(actions[0]), env.num_envs), 1.0)
        workers = psutil.Process().children(recursive=True)
        cpu_start = cpu_seconds(workers)
        slot_steps, elapsed = run_for(batch_stepper(env, itertools.cycle(actions), env.num_envs), seconds)
        return slot_steps / elapsed, (cpu_seconds(workers) - cpu_start) * 1e6 / slot_steps
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--num-workers", type=int, default=2, help="worker processes of either vector env")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    rows = []
    for m in args.matches:
        row = {"matches": m}
        for name, build in (("shared", _shared), ("vs_bots", _vs_bots)):
            row[name] = measure(build(m if name != "vs_bots" else 2 * m, args.num_workers), args.seconds)
        rows.append(row)
    print(f"\n{args.seconds} s per measurement, random actions, 128x72 screens, frame skip 2; CPU: ms per 1000 steps")
    print("| M | agent-steps/s | vs-bots steps/s (2M envs) | per agent | CPU | vs-bots CPU |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        (shared, shared_cpu), (bots, bots_cpu) = row["shared"], row["vs_bots"]
        print(
            f"| {row['matches']} | {shared:,.0f} | {bots:,.0f} | {shared / bots:.2f}x "
            f"| {shared_cpu:,.0f} | {bots_cpu:,.0f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
