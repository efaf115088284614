"""Self-supervised auxiliary losses on the agent's own trajectories (Ye et al. 2020, *Auxiliary Tasks Speed Up
Learning PointGoal Navigation*): terms added to the RL loss that shape the encoder and the recurrent belief with
what a trajectory says about the world, at no cost in env steps.

Each loss is a module of the model (so DD-PPO averages its gradients with the rest) that takes
:class:`AuxiliaryInputs`, what the learner's forward pass has anyway: the encoders' features of every observation,
the core's belief after each, the actions taken and which steps are transitions. It returns one scalar; the learner
adds it times its weight from the config (``aux_*_coeff``; 0 leaves it out of the model altogether) and logs it as
``aux_<name>``.

* :class:`InverseDynamics`: from the features of an observation and of the next one, the action taken between them
  (cross-entropy); what the agent's actions change is what its features must keep.
* :class:`CPCA` (CPC|A-k): from the belief at step ``t`` and the actions ``a_t ... a_{t+i-1}`` (a GRU over them,
  started from the belief), tell the features of the observation at ``t + i`` from those of other observations in the
  batch, for ``i = 1 ... k`` (a binary classifier, as Ye et al. and Guo et al. 2018 train it): the belief must hold
  what the next observations will be, given where the agent goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from vecfast.trainers.config import TrainConfig


@dataclass(frozen=True)
class AuxiliaryInputs:
    """Whole trajectories ``[B, L, ...]``: ``encoded`` the encoders' features of each observation, ``beliefs`` the
    core's output after it (the features themselves without a core), ``actions`` ``[B, L - 1]`` those taken and
    ``valid`` ``[B, L - 1]`` whether each was a transition (False: a step that only reset the env)."""

    encoded: torch.Tensor
    beliefs: torch.Tensor
    actions: torch.Tensor
    valid: torch.Tensor


def _action_sizes(space: spaces.Space, loss: str) -> list[int]:
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in space.nvec]
    raise ValueError(f"the {loss} auxiliary loss needs Discrete or MultiDiscrete actions, got {space}")


class ActionEmbedding(nn.Module):
    """A learned embedding of a (Multi)Discrete action: the sum of one embedding per dimension."""

    def __init__(self, space: spaces.Space, size: int) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(n, size) for n in _action_sizes(space, "CPC|A"))

    def forward(self, actions: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` (Discrete) or ``[B, T, D]`` (MultiDiscrete) actions as ``[B, T, size]``."""
        actions = actions.long()
        if len(self.embeddings) == 1 and actions.dim() == 2:
            actions = actions.unsqueeze(-1)
        return sum(embed(actions[..., d]) for d, embed in enumerate(self.embeddings))


class InverseDynamics(nn.Module):
    """Predict the action between two consecutive observations from their features (see the module docstring)."""

    name = "inverse_dynamics"

    def __init__(self, encoded_size: int, belief_size: int, space: spaces.Space, cfg: TrainConfig) -> None:
        super().__init__()
        self.sizes = _action_sizes(space, "inverse dynamics")
        hidden = max(64, encoded_size // 2)
        self.head = nn.Sequential(nn.Linear(2 * encoded_size, hidden), nn.ReLU(), nn.Linear(hidden, sum(self.sizes)))

    def forward(self, inputs: AuxiliaryInputs) -> torch.Tensor:
        encoded, valid = inputs.encoded, inputs.valid
        pairs = torch.cat([encoded[:, :-1], encoded[:, 1:]], dim=-1)[valid]
        if not len(pairs):
            return _nothing(self, encoded)
        actions = inputs.actions[valid].long().view(len(pairs), -1)
        logits = self.head(pairs).split(self.sizes, dim=-1)
        return sum(F.cross_entropy(part, actions[:, d]) for d, part in enumerate(logits))


class CPCA(nn.Module):
    """CPC|A-k: contrastive prediction of the next ``k`` observations' features from the belief and the actions taken
    (see the module docstring)."""

    name = "cpca"

    def __init__(self, encoded_size: int, belief_size: int, space: spaces.Space, cfg: TrainConfig) -> None:
        super().__init__()
        self.steps = cfg.aux_cpca_steps
        self.actions = ActionEmbedding(space, 32)
        self.rollout = nn.GRUCell(32, belief_size)
        hidden = max(64, belief_size // 2)
        self.discriminator = nn.Sequential(
            nn.Linear(belief_size + encoded_size, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, inputs: AuxiliaryInputs) -> torch.Tensor:
        encoded, valid = inputs.encoded, inputs.valid
        batch, transitions = valid.shape
        belief = inputs.beliefs[:, :transitions].reshape(batch * transitions, -1)
        embedded = self.actions(inputs.actions)  # [B, L - 1, 32]
        flat_encoded = encoded.reshape(batch * (transitions + 1), -1)
        # step t + i is predicted where the transitions t ... t + i - 1 all happened (one episode, no reset between)
        reachable = torch.ones_like(valid)
        losses = []
        for i in range(1, self.steps + 1):
            shifted = torch.zeros_like(valid)
            shifted[:, : transitions - i + 1] = valid[:, i - 1 :]
            reachable = reachable & shifted
            action = torch.zeros_like(embedded)
            action[:, : transitions - i + 1] = embedded[:, i - 1 :]
            belief = self.rollout(action.reshape(batch * transitions, -1), belief)
            rows = reachable.reshape(-1).nonzero().squeeze(1)
            if not len(rows):
                break
            t, b = rows % transitions, rows // transitions
            positive = encoded[b, t + i]
            negative = flat_encoded[torch.randint(len(flat_encoded), (len(rows),), device=rows.device)]
            predicted = belief[rows]
            logits = self.discriminator(
                torch.cat([torch.cat([predicted, predicted]), torch.cat([positive, negative])], -1)
            )
            labels = torch.cat([torch.ones(len(rows)), torch.zeros(len(rows))]).to(logits)
            losses.append(F.binary_cross_entropy_with_logits(logits.squeeze(-1), labels))
        if not losses:
            return _nothing(self, encoded)
        return torch.stack(losses).mean()


def _nothing(loss: nn.Module, encoded: torch.Tensor) -> torch.Tensor:
    """A zero loss for a batch without a step to learn from, still touching every parameter (of the loss and, through
    ``encoded``, the encoders): DistributedDataParallel waits for a gradient of each."""
    return 0.0 * (encoded.sum() + sum(p.sum() for p in loss.parameters()))


AUXILIARY_LOSSES: dict[str, tuple[type[nn.Module], str]] = {
    "cpca": (CPCA, "aux_cpca_coeff"),
    "inverse_dynamics": (InverseDynamics, "aux_inverse_dynamics_coeff"),
}
"""Each auxiliary loss by name: its module and the config key of its weight."""


def auxiliary_losses(encoded_size: int, belief_size: int, space: spaces.Space, cfg: TrainConfig) -> nn.ModuleDict:
    """The losses whose weight in ``cfg`` is not 0, as modules of the model (none: an empty dict, which adds no
    parameters and draws no random numbers, so a model without them is the model it was)."""
    return nn.ModuleDict(
        {
            name: loss(encoded_size, belief_size, space, cfg)
            for name, (loss, key) in AUXILIARY_LOSSES.items()
            if getattr(cfg, key) != 0
        }
    )


def weighted_sum(terms: dict[str, torch.Tensor], cfg: TrainConfig) -> torch.Tensor | None:
    """The auxiliary losses' part of the loss: each term times its weight; None without terms."""
    if not terms:
        return None
    return sum(getattr(cfg, AUXILIARY_LOSSES[name][1]) * term for name, term in terms.items())
