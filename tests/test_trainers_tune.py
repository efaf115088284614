"""Auto-tuning: Sample Factory's condition on known timings, real measurements, ``num_workers="auto"``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gymnasium as gym
import pytest
from helpers import descendants

from vecfast.cli import build_parser, main
from vecfast.trainers import train
from vecfast.trainers.run.tune import MAX_ENVS_PER_WORKER, TuneChoice, available_cores, decide, tune

SMALL = {"rollout": 16, "batch_size": 64}


def test_decide_takes_the_fewest_envs_per_group_that_keep_workers_busy() -> None:
    assert decide(t_env=1e-3, t_inf=2.5e-3, cores=2) == TuneChoice(
        num_workers=2,
        num_envs_per_worker=8,
        condition_holds=True,
        reasons=(
            "num_workers=2: one rollout worker per available core (2)",
            "t_inf = 2.50 ms for a batch of 8: ceil(t_inf / t_env) = ceil(2.50 ms / 1.00 ms) = 3, so k/2 = 4 is the "
            "fewest envs per group with k/2 > 3: a worker steps one group (4 x 1.00 ms = 4.00 ms) while the policy "
            "acts for the other",
            "num_envs_per_worker=8: two groups of 4 per worker (double-buffered); "
            "the policy acts on batches of 8 envs, half of the 16",
        ),
    )


@pytest.mark.parametrize(
    ("t_env", "t_inf", "cores"),
    [(1e-3, 1e-4, 2), (1e-3, 1e-3, 2), (1e-3, 2.5e-3, 2), (5e-4, 8e-3, 4), (1e-5, 1.5e-4, 1), (2e-4, 3e-3, 16)],
)
def test_the_choice_meets_the_condition_with_no_env_to_spare(t_env: float, t_inf: float, cores: int) -> None:
    choice = decide(t_env, t_inf, cores)
    k, ratio = choice.num_envs_per_worker, math.ceil(t_inf / t_env)
    assert k % 2 == 0 and choice.envs_per_group == k // 2
    assert k / 2 > ratio and k / 2 - 1 <= ratio  # k/2 > ceil(t_inf / t_env), and one fewer would not be
    assert choice.condition_holds and choice.num_workers == cores
    assert choice.inference_batch == cores * k // 2


def test_slower_inference_gives_more_envs_per_worker() -> None:
    fast, slow = decide(1e-3, 1e-3, 2), decide(1e-3, 20e-3, 2)
    assert (fast.num_envs_per_worker, slow.num_envs_per_worker) == (4, 42)
    assert slow.num_workers == fast.num_workers == 2


def test_inference_that_grows_with_the_batch_is_timed_on_the_batch_chosen() -> None:
    # acting for B envs takes 2 ms + 0.1 ms * B: k/2 = 3 would make t_inf 2.6 ms (ceil 3), k/2 = 4 gives 2.8 ms
    choice = decide(t_env=1e-3, t_inf=2e-3, cores=2, t_inf_per_env=1e-4)
    assert (choice.num_workers, choice.num_envs_per_worker, choice.condition_holds) == (2, 8, True)
    assert choice.reasons[1].startswith("t_inf = 2.80 ms for a batch of 8")


def test_inference_bound_layouts_spread_the_fixed_cost_and_say_workers_wait() -> None:
    # 0.6 ms per env and 2 workers: 1.2 ms for one env of each, more than an env step, whatever k
    choice = decide(t_env=1e-3, t_inf=1e-3, cores=2, t_inf_per_env=6e-4)
    assert (choice.num_envs_per_worker, choice.condition_holds) == (16, False)  # k/2 = ceil(9 * 1 / 1.2) = 8
    assert choice.reasons[1].startswith("inference-bound: acting costs 600.0 µs per env, 1.20 ms for one env")
    batch = choice.inference_batch
    assert batch / (1e-3 + 6e-4 * batch) >= 0.9 / 6e-4 > (batch - 2) / (1e-3 + 6e-4 * (batch - 2))


def test_the_maximums_bound_the_choice() -> None:
    choice = decide(1e-3, 1.0, cores=100)  # inference a thousand env steps long
    assert (choice.num_workers, choice.num_envs_per_worker) == (64, MAX_ENVS_PER_WORKER)
    assert not choice.condition_holds
    assert "at most 64" in choice.reasons[0] and "workers may wait for actions" in choice.reasons[1]
    assert decide(1e-3, 1.0, cores=2, max_envs_per_worker=10).num_envs_per_worker == 10
    for bad in [(0.0, 1e-3, 2), (1e-3, -1.0, 2), (1e-3, 1e-3, 0), (1e-3, 0.0, 2)]:
        with pytest.raises(ValueError):
            decide(*bad)


def test_tune_measures_a_real_env_and_the_model_the_trainer_builds() -> None:
    tuning = tune("CartPole-v1", seconds=0.3)
    assert tuning.cores == available_cores() and tuning.device == "cpu"
    assert 0 < tuning.t_env < 1e-3 and tuning.env_steps > 100  # CartPole steps take microseconds
    assert tuning.t_inf >= 0 and tuning.t_inf_per_env >= 0 and tuning.t_inf + tuning.t_inf_per_env > 0
    workers = min(tuning.cores, 64)
    assert [batch for batch, _ in tuning.inference_timings] == [workers, workers * MAX_ENVS_PER_WORKER // 2]
    assert all(0 < t < 0.1 for _, t in tuning.inference_timings)
    assert tuning.choice == decide(tuning.t_env, tuning.t_inf, tuning.cores, tuning.t_inf_per_env)
    assert json.loads(json.dumps(tuning.to_dict()))["choice"]["num_workers"] == tuning.choice.num_workers


def test_vecfast_tune_prints_the_measurements_and_the_choice(capsys: pytest.CaptureFixture) -> None:
    assert main(["tune", "CartPole-v1", "--seconds", "0.3", "--rnn_size", "32"]) == 0
    out = capsys.readouterr().out
    assert "auto-tune CartPole-v1" in out and "t_env = " in out and "t_inf = " in out
    workers = min(available_cores(), 64)
    assert f"choice: num_workers={workers} num_envs_per_worker=" in out
    # Which reasoning is printed depends on the measured timings (any of decide()'s three cases).
    assert "k/2" in out and f"vecfast train CartPole-v1 --algo appo --num_workers {workers}" in out


def test_train_with_auto_workers_records_the_choice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    result = train("CartPole-v1", num_workers="auto", total_env_steps=2000, run_dir=tmp_path, seed=0, **SMALL)
    assert result.stats["env_steps"] >= 2000
    assert "choice: num_workers=" in capsys.readouterr().err
    config = json.loads((tmp_path / "config.json").read_text())
    choice = config["auto_tune"]["choice"]
    assert config["config"]["num_workers"] == choice["num_workers"] == min(available_cores(), 64)
    assert config["config"]["num_envs_per_worker"] == choice["num_envs_per_worker"]
    assert config["num_envs"] == choice["num_workers"] * choice["num_envs_per_worker"]
    tuned, half = config["auto_tune"], choice["num_envs_per_worker"] // 2
    t_inf = tuned["t_inf"] + tuned["t_inf_per_env"] * choice["num_workers"] * half  # for the batch chosen
    assert choice["condition_holds"] == (half > math.ceil(t_inf / tuned["t_env"]))  # CartPole may hit the maximum


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_workers": "fast"}, "num_workers must be an int >= 1 .*got 'fast'"),
        ({"num_workers": 0}, "num_workers must be an int >= 1"),
        ({"num_workers": -1}, "num_workers must be an int >= 1"),
        ({"num_workers": 2.5}, "num_workers must be an int >= 1"),
        ({"num_envs_per_worker": "auto"}, "num_envs_per_worker must be an int >= 1 .*chooses it"),
        ({"num_workers": "auto", "rollout": 1}, "rollout must be >= 2"),  # checked before measuring
    ],
)
def test_bad_sampling_values_raise_before_anything_runs(overrides: dict, message: str, tmp_path: Path) -> None:
    before = {p.pid for p in descendants()}
    with pytest.raises(ValueError, match=message):
        train("CartPole-v1", total_env_steps=100, run_dir=tmp_path / "run", **overrides)
    assert not (tmp_path / "run").exists() and {p.pid for p in descendants()} <= before


def test_auto_needs_an_env_id_and_double_buffered_sampling(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs an env id"):
        train(lambda: gym.make_vec("CartPole-v1", 2), num_workers="auto", run_dir=tmp_path / "a")
    with pytest.raises(ValueError, match="does not sample double-buffered"):
        train("CartPole-v1", algo="ppo", num_workers="auto", run_dir=tmp_path / "b")
    assert not list(tmp_path.iterdir())


def test_the_cli_takes_auto_or_a_count_of_workers() -> None:
    assert build_parser().parse_args(["train", "CartPole-v1", "--num_workers", "auto"]).num_workers == "auto"
    assert build_parser().parse_args(["train", "CartPole-v1", "--num-workers", "3"]).num_workers == 3
    with pytest.raises(SystemExit):
        main(["train", "CartPole-v1", "--num_workers", "fast"])
