"""PPO, the algorithm: epochs of minibatches of whole trajectories, clipped objective, its optimiser.

The scheme that runs it (synchronous, asynchronous, distributed: :mod:`vecfast.trainers.schemes`)
collects the batches and says whether the policy that acted is the one learning. On-policy data
gets GAE from the values the policy predicted while acting, once per batch, as in CleanRL; data
acted on by older policies gets V-trace targets from the current values at every minibatch (or
GAE on the current values with ``with_vtrace=False``), as in Sample Factory's APPO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from vecfast.trainers.algorithm.auxiliary import weighted_sum
from vecfast.trainers.algorithm.distributions import ActionDistribution
from vecfast.trainers.algorithm.losses import LossOutput, gae, ppo_loss, vtrace
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.numerics import check_gradient, refusing_non_finite
from vecfast.trainers.algorithm.optimizers import make_optimizer
from vecfast.trainers.algorithm.schedules import exploration_coeff, learning_rate
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.base import collective
from vecfast.trainers.config import TrainConfig


class PPO:
    """Owns the optimiser and the policy version (the number of gradient steps taken).

    ``model`` is the module to learn with: the :class:`ActorCritic` itself, or the distributed
    scheme's wrapper around it, through which gradients are averaged over the ranks.
    """

    def __init__(self, model: ActorCritic, cfg: TrainConfig) -> None:
        self.model = model
        self.cfg = cfg
        self.optimizer = make_optimizer(model, cfg)
        self.version = 0
        self.minibatch = cfg.batch_size // cfg.rollout  # trajectories per gradient step
        self.exploration_coeff = exploration_coeff(cfg, 0.0)
        if cfg.minibatch_of == "steps" and getattr(model, "module", model).learns_from_trajectories:
            raise ValueError(
                "minibatch_of='steps' needs a model without memory: use_rnn=False, prev_action_embedding=0 and no "
                "auxiliary losses (they learn from whole trajectories)"
            )

    def set_progress(self, fraction: float) -> None:
        """Training progress in [0, 1], for the learning rate's and the entropy bonus's schedules."""
        lr = learning_rate(self.cfg, fraction, self.version, collective.world_size())
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.exploration_coeff = exploration_coeff(self.cfg, fraction)

    @property
    def learning_rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def learn(
        self,
        batch: Trajectories,
        progress: float,
        *,
        on_policy: bool,
        after_step: Callable[[], None] = lambda: None,
    ) -> dict[str, float]:
        """``num_epochs`` passes over ``batch`` in shuffled minibatches of :attr:`minibatch` trajectories.

        ``progress`` (in [0, 1]) sets the learning rate and the entropy bonus's weight, the valid observations
        update the model's normalisers first, and ``after_step`` runs after every gradient step (APPO publishes the
        weights there). Returns the last step's loss terms by name. Values that are not
        finite raise :class:`~vecfast.trainers.algorithm.numerics.NonFiniteError`, naming the update, before the
        weights or the normalisers take them.
        """
        self.set_progress(progress)
        with refusing_non_finite(lambda: self.version + 1):
            self.model.update_normalizers({k: v[:, :-1][batch.valid] for k, v in batch.obs.items()})
            advantages = targets = None
            if on_policy:
                advantages, targets = gae(batch, batch.values, self.cfg.gamma, self.cfg.gae_lambda)
            elif self.cfg.minibatch_of == "steps":  # shuffled steps keep no trajectory to compute them on
                advantages, targets = self.current_targets(batch)
            for _ in range(self.cfg.num_epochs):
                for minibatch, minibatch_advantages, minibatch_targets in self.minibatches(batch, advantages, targets):
                    out, grad_norm = self.step(minibatch, minibatch_advantages, minibatch_targets)
                    after_step()
        terms = {**out.terms(), "grad_norm": grad_norm, "learning_rate": self.learning_rate}
        if self.cfg.exploration_loss_schedule != "constant":
            terms["exploration_loss_coeff"] = self.exploration_coeff
        return terms

    def minibatches(
        self, batch: Trajectories, advantages: torch.Tensor | None, targets: torch.Tensor | None
    ) -> Iterator[tuple[Trajectories, torch.Tensor | None, torch.Tensor | None]]:
        """One epoch's minibatches in a new random order, with their advantages and targets where given: whole
        trajectories, or (``minibatch_of="steps"``) steps drawn from all of them, as many minibatches either way
        (DD-PPO's ranks, whose rollouts may end early, take the same number of gradient steps)."""
        device = batch.first.device
        if self.cfg.minibatch_of == "steps":
            count = -(-len(batch) // self.minibatch)
            for idx in torch.randperm(len(batch) * batch.rollout, device=device).tensor_split(count):
                yield batch.steps(idx), *(None if x is None else x.flatten()[idx, None] for x in (advantages, targets))
            return
        order = torch.randperm(len(batch), device=device)
        for i in range(0, len(batch), self.minibatch):
            idx = order[i : i + self.minibatch]
            yield batch.select(idx), *(None if x is None else x[idx] for x in (advantages, targets))

    def current_targets(self, batch: Trajectories) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages and value targets from the model's current values (and, for V-trace, policy) on the whole
        batch, before the epochs: what :meth:`step` computes per minibatch of whole trajectories."""
        model = getattr(self.model, "module", self.model)  # (no gradient: no DistributedDataParallel's hooks)
        with torch.no_grad():
            dist, norm_values = model.evaluate(
                batch.obs, batch.first, batch.initial_state, batch.rollout, batch.actions
            )
            return self.off_policy_targets(batch, dist, model.denormalize_value(norm_values))

    def off_policy_targets(
        self, batch: Trajectories, dist: ActionDistribution, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages and value targets from the current ``values`` (one more step than the rewards) and policy
        ``dist``: V-trace, or GAE without correction (``with_vtrace=False``)."""
        cfg = self.cfg
        if cfg.with_vtrace:
            return vtrace(batch, values, dist.log_prob(batch.actions) - batch.log_probs, cfg.gamma)
        return gae(batch, values, cfg.gamma, cfg.gae_lambda)

    def step(
        self, batch: Trajectories, advantages: torch.Tensor | None = None, targets: torch.Tensor | None = None
    ) -> tuple[LossOutput, float]:
        """One gradient step; returns the loss terms and the gradient norm before clipping. A gradient that is not
        finite raises :class:`~vecfast.trainers.algorithm.numerics.NonFiniteError` before it reaches the weights.

        Without ``advantages`` and ``targets`` they come from the current values (V-trace or GAE).
        """
        model, cfg = self.model, self.cfg
        # a shuffled step comes with its targets: the observation it would bootstrap from goes unevaluated
        length = batch.rollout + (cfg.minibatch_of == "trajectories")
        dist, norm_values = model.evaluate(
            {k: v[:, :length] for k, v in batch.obs.items()},
            batch.first[:, :length],
            batch.initial_state,
            batch.rollout,
            batch.actions,
            batch.valid,
        )
        auxiliary = getattr(model, "module", model).take_auxiliary_terms()  # (through a DistributedDataParallel)
        if advantages is None or targets is None:
            with torch.no_grad():
                advantages, targets = self.off_policy_targets(batch, dist, model.denormalize_value(norm_values))
        if model.returns_norm is not None:
            model.returns_norm.update(targets[batch.valid])
        out = ppo_loss(
            model, dist, norm_values[:, : batch.rollout], batch, advantages, targets, cfg, self.exploration_coeff
        )
        loss = out.loss
        if auxiliary:
            loss = loss + weighted_sum(auxiliary, cfg)
            out.auxiliary = {f"aux_{name}": term.item() for name, term in auxiliary.items()}
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm).item()
        check_gradient(grad_norm, out.terms())
        self.optimizer.step()
        self.version += 1
        return out, grad_norm

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "version": self.version}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = state["version"]
