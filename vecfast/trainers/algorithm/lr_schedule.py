"""The learning rate at a point of training: scaling for large batches, warm-up, schedule."""

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


def learning_rate(cfg: TrainConfig, progress: float, update: int, world_size: int = 1) -> float:
    """The learning rate after ``update`` gradient steps, ``progress`` (in [0, 1]) into training.

    ``learning_rate`` times the scale (:func:`lr_scale`), which rises linearly from 1 over the first
    ``lr_warmup_updates`` updates, times the schedule's factor of the progress: 1 ("constant"),
    1 - progress ("linear_decay") or (1 + cos(pi * progress)) / 2 ("cosine"), both 0 at the end.
    """
    scale = lr_scale(cfg, world_size)
    if update < cfg.lr_warmup_updates:
        scale = 1.0 + (scale - 1.0) * max(update, 0) / cfg.lr_warmup_updates
    progress = min(max(progress, 0.0), 1.0)
    if cfg.lr_schedule == "linear_decay":
        factor = 1.0 - progress
    elif cfg.lr_schedule == "cosine":
        factor = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        factor = 1.0
    return cfg.learning_rate * scale * factor
