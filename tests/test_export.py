"""A run's policy exported (``vecfast export``) and run by onnxruntime and ``torch.jit.load``: the exported file
chooses the policy's own deterministic actions on real observations, for an MLP (CartPole, PPO), a conv + GRU
Doom policy (APPO) and a connect-four policy that honours its action mask."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from pettingzoo.classic import connect_four_v3

from vecfast.cli import main
from vecfast.trainers import load_policy, train
from vecfast.trainers.algorithm.models import obs_to_tensors
from vecfast.trainers.run.evaluation import run_env
from vecfast.trainers.tools.export import agreement, export_run, load_exported

TINY = {"num_workers": 2, "num_envs_per_worker": 2, "rollout": 16, "batch_size": 64, "seed": 0}


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("export") / "cartpole"
    train("CartPole-v1", algo="ppo", total_env_steps=2048, run_dir=run_dir, use_rnn=False, **TINY)
    return run_dir


@pytest.fixture(scope="module")
def doom(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("export") / "doom"
    # float32 throughout (an exported graph is; bf16 would move the states compared below by ~0.03)
    train("vecfast/DoomBasic-v0", algo="appo", total_env_steps=512, run_dir=run_dir, rnn_size=64,
          encoder_conv_mlp_layers=(64,), encoder_bf16=False, **TINY)  # fmt: skip
    return run_dir


def io_names(path: Path) -> tuple[list[str], list[str]]:
    session = onnxruntime.InferenceSession(str(path))
    return [i.name for i in session.get_inputs()], [o.name for o in session.get_outputs()]


@pytest.mark.parametrize("fmt,suffix", [("onnx", ".onnx"), ("torchscript", ".pt")])
def test_an_mlp_policy_exports_its_deterministic_actions(cartpole: Path, tmp_path: Path, fmt, suffix) -> None:
    out = tmp_path / f"policy{suffix}"
    model = export_run(cartpole, out, fmt)
    if fmt == "onnx":
        assert io_names(out) == (["obs"], ["action"])
    env = run_env(cartpole).build(4)
    try:
        result = agreement(model, out, env, 512)
    finally:
        env.close()
    assert result.observations == 512 and result.fraction >= 0.99


@pytest.mark.parametrize("fmt,suffix", [("onnx", ".onnx"), ("torchscript", ".pt")])
def test_a_recurrent_conv_policy_carries_its_state_through_state_in_and_out(doom: Path, tmp_path, fmt, suffix):
    out = tmp_path / f"policy{suffix}"
    model = export_run(doom, out, fmt)
    if fmt == "onnx":
        assert io_names(out) == (["measurements", "screen", "state_in"], ["action", "state_out"])
    env = run_env(doom).build(4)
    try:
        result = agreement(model, out, env, 256)
    finally:
        env.close()
    assert result.fraction >= 0.99
    # the state is what the model carries: zeros start an episode, state_out continues it
    exported = load_exported(out)
    obs = {k: np.stack([model.obs_spaces[k].sample() for _ in range(3)]) for k in ("measurements", "screen")}
    state = np.zeros((3, model.state_size), np.float32)
    with torch.no_grad():
        _, _, expected = model.step(
            {k: torch.as_tensor(v) for k, v in obs.items()}, torch.zeros(3, 64), torch.ones(3, dtype=torch.bool)
        )
    _, state_out = exported(obs, state)
    np.testing.assert_allclose(state_out, expected.numpy(), atol=1e-4)


def masked_logits(model, batch: dict[str, np.ndarray], bf16: bool) -> torch.Tensor:
    """``model``'s action logits (the mask applied) with its conv encoder in float32 or under bf16 autocast."""
    model = copy.deepcopy(model)
    for encoder in model.encoders.values():
        encoder.bf16 = bf16
    n = len(batch["action_mask"])
    with torch.no_grad():
        dist, _, _ = model.step(obs_to_tensors(batch, "cpu"), torch.zeros(n, 0), torch.ones(n, dtype=torch.bool))
    return dist.params


def test_a_masked_policy_never_exports_an_illegal_move(tmp_path: Path) -> None:
    """The contract, on every host: the exported graph (float32) chooses exactly what the policy chooses in
    float32; the policy under bf16 autocast (its training-time speed-up, on where the CPU computes bf16) may
    choose otherwise only at a near-tie, two actions whose float32 logits are within bf16's rounding; the mask
    is always honoured."""
    run_dir = tmp_path / "c4"
    train(connect_four_v3, algo="ppo", total_env_steps=512, run_dir=run_dir, use_rnn=False, **TINY)
    out = export_run(run_dir, tmp_path / "c4.onnx")  # returns the policy
    exported = load_exported(tmp_path / "c4.onnx")
    assert io_names(tmp_path / "c4.onnx") == (["action_mask", "observation"], ["action"])  # the Dict space's order
    rng = np.random.default_rng(0)
    observations = []
    game = connect_four_v3.env()
    for episode in range(20):  # real positions: random legal moves from the start
        game.reset(seed=episode)
        for _agent in game.agent_iter():
            obs, _, terminated, truncated, _ = game.last()
            if terminated or truncated:
                game.step(None)
                continue
            observations.append(obs)
            game.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    batch = {key: np.stack([o[key] for o in observations]) for key in ("observation", "action_mask")}
    actions, _ = exported(batch, None)
    float32, bf16 = masked_logits(out, batch, bf16=False), masked_logits(out, batch, bf16=True)
    np.testing.assert_array_equal(actions, float32.argmax(-1).numpy())  # exact in float32
    bf16_actions = bf16.argmax(-1)
    rows = torch.arange(len(actions))
    gap = float32[rows, float32.argmax(-1)] - float32[rows, bf16_actions]  # 0 where they agree
    tolerance = 2**-7 * (1 + float32.masked_fill(float32 < -1e30, 0).abs().amax(-1))  # bf16 keeps 8 bits
    assert (gap <= tolerance).all(), f"bf16 chose otherwise beyond a near-tie: gaps {gap[gap > tolerance]}"
    legal = batch["action_mask"].astype(bool)
    assert legal[rows, actions].all() and legal[rows, bf16_actions].all()  # legal, every one
    assert legal[rows, out.act(batch, deterministic=True)].all()  # and as the policy acts on this host


def test_vecfast_export_writes_and_checks_the_file(cartpole: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cli.pt"
    assert main(["export", str(cartpole), "--format", "torchscript", "--out", str(out), "--check", "32"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out} (torchscript)" in printed and "for 32 of 32 observations" in printed
    assert torch.jit.load(str(out))(torch.zeros(1, 4)).shape == (1,)
    assert main(["export", str(cartpole), "--policy", "3", "--out", str(tmp_path / "x.onnx")]) == 2
    assert "policy=3: the run has policies 0 to 0" in capsys.readouterr().err
    assert load_policy(cartpole) is not None


def test_the_agreement_check_restarts_episodes_where_training_does(cartpole: Path, tmp_path: Path, monkeypatch):
    """Under gymnasium's NEXT_STEP autoreset the observation an episode ends with is still its own; the next one,
    after the reset step, starts the next episode (EpisodeBoundaries, the rule training and evaluation share). The
    agreement check marked the ending observation as a first one, a step early."""
    import gymnasium as gym

    out = tmp_path / "policy.onnx"
    model = export_run(cartpole, out, "onnx")
    starts: list[list[bool]] = []
    act = model.act

    def recording(batch, **kwargs):
        starts.append(np.asarray(kwargs["episode_start"]).tolist())
        return act(batch, **kwargs)

    monkeypatch.setattr(model, "act", recording)
    env = gym.make_vec("vecfast/Timed-v0", num_envs=2, vectorization_mode="sync", step_seconds=0.0, obs_size=4,
                       num_actions=2, episode_steps=3)  # fmt: skip
    try:
        agreement(model, out, env, 2 * 9)
    finally:
        env.close()
    # 3 steps, then the step that only resets: observations 0 and 4 and 8 start episodes
    assert [row[0] for row in starts] == [True, False, False, False, True, False, False, False, True]
