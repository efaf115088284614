"""The league seats the learner against itself and its snapshots in every match the sampler plays."""

from __future__ import annotations

import queue

import numpy as np
import pytest
import torch
from pettingzoo.classic import tictactoe_v3

from vecfast.multiagent import TurnBasedVectorEnv
from vecfast.multiagent.slots import SlotLayout
from vecfast.selfplay import Elo, SnapshotPool, plan_for
from vecfast.selfplay.league import LEARNER, League, MatchDraw, score_of
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.episodes import EndedEpisode
from vecfast.trainers.sampling.sampler import Sampler

CFG = TrainConfig.from_overrides(use_rnn=False, encoder_mlp_layers=(16,))


def make_model(env: TurnBasedVectorEnv) -> ActorCritic:
    return ActorCritic(env.single_observation_space, env.single_action_space, CFG)


def perturbed(model: ActorCritic, seed: int) -> None:
    """Change every weight, as learning would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator))


class RecordingLeague(League):
    """A league that keeps every draw, by (match, episode)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.history: dict[tuple[int, int], MatchDraw] = {}

    def _draw(self, match: int, episode: int) -> MatchDraw:
        draw = super()._draw(match, episode)
        self.history[(match, episode)] = draw
        return draw


def test_the_sampler_plays_the_learner_against_itself_and_snapshots_held_in_seats() -> None:
    env = TurnBasedVectorEnv([tictactoe_v3.env] * 4)
    torch.manual_seed(0)
    learner = make_model(env)
    elo = Elo()
    pool = SnapshotPool(learner, lambda: make_model(env), latest_probability=0.5, elo=elo, seed=0)
    weights = {}
    for update in (10, 20, 30):  # three snapshots of a learner that changed in between
        perturbed(learner, update)
        weights[pool.snapshot(update).name] = {k: v.clone() for k, v in learner.state_dict().items()}
    league = RecordingLeague(learner, pool, env.slots, num_seats=2)
    sampler = Sampler(
        env, league.policies, 4, num_rows=3 * env.num_envs, mapping=league.mapping, on_episode_end=league.episode_ended
    )
    received = sampler.reset()
    policy_of_episode: dict[tuple[int, int], set[int]] = {}  # (slot, episode) -> policies that took its steps
    for _ in range(600):
        for draw in league.draws.values():  # a seat in use holds its snapshot's weights, bit for bit
            if draw.opponent_policy != LEARNER:
                seat = league.policies[draw.opponent_policy]
                held = league.seat_holds[draw.opponent_policy - 1]
                assert held == draw.opponent
                assert all(torch.equal(seat.state_dict()[k], v) for k, v in weights[held].items())
        active = received.ids_np[np.asarray(sampler.valid[received.ids].tolist())]
        for slot in active.tolist():
            episode = int(sampler.episodes_started[slot]) - 1
            policy_of_episode.setdefault((slot, episode), set()).add(int(sampler.policy_id[slot]))
        sampler.step(received)
        while True:  # the slots are freed at once: only the draws are under test
            try:
                sampler.release([sampler.full.get_nowait()])
            except queue.Empty:
                break
        received = sampler.observe()
        assert min(league.seat_users) >= 0

    # every game was played by the draw made when it started: the learner at its seat, the opponent at the other
    finished = [key for key in league.history if key not in league.draws]
    assert len(finished) > 100
    for match, episode in finished:
        draw = league.history[(match, episode)]
        for agent in range(env.num_agents):
            played = policy_of_episode.get((match * env.num_agents + agent, episode), set())
            assert played <= {LEARNER if agent == draw.learner_agent else draw.opponent_policy}
    # the learner moves first and second in turn, in every match
    for match in range(env.num_matches):
        seats = [league.history[(match, e)].learner_agent for e in range(5)]
        assert seats == [(match + e) % 2 for e in range(5)]
    # it met the latest policy and the snapshots; games against snapshots were rated, the others not
    assert league.games == {"latest": 0, "snapshot": 0}  # results wait for the books
    league.record_results()
    assert league.games["latest"] > 20 and league.games["snapshot"] > 20
    rated = sum(record.games for record in elo.table())
    assert rated == league.games["snapshot"]
    env.close()


def test_a_drawn_snapshot_takes_its_seat_else_a_free_one_else_joins_a_seat_that_takes_games() -> None:
    """6 matches, 2 seats: a seat takes 3 games per snapshot loaded. Every game plays a snapshot (none falls back on
    the latest policy); a seat that has taken its 3 games takes no more while another can, and once its games end it
    loads the next draw."""
    env = TurnBasedVectorEnv([tictactoe_v3.env])
    learner = make_model(env)
    pool = SnapshotPool(learner, lambda: make_model(env), latest_probability=0.0, seed=0)  # always a snapshot
    for update in (1, 2, 3):
        pool.snapshot(update)
    league = League(learner, pool, SlotLayout(6, ("player_1", "player_2")), num_seats=2)
    assert league.games_per_load == 3
    for match in range(6):
        league.mapping(2 * match, 0)
    draws = [league.draws[(match, 0)] for match in range(6)]
    assert all(d.opponent_policy != LEARNER and d.opponent == league.seat_holds[d.opponent_policy - 1] for d in draws)
    assert league.seat_games == [3, 3] and league.seat_users == [3, 3]
    first_seat = [match for match, d in enumerate(draws) if d.opponent_policy == 1]

    def end(match: int, episode: int) -> None:
        draw = league.draws[(match, episode)]
        for agent in range(2):
            league.episode_ended(
                EndedEpisode(2 * match + agent, 1.0 if agent == draw.learner_agent else -1.0, 3, {}), episode
            )

    end(first_seat[0], 0)  # no seat is free and both took their share: the one loaded last takes the game
    league.mapping(2 * first_seat[0], 1)
    assert league.draws[(first_seat[0], 1)].opponent_policy == 2 and league.seat_games == [3, 4]
    for match in first_seat[1:]:  # the first seat drains ...
        end(match, 0)
    assert league.seat_users[0] == 0
    league.mapping(2 * first_seat[1], 1)  # ... and loads the next draw
    assert league.draws[(first_seat[1], 1)].opponent_policy == 1 and league.seat_games[0] == 1
    for match in range(6):
        for episode in (0, 1):
            if (match, episode) in league.draws:
                end(match, episode)
    assert league.seat_users == [0, 0] and not league.draws


def test_seating_a_snapshot_builds_no_module() -> None:
    """Old behaviour: every draw of a snapshot built a module through the pool's factory (orthogonal initialisation
    of every layer: ~4% of a connect-four sampler's time) only to copy its weights into a seat."""
    env = TurnBasedVectorEnv([tictactoe_v3.env])
    learner, built = make_model(env), []
    pool = SnapshotPool(learner, lambda: built.append(1) or make_model(env), latest_probability=0.0, seed=0)
    for update in (1, 2, 3):
        perturbed(learner, update)
        pool.snapshot(update)
    league = League(learner, pool, env.slots, num_seats=1)
    for episode in range(20):
        league.mapping(0, episode)
        draw = league.draws[(0, episode)]
        assert draw.opponent_policy == 1 and league.seat_holds == [draw.opponent]
        snapshot = pool.weights(draw.opponent)
        assert all(torch.equal(league.policies[1].state_dict()[k], v) for k, v in snapshot.items())
        for agent in range(2):
            league.episode_ended(EndedEpisode(agent, 0.0, 3, {}), episode)
    assert built == []


@pytest.mark.parametrize(
    ("episode_return", "metrics", "score"),
    [
        (1.0, {}, 1.0),
        (-1.0, {}, 0.0),
        (0.0, {}, 0.5),
        (-3.0, {"true_objective": 1.0}, 1.0),
        (5.0, {"true_objective": 0.0}, 0.0),
    ],
)
def test_a_games_score_is_its_true_objective_else_the_sign_of_its_return(
    episode_return: float, metrics: dict, score: float
) -> None:
    assert score_of(EndedEpisode(0, episode_return, 5, metrics)) == score


def test_appo_on_a_vector_env_of_agent_slots_self_plays_and_learns_only_from_its_own_steps(tmp_path) -> None:
    """The async scheme over a turn-based game: a league by default, snapshots every K updates, the learner's
    batches masked to its own steps, the league's numbers in the metrics, and its books in a weights_only
    checkpoint that a new trainer restores."""
    from vecfast.trainers.algorithm.ppo import PPO
    from vecfast.trainers.schemes.asynchronous import AsyncTrainer

    env = TurnBasedVectorEnv([tictactoe_v3.env] * 8)
    cfg = TrainConfig.from_overrides(
        use_rnn=False, encoder_mlp_layers=(16,), rollout=8, batch_size=64, snapshot_every_updates=2, seed=0
    )
    trainer = AsyncTrainer(env, PPO, cfg, total_env_steps=10**6, plan=plan_for())
    assert isinstance(trainer.plan, League) and len(trainer.plan.policies) == 1 + cfg.opponent_seats
    learned: list[torch.Tensor] = []
    learn = trainer.agent.algorithm.learn

    def recording(batch, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        learned.append(batch.policy_id[batch.valid])
        return learn(batch, *args, **kwargs)

    trainer.agent.algorithm.learn = recording
    iterations = trainer.iterations()
    try:
        metrics = [next(iterations) for _ in range(16)][-1]
    finally:
        trainer.close()
    assert all((ids == LEARNER).all() for ids in learned)  # never from a frozen opponent's steps
    league = trainer.plan
    assert len(league.pool.snapshots) >= 7  # every 2 updates
    assert metrics.extra["snapshots"] == len(league.pool.snapshots) and "elo" in metrics.extra
    assert league.games["snapshot"] > 0
    path = tmp_path / "state.pt"
    torch.save(trainer.state_dict(), path)
    restored = AsyncTrainer(env, PPO, cfg, total_env_steps=10**6, plan=plan_for())
    restored.load_state_dict(torch.load(path, weights_only=True))
    assert list(restored.plan.pool.snapshots) == list(league.pool.snapshots)
    assert restored.plan.pool.elo.to_dict() == league.pool.elo.to_dict()
    restored.close()
    env.close()


def test_a_resumed_league_draws_apart_in_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint holds rank 0's draws; restored in rank 1 they would repeat rank 0's opponents."""
    env = TurnBasedVectorEnv([tictactoe_v3.env])
    learner = make_model(env)
    pool = SnapshotPool(learner, lambda: make_model(env), latest_probability=0.5, seed=0)
    for update in (10, 20, 30):
        pool.snapshot(update)
    state = League(learner, pool, env.slots).state_dict()

    def draws(rank: int) -> list[str]:
        monkeypatch.setattr("vecfast.trainers.base.collective.rank", lambda: rank)
        again = SnapshotPool(learner, lambda: make_model(env), latest_probability=0.5, seed=0)
        league = League(learner, again, env.slots)
        league.load_state_dict(state)
        return [again.draw().name for _ in range(40)]

    assert draws(0) == draws(0)  # rank 0 goes on exactly
    assert draws(1) != draws(0) and draws(1) == draws(1)  # the others apart, and reproducibly


def play_overlapping_games(league: League, num_matches: int, games: int, seed: int) -> list[MatchDraw]:
    """``games`` games over ``num_matches`` matches played at once, each of 5 to 30 moves, each match starting its
    next game when one ends (as the sampler's matches do): the draws they were played by, in order."""
    rng = np.random.default_rng(seed)
    episode, ends_at, played, now = [0] * num_matches, [0] * num_matches, [], 0
    for match in range(num_matches):
        league.mapping(2 * match, 0)
        ends_at[match] = int(rng.integers(5, 31))
    while len(played) < games:
        now += 1
        for match in range(num_matches):
            if ends_at[match] != now:
                continue
            draw = league.draws[(match, episode[match])]
            played.append(draw)
            for agent in range(2):
                ended = EndedEpisode(2 * match + agent, 1.0 if agent == draw.learner_agent else -1.0, 9, {})
                league.episode_ended(ended, episode[match])
            episode[match] += 1
            league.mapping(2 * match, episode[match])
            ends_at[match] = now + int(rng.integers(5, 31))
    return played


@pytest.mark.parametrize("sampling", ["uniform", "pfsp_hard"])
def test_games_against_snapshots_keep_their_share_when_the_seats_are_busy(sampling: str) -> None:
    """16 matches at once and 2 seats: a drawn snapshot joins a seat that still takes games (its own or another's
    snapshot) rather than falling back on the latest policy, and a seat that has taken its share of games takes no
    more until it is free and loads the next draw, so the snapshots rotate. Before, almost every draw found both
    seats in use and played the latest policy instead: 1-15% of games against snapshots where 50% were asked for."""
    env = TurnBasedVectorEnv([tictactoe_v3.env])
    learner = make_model(env)
    pool = SnapshotPool(learner, lambda: make_model(env), latest_probability=0.5, sampling=sampling, seed=0)
    for update in range(1, 31):
        pool.snapshot(update)
    league = League(learner, pool, SlotLayout(16, ("player_1", "player_2")), num_seats=2)
    played = play_overlapping_games(league, 16, games=3000, seed=0)
    against_snapshots = [draw for draw in played if draw.opponent_policy != LEARNER]
    assert 0.42 <= len(against_snapshots) / len(played) <= 0.58
    assert len({draw.opponent for draw in against_snapshots}) >= 20  # the seats load one draw after another
    assert all(draw.opponent in pool.snapshots for draw in against_snapshots)
    assert league.seat_users == [sum(1 for d in league.draws.values() if d.opponent_policy == s + 1) for s in range(2)]


def test_the_hardest_snapshot_is_the_one_the_learner_does_worst_against_among_those_it_has_played() -> None:
    """Old behaviour: a snapshot not yet played (its win rate the prior's even 0.5) was the "hardest" whenever the
    learner beat every snapshot it had met, so with frequent snapshots the metric read 0.50 most of the time."""
    env = TurnBasedVectorEnv([tictactoe_v3.env])
    learner = make_model(env)
    pool = SnapshotPool(learner, lambda: make_model(env), latest_probability=0.0, sampling="pfsp_hard", seed=0)
    league = League(learner, pool, env.slots, num_seats=1)
    pool.snapshot(1)
    assert "win_rate_vs_hardest_snapshot" not in league.summary()  # nothing played: no win rate to report
    played = next(iter(pool.snapshots))
    for _ in range(3):
        pool.record(played, 1.0)
    pool.snapshot(2)  # a fresh one, unplayed
    summary = league.summary()
    assert summary["win_rate_vs_hardest_snapshot"] == pytest.approx(3.5 / 4)
    assert summary["hardest_snapshot_draw_share"] == pytest.approx(pool.draw_probabilities()[0])
    pool.record(list(pool.snapshots)[1], 0.0)
    assert league.summary()["win_rate_vs_hardest_snapshot"] == pytest.approx(0.5 / 2)
