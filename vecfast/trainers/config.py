"""Training configuration: one flat dataclass whose keys take Sample Factory's names where one exists."""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any


@dataclass
class TrainConfig:
    """Every knob of the built-in trainers; ``TrainConfig.from_overrides(**kw)`` validates names.

    Sampling: ``num_workers`` processes step ``num_envs_per_worker`` envs each (``vecfast.train``
    also takes ``num_workers="auto"`` and replaces both with what :mod:`vecfast.trainers.tune`
    chooses); a trajectory is ``rollout`` steps of one env. Learning, as in Sample Factory: a gradient step takes
    ``batch_size`` samples (``batch_size // rollout`` whole trajectories, so a recurrent core
    backpropagates through the rollout), independent of the number of envs; an iteration
    learns from ``num_batches_per_epoch`` such minibatches, ``num_epochs`` times.
    """

    # sampling
    num_workers: int = 2
    num_envs_per_worker: int = 8
    rollout: int = 32
    # learning
    batch_size: int = 512
    num_epochs: int = 1
    num_batches_per_epoch: int = 1
    learning_rate: float = 1e-4
    lr_schedule: str = "constant"  # or "linear_decay" (to 0 at the end of training)
    adam_eps: float = 1e-6
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    max_grad_norm: float = 4.0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ppo_clip_ratio: float = 0.1  # the ratio is clipped to [1 / (1 + c), 1 + c]
    ppo_clip_value: float | None = None  # clip the value change (in normalised units); None: no clipping
    value_loss_coeff: float = 0.5
    exploration_loss_coeff: float = 0.003  # entropy bonus
    normalize_advantage: bool = True
    with_vtrace: bool = True  # APPO: V-trace targets with rho_bar = c_bar = 1
    # model
    use_rnn: bool = True
    rnn_size: int = 512
    encoder_conv_architecture: str = "convnet_simple"
    encoder_conv_mlp_layers: tuple[int, ...] = (512,)
    encoder_mlp_layers: tuple[int, ...] = (256, 256)
    nonlinearity: str = "elu"
    # bfloat16 autocast in the conv encoder; the recurrent core, heads and optimiser stay float32.
    # "auto": on where the device computes bf16 natively (CPUs with AVX512-BF16 or AMX, GPUs with
    # bf16), where it trained DoomBasic 1.26x faster to the same returns; elsewhere it is emulated, slowly
    encoder_bf16: bool | str = "auto"
    normalize_input: bool = True  # running mean/std of float vector observations
    normalize_returns: bool = True  # the critic predicts normalised returns
    # system
    device: str = "auto"  # "auto": CUDA when torch sees a GPU, else CPU
    torch_threads: int = 1
    seed: int | None = None
    train_for_seconds: float | None = None  # stop after this long even if total_env_steps is not reached
    env_frameskip: int | None = None  # frames per env step in env_frames; None: the envs' frame_skip, else 1
    # run directory
    save_every_sec: float = 120.0
    save_best_every_sec: float | None = 30.0  # at most this often, checkpoint an improved mean return (best.pt)
    keep_checkpoints: int = 2
    stats_avg: int = 100  # episodes in the running mean of returns

    @classmethod
    def from_overrides(cls, base: TrainConfig | None = None, **overrides: Any) -> TrainConfig:
        """``base`` (default: the defaults) with ``overrides``; unknown keys raise with the valid ones."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown config keys {unknown}; valid keys: {sorted(names)}")
        cfg = dataclasses.replace(base or cls(), **overrides)
        cfg.encoder_conv_mlp_layers = tuple(cfg.encoder_conv_mlp_layers)
        cfg.encoder_mlp_layers = tuple(cfg.encoder_mlp_layers)
        cfg.validate()
        return cfg

    @property
    def num_envs(self) -> int:
        return self.num_workers * self.num_envs_per_worker

    def validate(self) -> None:
        _check_count("num_workers", self.num_workers, " (or 'auto' in vecfast.train, which measures and chooses)")
        _check_count("num_envs_per_worker", self.num_envs_per_worker, " (num_workers='auto' chooses it)")
        if self.rollout < 2:
            raise ValueError(f"rollout must be >= 2, got {self.rollout}")
        if self.batch_size % self.rollout:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of rollout ({self.rollout})")
        if self.num_epochs < 1 or self.num_batches_per_epoch < 1:
            raise ValueError("num_epochs and num_batches_per_epoch must be >= 1")
        if self.lr_schedule not in ("constant", "linear_decay"):
            raise ValueError(f"lr_schedule must be 'constant' or 'linear_decay', got {self.lr_schedule!r}")
        if self.encoder_bf16 not in (True, False, "auto"):
            raise ValueError(f"encoder_bf16 must be True, False or 'auto', got {self.encoder_bf16!r}")
        if self.nonlinearity not in ("elu", "relu", "tanh"):
            raise ValueError(f"nonlinearity must be 'elu', 'relu' or 'tanh', got {self.nonlinearity!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_count(name: str, value: Any, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1{hint}, got {value!r}")
