"""Algorithms and schemes are separate, pluggable axes: the registry, the Trainer protocol as train() relies on
it, and a user's algorithm (examples/a2c.py) under the synchronous and distributed schemes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import vecfast
from vecfast.trainers import IterationMetrics, register_algorithm, register_scheme, registered_algos
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.registry import registered_schemes, resolve
from vecfast.trainers.schemes.asynchronous import AsyncTrainer
from vecfast.trainers.schemes.distributed import DistributedTrainer
from vecfast.trainers.schemes.synchronous import SyncTrainer

REPO_DIR = Path(__file__).resolve().parent.parent
A2C_EXAMPLE = REPO_DIR / "examples" / "a2c.py"
SMALL = {"use_rnn": False, "encoder_mlp_layers": (32, 32), "print_every_sec": None}


def test_pairs_name_an_algorithm_under_a_scheme():
    assert {"ppo", "appo", "ddppo"} <= set(registered_algos())
    assert {"sync", "async", "distributed"} <= set(registered_schemes())
    for name, algo, scheme, factory in [
        ("ppo", "ppo", "sync", SyncTrainer),
        ("appo", "ppo", "async", AsyncTrainer),
        ("ddppo", "ppo", "distributed", DistributedTrainer),
    ]:
        recipe = resolve(name)
        assert (recipe.algo, recipe.scheme, recipe.label) == (algo, scheme, name)
        assert recipe.algorithm.factory is PPO and recipe.scheme_spec.factory is factory
    assert resolve("ppo", "async").label == "appo"  # the same pair by either name
    assert resolve("appo").scheme_spec.double_buffered and resolve("ddppo").scheme_spec.distributed
    with pytest.raises(ValueError, match="algo='appo' is ppo under the async scheme, not sync"):
        resolve("appo", "sync")
    with pytest.raises(KeyError, match="unknown algorithm 'nope'"):
        resolve("nope")
    with pytest.raises(KeyError, match="unknown scheme 'nope'"):
        resolve("ppo", "nope")


def test_registry_takes_algorithms_and_schemes_from_outside():
    class Custom(PPO):
        pass

    register_algorithm("test-custom", Custom, defaults={"rollout": 8})
    recipe = resolve("test-custom", "async")
    assert recipe.algorithm.factory is Custom and recipe.label == "test-custom+async"
    assert recipe.defaults["rollout"] == 8  # the algorithm's defaults over the scheme's
    for taken in ("ppo", "appo", "sync"):
        with pytest.raises(ValueError, match="already registered"):
            (register_scheme if taken == "sync" else register_algorithm)(taken, Custom)
    with pytest.raises(ValueError, match="already registered"):
        register_algorithm("test-custom", PPO)


class CountingTrainer:
    """A scheme that reports only what the protocol requires: env_steps."""

    def __init__(self, env: gym.vector.VectorEnv, algorithm: Any, cfg: Any, total_env_steps: int) -> None:
        self.model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
        self.env_steps = 0

    def iterations(self) -> Iterator[IterationMetrics]:
        while True:
            self.env_steps += 100
            yield IterationMetrics(env_steps=self.env_steps)

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "env_steps": self.env_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = state["env_steps"]

    def close(self) -> None:
        pass


register_scheme("test-counting", CountingTrainer)


def test_a_trainer_that_reports_only_env_steps_trains(tmp_path):
    """train() computes fps itself and leaves out what is not reported (it used to fail with KeyError 'fps')."""
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    result = vecfast.train(
        env, algo="ppo", scheme="test-counting", total_env_steps=500, run_dir=tmp_path / "r", **SMALL
    )
    assert result.stats["env_steps"] == 500 and result.stats["fps"] > 0
    assert result.stats["policy_lag"] == {"min": 0.0, "avg": 0.0, "max": 0.0}
    lines = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [m["env_steps"] for m in lines] == [100, 200, 300, 400, 500]
    assert set(lines[0]) == {"env_steps", "env_frames", "fps", "time"}
    env.close()


def test_ppo_under_the_sync_scheme_reports_no_policy_lag_and_profiles_its_sampling(tmp_path):
    """Acting and learning policy are the same: no lag is faked. The sampling time splits into the envs' and the
    inference's (cumulative, as APPO's)."""
    result = vecfast.train("CartPole-v1", algo="ppo", total_env_steps=2048, run_dir=tmp_path / "r", **SMALL)
    records = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    first, last = records[0], records[-1]
    assert "policy_lag_avg" not in first and first["learner_steps"] > 0
    sampling = sum(r["time_sampling"] for r in records)
    assert last["time_envs"] > 0 and last["time_inference"] > 0
    assert last["time_envs"] + last["time_inference"] <= sampling
    assert all(0 <= r["time_ranks_sync"] <= r["time_sampling"] for r in records)  # one process: counting, no wait
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (config["algo"], config["scheme"]) == ("ppo", "sync") and result.stats["env_steps"] >= 2048


def run_a2c(*args: str, timeout: float) -> str:
    done = subprocess.run(
        [sys.executable, str(A2C_EXAMPLE), *args], cwd=REPO_DIR, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"exit code {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_users_a2c_learns_under_the_sync_scheme_and_runs_distributed(tmp_path):
    """examples/a2c.py registers A2C from outside vecfast; the same class learns CartPole under the sync
    scheme and runs in 2 ranks under the distributed one, without a change to vecfast."""
    out = run_a2c("--total-env-steps", "40000", "--run-dir", str(tmp_path / "sync"), timeout=200)
    mean_return = float(re.search(r"sync: mean return ([\d.]+)", out).group(1))
    assert mean_return >= 100, out  # random play lasts ~22 steps; 100 at ~13k env steps, ~320 at 40k (seed 0)
    out = run_a2c("--scheme", "distributed", "--num-processes", "2", "--total-env-steps", "8192",
                  "--run-dir", str(tmp_path / "ddp"), timeout=200)  # fmt: skip
    assert "distributed: mean return" in out
    config = json.loads((tmp_path / "ddp" / "config.json").read_text())
    assert (config["algo"], config["scheme"], config["world_size"]) == ("a2c", "distributed", 2)
