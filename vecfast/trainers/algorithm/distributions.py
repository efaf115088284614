"""Action heads: what the actor outputs for Discrete, MultiDiscrete and Box spaces, and the distribution it means.

Discrete and MultiDiscrete heads take an optional action mask (PettingZoo's ``action_mask``: 1 legal,
0 illegal, one entry per logit): an illegal action's logit becomes the dtype's lowest finite value, so
its probability is exactly 0 while log-probabilities, entropy and their gradients stay finite (with -inf,
a row masked whole would be NaN).
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Categorical, Normal

from vecfast.trainers.algorithm.numerics import check_logits


class ActionDistribution:
    """A batch of action distributions with any leading shape.

    MultiDiscrete actions are independent categoricals (their log-probabilities add up), held as one
    categorical over (dimension, action) with each dimension's logits padded to the widest by impossible
    actions: one sampling call for all dimensions, not one per dimension (Doom's 7: ~7x fewer calls at
    inference batch sizes). Box actions are a diagonal Gaussian whose samples the env side clips to the bounds.
    """

    def __init__(self, kind: str, params: torch.Tensor, nvec: list[int], log_std: torch.Tensor | None) -> None:
        self.kind, self.nvec, self.params = kind, nvec, params
        self.dist: Categorical | Normal
        if kind == "box":
            self.dist = Normal(params, log_std.expand_as(params).exp(), validate_args=False)
        else:  # (argument validation costs more than the sampling itself at inference batch sizes)
            logits = params if kind == "discrete" else _padded(params, nvec)
            self.dist = Categorical(logits=logits, validate_args=False)

    @property
    def dists(self) -> list[Categorical | Normal]:
        """One distribution per action dimension (MultiDiscrete: each dimension's categorical)."""
        if self.kind != "multi_discrete":
            return [self.dist]
        logits = self.dist.logits
        return [Categorical(logits=logits[..., i, :n], validate_args=False) for i, n in enumerate(self.nvec)]

    def sample(self) -> torch.Tensor:
        if self.kind == "box":  # a Gaussian samples NaN from NaN means without a word
            check_logits(self.params)
            return self.dist.sample()
        try:  # no check on the way that works: torch's own refuses non-finite probabilities
            return self.dist.sample()
        except RuntimeError:
            check_logits(self.params)
            raise

    def mode(self) -> torch.Tensor:
        check_logits(self.params)
        return self.most_likely()

    def most_likely(self) -> torch.Tensor:
        """:meth:`mode` without the finiteness check: tensor operations only, as an exported graph holds them."""
        return self.dist.mean if self.kind == "box" else self.dist.probs.argmax(-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        log_prob = self.dist.log_prob(actions)
        return log_prob if self.kind == "discrete" else log_prob.sum(-1)

    def entropy(self) -> torch.Tensor:
        entropy = self.dist.entropy()
        return entropy if self.kind == "discrete" else entropy.sum(-1)


@functools.lru_cache
def _pad_index(nvec: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Where each (dimension, action) of the padded logits comes from: its logit, or the pad (index sum(nvec)).
    Cached per device, so that acting on a GPU copies it there once, not every step."""
    index = torch.full((len(nvec), max(nvec)), sum(nvec))
    for i, (start, n) in enumerate(zip(np.cumsum([0, *nvec[:-1]]).tolist(), nvec, strict=True)):
        index[i, :n] = torch.arange(start, start + n)
    return index.flatten().to(device)


def _padded(params: torch.Tensor, nvec: list[int]) -> torch.Tensor:
    """MultiDiscrete logits (..., sum(nvec)) as (..., len(nvec), max(nvec)), padded with impossible actions."""
    pad = params.new_full((*params.shape[:-1], 1), torch.finfo(params.dtype).min)
    index = _pad_index(tuple(nvec), params.device)
    return torch.cat([params, pad], -1).index_select(-1, index).view(*params.shape[:-1], len(nvec), max(nvec))


def mask_logits(logits: torch.Tensor, mask: torch.Tensor, nvec: list[int]) -> torch.Tensor:
    """``logits`` with the actions ``mask`` marks 0 made impossible.

    A categorical (a row, or one MultiDiscrete dimension) with no legal action is left unmasked
    rather than made NaN: an ended or waiting agent's observation (PettingZoo's) has an all-zero mask.
    """
    legal = torch.cat([m | ~m.any(-1, keepdim=True) for m in (mask != 0).split(nvec, dim=-1)], dim=-1)
    return logits.masked_fill(~legal, torch.finfo(logits.dtype).min)


class ActionHead(nn.Module):
    """Linear layer from the core's features to the parameters of the action distribution.

    ``mask_space``: the observation's action-mask entry, if it has one (see :func:`mask_logits`).
    """

    def __init__(self, space: spaces.Space, in_features: int, mask_space: spaces.Space | None = None) -> None:
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
        if mask_space is not None:
            if self.kind == "box":
                raise ValueError(f"an action mask needs a Discrete or MultiDiscrete action space, got {space}")
            size = sum(self.nvec)
            if not isinstance(mask_space, spaces.Box) or mask_space.shape != (size,):
                raise ValueError(f"the action mask must be a Box of shape ({size},) for {space}, got {mask_space}")
        self.linear = nn.Linear(in_features, sum(self.nvec))
        nn.init.orthogonal_(self.linear.weight, 0.01)  # near-uniform initial policy
        nn.init.zeros_(self.linear.bias)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> ActionDistribution:
        params = self.linear(features)
        if mask is not None:
            params = mask_logits(params, mask, self.nvec)
        return ActionDistribution(self.kind, params, self.nvec, self.log_std)

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
        """Actions as the env takes them (:meth:`env_actions`), as numpy arrays of the space's dtype."""
        return self.env_actions(actions).cpu().numpy().astype(self.space.dtype)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Space offsets added, Gaussian samples clipped to the bounds (tensor operations: exported graphs too)."""
        if self.kind == "box":
            bounds = (self.space.low, self.space.high)
            low, high = (torch.as_tensor(b, dtype=actions.dtype, device=actions.device) for b in bounds)
            return torch.clamp(actions, low, high)
        return actions + torch.as_tensor(self.space.start, dtype=actions.dtype, device=actions.device)
