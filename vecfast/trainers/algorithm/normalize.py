"""Running mean/variance kept in module buffers, so checkpoints and weight copies carry it with the model."""

from __future__ import annotations

import torch
from torch import nn

from vecfast.trainers.algorithm.numerics import NonFiniteError
from vecfast.trainers.base import collective


class RunningMeanStd(nn.Module):
    """Mean and variance of everything passed to :meth:`update`, per feature (float64).

    Batches are merged with Chan et al.'s parallel formula, so a batch of any size is one
    update. ``clip`` bounds normalised values (outliers early in training otherwise make
    huge activations).
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 5.0, epsilon: float = 1e-5) -> None:
        super().__init__()
        self.clip = clip
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold a batch in; leading dimensions are samples. In a distributed run, every rank's batch
        (the statistics stay the same on all ranks; each must call this). A batch with values that are not
        finite raises :class:`~vecfast.trainers.algorithm.numerics.NonFiniteError` and changes nothing."""
        x = x.reshape(-1, *self.mean.shape).to(torch.float64)
        count_and_sum = collective.all_sum(torch.cat([x.new_tensor([x.shape[0]]), x.sum(0).flatten()]))
        n = count_and_sum[0]
        if n == 0:
            return
        if not bool(torch.isfinite(count_and_sum).all()):  # (the same on every rank: after the sum)
            raise NonFiniteError("the running statistics were given values that are not finite (NaN or infinity)")
        batch_mean = count_and_sum[1:].view_as(self.mean) / n
        batch_var = collective.all_sum((x - batch_mean).square().sum(0)) / n
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        std = (self.var + self.epsilon).sqrt().to(x.dtype)
        return ((x - self.mean.to(x.dtype)) / std).clamp(-self.clip, self.clip)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        std = (self.var + self.epsilon).sqrt().to(x.dtype)
        return x * std + self.mean.to(x.dtype)
