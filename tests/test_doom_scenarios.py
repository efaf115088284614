"""VizDoom single-player scenarios: spaces, dynamics, and that games never outlive their env."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import partial

import gymnasium as gym
import numpy as np
import psutil
import pytest
from helpers import descendants, shm_entries, vizdoom_shm_left, wait_gone

import vecfast
from vecfast.envs.registration import DOOM_SCENARIOS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def fresh_cwd(tmp_path, monkeypatch):
    """An empty working directory: games must neither race nor write into it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def game_processes() -> list[psutil.Process]:
    return [p for p in descendants() if "vizdoom" in p.name()]


@pytest.mark.parametrize("env_id", [f"vecfast/{name}" for name in DOOM_SCENARIOS])
def test_scenario_spaces_and_steps(env_id, fresh_cwd):
    env = gym.make(env_id)
    try:
        obs, info = env.reset(seed=1)
        assert env.observation_space.contains(obs)
        assert obs["screen"].shape == (3, 72, 128)
        assert isinstance(env.action_space, gym.spaces.Discrete)
        for _ in range(20):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs)
            assert isinstance(reward, float)
            if terminated or truncated:
                break
    finally:
        env.close()
    assert list(fresh_cwd.iterdir()) == []


def test_resolution_and_measurements_are_configurable(fresh_cwd):
    env = gym.make("vecfast/DoomDefendTheCenter-v0", resolution=(64, 48))
    try:
        obs, _ = env.reset(seed=0)
        assert obs["screen"].shape == (3, 48, 64)
        # AMMO2 and HEALTH, scaled to O(1): full health is 1.0 at the start.
        assert obs["measurements"].shape == (2,)
        assert obs["measurements"][1] == pytest.approx(1.0)
    finally:
        env.close()


def test_same_seed_same_episode(fresh_cwd):
    def rollout() -> list[np.ndarray]:
        env = gym.make("vecfast/DoomBasic-v0")
        try:
            obs, _ = env.reset(seed=7)
            frames = [obs["screen"]]
            for action in [1, 1, 2, 3, 0, 3, 3, 2]:
                obs, *_ = env.step(action)
                frames.append(obs["screen"])
            return frames
        finally:
            env.close()

    for a, b in zip(rollout(), rollout(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_episode_end_reports_return_and_length(fresh_cwd):
    env = gym.make("vecfast/DoomBasic-v0")
    try:
        obs, _ = env.reset(seed=0)
        total, steps = 0.0, 0
        while True:
            previous = obs
            obs, reward, terminated, truncated, info = env.step(0)  # no-op until the 300-tic timeout
            total += reward
            steps += 1
            if terminated or truncated:
                break
        assert truncated and not terminated
        assert info == {"episode_return": total, "episode_length": steps}
        # the finished game has no state: the last observation again, but as new data
        for key in obs:
            assert np.array_equal(obs[key], previous[key]) and not np.shares_memory(obs[key], previous[key])
    finally:
        env.close()


def test_close_ends_the_game_process(fresh_cwd):
    env = gym.make("vecfast/DoomBasic-v0")
    env.reset(seed=0)
    games = game_processes()
    assert len(games) == 1
    env.close()
    assert wait_gone(games, timeout=5) == []


def test_many_games_start_at_once_in_a_fresh_directory(fresh_cwd):
    """VizDoom races on creating ./_vizdoom/; vecfast gives each game its own directory."""
    envs = vecfast.AsyncSharedMemVectorEnv([partial(gym.make, "vecfast/DoomBasic-v0")] * 8, num_workers=4)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs["screen"].shape == (8, 3, 72, 128)
        for _ in range(5):
            envs.step(envs.action_space.sample())
    finally:
        envs.close()
    assert list(fresh_cwd.iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_games_die_with_a_killed_owner(sig, fresh_cwd):
    script = textwrap.dedent(
        """
        import time, gymnasium as gym, psutil, vecfast
        envs = [gym.make("vecfast/DoomBasic-v0") for _ in range(2)]
        for env in envs:
            env.reset(seed=0)
        print(" ".join(str(p.pid) for p in psutil.Process().children(recursive=True)), flush=True)
        print(" ".join(env.unwrapped._process.home for env in envs), flush=True)
        time.sleep(600)
        """
    )
    shm_before = shm_entries()
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in owner.stdout.readline().split()]
        procs = [psutil.Process(p) for p in pids]
        assert sum("vizdoom" in p.name() for p in procs) == 2
        homes = owner.stdout.readline().split()
        assert all(os.path.isdir(home) for home in homes)
        owner.send_signal(sig)
        owner.wait(timeout=60)  # a busy 2-core machine: the owner's exit handlers close the games one by one
        assert wait_gone(procs, timeout=30) == []
        assert vizdoom_shm_left(shm_before) == set()
        # The games' private directories go too: at exit, or by the reaper once the owner is gone.
        deadline = time.monotonic() + 30
        while any(os.path.exists(home) for home in homes) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [home for home in homes if os.path.exists(home)]
    finally:
        owner.kill()
        owner.wait()
    assert list(fresh_cwd.iterdir()) == []


def test_an_owner_killed_before_its_games_start_leaves_no_directory(tmp_path):
    """A game's private directory is made when the game starts: an owner SIGKILLed before then (no exit handlers,
    no reaper told of the env) left one empty ``vecfast-doom-*`` directory per env in the temp dir."""
    script = textwrap.dedent(
        """
        import time, gymnasium as gym, vecfast
        envs = [gym.make("vecfast/DoomBasic-v0") for _ in range(2)]
        print("made", flush=True)
        time.sleep(600)
        """
    )
    environ = {**os.environ, "TMPDIR": str(tmp_path)}
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=environ)
    try:
        assert owner.stdout.readline().strip() == "made"
    finally:
        owner.kill()
        owner.wait()
    assert list(tmp_path.iterdir()) == []


def test_a_doom_env_renders_at_its_step_rate_so_videos_play_in_real_time() -> None:
    """One frame per step of frame_skip tics: at Doom's 35 tics/s that is 35 / frame_skip frames/s (videos were
    written at 35 frames/s, and played 4x fast)."""
    env = gym.make("vecfast/DoomBasic-v0")
    try:
        skip = env.unwrapped.frame_skip
        assert skip > 1 and env.metadata["render_fps"] == 35 / skip
    finally:
        env.close()
