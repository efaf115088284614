"""A2C, written outside vecfast and registered as an algorithm: the same class runs under vecfast's
synchronous scheme and its distributed one (each rank learns from its own envs; gradients averaged).

    python examples/a2c.py                                          # sync, CartPole-v1
    python examples/a2c.py --scheme distributed --num-processes 2   # 2 ranks on this machine

An algorithm is a class built as ``Algorithm(model, cfg)`` with ``learn``, ``version``,
``state_dict`` and ``load_state_dict`` (:class:`vecfast.trainers.Algorithm`). It learns through
``model.evaluate`` (which the distributed scheme routes through DistributedDataParallel) and may
use vecfast's shared components: the rollout storage it is given, GAE, masked means.
Registration runs at import, so the ranks a distributed run starts (which import this file) know "a2c".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import vecfast
from vecfast.trainers import ActorCritic, TrainConfig, register_algorithm
from vecfast.trainers.algorithm.losses import gae, masked_mean
from vecfast.trainers.algorithm.trajectories import Trajectories


class A2C:
    """Advantage actor-critic (Mnih et al. 2016): one gradient step per batch, advantages from GAE, RMSprop."""

    def __init__(self, model: ActorCritic, cfg: TrainConfig) -> None:
        self.model, self.cfg = model, cfg
        self.optimizer = torch.optim.RMSprop(model.parameters(), lr=cfg.learning_rate, alpha=0.99, eps=1e-5)
        self.version = 0

    def learn(
        self, batch: Trajectories, progress: float, *, on_policy: bool, after_step: Callable[[], None]
    ) -> dict[str, float]:
        model, cfg = self.model, self.cfg
        model.update_normalizers({k: v[:, :-1][batch.valid] for k, v in batch.obs.items()})
        advantages, returns = gae(batch, batch.values, cfg.gamma, cfg.gae_lambda)
        dist, values = model.evaluate(batch.obs, batch.first, batch.initial_state, batch.rollout)
        if model.returns_norm is not None:
            model.returns_norm.update(returns[batch.valid])
        mask = batch.valid.float()
        policy_loss = -masked_mean(dist.log_prob(batch.actions) * advantages, mask)
        value_loss = 0.5 * masked_mean((values[:, :-1] - model.normalize_value(returns)).square(), mask)
        entropy = masked_mean(dist.entropy(), mask)
        loss = policy_loss + cfg.value_loss_coeff * value_loss - cfg.exploration_loss_coeff * entropy
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.version += 1
        after_step()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item()}

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "version": self.version}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = state["version"]


# A2C's usual settings: short rollouts, one step on all of them, RMSprop at 7e-4.
register_algorithm("a2c", A2C, defaults={"rollout": 8, "batch_size": 128, "learning_rate": 7e-4, "num_epochs": 1})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--scheme", default="sync", choices=["sync", "distributed"])
    parser.add_argument("--num-processes", type=int, default=None, help="ranks of the distributed scheme")
    parser.add_argument("--total-env-steps", type=int, default=200_000)
    parser.add_argument("--run-dir", default=None)
    args = parser.parse_args()
    result = vecfast.train(
        args.env,
        algo="a2c",
        scheme=args.scheme,
        num_processes=args.num_processes,
        total_env_steps=args.total_env_steps,
        run_dir=args.run_dir,
        num_workers=1,
        num_envs_per_worker=16,
        seed=0,
    )
    stats = result.stats
    print(f"{args.scheme}: mean return {stats['mean_episode_return']:.1f} after {stats['env_steps']:,} steps")


if __name__ == "__main__":
    main()
