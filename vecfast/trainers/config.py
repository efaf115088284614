"""Training configuration by concern (sampling, PPO, the asynchronous scheme and its samplers on Ray, the
distributed scheme, self-play, populations and PBT, the model, the system, the run directory): one dataclass each,
whose fields carry their defaults and help and whose ``check`` validates them; :class:`TrainConfig` holds them all
as one flat set of keys, Sample Factory's names where one exists, as ``vecfast train``'s options are."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import numbers
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

AUTO = "auto"  # num_workers="auto" in train(): tune, then train with the choice
TUNED_KEYS = ("num_workers", "num_envs_per_worker")  # the keys that num_workers="auto" chooses


@dataclass
class SamplingConfig:
    """How the envs are stepped and cut into trajectories."""

    GROUP: ClassVar[str] = "sampling"

    num_workers: int = 2
    """Worker processes that step the envs; "auto" measures this machine and chooses it and num_envs_per_worker."""
    num_envs_per_worker: int = 8
    """Envs each worker steps: the vector env has num_workers * num_envs_per_worker."""
    rollout: int = 32
    """Steps of one env in a trajectory, the unit that is learned from (and backpropagated through by the RNN)."""

    def check(self) -> None:
        _check_count("num_workers", self.num_workers, " (or 'auto' in vecfast.train, which measures and chooses)")
        _check_count("num_envs_per_worker", self.num_envs_per_worker, " (num_workers='auto' chooses it)")
        if self.rollout < 2:
            raise ValueError(f"rollout must be >= 2, got {self.rollout}")


@dataclass
class PPOConfig:
    """How PPO learns from a batch (Sample Factory's names)."""

    GROUP: ClassVar[str] = "PPO"

    batch_size: int = 512
    """Samples per gradient step, batch_size // rollout whole trajectories: a multiple of rollout."""
    num_epochs: int = 1
    """Passes over an iteration's samples."""
    num_batches_per_epoch: int = 1
    """Minibatches of batch_size samples that an iteration learns from."""
    minibatch_of: str = "trajectories"
    """What a minibatch's samples are: "trajectories" (batch_size // rollout whole ones, what a recurrent core and
    the auxiliary losses learn from) or "steps" (drawn from every trajectory of the iteration, as CleanRL and Sample
    Factory shuffle a model without memory; APPO then computes the targets from the current values once per batch
    instead of once per minibatch). The Atari preset's: on Pong (with GAE) steps learned with far fewer frames,
    -16.8 / -17.7 at 3M frames (seeds 0 / 1) against whole trajectories' -19.3 with GAE / -20.1 with V-trace
    (docs/benchmarks)."""
    learning_rate: float = 1e-4
    """The optimiser's learning rate, before lr_scaling and lr_schedule."""
    lr_schedule: str = "constant"
    """The learning rate's schedule by training progress: "constant", "linear_decay" or "cosine" (both to 0 at
    the end of training). Progress is the run's env steps over total_env_steps or, where train_for_seconds
    bounds the run, its training time over that if further on; a resumed run continues from its checkpoint's
    progress."""
    lr_scaling: str = "none"
    """Scale learning_rate for large batches: "none", or "sqrt": times max(sqrt(batch_size * ranks / 256), 1),
    the square-root rule of Large Batch Simulation (Shacklett et al. 2021; 256 samples is its base). The paper
    trains DD-PPO on PointNav with rollouts of 32 steps, 1 epoch of 2 minibatches, 64x64 depth."""
    lr_warmup_updates: int = 0
    """Gradient steps over which the learning rate rises linearly from learning_rate to its lr_scaling value;
    0: scaled from the start."""
    optimizer: str = "adam"
    """The optimiser: "adam", or "lamb" (Large Batch Simulation's): Adam's update scaled per weight tensor by the
    trust ratio min(||w||, 10) / ||update|| clipped to [0.01, 100]; biases and other 1-D parameters, and tensors
    that start too small for the ratio (Fixup's zeroed convolutions, the actor's output layer), as AdamW."""
    adam_eps: float = 1e-6
    """Adam's epsilon, added to the root of its mean of squared gradients."""
    adam_beta1: float = 0.9
    """Adam's decay of its mean of gradients."""
    adam_beta2: float = 0.999
    """Adam's decay of its mean of squared gradients."""
    weight_decay: float = 0.0
    """LAMB's decoupled weight decay of the weight matrices and convolution kernels (not of biases or other
    1-D parameters); bps-nav's LAMB uses 1e-4. optimizer="adam" takes none."""
    max_grad_norm: float = 4.0
    """Gradients are scaled down to this global L2 norm."""
    gamma: float = 0.99
    """Discount of future rewards."""
    gae_lambda: float = 0.95
    """GAE's lambda: advantage estimates of low variance (0) or low bias (1)."""
    ppo_clip_ratio: float = 0.1
    """PPO's clip c: the policy ratio is clipped to [1 / (1 + c), 1 + c]."""
    ppo_clip_value: float | None = None
    """Clip the value change to +-this (in normalised units); None: no clipping."""
    value_loss_coeff: float = 0.5
    """Weight of the critic's loss."""
    exploration_loss_coeff: float = 0.003
    """Weight of the entropy bonus, before exploration_loss_schedule."""
    exploration_loss_schedule: str = "constant"
    """The entropy bonus's schedule by training progress, as lr_schedule's: "constant", "linear_decay" or
    "cosine"."""
    normalize_advantage: bool = True
    """Normalise the advantages of each minibatch to mean 0 and std 1."""

    def check(self) -> None:
        if self.batch_size % self.rollout:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of rollout ({self.rollout})")
        if self.num_epochs < 1 or self.num_batches_per_epoch < 1:
            raise ValueError("num_epochs and num_batches_per_epoch must be >= 1")
        if self.minibatch_of not in ("trajectories", "steps"):
            raise ValueError(f"minibatch_of must be 'trajectories' or 'steps', got {self.minibatch_of!r}")
        for key in ("lr_schedule", "exploration_loss_schedule"):
            if getattr(self, key) not in ("constant", "linear_decay", "cosine"):
                raise ValueError(f"{key} must be 'constant', 'linear_decay' or 'cosine', got {getattr(self, key)!r}")
        if self.lr_scaling not in ("none", "sqrt"):
            raise ValueError(f"lr_scaling must be 'none' or 'sqrt', got {self.lr_scaling!r}")
        warmup = self.lr_warmup_updates
        if isinstance(warmup, bool) or not isinstance(warmup, numbers.Integral) or warmup < 0:
            raise ValueError(f"lr_warmup_updates must be an int >= 0, got {warmup!r}")
        if self.optimizer not in ("adam", "lamb"):
            raise ValueError(f"optimizer must be 'adam' or 'lamb', got {self.optimizer!r}")
        if not (isinstance(self.weight_decay, numbers.Real) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if self.weight_decay and self.optimizer != "lamb":
            raise ValueError(f"weight_decay applies to optimizer='lamb' only, got optimizer={self.optimizer!r}")


@dataclass
class AuxiliaryConfig:
    """Self-supervised auxiliary losses on the agent's trajectories (Ye et al. 2020), added to the RL loss."""

    GROUP: ClassVar[str] = "auxiliary losses"

    aux_cpca_coeff: float = 0.0
    """Weight of CPC|A-k: from the core's belief and the actions taken, tell the next aux_cpca_steps observations'
    features from other observations'; 0: off (and not in the model)."""
    aux_cpca_steps: int = 4
    """CPC|A's k: how many steps ahead it predicts."""
    aux_inverse_dynamics_coeff: float = 0.0
    """Weight of inverse dynamics: the action taken between two observations, from their features; 0: off."""

    def check(self) -> None:
        if self.aux_cpca_coeff < 0 or self.aux_inverse_dynamics_coeff < 0:
            raise ValueError(
                f"aux_cpca_coeff and aux_inverse_dynamics_coeff must be >= 0, got {self.aux_cpca_coeff} and "
                f"{self.aux_inverse_dynamics_coeff}"
            )
        if isinstance(self.aux_cpca_steps, bool) or not isinstance(self.aux_cpca_steps, int) or self.aux_cpca_steps < 1:
            raise ValueError(f"aux_cpca_steps must be an int >= 1, got {self.aux_cpca_steps!r}")


@dataclass
class AsyncConfig:
    """The asynchronous scheme's (APPO's) own knobs."""

    GROUP: ClassVar[str] = "asynchronous (APPO)"

    with_vtrace: bool = True
    """APPO: V-trace targets with rho_bar = c_bar = 1; off: GAE on the current values."""
    num_batches_to_accumulate: int = 4
    """APPO: how many batches may wait for the learner beyond the trajectories its envs are filling (Sample
    Factory's name): one gathered for its next iteration, the rest in finished trajectories. More keeps the envs
    stepping through a slow iteration; fewer keeps the data fresher where the learner is the slower side (on Pong, 2
    halved the policy lag of 4 at 6-9% fewer frames/s). At least 2 (with 1 the envs would wait for rows that a
    half-gathered batch holds). Samplers with local inference on a Ray cluster keep one batch each in flight instead."""

    def check(self) -> None:
        n = self.num_batches_to_accumulate
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"num_batches_to_accumulate must be an int >= 2, got {n!r}")


@dataclass
class DistributedConfig:
    """DD-PPO's preemption of stragglers."""

    GROUP: ClassVar[str] = "distributed (DD-PPO)"

    sync_frac: float = 0.6
    """DD-PPO: once this share of the ranks have finished their rollout, the others end theirs early."""
    min_rollout_fraction: float = 0.25
    """DD-PPO: a rollout ends early only after this share of its steps."""

    def check(self) -> None:
        if not 0.0 < self.sync_frac <= 1.0 or not 0.0 <= self.min_rollout_fraction <= 1.0:
            raise ValueError(
                f"sync_frac must be in (0, 1] and min_rollout_fraction in [0, 1], "
                f"got {self.sync_frac} and {self.min_rollout_fraction}"
            )


SAMPLER_INFERENCE = ("central", "local")


@dataclass
class RayConfig:
    """Sampling beyond one machine: APPO's samplers as actors on a Ray cluster (the ray extra)."""

    GROUP: ClassVar[str] = "Ray"

    ray_address: str | None = None
    """None: sample on this machine. Else the Ray cluster that runs the samplers, as ray.init takes it: "local"
    starts Ray here (and stops it after the run), "auto" joins the cluster this machine belongs to, or a head
    node's "host:port"."""
    num_samplers: int = 2
    """Sampler actors (ray::EnvSampler), spread over the cluster's nodes (one per node before a second on any);
    each steps num_workers * num_envs_per_worker envs in an AsyncSharedMemVectorEnv of its node."""
    sampler_inference: str | None = None
    """Who acts for a sampler's envs: "central", the learner's process for all of them (SEED RL: observations
    travel to it every step, actions back); "local", each sampler with its own copy of the policy (Sample Factory's
    policy workers, IMPALA's actors: finished trajectories travel, and the weights after each gradient step).
    None: "local" where one policy acts alone (it measured faster), "central" where a game's matches seat
    opponents or a population (num_policies) acts, which only the learner holds."""
    sampler_num_cpus: float = 1.0
    """CPUs Ray reserves for each sampler (Ray's num_cpus); its env workers use what the node has."""
    sampler_max_restarts: int = 10
    """Times Ray restarts a sampler whose process or node died (Ray's max_restarts), the run going on with the
    others meanwhile; past them the run stops with a final checkpoint."""

    def check(self) -> None:
        if self.ray_address is not None and (not isinstance(self.ray_address, str) or not self.ray_address):
            raise ValueError(
                f"ray_address must be 'local', 'auto', a cluster's address or None, got {self.ray_address!r}"
            )
        _check_count("num_samplers", self.num_samplers, "")
        if self.sampler_inference is not None and self.sampler_inference not in SAMPLER_INFERENCE:
            raise ValueError(f"sampler_inference must be one of {SAMPLER_INFERENCE}, got {self.sampler_inference!r}")
        if not _positive_number(self.sampler_num_cpus):
            raise ValueError(f"sampler_num_cpus must be a positive number, got {self.sampler_num_cpus!r}")
        if (
            isinstance(self.sampler_max_restarts, bool)
            or not isinstance(self.sampler_max_restarts, int)
            or (self.sampler_max_restarts < 0)
        ):
            raise ValueError(f"sampler_max_restarts must be an int >= 0, got {self.sampler_max_restarts!r}")


@dataclass
class SelfPlayConfig:
    """Self-play of one learner against its snapshots (a vector env of agent slots)."""

    GROUP: ClassVar[str] = "self-play"

    opponent_seats: int = 2
    """Self-play (every scheme): frozen models that hold past snapshots of the learner as opponents; each
    game seats the learner against the latest policy (itself) or a snapshot. 0: the latest plays every seat."""
    latest_opponent_probability: float = 0.8
    """Self-play: the share of games against the latest policy; the others draw a past snapshot (OpenAI Five)."""
    snapshot_every_updates: int = 50
    """Self-play: learner updates between two snapshots of it."""
    max_snapshots: int = 50
    """Self-play: the most snapshots the pool keeps (in memory and in every checkpoint); past it, the one the learner
    beats most leaves."""
    snapshot_win_rate: float = 0.7
    """Self-play: a snapshot is also taken once the learner's mean score against the snapshots (win 1, draw 0.5)
    over its last 100 games reaches this."""
    opponent_sampling: str = "uniform"
    """Self-play: how a game draws a past snapshot: "uniform", or by AlphaStar's prioritized fictitious self-play on
    the learner's win rate x against each (its mean score over its last 100 games against it): "pfsp_hard", weight
    (1 - x) ** pfsp_exponent (the snapshots that still beat it), "pfsp_var", x (1 - x) (those it is even with)."""
    pfsp_exponent: float = 2.0
    """Self-play: the exponent p of "pfsp_hard"'s weight (1 - x) ** p; larger draws the hardest more."""
    random_opening_moves: int = 0
    """Self-play on turn-based games (with an action mask): every training game starts after 0 to this many random
    legal moves (uniformly many), so the learner meets positions its own play never leads to; evaluation plays the
    game from its start. 0: off."""

    def check(self) -> None:
        if self.opponent_seats < 0 or self.snapshot_every_updates < 1 or self.max_snapshots < 1:
            raise ValueError(
                f"opponent_seats must be >= 0, snapshot_every_updates and max_snapshots >= 1, got "
                f"{self.opponent_seats}, {self.snapshot_every_updates} and {self.max_snapshots}"
            )
        if self.opponent_sampling not in ("uniform", "pfsp_hard", "pfsp_var"):
            raise ValueError(
                f"opponent_sampling must be 'uniform', 'pfsp_hard' or 'pfsp_var', got {self.opponent_sampling!r}"
            )
        if not self.pfsp_exponent > 0:
            raise ValueError(f"pfsp_exponent must be > 0, got {self.pfsp_exponent!r}")
        if self.random_opening_moves < 0:
            raise ValueError(f"random_opening_moves must be >= 0, got {self.random_opening_moves!r}")
        if not 0.0 <= self.latest_opponent_probability <= 1.0 or not 0.0 < self.snapshot_win_rate <= 1.0:
            raise ValueError(
                f"latest_opponent_probability must be in [0, 1] and snapshot_win_rate in (0, 1], "
                f"got {self.latest_opponent_probability} and {self.snapshot_win_rate}"
            )


@dataclass
class PopulationConfig:
    """Populations (Sample Factory's num_policies) and population-based training."""

    GROUP: ClassVar[str] = "population and PBT"

    num_policies: int = 1
    """Learning policies that share the envs, each with its own model and optimiser; each agent's episode is
    played by one of them (train()'s policy_mapping; default: a random one, re-drawn every
    resample_policy_every_episodes episodes of its match). With more than one, they are each other's opponents."""
    policies_to_train: tuple[int, ...] | None = None
    """The policies that learn; the others stay frozen (their weights bit-identical). None: all."""
    resample_policy_every_episodes: int = 10
    """The default policy mapping: episodes of a match between two random draws of each agent's policy."""
    with_pbt: bool = False
    """Population-based training (num_policies > 1): the weakest policies take the strongest's weights and the
    others' hyperparameters mutate (vecfast.selfplay.pbt), ranked by true_objective (else the return)."""
    pbt_period_env_steps: int = 5_000_000
    """PBT: env steps of a policy's own between two of its PBT steps."""
    pbt_start_mutation: int = 20_000_000
    """PBT: env steps of a policy's own before its first PBT step."""
    pbt_replace_fraction: float = 0.3
    """PBT: the share of the population kept as it is (the top), and the share that may be replaced (the bottom)."""
    pbt_mutation_rate: float = 0.15
    """PBT: the probability that each hyperparameter mutates at a PBT step."""
    pbt_replace_reward_gap: float = 0.1
    """PBT: a bottom policy takes a top one's weights when it trails it by more than this (relative) ..."""
    pbt_replace_reward_gap_absolute: float = 1e-6
    """PBT: ... and by more than this (absolute)."""
    pbt_perturb_min: float = 1.1
    """PBT: a mutation multiplies or divides by a factor drawn from U(pbt_perturb_min, pbt_perturb_max)."""
    pbt_perturb_max: float = 1.5
    """PBT: see pbt_perturb_min."""
    pbt_optimize_gamma: bool = False
    """PBT: mutate the discount too (through 1 - gamma)."""

    def check(self) -> None:
        _check_count("num_policies", self.num_policies, "")
        _check_count("resample_policy_every_episodes", self.resample_policy_every_episodes, "")
        if self.policies_to_train is not None and (
            not all(isinstance(p, numbers.Integral) and 0 <= p < self.num_policies for p in self.policies_to_train)
            or len(set(self.policies_to_train)) != len(self.policies_to_train)
        ):
            raise ValueError(
                f"policies_to_train must be distinct policy indices in 0..{self.num_policies - 1} (num_policies="
                f"{self.num_policies}), or None for all; got {self.policies_to_train!r}"
            )
        if self.with_pbt and self.num_policies < 2:
            raise ValueError("with_pbt needs a population: num_policies >= 2")
        _check_count("pbt_period_env_steps", self.pbt_period_env_steps, "")
        if not isinstance(self.pbt_start_mutation, int) or self.pbt_start_mutation < 0:
            raise ValueError(f"pbt_start_mutation must be an int >= 0, got {self.pbt_start_mutation!r}")
        if not 0.0 < self.pbt_replace_fraction <= 0.5:
            raise ValueError(f"pbt_replace_fraction must be in (0, 0.5], got {self.pbt_replace_fraction}")
        if self.pbt_replace_reward_gap < 0 or self.pbt_replace_reward_gap_absolute < 0:
            raise ValueError("pbt_replace_reward_gap and pbt_replace_reward_gap_absolute must be >= 0")
        if not 0.0 <= self.pbt_mutation_rate <= 1.0:
            raise ValueError(f"pbt_mutation_rate must be in [0, 1], got {self.pbt_mutation_rate}")
        if not 1.0 <= self.pbt_perturb_min <= self.pbt_perturb_max:
            raise ValueError(
                f"need 1 <= pbt_perturb_min <= pbt_perturb_max, got {self.pbt_perturb_min}, {self.pbt_perturb_max}"
            )


@dataclass
class ModelConfig:
    """The actor-critic model: encoders, core, normalisation."""

    GROUP: ClassVar[str] = "model"

    use_rnn: bool = True
    """A GRU core between the encoders and the actor and critic heads."""
    rnn_size: int = 512
    """The GRU's hidden size."""
    encoder_conv_architecture: str = "convnet_simple"
    """The conv encoder of image observations: Sample Factory's "convnet_simple" or "convnet_atari"; "board" (two
    3x3 convolutions that keep the size: board games' int8 or bool planes always get it); or "se_resnet9": Large
    Batch Simulation's SE-ResNet9 with Fixup (no normalisation layers; image height and width multiples of 4):
    ~64M multiply-adds per 64x64 image, 20-30x convnet_simple's (forward + backward ~18x slower on a CPU thread:
    benchmarks/encoder_speed.py)."""
    encoder_base_channels: int = 64
    """se_resnet9's channels in its first stage, doubled in each of the next three (the paper's 64; 16 does
    ~1/16 of the work)."""
    encoder_conv_mlp_layers: tuple[int, ...] = (512,)
    """Sizes of the fully connected layers after the conv encoder."""
    encoder_mlp_layers: tuple[int, ...] = (256, 256)
    """Sizes of the MLP layers that encode vector (non-image) observations."""
    prev_action_embedding: int = 0
    """Size of a learned embedding of the previous action (Discrete actions; "none" at an episode's start),
    fed to the core with the observation's features, as habitat-lab's PointNav policy does (32 there); 0: none."""
    nonlinearity: str = "elu"
    """The activation: "elu", "relu" or "tanh"."""
    encoder_bf16: bool | str = "auto"
    """bfloat16 autocast in the conv encoder; the recurrent core, heads and optimiser stay float32.
    "auto": on where the device computes bf16 natively (CPUs with AVX512-BF16 or AMX, GPUs with
    bf16), where it trained DoomBasic 1.26x faster to the same returns; elsewhere it is emulated, slowly."""
    normalize_input: bool = True
    """Normalise float vector observations with their running mean and std."""
    unnormalized_inputs: tuple[str, ...] = ()
    """Observation entries that normalize_input leaves as they are (PointNav's goal: standardised, its 0.2 m
    success radius would be a small fraction of a std of the distance)."""
    polar_inputs: tuple[str, ...] = ()
    """Observation entries of (distance, angle in radians) that the model reads as (distance, cos angle,
    sin angle), as habitat-lab's PointNav policy reads its goal: no jump where the angle wraps at +-pi."""
    normalize_returns: bool = True
    """The critic predicts normalised returns."""

    def check(self) -> None:
        if self.encoder_conv_architecture not in ("convnet_simple", "convnet_atari", "board", "se_resnet9"):
            raise ValueError(
                "encoder_conv_architecture must be 'convnet_simple', 'convnet_atari', 'board' or 'se_resnet9', "
                f"got {self.encoder_conv_architecture!r}"
            )
        _check_count("encoder_base_channels", self.encoder_base_channels, "")
        if isinstance(self.prev_action_embedding, bool) or not (
            isinstance(self.prev_action_embedding, numbers.Integral) and self.prev_action_embedding >= 0
        ):
            raise ValueError(f"prev_action_embedding must be an int >= 0, got {self.prev_action_embedding!r}")
        if self.encoder_bf16 not in (True, False, "auto"):
            raise ValueError(f"encoder_bf16 must be True, False or 'auto', got {self.encoder_bf16!r}")
        if self.nonlinearity not in ("elu", "relu", "tanh"):
            raise ValueError(f"nonlinearity must be 'elu', 'relu' or 'tanh', got {self.nonlinearity!r}")


@dataclass
class SystemConfig:
    """Device, threads, seeds, time limits and the progress line."""

    GROUP: ClassVar[str] = "system"

    device: str = "auto"
    """A torch device (cpu, cuda, cuda:1); "auto": CUDA when torch sees a GPU, else CPU."""
    torch_threads: int = 1
    """torch's CPU threads per process (the env workers need the cores)."""
    seed: int | None = None
    """Seed of python's, numpy's and torch's generators and of the envs' resets; None: unseeded."""
    train_for_seconds: float | None = None
    """Stop after this long even if total_env_steps is not reached; None: no time limit."""
    env_frameskip: int | None = None
    """Frames per env step in env_frames; None: the envs' frame_skip, else 1."""
    step_timeout: float | str | None = "auto"
    """Seconds an env step may take, and a worker that owes results may go without starting one, before the
    worker is replaced (restart_failed_workers) or the run stops with a final checkpoint; "auto": 100 measured
    env cycles, at least 30 s (2 min until measured); None: never."""
    restart_failed_workers: bool = True
    """Rebuild an env that raises (or whose game died) and replace a worker that dies or stalls, ending their
    episodes truncated, and train on; past 20 restarts within 10 minutes the run stops with a final checkpoint.
    False: the first failure stops the run (with a final checkpoint)."""
    env_start_timeout: float | None = 600.0
    """Seconds the env constructors may take before the run stops; None: no limit."""
    print_every_sec: float | None = 10.0
    """A progress line this often (stderr) unless the live dashboard shows; None: quiet."""

    def check(self) -> None:
        if not (self.step_timeout in (None, "auto") or _positive_number(self.step_timeout)):
            raise ValueError(
                f"step_timeout must be a positive number of seconds, 'auto' or None, got {self.step_timeout!r}"
            )
        if not (self.env_start_timeout is None or _positive_number(self.env_start_timeout)):
            raise ValueError(
                f"env_start_timeout must be a positive number of seconds or None, got {self.env_start_timeout!r}"
            )


@dataclass
class RunDirConfig:
    """Checkpoints and the statistics a run keeps."""

    GROUP: ClassVar[str] = "run directory"

    save_every_sec: float = 120.0
    """Write a checkpoint this often."""
    save_best_every_sec: float | None = 30.0
    """At most this often, checkpoint an improved mean return (best.pt); None: no best.pt."""
    keep_checkpoints: int = 2
    """Numbered checkpoints kept, the newest (best.pt besides)."""
    stats_avg: int = 100
    """Episodes in the running mean of returns."""

    def check(self) -> None:
        pass


@dataclass
class EvaluationConfig:
    """Evaluation while training: whole episodes of the policy on envs of their own, in rank 0."""

    GROUP: ClassVar[str] = "evaluation"

    eval_every_env_steps: int | None = None
    """Evaluate the policy every this many env steps; the best checkpoint is then the best evaluation's.
    None: never."""
    eval_episodes: int = 10
    """Whole episodes per evaluation (self-play: games against each built-in opponent, seats alternated)."""
    eval_env_kwargs: dict[str, Any] | None = None
    """The evaluation envs' keyword arguments over the run's (PointNav's scenes never trained on:
    {"split": "val"}, on the command line split=val); None: the run's own."""
    eval_deterministic: bool = True
    """Evaluate the most likely actions; false: sampled ones."""

    def check(self) -> None:
        if self.eval_every_env_steps is not None and not (
            isinstance(self.eval_every_env_steps, int) and self.eval_every_env_steps >= 1
        ):
            raise ValueError(
                f"eval_every_env_steps must be a positive integer or None, got {self.eval_every_env_steps!r}"
            )
        if not isinstance(self.eval_episodes, int) or self.eval_episodes < 1:
            raise ValueError(f"eval_episodes must be a positive integer, got {self.eval_episodes!r}")
        if self.eval_env_kwargs is not None and not isinstance(self.eval_env_kwargs, dict):
            raise ValueError(f"eval_env_kwargs must be a dict or None, got {self.eval_env_kwargs!r}")


@dataclass
class LoggingConfig:
    """Where a run's numbers and videos go besides RUN_DIR (metrics.jsonl, TensorBoard's events)."""

    GROUP: ClassVar[str] = "logging"

    with_wandb: bool = False
    """Log the metrics, the config and the videos to Weights & Biases too (the wandb extra; WANDB_MODE=offline
    keeps the run on disk, under RUN_DIR/wandb)."""
    wandb_user: str | None = None
    """The W&B entity (user or team); None: wandb's default."""
    wandb_project: str = "vecfast"
    """The W&B project."""
    wandb_group: str | None = None
    """The W&B group (runs compared together, such as seeds)."""
    wandb_tags: tuple[str, ...] = ()
    """W&B tags."""
    video_every_env_steps: int | None = None
    """Record an episode of the policy every this many env steps, as RUN_DIR/videos/*.mp4 (H.264, the video
    extra), in TensorBoard and W&B; None: never."""

    def check(self) -> None:
        if self.video_every_env_steps is not None and not (
            isinstance(self.video_every_env_steps, int) and self.video_every_env_steps >= 1
        ):
            raise ValueError(
                f"video_every_env_steps must be a positive integer or None, got {self.video_every_env_steps!r}"
            )
        if not all(isinstance(tag, str) for tag in self.wandb_tags):
            raise ValueError(f"wandb_tags must be strings, got {self.wandb_tags!r}")


@dataclass
class TrainConfig(
    LoggingConfig,
    EvaluationConfig,
    RunDirConfig,
    SystemConfig,
    ModelConfig,
    PopulationConfig,
    SelfPlayConfig,
    DistributedConfig,
    RayConfig,
    AsyncConfig,
    AuxiliaryConfig,
    PPOConfig,
    SamplingConfig,
):
    """Every knob of the built-in trainers, by concern (one base class each, in :data:`CONCERNS`); keys take Sample
    Factory's names where one exists. ``TrainConfig.from_overrides(**kw)`` validates names and values.

    Sampling: ``num_workers`` processes step ``num_envs_per_worker`` envs each (``vecfast.train``
    also takes ``num_workers="auto"`` and replaces both with what :mod:`vecfast.trainers.run.tune`
    chooses); a trajectory is ``rollout`` steps of one env. Learning, as in Sample Factory: a gradient step takes
    ``batch_size`` samples (``batch_size // rollout`` whole trajectories, so a recurrent core
    backpropagates through the rollout), independent of the number of envs; an iteration
    learns from ``num_batches_per_epoch`` such minibatches, ``num_epochs`` times.
    """

    @classmethod
    def from_overrides(cls, base: TrainConfig | None = None, **overrides: Any) -> TrainConfig:
        """``base`` (default: the defaults) with ``overrides``; unknown keys raise naming the closest valid ones."""
        check_keys(overrides)
        cfg = dataclasses.replace(base or cls(), **overrides)
        cfg.encoder_conv_mlp_layers = tuple(cfg.encoder_conv_mlp_layers)
        cfg.encoder_mlp_layers = tuple(cfg.encoder_mlp_layers)
        cfg.unnormalized_inputs = _entry_names("unnormalized_inputs", cfg.unnormalized_inputs)
        cfg.polar_inputs = _entry_names("polar_inputs", cfg.polar_inputs)
        if cfg.policies_to_train is not None:
            cfg.policies_to_train = tuple(cfg.policies_to_train)
        cfg.wandb_tags = tuple(cfg.wandb_tags)
        cfg.validate()
        return cfg

    @property
    def num_envs(self) -> int:
        return self.num_workers * self.num_envs_per_worker

    def validate(self) -> None:
        """Each concern checks its own keys (a ValueError naming the key)."""
        for concern in CONCERNS:
            concern.check(self)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


CONCERNS = (
    SamplingConfig,
    PPOConfig,
    AuxiliaryConfig,
    AsyncConfig,
    RayConfig,
    DistributedConfig,
    SelfPlayConfig,
    PopulationConfig,
    ModelConfig,
    SystemConfig,
    RunDirConfig,
    EvaluationConfig,
    LoggingConfig,
)
"""The config's concerns in the order ``vecfast train --help`` lists them."""

# The config's keys by concern: every field in exactly one group.
CONFIG_GROUPS: dict[str, tuple[str, ...]] = {
    concern.GROUP: tuple(f.name for f in dataclasses.fields(concern)) for concern in CONCERNS
}


def check_keys(keys: Iterable[str], valid_arguments: Iterable[str] = ()) -> None:
    """A TypeError for keys that are neither config keys nor ``valid_arguments``, naming the closest valid ones."""
    valid = [*(f.name for f in dataclasses.fields(TrainConfig)), *valid_arguments]
    unknown = sorted(set(keys) - set(valid))
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = closest(key, valid)
        hints.append(f"{key!r}: did you mean {' or '.join(repr(c) for c in close)}?" if close else f"{key!r}")
    raise TypeError(
        f"unknown config keys {unknown} ({'; '.join(hints)}); the config keys are vecfast.trainers.TrainConfig's "
        "fields (vecfast train --help lists them)"
    )


# abbreviations that name a key no spelling is close to
_ALIASES = {"lr": "learning_rate", "steps": "total_env_steps", "epochs": "num_epochs", "envs": "num_envs"}


def closest(key: str, valid: Iterable[str]) -> list[str]:
    """The valid names closest to a misspelt or abbreviated ``key``, best first (at most 3)."""
    valid = list(valid)
    words = key.lower().replace("-", "_").strip("_")
    matches = difflib.get_close_matches(words, valid, n=3, cutoff=0.6)
    alias = _ALIASES.get(words)
    if alias is not None and alias in valid and alias not in matches:
        matches.insert(0, alias)
    parts = set(words.split("_"))
    matches += [v for v in valid if v not in matches and parts and parts <= set(v.split("_"))]
    return matches[:3]


def split_num_envs(num_envs: int, num_workers: Any) -> dict[str, int]:
    """``num_envs`` in all (per rank), as ``vecfast bench`` means it, over ``num_workers`` (at most ``num_envs``):
    the ``num_workers`` and ``num_envs_per_worker`` that make it, or a ValueError saying how to split evenly."""
    _check_count("num_envs", num_envs, "")
    if num_workers == AUTO:
        raise ValueError("num_workers='auto' chooses the number of envs: leave num_envs out, or give num_workers")
    _check_count("num_workers", num_workers, "")
    workers = min(num_workers, num_envs)
    if num_envs % workers:
        raise ValueError(
            f"num_envs={num_envs} does not split evenly over num_workers={workers}: "
            f"choose a multiple of {workers}, or give num_workers too"
        )
    return {"num_workers": workers, "num_envs_per_worker": num_envs // workers}


def _check_count(name: str, value: Any, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1{hint}, got {value!r}")


def _entry_names(name: str, value: Any) -> tuple[str, ...]:
    """A sequence of observation entry names as a tuple (a bare string is one name's letters: refused)."""
    if isinstance(value, str) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"{name} must be a sequence of observation entry names, got {value!r}")
    return tuple(value)


def _positive_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0


@functools.cache
def field_docs() -> dict[str, str]:
    """Each key's docstring (the string literal under its field, read from its concern's source), on one line: its
    help."""
    docs = {}
    for concern in CONCERNS:
        body = ast.parse(textwrap.dedent(inspect.getsource(concern))).body[0].body
        for node, doc in zip(body, body[1:], strict=False):
            is_doc = (
                isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)
            )
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and is_doc:
                docs[node.target.id] = " ".join(doc.value.value.split())
    return docs
