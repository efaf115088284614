"""The learning rate and the entropy bonus's weight at a point of training: scaling for large batches, warm-up,
schedules by the run's progress (:class:`~vecfast.trainers.base.progress.RunProgress`: its env steps, or its
training time where ``train_for_seconds`` bounds it)."""

from __future__ import annotations

import math

from vecfast.trainers.config import TrainConfig

LR_SCALING_BASE_SAMPLES = 256  # the square-root rule's reference minibatch (Large Batch Simulation's)


def lr_scale(cfg: TrainConfig, world_size: int = 1) -> float:
    """The factor ``lr_scaling`` multiplies ``learning_rate`` by once warmed up.

    "sqrt": max(sqrt(samples per gradient step over all ranks / 256), 1), where a rank's gradient
    step takes ``batch_size`` samples; "none": 1.
    """
    if cfg.lr_scaling == "sqrt":
        return max(math.sqrt(cfg.batch_size * world_size / LR_SCALING_BASE_SAMPLES), 1.0)
    return 1.0


SCHEDULES = ("constant", "linear_decay", "cosine")


def schedule_factor(schedule: str, progress: float) -> float:
    """The factor of a schedule ``progress`` (clamped to [0, 1]) into training: 1 ("constant"), 1 - progress
    ("linear_decay") or (1 + cos(pi * progress)) / 2 ("cosine"), both 0 at the end."""
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "linear_decay":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0


def learning_rate(cfg: TrainConfig, progress: float, update: int, world_size: int = 1) -> float:
    """The learning rate after ``update`` gradient steps, ``progress`` (in [0, 1]) into training:
    ``learning_rate`` times the scale (:func:`lr_scale`), which rises linearly from 1 over the first
    ``lr_warmup_updates`` updates, times ``lr_schedule``'s factor (:func:`schedule_factor`)."""
    scale = lr_scale(cfg, world_size)
    if update < cfg.lr_warmup_updates:
        scale = 1.0 + (scale - 1.0) * max(update, 0) / cfg.lr_warmup_updates
    return cfg.learning_rate * scale * schedule_factor(cfg.lr_schedule, progress)


def exploration_coeff(cfg: TrainConfig, progress: float) -> float:
    """The entropy bonus's weight ``progress`` into training: ``exploration_loss_coeff`` times
    ``exploration_loss_schedule``'s factor."""
    return cfg.exploration_loss_coeff * schedule_factor(cfg.exploration_loss_schedule, progress)
