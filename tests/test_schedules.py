"""Schedules by the run's bound: a run bounded by ``train_for_seconds`` anneals its learning rate (and entropy
bonus) over its training time, and a resumed run continues its schedule (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vecfast import train
from vecfast.trainers.algorithm.schedules import schedule_factor
from vecfast.trainers.base.progress import RunProgress

FAST = {"num_workers": 1, "num_envs_per_worker": 4, "rollout": 32, "batch_size": 128, "use_rnn": False, "seed": 0}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_the_nearer_bound_and_a_resumed_run_goes_on_from_its_checkpoint() -> None:
    by_steps = RunProgress(1000, None)
    by_steps.start()
    assert by_steps.fraction(250) == 250 / 1000 and by_steps.fraction(5000) == 1.0
    clock = Clock()
    progress = RunProgress(10**10, 60.0, clock)
    progress.start()
    clock.now += 15
    assert progress.fraction(1000) == pytest.approx(0.25)  # the steps are nowhere near their bound
    clock.now += 15
    assert progress.fraction(8 * 10**9) == pytest.approx(0.8)  # the steps' bound is the nearer one now
    resumed = RunProgress(10**10, 40.0, clock)
    resumed.load_state_dict(progress.state_dict())  # 0.8 reached: this sitting's 40 s take it from there to 1
    resumed.start()
    assert resumed.fraction(0) == pytest.approx(0.8)
    clock.now += 20
    assert resumed.fraction(0) == pytest.approx(0.9)
    clock.now += 30
    assert resumed.fraction(0) == 1.0
    assert RunProgress(10, 5.0).fraction(0) == 0.0  # not started: no time has passed
    assert [schedule_factor("linear_decay", p) for p in (0.0, 0.5, 1.5)] == [1.0, 0.5, 0.0]


def rates(run_dir: Path) -> list[tuple[float, float]]:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(line["time"], line["learning_rate"]) for line in lines if "learning_rate" in line]


@pytest.mark.parametrize("algo", ["ppo", "appo"])
def test_a_run_bounded_by_time_anneals_its_learning_rate_and_a_resumed_one_continues(tmp_path: Path, algo: str) -> None:
    """Before: progress was env steps over total_env_steps only, 10**10 here, so the rate stayed at 1e-3."""
    run_dir = tmp_path / "run"
    keys = {"learning_rate": 1e-3, "lr_schedule": "linear_decay", "exploration_loss_coeff": 0.01, **FAST}
    keys["exploration_loss_schedule"] = "linear_decay"
    train("CartPole-v1", algo=algo, total_env_steps=10**10, train_for_seconds=8, run_dir=run_dir, **keys)
    first = rates(run_dir)
    assert first[0][1] > 0.7e-3 and first[-1][1] < 0.25e-3  # down by the time bound, nearly to 0
    assert all(later <= earlier for (_, earlier), (_, later) in zip(first, first[1:], strict=False))
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    coeffs = [line["exploration_loss_coeff"] for line in lines if "exploration_loss_coeff" in line]
    assert coeffs[-1] < 0.25 * coeffs[0]  # the entropy bonus anneals alike
    train("CartPole-v1", algo=algo, train_for_seconds=4, resume=run_dir, run_dir=run_dir)
    second = rates(run_dir)[len(first) :]
    assert second and second[0][1] <= first[-1][1] * 1.05  # no jump back up: it goes on from where it stopped
    assert second[-1][1] < 0.5 * first[-1][1] + 1e-5
