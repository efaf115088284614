"""Action heads: what the actor outputs for Discrete, MultiDiscrete and Box spaces, and the distribution it means."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Categorical, Normal


class ActionDistribution:
    """A batch of action distributions with any leading shape.

    MultiDiscrete actions are independent categoricals (their log-probabilities add up);
    Box actions are a diagonal Gaussian whose samples the env side clips to the bounds.
    """

    def __init__(self, kind: str, params: torch.Tensor, nvec: list[int], log_std: torch.Tensor | None) -> None:
        self.kind = kind
        if kind == "box":
            self.dists = [Normal(params, log_std.expand_as(params).exp(), validate_args=False)]
        else:  # (argument validation costs more than the sampling itself at inference batch sizes)
            self.dists = [Categorical(logits=logits, validate_args=False) for logits in params.split(nvec, dim=-1)]

    def sample(self) -> torch.Tensor:
        return self._actions([d.sample() for d in self.dists])

    def mode(self) -> torch.Tensor:
        if self.kind == "box":
            return self.dists[0].mean
        return self._actions([d.probs.argmax(-1) for d in self.dists])

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        if self.kind == "box":
            return self.dists[0].log_prob(actions).sum(-1)
        if self.kind == "discrete":
            return self.dists[0].log_prob(actions)
        return sum(d.log_prob(actions[..., i]) for i, d in enumerate(self.dists))

    def entropy(self) -> torch.Tensor:
        if self.kind == "box":
            return self.dists[0].entropy().sum(-1)
        return sum(d.entropy() for d in self.dists)

    def _actions(self, parts: list[torch.Tensor]) -> torch.Tensor:
        return parts[0] if self.kind in ("discrete", "box") else torch.stack(parts, dim=-1)


class ActionHead(nn.Module):
    """Linear layer from the core's features to the parameters of the action distribution."""

    def __init__(self, space: spaces.Space, in_features: int) -> None:
        super().__init__()
        self.space = space
        self.log_std: nn.Parameter | None = None
        if isinstance(space, spaces.Discrete):
            self.kind, self.nvec = "discrete", [int(space.n)]
        elif isinstance(space, spaces.MultiDiscrete):
            if space.nvec.ndim != 1:
                raise ValueError(f"MultiDiscrete action spaces must be 1-D, got nvec of shape {space.nvec.shape}")
            self.kind, self.nvec = "multi_discrete", [int(n) for n in space.nvec]
        elif isinstance(space, spaces.Box):
            if len(space.shape) != 1:
                raise ValueError(f"Box action spaces must be 1-D, got shape {space.shape}")
            self.kind, self.nvec = "box", [space.shape[0]]
            self.log_std = nn.Parameter(torch.zeros(space.shape[0]))
        else:
            raise TypeError(f"unsupported action space {space}: use Discrete, MultiDiscrete or a 1-D Box")
        self.linear = nn.Linear(in_features, sum(self.nvec))
        nn.init.orthogonal_(self.linear.weight, 0.01)  # near-uniform initial policy
        nn.init.zeros_(self.linear.bias)

    def forward(self, features: torch.Tensor) -> ActionDistribution:
        return ActionDistribution(self.kind, self.linear(features), self.nvec, self.log_std)

    @property
    def action_shape(self) -> tuple[int, ...]:
        return (
            ()
            if self.kind == "discrete"
            else (len(self.nvec),)
            if self.kind == "multi_discrete"
            else tuple(self.space.shape)
        )

    @property
    def action_dtype(self) -> torch.dtype:
        return torch.float32 if self.kind == "box" else torch.int64

    def to_env(self, actions: torch.Tensor) -> np.ndarray:
        """Actions as the env takes them: space offsets added, Gaussian samples clipped to the bounds."""
        out = actions.cpu().numpy()
        if self.kind == "box":
            return np.clip(out, self.space.low, self.space.high).astype(self.space.dtype)
        return (out + self.space.start).astype(self.space.dtype)
