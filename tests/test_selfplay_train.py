"""``vecfast.train`` on PettingZoo envs: the module, a function or an env becomes a vector env of agent slots, and
APPO self-plays against snapshots with Elo in the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from pettingzoo.classic import connect_four_v3, tictactoe_v3

import vecfast
from vecfast.multiagent import TurnBasedVectorEnv
from vecfast.multiagent.from_pettingzoo import vector_env_from

SMALL = {
    "num_workers": 1,
    "num_envs_per_worker": 4,
    "use_rnn": False,
    "encoder_mlp_layers": (32,),
    "rollout": 8,
    "batch_size": 64,
    "snapshot_every_updates": 3,
    "print_every_sec": None,
    "seed": 0,
}


def test_train_self_plays_a_pettingzoo_module_with_elo_in_the_metrics(tmp_path: Path) -> None:
    result = vecfast.train(connect_four_v3, total_env_steps=3_000, run_dir=tmp_path / "run", **SMALL)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["snapshots"] >= 2 and "elo" in lines[-1] and lines[-1]["games_vs_latest"] > 0
    assert result.stats["env_steps"] >= 3_000
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["env"] == "pettingzoo.classic.connect_four_v3"  # the module, which evaluate makes again
    against = {opponent: vecfast.evaluate(tmp_path / "run", episodes=4, opponent=opponent) for opponent in
               ("random", "initial", "vecfast.selfplay.bots:one_ply_connect_four")}  # fmt: skip
    for result in (*against.values(), vecfast.evaluate(tmp_path / "run", episodes=4)):  # default: random
        assert result.metrics["win_rate"] + result.metrics["draw_rate"] + result.metrics["loss_rate"] == 1.0


@pytest.mark.parametrize(
    ("source", "matches"),
    [(tictactoe_v3, 3), (tictactoe_v3.env, 3), (tictactoe_v3.env(), 1)],
    ids=["module", "function", "env"],
)
def test_a_module_a_function_or_an_env_make_matches_of_agent_slots(source: object, matches: int) -> None:
    env = vector_env_from(source, num_matches=3)
    assert isinstance(env, TurnBasedVectorEnv) and env.num_envs == 2 * matches
    env.close()


def test_a_function_that_makes_neither_kind_of_env_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="expected a gymnasium VectorEnv or a PettingZoo"):
        vecfast.train(lambda: gym.make("CartPole-v1"), total_env_steps=100, run_dir=tmp_path / "run", **SMALL)


@pytest.mark.parametrize("algo", ["ppo", "ddppo"])
def test_a_turn_based_game_under_a_scheme_that_steps_every_slot_is_an_error(tmp_path: Path, algo: str) -> None:
    """Old behaviour: sync PPO trained one policy on every slot's rows, the rows of slots waiting for their turn
    (their actions ignored) included."""
    kwargs = {"num_processes": 1} if algo == "ddppo" else {}
    with pytest.raises(ValueError, match="a turn-based game .* act in turns: train it with algo='appo'"):
        vecfast.train(connect_four_v3, algo=algo, total_env_steps=100, run_dir=tmp_path / "run", **SMALL, **kwargs)
