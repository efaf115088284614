"""Why a PointNav policy fails on held-out scenes: each episode's end (success, a STOP short of the goal, or the
500-step limit) and the geodesic distance it had left, sampled and argmax.

    python benchmarks/pointnav_failures.py RUN_DIR [--checkpoint PATH] [--episodes 200] [--split val]

Success rate and SPL say how often; this says what to change. Timeouts far from the goal mean the agent loses its
way (exploration, memory); STOPs within a metre of it mean it misjudges the goal's distance.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from vecfast.trainers import evaluate
from vecfast.trainers.run.evaluation import episode_quotas, run_env

MODES = {"sampled": False, "argmax": True}


@dataclass(frozen=True)
class EpisodeEnd:
    kind: str  # "success", "wrong stop" or "timeout"
    distance_left: float
    length: int


class EpisodeEnds(gym.vector.VectorWrapper):
    """Records how each episode of the wrapped PointNav vector env ended: the ``episodes`` that ``vecfast.evaluate``
    counts (env ``i`` of ``n`` its first ``episodes // n``, plus one if ``i < episodes % n``), not those the other
    envs play meanwhile."""

    def __init__(self, env: gym.vector.VectorEnv, episodes: int) -> None:
        super().__init__(env)
        self.quota = episode_quotas(episodes, env.num_envs)
        self.ends: list[EpisodeEnd] = []

    def step(self, actions):  # noqa: ANN001, ANN201 (gymnasium's signature)
        obs, reward, terminated, truncated, info = self.env.step(actions)
        for i in np.flatnonzero((np.asarray(terminated) | np.asarray(truncated)) & (self.quota > 0)):
            self.quota[i] -= 1
            kind = "success" if info["success"][i] else "wrong stop" if terminated[i] else "timeout"
            self.ends.append(EpisodeEnd(kind, float(info["distance_to_goal"][i]), int(info["episode_length"][i])))
        return obs, reward, terminated, truncated, info


def describe(ends: list[EpisodeEnd]) -> str:
    lines = [f"  {dict(Counter(end.kind for end in ends))}"]
    for kind in ("wrong stop", "timeout"):
        left = np.array([end.distance_left for end in ends if end.kind == kind])
        if len(left):
            lengths = [end.length for end in ends if end.kind == kind]
            lines.append(
                f"  {kind}: distance left median {np.median(left):.2f} m (quartiles {np.percentile(left, 25):.2f}-"
                f"{np.percentile(left, 75):.2f}), within 1 m {np.mean(left < 1.0):.2f}; "
                f"length median {np.median(lengths):.0f}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default=None, help="a checkpoint of the run (default: its last)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--split", default="val")
    args = parser.parse_args()
    for mode, deterministic in MODES.items():
        env = EpisodeEnds(run_env(args.run_dir).with_kwargs({"split": args.split}).build(8), args.episodes)
        try:
            policy = args.checkpoint or args.run_dir
            result = evaluate(policy, env=env, episodes=args.episodes, deterministic=deterministic)
        finally:
            env.close()
        print(f"{mode}: success {result.success:.3f} SPL {result.spl:.3f}, {len(env.ends)} episodes")
        print(describe(env.ends))


if __name__ == "__main__":
    main()
