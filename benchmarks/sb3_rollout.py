"""Time SB3 PPO's rollout collection through vecfast's SB3 adapter vs SB3's SubprocVecEnv.

Both sides build the same envs (``vecfast.wrappers.sb3.make_vec_env``, which is SB3's
``make_vec_env`` with the vector env swapped): VizdoomBasic-v1 rendering 120x160 gray
(the env's default frame skip of 1; ``--frame-skip 4`` makes each step 4x the game work and
the vector env's share of a step smaller), its screen resized to 60x80 inside each env, a
Monitor per env, and train the same PPO (CnnPolicy, rl-baselines3-zoo's Atari settings). A callback stamps
``_on_rollout_start``/``_on_rollout_end``, so "collect" is exactly the time SB3 spends in
``collect_rollouts``: stepping the envs plus the policy's forward passes. The first
rollout (games starting, caches warming) is not counted. Runs alternate between the
sides, so that load from other work on the machine hits both alike.

    python benchmarks/sb3_rollout.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass

import gymnasium as gym
import torch
from gymnasium.wrappers import ResizeObservation, TransformObservation
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import SubprocVecEnv, VecEnv

from vecfast.wrappers.sb3 import make_vec_env

# rl-baselines3-zoo hyperparams/ppo.yml, atari (frame stacking left out: it is the same on both sides)
PPO_SETTINGS = {
    "n_steps": 128,
    "n_epochs": 4,
    "batch_size": 256,
    "learning_rate": 2.5e-4,
    "clip_range": 0.1,
    "vf_coef": 0.5,
    "ent_coef": 0.01,
}
SIDES = ("vecfast", "subproc")


def screen_60x80(env: gym.Env) -> gym.Env:
    """VizDoom's Dict observation reduced to its screen, resized to 60x80."""
    env = TransformObservation(env, lambda obs: obs["screen"], env.observation_space["screen"])
    return ResizeObservation(env, (60, 80))


class RolloutTimer(BaseCallback):
    """Wall time of each ``collect_rollouts`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []
        self._start = 0.0

    def _on_rollout_start(self) -> None:
        self._start = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.times.append(time.perf_counter() - self._start)

    def _on_step(self) -> bool:
        return True


@dataclass
class Run:
    side: str
    collect_s: float  # per rollout, mean over the counted rollouts
    collect_sps: float  # env steps per second while collecting
    train_s: float  # per update (PPO's train(): the same work on both sides)
    total_sps: float  # env steps per second over the counted rollouts and their updates


def make_env(side: str, args: argparse.Namespace) -> VecEnv:
    vec_env_cls, vec_env_kwargs = (None, {"num_workers": args.workers}) if side == "vecfast" else (SubprocVecEnv, {})
    return make_vec_env(
        "vizdoom.gymnasium_wrapper:VizdoomBasic-v1",  # the module registers the id, also in fresh processes
        n_envs=args.num_envs,
        seed=0,
        wrapper_class=screen_60x80,
        env_kwargs={"frame_skip": args.frame_skip, "screen_resolution": args.resolution, "screen_format": "GRAY8"},
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
    )


def measure(side: str, args: argparse.Namespace) -> Run:
    venv = make_env(side, args)
    try:
        model = PPO("CnnPolicy", venv, seed=0, device="cpu", **PPO_SETTINGS)
        timer = RolloutTimer()
        steps_per_rollout = PPO_SETTINGS["n_steps"] * args.num_envs
        model.learn(total_timesteps=steps_per_rollout, callback=timer)  # warm-up rollout, not counted
        start = time.perf_counter()
        model.learn(total_timesteps=steps_per_rollout * args.rollouts, callback=timer, reset_num_timesteps=False)
        total = time.perf_counter() - start
    finally:
        venv.close()
    counted = timer.times[1:]
    collect = statistics.mean(counted)
    train = (total - sum(counted)) / len(counted)
    return Run(side, collect, steps_per_rollout / collect, train, steps_per_rollout * len(counted) / total)


def run_all(args: argparse.Namespace) -> list[Run]:
    """``args.repeats`` runs per side, alternating which side goes first."""
    runs: list[Run] = []
    for repeat in range(args.repeats):
        for side in SIDES if repeat % 2 == 0 else reversed(SIDES):
            run = measure(side, args)
            runs.append(run)
            print(
                f"  run {repeat + 1} {side:8s} collect {run.collect_s * 1e3:7.1f} ms/rollout "
                f"({run.collect_sps:6.0f} steps/s)   train {run.train_s * 1e3:7.1f} ms/update   "
                f"end-to-end {run.total_sps:6.0f} steps/s",
                flush=True,
            )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="vecfast worker processes")
    parser.add_argument("--frame-skip", type=int, default=1, help="VizDoom tics per step")
    parser.add_argument("--rollouts", type=int, default=5, help="timed rollouts per run (after one warm-up)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per side, interleaved")
    parser.add_argument("--resolution", default="RES_160X120", help="VizDoom screen_resolution the game renders")
    args = parser.parse_args()

    print(
        f"VizdoomBasic-v1, {args.num_envs} envs, {args.resolution} gray -> 60x80, frame skip {args.frame_skip}, "
        f"PPO CnnPolicy n_steps={PPO_SETTINGS['n_steps']}; {os.cpu_count()} CPUs; vecfast: {args.workers} workers, "
        f"SubprocVecEnv: {args.num_envs} processes; torch threads: {torch.get_num_threads()}, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}"
    )
    # VizDoom writes ./_vizdoom.ini and ./_vizdoom/; games starting at once in a fresh
    # directory race to create the latter, so the runs happen in a temporary one made ready.
    with tempfile.TemporaryDirectory(prefix="sb3_rollout_") as workdir:
        os.mkdir(os.path.join(workdir, "_vizdoom"))
        home = os.getcwd()
        os.chdir(workdir)
        try:
            runs = run_all(args)
        finally:
            os.chdir(home)

    def median(side: str, metric: str) -> float:
        return statistics.median(getattr(r, metric) for r in runs if r.side == side)

    rows = [
        ("collect_rollouts, ms per rollout", "collect_s", 1e3, False),
        ("collection, env steps/s", "collect_sps", 1.0, True),
        ("PPO update, ms", "train_s", 1e3, False),
        ("end-to-end (collect + train), steps/s", "total_sps", 1.0, True),
    ]
    print(f"\n{f'median of {args.repeats} runs each':37s} | {'vecfast':>9s} | {'Subproc':>9s} | vecfast speed-up")
    for label, metric, scale, higher_is_better in rows:
        ours, theirs = median("vecfast", metric), median("subproc", metric)
        ratio = ours / theirs if higher_is_better else theirs / ours
        print(f"{label:37s} | {ours * scale:9.1f} | {theirs * scale:9.1f} | {ratio:.2f}x")


if __name__ == "__main__":
    main()
