"""The live dashboard: its figures from metrics records, and ``view`` following a run in a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from vecfast.trainers.run.run_dir import last_checkpoints
from vecfast.trainers.run.viewer import Dashboard, render, sparkline


def record(step: int, t: float, **extra: float) -> dict:
    base = {
        "env_steps": step, "env_frames": 4 * step, "time": t, "learner_steps": step // 100,
        "policy_lag_min": 0.0, "policy_lag_avg": 1.5, "policy_lag_max": 3.0, "policy_loss": 0.01,
        "value_loss": 0.5, "entropy": 1.2, "kl": 1e-3, "clip_fraction": 0.1, "grad_norm": 0.7,
        "learning_rate": 1e-4, "time_envs": t * 0.2, "time_inference": t * 0.5, "time_sampler_waiting_rows": 0.0,
        "time_learning": 0.8, "time_learner_waiting": 0.1, "full_trajectories": 3, "episodes": step // 50,
        "mean_episode_return": step / 100, "max_episode_return": step / 50, "mean_episode_length": 42.0,
    }  # fmt: skip
    return {**base, **extra}


def test_dashboard_rates_eta_and_component_shares() -> None:
    board = Dashboard(total_env_steps=10_000, batch_size=100, title="test")
    for i, (step, t) in enumerate([(1000, 1.0), (2000, 2.0), (4000, 3.0)]):
        board.update(record(step, t))
        assert board.finished is False, i
    assert board.current("env_frames") == 4 * 2000  # over the last second
    assert board.average("env_frames") == 4 * 3000 / 2.0  # since the first record
    assert board.samples_per_second(current=True) == 20 * 100  # 20 learner steps of 100 samples
    assert board.eta() == pytest.approx(6000 / 1500)
    shares = board.component_shares()
    assert shares["sampler: inference"] == pytest.approx(0.5)
    assert shares["learner: learning"] == pytest.approx(0.8)
    board.update(record(10_000, 4.0))
    assert board.finished
    console = Console(record=True, width=100)
    console.print(render(board, width=100))
    text = console.export_text()
    for expected in ("env frames/s", "24,000", "policy lag", "min 0 max 3", "(finished)", "100.0%", "40,000"):
        assert expected in text, expected


def test_dashboard_shows_a_trainer_that_reports_only_env_steps() -> None:
    """IterationMetrics has only env_steps required: the dashboard leaves out what a trainer does not report
    (no policy lag for synchronous schemes, no loss terms, no episodes yet)."""
    board = Dashboard(total_env_steps=1000, batch_size=100, title="minimal")
    for step, t in [(100, 1.0), (200, 2.0)]:
        board.update({"env_steps": step, "env_frames": step, "fps": 100.0, "time": t})
    console = Console(record=True, width=100)
    console.print(render(board, width=100))
    text = console.export_text()
    assert "env frames/s" in text and "policy lag" not in text and "entropy" not in text


def test_sparkline_scales_between_min_and_max() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == "▁▂▃▄▅▆▇█"
    assert sparkline([float("nan"), 5, 5], 10) == "▅▅"  # steady: half-way up (it was "▁▁", which looked collapsed)
    assert sparkline(list(range(100)), 4) == "▁▃▆█"


class Terminal:
    """A program in a tmux pane, as a person sees it: ``screen()``, ``wait_for(text)``, ``keys(...)``.

    Its socket lies in ``tmp_path`` (``-L NAME`` would leave one in /tmp/tmux-UID), and TMUX_TMPDIR,
    where tmux would otherwise put it, must stay empty (:meth:`close` checks).
    """

    def __init__(self, tmp_path: Path, command: list[str], width: int) -> None:
        self.tmpdir = tmp_path / "tmux_tmpdir"
        self.tmpdir.mkdir()
        self.env = {**os.environ, "TMUX_TMPDIR": str(self.tmpdir)}
        self.tmux = ["tmux", "-S", str(tmp_path / "tmux.sock")]
        new_session = ["new-session", "-d", "-x", str(width), "-y", "45", "-c", str(tmp_path), *command]
        self.run(*new_session)
        self.run("set-option", "remain-on-exit", "on")  # the last frame stays to be read

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.tmux, *args], check=True, capture_output=True, text=True, env=self.env)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-J").stdout

    def wait_for(self, text: str, seconds: float = 60) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; screen:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", *keys)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True, env=self.env)
        assert not list(self.tmpdir.iterdir()), "tmux left a socket in its TMUX_TMPDIR"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_view_follows_a_run_in_tmux_and_quits_on_q(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"env": "DemoEnv", "algo": "appo", "total_env_steps": 100_000, "config": {"batch_size": 100}})
    )
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps(record(1000, 1.0)) + "\n" + json.dumps(record(2000, 2.0)) + "\n")
    marker = tmp_path / "exited"
    script = (
        "from vecfast.trainers.run.viewer import view; "
        f"view({str(tmp_path)!r}, poll_seconds=0.1); open({str(marker)!r}, 'w').close()"
    )
    terminal = Terminal(tmp_path, [sys.executable, "-c", script], width=110)
    try:
        shown = terminal.wait_for("8,000", seconds=20)  # env frames of the second record
        assert "DemoEnv · appo (running)" in shown and "steps 2,000/100,000" in shown
        with open(metrics, "a") as f:  # the run goes on: the dashboard follows
            f.write(json.dumps(record(5000, 3.0)) + "\n")
        shown = terminal.wait_for("steps 5,000/100,000", seconds=20)
        assert "12,000" in shown  # current env frames/s: 3000 steps x 4 frames in one second
        assert shown.count("╭") == 1, "the dashboard was drawn more than once (flicker/scrolling)"
        terminal.keys("q")
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "view did not quit on q"
    finally:
        terminal.close()


def test_progress_follows_the_nearer_limit() -> None:
    board = Dashboard(total_env_steps=10**12, batch_size=100, time_limit=10.0)
    board.update(record(1000, 1.0))
    board.update(record(2000, 4.0))
    assert board.progress() == pytest.approx(0.4) and board.eta() == pytest.approx(6.0)
    board.update(record(3000, 10.0))
    assert board.finished


@pytest.mark.parametrize("width", [100, 140, 160, 200])
def test_the_header_is_one_line_at_any_width_and_says_which_limit_its_fraction_is_of(width: int) -> None:
    """A Pong run bounded by time (10^10 steps, train_for_seconds): the header wrapped at 140 and 160 columns, and
    its percentage (of the time) sat beside the steps' count without saying which it was."""
    board = Dashboard(total_env_steps=10**10, batch_size=4096, title="ALE/Pong-v5 · appo", time_limit=3600.0)
    board.update(record(1_000_000, 600.0))
    board.update(record(2_000_000, 1200.0))
    console = Console(width=width, record=True, force_terminal=False)
    console.print(render(board, width))
    lines = console.export_text().splitlines()
    (header,) = [line for line in lines if "steps 2,000,000/10,000,000,000" in line]
    assert "time 0:20:00/1:00:00  ETA 0:40:00" in header  # not cut, not wrapped
    assert [line for line in lines if " 33.3% of the time" in line] == [lines[1]]  # beside the bar, first
    if width >= 140:
        assert header == lines[1]  # all on one line
    timed_by_steps = Dashboard(total_env_steps=4_000_000, batch_size=4096, time_limit=3600.0)
    timed_by_steps.update(record(2_000_000, 1200.0))
    assert timed_by_steps.progress_of() == (0.5, "steps")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_after_ctrl_c_the_live_dashboards_last_frame_says_interrupted_and_names_the_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "vecfast", "train", "CartPole-v1", "--algo", "ppo", "--live", "--run-dir",
               "run", "--total-env-steps", "100000000", "--num_workers", "1", "--num-envs-per-worker", "4",
               "--rollout", "16", "--batch_size", "64", "--save_every_sec", "1000"]  # fmt: skip
    terminal = Terminal(tmp_path, command, width=160)
    try:
        terminal.wait_for("CartPole-v1 · ppo (running)")
        terminal.keys("C-c")
        shown = terminal.wait_for("(interrupted)")
        checkpoints = last_checkpoints(run_dir)
        assert len(checkpoints) == 1  # the final one: the periodic ones were 1000 s apart
        steps = int(checkpoints[0].stem.removeprefix("last_"))
        saved = checkpoints[0].relative_to(tmp_path)
        assert f"interrupted at {steps:,} env steps; saved {saved}" in shown
        assert f"steps {steps:,}/100,000,000" in shown  # the name is the env steps the dashboard reported
    finally:
        terminal.close()


def test_dashboard_shows_a_populations_elo_and_a_leagues() -> None:
    board = Dashboard(total_env_steps=10_000, batch_size=100, title="population")
    population = {"policy_0_elo": 1032.4, "policy_0_objective": 0.25, "policy_0_learning_rate": 1e-4}
    population |= {"policy_1_elo": 967.6, "policy_1_learning_rate": 1.3e-4}
    board.update(record(1000, 1.0, **population))
    console = Console(record=True, width=100)
    console.print(render(board, width=100))
    text = console.export_text()
    for expected in ("Elo", "1032", "968", "0.25", "0.00013"):
        assert expected in text, expected
    league = Dashboard(total_env_steps=10_000, batch_size=100, title="league")
    league.update(record(1000, 1.0, elo=1180.0, score_vs_snapshots=0.61, snapshots=4.0, games_vs_latest=300.0))
    console = Console(record=True, width=100)
    console.print(render(league, width=100))
    text = console.export_text()
    for expected in ("Elo (learner)", "1180", "0.610", "snapshots"):
        assert expected in text, expected
    pfsp = Dashboard(total_env_steps=10_000, batch_size=100, title="pfsp")
    draws = {
        "win_rate_vs_hardest_snapshot": 0.27,
        "hardest_snapshot_draw_share": 0.42,
        "win_rate_vs_snapshots_mean": 0.8,
    }
    pfsp.update(record(1000, 1.0, elo=1180.0, snapshots=4.0, **draws))
    console = Console(record=True, width=100)
    console.print(render(pfsp, width=100))
    text = console.export_text()
    for expected in ("win rate vs hardest snapshot", "0.270 (42% of draws)", "mean win rate vs snapshots", "0.800"):
        assert expected in text, expected  # the draws (PFSP's) and the win rates behind them
    plain = Dashboard(total_env_steps=10_000, batch_size=100, title="plain")
    plain.update(record(1000, 1.0))
    console = Console(record=True, width=100)
    console.print(render(plain, width=100))
    assert "Elo" not in console.export_text()


def test_dashboard_keeps_showing_the_latest_evaluation_and_the_restarts() -> None:
    board = Dashboard(total_env_steps=10_000, batch_size=100, title="evaluated")
    board.update(record(1000, 1.0, **{"eval/mean_return": 123.5, "eval/episodes": 10}))
    board.update(record(2000, 2.0, restarts=3))  # a record without an evaluation
    console = Console(record=True, width=100)
    console.print(render(board, width=100))
    text = console.export_text()
    assert "evaluation (mean return)" in text and "123.50 at 1,000 steps" in text
    assert "restarts" in text and " 3" in text


def test_live_in_a_notebook_without_ipywidgets_prints_progress_lines_and_says_why(monkeypatch, capsys, tmp_path):
    """rich draws a notebook's live display through ipywidgets, and without it only warns at every frame."""
    import warnings

    import rich.console

    from vecfast.trainers import train

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # rich's 'install "ipywidgets"' would fail the run
        train("CartPole-v1", algo="ppo", total_env_steps=256, run_dir=tmp_path / "run", live=True, num_workers=2,
              num_envs_per_worker=2, rollout=16, batch_size=64, print_every_sec=0)  # fmt: skip
    err = capsys.readouterr().err
    assert "live=True in a notebook needs ipywidgets (pip install 'vecfast[notebook]'): progress lines instead" in err
    assert "vecfast train: done at 256 env steps" in err
