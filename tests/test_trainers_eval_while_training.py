"""Evaluation while training (``eval_every_env_steps``): ``eval/`` records in the run's metrics and TensorBoard,
``best.pt`` chosen by evaluation, the evaluation envs' own keyword arguments, and win rates for self-play."""

from __future__ import annotations

import json
from pathlib import Path

from pettingzoo.classic import connect_four_v3
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import vecfast
from vecfast.trainers.run.run_dir import load_checkpoint

FAST = {"num_workers": 1, "num_envs_per_worker": 4, "rollout": 16, "batch_size": 64, "seed": 0}


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_evaluations_every_n_env_steps_go_to_the_metrics_and_choose_best_pt(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    vecfast.train(
        "CartPole-v1", algo="ppo", total_env_steps=4096, run_dir=run_dir, eval_every_env_steps=1024,
        eval_episodes=3, eval_env_kwargs={"max_episode_steps": 30}, **FAST,
    )  # fmt: skip
    evaluated = [r for r in records(run_dir) if "eval/mean_return" in r]
    assert [r["env_steps"] // 1024 for r in evaluated] == [1, 2, 3, 4]  # one per 1024 steps crossed
    for r in evaluated:
        assert r["eval/episodes"] == 3 and r["eval/mean_length"] <= 30  # the evaluation envs' own kwargs
        assert r["eval/mean_return"] == r["eval/mean_length"] and r["eval/seconds"] > 0  # CartPole: 1 per step
    best = max(r["eval/mean_return"] for r in evaluated)
    assert load_checkpoint(run_dir, "best")["best_return"] == best
    tags = EventAccumulator(str(run_dir)).Reload().Tags()["scalars"]
    assert {"eval/mean_return", "eval/std_return", "eval/mean_length"} <= set(tags)


def test_a_self_play_run_is_evaluated_as_win_rates_against_the_built_in_opponents(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    vecfast.train(
        connect_four_v3, algo="ppo", total_env_steps=2000, run_dir=run_dir, eval_every_env_steps=1000,
        eval_episodes=4, use_rnn=False, encoder_mlp_layers=(32,), num_workers=1, num_envs_per_worker=4, rollout=8,
        batch_size=64, seed=0,
    )  # fmt: skip
    evaluated = [r for r in records(run_dir) if "eval/mean_return" in r]
    assert len(evaluated) == 2
    for r in evaluated:
        assert 0 <= r["eval/win_rate_vs_random"] <= 1 and 0 <= r["eval/win_rate_vs_initial"] <= 1
        assert r["eval/mean_return"] == r["eval/win_rate_vs_random"]


def test_without_eval_every_env_steps_there_is_no_evaluation(tmp_path: Path) -> None:
    vecfast.train("CartPole-v1", algo="ppo", total_env_steps=1024, run_dir=tmp_path / "run", **FAST)
    assert not any(key.startswith("eval/") for r in records(tmp_path / "run") for key in r)
