"""The sampler with several policies: each episode is played by the policy ``mapping`` chose when it started,
each step runs one inference batch per policy, and every stored step says which policy took it; where episodes
begin and end (the rule evaluate shares) in every autoreset mode."""

from __future__ import annotations

import functools
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_trainers_appo import EpisodeCounterEnv, assert_consistent

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.episodes import EndedEpisode, EpisodeBoundaries, EpisodeTracker
from vecfast.trainers.sampling.sampler import Sampler, StepAsRecv

LENGTHS = [3, 4, 5, 6]


def always(action: int, cfg: TrainConfig, env: gym.vector.VectorEnv) -> ActorCritic:
    """A policy that takes ``action`` (probability ~1)."""
    model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    with torch.no_grad():
        model.actor.linear.weight.zero_()
        model.actor.linear.bias.copy_(torch.tensor([30.0, -30.0] if action == 0 else [-30.0, 30.0]))
    return model


class CountingCalls:
    """Wraps a policy's ``step`` to count its calls and their batch sizes."""

    def __init__(self, model: ActorCritic) -> None:
        self.sizes: list[int] = []
        original = model.step

        def step(obs, state, first):  # noqa: ANN001, ANN202
            self.sizes.append(len(first))
            return original(obs, state, first)

        model.step = step  # type: ignore[method-assign]


@pytest.mark.parametrize("use_rnn", [False, True])
def test_each_episode_is_played_by_the_policy_mapped_when_it_started(use_rnn: bool) -> None:
    env = gym.vector.SyncVectorEnv([functools.partial(EpisodeCounterEnv, n, i % 2 == 1) for i, n in enumerate(LENGTHS)])
    cfg = TrainConfig.from_overrides(use_rnn=use_rnn, rnn_size=8, encoder_mlp_layers=(8,), rollout=6, batch_size=12)
    policies = [always(0, cfg, env), always(1, cfg, env)]
    calls = [CountingCalls(p) for p in policies]
    drawn: list[tuple[int, int]] = []

    def mapping(env_index: int, episode: int) -> int:
        drawn.append((env_index, episode))
        return (env_index + episode) % 2  # alternates per env, so batches mix both policies

    ended: list[tuple[int, int, int]] = []  # (env, episode number, policy) of each finished episode

    def on_episode_end(finished: EndedEpisode, number: int) -> None:
        ended.append((finished.env, number, finished.policy))

    sampler = Sampler(
        StepAsRecv(env), policies, cfg.rollout, env.num_envs, mapping=mapping, on_episode_end=on_episode_end, seed=0
    )
    received = sampler.reset()
    mixed = 0  # steps whose batch both policies shared
    episode = [-1] * env.num_envs  # each env's episode number, counted from the trajectories' first flags
    for _ in range(5):
        for _ in range(cfg.rollout):
            before = [len(c.sizes) for c in calls]
            playing = sampler.policy_id.tolist()
            mixed += len(set(playing)) == 2
            sampler.step(received)
            # one batch per policy that plays an env, of that policy's envs
            assert [c.sizes[b:] for c, b in zip(calls, before, strict=True)] == [
                [playing.count(p)] if p in playing else [] for p in (0, 1)
            ]
            received = sampler.observe()
        sampler.end_trajectories(received)
        slots = sampler.take_full(env.num_envs)
        assert slots == [0, 1, 2, 3]  # env i fills slot i: the slots continue each other in time
        traj = sampler.storage
        assert_consistent(traj, [cfg.rollout] * env.num_envs)
        for i in range(env.num_envs):
            for t in range(cfg.rollout):
                episode[i] += bool(traj.first[i, t])
                if traj.valid[i, t]:  # (a reset step only restarts the env)
                    expected = (i + episode[i]) % 2
                    assert traj.policy_id[i, t] == expected, (i, t)
                    assert traj.actions[i, t] == expected  # and it acted as that policy
        sampler.release(slots)
    assert min(episode) >= 3 and mixed > 10
    # each finished episode names the policy that played it
    assert len(ended) >= 12 and all(policy == (i + number) % 2 for i, number, policy in ended)
    # the mapping was asked once per episode of each env, in order
    for i in range(env.num_envs):
        assert [e for j, e in drawn if j == i] == list(range(sampler.episodes_started[i]))
    env.close()


@pytest.mark.parametrize("mode", list(gym.vector.AutoresetMode))
def test_episode_boundaries_follow_the_autoreset_mode(mode: gym.vector.AutoresetMode) -> None:
    """The one rule of the sampler and evaluate: env 0 ends an episode, env 1 does not, then both are reset."""
    boundaries = EpisodeBoundaries(2, mode)
    assert boundaries.first.tolist() == [True, True] and boundaries.valid.tolist() == [True, True]
    done = torch.tensor([True, False])
    boundaries.stepped(slice(None), boundaries.valid.clone(), done)
    if mode == gym.vector.AutoresetMode.NEXT_STEP:
        # env 0's next step only resets it; the observation after that starts its next episode
        assert boundaries.first.tolist() == [False, False] and boundaries.valid.tolist() == [False, True]
        boundaries.stepped(slice(None), boundaries.valid.clone(), torch.tensor([False, False]))
        assert boundaries.first.tolist() == [True, False] and boundaries.valid.tolist() == [True, True]
    else:  # the observation returned with the end starts the next episode (DISABLED: after the caller's reset)
        assert boundaries.first.tolist() == [True, False] and boundaries.valid.tolist() == [True, True]
    boundaries.stepped(torch.tensor([1]), boundaries.valid[[1]].clone(), torch.tensor([False]))
    boundaries.restarted(torch.tensor([False, True]))  # a partial reset of env 1
    assert boundaries.first[1] and boundaries.valid[1]


def test_the_tracker_counts_valid_steps_and_cuts_episodes_without_final_info() -> None:
    tracker = EpisodeTracker(2, mode=gym.vector.AutoresetMode.SAME_STEP)
    info = {"final_info": {"score": np.array([5.0, 0.0]), "_score": np.array([True, False])}}
    info["_final_info"] = np.array([True, False])
    ones = np.ones(2)
    assert tracker.record(slice(None), ones, np.array([False, False]), np.array([True, False])) == []
    ended = tracker.record(slice(None), ones, np.array([True, False]), np.array([True, True]), info)
    assert ended == [EndedEpisode(0, 2.0, 2, {"score": 5.0})]  # SAME_STEP's final info
    assert tracker.cut(np.array([1])) == [EndedEpisode(1, 1.0, 1, {})]
    assert tracker.lengths_so_far.tolist() == [0, 0] and tracker.episodes == 2


class SlowSteps(gym.vector.VectorWrapper):
    """Each vector step sleeps ``delay`` seconds first (a simulator's time, without the CPU)."""

    def __init__(self, env: gym.vector.VectorEnv, delay: float) -> None:
        super().__init__(env)
        self.delay = delay

    def step(self, actions):  # noqa: ANN001, ANN201
        time.sleep(self.delay)
        return self.env.step(actions)


def test_a_step_only_env_counts_its_steps_as_time_waiting_for_envs() -> None:
    """A vector env without send/recv steps inside ``recv``, so the sampler's profile (time_envs) holds the
    simulator's time, not nothing (it stepped in ``send``, outside both of the sampler's timers)."""
    env = SlowSteps(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2), delay=0.02)
    cfg = TrainConfig.from_overrides(use_rnn=False, encoder_mlp_layers=(8,), rollout=8, batch_size=16)
    sampler = Sampler(StepAsRecv(env), ActorCritic(env.single_observation_space, env.single_action_space, cfg),
                      rollout=8, num_rows=8, seed=0)  # fmt: skip
    received = sampler.reset()
    for _ in range(10):
        sampler.step(received)
        received = sampler.observe()
    env.close()
    assert sampler.timings.waiting_envs >= 10 * 0.02
    assert sampler.timings.inference < 10 * 0.02
