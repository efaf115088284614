"""Self-play from random openings: a turn-based PettingZoo game whose games start after random legal moves, checked
against the game played directly, and ``random_opening_moves`` in training (only there: evaluation plays the game
from its start)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3, rps_v2, tictactoe_v3
from pettingzoo.test import api_test
from test_selfplay_train import SMALL

import vecfast
from vecfast.multiagent import RandomOpenings, TurnBasedVectorEnv
from vecfast.multiagent.from_pettingzoo import vector_env_from


def pieces(env: RandomOpenings) -> int:
    return int(np.asarray(env.observe(env.agent_selection)["observation"])[..., :2].sum())


def test_the_game_keeps_pettingzoos_api() -> None:
    api_test(RandomOpenings(connect_four_v3.env(), max_moves=6), num_cycles=200)


def test_openings_are_random_legal_moves_of_every_length_up_to_the_bound() -> None:
    env = RandomOpenings(connect_four_v3.env(), max_moves=6)
    env.reset(seed=0)
    lengths = set()
    for _ in range(200):
        env.reset()
        moves = pieces(env)
        lengths.add(moves)
        # the agent to move is the one whose turn it is after that many moves, with nothing earned yet
        assert env.agent_selection == env.possible_agents[moves % 2]
        assert all(reward == 0 for reward in env._cumulative_rewards.values())
        assert not any(env.terminations.values()) and not any(env.truncations.values())
    assert lengths == set(range(7))


def test_seeded_openings_repeat_and_the_game_plays_on_as_the_game_itself() -> None:
    """A seed draws the opening's length and moves as a generator of that seed draws them; the game played directly
    through the same moves, then on through the same moves as the wrapped one, gives what the wrapped one gives."""
    wrapped, direct = RandomOpenings(connect_four_v3.env(), 8), connect_four_v3.env()
    wrapped.reset(seed=3)
    direct.reset(seed=3)
    rng = np.random.default_rng(3)
    for _ in range(int(rng.integers(0, 9))):
        direct.step(int(rng.choice(np.flatnonzero(direct.observe(direct.agent_selection)["action_mask"]))))
    again = RandomOpenings(connect_four_v3.env(), 8)
    again.reset(seed=3)
    np.testing.assert_array_equal(
        again.observe(again.agent_selection)["observation"], direct.observe(direct.agent_selection)["observation"]
    )
    moves = np.random.default_rng(0)
    while direct.agents:
        assert wrapped.agent_selection == direct.agent_selection
        ours, theirs = wrapped.last(), direct.last()
        np.testing.assert_array_equal(ours[0]["observation"], theirs[0]["observation"])
        assert ours[1:4] == theirs[1:4]
        action = None if theirs[2] or theirs[3] else int(moves.choice(np.flatnonzero(theirs[0]["action_mask"])))
        wrapped.step(action)
        direct.step(action)
    assert not wrapped.agents


def test_an_opening_that_ends_the_game_is_played_again() -> None:
    """Tic-tac-toe ends after 5 moves at the earliest: openings of up to 9 often end it, and are replayed."""
    env = RandomOpenings(tictactoe_v3.env(), max_moves=9)
    env.reset(seed=1)
    for _ in range(100):
        env.reset()
        obs, reward, terminated, truncated, _ = env.last()
        assert not terminated and not truncated and reward == 0 and obs["action_mask"].any()


def test_a_game_without_an_action_mask_is_refused_with_the_reason() -> None:
    env = RandomOpenings(rps_v2.env(), max_moves=3)
    with pytest.raises(ValueError, match="no action_mask"):
        for seed in range(20):  # some seeds draw an opening of no moves
            env.reset(seed=seed)


def test_matches_from_random_openings_step_as_turn_based_slots() -> None:
    env = vector_env_from(connect_four_v3, num_matches=4, random_opening_moves=6)
    assert isinstance(env, TurnBasedVectorEnv)
    obs, info = env.reset(seed=0)
    acting = info["active"]
    assert acting.sum() == 4  # one agent to move per match, whichever the opening left to move
    assert {int(obs["observation"][s].sum()) for s in np.flatnonzero(acting)} != {0}
    for _ in range(30):
        masks = obs["action_mask"]
        actions = np.array([int(np.flatnonzero(m)[0]) if m.any() else 0 for m in masks])
        obs, rewards, terminated, truncated, info = env.step(actions)
    env.close()


def test_training_starts_its_games_from_openings_and_evaluation_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []  # the openings' bound of every wrapper built

    class Counted(RandomOpenings):
        def __init__(self, env: object, max_moves: int) -> None:
            made.append(max_moves)
            super().__init__(env, max_moves)

    monkeypatch.setattr("vecfast.multiagent.from_pettingzoo.RandomOpenings", Counted)
    result = vecfast.train(
        connect_four_v3, algo="ppo", total_env_steps=600, run_dir=tmp_path / "run", random_opening_moves=4, **SMALL
    )
    assert result.stats["env_steps"] >= 600
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert config["random_opening_moves"] == 4  # the caller's
    assert config["opponent_sampling"] == "pfsp_hard"  # the preset's
    assert made == [4] * 4  # every one of training's 4 matches
    evaluated = vecfast.evaluate(tmp_path / "run", episodes=4, opponent="random")
    assert evaluated.episodes == 4 and made == [4] * 4  # evaluation's games start from the empty board


@pytest.mark.parametrize(
    "env",
    ["CartPole-v1", "vecfast.envs.doom.doom_duel_v0"],
    ids=["single-agent", "simultaneous moves"],
)
def test_openings_where_no_turns_are_taken_are_refused(tmp_path: Path, env: str) -> None:
    with pytest.raises(ValueError, match="random_opening_moves=2"):
        vecfast.train(env, total_env_steps=100, run_dir=tmp_path / "run", random_opening_moves=2, **SMALL)


@pytest.mark.parametrize("given", [connect_four_v3, "pettingzoo.classic.connect_four_v3"], ids=["module", "name"])
def test_connect_four_has_a_preset_and_the_callers_keys_beat_it(given: object) -> None:
    from vecfast.trainers.registry import resolve
    from vecfast.trainers.run.defaults import CONNECT_FOUR_PRESET, ConfigLayers
    from vecfast.trainers.run.env_source import EnvSource

    name = EnvSource.of(given).given_name
    assert name == "pettingzoo.classic.connect_four_v3"
    for algo in ("ppo", "appo", "ddppo"):
        cfg = ConfigLayers(resolve(algo), name).config()
        assert {key: getattr(cfg, key) for key in CONNECT_FOUR_PRESET} == CONNECT_FOUR_PRESET
    cfg = ConfigLayers(resolve("ppo"), name, user={"random_opening_moves": 0}).config()
    assert cfg.random_opening_moves == 0 and cfg.opponent_sampling == "pfsp_hard"
    assert ConfigLayers(resolve("ppo"), EnvSource.of(tictactoe_v3).given_name).config().random_opening_moves == 0
