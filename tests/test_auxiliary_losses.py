"""Auxiliary losses (Ye et al. 2020): inverse dynamics and CPC|A learn what they should from trajectories, skip the
steps that are no transitions, stay out of a model that does not ask for them, and train under every scheme."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from vecfast import evaluate, train
from vecfast.trainers.algorithm.auxiliary import CPCA, AuxiliaryInputs, InverseDynamics
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig

ACTIONS = spaces.Discrete(4)


def walks(batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random walks on a ring of 8 cells, one-hot observed: action a moves by a - 1 (a in 0..3), so the next cell
    follows from the cell and the action, and the action from the two cells (but action 1, which stays)."""
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 4, (batch, length - 1))
    cells = np.zeros((batch, length), np.int64)
    cells[:, 0] = rng.integers(0, 8, batch)
    for t in range(length - 1):
        cells[:, t + 1] = (cells[:, t] + actions[:, t] - 1) % 8
    return torch.nn.functional.one_hot(torch.from_numpy(cells), 8).float(), torch.from_numpy(actions)


def fit(loss: torch.nn.Module, encoder: torch.nn.Module, steps: int = 300) -> tuple[float, float]:
    """The loss before and after ``steps`` Adam steps on fresh walks (the encoder learns with it)."""
    optimiser = torch.optim.Adam([*loss.parameters(), *encoder.parameters()], lr=3e-3)
    history = []
    for step in range(steps):
        obs, actions = walks(32, 9, step)
        encoded = encoder(obs)
        value = loss(AuxiliaryInputs(encoded, encoded, actions, torch.ones_like(actions, dtype=torch.bool)))
        optimiser.zero_grad()
        value.backward()
        optimiser.step()
        history.append(value.item())
    return float(np.mean(history[:10])), float(np.mean(history[-20:]))


def test_inverse_dynamics_learns_the_action_between_two_observations() -> None:
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU())
    cfg = TrainConfig.from_overrides(aux_inverse_dynamics_coeff=1.0)
    before, after = fit(InverseDynamics(32, 32, ACTIONS, cfg), encoder)
    assert before == pytest.approx(np.log(4), abs=0.15) and after < 0.15  # from chance to nearly every action


def test_cpca_tells_the_observations_its_actions_lead_to_from_others() -> None:
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU())
    cfg = TrainConfig.from_overrides(aux_cpca_coeff=1.0, aux_cpca_steps=3)
    before, after = fit(CPCA(32, 32, ACTIONS, cfg), encoder, steps=400)
    assert before == pytest.approx(np.log(2), abs=0.1) and after < 0.25  # 1 in 8 negatives is the same cell


def test_steps_that_are_no_transitions_teach_nothing() -> None:
    """A reset step (valid False) sits between two episodes: neither loss may learn across it."""
    torch.manual_seed(0)
    cfg = TrainConfig.from_overrides(aux_cpca_coeff=1.0, aux_inverse_dynamics_coeff=1.0)
    obs, actions = walks(4, 6, 0)
    encoded = obs.clone().requires_grad_(True)
    for loss in (InverseDynamics(8, 8, ACTIONS, cfg), CPCA(8, 8, ACTIONS, cfg)):
        none = loss(AuxiliaryInputs(encoded, encoded, actions, torch.zeros_like(actions, dtype=torch.bool)))
        none.backward()
        assert none.item() == 0.0 and all(p.grad is not None and not p.grad.any() for p in loss.parameters())
    valid = torch.ones_like(actions, dtype=torch.bool)
    valid[:, 2] = False  # the step from obs 2 to obs 3 only reset the env: its action meant nothing
    other = actions.clone()
    other[:, 2] = (actions[:, 2] + 1) % 4
    for loss in (InverseDynamics(8, 8, ACTIONS, cfg), CPCA(8, 8, ACTIONS, cfg)):
        values = []
        for taken in (actions, other):
            torch.manual_seed(1)  # CPC|A's negatives
            values.append(loss(AuxiliaryInputs(encoded.detach(), encoded.detach(), taken, valid)).item())
        assert values[0] == values[1] != 0.0


def test_a_model_without_auxiliary_losses_has_no_trace_of_them() -> None:
    """Off (weight 0, the default), a loss is not built: the same parameters, drawn from the same random numbers."""
    space = spaces.Box(-1, 1, (8,), np.float32)
    torch.manual_seed(0)
    plain = ActorCritic(space, ACTIONS, TrainConfig.from_overrides(use_rnn=True, rnn_size=16))
    torch.manual_seed(0)
    with_aux = ActorCritic(space, ACTIONS, TrainConfig.from_overrides(use_rnn=True, rnn_size=16, aux_cpca_coeff=0.1))
    assert not any(key.startswith("auxiliary") for key in plain.state_dict())
    shared = {k: v for k, v in with_aux.state_dict().items() if not k.startswith("auxiliary")}
    assert shared.keys() == plain.state_dict().keys()
    assert all(torch.equal(shared[k], v) for k, v in plain.state_dict().items())
    with pytest.raises(ValueError, match="aux_cpca_steps"):
        TrainConfig.from_overrides(aux_cpca_steps=0)
    with pytest.raises(ValueError, match="Discrete or MultiDiscrete"):
        ActorCritic(space, spaces.Box(-1, 1, (2,)), TrainConfig.from_overrides(aux_inverse_dynamics_coeff=0.1))


@pytest.mark.parametrize("algo", ["ppo", "appo", pytest.param("ddppo", marks=pytest.mark.slow)])  # ranks
def test_the_terms_are_learned_and_logged_under_each_scheme(tmp_path: Path, algo: str) -> None:
    """Under DD-PPO in 2 ranks: the ranks' results cross back to the caller (old behaviour: the model kept its last
    terms, tensors of the autograd graph, which no process boundary takes, so a rank's result failed to return)."""
    keys = {"num_workers": 1, "num_envs_per_worker": 4, "rollout": 16, "batch_size": 64, "rnn_size": 16, "seed": 0}
    keys |= {"num_processes": 2} if algo == "ddppo" else {}
    run_dir = tmp_path / "run"
    result = train("CartPole-v1", algo=algo, total_env_steps=3_000, run_dir=run_dir, use_rnn=True, aux_cpca_coeff=0.1,
                   aux_inverse_dynamics_coeff=0.1, print_every_sec=None, **keys)  # fmt: skip
    copy.deepcopy(result.policy)  # holds no tensor of a graph
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for term in ("aux_cpca", "aux_inverse_dynamics"):
        values = [line[term] for line in lines if term in line]
        assert values and all(np.isfinite(values)) and values[-1] < values[0]
    assert evaluate(run_dir, episodes=2).episodes == 2  # the run's policy loads, its auxiliary heads with it
