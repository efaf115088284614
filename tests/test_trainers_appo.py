"""The sampler's trajectories, driven asynchronously (APPO's policy worker) and synchronously; APPO learning
CartPole, running on Doom."""

from __future__ import annotations

import functools
import queue
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.sampler import Sampler, StepAsRecv
from vecfast.trainers.schemes.asynchronous import AsyncTrainer
from vecfast.trainers.schemes.policy_worker import PolicyWorker

MLP = {"use_rnn": False, "encoder_mlp_layers": (64, 64), "nonlinearity": "tanh"}


class EpisodeCounterEnv(gym.Env):
    """Observation: steps taken in the episode. Reward 10 + that count. Episodes of ``length`` steps
    end by termination, or by truncation when ``truncate``."""

    observation_space = spaces.Box(0, 100, (1,), np.float32)

    def __init__(self, length: int, truncate: bool, action_space: spaces.Space | None = None) -> None:
        self.length, self.truncate, self.count = length, truncate, 0
        self.action_space = action_space or spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.count = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: np.ndarray | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        assert self.action_space.contains(action), action
        reward = 10.0 + self.count
        self.count += 1
        end = self.count == self.length
        return np.array([self.count], np.float32), reward, end and not self.truncate, end and self.truncate, {}


def test_policy_worker_writes_consistent_trajectories(make_async: Callable) -> None:
    """Double-buffered recv/send over 8 envs: every stored step lines up with the env's true dynamics,
    reset steps are marked invalid and episode starts are marked first."""
    lengths = [3, 4, 5, 6, 3, 4, 5, 6]
    fns = [functools.partial(EpisodeCounterEnv, n, i % 2 == 1) for i, n in enumerate(lengths)]
    env = make_async(fns, num_workers=2, batch_size=4)
    cfg = TrainConfig.from_overrides(**MLP, rollout=7, batch_size=14)
    model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    worker = PolicyWorker(env, model, cfg.rollout, num_rows=8 + 16, seed=0, stats_avg=100)
    worker.start()
    slots = []
    try:
        while len(slots) < 16:
            assert worker.error is None, worker.error
            try:
                slots.append(worker.sampler.full.get(timeout=5.0))
            except queue.Empty:
                continue
    finally:
        worker.stop_event.set()
        worker.join()
    assert worker.error is None, worker.error
    traj = worker.sampler.storage.select(torch.tensor(slots))
    assert_consistent(traj, [cfg.rollout] * len(slots))
    # reset steps were seen, and truncated episodes are told apart from terminated ones
    assert (~traj.valid).any() and traj.done.any() and traj.terminated.any() and (traj.done & ~traj.terminated).any()
    summary = worker.sampler.episodes.summary()
    assert summary.episodes > 0 and 3 <= summary.mean_length <= 6


def test_the_sampler_driven_synchronously_writes_consistent_trajectories() -> None:
    """The synchronous scheme's way (``rollout`` steps of every env, then every slot bootstraps, is learned from
    and refilled), with rollouts cut short as DD-PPO's preemption cuts them: the same invariants hold, each
    env keeps its own slot, and the recurrent state each slot starts from is the one its env carried on with."""
    lengths = [3, 4, 5, 6]
    env = gym.vector.SyncVectorEnv([functools.partial(EpisodeCounterEnv, n, i % 2 == 1) for i, n in enumerate(lengths)])
    cfg = TrainConfig.from_overrides(use_rnn=True, rnn_size=8, encoder_mlp_layers=(8,), rollout=7, batch_size=14)
    model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    sampler = Sampler(StepAsRecv(env), model, cfg.rollout, env.num_envs, seed=0)
    received = sampler.reset()
    for steps in (7, 3, 7, 5, 2, 7):  # the steps of each rollout
        carried = sampler.state.clone()
        for _ in range(steps):
            sampler.step(received)
            received = sampler.observe()
        sampler.end_trajectories(received)
        slots = sampler.take_full(env.num_envs)
        assert slots == [0, 1, 2, 3]
        traj = sampler.storage.prefix(steps)
        assert torch.equal(traj.initial_state, carried)
        assert_consistent(traj, [steps] * len(slots))
        sampler.release(slots)
    assert sampler.env_steps == env.num_envs * (7 + 3 + 7 + 5 + 2 + 7)
    env.close()


def assert_consistent(traj: Trajectories, steps: list[int]) -> None:
    """Trajectory ``i``'s first ``steps[i]`` steps line up with EpisodeCounterEnv's true dynamics: reset steps
    are marked invalid, episode starts first, and truncation told apart from termination."""
    obs = traj.obs["obs"][..., 0]
    for i in range(len(traj)):
        counts = obs[i].tolist()
        length = max(counts) if not traj.valid[i].all() else None  # an invalid step shows the final count
        for t in range(steps[i]):
            c = counts[t]
            assert traj.first[i, t] == (c == 0), (i, t, counts)
            if traj.valid[i, t]:
                assert traj.rewards[i, t] == 10 + c, (i, t)
                assert counts[t + 1] == c + 1
                if traj.done[i, t]:
                    assert length is None or c + 1 == length
            else:
                assert traj.rewards[i, t] == 0 and not traj.done[i, t], (i, t)
                assert t == 0 or traj.done[i, t - 1], "a reset step follows an episode end"
                assert counts[t + 1] == 0 and traj.first[i, t + 1]
        assert (traj.policy_version[i, : steps[i]] == 0).all()
        assert (traj.log_probs[i, : steps[i]] <= 0).all()


def train_appo(
    env: gym.vector.VectorEnv, budget: int, target: float | None, iterations: int | None = None, **overrides: object
) -> list[dict]:
    cfg = TrainConfig.from_overrides(**overrides)
    trainer = AsyncTrainer(env, PPO, cfg, budget)
    history = []
    try:
        for iteration in trainer.iterations():
            metrics = iteration.to_dict()
            history.append(metrics)
            reached = target is not None and metrics.get("mean_episode_return", -np.inf) >= target
            if reached or metrics["env_steps"] >= budget or len(history) == iterations:
                break
    finally:
        trainer.close()
    return history


@pytest.mark.parametrize("minibatch_of", ["trajectories", "steps"])
def test_appo_learns_cartpole(make_async: Callable, minibatch_of: str) -> None:
    env = make_async([lambda: gym.make("CartPole-v1")] * 16, num_workers=2, batch_size=8)
    overrides = {**MLP, "rollout": 32, "batch_size": 512, "learning_rate": 1e-3, "exploration_loss_coeff": 0.0}
    overrides["minibatch_of"] = minibatch_of
    history = train_appo(env, 150_000, 195.0, **overrides, seed=1, max_grad_norm=0.5)
    last = history[-1]
    assert last.get("mean_episode_return", 0) >= 195, f"reached {last.get('mean_episode_return')} in {last}"
    lags = [m["policy_lag_max"] for m in history]
    assert max(lags) >= 1, "the sampler never ran ahead of the learner: sampling was not asynchronous"
    assert all(m["policy_lag_min"] <= m["policy_lag_avg"] <= m["policy_lag_max"] for m in history)


def test_appo_runs_on_doom_with_screen_and_gru(make_async: Callable) -> None:
    pytest.importorskip("vizdoom")
    from vecfast.envs.doom.scenario_env import DoomScenarioEnv

    env = make_async([functools.partial(DoomScenarioEnv, "basic")] * 4, num_workers=2, batch_size=2)
    assert isinstance(env.single_observation_space, spaces.Dict)
    small = {"rnn_size": 32, "encoder_conv_mlp_layers": (64,), "encoder_mlp_layers": (16,)}
    history = train_appo(env, 10**6, None, iterations=4, **small, rollout=8, batch_size=32, seed=0)
    assert len(history) == 4
    assert history[-1]["learner_steps"] == len(history)
    for m in history:
        assert all(np.isfinite(m[k]) for k in ("policy_loss", "value_loss", "entropy", "grad_norm")), m


@pytest.mark.parametrize(
    "action_space",
    [spaces.MultiDiscrete([3, 2], start=[1, -1]), spaces.Box(-1.0, 1.0, (2,), np.float32)],
    ids=["MultiDiscrete", "Box"],
)
def test_appo_trains_with_multi_discrete_and_box_actions(make_async: Callable, action_space: spaces.Space) -> None:
    """Actions reach the envs inside their space (the env asserts it) and the learner steps."""
    fns = [functools.partial(EpisodeCounterEnv, 5, False, action_space)] * 4
    env = make_async(fns, num_workers=2, batch_size=2)
    history = train_appo(env, 10**6, None, iterations=3, **MLP, rollout=8, batch_size=32, seed=0)
    assert [m["learner_steps"] for m in history] == [1, 2, 3]
    assert all(np.isfinite(m["policy_loss"]) and np.isfinite(m["entropy"]) for m in history)


@pytest.mark.parametrize("accumulate", [2, 3])
def test_the_sampler_stops_num_batches_to_accumulate_ahead_of_the_learner(
    make_async: Callable, accumulate: int
) -> None:
    """A learner that takes one batch and no more: the envs stop once the batcher holds the next batch and every
    row beyond it is full or being filled (Sample Factory's num_batches_to_accumulate), and not before."""
    env = make_async([functools.partial(EpisodeCounterEnv, 5, False)] * 4, num_workers=2, batch_size=2)
    cfg = TrainConfig.from_overrides(**MLP, rollout=8, batch_size=32, num_batches_to_accumulate=accumulate)
    trainer = AsyncTrainer(env, PPO, cfg, 10**6)
    try:
        trainer.batches.next_batch()
        steps = [-1, trainer.batches.env_steps]
        while steps[-1] != steps[-2]:  # until the envs have stopped
            time.sleep(1.0)
            steps.append(trainer.batches.env_steps)
    finally:
        trainer.close()
    trajectories, rows = 4, 4 + (accumulate - 1) * 4  # a batch: 32 steps of 8; the envs' rows and the spare ones
    taken_and_held = 2 * trajectories * cfg.rollout
    assert taken_and_held + (rows - 4) * cfg.rollout <= steps[-1] <= taken_and_held + rows * cfg.rollout


def test_num_batches_to_accumulate_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="num_batches_to_accumulate must be an int >= 2"):
        TrainConfig.from_overrides(num_batches_to_accumulate=1)
