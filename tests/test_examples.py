"""The examples run as scripts, in a process of their own, and do what they say."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pettingzoo.classic import connect_four_v3

pytestmark = pytest.mark.slow  # the examples, trained end to end

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


@pytest.fixture
def selfplay_loop(monkeypatch):
    """examples/selfplay_loop.py as a module, so that the test can look at the pool and ratings main() returns;
    torch's thread count, which main() sets, is restored afterwards."""
    spec = importlib.util.spec_from_file_location("selfplay_loop", REPO_DIR / "examples" / "selfplay_loop.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # (its dataclass looks its module up there)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    yield module
    torch.set_num_threads(threads)


@pytest.mark.timeout(150)
def test_selfplay_loop_snapshots_rates_and_beats_a_random_player(selfplay_loop, capsys):
    """30k agent moves (31 updates, ~30 s on a busy 2-core machine) of the user's own loop: snapshots every 5
    updates, Elo from the games against them, no illegal move, and a policy that wins > 70% of 100 sampled games
    (seats alternated) against uniformly random play, which the untrained policy (~45%) and random play itself
    (~50%) do not."""
    results = selfplay_loop.main(["--total-steps", "30000", "--snapshot-every", "5", "--seed", "1"])
    assert results["update"] >= 30 and "vs one_ply: win" in capsys.readouterr().out
    pool, elo = results["pool"], results["elo"]
    assert next(iter(pool.snapshots)) == "policy_0@update0" and len(pool.snapshots) >= results["update"] // 5
    assert set(elo.ratings) == {"policy_0", *pool.snapshots} and elo.rating("policy_0") != elo.initial
    assert elo.record_of("policy_0", "policy_0@update0").games > 50  # ~20% of games are against snapshots
    assert results["illegal_moves"] == 0  # play_games raises on an illegal move, so the games had none either
    assert results["random"].games == 100 and results["random"].win_rate > 0.7
    untrained = pool.model("policy_0@update0")
    baseline = selfplay_loop.play_games(
        untrained, selfplay_loop.random_bot(1), connect_four_v3.env, 100, seed=1, deterministic=False
    )
    assert baseline.win_rate < 0.7
