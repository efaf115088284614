"""Agent-steps/s of PettingZoo envs as one vector env: vecfast vs SuperSuit vs a plain loop.

Runs ``--num-envs`` copies of a PettingZoo ParallelEnv as one flat vector env with one
slot per agent, with random actions (pre-sampled, not timed), through:

* ``loop``: the ParallelEnvs stepped one after another in this process (no vector env);
* ``supersuit``: SuperSuit's ``pettingzoo_env_to_vec_env_v1`` + ``concat_vec_envs_v1``
  with ``num_cpus=--num-workers`` (the usual PettingZoo + SB3 recipe);
* ``vecfast``: ``vecfast.wrappers.pettingzoo.pettingzoo_to_vector`` with the same number
  of worker processes.

An agent-step is one slot of one vector step (slots of agents that have ended count too,
as every backend carries them). Besides agent-steps per second of wall time it reports the
CPU time all processes spent per 1000 agent-steps, which stays meaningful when other jobs
share the machine. Backends alternate within each repeat so that drifts in machine load
hit them alike; the median over repeats is reported.

    python benchmarks/pettingzoo_vector.py                          # pistonball and KAZ
    python benchmarks/pettingzoo_vector.py --envs kaz --seconds 3

Needs ``pip install supersuit pymunk`` (pymunk for pistonball).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

from vecfast.bench import batch_stepper, cpu_seconds, run_for
from vecfast.wrappers.pettingzoo import pettingzoo_to_vector

# name -> (ParallelEnv factory, whether agents can end early: SuperSuit then needs its black_death wrapper)
ENVS: dict[str, tuple[Callable[[], Any], bool]] = {}


def _register_envs() -> None:
    from pettingzoo.butterfly import knights_archers_zombies_v11, pistonball_v6

    ENVS["pistonball"] = (functools.partial(pistonball_v6.parallel_env, n_pistons=20, max_cycles=125), False)
    ENVS["kaz"] = (functools.partial(knights_archers_zombies_v11.parallel_env, max_cycles=300), True)


class _Loop:
    """The ParallelEnvs stepped in turn in this process: what a vector env has to beat per core."""

    def __init__(self, env_fn: Callable[[], Any], num_envs: int) -> None:
        self.envs = [env_fn() for _ in range(num_envs)]
        self.agents = list(self.envs[0].possible_agents)

    def reset(self, seed: int) -> None:
        for m, env in enumerate(self.envs):
            env.reset(seed=seed + m)

    def step(self, actions: np.ndarray) -> None:
        n = len(self.agents)
        for m, env in enumerate(self.envs):
            if not env.agents:
                env.reset()
                continue
            playing = set(env.agents)
            env.step({a: actions[m * n + i] for i, a in enumerate(self.agents) if a in playing})

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _build(backend: str, env_fn: Callable[[], Any], agents_end_early: bool, num_envs: int, num_workers: int) -> Any:
    if backend == "loop":
        return _Loop(env_fn, num_envs)
    if backend == "vecfast":
        return pettingzoo_to_vector(env_fn, num_envs, num_workers=num_workers)
    import supersuit

    parallel_env = supersuit.black_death_v3(env_fn()) if agents_end_early else env_fn()
    vec = supersuit.pettingzoo_env_to_vec_env_v1(parallel_env)
    return supersuit.concat_vec_envs_v1(vec, num_envs, num_cpus=num_workers, base_class="gymnasium")


def _random_actions(env_fn: Callable[[], Any], num_envs: int, count: int) -> list[np.ndarray]:
    """``count`` action batches, one row per agent slot."""
    probe = env_fn()
    num_slots = num_envs * len(probe.possible_agents)
    space = probe.action_space(probe.possible_agents[0])
    probe.close()
    space.seed(0)
    return [np.stack([np.asarray(space.sample()) for _ in range(num_slots)]) for _ in range(count)]


def measure(backend: str, env_name: str, num_envs: int, num_workers: int, seconds: float) -> tuple[float, float]:
    """Agent-steps per second of wall time, and CPU milliseconds (all processes) per 1000 agent-steps."""
    env_fn, agents_end_early = ENVS[env_name]
    actions = _random_actions(env_fn, num_envs, 64)
    env = _build(backend, env_fn, agents_end_early, num_envs, num_workers)
    try:
        env.reset(seed=0)
        num_slots = len(actions[0])
        run_for(batch_stepper(env, actions, num_slots), calls=5)  # warm-up
        workers = psutil.Process().children(recursive=True)
        cpu_start = cpu_seconds(workers)
        agent_steps, elapsed = run_for(batch_stepper(env, itertools.cycle(actions), num_slots), seconds)
        return agent_steps / elapsed, (cpu_seconds(workers) - cpu_start) * 1e6 / agent_steps
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["pistonball", "kaz"])
    parser.add_argument("--num-envs", type=int, default=4, help="copies of the ParallelEnv")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4.0, help="per backend and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["loop", "supersuit", "vecfast"])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    _register_envs()
    results: dict[str, dict[str, dict[str, float]]] = {}
    for env_name in args.envs:
        runs: dict[str, list[tuple[float, float]]] = {b: [] for b in args.backends}
        for repeat in range(args.repeats):
            order = args.backends if repeat % 2 == 0 else args.backends[::-1]
            for backend in order:
                runs[backend].append(measure(backend, env_name, args.num_envs, args.num_workers, args.seconds))
        results[env_name] = {
            b: {
                "agent_steps_per_s": statistics.median(rate for rate, _ in v),
                "cpu_ms_per_1000_agent_steps": statistics.median(cpu for _, cpu in v),
            }
            for b, v in runs.items()
        }
        base = results[env_name].get("supersuit")
        setup = f"{args.num_envs} envs, {args.num_workers} workers, median of {args.repeats} x {args.seconds} s"
        print(f"\n{env_name}: {setup}")
        print("| backend | agent-steps/s | vs supersuit | CPU ms per 1000 agent-steps | vs supersuit |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for backend, r in results[env_name].items():
            rate, cpu = r["agent_steps_per_s"], r["cpu_ms_per_1000_agent_steps"]
            rate_ratio = f"{rate / base['agent_steps_per_s']:.2f}x" if base else "-"
            cpu_ratio = f"{cpu / base['cpu_ms_per_1000_agent_steps']:.2f}x" if base else "-"
            print(f"| {backend} | {rate:,.0f} | {rate_ratio} | {cpu:,.1f} | {cpu_ratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "agent_steps_per_s": results}, f, indent=2)


if __name__ == "__main__":
    main()
