"""Who plays whom when one learning policy trains against itself and its snapshots over a vector env of agent slots.

Each match's episode seats the learner at one agent (alternating between episodes, so it moves first and second
equally often) and an opponent, drawn by a :class:`~vecfast.selfplay.SnapshotPool`, at the others: the latest
policy (the learner itself, whose steps on both sides are learned from) or a past snapshot. The sampler acts with
a fixed list of modules (:attr:`League.policies`): index 0 is the learner's acting copy, the rest are seats that
hold snapshots (each seat one more inference call per step). A game that draws a snapshot joins a seat that holds
it, else loads it into a seat no game is using, else joins a seat that still takes games, whose snapshot (an
earlier draw) it plays instead. A seat takes its share of the matches' games (``num_matches / num_seats``) per
snapshot loaded, then no more until its games end, so that the seats free up in turn and load the next draws (the
seat loaded last goes on taking games while no other can): the games keep the share of snapshots the pool draws.
Match results go to the pool, which rates them (Elo) and decides when to snapshot: once per
learning step (:meth:`League.learned`), gathered from every rank of a distributed run first, so that each rank keeps
the same books (the job's Elo and snapshots) while drawing its own opponents.

The slots of a match must start and end their episodes together (two-player games: ``TurnBasedVectorEnv``,
Doom duels), so that episode ``k`` of every slot of match ``m`` is the same game.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

from vecfast.multiagent.slots import SlotLayout, slot_layout_of
from vecfast.selfplay.elo import Elo
from vecfast.selfplay.snapshot_pool import SnapshotPool
from vecfast.trainers.algorithm.learners import Learners
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.base import collective
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.episodes import EndedEpisode

LEARNER = 0  # the learner's index among the sampler's policies


@dataclass
class MatchDraw:
    """Who plays match episode: the learner at ``learner_agent``, ``opponent`` (a pool name) at the others, with
    the sampler's policy ``opponent_policy``; ``ended`` counts the slots whose episode has finished."""

    learner_agent: int
    opponent: str
    opponent_policy: int
    ended: int = 0


def score_of(episode: EndedEpisode) -> float:
    """The learner's result of a finished game, 1 win, 0.5 draw, 0 loss: the env's ``true_objective`` where it
    reports one (1 for an outright win), else the sign of the episode's return (zero-sum board games)."""
    if "true_objective" in episode.metrics:
        return min(max(episode.metrics["true_objective"], 0.0), 1.0)
    return 0.5 + 0.5 * float(np.sign(episode.episode_return))


@dataclass(frozen=True)
class GameResult:
    """A finished game's result for the learner against ``opponent`` (a pool name): 1 win, 0.5 draw, 0 loss."""

    opponent: str
    score: float
    vs_latest: bool


class League:
    """The acting plan of one learner in the matches ``layout`` lays out (of at least 2 agents): ``acting`` is the
    learner's acting model (policy 0), ``num_seats`` frozen copies of it hold the snapshots ``pool`` draws. A sampler
    acts with :attr:`policies`, :meth:`mapping` and :meth:`episode_ended`; the scheme calls :meth:`learned` after
    each learning step (from another thread if need be: a lock keeps the books). ``learner_version``: the learner's
    update count, which names its snapshots."""

    def __init__(
        self,
        acting: ActorCritic,
        pool: SnapshotPool,
        layout: SlotLayout,
        num_seats: int = 2,
        learner_version: Callable[[], int] = lambda: 0,
    ) -> None:
        if layout.num_agents < 2:
            raise ValueError(f"self-play needs matches of at least 2 agents, got {layout.num_agents}")
        if num_seats < 1:
            raise ValueError(f"num_seats must be >= 1, got {num_seats}")
        self.pool, self.layout, self.learner_version = pool, layout, learner_version
        self.num_agents = layout.num_agents
        seats = [copy.deepcopy(acting).eval().requires_grad_(False) for _ in range(num_seats)]
        self.policies: list[ActorCritic] = [acting, *seats]
        self.seat_holds: list[str | None] = [None] * num_seats  # the snapshot each seat holds
        self.seat_users = [0] * num_seats  # slots playing an episode with it
        self.seat_games = [0] * num_seats  # games it took since it loaded its snapshot
        self.seat_loaded = [0] * num_seats  # when it loaded its snapshot (a count of loads)
        self._loads = 0
        self.games_per_load = max(1, layout.num_matches // num_seats)
        self.draws: dict[tuple[int, int], MatchDraw] = {}  # by (match, episode), while the episode lasts
        self.results: list[GameResult] = []  # this process's, since the books last took them
        self.games = {"latest": 0, "snapshot": 0}
        self.lock = threading.Lock()

    def mapping(self, env: int, episode: int) -> int:
        """The sampler's policy for episode ``episode`` of slot ``env``."""
        match, agent = self.layout.seat(env)
        with self.lock:
            draw = self.draws.get((match, episode))
            if draw is None:
                draw = self.draws[(match, episode)] = self._draw(match, episode)
        return LEARNER if agent == draw.learner_agent else draw.opponent_policy

    def episode_ended(self, ended: EndedEpisode, episode: int) -> None:
        """Slot ``ended.env`` finished its episode ``episode``: the learner's seat reports the result; the last slot
        of the match frees the draw (and its seat)."""
        match, agent = self.layout.seat(ended.env)
        with self.lock:
            draw = self.draws.get((match, episode))
            if draw is None:  # an episode that started before this league (a resumed run)
                return
            if agent == draw.learner_agent and not ended.restarted:  # a game cut short by a restart has no result
                self.results.append(GameResult(draw.opponent, score_of(ended), draw.opponent_policy == LEARNER))
            draw.ended += 1
            if draw.ended == self.num_agents:
                del self.draws[(match, episode)]
                if draw.opponent_policy != LEARNER:
                    self.seat_users[draw.opponent_policy - 1] -= self.num_agents - 1

    def record_results(self) -> None:
        """The games finished since the last call (every rank's, in rank order) into the pool's books and Elo."""
        with self.lock:
            mine, self.results = self.results, []
        for result in collective.all_gathered(mine):
            with self.lock:
                self.pool.record(result.opponent, result.score)
                self.games["latest" if result.vs_latest else "snapshot"] += 1

    def learned(self, policies: Iterable[int], publish: Callable[[int], None]) -> None:
        """The learner has learned: record the results, then snapshot it if one is due."""
        self.record_results()
        with self.lock:
            self.pool.on_update(self.learner_version())

    def summary(self) -> dict[str, float]:
        """Numbers for the metrics: the learner's Elo, its score against snapshots over its last games (and how
        many), the snapshots and games so far, and the win rates the draws go by: against the snapshot it does worst
        against among those it has played (and that snapshot's share of the draws) and against all on average."""
        with self.lock:
            out = {
                "snapshots": float(len(self.pool.snapshots)),
                "games_vs_latest": float(self.games["latest"]),
                "games_vs_snapshots": float(self.games["snapshot"]),
            }
            if self.pool.elo is not None:
                out["elo"] = self.pool.elo.rating(self.pool.name)
            recent = self.pool.recent_score()
            if recent is not None:
                out["score_vs_snapshots"], out["score_vs_snapshots_games"] = recent[0], float(recent[1])
            played = self.pool.games_played() > 0
            if played.any():  # the draws and the win rates behind them (PFSP's, or to judge uniform draws by)
                win_rates, chances = self.pool.win_rates(), self.pool.draw_probabilities()
                hardest = int(np.flatnonzero(played)[np.argmin(win_rates[played])])
                out["win_rate_vs_hardest_snapshot"] = float(win_rates[hardest])
                out["hardest_snapshot_draw_share"] = float(chances[hardest])
                out["win_rate_vs_snapshots_mean"] = float(win_rates.mean())
            return out

    def state_dict(self) -> dict[str, Any]:
        """Plain data for a checkpoint: the pool (its snapshots' weights when in memory), Elo, the games."""
        with self.lock:
            elo = None if self.pool.elo is None else self.pool.elo.to_dict()
            return {"pool": self.pool.state_dict(), "elo": elo, "games": dict(self.games)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the books. A checkpoint holds rank 0's draws: the other ranks of a distributed run go on with
        draws of their own, derived from them and the rank."""
        with self.lock:
            self.pool.load_state_dict(state["pool"])
            if state["elo"] is not None:
                self.pool.elo = Elo.from_dict(state["elo"])
            self.games = dict(state["games"])
            if collective.rank() > 0:
                self.pool.rng = np.random.default_rng([collective.rank(), int(self.pool.rng.integers(2**62))])

    def _draw(self, match: int, episode: int) -> MatchDraw:
        learner_agent = (match + episode) % self.num_agents
        opponent = self.pool.draw()
        if opponent.latest:
            return MatchDraw(learner_agent, opponent.name, LEARNER)
        seat = self._seat_for(opponent.name)
        self.seat_users[seat] += self.num_agents - 1
        self.seat_games[seat] += 1
        return MatchDraw(learner_agent, self.seat_holds[seat], seat + 1)

    def _seat_for(self, name: str) -> int:
        """A seat for a game against snapshot ``name``: one that holds it and takes games, else a free seat loaded
        with it, else one that takes games (with its own snapshot)."""
        taking = self._seats_taking_games()
        holding = [i for i in taking if self.seat_holds[i] == name]
        if holding:
            return holding[0]
        free = [i for i, users in enumerate(self.seat_users) if users == 0]
        if free:
            seat = free[0]
            self.policies[seat + 1].load_state_dict(self.pool.weights(name))
            self.seat_holds[seat], self.seat_games[seat] = name, 0
            self.seat_loaded[seat] = self._loads = self._loads + 1
            return seat
        return taking[0]

    def _seats_taking_games(self) -> list[int]:
        """The seats a game may join: those that have not taken their share since they loaded their snapshot; while
        none has and none is free, the one loaded last goes on taking games, so the others drain and load anew."""
        loaded = [i for i, held in enumerate(self.seat_holds) if held is not None]
        taking = [i for i in loaded if self.seat_games[i] < self.games_per_load]
        if taking or 0 in self.seat_users:
            return taking
        return [max(loaded, key=lambda i: self.seat_loaded[i])]  # (a seat in use is loaded)


def league_for(env: VectorEnv, learners: Learners, cfg: TrainConfig) -> League:
    """The league of ``learners``' one policy on ``env``'s matches: against itself and its snapshots (in memory)."""
    layout = slot_layout_of(env)
    if layout is None or layout.num_agents < 2:
        raise ValueError("a league plays matches of at least 2 agents: a vector env of agent slots")
    learner, algorithm = learners.agents[0].model, learners.agents[0].algorithm
    pool = SnapshotPool(
        learner,
        lambda: ActorCritic(learner.observation_space, learner.action_space, cfg),
        snapshot_every_updates=cfg.snapshot_every_updates,
        win_rate_threshold=cfg.snapshot_win_rate,
        latest_probability=cfg.latest_opponent_probability,
        sampling=cfg.opponent_sampling,
        pfsp_exponent=cfg.pfsp_exponent,
        max_loaded=cfg.opponent_seats,
        max_snapshots=cfg.max_snapshots,
        elo=Elo(),
        seed=cfg.seed,
    )
    return League(learners.acting[0], pool, layout, cfg.opponent_seats, lambda: algorithm.version)
