"""Advantage estimators (GAE, V-trace) and the PPO loss, on ``[trajectory, step]`` tensors.

Episode boundaries follow :mod:`vecfast.trainers.algorithm.trajectories`: a step with ``done`` ends an
episode, bootstrapping from the next stored value unless it ``terminated``; a step that
is not ``valid`` only reset the env and contributes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

from vecfast.trainers.algorithm.distributions import ActionDistribution
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.base import collective
from vecfast.trainers.config import TrainConfig


def gae(traj: Trajectories, values: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation: (advantages, returns) for every step.

    ``values`` has one more step than the rewards (the bootstrap value).
    """
    rewards = traj.rewards
    not_terminal = (~traj.terminated).float()
    cont = (~traj.done & traj.valid).float()  # the recursion stops at episode ends and reset steps
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * not_terminal[:, t] * values[:, t + 1] - values[:, t]
        last = (delta + gamma * lam * cont[:, t] * last) * traj.valid[:, t]
        advantages[:, t] = last
    return advantages, advantages + values[:, :-1]


def vtrace(
    traj: Trajectories,
    values: torch.Tensor,
    log_rhos: torch.Tensor,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace (Espeholt et al. 2018): (policy-gradient advantages, value targets ``vs``).

    ``values`` are the learner's current estimates (one more step than the rewards),
    ``log_rhos`` = log pi(a|x) - log mu(a|x) of the behaviour policy ``mu`` that acted.
    """
    rhos = log_rhos.exp()
    clipped_rhos = rhos.clamp(max=rho_bar)
    cs = rhos.clamp(max=c_bar)
    not_terminal = (~traj.terminated).float()
    cont = (~traj.done & traj.valid).float()
    valid = traj.valid.float()
    rollout = traj.rollout
    vs = values.clone()  # vs at the bootstrap step (and at reset steps) is the value itself
    next_correction = torch.zeros_like(values[:, 0])  # vs_{t+1} - V(x_{t+1})
    deltas = clipped_rhos * (traj.rewards + gamma * not_terminal * values[:, 1:] - values[:, :-1]) * valid
    for t in reversed(range(rollout)):
        next_correction = deltas[:, t] + gamma * cs[:, t] * cont[:, t] * next_correction
        vs[:, t] = values[:, t] + next_correction
    # The advantage bootstraps from vs_{t+1} within an episode, from V(x_{t+1}) across its end.
    following = torch.where(cont.bool(), vs[:, 1:], values[:, 1:])
    advantages = clipped_rhos * (traj.rewards + gamma * not_terminal * following - values[:, :-1]) * valid
    return advantages, vs[:, :-1]


@dataclass
class LossOutput:
    loss: torch.Tensor
    policy_loss: float
    value_loss: float
    entropy: float
    kl: float
    clip_fraction: float
    auxiliary: dict[str, float] = field(default_factory=dict)  # the auxiliary losses' terms (aux_<name>)

    def terms(self) -> dict[str, float]:
        """The loss terms by name (everything but the loss tensor)."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("loss", "auxiliary")}
        return {**own, **self.auxiliary}


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_mean_std(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of the masked entries of ``x``, over every rank of a distributed run."""
    total, count = collective.all_sum(torch.stack([(x * mask).sum(), mask.sum()])).unbind()
    mean = total / count.clamp(min=1.0)
    squares = collective.all_sum(((x - mean).square() * mask).sum())
    return mean, (squares / count.clamp(min=1.0)).sqrt()


def ppo_loss(
    model: ActorCritic,
    dist: ActionDistribution,
    new_values: torch.Tensor,
    traj: Trajectories,
    advantages: torch.Tensor,
    targets: torch.Tensor,
    cfg: TrainConfig,
    exploration_coeff: float,
) -> LossOutput:
    """Clipped PPO objective (ratio in [1/(1+c), 1+c]) + value loss (in normalised units) - entropy bonus (weighted
    by ``exploration_coeff``, the schedule's value of ``exploration_loss_coeff``).

    ``new_values`` are normalised predictions for the ``rollout`` steps; ``targets`` are in
    return units (normalised here with the model's return statistics).
    """
    mask = traj.valid.float()
    log_ratio = dist.log_prob(traj.actions) - traj.log_probs
    ratio = log_ratio.exp()
    if cfg.normalize_advantage:
        mean, std = masked_mean_std(advantages.detach(), mask)
        advantages = (advantages - mean) / (std + 1e-8)
    low, high = 1.0 / (1.0 + cfg.ppo_clip_ratio), 1.0 + cfg.ppo_clip_ratio
    policy_loss = -masked_mean(torch.min(ratio * advantages, ratio.clamp(low, high) * advantages), mask)
    norm_targets = model.normalize_value(targets)
    value_error = (new_values - norm_targets).square()
    if cfg.ppo_clip_value is not None:
        old = model.normalize_value(traj.values[:, :-1])
        clipped = old + (new_values - old).clamp(-cfg.ppo_clip_value, cfg.ppo_clip_value)
        value_error = torch.max(value_error, (clipped - norm_targets).square())
    value_loss = 0.5 * masked_mean(value_error, mask)
    entropy = masked_mean(dist.entropy(), mask)
    loss = policy_loss + cfg.value_loss_coeff * value_loss - exploration_coeff * entropy
    with torch.no_grad():
        kl = masked_mean((ratio - 1.0) - log_ratio, mask).item()
        clip_fraction = masked_mean(((ratio < low) | (ratio > high)).float(), mask).item()
    return LossOutput(loss, policy_loss.item(), value_loss.item(), entropy.item(), kl, clip_fraction)
