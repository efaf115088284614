"""Rollout storage: preallocated tensors for whole trajectories, indexed ``[trajectory, step]``.

A trajectory holds ``rollout`` steps and one more observation (and its value), from
which the last step bootstraps. With gymnasium's NEXT_STEP autoreset the step after an
episode end only resets the env: it is stored with ``valid`` False (its observation is
the episode's last one, whose value bootstraps a truncated episode) and the next step
has ``first`` True (the recurrent state restarts there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from vecfast.trainers.algorithm.models import ActorCritic


def _obs_dtype(space: spaces.Space) -> torch.dtype:
    if isinstance(space, spaces.Discrete):
        return torch.int64
    return torch.uint8 if space.dtype == np.uint8 else torch.float32


@dataclass
class Trajectories:
    """Fields of ``num`` trajectories. Per step ``t < rollout``: the action taken in ``obs[:, t]``,
    its log-probability and behaviour value, the reward and flags it earned, the policy
    that chose it and that policy's version. ``obs``, ``first`` and ``values`` have ``rollout + 1`` steps."""

    obs: dict[str, torch.Tensor]
    first: torch.Tensor  # obs starts an episode (reset the recurrent state)
    values: torch.Tensor  # behaviour policy's value estimates, in return units
    actions: torch.Tensor
    log_probs: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    done: torch.Tensor  # terminated or truncated
    valid: torch.Tensor  # a real transition (False: the step only reset the env)
    policy_version: torch.Tensor
    policy_id: torch.Tensor  # which of the sampler's policies acted (its learner learns from its own steps only)
    initial_state: torch.Tensor  # recurrent state before obs[:, 0]

    @classmethod
    def allocate(cls, model: ActorCritic, num: int, rollout: int, device: torch.device | str = "cpu") -> Trajectories:
        steps, plus = (num, rollout), (num, rollout + 1)

        def zeros(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        head = model.actor
        return cls(
            obs={k: zeros(plus + s.shape, _obs_dtype(s)) for k, s in model.obs_spaces.items()},
            first=zeros(plus, torch.bool),
            values=zeros(plus),
            actions=zeros(steps + head.action_shape, head.action_dtype),
            log_probs=zeros(steps),
            rewards=zeros(steps),
            terminated=zeros(steps, torch.bool),
            done=zeros(steps, torch.bool),
            valid=zeros(steps, torch.bool),
            policy_version=zeros(steps, torch.int64),
            policy_id=zeros(steps, torch.int64),
            initial_state=zeros((num, model.state_size)),
        )

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Trajectories:
        """A new Trajectories with ``fn`` applied to every tensor (indexing, moving to a device)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = {k: fn(v) for k, v in value.items()} if isinstance(value, dict) else fn(value)
        return Trajectories(**out)

    @classmethod
    def concatenate(cls, parts: Sequence[Trajectories]) -> Trajectories:
        """One Trajectories holding every trajectory of ``parts``, in order."""
        if len(parts) == 1:
            return parts[0]
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            values = [getattr(part, f.name) for part in parts]
            if isinstance(values[0], dict):
                out[f.name] = {k: torch.cat([v[k] for v in values]) for k in values[0]}
            else:
                out[f.name] = torch.cat(values)
        return cls(**out)

    def select(self, index: torch.Tensor) -> Trajectories:
        """A copy of trajectories ``index`` (integer positions). ``index_select``, not ``x[index]``: the same copy,
        ~10x faster on CPU for rows of uint8 frames (1 ms against 10 for two Atari trajectories)."""
        return self.apply(lambda x: x.index_select(0, index))

    def prefix(self, steps: int) -> Trajectories:
        """The first ``steps`` steps of every trajectory (views), bootstrapping from observation ``steps``."""
        plus = steps + 1
        return Trajectories(
            obs={k: v[:, :plus] for k, v in self.obs.items()},
            first=self.first[:, :plus],
            values=self.values[:, :plus],
            actions=self.actions[:, :steps],
            log_probs=self.log_probs[:, :steps],
            rewards=self.rewards[:, :steps],
            terminated=self.terminated[:, :steps],
            done=self.done[:, :steps],
            valid=self.valid[:, :steps],
            policy_version=self.policy_version[:, :steps],
            policy_id=self.policy_id[:, :steps],
            initial_state=self.initial_state,
        )

    def steps(self, index: torch.Tensor) -> Trajectories:
        """Steps ``index`` (flat positions ``trajectory * rollout + step``), a copy of each as a trajectory of one
        step with the observation it bootstraps from: the minibatches of shuffled steps that a model without memory
        learns from (``minibatch_of="steps"``)."""
        rollout = self.rollout
        trajectory = index.div(rollout, rounding_mode="floor")
        at = trajectory * (rollout + 1) + index % rollout  # the step's position where a trajectory has rollout + 1

        def step_only(x: torch.Tensor) -> torch.Tensor:
            return x.flatten(0, 1).index_select(0, index).unsqueeze(1)

        def with_next(x: torch.Tensor) -> torch.Tensor:
            flat = x.flatten(0, 1)
            return torch.stack([flat.index_select(0, at), flat.index_select(0, at + 1)], dim=1)

        return Trajectories(
            obs={k: with_next(v) for k, v in self.obs.items()},
            first=with_next(self.first),
            values=with_next(self.values),
            actions=step_only(self.actions),
            log_probs=step_only(self.log_probs),
            rewards=step_only(self.rewards),
            terminated=step_only(self.terminated),
            done=step_only(self.done),
            valid=step_only(self.valid),
            policy_version=step_only(self.policy_version),
            policy_id=step_only(self.policy_id),
            initial_state=self.initial_state.index_select(0, trajectory),
        )

    def __len__(self) -> int:
        return self.first.shape[0]

    @property
    def rollout(self) -> int:
        return self.rewards.shape[1]
