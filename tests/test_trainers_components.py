"""The trainers' components: model (encoders, GRU core, heads), normalisers, storage, advantage estimators,
the PPO algorithm."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from vecfast.trainers.algorithm.losses import gae, ppo_loss, vtrace
from vecfast.trainers.algorithm.models import ActorCritic, ActState, obs_to_tensors
from vecfast.trainers.algorithm.normalize import RunningMeanStd
from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.config import TrainConfig

DICT_OBS = spaces.Dict(
    {
        "screen": spaces.Box(0, 255, (3, 36, 64), np.uint8),
        "measurements": spaces.Box(-np.inf, np.inf, (2,), np.float32),
    }
)
ACTION_SPACES = [
    spaces.Discrete(5, start=-2),
    spaces.MultiDiscrete([3, 4, 2]),
    spaces.Box(-1.0, 2.0, (3,), np.float32),
]


def small_config(**overrides: object) -> TrainConfig:
    base = {"rnn_size": 16, "encoder_conv_mlp_layers": (32,), "encoder_mlp_layers": (16,), "rollout": 4}
    return TrainConfig.from_overrides(**{**base, **overrides})


def sample_obs(space: spaces.Space, batch: int, seed: int) -> dict[str, np.ndarray]:
    space.seed(seed)
    samples = [space.sample() for _ in range(batch)]
    return {k: np.stack([s[k] for s in samples]) for k in space.spaces}


@pytest.mark.parametrize("action_space", ACTION_SPACES, ids=lambda s: type(s).__name__)
def test_act_gives_valid_actions_for_dict_observations(action_space: spaces.Space) -> None:
    torch.manual_seed(0)
    model = ActorCritic(DICT_OBS, action_space, small_config())
    obs = sample_obs(DICT_OBS, 6, seed=0)
    batch_space = spaces.Tuple([action_space] * 6)
    for deterministic in (False, True):
        actions = model.act(obs, deterministic=deterministic)
        assert actions.shape == (6, *action_space.shape)
        assert batch_space.contains(tuple(actions)), actions
    # a deterministic policy is a function of the observation (the recurrent state restarted)
    start = np.ones(6, dtype=bool)
    np.testing.assert_array_equal(
        model.act(obs, deterministic=True, episode_start=start), model.act(obs, deterministic=True, episode_start=start)
    )


def test_callers_with_their_own_act_state_do_not_share_recurrent_state() -> None:
    """Two opponents of one model, same batch size: each one's actions are those it gets acting alone."""
    torch.manual_seed(0)
    model = ActorCritic(DICT_OBS, spaces.Discrete(4), small_config())
    alone = copy.deepcopy(model)
    first = np.ones(5, dtype=bool)
    mine, theirs = ActState(), ActState()
    for t in range(4):
        obs, other = sample_obs(DICT_OBS, 5, seed=t), sample_obs(DICT_OBS, 5, seed=100 + t)
        start = first if t == 0 else None
        expected = alone.act(obs, deterministic=True, episode_start=start)
        model.act(other, deterministic=True, episode_start=start, state=theirs)
        np.testing.assert_array_equal(model.act(obs, deterministic=True, episode_start=start, state=mine), expected)
    assert mine.hidden is not None and not torch.equal(mine.hidden, theirs.hidden)


def test_box_channels_last_images_and_discrete_observations() -> None:
    space = spaces.Dict({"rgb": spaces.Box(0, 255, (36, 64, 3), np.uint8), "room": spaces.Discrete(4)})
    model = ActorCritic(space, spaces.Discrete(2), small_config(use_rnn=False))
    assert model.encoders["rgb"].channels_last
    actions = model.act(sample_obs(space, 3, seed=1))
    assert actions.shape == (3,) and set(actions.tolist()) <= {0, 1}


def test_unsupported_spaces_are_rejected_with_their_name() -> None:
    with pytest.raises(TypeError, match="'text'"):
        ActorCritic(spaces.Dict({"text": spaces.Text(5)}), spaces.Discrete(2), small_config())
    with pytest.raises(TypeError, match="unsupported action space"):
        ActorCritic(DICT_OBS, spaces.MultiBinary(3), small_config())


@pytest.mark.parametrize("action_space", ACTION_SPACES, ids=lambda s: type(s).__name__)
def test_evaluate_over_trajectories_matches_stepping(action_space: spaces.Space) -> None:
    """BPTT over a stored trajectory reproduces, step by step, what the acting policy computed,
    including recurrent-state resets at episode starts."""
    torch.manual_seed(0)
    model = ActorCritic(DICT_OBS, action_space, small_config(normalize_returns=False))
    batch, length = 3, 6
    obs = [obs_to_tensors(sample_obs(DICT_OBS, batch, seed=t), "cpu") for t in range(length)]
    first = torch.zeros(batch, length, dtype=torch.bool)
    first[0, 2] = first[1, 0] = first[2, 4] = True
    state = torch.randn(batch, model.state_size)
    h = state
    log_probs, values, actions = [], [], []
    with torch.no_grad():
        for t in range(length):
            dist, value, h = model.step(obs[t], h, first[:, t])
            a = dist.sample()
            actions.append(a)
            log_probs.append(dist.log_prob(a))
            values.append(value)
        stacked = {k: torch.stack([o[k] for o in obs], dim=1) for k in obs[0]}
        dist, new_values = model.evaluate(stacked, first, state, length)
    torch.testing.assert_close(dist.log_prob(torch.stack(actions, 1)), torch.stack(log_probs, 1))
    torch.testing.assert_close(new_values, torch.stack(values, 1))


@pytest.mark.parametrize("use_rnn", [True, False])
def test_previous_action_embedding_steps_as_it_evaluates_and_restarts_with_episodes(use_rnn: bool) -> None:
    """The previous action, recorded in the state by with_action while acting and read from the
    actions taken when learning, gives the same distributions and values; an episode's first
    step sees no previous action."""
    torch.manual_seed(0)
    cfg = small_config(normalize_returns=False, prev_action_embedding=8, use_rnn=use_rnn)
    model = ActorCritic(DICT_OBS, spaces.Discrete(5, start=-2), cfg)
    assert model.state_size == model.hidden_size + 1
    batch, length = 3, 6
    obs = [obs_to_tensors(sample_obs(DICT_OBS, batch, seed=t), "cpu") for t in range(length)]
    first = torch.zeros(batch, length, dtype=torch.bool)
    first[0, 2] = first[1, 0] = first[2, 4] = True
    state = model.with_action(
        model.initial_state(batch) + torch.randn(batch, model.state_size), torch.tensor([3, 0, 1])
    )
    h = state
    log_probs, values, actions = [], [], []
    with torch.no_grad():
        for t in range(length):
            dist, value, h = model.step(obs[t], h, first[:, t])
            a = dist.sample()
            h = model.with_action(h, a)
            actions.append(a)
            log_probs.append(dist.log_prob(a))
            values.append(value)
        stacked = {k: torch.stack([o[k] for o in obs], dim=1) for k in obs[0]}
        taken = torch.stack(actions, 1)
        dist, new_values = model.evaluate(stacked, first, state, length - 1, taken[:, :-1])
        torch.testing.assert_close(dist.log_prob(taken[:, :-1]), torch.stack(log_probs[:-1], 1))
        torch.testing.assert_close(new_values, torch.stack(values, 1))
        # the previous action is an input, except where an episode starts
        one = {k: v[:1] for k, v in obs[0].items()}
        after = [model.with_action(model.initial_state(1), torch.tensor([a])) for a in (0, 3)]
        for start, differs in ((False, True), (True, False)):
            logits = [model.step(one, s, torch.tensor([start]))[0].dists[0].logits for s in after]
            assert (not torch.equal(*logits)) is differs
    with pytest.raises(ValueError, match="Discrete action space"):
        ActorCritic(DICT_OBS, spaces.MultiDiscrete([3, 4]), cfg)


GOAL_OBS = spaces.Dict(
    {
        "depth": spaces.Box(0.0, 10.0, (36, 36, 1), np.float32),
        "goal": spaces.Box(-np.inf, np.inf, (2,), np.float32),  # (distance, angle), as PointNav's
        "speed": spaces.Box(-np.inf, np.inf, (2,), np.float32),
    }
)


def test_unnormalized_inputs_skip_input_normalisation_for_those_entries_only() -> None:
    cfg = small_config(unnormalized_inputs=["goal"])  # a list, as config.json stores it
    assert cfg.unnormalized_inputs == ("goal",)
    model = ActorCritic(GOAL_OBS, spaces.Discrete(4), cfg)
    assert model.encoders["goal"].norm is None
    assert model.encoders["depth"].norm is not None and model.encoders["speed"].norm is not None
    obs = obs_to_tensors(sample_obs(GOAL_OBS, 5, seed=0), "cpu")
    obs["goal"] = obs["goal"] * 100 + 7  # far from the unit scale
    model.update_normalizers(obs)
    assert model.encoders["speed"].norm.count > 1  # the others still learn their statistics
    without = ActorCritic(GOAL_OBS, spaces.Discrete(4), small_config(normalize_input=False))
    assert all(encoder.norm is None for encoder in without.encoders.values())


def test_polar_inputs_read_distance_angle_as_distance_cos_sin() -> None:
    model = ActorCritic(GOAL_OBS, spaces.Discrete(4), small_config(polar_inputs=("goal",), normalize_input=False))
    encoder = model.encoders["goal"]
    goal = torch.tensor([[2.0, 0.0], [0.2, np.pi / 2], [5.0, np.pi - 1e-4], [5.0, -np.pi + 1e-4]])
    expected = torch.tensor([[2.0, 1.0, 0.0], [0.2, 0.0, 1.0], [5.0, -1.0, 1e-4], [5.0, -1.0, -1e-4]])
    torch.testing.assert_close(encoder.flat(goal), expected, atol=1e-6, rtol=0)
    features = encoder(goal)
    torch.testing.assert_close(features[2], features[3], atol=1e-3, rtol=0)  # no jump where the angle wraps
    assert model.act(sample_obs(GOAL_OBS, 3, seed=0)).shape == (3,)


def test_per_entry_input_options_must_name_entries_the_observation_has() -> None:
    with pytest.raises(ValueError, match="observation entry names"):
        small_config(polar_inputs="goal")  # one name's letters
    with pytest.raises(ValueError, match=r"\['gaol'\].*'depth', 'goal', 'speed'"):
        ActorCritic(GOAL_OBS, spaces.Discrete(4), small_config(unnormalized_inputs=("gaol",)))
    with pytest.raises(ValueError, match="shape \\(2,\\)"):
        ActorCritic(GOAL_OBS, spaces.Discrete(4), small_config(polar_inputs=("depth",)))


def test_running_mean_std_matches_numpy_over_batches() -> None:
    rng = np.random.default_rng(0)
    data = [rng.normal(3.0, 2.0, (n, 4)) for n in (1, 7, 100, 3)]
    rms = RunningMeanStd((4,), epsilon=1e-12)
    for batch in data:
        rms.update(torch.as_tensor(batch))
    everything = np.concatenate(data)
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(0), rtol=1e-6)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(0), rtol=1e-6)
    x = torch.as_tensor(everything[:5])
    torch.testing.assert_close(rms.denormalize(rms.normalize(x)), x)


def make_trajectories(rewards: list[list[float]], done: list[list[bool]], terminated: list[list[bool]]) -> Trajectories:
    model = ActorCritic(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2), small_config(use_rnn=False))
    n, t = len(rewards), len(rewards[0])
    traj = Trajectories.allocate(model, n, t)
    traj.rewards[:] = torch.tensor(rewards)
    traj.done[:] = torch.tensor(done)
    traj.terminated[:] = torch.tensor(terminated)
    traj.valid[:] = True
    traj.valid[:, 1:] &= ~traj.done[:, :-1]  # NEXT_STEP: the step after an episode end only resets
    return traj


def reference_returns(traj: Trajectories, values: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted returns to the end of each episode (or of the trajectory), bootstrapped where it stops."""
    n, length = traj.rewards.shape
    out = torch.zeros(n, length)
    for i in range(n):
        for t in range(length):
            ret, discount, k = 0.0, 1.0, t
            while True:
                ret += discount * traj.rewards[i, k].item()
                discount *= gamma
                if traj.done[i, k] or k == length - 1:
                    if not traj.terminated[i, k]:
                        ret += discount * values[i, k + 1].item()
                    break
                k += 1
            out[i, t] = ret
    return out


def test_gae_and_on_policy_vtrace_give_episode_returns_with_lambda_one() -> None:
    """With lambda = 1 (GAE) and rho = c = 1 on-policy (V-trace), targets are the discounted returns:
    cut at terminations, bootstrapped at truncations and at the end of the trajectory."""
    traj = make_trajectories(
        rewards=[[1.0, 2.0, 0.0, 0.5, 1.0], [0.5, 1.0, 1.5, 0.0, 2.0]],
        done=[[False, True, False, False, False], [False, False, True, False, False]],
        terminated=[[False, True, False, False, False], [False, False, False, False, False]],
    )
    values = torch.tensor([[0.3, -0.2, 7.0, 0.4, 0.1, 0.9], [0.6, 0.2, 0.5, 5.0, -0.3, 1.2]])
    gamma = 0.9
    expected = reference_returns(traj, values, gamma)
    valid = traj.valid
    adv, returns = gae(traj, values, gamma, lam=1.0)
    torch.testing.assert_close(returns[valid], expected[valid])
    torch.testing.assert_close(adv[~valid], torch.zeros(int((~valid).sum())))
    vadv, vs = vtrace(traj, values, torch.zeros_like(traj.rewards), gamma)
    torch.testing.assert_close(vs[valid], expected[valid])
    torch.testing.assert_close(vadv[valid], (expected - values[:, :-1])[valid])


def test_vtrace_clips_importance_weights() -> None:
    """Off-policy one-step case: the target moves by min(1, rho) * TD error."""
    traj = make_trajectories(rewards=[[1.0, 1.0]], done=[[True, False]], terminated=[[True, False]])
    values = torch.tensor([[0.5, 0.0, 0.0]])
    for log_rho, weight in ((np.log(3.0), 1.0), (np.log(0.25), 0.25)):
        adv, vs = vtrace(traj, values, torch.full((1, 2), float(log_rho)), gamma=0.9)
        torch.testing.assert_close(vs[0, 0], torch.tensor(0.5 + weight * 0.5))
        torch.testing.assert_close(adv[0, 0], torch.tensor(weight * 0.5))


def test_advantages_are_normalised_per_minibatch_unless_normalize_advantage_is_off() -> None:
    """At the acting policy (ratio 1) the policy loss is minus the mean advantage: raw, as the Large
    Batch Simulation and DD-PPO PointNav recipes train, or standardised (mean 0), the default."""
    traj = make_trajectories(rewards=[[0.0] * 4] * 2, done=[[False] * 4] * 2, terminated=[[False] * 4] * 2)
    traj.actions.random_(0, 2)
    advantages = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 6.0]])
    for normalize, expected in ((False, -advantages.mean().item()), (True, 0.0)):
        cfg = small_config(use_rnn=False, normalize_advantage=normalize)
        model = ActorCritic(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2), cfg)
        dist, values = model.evaluate(traj.obs, traj.first, traj.initial_state, traj.rollout)
        traj.log_probs[:] = dist.log_prob(traj.actions).detach()
        out = ppo_loss(
            model, dist, values[:, :-1], traj, advantages, torch.zeros_like(advantages), cfg, cfg.exploration_loss_coeff
        )
        assert out.policy_loss == pytest.approx(expected, abs=1e-6)


def test_ppo_takes_epochs_of_minibatches_and_its_state_round_trips() -> None:
    """8 trajectories of 4 steps, 2 per minibatch, 3 epochs: 12 gradient steps, each followed by
    ``after_step``; the learning rate follows the progress; a fresh PPO restores the state."""
    torch.manual_seed(0)
    cfg = small_config(use_rnn=False, rollout=4, batch_size=8, num_epochs=3, lr_schedule="linear_decay")
    obs_space = spaces.Box(-1, 1, (2,), np.float32)
    model = ActorCritic(obs_space, spaces.Discrete(2), cfg)
    traj = make_trajectories(rewards=[[1.0, 0.0, 0.5, 1.0]] * 8, done=[[False] * 4] * 8, terminated=[[False] * 4] * 8)
    traj.obs["obs"].uniform_(-1, 1)
    traj.actions.random_(0, 2)
    ppo = PPO(model, cfg)
    calls = []
    metrics = ppo.learn(traj, 0.25, on_policy=False, after_step=lambda: calls.append(ppo.version))
    assert calls == list(range(1, 13)) and ppo.version == 12
    assert metrics["learning_rate"] == pytest.approx(0.75 * cfg.learning_rate)
    names = ["policy_loss", "value_loss", "entropy", "kl", "clip_fraction", "grad_norm", "learning_rate"]
    assert list(metrics) == names  # the names the dashboard reads
    ppo.learn(traj, 0.5, on_policy=True)  # GAE from the values stored while acting
    assert ppo.version == 24

    restored = PPO(ActorCritic(obs_space, spaces.Discrete(2), cfg), cfg)
    restored.load_state_dict(ppo.state_dict())
    assert restored.version == 24
    assert restored.optimizer.state_dict()["state"].keys() == ppo.optimizer.state_dict()["state"].keys()


def random_batch(num: int, rollout: int) -> Trajectories:
    """``num`` trajectories of random observations, actions, rewards and values, an episode ending in each."""
    torch.manual_seed(1)
    done = [[t == (i % rollout) for t in range(rollout)] for i in range(num)]
    traj = make_trajectories(rewards=torch.randn(num, rollout).tolist(), done=done, terminated=done)
    traj.obs["obs"].uniform_(-1, 1)
    traj.actions.random_(0, 2)
    traj.values.normal_()
    traj.log_probs.fill_(-0.7)
    return traj


def test_steps_are_one_step_trajectories_that_bootstrap_from_the_next_observation() -> None:
    traj = random_batch(3, 5)
    traj.policy_version.random_(0, 100)
    index = torch.tensor([14, 0, 7, 4])  # trajectory 2 step 4, 0 0, 1 2, 0 4
    steps = traj.steps(index)
    assert len(steps) == 4 and steps.rollout == 1
    for row, (i, t) in enumerate([(2, 4), (0, 0), (1, 2), (0, 4)]):
        assert torch.equal(steps.obs["obs"][row], traj.obs["obs"][i, t : t + 2])
        for name in ("first", "values"):
            assert torch.equal(getattr(steps, name)[row], getattr(traj, name)[i, t : t + 2])
        for name in ("actions", "log_probs", "rewards", "terminated", "done", "valid", "policy_version"):
            assert torch.equal(getattr(steps, name)[row, 0], getattr(traj, name)[i, t])
        assert torch.equal(steps.initial_state[row], traj.initial_state[i])


@pytest.mark.parametrize("on_policy", [True, False], ids=["gae", "vtrace"])
def test_a_minibatch_of_every_step_learns_as_one_of_every_trajectory(on_policy: bool) -> None:
    """One minibatch holding the whole batch: the same samples whether they are whole trajectories or shuffled
    steps, so the same update (up to float sums in another order), on-policy (GAE from the stored values) and
    off-policy (V-trace from the current ones, per minibatch or once per batch)."""
    obs_space = spaces.Box(-1, 1, (2,), np.float32)

    def flat(model: torch.nn.Module) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    learned = []
    for minibatch_of in ("trajectories", "steps"):
        cfg = small_config(use_rnn=False, rollout=4, batch_size=24, minibatch_of=minibatch_of, learning_rate=1e-2)
        torch.manual_seed(0)
        ppo = PPO(ActorCritic(obs_space, spaces.Discrete(2), cfg), cfg)
        initial = flat(ppo.model)
        ppo.learn(random_batch(6, 4), 0.0, on_policy=on_policy)
        assert ppo.version == 1 and not torch.allclose(flat(ppo.model), initial)
        learned.append(flat(ppo.model))
    torch.testing.assert_close(learned[1], learned[0], rtol=1e-5, atol=1e-6)


def test_shuffled_steps_take_as_many_gradient_steps_and_mix_trajectories() -> None:
    """8 trajectories of 4 steps in minibatches of 8 samples: 4 gradient steps per epoch either way; a minibatch
    of shuffled steps draws from more trajectories than the 2 a minibatch of whole ones holds."""
    cfg = small_config(use_rnn=False, rollout=4, batch_size=8, num_epochs=2, minibatch_of="steps")
    ppo = PPO(ActorCritic(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2), cfg), cfg)
    batch = random_batch(8, 4)
    batch.policy_id[:] = torch.arange(8)[:, None]  # tells each step's trajectory
    minibatches = list(ppo.minibatches(batch, None, None))
    assert len(minibatches) == 4 and [len(m) for m, _, _ in minibatches] == [8, 8, 8, 8]
    assert sorted(torch.cat([m.policy_id.flatten() for m, _, _ in minibatches]).tolist()) == sorted(
        batch.policy_id.flatten().tolist()
    )
    assert max(len(m.policy_id.unique()) for m, _, _ in minibatches) > 2
    ppo.learn(batch, 0.0, on_policy=False)
    assert ppo.version == 8


@pytest.mark.parametrize(
    "overrides", [{"use_rnn": True}, {"prev_action_embedding": 4}, {"aux_inverse_dynamics_coeff": 0.1}]
)
def test_shuffled_steps_need_a_model_without_memory(overrides: dict) -> None:
    cfg = small_config(**{"use_rnn": False, "minibatch_of": "steps", **overrides})
    model = ActorCritic(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2), cfg)
    with pytest.raises(ValueError, match="minibatch_of='steps' needs a model without memory"):
        PPO(model, cfg)
    with pytest.raises(ValueError, match="minibatch_of must be 'trajectories' or 'steps'"):
        small_config(minibatch_of="samples")


def test_a_too_small_image_gets_a_clear_error() -> None:
    space = spaces.Box(0.0, 10.0, (16, 16, 1), np.float32)  # depth in metres: an image too
    with pytest.raises(ValueError, match="16x16 pixels is too small for encoder_conv_architecture='convnet_simple'"):
        ActorCritic(space, spaces.Discrete(2), small_config())


def test_config_rejects_unknown_keys_and_bad_batches() -> None:
    with pytest.raises(TypeError, match="unknown config keys \\['num_envs_per_wroker'\\]"):
        TrainConfig.from_overrides(num_envs_per_wroker=4)
    with pytest.raises(ValueError, match="multiple of rollout"):
        TrainConfig.from_overrides(batch_size=100, rollout=32)
    with pytest.raises(ValueError, match="encoder_bf16 must be True, False or 'auto'"):
        TrainConfig.from_overrides(encoder_bf16="fast")


def test_bf16_encoder_stays_within_bfloat16_precision_and_auto_follows_the_hardware() -> None:
    from vecfast.trainers.algorithm.models import ConvEncoder
    from vecfast.trainers.algorithm.numerics import native_bf16

    images = torch.randint(0, 256, (4, 3, 36, 64), dtype=torch.uint8)
    outputs = {}
    for setting in (False, True, "auto"):
        torch.manual_seed(0)  # the same weights for every setting
        outputs[setting] = ConvEncoder((3, 36, 64), small_config(encoder_bf16=setting))(images)
    assert outputs[True].dtype == torch.float32
    assert not torch.equal(outputs[True], outputs[False])  # bfloat16 really ran
    torch.testing.assert_close(outputs[True], outputs[False], atol=0.05, rtol=0.05)
    assert torch.equal(outputs["auto"], outputs[native_bf16("cpu")])


@pytest.mark.parametrize("shape", [(3, 36, 64), (36, 64, 3)], ids=["CHW", "HWC"])
def test_image_normalisation_folded_into_the_first_convolution_is_exact(shape: tuple[int, ...]) -> None:
    from vecfast.trainers.algorithm.models import ConvEncoder

    torch.manual_seed(0)
    encoder = ConvEncoder(shape, small_config(encoder_bf16=False))
    images = torch.randint(0, 256, (6, *shape), dtype=torch.uint8)
    encoder.update_norm(images)
    pixels = encoder.nchw(images) / 255.0
    assert torch.allclose(encoder.norm.mean.flatten(), pixels.mean((0, 2, 3)).double(), atol=1e-6)
    std = (encoder.norm.var + encoder.norm.epsilon).sqrt().float()
    explicit = encoder.mlp(encoder.rest(encoder.first((pixels - encoder.norm.mean.float()) / std)))
    torch.testing.assert_close(encoder(images), explicit, atol=1e-5, rtol=1e-4)


def test_board_planes_go_through_a_conv_encoder_that_keeps_the_board() -> None:
    """PettingZoo's classic boards (int8 planes, channels last) get the "board" convolutions, padded
    so that a 3x3 tic-tac-toe board fits; the normalisation folded into the padded first convolution is the
    explicit one of the board padded with empty cells."""
    from pettingzoo.classic import connect_four_v3

    from vecfast.trainers.algorithm.models import ConvEncoder
    from vecfast.trainers.registry import resolve
    from vecfast.trainers.run.defaults import ConfigLayers

    observation = connect_four_v3.env().observation_space("player_0")
    cfg = ConfigLayers(resolve("appo")).config(observation)
    assert not cfg.use_rnn and cfg.learning_rate == 1e-3 and cfg.encoder_conv_mlp_layers == (128,)
    model = ActorCritic(observation, spaces.Discrete(7), cfg)
    encoder = model.encoders["observation"]
    assert isinstance(encoder, ConvEncoder) and encoder.channels_last  # (rows, columns, planes)
    assert encoder.rest[-1](encoder.rest[:-1](torch.zeros(1, 32, 6, 7))).shape[1] == 32 * 6 * 7  # size kept
    board = spaces.Box(0, 1, (3, 3, 2), np.int8)
    ActorCritic(spaces.Dict({"observation": board}), spaces.Discrete(9), cfg)  # 3x3 fits

    torch.manual_seed(0)
    encoder = ConvEncoder((6, 7, 2), small_config(encoder_bf16=False), np.int8)  # configured for pixels
    boards = torch.randint(0, 2, (8, 6, 7, 2), dtype=torch.int8)
    encoder.update_norm(boards)
    std = (encoder.norm.var + encoder.norm.epsilon).sqrt().float()
    padded = torch.nn.functional.pad(encoder.nchw(boards), (1, 1, 1, 1))  # empty cells around the board
    normalised = (padded - encoder.norm.mean.float()) / std
    first = torch.nn.functional.conv2d(normalised, encoder.first.weight, encoder.first.bias)
    torch.testing.assert_close(encoder(boards), encoder.mlp(encoder.rest(first)), atol=1e-5, rtol=1e-4)


def test_multi_discrete_is_independent_categoricals_sampled_in_one_call() -> None:
    """The padded MultiDiscrete distribution gives each dimension's categorical of the raw logits: log-probabilities
    and entropies add up over dimensions, the mode is each one's argmax, and samples follow each one's odds."""
    from torch.distributions import Categorical

    from vecfast.trainers.algorithm.distributions import ActionDistribution

    torch.manual_seed(0)
    nvec = [3, 3, 2, 8, 21]
    params = torch.randn(4000, sum(nvec)) * 2
    dist = ActionDistribution("multi_discrete", params, nvec, None)
    reference = [Categorical(logits=p) for p in params.split(nvec, dim=-1)]
    actions = dist.sample()
    assert actions.shape == (4000, len(nvec)) and all((actions[:, i] < n).all() for i, n in enumerate(nvec))
    torch.testing.assert_close(dist.log_prob(actions), sum(r.log_prob(actions[:, i]) for i, r in enumerate(reference)))
    torch.testing.assert_close(dist.entropy(), sum(r.entropy() for r in reference))
    torch.testing.assert_close(dist.mode(), torch.stack([r.probs.argmax(-1) for r in reference], -1))
    for i, r in enumerate(reference):  # each dimension's sampled frequencies: its mean probabilities, within noise
        frequencies = torch.bincount(actions[:, i], minlength=nvec[i]).float() / len(actions)
        torch.testing.assert_close(frequencies, r.probs.mean(0), atol=0.03, rtol=0)
