"""Evaluation while training (``eval_every_env_steps``): whole episodes of the current policy, every so many env
steps, on envs of their own that the run's one env rule builds, in rank 0 between two iterations.

Results are ``eval/`` keys of the run's metrics records (``metrics.jsonl``, TensorBoard, the dashboard, ``vecfast
plot``). A run of matches of agents (self-play: board games, Doom duels) plays games on its own kind of matches, as
``vecfast.evaluate`` does, against each built-in opponent (``"random"``, ``"initial"``) and reports the win rates.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.env_source import EnvSource
from vecfast.trainers.run.evaluation import DEFAULT_MAX_ENVS, RunEnv, evaluate

PREFIX = "eval/"


class EnvStepSchedule:
    """Due every ``every`` env steps; a resumed run (at ``steps``) goes on with its own schedule."""

    def __init__(self, every: int, steps: int) -> None:
        self.every = every
        self.next_at = (steps // every + 1) * every

    def due(self, env_steps: int) -> bool:
        return env_steps >= self.next_at

    def done(self, env_steps: int) -> None:
        self.next_at = (env_steps // self.every + 1) * self.every


class PeriodicEvaluation:
    """Evaluates ``model`` (copied into a model of its own, so the learner's is untouched) every
    ``cfg.eval_every_env_steps`` env steps."""

    RETURN_KEY = f"{PREFIX}mean_return"  # what best.pt ranks when evaluation is on (self-play: the win rate vs random)

    def __init__(self, model: ActorCritic, source: EnvSource, vectorization: str, cfg: TrainConfig, steps: int) -> None:
        assert cfg.eval_every_env_steps is not None
        self.cfg = cfg
        self.schedule = EnvStepSchedule(cfg.eval_every_env_steps, steps)
        self.model = copy.deepcopy(model).eval()
        self.games = source.is_game
        self.opponents: dict[str, Any] = {"random": "random"}
        if self.games:  # the untrained model of the run's config, the same one every time
            with torch.random.fork_rng():
                torch.manual_seed(0 if cfg.seed is None else cfg.seed)
                initial = ActorCritic(model.observation_space, model.action_space, cfg).eval()
            self.opponents["initial"] = initial
        self.run_env = RunEnv(source, vectorization).with_kwargs(cfg.eval_env_kwargs or {})
        self.env: VectorEnv | None = None  # built at the first evaluation, kept for the next

    def due(self, env_steps: int) -> bool:
        return self.schedule.due(env_steps)

    def on_iteration(self, model: ActorCritic, metrics: dict[str, Any]) -> None:
        """The training loop's hook (bound to the learner's model): when due, adds the results to ``metrics``."""
        if self.due(metrics["env_steps"]):
            metrics.update(self.evaluate(model, metrics["env_steps"]))

    def evaluate(self, model: ActorCritic, env_steps: int) -> dict[str, Any]:
        """Evaluate ``model``'s current weights now; the ``eval/`` records."""
        self.schedule.done(env_steps)
        start = time.perf_counter()
        self.model.load_state_dict(model.state_dict())
        episodes, deterministic = self.cfg.eval_episodes, self.cfg.eval_deterministic
        if self.env is None:
            self.env = self.run_env.build(min(episodes, DEFAULT_MAX_ENVS), heal=self.cfg.restart_failed_workers)
        if self.games:
            records: dict[str, Any] = {}
            for name, opponent in self.opponents.items():
                result = evaluate(self.model, self.env, episodes, deterministic, opponent=opponent)
                records[f"{PREFIX}win_rate_vs_{name}"] = result.metrics["win_rate"]
            records[self.RETURN_KEY] = records[f"{PREFIX}win_rate_vs_random"]
        else:
            result = evaluate(self.model, self.env, episodes, deterministic)
            records = {
                self.RETURN_KEY: result.mean_return,
                f"{PREFIX}std_return": result.std_return,
                f"{PREFIX}mean_length": result.mean_length,
                **{f"{PREFIX}{key}": value for key, value in result.metrics.items()},
            }
        records[f"{PREFIX}episodes"] = episodes
        records[f"{PREFIX}seconds"] = time.perf_counter() - start
        return records

    @property
    def restarts(self) -> int:
        """Restarts of the evaluation envs' failed envs and workers so far."""
        return len(getattr(self.env, "restarts", ())) if self.env is not None else 0

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
