"""Config layers, lowest first: TrainConfig's defaults, the scheme's, the env family's, the algorithm's,
the env's own preset, the caller's.

A scheme's defaults are generic (sync PPO's are CleanRL's, for pixels); a family's are tuned for its
kind of observations under every scheme, so they sit above the scheme's: a vector-obs env trains with
the family's learning rate whichever scheme runs it. An algorithm's own settings (A2C's) beat both.

TrainConfig's own defaults are Sample Factory's, for pixels (conv encoder + GRU); envs without
image observations (classic control and the like) get a small MLP and their own learning settings, and
board games (PettingZoo's classic planes) those learning settings with a conv encoder that keeps the board.
An env may have a preset of its own: PointNav trains with the Large Batch Simulation paper's settings, connect four's
self-play with random openings and PFSP.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gymnasium import spaces

from vecfast.trainers.algorithm.models import is_board, is_image, observation_spaces
from vecfast.trainers.config import TrainConfig, split_num_envs
from vecfast.trainers.registry import Recipe
from vecfast.vector.make import env_namespace

VECTOR_FAMILY_DEFAULTS: dict[str, Any] = {
    "use_rnn": False,
    "encoder_mlp_layers": (64, 64),
    "nonlinearity": "tanh",
    # Under every scheme: the layers put this family above the scheme's defaults, so sync PPO and DD-PPO
    # no longer take sync PPO's CleanRL 3e-4 (meant for pixels). CartPole 500k, sync PPO, seeds 0-2, 4
    # epochs of 2 minibatches of 256: 3e-4: 403, 500, 500 (issue 23, 300k: 444, 179); 1e-3: all 500 (475 at
    # 58k-97k); 1e-3 in 1 minibatch of 512 (as APPO): 500, 500, 498 (475 at 87k-222k).
    # Seeds 0-9 (benchmarks/results/learning_seeds_cartpole_ppo.json): 10/10 >= 475 (9 at 500, worst 486).
    "learning_rate": 1e-3,
    "max_grad_norm": 0.5,
    "exploration_loss_coeff": 0.0,
    # A small MLP's learner idled ~85% of the time while envs stepped: 4 passes over each batch,
    # so the critic keeps up when failures reappear after a policy is solved and PPO's clip, not
    # one small step, bounds each update; and the learning rate annealed to 0, so a run ends on a
    # settled policy. CartPole 500k, seeds 0-9 (benchmarks/learning_seeds.py): 1 epoch, constant:
    # 8/10 end >= 475 (2 collapse to ~230-270); 1 epoch, linear decay: 4/10; 4 epochs, constant:
    # 10/10 (worst 484); 4 epochs, linear decay: 10/10, all at 500.
    "num_epochs": 4,
    "lr_schedule": "linear_decay",
}

# Under a distributed scheme each gradient step averages every rank's minibatch: N ranks take 1/N of the
# gradient steps per env step that one rank takes, at the same learning rate. CartPole 500k, DD-PPO, 2 ranks
# of 16 envs, seeds 0-9 at 1e-3: 8/10 end >= 475 (468, 405). With the rate scaled by sqrt(ranks) (x1.41 at 2)
# seeds 3, 5 and 2 end at 500 (475 at 116k, 117k, 147k; before: never, 408k, 313k). The scaling is the
# one the PointNav preset takes from the Large Batch Simulation paper; one rank is unchanged.
VECTOR_FAMILY_DISTRIBUTED_DEFAULTS: dict[str, Any] = {"lr_scaling": "sqrt"}


# Board planes (connect four's 6x7x2, tic-tac-toe's 3x3x2): the vector family's learning settings, the board
# through 3x3 convolutions that keep its size instead of flattened into the MLP, which sees no cell's neighbours.
BOARD_FAMILY_DEFAULTS: dict[str, Any] = {
    "encoder_conv_mlp_layers": (128,),
    "nonlinearity": "relu",
}


def family_defaults(observation_space: spaces.Space, distributed: bool = False) -> dict[str, Any]:
    """Defaults for the kind of observations an env has (its single-env observation space), under a
    distributed scheme or not."""
    images = [s for s in observation_spaces(observation_space).values() if is_image(s)]
    if any(not is_board(s.dtype) for s in images):
        return {}  # TrainConfig's defaults are Sample Factory's, for pixels
    vector = {**VECTOR_FAMILY_DEFAULTS, **(VECTOR_FAMILY_DISTRIBUTED_DEFAULTS if distributed else {})}
    return {**vector, **BOARD_FAMILY_DEFAULTS} if images else vector


# The Large Batch Simulation paper's settings (Shacklett et al. 2021) for PointNav with DD-PPO: 64x64 depth
# through an SE-ResNet9 (Fixup, no normalisation), LAMB, the square-root learning-rate scaling
# for large batches with a short warm-up and cosine decay; rollouts of 32 steps, 1 epoch of 2
# minibatches; PPO's other settings as DD-PPO's (clip 0.2, entropy 0.01, gradient norm 0.5).
# The paper's encoder is 64 channels wide, 20x convnet_simple's forward + backward on a CPU thread
# (benchmarks/encoder_speed.py); 16 keeps its design at 1.8x, so that 2 CPU cores can train it:
# on a GPU, encoder_base_channels=64 is the paper's.
POINTNAV_PRESET: dict[str, Any] = {
    "num_workers": 1,
    "num_envs_per_worker": 64,
    "rollout": 32,
    "batch_size": 1024,  # 64 envs x 32 steps in 2 minibatches
    "num_epochs": 1,
    "encoder_conv_architecture": "se_resnet9",
    "encoder_base_channels": 16,
    "encoder_conv_mlp_layers": (256,),
    "rnn_size": 256,
    "nonlinearity": "relu",
    # Adam and raw depth (in [0, 1] already), not the paper's LAMB and running-mean input normalisation: seed 0,
    # 2 ranks, held-out success sampled / argmax at 30 min 0.080 / 0.130 against 0.000 / 0.010 with both
    # (benchmarks/results/pointnav_curve.csv); the issue-24 one-rank runs ranked them alike (0.385 vs 0.000).
    "optimizer": "adam",
    "normalize_input": False,
    "learning_rate": 2.5e-4,
    "lr_scaling": "sqrt",
    "lr_warmup_updates": 10,
    "lr_schedule": "cosine",
    "ppo_clip_ratio": 0.2,
    "exploration_loss_coeff": 0.01,
    "max_grad_norm": 0.5,
    # The goal as habitat-lab's PointNav policy reads it: the distance raw (standardised, the 0.2 m that
    # decides success was ~0.08 std of it), the angle as (cos, sin), and the previous action embedded.
    # One 20-minute run each, Adam, val success (issue 24): goal standardised 0.140, raw 0.385.
    "polar_inputs": ("pointgoal_with_gps_compass",),
    "unnormalized_inputs": ("pointgoal_with_gps_compass",),
    "prev_action_embedding": 32,
}
# Atari (ale-py's ALE/ ids, stepped by its AtariVectorEnv: 84x84 gray frames stacked 4, frame skip 4, noop
# starts, rewards clipped to [-1, 1]): CleanRL's ppo_atari settings (Huang et al. 2022, "The 37 implementation
# details of PPO"), which Sample Factory's Atari examples share in the essentials: the Nature CNN (32 8x8/4, 64
# 4x4/2, 64 3x3/1, a 512 ReLU layer), no recurrence, 8 envs of 128 steps in 4 minibatches, 4 epochs, 2.5e-4, clip
# 0.1, entropy 0.01, gradient norm 0.5; pixels scaled to [0, 1] only and returns unscaled, as there. Minibatches of
# steps shuffled across the batch's trajectories and GAE, not V-trace, for APPO's lag (CleanRL's and Sample Factory's
# Atari choices): on Pong, 2 seeds, they reached at 3M frames what minibatches of whole trajectories with V-trace had
# not at 5M (issue 45, docs/benchmarks). The rate stays constant (Sample Factory's Atari choice), not annealed to 0
# as CleanRL's over 40M frames: a run bounded by an hour gets 6-8M frames here, and annealing spent its last third at
# a rate too small for a policy far from converged. Pong at 59 min, constant against annealed: seed 1 -0.2 / -5.3,
# seed 2 +6.7 / -16.4; at 6M frames -2.4 / -7.5 and -6.5 / -16.5 (issue 45, docs/benchmarks).
ATARI_PRESET: dict[str, Any] = {
    "num_workers": 2,
    "num_envs_per_worker": 4,
    "rollout": 128,
    "batch_size": 256,
    "num_batches_per_epoch": 4,
    "num_epochs": 4,
    "encoder_conv_architecture": "convnet_atari",
    "encoder_conv_mlp_layers": (512,),
    "use_rnn": False,
    "nonlinearity": "relu",
    "normalize_input": False,
    "normalize_returns": False,
    "learning_rate": 2.5e-4,
    "lr_schedule": "constant",
    "ppo_clip_ratio": 0.1,
    "exploration_loss_coeff": 0.01,
    "value_loss_coeff": 0.5,
    "max_grad_norm": 0.5,
    "minibatch_of": "steps",
    "with_vtrace": False,
    "env_frameskip": 4,  # AtariVectorEnv's frame skip: fps counts frames, as Atari results do
}
# Connect four's self-play: games start after up to 8 random legal moves, so that the learner meets the positions its
# own play never leads to (where the one-ply bot's random moves go), and a fifth of the games are against snapshots
# drawn by PFSP. Sync PPO, 30 min, 3 seeds against the one-ply win-or-block bot: 0.760 / 0.805 / 0.700, against
# 0.690 / 0.645 / 0.610 with half the games against snapshots and 0.530 / 0.500 / 0.515 with uniform draws from the
# empty board (docs/benchmarks). The latest self's share is the default's, kept here as the figure measured it.
CONNECT_FOUR_PRESET: dict[str, Any] = {
    "random_opening_moves": 8,
    "opponent_sampling": "pfsp_hard",
    "latest_opponent_probability": 0.8,
}
ENV_PRESETS: dict[str, dict[str, Any]] = {
    "vecfast/PointNav-v0": POINTNAV_PRESET,
    "pettingzoo.classic.connect_four_v3": CONNECT_FOUR_PRESET,
}
NAMESPACE_PRESETS: dict[str, dict[str, Any]] = {"ALE": ATARI_PRESET}


def env_preset(env_name: str | None) -> dict[str, Any]:
    """The settings an env trains best with: its own, or its namespace's (``ALE/``); empty for most. ``env_name``:
    an id or a PettingZoo game's dotted module name."""
    if env_name is None:
        return {}
    return dict(ENV_PRESETS.get(env_name, NAMESPACE_PRESETS.get(env_namespace(env_name) or "", {})))


@dataclass(frozen=True)
class ConfigLayers:
    """A run's config as its layers, lowest first: the scheme's defaults, the env family's, the algorithm's, the env's
    preset, a resumed run's saved config, the caller's keys. The one rule every command layers a config by.

    Before its env is built a run knows no family: :meth:`config` without an observation space leaves that layer
    out, which holds none of the keys that build the env (workers, envs per worker, timeouts).
    """

    recipe: Recipe
    env_name: str | None = None  # an id or a game's module name (EnvSource.given_name): it picks the env's preset
    saved: Mapping[str, Any] = field(default_factory=dict)
    user: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, observation_space: spaces.Space | None = None) -> dict[str, Any]:
        """The layers as one dict of keys (not validated)."""
        family = (
            {} if observation_space is None else family_defaults(observation_space, self.recipe.scheme_spec.distributed)
        )
        return {
            **self.recipe.scheme_spec.defaults,
            **family,
            **self.recipe.algorithm.defaults,
            **env_preset(self.env_name),
            **self.saved,
            **self.user,
        }

    def config(self, observation_space: spaces.Space | None = None) -> TrainConfig:
        """The validated config; ``observation_space``: the env's single observation space, once it is known."""
        return TrainConfig.from_overrides(**self.merged(observation_space))

    def with_user(self, **keys: Any) -> ConfigLayers:
        """These layers with ``keys`` set over the caller's."""
        return dataclasses.replace(self, user={**self.user, **keys})

    def without(self, keys: tuple[str, ...]) -> ConfigLayers:
        """These layers with ``keys`` left to the defaults below the saved config and the caller's."""
        return dataclasses.replace(
            self,
            saved={k: v for k, v in self.saved.items() if k not in keys},
            user={k: v for k, v in self.user.items() if k not in keys},
        )

    def with_num_envs(self, num_envs: int | None) -> ConfigLayers:
        """``num_envs`` in all (``None``: as configured) split over the configured ``num_workers``
        (:func:`~vecfast.trainers.config.split_num_envs`)."""
        if num_envs is None:
            return self
        workers = self.merged().get("num_workers", TrainConfig.num_workers)
        return self.with_user(**split_num_envs(num_envs, workers))
