"""Synchronous PPO learns CartPole-v1 from vecfast's shared-memory vector env."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest

from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.schemes.synchronous import SyncTrainer

CARTPOLE_MLP = {"use_rnn": False, "encoder_mlp_layers": (64, 64), "nonlinearity": "tanh", "exploration_loss_coeff": 0.0}


def learn_cartpole(make_async: Callable, budget: int, **overrides: object) -> tuple[float, int]:
    env = make_async([lambda: gym.make("CartPole-v1")] * 8, num_workers=1)
    cfg = TrainConfig.from_overrides(
        **{
            **CARTPOLE_MLP,
            "rollout": 128,
            "batch_size": 256,
            "num_epochs": 4,
            "learning_rate": 1e-3,
            "seed": 1,
            "max_grad_norm": 0.5,
            "ppo_clip_ratio": 0.2,
            **overrides,
        }
    )
    trainer = SyncTrainer(env, PPO, cfg, budget)
    best = -np.inf
    for iteration in trainer.iterations():
        metrics = iteration.to_dict()
        best = max(best, metrics.get("mean_episode_return", -np.inf))
        if best >= 195 or metrics["env_steps"] >= budget:
            return best, int(metrics["env_steps"])
    raise AssertionError("unreachable")


@pytest.mark.slow
def test_ppo_learns_cartpole(make_async: Callable) -> None:
    best, steps = learn_cartpole(make_async, budget=80_000)
    assert best >= 195, f"mean return over 100 episodes reached only {best:.1f} in {steps} steps"


@pytest.mark.slow
def test_ppo_with_gru_core_learns_cartpole(make_async: Callable) -> None:
    best, steps = learn_cartpole(make_async, budget=60_000, use_rnn=True, rnn_size=64)
    assert best >= 195, f"mean return over 100 episodes reached only {best:.1f} in {steps} steps"
