"""Synchronous PPO with GAE: the correctness baseline, assembled from the shared components.

One loop, as in CleanRL: step every env ``rollout`` times with the current policy, compute
GAE with the values the policy predicted, then ``num_epochs`` passes over the rollout in
minibatches of ``batch_size`` samples (whole trajectories, so a GRU core learns through time).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.episodes import EpisodeTracker
from vecfast.trainers.learner import Learner
from vecfast.trainers.losses import gae
from vecfast.trainers.models import ActorCritic, as_obs_dict, obs_to_tensors
from vecfast.trainers.registry import register_algo
from vecfast.trainers.runtime import setup_torch
from vecfast.trainers.storage import Trajectories


def check_next_step_autoreset(env: VectorEnv) -> None:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if AutoresetMode(mode) != AutoresetMode.NEXT_STEP:
        raise ValueError(f"the trainers need autoreset_mode NEXT_STEP (gymnasium's default), got {mode}")


class PPOTrainer:
    """Synchronous PPO over any gymnasium VectorEnv."""

    def __init__(self, env: VectorEnv, cfg: TrainConfig, total_env_steps: int) -> None:
        check_next_step_autoreset(env)
        samples = env.num_envs * cfg.rollout
        if samples % cfg.batch_size:
            raise ValueError(
                f"a PPO rollout has num_envs * rollout = {samples} samples; batch_size={cfg.batch_size} must divide it"
            )
        self.env, self.cfg, self.total_env_steps = env, cfg, total_env_steps
        self.device = setup_torch(cfg)
        self.model = ActorCritic(env.single_observation_space, env.single_action_space, cfg).to(self.device)
        self.learner = Learner(self.model, cfg)
        self.storage = Trajectories.allocate(self.model, env.num_envs, cfg.rollout, self.device)
        self.episodes = EpisodeTracker(env.num_envs, cfg.stats_avg)
        self.env_steps = 0

    def iterations(self) -> Iterator[dict[str, float]]:
        cfg, env, model, s = self.cfg, self.env, self.model, self.storage
        n = env.num_envs
        obs, _ = env.reset(seed=cfg.seed)
        state = model.initial_state(n, self.device)
        first = torch.ones(n, dtype=torch.bool, device=self.device)
        prev_done = np.zeros(n, dtype=bool)
        start = time.perf_counter()
        while True:
            s.initial_state.copy_(state)
            sample_start = time.perf_counter()
            for t in range(cfg.rollout):
                obs_t = obs_to_tensors(as_obs_dict(obs), self.device)
                with torch.no_grad():
                    dist, value, state = model.step(obs_t, state, first)
                    action = dist.sample()
                for key, value_t in obs_t.items():
                    s.obs[key][:, t] = value_t
                s.first[:, t] = first
                s.values[:, t] = value
                s.actions[:, t] = action
                s.log_probs[:, t] = dist.log_prob(action)
                valid = ~prev_done
                s.valid[:, t] = torch.from_numpy(valid)
                obs, reward, terminated, truncated, _ = env.step(model.actor.to_env(action))
                done = terminated | truncated
                s.rewards[:, t] = torch.as_tensor(reward, dtype=torch.float32)
                s.terminated[:, t] = torch.from_numpy(terminated)
                s.done[:, t] = torch.from_numpy(done)
                self.episodes.record(slice(None), reward, done, valid)
                first = torch.from_numpy(~valid).to(self.device)  # the step after a reset step starts an episode
                prev_done = done
            obs_t = obs_to_tensors(as_obs_dict(obs), self.device)
            with torch.no_grad():
                _, s.values[:, -1], _ = model.step(obs_t, state, first)  # bootstrap (state is not advanced)
            for key, value_t in obs_t.items():
                s.obs[key][:, -1] = value_t
            s.first[:, -1] = first
            self.env_steps += n * cfg.rollout
            sample_time = time.perf_counter() - sample_start

            learn_start = time.perf_counter()
            advantages, returns = gae(s, s.values, cfg.gamma, cfg.gae_lambda)  # with the behaviour values
            learned = self.learner.learn(s, self.env_steps / self.total_env_steps, advantages, returns)
            elapsed = time.perf_counter() - start
            steps_per_rollout = cfg.num_epochs * n // self.learner.minibatch
            yield {
                "env_steps": self.env_steps,
                "fps": self.env_steps / elapsed,
                **learned,
                "policy_lag_min": 0.0,
                "policy_lag_avg": float(steps_per_rollout - 1) / 2,
                "policy_lag_max": float(steps_per_rollout - 1),
                "time_sampling": sample_time,
                "time_learning": time.perf_counter() - learn_start,
                **self.episodes.summary(),
            }

    def state_dict(self) -> dict[str, Any]:
        return self.learner.trainer_state(self.env_steps)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = self.learner.load_trainer_state(state)

    def close(self) -> None:
        """Nothing to stop: everything runs in the caller's thread."""


register_algo("ppo", PPOTrainer, defaults={"num_epochs": 4, "batch_size": 256, "learning_rate": 3e-4})
