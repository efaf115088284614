"""The examples run as scripts, in a process of their own, and do what they say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parent.parent
CLEANRL_PPO = REPO_DIR / "examples" / "cleanrl_ppo.py"
EPISODE_LINE = re.compile(r"^global_step=\d+, episodic_return=[\d.]+, episodic_length=\d+$", re.MULTILINE)


def run_cleanrl_ppo(*args: str) -> str:
    """Run the example for 8 short iterations; return its stdout."""
    command = [sys.executable, str(CLEANRL_PPO), "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "1024"]
    done = subprocess.run([*command, *args], cwd=REPO_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit code {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert "iteration=8/8" in done.stdout
    return done.stdout


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    "mode, vector_env",
    [("shared_memory", "AsyncSharedMemVectorEnv"), (None, "CartPoleVectorEnv")],
    ids=["shared_memory", "default"],
)
def test_cleanrl_ppo_runs_and_logs_returns(mode, vector_env):
    stdout = run_cleanrl_ppo(*(["--vectorization-mode", mode] if mode else []), "--seed", "3")
    assert f"CartPole-v1: 4 envs in {vector_env}" in stdout
    episodes = EPISODE_LINE.findall(stdout)
    assert len(episodes) > 20  # random-ish CartPole episodes last ~20 steps: 4096 steps hold many


@pytest.mark.timeout(150)
def test_cleanrl_ppo_with_vecfast_learns_exactly_as_with_gymnasium():
    """vecfast's vector env is bit-identical to gymnasium's, so the whole run is: same episodes."""
    ours = EPISODE_LINE.findall(run_cleanrl_ppo("--vectorization-mode", "shared_memory"))
    gymnasium_sync = EPISODE_LINE.findall(run_cleanrl_ppo("--vectorization-mode", "sync"))
    assert len(ours) > 20 and ours == gymnasium_sync
