"""Populations (``num_policies``): the mapping decides who plays, each policy learns from its own steps only,
frozen policies stay bit-identical, Elo rates the policies from their matches, PBT evolves them, and a checkpoint
restores the whole population."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from helpers import descendants
from pettingzoo.classic import connect_four_v3

import vecfast
from vecfast.envs.doom import DEFAULT_REWARD_SHAPING, doom_duel_v0
from vecfast.multiagent.from_pettingzoo import vector_env_from
from vecfast.selfplay import EpisodeId, Population, RandomPolicyMapping, plan_for
from vecfast.trainers import load_policy
from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.algorithm.trajectories import Trajectories
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.schemes.asynchronous import AsyncTrainer
from vecfast.vector import AsyncSharedMemVectorEnv

SMALL = {
    "use_rnn": False,
    "encoder_mlp_layers": (32,),
    "rollout": 8,
    "batch_size": 64,
    "print_every_sec": None,
    "seed": 0,
}


class RecordingPPO(PPO):
    """PPO that keeps the batches it learned from (to check which steps each policy saw)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[Trajectories] = []

    def learn(self, batch: Trajectories, *args: object, **kwargs: object) -> dict[str, float]:
        self.batches.append(batch)
        return super().learn(batch, *args, **kwargs)


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _cartpole(num_envs: int = 8) -> AsyncSharedMemVectorEnv:
    return AsyncSharedMemVectorEnv(
        [lambda: gym.make("CartPole-v1")] * num_envs, num_workers=2, batch_size=num_envs // 2
    )


def _run(trainer: AsyncTrainer, iterations: int) -> None:
    for i, _ in enumerate(trainer.iterations()):
        if i + 1 == iterations:
            return


def test_random_mapping_is_a_function_of_its_arguments_and_redraws_every_few_episodes() -> None:
    mapping = RandomPolicyMapping(4, every_episodes=5, seed=3)
    draws = [mapping("player_0", EpisodeId(match=m, number=k)) for m in range(50) for k in range(10)]
    assert draws == [
        RandomPolicyMapping(4, 5, seed=3)("player_0", EpisodeId(m, k)) for m in range(50) for k in range(10)
    ]
    for m in range(50):
        row = draws[10 * m : 10 * m + 10]
        assert len(set(row[:5])) == 1 and len(set(row[5:])) == 1  # one draw per block of 5 episodes
    counts = [draws.count(p) for p in range(4)]
    assert min(counts) > 70, counts  # 500 draws of 4 policies: about 125 each


def test_random_mapping_deals_every_policy_to_the_slots_of_a_block_evenly() -> None:
    """Old behaviour: each slot drew on its own, so 4 duels (8 slots) left one of 4 policies out of every match about
    one run in ten (0.75 ** 8), for as long as 10 long Doom episodes: that policy neither played nor learned."""
    agents = ("player_0", "player_1")
    for seed in range(50):
        mapping = RandomPolicyMapping(4, every_episodes=10, seed=seed, agents=agents)
        for block in range(3):
            dealt = [mapping(agent, EpisodeId(m, 10 * block)) for m in range(4) for agent in agents]
            assert sorted(dealt) == [0, 0, 1, 1, 2, 2, 3, 3], (seed, block, dealt)
            assert all(dealt[2 * m] != dealt[2 * m + 1] for m in range(4))  # 4 policies, 2 seats: no self-match
    # each slot's draws stay uniform over the policies
    mapping = RandomPolicyMapping(4, every_episodes=1, seed=0, agents=agents)
    draws = [mapping("player_1", EpisodeId(3, k)) for k in range(800)]
    assert min(draws.count(p) for p in range(4)) > 150, [draws.count(p) for p in range(4)]


def test_each_policy_learns_from_its_own_steps_and_frozen_policies_stay_bit_identical() -> None:
    env = _cartpole()
    cfg = TrainConfig.from_overrides(**SMALL, num_policies=3, policies_to_train=(0, 2))
    trainer = AsyncTrainer(env, RecordingPPO, cfg, total_env_steps=10**9, plan=plan_for(lambda env, ep: env % 3))
    frozen, acting_frozen = _weights(trainer.learners.agents[1].model), _weights(trainer.learners.acting[1])
    learner_before = _weights(trainer.learners.agents[0].model)
    try:
        _run(trainer, 12)
    finally:
        trainer.close()
        env.close()
    population, learners = trainer.plan, trainer.learners
    for p in (0, 2):
        batches = learners.agents[p].algorithm.batches
        assert batches, f"policy {p} never learned"
        for batch in batches:  # only its own steps are valid, and it saw all of them in the trajectories it got
            assert batch.valid.any() and (batch.policy_id[batch.valid] == p).all()
            # a whole batch of its own (as Sample Factory's learners take), not its third of the sampler's batch
            assert len(batch) >= cfg.batch_size // cfg.rollout
        # each learned once per three of the sampler's batches, not from every one
        assert len(batches) <= 12 // 3 + 1
    assert not learners.agents[1].algorithm.batches
    for key, value in frozen.items():
        assert torch.equal(learners.agents[1].model.state_dict()[key], value), key
        assert torch.equal(learners.acting[1].state_dict()[key], acting_frozen[key]), key
    changed = learners.agents[0].model.state_dict()
    assert any(not torch.equal(changed[k], v) for k, v in learner_before.items())
    assert learners.own_env_steps[1] == 0 and learners.own_env_steps[0] > 0
    # env i plays policy i % 3: each policy's episodes are its envs' episodes
    assert all(population.objectives[p] for p in range(3))


@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_two_policies_of_a_population_rate_each_other_in_their_matches(tmp_path: Path, algo: str) -> None:
    result = vecfast.train(
        connect_four_v3,
        algo=algo,
        total_env_steps=3_000,
        run_dir=tmp_path / "run",
        num_workers=1,
        num_envs_per_worker=4,
        num_policies=2,
        policy_mapping=lambda agent, episode: int(agent == "player_1") ^ (episode.number % 2),  # alternate seats
        **SMALL,
    )
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["policy_0_elo"] != 1000.0
    assert last["policy_0_elo"] + last["policy_1_elo"] == pytest.approx(2000.0)  # every game is between the two
    assert "snapshots" not in last  # a population plays itself, not the one-learner league
    assert result.stats["env_steps"] >= 3_000


def test_pbt_mutates_and_replaces_and_a_checkpoint_restores_the_whole_population() -> None:
    env = vector_env_from(connect_four_v3, num_matches=4)
    cfg = TrainConfig.from_overrides(
        **SMALL,
        num_policies=3,
        with_pbt=True,
        pbt_period_env_steps=200,
        pbt_start_mutation=0,
        pbt_mutation_rate=1.0,
        pbt_replace_reward_gap=0.0,
    )
    trainer = AsyncTrainer(env, PPO, cfg, total_env_steps=10**9, plan=plan_for())
    try:
        _run(trainer, 20)
    finally:
        trainer.close()  # before the state is taken: the policy worker rates games until it stops
    state = copy.deepcopy(trainer.state_dict())
    population = trainer.plan
    assert population.pbt_decisions, "no PBT step was due"
    assert any(d.mutated for d in population.pbt_decisions)
    rates = {a.algorithm.cfg.learning_rate for a in trainer.learners.agents}
    assert rates != {cfg.learning_rate}  # mutation rate 1: every non-top policy's settings moved
    buffer = io.BytesIO()  # through torch.save and a weights_only load, as a checkpoint goes
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    again = AsyncTrainer(env, PPO, cfg, total_env_steps=10**9, plan=plan_for())
    try:
        again.load_state_dict(loaded)
    finally:
        again.close()
        env.close()
    for before, after in zip(trainer.learners.agents, again.learners.agents, strict=True):
        assert after.algorithm.cfg.learning_rate == before.algorithm.cfg.learning_rate
        assert after.algorithm.version == before.algorithm.version
        for key, value in before.model.state_dict().items():
            assert torch.equal(after.model.state_dict()[key], value), key
    assert again.plan.elo.ratings == population.elo.ratings
    assert again.learners.own_env_steps == trainer.learners.own_env_steps
    assert again.plan.pbt.state_dict()["last_step"] == population.pbt.state_dict()["last_step"]
    # each slot's episodes go on being numbered where they were, so the mapping's draws go on rather than start over
    # (a resumed run replayed its first draws: a policy the first draws left out sat out the resumed run's start too)
    saved_numbers = state["episodes_started"]
    assert sum(saved_numbers) > 0
    assert again.batches.episodes_started.tolist() == saved_numbers


def test_populations_are_refused_where_they_do_not_train(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="populations train under the sync and async schemes"):
        vecfast.train("CartPole-v1", algo="ddppo", total_env_steps=100, run_dir=tmp_path / "a", num_policies=2, **SMALL)
    with pytest.raises(ValueError, match="policy_mapping is for populations"):
        vecfast.train(
            "CartPole-v1", algo="ppo", total_env_steps=100, run_dir=tmp_path / "b", policy_mapping=lambda a, e: 0
        )
    with pytest.raises(ValueError, match="policies_to_train"):
        TrainConfig.from_overrides(num_policies=2, policies_to_train=(2,))
    with pytest.raises(ValueError, match="with_pbt needs a population"):
        TrainConfig.from_overrides(with_pbt=True)


def test_a_mapping_that_names_no_policy_of_the_population_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="policy_mapping returned 5"):
        vecfast.train(
            "CartPole-v1",
            total_env_steps=2_000,
            run_dir=tmp_path / "run",
            num_workers=2,
            num_envs_per_worker=2,
            num_policies=2,
            policy_mapping=lambda agent, episode: 5,
            **SMALL,
        )


def test_pbt_gives_each_policys_doom_players_its_own_reward_shaping(process_guard: Any) -> None:
    env = doom_duel_v0.vector_env(1, timelimit_minutes=0.05)
    process_guard.watch(descendants())
    try:
        cfg = TrainConfig.from_overrides(**SMALL, num_policies=2, with_pbt=True)
        learners = Learners(env, PPO, cfg, acting_copies=True)
        population = Population(env, learners, cfg, policy_mapping=lambda agent, episode: int(agent == "player_1"))
        assert population.pbt.settings(1).reward_shaping == DEFAULT_REWARD_SHAPING  # PBT starts from the env's
        state = population.pbt.state_dict()
        state["settings"][1]["reward_shaping"]["frag"] = 3.0  # as a mutation would have it
        population.pbt.load_state_dict(state)
        env.reset(seed=0)
        for slot in range(2):  # the episodes start: player_0 plays policy 0, player_1 policy 1
            population.mapping(slot, 0)
        shaping = env.get_attr("reward_shaping")
        assert shaping[0]["frag"] == 1.0 and shaping[1]["frag"] == 3.0
        assert shaping[1]["death"] == DEFAULT_REWARD_SHAPING["death"]
        with pytest.raises(ValueError, match="unknown reward shaping keys"):
            env.set_reward_shaping({"frags": 1.0})
    finally:
        env.close()


def test_load_policy_loads_each_policy_of_a_population(tmp_path: Path) -> None:
    vecfast.train(
        "CartPole-v1",
        total_env_steps=1_000,
        run_dir=tmp_path / "run",
        num_workers=2,
        num_envs_per_worker=2,
        num_policies=2,
        policies_to_train=(0,),
        **SMALL,
    )
    state = torch.load(sorted((tmp_path / "run" / "checkpoints").glob("last_*.pt"))[-1], weights_only=True)
    first, second = (load_policy(tmp_path / "run", policy=p).state_dict() for p in (0, 1))
    assert all(torch.equal(first[k], v) for k, v in state["model"].items())
    assert all(torch.equal(second[k], v) for k, v in state["population"]["others"][0]["model"].items())
    assert any(not torch.equal(first[k], second[k]) for k in first)
    with pytest.raises(ValueError, match="policies 0 to 1"):
        load_policy(tmp_path / "run", policy=2)
