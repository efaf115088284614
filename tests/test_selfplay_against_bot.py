"""AgainstBotEnv against the game played directly: the same players give the same games."""

from __future__ import annotations

import numpy as np
from gymnasium.utils.env_checker import check_env
from pettingzoo.classic import connect_four_v3, tictactoe_v3

from vecfast.selfplay.against_bot import AgainstBotEnv
from vecfast.selfplay.bots import one_ply_connect_four, random_bot
from vecfast.selfplay.matches import play_games


def leftmost(observation) -> int:
    return int(np.flatnonzero(observation["action_mask"])[0])


def rightmost(observation) -> int:
    return int(np.flatnonzero(observation["action_mask"])[-1])


def _play(env: AgainstBotEnv, player, games: int, seed: int) -> tuple[list[float], list[int]]:
    returns, lengths = [], []
    for game in range(games):
        obs, _ = env.reset(seed=seed + game)
        total, moves, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(player(obs))
            total, moves, done = total + reward, moves + 1, terminated or truncated
        returns.append(total)
        lengths.append(moves)
    return returns, lengths


def test_games_against_a_bot_are_the_games_played_directly() -> None:
    for game_module, opponent in [(connect_four_v3, rightmost), (tictactoe_v3, rightmost),
                                  (connect_four_v3, leftmost)]:  # fmt: skip
        env = AgainstBotEnv(game_module.env, lambda seed, opponent=opponent: opponent)
        returns, lengths = _play(env, leftmost, 6, seed=0)
        direct = play_games(leftmost, opponent, game_module.env, 6, seed=0)
        assert returns == list(direct.returns) and lengths == list(direct.lengths)
        assert set(returns) <= {-1.0, 0.0, 1.0}


def test_a_random_learner_loses_to_the_one_ply_bot_and_the_env_passes_gymnasiums_checker() -> None:
    env = AgainstBotEnv(connect_four_v3.env, one_ply_connect_four)
    check_env(env, skip_render_check=True)
    returns, _ = _play(env, random_bot(0), 100, seed=0)
    assert np.mean(np.array(returns) < 0) > 0.8  # the baseline a learner must beat
