"""A run's policy as a file that runs without vecfast: ONNX (onnxruntime, any language) or TorchScript.

The exported graph takes the observation's entries by name (``obs`` for a plain observation, the Dict's keys
otherwise: an action mask included) and, for a recurrent policy, ``state_in`` (``[batch, state_size]`` float32:
zeros start an episode); it returns ``action``, the most likely action as the env takes it (the action mask
honoured, offsets added, Box actions clipped to the bounds) and, if recurrent, ``state_out`` (the next call's
``state_in``). Images go in as the env returns them (uint8): the normalisation is in the graph. The batch size is
free. Everything runs in float32 (the encoder's bf16 autocast is a training-time speed-up).

ONNX goes through torch's own exporter (``torch.export``, then onnxscript: the ``export`` extra). TorchScript
is traced with ``torch.jit.trace``, which torch deprecates; ``torch.jit.load`` runs it.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from torch import nn

from vecfast.extras import require
from vecfast.trainers import entry_defaults
from vecfast.trainers.algorithm.models import ActorCritic, ActState, ConvEncoder, as_obs_dict, obs_to_tensors
from vecfast.trainers.run.launch import private_inductor_cache
from vecfast.trainers.run.policies import load_policy
from vecfast.trainers.sampling.episodes import EpisodeBoundaries

FORMATS = ("onnx", "torchscript")
ONNX_OPSET = 18


class DeterministicPolicy(nn.Module):
    """``forward(*entries[, state_in]) -> action[, state_out]``: ``model``'s most likely action (see the module)."""

    def __init__(self, model: ActorCritic) -> None:
        super().__init__()
        self.model = copy.deepcopy(model).float().eval().cpu()
        for encoder in self.model.encoders.values():
            if isinstance(encoder, ConvEncoder):
                encoder.bf16 = False
        self.entries = list(self.model.obs_spaces)
        self.recurrent = self.model.state_size > 0
        self.input_names = [*self.entries, *(["state_in"] if self.recurrent else [])]
        self.output_names = ["action", *(["state_out"] if self.recurrent else [])]

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        obs = dict(zip(self.entries, inputs, strict=False))
        batch = inputs[0].shape[0]
        state = inputs[-1] if self.recurrent else inputs[0].new_zeros((batch, 0), dtype=torch.float32)
        first = torch.zeros(batch, dtype=torch.bool)  # zeros in state_in are a fresh episode's state already
        dist, _, state = self.model.step(obs, state, first)
        action = dist.most_likely()
        env_action = self.model.actor.env_actions(action)
        return (env_action, self.model.with_action(state, action)) if self.recurrent else env_action

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        """Inputs of the right shapes and dtypes: samples of the observation space, and a zero state."""
        spaces = self.model.obs_spaces
        samples = {key: np.stack([spaces[key].sample() for _ in range(batch)]) for key in self.entries}
        tensors = obs_to_tensors(samples, "cpu")
        state = [torch.zeros(batch, self.model.state_size)] if self.recurrent else []
        return (*[tensors[key] for key in self.entries], *state)


def export_policy(model: ActorCritic, out: str | os.PathLike, fmt: str = "onnx") -> Path:
    """Write ``model`` as ``fmt`` (``"onnx"`` or ``"torchscript"``) to ``out``; the path written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    policy = DeterministicPolicy(model)
    inputs = policy.example_inputs()
    onnx_log = logging.getLogger("torch.onnx")  # it logs which optional torch packages it skips
    level = onnx_log.level
    onnx_log.setLevel(logging.ERROR)
    try:
        with private_inductor_cache():  # torch.export imports dynamo, which makes inductor's cache directory
            _write(policy, inputs, out, fmt)
    finally:
        onnx_log.setLevel(level)
    return out


def _write(policy: DeterministicPolicy, inputs: tuple[torch.Tensor, ...], out: Path, fmt: str) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's notes on its own tracers and exporters, not the user's to act on
        if fmt == "torchscript":
            torch.jit.trace(policy, inputs, check_trace=False).save(str(out))
            return
        require("onnxscript", "ONNX export")  # torch's exporter (torch.export, then onnxscript)
        batch = torch.export.Dim("batch")
        torch.onnx.export(
            policy,
            inputs,
            str(out),
            input_names=policy.input_names,
            output_names=policy.output_names,
            dynamic_shapes=(tuple({0: batch} for _ in inputs),),  # forward(*inputs): one variadic argument
            opset_version=ONNX_OPSET,
            dynamo=True,
            verbose=False,
            external_data=False,  # one file: the weights inline (a policy is far below protobuf's 2 GB)
        )


def export_run(
    run_dir: str | os.PathLike,
    out: str | os.PathLike,
    fmt: str = entry_defaults.EXPORT_FORMAT,
    which: str = entry_defaults.CHECKPOINT,
    policy: int = 0,
) -> ActorCritic:
    """Export the policy of a run directory (its checkpoint ``which``; ``policy``: a population's member) to
    ``out``; the policy exported."""
    model = load_policy(run_dir, which, policy)
    export_policy(model, out, fmt)
    return model


Actions = tuple[np.ndarray, np.ndarray | None]  # the actions, and the next recurrent state (None: not recurrent)
ExportedPolicy = Callable[[dict[str, np.ndarray], np.ndarray | None], Actions]


def load_exported(path: str | os.PathLike) -> ExportedPolicy:
    """An exported policy (``.onnx`` through onnxruntime, else TorchScript) as ``(entries, state) -> (action,
    state)``, numpy in and out (``state`` None for a policy that is not recurrent)."""
    path = Path(path)
    if path.suffix == ".onnx":
        session = require("onnxruntime", "running an ONNX policy").InferenceSession(str(path))
        names = [i.name for i in session.get_inputs()]

        def run_onnx(entries: dict[str, np.ndarray], state: np.ndarray | None) -> Actions:
            feed = {name: entries[name] for name in names if name != "state_in"}
            if state is not None:
                feed["state_in"] = state.astype(np.float32)
            outputs = session.run(None, feed)
            return outputs[0], outputs[1] if len(outputs) > 1 else None

        return run_onnx
    module = torch.jit.load(str(path))

    def run_torchscript(
        entries: dict[str, np.ndarray], state: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        inputs = [*obs_to_tensors(entries, "cpu").values(), *([torch.as_tensor(state)] if state is not None else [])]
        with torch.no_grad():
            outputs = module(*inputs)
        if isinstance(outputs, tuple):
            return outputs[0].numpy(), outputs[1].numpy()
        return outputs.numpy(), None

    return run_torchscript


@dataclass(frozen=True)
class Agreement:
    """How often an exported policy chose the policy's own deterministic action."""

    equal: int
    observations: int

    @property
    def fraction(self) -> float:
        return self.equal / self.observations


def agreement(
    model: ActorCritic, path: str | os.PathLike, env: VectorEnv, observations: int, seed: int = 0
) -> Agreement:
    """Step ``env`` with ``model``'s deterministic actions for ``observations`` observations, giving each to the
    exported policy at ``path`` too (its recurrent state carried beside the model's, both restarted where an
    episode ended); how many actions agree."""
    exported = load_exported(path)
    entries = list(model.obs_spaces)
    obs, _ = env.reset(seed=seed)
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    boundaries = EpisodeBoundaries(env.num_envs, mode)  # where training restarts a policy's state
    state = ActState()
    exported_state = np.zeros((env.num_envs, model.state_size), np.float32) if model.state_size else None
    equal = seen = 0
    while seen < observations:
        batch = {key: np.asarray(as_obs_dict(obs)[key]) for key in entries}
        first = boundaries.first.numpy().copy()
        actions = model.act(batch, deterministic=True, episode_start=first, state=state)
        if exported_state is not None:
            exported_state[first] = 0.0
        exported_actions, exported_state = exported(batch, exported_state)
        same = (np.asarray(actions) == exported_actions).reshape(env.num_envs, -1).all(axis=1)
        take = min(env.num_envs, observations - seen)
        equal, seen = equal + int(same[:take].sum()), seen + take
        valid = boundaries.valid.clone()
        obs, _, terminated, truncated, _ = env.step(actions)
        boundaries.stepped(slice(None), valid, torch.from_numpy(np.logical_or(terminated, truncated)))
    return Agreement(equal, seen)
