"""Action masks (PettingZoo's ``action_mask`` observation entry): illegal actions get probability 0 when
acting and learning, an all-zero mask leaves its row unmasked, and the mask is no input of the encoders."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from vecfast.trainers.algorithm.losses import ppo_loss
from vecfast.trainers.algorithm.models import ActorCritic, obs_to_tensors
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.config import TrainConfig

ACTION_SPACES = [spaces.Discrete(6), spaces.MultiDiscrete([3, 4])]


def masked_obs_space(action_space: spaces.Space) -> spaces.Dict:
    size = int(np.sum(action_space.nvec)) if isinstance(action_space, spaces.MultiDiscrete) else int(action_space.n)
    return spaces.Dict(
        {"observation": spaces.Box(-1, 1, (5,), np.float32), "action_mask": spaces.Box(0, 1, (size,), np.int8)}
    )


def small_config(**overrides: object) -> TrainConfig:
    base = {"use_rnn": False, "rnn_size": 16, "encoder_mlp_layers": (32,), "rollout": 4}
    return TrainConfig.from_overrides(**{**base, **overrides})


def random_masks(batch: int, nvec: list[int], generator: torch.Generator, empty_rows: int = 0) -> torch.Tensor:
    """Random 0/1 masks with at least one legal action per categorical; the first ``empty_rows`` rows all 0."""
    parts = []
    for n in nvec:
        part = (torch.rand(batch, n, generator=generator) < 0.4).to(torch.int8)
        part[torch.arange(batch), torch.randint(n, (batch,), generator=generator)] = 1
        parts.append(part)
    masks = torch.cat(parts, dim=1)
    masks[:empty_rows] = 0
    return masks


def prefer_last_actions(model: ActorCritic) -> None:
    """Unmasked, the head strongly prefers each categorical's highest action."""
    with torch.no_grad():
        model.actor.linear.bias.copy_(torch.cat([20.0 * torch.arange(n) for n in model.actor.nvec]))


def legal(actions: torch.Tensor, masks: torch.Tensor, nvec: list[int]) -> torch.Tensor:
    """Per row: whether every categorical's action is one its mask allows."""
    actions = actions.reshape(len(actions), -1)
    segments = masks.split(nvec, dim=1)
    return torch.stack([seg.gather(1, actions[:, [i]]).squeeze(1) == 1 for i, seg in enumerate(segments)], 1).all(1)


@pytest.mark.parametrize("action_space", ACTION_SPACES, ids=lambda s: type(s).__name__)
def test_illegal_actions_are_never_sampled_nor_chosen_deterministically(action_space: spaces.Space) -> None:
    torch.manual_seed(0)
    obs_space = masked_obs_space(action_space)
    model = ActorCritic(obs_space, action_space, small_config())
    prefer_last_actions(model)
    nvec, batch = model.actor.nvec, 10_000
    masks = random_masks(batch, nvec, torch.Generator().manual_seed(1))
    obs = {"observation": torch.rand(batch, 5) * 2 - 1, "action_mask": masks}
    with torch.no_grad():
        first = torch.ones(batch, dtype=torch.bool)
        dist, _, _ = model.step(obs, model.initial_state(batch), first)
        sampled, mode = dist.sample(), dist.mode()
    assert legal(sampled, masks, nvec).all()
    assert legal(mode, masks, nvec).all()
    # the deterministic policy takes the highest legal action, the one the bias prefers among them
    highest = torch.stack([(seg * torch.arange(seg.shape[1])).argmax(1) for seg in masks.split(nvec, dim=1)], 1)
    torch.testing.assert_close(mode.reshape(batch, -1), highest)
    # the mask only removes actions: the legal ones keep their unmasked odds
    with torch.no_grad():
        unmasked, _, _ = model.step({**obs, "action_mask": torch.ones_like(masks)}, model.initial_state(batch), first)
    for d, u, seg in zip(dist.dists, unmasked.dists, masks.split(nvec, dim=1), strict=True):
        expected = u.probs * seg / (u.probs * seg).sum(1, keepdim=True)
        torch.testing.assert_close(d.probs, expected)


def test_an_all_zero_mask_leaves_its_row_unmasked_and_finite() -> None:
    """An ended PettingZoo agent observes an all-zero mask: its row acts as if unmasked, never NaN."""
    torch.manual_seed(0)
    action_space = spaces.MultiDiscrete([3, 4])
    model = ActorCritic(masked_obs_space(action_space), action_space, small_config())
    masks = torch.tensor([[0] * 7, [0, 0, 0, 0, 1, 0, 0], [1] * 7], dtype=torch.int8)
    obs = {"observation": torch.zeros(3, 5), "action_mask": masks}
    with torch.no_grad():
        dist, _, _ = model.step(obs, model.initial_state(3), torch.ones(3, dtype=torch.bool))
    for d in dist.dists:
        torch.testing.assert_close(d.probs[0], d.probs[2])  # same features: all-zero mask == all-one mask
    assert torch.isfinite(dist.entropy()).all() and torch.isfinite(dist.log_prob(dist.sample())).all()
    assert dist.dists[0].probs[1].tolist() == pytest.approx([1 / 3] * 3)  # an empty dimension is unmasked too
    assert dist.dists[1].probs[1].tolist() == [0.0, 1.0, 0.0, 0.0]


def test_the_mask_is_no_input_and_input_normalisation_leaves_it_alone() -> None:
    model = ActorCritic(masked_obs_space(spaces.Discrete(6)), spaces.Discrete(6), small_config(normalize_input=True))
    assert list(model.encoders) == ["observation"]
    obs = {"observation": torch.rand(8, 5), "action_mask": torch.ones(8, 6, dtype=torch.int8)}
    model.update_normalizers(obs)  # would fail on an entry without an encoder
    assert [name for name, _ in model.named_buffers() if "action_mask" in name] == []


def test_masks_are_only_accepted_where_they_mean_something() -> None:
    box_actions = spaces.Box(-1, 1, (6,), np.float32)
    with pytest.raises(ValueError, match="action mask needs a Discrete or MultiDiscrete action space"):
        ActorCritic(masked_obs_space(spaces.Discrete(6)), box_actions, small_config())
    with pytest.raises(ValueError, match=r"action mask must be a Box of shape \(7,\)"):
        ActorCritic(masked_obs_space(spaces.Discrete(6)), spaces.Discrete(7), small_config())
    discrete_mask = spaces.Dict({"observation": spaces.Box(-1, 1, (5,)), "action_mask": spaces.Discrete(6)})
    with pytest.raises(ValueError, match="action mask must be a Box"):
        ActorCritic(discrete_mask, spaces.Discrete(6), small_config())


@pytest.mark.parametrize("use_rnn", [False, True])
def test_ppo_loss_and_gradients_stay_finite_with_masks_stored_in_the_rollout(use_rnn: bool) -> None:
    """Learning recomputes log-probabilities and entropy from the stored observations, mask included:
    it must agree with acting, give illegal actions probability 0, and keep the loss and gradients finite
    even where the unmasked policy is all but certain of an illegal action."""
    torch.manual_seed(0)
    action_space = spaces.Discrete(6)
    cfg = small_config(use_rnn=use_rnn, exploration_loss_coeff=0.01, normalize_returns=False)
    model = ActorCritic(masked_obs_space(action_space), action_space, cfg)
    prefer_last_actions(model)
    num, rollout = 4, 6
    traj = Trajectories.allocate(model, num, rollout)
    masks = random_masks(num * (rollout + 1), [6], torch.Generator().manual_seed(2), empty_rows=3)
    masks = masks.view(num, rollout + 1, 6)
    traj.first[:, 0] = True
    traj.valid[:] = True
    state = traj.initial_state
    with torch.no_grad():
        for t in range(rollout + 1):
            obs = obs_to_tensors({"observation": np.random.rand(num, 5), "action_mask": masks[:, t].numpy()}, "cpu")
            dist, value, state = model.step(obs, state, traj.first[:, t])
            for key, value_t in obs.items():
                traj.obs[key][:, t] = value_t
            traj.values[:, t] = value
            if t < rollout:
                traj.actions[:, t] = dist.sample()
                traj.log_probs[:, t] = dist.log_prob(traj.actions[:, t])
    assert torch.equal(traj.obs["action_mask"], masks.to(traj.obs["action_mask"].dtype))  # stored losslessly
    dist, values = model.evaluate(traj.obs, traj.first, traj.initial_state, rollout)
    torch.testing.assert_close(dist.log_prob(traj.actions), traj.log_probs)
    illegal = masks[:, :rollout].bool().logical_not() & masks[:, :rollout].bool().any(-1, keepdim=True)
    assert illegal.any() and (dist.dists[0].probs[illegal] == 0).all()
    advantages = torch.randn(num, rollout)
    out = ppo_loss(
        model, dist, values[:, :-1], traj, advantages, torch.randn(num, rollout), cfg, cfg.exploration_loss_coeff
    )
    assert np.isfinite([out.loss.item(), out.policy_loss, out.value_loss, out.entropy, out.kl]).all()
    out.loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_a_model_plays_200_games_of_connect_four_without_an_illegal_move() -> None:
    """PettingZoo's connect four ends the game with the mover losing (terminated and truncated, reward -1)
    on an illegal move; the policy strongly prefers the middle column, so it fills up early in every game."""
    connect_four_v3 = pytest.importorskip("pettingzoo.classic.connect_four_v3")
    env = connect_four_v3.env()
    torch.manual_seed(0)
    model = ActorCritic(env.observation_space("player_0"), env.action_space("player_0"), small_config())
    with torch.no_grad():
        model.actor.linear.bias[3] = 20.0
    for game in range(200):
        env.reset(seed=game)
        returns = dict.fromkeys(env.agents, 0.0)
        for agent in env.agent_iter():
            obs, reward, terminated, truncated, _ = env.last()
            returns[agent] += reward
            if terminated or truncated:
                assert not truncated, f"game {game}: illegal move"
                env.step(None)
                continue
            action = int(model.act(obs, deterministic=game % 10 == 0))
            assert obs["action_mask"][action] == 1, f"game {game}: illegal column {action}, mask {obs['action_mask']}"
            env.step(action)
        assert sorted(returns.values()) in ([-1.0, 1.0], [0.0, 0.0]), f"game {game}: {returns}"
    env.close()
