"""Training carries on through failed envs and workers (``restart_failed_workers``, on by default): the run
finishes, its envs' cut episodes are truncations, and ``metrics.jsonl`` counts the restarts."""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest

from vecfast.trainers import ActorCritic, evaluate, train
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.progress import progress_line
from vecfast.trainers.sampling.episodes import EpisodeTracker
from vecfast.vector import AsyncSharedMemVectorEnv

FAST = {"num_workers": 2, "num_envs_per_worker": 2, "rollout": 16, "batch_size": 64, "seed": 0}
ENV_ID = "vecfast_tests/CartPoleThatFails-v0"


class FailsOnce(gym.Wrapper):
    """On its step ``at`` (the first env to get there, once: ``marker`` records it), raises or SIGKILLs its
    worker process."""

    def __init__(self, env: gym.Env, marker: str, how: str, at: int = 40) -> None:
        super().__init__(env)
        self.marker, self.how, self.at, self.steps = Path(marker), how, at, 0

    def step(self, action: Any):
        self.steps += 1
        if self.steps == self.at and self._claim_the_failure():
            if self.how == "raise":
                raise RuntimeError("the env failed")
            os.kill(os.getpid(), signal.SIGKILL)
        return self.env.step(action)

    def _claim_the_failure(self) -> bool:
        """Creates the marker atomically: envs in other workers or ranks reach step ``at`` at the same time."""
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True


def cartpole_that_fails(marker: str, how: str) -> gym.Env:
    return FailsOnce(gym.make("CartPole-v1"), marker, how)


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=cartpole_that_fails)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["raise", "sigkill"])
@pytest.mark.parametrize("algo", ["ppo", "appo"])
def test_training_carries_on_through_a_failed_env_or_worker_and_counts_the_restart(algo, how, tmp_path):
    marker = tmp_path / "failed"
    result = train(
        ENV_ID,
        algo=algo,
        total_env_steps=2048,
        run_dir=tmp_path / "run",
        env_kwargs={"marker": str(marker), "how": how},
        **FAST,
    )
    assert marker.exists() and result.stats["env_steps"] >= 2048
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["restarts"] == 1 and not any("restarted" in row for row in rows)
    assert [row["restarts"] for row in rows] == sorted(row["restarts"] for row in rows)


@pytest.mark.timeout(120)
def test_without_restarts_a_failed_env_stops_the_run_with_its_error(tmp_path):
    with pytest.raises(RuntimeError, match="the env failed"):
        train(
            ENV_ID,
            algo="ppo",
            total_env_steps=2048,
            run_dir=tmp_path / "run",
            env_kwargs={"marker": str(tmp_path / "failed"), "how": "raise"},
            restart_failed_workers=False,
            **FAST,
        )


def test_the_progress_line_says_how_many_restarts_there_were():
    metrics = {"env_steps": 100, "time": 1.0, "fps": 100.0, "mean_episode_return": 5.0, "episodes": 3}
    assert "restart" not in progress_line({**metrics, "restarts": 0}, 1000)
    assert " · 2 restarts · " in progress_line({**metrics, "restarts": 2}, 1000)


def test_an_episode_cut_by_a_restart_is_not_a_finished_episode():
    """Its partial return would drag the running mean (and a cut game would count as a result): the tracker
    leaves it out of its statistics and marks it for the acting plan."""
    tracker = EpisodeTracker(2)
    tracker.record(slice(None), np.array([1.0, 1.0]), np.array([False, False]), np.array([True, True]))
    info = {"restarted": np.array([False, True]), "_restarted": np.array([False, True])}
    ended = tracker.record(slice(None), np.array([1.0, 0.0]), np.array([True, True]), np.array([True, True]), info)
    assert [(e.env, e.episode_return, e.restarted) for e in ended] == [(0, 2.0, False), (1, 1.0, True)]
    stats = tracker.summary()
    assert stats.episodes == 1 and stats.mean_return == 2.0 and "restarted" not in stats.metrics


def test_evaluate_plays_again_an_episode_that_a_failed_env_cut_short(tmp_path):
    marker = tmp_path / "failed"
    env = gym.make("CartPole-v1")
    policy = ActorCritic(env.observation_space, env.action_space, TrainConfig.from_overrides(use_rnn=False))
    result = evaluate(policy, ENV_ID, episodes=6, num_envs=2, env_kwargs={"marker": str(marker), "how": "raise"})
    assert marker.exists()  # an env failed on its 40th step
    assert result.episodes == len(result.returns) == 6 and result.cut_episodes == 0


def failing_cartpoles() -> AsyncSharedMemVectorEnv:
    """A rank's envs (a picklable function: the ranks start fresh interpreters, which know no test-made id)."""
    env_fns = [functools.partial(cartpole_that_fails, os.environ["VECFAST_TEST_MARKER"], "sigkill")] * 4
    return AsyncSharedMemVectorEnv(env_fns, num_workers=2, restart_failed_workers=True)


@pytest.mark.slow  # launches ranks
@pytest.mark.timeout(240)
def test_ddppo_ranks_carry_on_through_a_failed_worker_and_count_the_jobs_restarts(tmp_path, monkeypatch):
    marker = tmp_path / "failed"
    monkeypatch.setenv("VECFAST_TEST_MARKER", str(marker))
    result = train(
        failing_cartpoles, algo="ddppo", num_processes=2, total_env_steps=2048, run_dir=tmp_path / "run",
        rollout=16, batch_size=64, seed=0,
    )  # fmt: skip
    assert marker.exists() and result.stats["env_steps"] >= 2048
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["restarts"] == 1  # one rank's worker, counted for the job


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_killed_doom_game_ends_its_duel_and_the_population_trains_on(tmp_path):
    """Self-play in two Doom duels: a game killed mid-run ends its duel (one restart), the other duel plays on,
    and the population's matches go on being scored."""
    from vecfast.envs.doom import doom_duel_v0

    killed = threading.Event()

    def kill_a_game_once_training() -> None:
        deadline = time.monotonic() + 120
        while not killed.is_set() and time.monotonic() < deadline:
            games = [p for p in psutil.Process().children(recursive=True) if p.name() == "vizdoom"]
            metrics = tmp_path / "run" / "metrics.jsonl"
            if len(games) == 4 and metrics.exists() and metrics.stat().st_size:  # training has begun
                games[0].kill()
                killed.set()
            time.sleep(0.2)

    killer = threading.Thread(target=kill_a_game_once_training, daemon=True)
    killer.start()
    result = train(
        doom_duel_v0.vector_env(2, timelimit_minutes=0.05),  # 52 steps a match
        algo="appo",
        total_env_steps=6_000,
        run_dir=tmp_path / "run",
        num_policies=2,
        use_rnn=False,
        rollout=16,
        batch_size=64,
        print_every_sec=None,
        seed=0,
    )
    killer.join()
    assert killed.is_set() and result.stats["env_steps"] >= 6_000
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["restarts"] == 1
    after = [row for row in rows if row["restarts"] == 1]
    assert len(after) < len(rows) and len({row["policy_0_elo"] for row in after}) > 1  # matches scored after it
