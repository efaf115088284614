"""How a training run ends: a stalled or crashed env, an env error and Ctrl-C under a pipe each end it
with a final checkpoint and a message that names the cause; progress lines while it trains."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import psutil
import pytest
from helpers import descendants, wait_gone

import vecfast
from vecfast.trainers import train
from vecfast.trainers.run.progress import progress_line
from vecfast.trainers.run.run_dir import load_checkpoint
from vecfast.trainers.run.step_timeout import FLOOR_SECONDS
from vecfast.vector import EnvError, StepTimeoutError, WorkerDiedError

pytestmark = pytest.mark.slow  # runs stopped by signals, pipes and timeouts

SMALL = {"rollout": 16, "batch_size": 64, "save_every_sec": 1e9}
STALL_TIMEOUT = 2.0


class FailingCartPole(gym.Wrapper):
    """CartPole that raises ValueError on its ``fail_at``-th step."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.fail_at, self.steps = fail_at, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError("the simulator lost its state")
        return self.env.step(action)


def cartpole_factory(built: list, fail_at: int | None = None):
    """A factory of 8 CartPole envs over 2 workers (double-buffered for APPO); ``built`` gets the env."""

    def make():
        fns = [lambda: gym.make("CartPole-v1")] * 8
        if fail_at is not None:
            fns[5] = lambda: FailingCartPole(fail_at)
        vec = vecfast.AsyncSharedMemVectorEnv(fns, num_workers=2, batch_size=4)
        built.append(vec)
        return vec

    return make


def after_first_iteration(run_dir: Path, action) -> threading.Thread:
    """Run ``action`` once training logged its first iteration."""

    def wait_then_act() -> None:
        metrics = run_dir / "metrics.jsonl"
        while not (metrics.exists() and metrics.stat().st_size > 0):
            time.sleep(0.05)
        action()

    thread = threading.Thread(target=wait_then_act, daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_a_stopped_env_worker_ends_the_run_with_a_checkpoint_and_names_its_envs(algo: str, tmp_path: Path) -> None:
    """Old behaviour: APPO sampled on from the healthy worker with no warning; no step_timeout to set."""
    built: list = []
    stopped = []

    def stop_worker_1() -> None:
        pid = built[0].worker_pids[1]  # envs 4-7
        os.kill(pid, signal.SIGSTOP)
        stopped.append((psutil.Process(pid), time.monotonic()))

    after_first_iteration(tmp_path, stop_worker_1)
    with pytest.raises(StepTimeoutError) as caught:
        train(cartpole_factory(built), algo, 10**9, tmp_path, train_for_seconds=60, step_timeout=STALL_TIMEOUT, **SMALL)
    detected = time.monotonic() - stopped[0][1]
    assert STALL_TIMEOUT <= detected < STALL_TIMEOUT + 10
    message = str(caught.value)
    assert "worker 1" in message and "stopped" in message and "env 4" in message
    assert any("final checkpoint was saved" in note for note in caught.value.__notes__)
    assert load_checkpoint(tmp_path)["env_steps"] > 0
    assert not wait_gone([stopped[0][0]], timeout=10), "the stopped worker outlived the run"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algo", ["appo", "ppo"])
@pytest.mark.parametrize("failure", ["env raises", "worker killed"])
def test_a_failing_env_ends_the_run_with_a_checkpoint_and_its_own_error(
    algo: str, failure: str, tmp_path: Path
) -> None:
    """Old behaviour: no final checkpoint (up to save_every_sec of training lost); APPO wrapped the env's
    error in a RuntimeError, so ``except ValueError`` missed it."""
    built: list = []
    if failure == "env raises":
        expected: tuple[type[BaseException], ...] = (ValueError, EnvError)
        factory = cartpole_factory(built, fail_at=400)
    else:
        expected = (WorkerDiedError,)
        factory = cartpole_factory(built)
        after_first_iteration(tmp_path, lambda: os.kill(built[0].worker_pids[1], signal.SIGKILL))
    with pytest.raises(expected[0]) as caught:
        train(factory, algo, 10**9, tmp_path, train_for_seconds=60, **SMALL)
    assert all(isinstance(caught.value, kind) for kind in expected)
    if failure == "env raises":
        assert caught.value.env_index == 5 and "lost its state" in str(caught.value)
    checkpoint = load_checkpoint(tmp_path)
    assert checkpoint["env_steps"] > 0 and checkpoint["metrics"]["env_steps"] > 0


def test_progress_lines_go_to_stderr_unless_silenced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Old behaviour: train() printed nothing while it trained."""
    common = {"num_workers": 1, "num_envs_per_worker": 4, **SMALL}
    result = train("CartPole-v1", "appo", 2000, tmp_path / "loud", print_every_sec=0, **common)
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if line.startswith("vecfast train: ")]
    assert lines[0].startswith("vecfast train: appo on CartPole-v1, 4 envs, 2,000 env steps; run dir ")
    assert any(" env steps (" in line and " fps" in line for line in lines[1:-1])
    assert lines[-1].startswith(f"vecfast train: done at {result.stats['env_steps']:,} env steps; saved ")
    train("CartPole-v1", "appo", 2000, tmp_path / "quiet", print_every_sec=None, **common)
    assert "vecfast train:" not in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_auto_step_timeout_is_set_from_the_measured_env_cycle(tmp_path: Path) -> None:
    result = train(
        "CartPole-v1", "appo", 10**9, tmp_path, num_workers=1, num_envs_per_worker=4, train_for_seconds=7, **SMALL
    )
    # CartPole's env cycle is a millisecond or so: a hundred of them is far below the floor
    assert result.stats["step_timeout"] == FLOOR_SECONDS


@pytest.mark.timeout(120)
@pytest.mark.parametrize("live", ["--live", "--no-live"])
def test_ctrl_c_under_a_pipe_saves_and_exits_as_in_a_terminal(live: str, tmp_path: Path) -> None:
    """Old behaviour: ``vecfast train ... | tee log`` + Ctrl-C exited 1 with no message and no final checkpoint
    (rich's dashboard turned the reader's death into SystemExit(1))."""
    run_dir = tmp_path / "run"
    command = (
        f"{sys.executable} -m vecfast train CartPole-v1 --total-env-steps 1000000000 --run-dir {run_dir} {live}"
        " --num_workers 2 --num_envs_per_worker 4 --rollout 16 --batch_size 64 --print_every_sec 0"
        f' 2>{tmp_path / "stderr.txt"} | cat > /dev/null; echo "exit codes ${{PIPESTATUS[@]}}"'
    )
    # a terminal's Ctrl-C reaches the whole foreground process group: vecfast and the reader
    shell = subprocess.Popen(["bash", "-c", command], start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        metrics = run_dir / "metrics.jsonl"
        deadline = time.monotonic() + 60
        while not (metrics.exists() and metrics.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metrics.exists(), "training did not start"
        children = descendants(shell.pid)
        os.killpg(shell.pid, signal.SIGINT)
        out, _ = shell.communicate(timeout=60)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
    stderr = (tmp_path / "stderr.txt").read_text()
    assert out.strip() == "exit codes 130 130", stderr  # as the reader: 128 + SIGINT
    if live == "--no-live":
        assert "vecfast train: interrupted at " in stderr and "; saved " in stderr
    assert load_checkpoint(run_dir)["env_steps"] > 0
    assert not wait_gone(children, timeout=10), "processes outlived the run"


def test_a_progress_lines_time_left_follows_the_nearer_limit() -> None:
    metrics = {"env_steps": 1000, "time": 10.0, "fps": 100.0}
    assert progress_line(metrics, 10**10).endswith(" · 27777.8 h left")  # the step budget's, as the steps go
    assert progress_line(metrics, 10**10, time_limit=70.0).endswith(" · 60 s left")  # train_for_seconds nearer
    assert progress_line(metrics, 2000, time_limit=3600.0).endswith(" · 10 s left")


def test_a_self_play_progress_line_shows_elo_and_score_not_the_zero_sum_return() -> None:
    metrics = {"env_steps": 1000, "time": 10.0, "fps": 100.0, "mean_episode_return": 0.0, "episodes": 50}
    league = progress_line({**metrics, "elo": 1180.4, "score_vs_snapshots": 0.613}, 2000)
    assert " · Elo 1180 · score vs snapshots 0.61 · " in league and "mean return" not in league
    population = progress_line({**metrics, "policy_1_elo": 990.0, "policy_0_elo": 1010.0}, 2000)
    assert " · Elo 1010 / 990 (policies) · " in population
    assert "mean return 0.0 (50 episodes)" in progress_line(metrics, 2000)


def test_the_summary_names_why_a_run_stopped_and_a_resumed_run_names_its_checkpoint(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    timed = train("CartPole-v1", "ppo", 10**9, run_dir, num_workers=1, num_envs_per_worker=4, train_for_seconds=2,
                  **SMALL)  # fmt: skip
    assert timed.stats["stopped_by"] == "train_for_seconds" and not timed.stats["interrupted"]
    steps = timed.stats["env_steps"]
    capsys.readouterr()
    resumed = train("CartPole-v1", "ppo", steps + 256, run_dir, resume=True, num_workers=1, num_envs_per_worker=4,
                    **SMALL)  # fmt: skip
    assert resumed.stats["stopped_by"] == "total_env_steps"
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("vecfast train: ppo on CartPole-v1") and first.endswith(
        f"; resumed from {run_dir / 'checkpoints' / f'last_{steps:012d}.pt'}"
    )
