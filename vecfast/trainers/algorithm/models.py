"""Actor-critic model: Dict observations -> encoders -> optional GRU core -> actor and critic heads.

Images (uint8 or float32, 3-D) go through a conv encoder (Sample Factory's ``convnet_simple``
by default), and so do board planes (int8 or bool, 3-D, channels last as PettingZoo's classic games give
them) through the ``"board"`` architecture, everything else is flattened through an MLP; the features
are concatenated. An ``action_mask`` entry is no input: it masks the actor's logits
(:func:`vecfast.trainers.algorithm.distributions.mask_logits`).
The same module acts (one step, :meth:`ActorCritic.step`) and learns (whole trajectories with
backpropagation through time, :meth:`ActorCritic.evaluate`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from vecfast.trainers.algorithm.auxiliary import AuxiliaryInputs, auxiliary_losses
from vecfast.trainers.algorithm.distributions import ActionDistribution, ActionHead
from vecfast.trainers.algorithm.normalize import RunningMeanStd
from vecfast.trainers.algorithm.numerics import Conv2d, conv2d, native_bf16
from vecfast.trainers.algorithm.se_resnet import se_resnet9
from vecfast.trainers.config import TrainConfig

# (out_channels, kernel, stride, padding): Sample Factory's conv encoders for pixels, and for board planes
# two 3x3 convolutions that keep the board's size (the padding reads as empty cells), so every cell's features
# see the 5x5 around it, as far as a four in a row of connect four reaches from its second cell. Forward and
# backward ~0.1 ms per connect-four board on a CPU thread (64 channels, three layers: ~0.5 ms).
CONV_ARCHITECTURES = {
    "convnet_simple": [(32, 8, 4, 0), (64, 4, 2, 0), (128, 3, 2, 0)],
    "convnet_atari": [(32, 8, 4, 0), (64, 4, 2, 0), (64, 3, 1, 0)],
    "board": [(32, 3, 1, 1)] * 2,
}
_ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh}
DEFAULT_KEY = "obs"  # the key a non-Dict observation gets
ACTION_MASK_KEY = "action_mask"  # the entry that masks illegal actions (PettingZoo's name) instead of being an input


def observation_spaces(space: spaces.Space) -> dict[str, spaces.Space]:
    """The observation as a flat dict of Box/Discrete entries (a non-Dict space becomes ``{"obs": space}``)."""
    entries = dict(space.spaces) if isinstance(space, spaces.Dict) else {DEFAULT_KEY: space}
    for key, sub in entries.items():
        if not isinstance(sub, (spaces.Box, spaces.Discrete)):
            raise TypeError(f"observation entry {key!r} is {sub}: only Box and Discrete entries are supported")
    return entries


def as_obs_dict(obs: Any) -> dict[str, Any]:
    return dict(obs) if isinstance(obs, Mapping) else {DEFAULT_KEY: obs}


def is_board(dtype: Any) -> bool:
    """int8 or bool values of a 3-D Box: a board game's planes, (rows, columns, planes)."""
    return np.dtype(dtype) in (np.int8, np.bool_)


def is_image(space: spaces.Space) -> bool:
    """A 3-D Box of uint8 pixels, float32 values (depth images, in metres) or board planes: the conv encoder's
    input."""
    return (
        isinstance(space, spaces.Box)
        and (space.dtype in (np.uint8, np.float32) or is_board(space.dtype))
        and len(space.shape) == 3
    )


def _mlp(sizes: list[int], activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        linear = nn.Linear(n_in, n_out)
        nn.init.orthogonal_(linear.weight, np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers += [linear, activation()]
    return nn.Sequential(*layers)


def _conv_body(channels: int, cfg: TrainConfig) -> tuple[nn.Module, nn.Conv2d, list[nn.Module]]:
    """``encoder_conv_architecture`` as (a rearrangement of the input, the first convolution, the
    layers after it up to the feature map)."""
    if cfg.encoder_conv_architecture == "se_resnet9":
        return se_resnet9(channels, tuple(cfg.encoder_base_channels * 2**i for i in range(4)))
    activation = _ACTIVATIONS[cfg.nonlinearity]
    layers: list[nn.Module] = []
    c = channels
    for out_channels, kernel, stride, padding in CONV_ARCHITECTURES[cfg.encoder_conv_architecture]:
        conv = Conv2d(c, out_channels, kernel, stride, padding)
        nn.init.orthogonal_(conv.weight, np.sqrt(2))
        nn.init.zeros_(conv.bias)
        layers += [conv, activation()]
        c = out_channels
    return nn.Identity(), layers[0], layers[1:]


class ConvEncoder(nn.Module):
    """Image (channels first, or last when the last dimension has 1, 3 or 4 channels; board planes last) -> features.

    ``encoder_conv_architecture``'s convolutions (:func:`_conv_body`; "se_resnet9":
    :mod:`vecfast.trainers.algorithm.se_resnet`), flattened through the ``encoder_conv_mlp_layers`` MLP.
    uint8 pixels are scaled to [0, 1], float images (depth in metres) by 1, and (with
    ``normalize_input``) standardised per channel with running statistics, as Sample Factory
    normalises every observation entry. Both are affine per channel, so they are folded into the
    first convolution's weights and bias rather than applied to every pixel.
    """

    def __init__(self, shape: tuple[int, ...], cfg: TrainConfig, dtype: Any = np.uint8) -> None:
        super().__init__()
        self.channels_last = is_board(dtype) or (shape[-1] in (1, 3, 4) and shape[0] not in (1, 3, 4))
        channels, h, w = (shape[2], shape[0], shape[1]) if self.channels_last else shape
        self.input_scale = 1.0 / 255.0 if np.dtype(dtype) == np.uint8 else 1.0
        activation = _ACTIVATIONS[cfg.nonlinearity]
        if is_board(dtype):  # a board's cells, not pixels: whatever architecture images get
            cfg = dataclasses.replace(cfg, encoder_conv_architecture="board")
        self.pre, first, rest = _conv_body(channels, cfg)  # pre: se_resnet9's space-to-depth
        # channels-last is oneDNN's fast layout for these convolutions (~1.3x on CPU)
        self.first = first.to(memory_format=torch.channels_last)
        self.rest = nn.Sequential(*rest, nn.Flatten()).to(memory_format=torch.channels_last)
        try:
            with torch.no_grad():
                flat = self.rest(self.first(self.pre(torch.zeros(1, channels, h, w)))).shape[1]
        except RuntimeError as exc:  # torch's message speaks of kernels and padded sizes
            raise ValueError(
                f"an image observation of {h}x{w} pixels is too small for encoder_conv_architecture="
                f"{cfg.encoder_conv_architecture!r} ({exc})"
            ) from exc
        self.mlp = _mlp([flat, *cfg.encoder_conv_mlp_layers], activation)
        self.out_features = cfg.encoder_conv_mlp_layers[-1] if cfg.encoder_conv_mlp_layers else flat
        self.norm = RunningMeanStd((channels, 1, 1)) if cfg.normalize_input else None
        self.bf16 = cfg.encoder_bf16  # True, False or "auto" (decided per device in forward)

    def nchw(self, x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Raw pixels as ``dtype``, channels first, laid out channels-last (NHWC data permuted already is). A uint8
        pixel is exact in bfloat16, so casting first changes nothing that autocast's cast would; bf16 is cast first
        and then laid out (9 ms for 258 Atari frame stacks on one CPU thread, against 15 in one ``to`` and 20 laid
        out in uint8 first), float32 laid out first (13 ms against 14)."""
        if self.channels_last:
            return x.permute(0, 3, 1, 2).to(dtype)
        if dtype == torch.bfloat16:
            return x.to(dtype).contiguous(memory_format=torch.channels_last)
        return x.contiguous(memory_format=torch.channels_last).to(dtype)

    @torch.no_grad()
    def update_norm(self, images: torch.Tensor) -> None:
        """Fold the per-channel statistics of a batch of images (scaled: uint8 pixels to [0, 1]) in."""
        x = self.nchw(images) * self.input_scale
        self.norm.update(x.permute(0, 2, 3, 1).reshape(-1, x.shape[1], 1, 1))

    def folded_first(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The first convolution's weight and bias with the input's scale and normalisation folded in.

        input = x * scale + shift per channel, so conv(W, input) = conv(W * scale, x) + sum(W * shift)
        (exact without padding; a padded convolution pads the raw input with zeros, which on a board are
        empty cells); after space-to-depth, image channel c feeds the
        convolution's input channels c * k ... (c + 1) * k - 1 (k = in_channels / image channels).
        """
        weight, bias = self.first.weight, self.first.bias
        if self.norm is None:
            return weight * self.input_scale, bias
        std = (self.norm.var + self.norm.epsilon).sqrt().float().flatten()
        k = weight.shape[1] // std.numel()
        scale = (self.input_scale / std).repeat_interleave(k).view(1, -1, 1, 1)
        shift = (-self.norm.mean.float().flatten() / std).repeat_interleave(k).view(1, -1, 1, 1)
        folded_bias = (weight * shift).sum((1, 2, 3))
        return weight * scale, folded_bias if bias is None else bias + folded_bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.folded_first()
        bf16 = native_bf16(x.device.type) if self.bf16 == "auto" else self.bf16
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
            exact_in_bf16 = bf16 and x.dtype == torch.uint8  # else autocast rounds where the kernel allows
            x = self.nchw(x, torch.bfloat16 if exact_in_bf16 else torch.float32)
            x = conv2d(self.pre(x), weight, bias, self.first.stride, self.first.padding)
            return self.mlp(self.rest(x)).float()  # rest starts with the first convolution's activation


class VectorEncoder(nn.Module):
    """Box (flattened, optionally normalised with running statistics) or Discrete (one-hot) -> MLP features.

    ``polar``: the Box holds (distance, angle in radians), read as (distance, cos angle, sin angle).
    """

    def __init__(self, space: spaces.Space, cfg: TrainConfig, polar: bool = False) -> None:
        super().__init__()
        self.num_classes = int(space.n) if isinstance(space, spaces.Discrete) else 0
        if polar and (self.num_classes or tuple(space.shape) != (2,)):
            raise ValueError(f"a polar input is a Box of shape (2,) (distance, angle), got {space}")
        self.polar = polar
        size = 3 if polar else self.num_classes or int(np.prod(space.shape))
        self.scale = 1.0 / 255.0 if space.dtype == np.uint8 else 1.0
        self.norm = RunningMeanStd((size,)) if cfg.normalize_input and not self.num_classes else None
        self.mlp = _mlp([size, *cfg.encoder_mlp_layers], _ACTIVATIONS[cfg.nonlinearity])
        self.out_features = cfg.encoder_mlp_layers[-1] if cfg.encoder_mlp_layers else size

    def flat(self, x: torch.Tensor) -> torch.Tensor:
        if self.num_classes:
            return nn.functional.one_hot(x.long(), self.num_classes).float()
        if self.polar:
            x = x.float()
            return torch.stack([x[:, 0], torch.cos(x[:, 1]), torch.sin(x[:, 1])], dim=1)
        return x.reshape(x.shape[0], -1).float() * self.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flat(x)
        return self.mlp(self.norm.normalize(x) if self.norm is not None else x)


@dataclass
class ActState:
    """The recurrent state one caller of :meth:`ActorCritic.act` carries between its calls.

    A row per observation of the caller's batch; it starts (again) from zeros when the
    batch size changes.
    """

    hidden: torch.Tensor | None = None


class ActorCritic(nn.Module):
    """Encoders, an optional GRU core, an actor head and a critic head (predicting normalised returns).

    Recurrent state is reset wherever ``first`` is True: that observation starts an episode. With
    ``prev_action_embedding``, the state's last column holds the previous action (its index + 1; 0:
    none), which the caller of :meth:`step` records with :meth:`with_action` once it has chosen one.
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, cfg: TrainConfig) -> None:
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_spaces = observation_spaces(observation_space)
        unknown = sorted(set(cfg.unnormalized_inputs + cfg.polar_inputs) - set(self.obs_spaces))
        if unknown:
            raise ValueError(
                f"unnormalized_inputs and polar_inputs name entries {unknown} that the observation lacks; "
                f"it has {sorted(self.obs_spaces)}"
            )
        self.encoders = nn.ModuleDict()
        for key, space in self.obs_spaces.items():
            if key == ACTION_MASK_KEY:
                continue
            normalize = cfg.normalize_input and key not in cfg.unnormalized_inputs
            key_cfg = dataclasses.replace(cfg, normalize_input=normalize)
            polar = key in cfg.polar_inputs
            self.encoders[key] = (
                ConvEncoder(space.shape, key_cfg, space.dtype)
                if is_image(space) and not polar
                else VectorEncoder(space, key_cfg, polar=polar)
            )
        features = sum(e.out_features for e in self.encoders.values())
        self.prev_action: nn.Embedding | None = None
        if cfg.prev_action_embedding:
            if not isinstance(action_space, spaces.Discrete):
                raise ValueError(f"prev_action_embedding needs a Discrete action space, got {action_space}")
            self.prev_action = nn.Embedding(int(action_space.n) + 1, cfg.prev_action_embedding)
            features += cfg.prev_action_embedding
        self.core = nn.GRUCell(features, cfg.rnn_size) if cfg.use_rnn else None
        self.hidden_size = cfg.rnn_size if cfg.use_rnn else 0
        self.state_size = self.hidden_size + (self.prev_action is not None)
        core_out = cfg.rnn_size if cfg.use_rnn else features
        self.actor = ActionHead(action_space, core_out, self.obs_spaces.get(ACTION_MASK_KEY))
        self.critic = nn.Linear(core_out, 1)
        nn.init.orthogonal_(self.critic.weight, 1.0)
        nn.init.zeros_(self.critic.bias)
        self.returns_norm = RunningMeanStd((), clip=1e6) if cfg.normalize_returns else None
        self._default_act_state = ActState()
        encoded = sum(e.out_features for e in self.encoders.values())
        self.auxiliary = auxiliary_losses(
            encoded, core_out, action_space, cfg
        )  # last: the other layers' init as before
        self._auxiliary_terms: dict[str, torch.Tensor] = {}  # the last forward pass's, until the learner takes them

    # ----------------------------------------------------------------- learning interface
    @property
    def learns_from_trajectories(self) -> bool:
        """Whether learning needs whole trajectories: a recurrent state (core, previous action) or auxiliary losses,
        which read steps that follow one another."""
        return self.state_size > 0 or len(self.auxiliary) > 0

    def encode(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([enc(obs[key]) for key, enc in self.encoders.items()], dim=-1)

    def step(
        self, obs: Mapping[str, torch.Tensor], state: torch.Tensor, first: torch.Tensor
    ) -> tuple[ActionDistribution, torch.Tensor, torch.Tensor]:
        """One step for a batch: (action distribution, value in return units, next recurrent state)."""
        x = self.encode(obs)
        state = state * (~first).unsqueeze(-1).to(state.dtype)  # an episode starts afresh, with no previous action
        hidden, prev = state[:, : self.hidden_size], state[:, self.hidden_size :]
        if self.prev_action is not None:
            x = torch.cat([x, self.prev_action(prev[:, 0].long())], dim=-1)
        if self.core is not None:
            hidden = x = self.core(x, hidden)
        dist = self.actor(x, obs.get(ACTION_MASK_KEY))
        return dist, self.denormalize_value(self.critic(x).squeeze(-1)), torch.cat([hidden, prev], dim=-1)

    def with_action(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """:meth:`step`'s next state with the action chosen from its distribution recorded (the next step's
        previous action); the state as it is without ``prev_action_embedding``."""
        if self.prev_action is None:
            return state
        return torch.cat([state[:, : self.hidden_size], (action + 1).to(state.dtype).unsqueeze(-1)], dim=-1)

    def evaluate(
        self,
        obs: Mapping[str, torch.Tensor],
        first: torch.Tensor,
        state: torch.Tensor,
        steps: int,
        actions: torch.Tensor | None = None,
        valid: torch.Tensor | None = None,
    ) -> tuple[ActionDistribution, torch.Tensor]:
        """Whole trajectories ``[B, L, ...]`` from initial states ``[B, H]``: the module's forward pass.

        Returns the action distributions of the first ``steps`` steps (the last
        observation only bootstraps) and the normalised values of all ``L``. ``actions``
        (``[B, L - 1]``, those taken) are the previous actions that ``prev_action_embedding``
        reads. With ``valid`` (``[B, L - 1]``, the transitions) and the actions, the model's auxiliary losses
        (:mod:`~vecfast.trainers.algorithm.auxiliary`) are computed too, for :meth:`take_auxiliary_terms`.
        Learning goes through here (and ``__call__``), so that a DistributedDataParallel wrapper sees it.
        """
        return self(obs, first, state, steps, actions, valid)

    def forward(
        self,
        obs: Mapping[str, torch.Tensor],
        first: torch.Tensor,
        state: torch.Tensor,
        steps: int,
        actions: torch.Tensor | None = None,
        valid: torch.Tensor | None = None,
    ) -> tuple[ActionDistribution, torch.Tensor]:
        """See :meth:`evaluate`."""
        batch, length = first.shape
        x = encoded = self.encode({k: v.flatten(0, 1) for k, v in obs.items()}).view(batch, length, -1)
        if self.prev_action is not None:
            if actions is None:
                raise ValueError("prev_action_embedding: evaluate needs the actions taken")
            prev = torch.cat([state[:, self.hidden_size :].long(), actions[:, : length - 1].long() + 1], dim=1)
            x = torch.cat([x, self.prev_action(prev * ~first)], dim=-1)
        if self.core is not None:
            hidden = state[:, : self.hidden_size]
            keep = (~first).unsqueeze(-1).to(x.dtype)
            outputs = []
            for t in range(length):  # backpropagation through time over the whole trajectory
                hidden = self.core(x[:, t], hidden * keep[:, t])
                outputs.append(hidden)
            x = torch.stack(outputs, dim=1)
        self._auxiliary_terms = {}
        if len(self.auxiliary) and valid is not None and actions is not None:
            inputs = AuxiliaryInputs(encoded, x, actions[:, :steps], valid[:, :steps])
            self._auxiliary_terms = {name: loss(inputs) for name, loss in self.auxiliary.items()}
        mask = obs.get(ACTION_MASK_KEY)
        return self.actor(x[:, :steps], None if mask is None else mask[:, :steps]), self.critic(x).squeeze(-1)

    def take_auxiliary_terms(self) -> dict[str, torch.Tensor]:
        """The auxiliary losses of the last forward pass, by name (empty without them), which the model then lets go
        of: they are tensors of the autograd graph, which no copy or process boundary takes (a DD-PPO rank returns
        its policy to the caller)."""
        terms, self._auxiliary_terms = self._auxiliary_terms, {}
        return terms

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=device)

    @torch.no_grad()
    def update_normalizers(self, obs: Mapping[str, torch.Tensor]) -> None:
        for key, enc in self.encoders.items():
            if enc.norm is None:
                continue
            flat = obs[key].reshape(-1, *self.obs_spaces[key].shape)
            if isinstance(enc, ConvEncoder):
                perm = torch.randperm(flat.shape[0], device=flat.device)
                enc.update_norm(flat[perm[:64]])  # a random subset: the statistics of pixels settle fast
            else:
                enc.norm.update(enc.flat(flat))

    def normalize_value(self, v: torch.Tensor) -> torch.Tensor:
        return v if self.returns_norm is None else self.returns_norm.normalize(v)

    def denormalize_value(self, v: torch.Tensor) -> torch.Tensor:
        return v if self.returns_norm is None else self.returns_norm.denormalize(v)

    # ----------------------------------------------------------------- user interface
    @torch.no_grad()
    def act(
        self, obs: Any, deterministic: bool = False, episode_start: Any = None, state: ActState | None = None
    ) -> np.ndarray:
        """Actions for a batch of observations (numpy, as a vector env returns them), or the action for one.

        One observation or a batch is told apart by shape, against the observation space:
        an observation whose shape (every entry's, for a Dict space) equals the space's is
        one observation and gets one action (``episode_start``: a bool); with one more
        leading dimension it is a batch and gets a batch of actions. Any other shape raises
        ValueError. A recurrent policy keeps its state per batch row between calls (one
        observation is a batch of one); pass ``episode_start`` (bool per row) to restart it
        where an episode begins. Each caller that steps its own envs (two opponents sharing
        one model, say) passes its own ``state`` (an :class:`ActState`, updated in place);
        without one, calls share the model's default state.
        """
        device = next(self.parameters()).device
        entries = as_obs_dict(obs)
        missing = sorted(set(self.obs_spaces) - set(entries))
        if missing:
            raise ValueError(f"observation lacks entries {missing}; the policy takes {sorted(self.obs_spaces)}")
        entries = {key: entries[key] for key in self.obs_spaces}  # (others are not the policy's inputs)
        single = self._is_single(entries)
        if single:
            entries = {k: v[None] if hasattr(v, "shape") else np.asarray(v)[None] for k, v in entries.items()}
            if episode_start is not None:
                episode_start = np.asarray(episode_start, dtype=bool).reshape(1)
        actions = self._act_batch(
            obs_to_tensors(entries, device),
            deterministic,
            episode_start,
            self._default_act_state if state is None else state,
        )
        return actions[0] if single else actions

    def _is_single(self, obs: Mapping[str, Any]) -> bool:
        """Whether ``obs`` is one observation (True) or a batch (False), by comparing shapes with the space's."""
        kinds = set()
        for key, value in obs.items():
            shape, expected = tuple(getattr(value, "shape", np.shape(value))), tuple(self.obs_spaces[key].shape)
            if shape == expected:
                kinds.add("one")
            elif len(shape) == len(expected) + 1 and shape[1:] == expected:
                kinds.add(f"batch of {shape[0]}")
            else:
                where = "" if key == DEFAULT_KEY else f" entry {key!r}"
                raise ValueError(
                    f"observation{where} has shape {shape}: expected {expected} (one observation) "
                    f"or (batch, *{expected}) (a batch)"
                )
        if len(kinds) > 1:
            raise ValueError(f"observation entries disagree on the batch: {sorted(kinds)}")
        return kinds == {"one"}

    def _act_batch(
        self, tensors: dict[str, torch.Tensor], deterministic: bool, episode_start: Any, state: ActState
    ) -> np.ndarray:
        device = next(self.parameters()).device
        batch = next(iter(tensors.values())).shape[0]
        if state.hidden is None or state.hidden.shape[0] != batch:
            state.hidden = self.initial_state(batch, device)
        first = torch.zeros(batch, dtype=torch.bool, device=device)
        if episode_start is not None:
            first = torch.as_tensor(np.asarray(episode_start, dtype=bool), device=device)
        dist, _, hidden = self.step(tensors, state.hidden, first)
        action = dist.mode() if deterministic else dist.sample()
        state.hidden = self.with_action(hidden, action)
        return self.actor.to_env(action)


def obs_to_tensors(obs: Mapping[str, Any], device: torch.device | str) -> dict[str, torch.Tensor]:
    """numpy observation entries -> tensors (uint8 stays uint8, other floats become float32)."""
    out = {}
    for key, value in obs.items():
        t = torch.as_tensor(np.asarray(value))
        if t.is_floating_point() and t.dtype != torch.float32:
            t = t.float()
        out[key] = t.to(device, non_blocking=True)
    return out
