"""The learning both trainers share: epochs of minibatches, advantages, PPO loss, Adam, checkpoint state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.losses import LossOutput, gae, ppo_loss, vtrace
from vecfast.trainers.models import ActorCritic
from vecfast.trainers.storage import Trajectories


class Learner:
    """Owns the optimiser and the policy version (the number of gradient steps taken).

    :meth:`learn` runs the epochs over a batch; each gradient :meth:`step` takes a
    minibatch of whole trajectories. Given ``advantages`` and ``targets`` (synchronous
    PPO computes GAE once per rollout with the behaviour values) it uses them; otherwise
    it computes V-trace targets from the current values, as APPO's learner does for data
    collected by older policies (or GAE on the current values with ``with_vtrace=False``).
    """

    def __init__(self, model: ActorCritic, cfg: TrainConfig) -> None:
        self.model = model
        self.cfg = cfg
        self.optimizer = torch.optim.Adam(
            model.parameters(), lr=cfg.learning_rate, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps
        )
        self.version = 0
        self.minibatch = cfg.batch_size // cfg.rollout  # trajectories per gradient step

    def set_progress(self, fraction: float) -> None:
        """Training progress in [0, 1], for the learning-rate schedule."""
        lr = self.cfg.learning_rate
        if self.cfg.lr_schedule == "linear_decay":
            lr *= max(0.0, 1.0 - fraction)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    @property
    def learning_rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def learn(
        self,
        batch: Trajectories,
        progress: float,
        advantages: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        after_step: Callable[[], None] = lambda: None,
    ) -> dict[str, float]:
        """``num_epochs`` passes over ``batch`` in shuffled minibatches of :attr:`minibatch` trajectories.

        ``progress`` (in [0, 1]) sets the learning rate, the valid observations update the
        model's normalisers first, and ``after_step`` runs after every gradient step (APPO
        publishes the weights there). ``advantages`` and ``targets`` cover all of ``batch``
        (see :meth:`step`). Returns the last step's figures under the metric names both
        trainers report (the dashboard and ``metrics.jsonl`` read them).
        """
        self.set_progress(progress)
        self.model.update_normalizers({k: v[:, :-1][batch.valid] for k, v in batch.obs.items()})
        device = batch.first.device
        for _ in range(self.cfg.num_epochs):
            order = torch.randperm(len(batch), device=device)
            for i in range(0, len(batch), self.minibatch):
                idx = order[i : i + self.minibatch]
                if advantages is None or targets is None:
                    out, grad_norm = self.step(batch.select(idx))
                else:
                    out, grad_norm = self.step(batch.select(idx), advantages[idx], targets[idx])
                after_step()
        return {
            "learner_steps": self.version,
            "policy_loss": out.policy_loss,
            "value_loss": out.value_loss,
            "entropy": out.entropy,
            "kl": out.kl,
            "clip_fraction": out.clip_fraction,
            "grad_norm": grad_norm,
            "learning_rate": self.learning_rate,
        }

    def step(
        self, batch: Trajectories, advantages: torch.Tensor | None = None, targets: torch.Tensor | None = None
    ) -> tuple[LossOutput, float]:
        """One gradient step; returns the loss terms and the gradient norm before clipping."""
        model, cfg = self.model, self.cfg
        dist, norm_values = model.evaluate(batch.obs, batch.first, batch.initial_state, batch.rollout)
        if advantages is None or targets is None:
            with torch.no_grad():
                values = model.denormalize_value(norm_values)
                if cfg.with_vtrace:
                    log_rhos = dist.log_prob(batch.actions) - batch.log_probs
                    advantages, targets = vtrace(batch, values, log_rhos, cfg.gamma)
                else:  # GAE on the current values, no off-policy correction
                    advantages, targets = gae(batch, values, cfg.gamma, cfg.gae_lambda)
        if model.returns_norm is not None:
            model.returns_norm.update(targets[batch.valid])
        out = ppo_loss(model, dist, norm_values[:, :-1], batch, advantages, targets, cfg)
        self.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm).item()
        self.optimizer.step()
        self.version += 1
        return out, grad_norm

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "version": self.version}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = state["version"]

    def trainer_state(self, env_steps: int) -> dict[str, Any]:
        """A trainer's checkpoint: the model, this learner and the env steps sampled (resume and enjoy read it)."""
        return {"model": self.model.state_dict(), "learner": self.state_dict(), "env_steps": env_steps}

    def load_trainer_state(self, state: dict[str, Any]) -> int:
        """Restore the model and this learner from :meth:`trainer_state`; returns its env steps."""
        self.model.load_state_dict(state["model"])
        self.load_state_dict(state["learner"])
        return state["env_steps"]
