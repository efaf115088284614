"""Atari through ale-py's own AtariVectorEnv: its batched async mode as vecfast's send/recv (each env's trajectory
that of the same env stepped synchronously), APPO double-buffering it without a process pool, and the Atari recipe
(CleanRL's settings) for ALE/ ids."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from ale_py.vector_env import AtariVectorEnv

from vecfast.trainers import train
from vecfast.trainers.run.defaults import ATARI_PRESET
from vecfast.vector.batched_send_recv import BatchedSendRecv

STEPS = 30
# the single games these tests compare step for step: without sticky actions
NO_STICKY_ACTIONS = {"repeat_action_probability": 0.0}


def action(env: int, t: int) -> int:
    return (env * 7 + t * 3) % 6


def test_each_env_steps_through_the_async_mode_as_it_does_synchronously():
    reference = AtariVectorEnv("pong", num_envs=4, num_threads=2)
    obs, _ = reference.reset(seed=5)
    expected = {i: [obs[i].copy()] for i in range(4)}
    for t in range(STEPS):
        obs, *_ = reference.step(np.array([action(i, t) for i in range(4)]))
        for i in range(4):
            expected[i].append(obs[i].copy())
    env = BatchedSendRecv(AtariVectorEnv("pong", num_envs=4, batch_size=2, num_threads=2))
    env.async_reset(seed=5)
    steps, got = dict.fromkeys(range(4), 0), {i: [] for i in range(4)}
    while min(steps.values()) <= STEPS:
        obs, _, _, _, info = env.recv()
        assert len(info["env_id"]) == 2
        for row, i in enumerate(info["env_id"]):
            got[i].append(obs[row].copy())
        env.send(np.array([action(i, steps[i]) for i in info["env_id"]]), info["env_id"])
        for i in info["env_id"]:
            steps[i] += 1
    for i in range(4):
        np.testing.assert_array_equal(np.stack(got[i][: STEPS + 1]), np.stack(expected[i]))
    reference.close()
    env.close()


def test_send_acts_on_the_envs_of_the_last_recv_only():
    env = BatchedSendRecv(AtariVectorEnv("pong", num_envs=4, batch_size=2, num_threads=1))
    env.async_reset(seed=0)
    with pytest.raises(RuntimeError, match=r"send\(\) before recv\(\)"):
        env.send(np.zeros(2, np.int64), np.array([0, 1]))
    _, _, _, _, info = env.recv()
    others = np.setdiff1d(np.arange(4), info["env_id"])
    with pytest.raises(ValueError, match="this simulator acts on the envs of the last recv"):
        env.send(np.zeros(2, np.int64), others)
    env.close()


def test_appo_on_pong_double_buffers_ales_vector_env_with_the_atari_recipe(tmp_path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "without double buffering (about half as fast)" would fail
        result = train("ALE/Pong-v5", algo="appo", total_env_steps=2048, run_dir=tmp_path / "run", seed=0)
    written = json.loads((tmp_path / "run" / "config.json").read_text())
    assert written["vectorization"] == "vector_entry_point" and written["num_envs"] == 8
    recipe = {key: list(value) if isinstance(value, tuple) else value for key, value in ATARI_PRESET.items()}
    assert {key: written["config"][key] for key in recipe} == recipe
    assert result.stats["env_frames"] == 4 * result.stats["env_steps"]


def test_appo_double_buffers_envpools_own_async_api(tmp_path: Path):
    """EnvPool's vector env (async_reset without a seed: seeded when made) is APPO's env as it is."""
    envpool = pytest.importorskip("envpool")

    def pong() -> object:
        return envpool.make_gymnasium("Pong-v5", num_envs=4, batch_size=2, seed=3)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        result = train(pong, algo="appo", total_env_steps=1024, run_dir=tmp_path / "run", num_workers=2,
                       num_envs_per_worker=2, rollout=32, batch_size=64, use_rnn=False)  # fmt: skip
    assert result.stats["env_steps"] >= 1024
    assert json.loads((tmp_path / "run" / "config.json").read_text())["env"] == "AtariGymnasiumEnvPool"


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_atari_frames_are_gymnasiums_atari_preprocessing_without_opencv(game: str):
    """The single env that videos and evaluation step, against gymnasium's AtariPreprocessing (which needs cv2)
    with the vector env's settings: the same observations, rewards and ends, step for step."""
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing

    from vecfast.envs.atari import AtariFrames, single_env_kwargs

    ours = AtariFrames(gym.make(game, **single_env_kwargs(NO_STICKY_ACTIONS)))
    reference = AtariPreprocessing(gym.make(game, **single_env_kwargs(NO_STICKY_ACTIONS)), noop_max=30, screen_size=84)
    assert ours.observation_space == reference.observation_space
    rng = np.random.default_rng(0)
    for episode in range(2):
        obs, info = ours.reset(seed=episode)
        expected, expected_info = reference.reset(seed=episode)
        np.testing.assert_array_equal(obs, expected)
        assert info == expected_info
        for _ in range(400):
            action = int(rng.integers(ours.action_space.n))
            step, expected_step = ours.step(action), reference.step(action)
            np.testing.assert_array_equal(step[0], expected_step[0])
            assert step[1:] == expected_step[1:]
            if step[2] or step[3]:
                break
    ours.close()
    reference.close()


def test_videos_of_an_atari_run_show_the_policy_what_it_trained_on(tmp_path: Path):
    """The batched simulator renders nothing: single games under :class:`~vecfast.envs.atari.AtariFrames` and a
    4-frame stack give the policy its 4x84x84 observations while they render, quietly (no ALE banner), with what
    ``pip install 'vecfast[all]'`` installs and nothing else (no OpenCV: only the dev tools bring it)."""
    from helpers import decoded, without_modules_outside

    train("ALE/Pong-v5", algo="ppo", total_env_steps=1024, run_dir=tmp_path / "run", seed=0)
    (tmp_path / "site").mkdir()
    enjoy = subprocess.run(
        [sys.executable, "-m", "vecfast", "enjoy", str(tmp_path / "run"), "--episodes", "1", "--max-steps", "40",
         "--video", str(tmp_path / "pong.mp4")],
        env=without_modules_outside("vecfast[all]", tmp_path / "site"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert enjoy.returncode == 0, enjoy.stderr
    assert "cv2" in (tmp_path / "site" / "sitecustomize.py").read_text()
    meta, frames = decoded(tmp_path / "pong.mp4")
    assert meta["size"] == (160, 210) and len(frames) == 40
    assert "A.L.E" not in enjoy.stderr


@pytest.mark.parametrize(
    ("env_kwargs", "sticky"), [({}, 0.25), ({"repeat_action_probability": 0.0, "full_action_space": True}, 0.0)]
)
def test_rendering_games_play_the_game_the_run_trained_on(env_kwargs: dict, sticky: float):
    """Videos and rendered evaluations of an ``ALE/`` run played without sticky actions (v5's 0.25) and dropped
    the run's env keyword arguments (a full action set: actions the rendering game did not have)."""
    from vecfast.trainers.run.env_source import EnvSource

    source = EnvSource.of("ALE/Pong-v5", env_kwargs)
    trained = source.build(2, "vector_entry_point")
    rendering = source.build(1, "vector_entry_point", render_mode="rgb_array")
    try:
        assert rendering.get_attr("spec")[0].kwargs["repeat_action_probability"] == sticky
        assert rendering.single_action_space == trained.single_action_space
        assert rendering.single_observation_space == trained.single_observation_space
    finally:
        rendering.close()
        trained.close()


def test_a_rendering_game_refuses_preprocessing_it_cannot_reproduce():
    from vecfast.trainers.run.env_source import EnvSource

    with pytest.raises(ValueError, match="stack_num"):
        EnvSource.of("ALE/Pong-v5", {"stack_num": 2}).build(1, "vector_entry_point", render_mode="rgb_array")


def test_ales_frame_counters_and_lives_are_not_an_episodes_metrics():
    """``vecfast evaluate`` on an Atari run reported ``lives``, ``episode_frame_number`` and ``frame_number``:
    ALE's bookkeeping in every info, not figures of the episode."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    from vecfast.envs.atari import as_the_vector_env_sees_it, single_env_kwargs
    from vecfast.trainers.sampling.episodes import episode_metrics

    env = SyncVectorEnv(
        [lambda: as_the_vector_env_sees_it(gym.make("ALE/Breakout-v5", **single_env_kwargs(NO_STICKY_ACTIONS)))]
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5000):
        _, _, terminated, truncated, info = env.step(rng.integers(4, size=1))
        if terminated[0] or truncated[0]:
            break
    assert terminated[0] and {"lives", "episode_frame_number", "frame_number"} <= set(info)
    assert episode_metrics(info, 0, AutoresetMode.NEXT_STEP) == {}
    env.close()
