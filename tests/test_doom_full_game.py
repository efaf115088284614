"""Full-game Doom against built-in bots: bots, the multi-head action mapping, reward shaping."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import vizdoom as vzd
from helpers import descendants, wait_gone

import vecfast  # noqa: F401  (registers the ids)
from vecfast.envs.doom import DEFAULT_REWARD_SHAPING

pytestmark = pytest.mark.timeout(120)
NOOP = np.array([0, 0, 0, 0, 0, 0, 10])


@pytest.fixture(autouse=True)
def fresh_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(("env_id", "players"), [("vecfast/DoomDuelBots-v0", 2), ("vecfast/DoomDeathmatchBots-v0", 8)])
def test_spaces_bots_and_close(env_id, players):
    env = gym.make(env_id, timelimit_minutes=0.1)
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        assert env.action_space == gym.spaces.MultiDiscrete([3, 3, 2, 2, 2, 8, 21])
        assert env.unwrapped.frame_skip == 2
        obs, reward, terminated, truncated, info = env.step(NOOP)
        assert env.observation_space.contains(obs)
        assert env.unwrapped.game.get_game_variable(vzd.GameVariable.PLAYER_COUNT) == players
        assert set(info) >= {"frags", "deaths", "damage_dealt", "damage_taken", "hits", "hits_taken"}
        games = [p for p in descendants() if "vizdoom" in p.name()]
    finally:
        env.close()
    assert games and wait_gone(games, timeout=5) == []


@pytest.mark.parametrize("aim", [0, 3, 10, 14, 20])
def test_aim_head_turns_by_its_angle(aim):
    env = gym.make("vecfast/DoomDuelBots-v0")
    game = env.unwrapped.game
    try:
        env.reset(seed=0)
        for _ in range(5):  # let the player spawn
            env.step(NOOP)
        before = game.get_game_variable(vzd.GameVariable.ANGLE)
        action = NOOP.copy()
        action[6] = aim
        env.step(action)
        turned = (game.get_game_variable(vzd.GameVariable.ANGLE) - before + 180) % 360 - 180
        # Positive aim turns right, i.e. decreases Doom's angle.
        assert turned == pytest.approx(-(aim - 10) * 1.25, abs=0.05)
    finally:
        env.close()


def test_reward_is_the_shaping_coefficients_times_the_figures():
    coefficients = dict.fromkeys(DEFAULT_REWARD_SHAPING, 0.0) | {"frag": 2.0, "death": -3.0, "damage_taken": -0.5}
    env = gym.make("vecfast/DoomDeathmatchBots-v0", timelimit_minutes=0.15, reward_shaping=coefficients)
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=0)
        total = 0.0
        while True:
            action = rng.integers(0, env.action_space.nvec)
            _, reward, terminated, truncated, info = env.step(action)
            total += reward
            if terminated or truncated:
                break
        assert truncated and not terminated
        expected = 2.0 * info["frags"] - 3.0 * info["deaths"] - 0.5 * info["damage_taken"]
        assert total == pytest.approx(expected)
        assert info["episode_return"] == pytest.approx(total)
        assert info["damage_taken"] > 0  # seven bots for 9 s: the figure was exercised
    finally:
        env.close()


def test_shaping_can_change_on_a_running_env_and_rejects_unknown_keys():
    env = gym.make("vecfast/DoomDuelBots-v0")
    try:
        env.unwrapped.set_reward_shaping({"frag": 5.0})
        assert env.unwrapped.reward_shaping["frag"] == 5.0
        with pytest.raises(ValueError, match="unknown reward shaping keys"):
            env.unwrapped.set_reward_shaping({"frags": 1.0})
    finally:
        env.close()
