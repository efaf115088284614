"""Agent-steps/s of networked 1v1 Doom duels (M matches at once) against single-player Doom vs bots.

For each M it runs, one after another in one run, with random actions (pre-sampled, not
timed):

* ``duels``: M ``doom_duel_v0`` matches as one ``MultiAgentVectorEnv`` (2M agent slots; each
  match in a worker process, each player's game in its own process, games in lockstep);
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
import json
import time
from typing import Any

import psutil
from pettingzoo_vector import cpu_seconds

import vecfast
from vecfast.multiagent import MultiAgentVectorEnv, doom_duel_v0


def _duels(num_matches: int, num_workers: int) -> Any:
    return MultiAgentVectorEnv([doom_duel_v0.parallel_env] * num_matches, num_workers=num_workers)


def _vs_bots(num_envs: int, num_workers: int) -> Any:
    return vecfast.make_vec("vecfast/DoomDuelBots-v0", num_envs, vector_kwargs={"num_workers": num_workers})


def measure(env: Any, seconds: float) -> tuple[float, float]:
    """Slot-steps per second of wall time, and CPU milliseconds (all processes) per 1000 slot-steps."""
    try:
        env.action_space.seed(0)
        actions = [env.action_space.sample() for _ in range(64)]
        env.reset(seed=0)
        warm_up_until = time.perf_counter() + 1.0  # games settle, each game process's reaper starts
        while time.perf_counter() < warm_up_until:
            env.step(actions[0])
        workers = psutil.Process().children(recursive=True)
        cpu_start = cpu_seconds(workers)
        steps = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            env.step(actions[steps % len(actions)])
            steps += 1
        slot_steps = steps * env.num_envs
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
        duel_rate, duel_cpu = measure(_duels(m, min(args.num_workers, m)), args.seconds)
        bots_rate, bots_cpu = measure(_vs_bots(2 * m, args.num_workers), args.seconds)
        rows.append({"matches": m, "duel": [duel_rate, duel_cpu], "vs_bots": [bots_rate, bots_cpu]})
    print(f"\n{args.seconds} s per measurement, random actions, 128x72 screens, frame skip 2")
    print("| M | duel agent-steps/s | vs-bots steps/s (2M envs) | per agent | duel CPU ms/1000 | vs-bots CPU ms/1000 |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        (duel_rate, duel_cpu), (bots_rate, bots_cpu) = row["duel"], row["vs_bots"]
        print(
            f"| {row['matches']} | {duel_rate:,.0f} | {bots_rate:,.0f} | {duel_rate / bots_rate:.2f}x "
            f"| {duel_cpu:,.2f} | {bots_cpu:,.2f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
