"""``vecfast.train`` on PettingZoo envs: the module, a function or an env becomes a vector env of agent slots, and
APPO and sync PPO self-play against snapshots with Elo in the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from pettingzoo.classic import connect_four_v3, tictactoe_v3

import vecfast
from vecfast.multiagent import TurnBasedVectorEnv
from vecfast.multiagent.from_pettingzoo import vector_env_from
from vecfast.selfplay import plan_for
from vecfast.selfplay.league import LEARNER, League
from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.schemes.synchronous import SyncTrainer

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


@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_train_self_plays_a_pettingzoo_module_with_elo_in_the_metrics(tmp_path: Path, algo: str) -> None:
    result = vecfast.train(connect_four_v3, algo=algo, total_env_steps=3_000, run_dir=tmp_path / "run", **SMALL)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["snapshots"] >= 2 and "elo" in lines[-1] and lines[-1]["games_vs_latest"] > 0
    # the score the README and the progress line show: over the last games against snapshots, however many
    # snapshots came between (it waited for a whole window since the last snapshot, so it never showed)
    assert 0 <= lines[-1]["score_vs_snapshots"] <= 1 and 1 <= lines[-1]["score_vs_snapshots_games"] <= 100
    assert not {"match_id", "active", "agent_id"} & set(lines[-1])  # the slots' bookkeeping is not a metric
    assert result.stats["env_steps"] >= 3_000
    assert result.stats["elo"] == lines[-1]["elo"] and result.stats["score_vs_snapshots"] == pytest.approx(
        lines[-1]["score_vs_snapshots"]
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["env"] == "pettingzoo.classic.connect_four_v3"  # the module, which evaluate makes again
    against = {opponent: vecfast.evaluate(tmp_path / "run", episodes=4, opponent=opponent) for opponent in
               ("random", "initial", "vecfast.selfplay.bots:one_ply_connect_four")}  # fmt: skip
    for result in (*against.values(), vecfast.evaluate(tmp_path / "run", episodes=4)):  # default: random
        assert result.metrics["win_rate"] + result.metrics["draw_rate"] + result.metrics["loss_rate"] == 1.0
        assert result.metrics["win_rate_low"] <= result.metrics["win_rate"] <= result.metrics["win_rate_high"]


@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_pfsp_draws_reach_the_metrics_and_the_checkpoint(tmp_path: Path, algo: str) -> None:
    keys = {**SMALL, "opponent_sampling": "pfsp_hard", "latest_opponent_probability": 0.5}
    vecfast.train(connect_four_v3, algo=algo, total_env_steps=2_000, run_dir=tmp_path / "run", **keys)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last = lines[-1]
    assert 0 < last["win_rate_vs_hardest_snapshot"] <= last["win_rate_vs_snapshots_mean"] < 1
    assert 0 < last["hardest_snapshot_draw_share"] <= 1
    state = torch.load(next((tmp_path / "run" / "checkpoints").glob("last_*.pt")), weights_only=True)
    pool = state["acting_plan"]["pool"]
    assert pool["draws"] and sum(len(scores) for scores in pool["scores"].values()) > 0


def test_a_win_rate_comes_from_200_games_by_default_with_its_interval(tmp_path: Path) -> None:
    """10 games (the default for episodes) give a win rate of 0.8 a 95% interval of 0.49 to 0.94."""
    from vecfast.selfplay.matches import MatchResults

    eight_of_ten = MatchResults((1.0,) * 8 + (-1.0,) * 2, (10,) * 10, (True, False) * 5)
    assert eight_of_ten.win_rate_interval() == pytest.approx((0.4902, 0.9433), abs=1e-4)  # Wilson's
    vecfast.train(connect_four_v3, algo="ppo", total_env_steps=256, run_dir=tmp_path / "run", **SMALL)
    result = vecfast.evaluate(tmp_path / "run", opponent="random")
    assert result.episodes == 200
    low, high = result.metrics["win_rate_low"], result.metrics["win_rate_high"]
    assert high - low < 0.15
    assert result.summary()[1] == f"win rate {result.metrics['win_rate']:.3f} (95% interval {low:.3f} to {high:.3f})"


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


def test_sync_ppo_on_a_turn_based_game_learns_only_from_the_learners_own_moves(tmp_path: Path) -> None:
    """Only the slots to move are stepped: every step learned from is a legal move of the learner, from a position
    where it was its turn, in trajectories of rollout steps. (Sync PPO stepped every slot at once and
    learned from the rows of slots waiting for their turn, whose action masks are empty.)"""
    env = vector_env_from(connect_four_v3, num_matches=4)
    cfg = TrainConfig.from_overrides(**{**SMALL, "batch_size": 32})
    trainer = SyncTrainer(env, PPO, cfg, total_env_steps=10**6, plan=plan_for())
    batches: list[Trajectories] = []
    learn = trainer.agent.algorithm.learn

    def recording(batch, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        batches.append(batch)
        return learn(batch, *args, **kwargs)

    trainer.agent.algorithm.learn = recording
    iterations = trainer.iterations()
    metrics = [next(iterations) for _ in range(12)][-1]
    env.close()
    assert isinstance(trainer.plan, League) and "elo" in metrics.extra and metrics.extra["snapshots"] >= 2
    for batch in batches:
        # trajectories that hold only a snapshot opponent's moves are left out
        assert len(batch) <= env.num_envs and batch.rollout == cfg.rollout
        valid = batch.valid
        assert (batch.policy_id[valid] == LEARNER).all()  # never a frozen opponent's move
        masks = batch.obs["action_mask"][:, :-1][valid].bool()
        moves = batch.actions[valid].long()
        assert masks.any(dim=1).all()  # it was the learner's turn
        assert masks.gather(1, moves[:, None]).all()  # and it played a legal move
        # a trajectory is one slot's moves: consecutive positions of one player differ by two discs (its own and
        # the opponent's), except across a game's end
        discs = batch.obs["observation"][:, :-1].sum(dim=(2, 3, 4))
        steps = valid[:, :-1] & valid[:, 1:] & ~batch.done[:, :-1]
        assert ((discs[:, 1:] - discs[:, :-1])[steps] == 2).all()


def test_a_trainer_given_matches_without_an_acting_plan_refuses_them() -> None:
    env = vector_env_from(connect_four_v3, num_matches=2)
    cfg = TrainConfig.from_overrides(use_rnn=False, encoder_mlp_layers=(16,), rollout=8, batch_size=32)
    with pytest.raises(ValueError, match="needs an acting plan that says who plays whom"):
        SyncTrainer(env, PPO, cfg, total_env_steps=100)
    env.close()


def test_a_runs_snapshot_pool_stays_within_max_snapshots(tmp_path: Path) -> None:
    keys = {**SMALL, "snapshot_every_updates": 1, "max_snapshots": 3}
    vecfast.train(connect_four_v3, algo="ppo", total_env_steps=1_500, run_dir=tmp_path / "run", **keys)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["snapshots"] == 3
    state = torch.load(next((tmp_path / "run" / "checkpoints").glob("last_*.pt")), weights_only=True)
    pool = state["acting_plan"]["pool"]
    assert len(pool["snapshots"]) == len(pool["weights"]) == 3 and len(pool["evicted"]) > 0
