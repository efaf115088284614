"""Games of PettingZoo connect four between a policy and an opponent: the bots, ``play_games`` and
``vecfast.evaluate(..., opponent=...)`` with win, draw and loss rates."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from pettingzoo.classic import connect_four_v3
from pettingzoo.utils.env_logger import EnvLogger
from pettingzoo.utils.wrappers import BaseWrapper

import vecfast
from vecfast.multiagent import TurnBasedVectorEnv
from vecfast.selfplay.bots import TacticsCount, count_connect_four_tactics, one_ply_connect_four, random_bot
from vecfast.selfplay.matches import play_games, play_matches
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig

SMALL = {
    "num_workers": 1,
    "num_envs_per_worker": 4,
    "use_rnn": False,
    "encoder_mlp_layers": (32,),
    "rollout": 8,
    "batch_size": 64,
    "print_every_sec": None,
    "seed": 0,
}


def connect_four_policy(seed: int = 0, use_rnn: bool = False) -> ActorCritic:
    env = connect_four_v3.env()
    cfg = TrainConfig.from_overrides(use_rnn=use_rnn, rnn_size=16, encoder_mlp_layers=(32,), rollout=4)
    torch.manual_seed(seed)
    return ActorCritic(env.observation_space("player_0"), env.action_space("player_0"), cfg)


def board(mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """The observation of the player to move: (row, column) pieces, row 0 the top; checks they rest on others."""
    planes = np.zeros((6, 7, 2), dtype=np.int8)
    for plane, pieces in enumerate((mine, theirs)):
        for row, column in pieces:
            planes[row, column, plane] = 1
    filled = planes.any(axis=-1)
    assert not (filled[:-1] & ~filled[1:]).any(), "a piece floats over an empty cell"
    return {"observation": planes, "action_mask": (~filled[0]).astype(np.int8)}


@pytest.mark.parametrize(
    ("mine", "theirs", "move"),
    [
        ([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1)], 3),
        ([(5, 2), (4, 2), (3, 2)], [(5, 3), (5, 4)], 2),
        ([(5, 0), (4, 1), (3, 2), (5, 3)], [(5, 1), (5, 2), (4, 2), (4, 3), (3, 3)], 3),
        ([(5, 6), (4, 5), (3, 4), (5, 3)], [(5, 5), (5, 4), (4, 4), (4, 3), (3, 3)], 3),
    ],
    ids=["horizontal", "vertical", "diagonal", "anti-diagonal"],
)
def test_one_ply_takes_a_winning_move(mine: list, theirs: list, move: int) -> None:
    assert one_ply_connect_four(seed=0)(board(mine, theirs)) == move


def test_one_ply_blocks_the_opponents_winning_move() -> None:
    assert one_ply_connect_four(seed=0)(board([(4, 0), (4, 1)], [(5, 0), (5, 1), (5, 2)])) == 3


def test_one_ply_wins_rather_than_blocks() -> None:
    observation = board([(5, 6), (4, 6), (3, 6)], [(5, 0), (5, 1), (5, 2)])
    assert all(one_ply_connect_four(seed=s)(observation) == 6 for s in range(5))


def test_without_a_win_or_a_block_the_bots_play_a_random_legal_move() -> None:
    full = [(r, 3) for r in range(0, 6, 2)]
    observation = board(full, [(r, 3) for r in range(1, 6, 2)])  # column 3 is full
    for bot in (one_ply_connect_four, random_bot):
        moves = {bot(seed=s)(observation) for s in range(40)}
        assert moves == {0, 1, 2, 4, 5, 6}


def test_in_real_games_one_ply_plays_every_winning_move_it_has() -> None:
    """Checked against the env itself: a move wins if the game stepped with it rewards the mover."""
    env, bot, rival = connect_four_v3.env(), one_ply_connect_four(seed=1), random_bot(seed=2)
    chances = 0
    for game in range(30):
        env.reset(seed=game)
        me = env.possible_agents[game % 2]
        for agent in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            if agent != me:
                env.step(rival(observation))
                continue
            winning = [c for c in np.flatnonzero(observation["action_mask"]) if wins(env, int(c))]
            move = bot(observation)
            chances += bool(winning)
            assert not winning or move in winning
            env.step(move)
    assert chances >= 10


def wins(env: Any, column: int) -> bool:
    """Whether the player to move wins by playing ``column``, by the env's own rules, on a copy of its board."""
    game, trial = env.unwrapped, connect_four_v3.raw_env()
    trial.reset()
    trial.board, trial.agent_selection = list(game.board), game.agent_selection
    trial.step(column)
    return trial.rewards[game.agent_selection] > 0


def test_tactics_are_counted_as_the_one_ply_bot_plays_them_and_random_play_misses_them() -> None:
    counts = {}
    for name, player in {"one_ply": one_ply_connect_four(seed=0), "random": random_bot(seed=0)}.items():
        counts[name] = TacticsCount()
        watched = count_connect_four_tactics(player, counts[name])
        play_games(watched, random_bot(seed=1), connect_four_v3.env, 100, seed=0)
    one_ply, random_play = counts["one_ply"], counts["random"]
    assert one_ply.wins_available >= 20 and one_ply.blocks_needed >= 20
    assert one_ply.win_taken_rate == 1.0 and one_ply.block_rate == 1.0
    assert random_play.wins_available >= 20 and random_play.blocks_needed >= 20
    assert random_play.win_taken_rate < 0.5 and random_play.block_rate < 0.5


def test_one_ply_beats_random_over_200_games() -> None:
    """Measured: 0.95 (0.945-0.96 over seeds 0-3)."""
    results = play_games(one_ply_connect_four(seed=0), random_bot(seed=1), connect_four_v3.env, 200, seed=0)
    assert results.games == 200 and results.win_rate >= 0.85
    assert results.win_rate + results.draw_rate + results.loss_rate == pytest.approx(1.0)


def test_seats_alternate_game_by_game() -> None:
    """Counted by the policy itself: its first observation of a game shows an empty board if it moves first."""
    first_moves: list[bool] = []
    rival = random_bot(seed=0)

    def counting(observation: Mapping[str, Any]) -> int:
        if not observation["observation"][..., 0].any():  # its first move of the game
            first_moves.append(not observation["observation"].any())
        return rival(observation)

    results = play_games(counting, random_bot(seed=1), connect_four_v3.env, 7, seed=0)
    assert first_moves == [True, False, True, False, True, False, True]
    assert results.policy_first == tuple(first_moves)


def test_each_game_starts_the_policys_recurrent_state_afresh() -> None:
    """Against a fixed opponent, games 0 and 2 (and 1 and 3) repeat move for move: no state carries across games
    (the actor's weights are scaled up so that its choices turn on the recurrent state)."""
    games: list[list[int | None]] = []

    class Recording(BaseWrapper):
        def reset(self, seed: int | None = None, options: dict | None = None) -> None:
            games.append([])
            super().reset(seed=seed, options=options)

        def step(self, action: int | None) -> None:
            games[-1].append(action)
            super().step(action)

    def lowest_column(observation: Mapping[str, Any]) -> int:
        return int(np.flatnonzero(observation["action_mask"])[0])

    policy = connect_four_policy(seed=2, use_rnn=True)
    with torch.no_grad():
        policy.actor.linear.weight.mul_(100)
    play_games(policy, lowest_column, lambda: Recording(connect_four_v3.env()), 4, seed=None)
    assert len(games) == 4 and games[0] == games[2] and games[1] == games[3]


def test_an_untrained_sampled_policy_against_itself_is_balanced() -> None:
    policy = connect_four_policy(use_rnn=True)
    result = vecfast.evaluate(policy, env=connect_four_v3, opponent=policy, episodes=200, deterministic=False)
    assert abs(result.win_rate - result.loss_rate) < 0.2
    assert result.win_rate + result.draw_rate + result.loss_rate == pytest.approx(1.0)


def test_evaluate_against_random_never_plays_an_illegal_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connect four ends a game on an illegal move (the mover loses, -1); the policy prefers column 3, so the
    mask must steer it once that column is full."""

    def illegal() -> None:
        raise AssertionError("an illegal move")

    monkeypatch.setattr(EnvLogger, "warn_on_illegal_move", illegal)
    policy = connect_four_policy()
    with torch.no_grad():
        policy.actor.linear.bias[3] = 20.0
    result = vecfast.evaluate(policy, env=connect_four_v3, opponent="random", episodes=20)
    assert result.episodes == 20 and set(result.returns) <= {-1.0, 0.0, 1.0}
    assert result.win_rate + result.draw_rate + result.loss_rate == pytest.approx(1.0)
    assert result.mean_return == pytest.approx(result.win_rate - result.loss_rate)
    assert all(n >= 4 for n in result.lengths)  # the policy's own moves: four in a row at least to win
    assert {"win_rate", "draw_rate", "loss_rate"} <= set(result.to_dict()["metrics"])


def test_a_bot_opponent_gets_observations_with_the_action_mask() -> None:
    seen: list[Mapping[str, Any]] = []
    rival = random_bot(seed=0)

    def bot(observation: Mapping[str, Any]) -> int:
        seen.append(observation)
        return rival(observation)

    vecfast.evaluate(connect_four_policy(), env=connect_four_v3.env, opponent=bot, episodes=4)
    assert seen and all("action_mask" in obs and obs["action_mask"].any() for obs in seen)


@pytest.mark.parametrize(
    "env",
    ["CartPole-v1", lambda: gym.make_vec("CartPole-v1", num_envs=1), None],
    ids=["id", "vector-env-function", "none"],
)
def test_an_opponent_needs_a_pettingzoo_env(env: str | Callable[[], Any] | None) -> None:
    with pytest.raises(ValueError, match="PettingZoo"):
        vecfast.evaluate(connect_four_policy(), env=env, opponent="random", episodes=2)


def test_initial_needs_the_policys_config() -> None:
    with pytest.raises(ValueError, match="initial"):
        vecfast.evaluate(connect_four_policy(), env=connect_four_v3, opponent="initial", episodes=2)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("selfplay") / "run"
    vecfast.train(connect_four_v3, total_env_steps=500, run_dir=path, **SMALL)
    return path


def test_a_run_plays_the_initial_model_and_a_checkpoint(run_dir: Path) -> None:
    initial = vecfast.evaluate(run_dir, env=connect_four_v3, opponent="initial", episodes=10, seed=3)
    assert initial == vecfast.evaluate(run_dir, env=connect_four_v3, opponent="initial", episodes=10, seed=3)
    assert initial.win_rate + initial.draw_rate + initial.loss_rate == pytest.approx(1.0)
    itself = vecfast.evaluate(run_dir, env=connect_four_v3, opponent=run_dir, episodes=10)
    assert itself.episodes == 10 and itself.win_rate + itself.draw_rate + itself.loss_rate == pytest.approx(1.0)


def test_a_run_of_a_module_plays_its_own_game_without_env(run_dir: Path) -> None:
    """Old behaviour: a run of a module needed env= (its config.json named only the module's short name)."""
    assert vecfast.evaluate(run_dir, opponent="random", episodes=4, seed=1) == vecfast.evaluate(
        run_dir, env=connect_four_v3, opponent="random", episodes=4, seed=1
    )
    with pytest.raises(ValueError, match="games against an opponent need env="):
        vecfast.evaluate(vecfast.load_policy(run_dir), opponent="random", episodes=2)


@pytest.mark.parametrize("use_rnn", [False, True])
def test_games_on_the_vector_env_are_the_reference_loops_games(use_rnn: bool) -> None:
    """One match of TurnBasedVectorEnv under the fixed-opponent plan plays, game for game, what PettingZoo's own
    agent_iter loop plays: the same seats, moves, returns (a recurrent policy's state restarting each game)."""
    policy = connect_four_policy(seed=3, use_rnn=use_rnn)
    reference = play_games(policy, random_bot(seed=1), connect_four_v3.env, 12, seed=0)
    env = TurnBasedVectorEnv([connect_four_v3.env])
    on_slots = play_matches(policy, random_bot(seed=1), env, 12, seed=0)
    env.close()
    assert on_slots == reference
    assert len(set(reference.outcomes)) >= 2  # not one game repeated


def test_many_matches_play_their_games_at_once_and_alternate_seats() -> None:
    env = TurnBasedVectorEnv([connect_four_v3.env] * 4)
    results = play_matches(one_ply_connect_four(seed=0), random_bot(seed=1), env, 60, seed=0)
    env.close()
    assert results.games == 60 and sum(results.policy_first) == 30
    assert results.win_rate >= 0.8  # one-ply against random: 0.95 in play_games' 200 games
    with pytest.raises(ValueError, match="the policy chose action 0, which the action mask"):
        play_matches(lambda observation: 0, random_bot(0), TurnBasedVectorEnv([connect_four_v3.env]), 20)
