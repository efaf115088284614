"""Elo ratings of policies and their snapshots, and a win/draw/loss table per pair.

Self-play needs a strength scale that does not drift with the opponent mix: a learner's raw win rate goes
down as its pool gets stronger, its Elo rating does not. FIDE convention: a player rated ``r_a`` expects to
score ``1 / (1 + 10 ** ((r_b - r_a) / 400))`` against one rated ``r_b``; after a game scoring ``s``
(``true_objective`` style: win 1, draw 0.5, loss 0) it gains ``k * (s - expected)`` and its opponent loses as
much, so a game moves no rating points in or out of the population.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

WIN, DRAW, LOSS = 1.0, 0.5, 0.0


def expected_score(rating_a: float, rating_b: float) -> float:
    """The score a player rated ``rating_a`` expects against one rated ``rating_b``."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


@dataclass
class PairRecord:
    """The games between ``a`` and ``b``, counted from ``a``'s side."""

    a: str
    b: str
    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def count(self, score_of_a: float) -> None:
        if score_of_a == WIN:
            self.wins += 1
        elif score_of_a == DRAW:
            self.draws += 1
        else:
            self.losses += 1

    def flipped(self) -> PairRecord:
        """The same games from ``b``'s side."""
        return PairRecord(self.b, self.a, self.losses, self.draws, self.wins)


class Elo:
    """Ratings of players named by strings (``"policy_0"``, ``"policy_0@update120"``) and their pair table.

    A player who has not played (nor been :meth:`add`-ed) is rated ``initial``.
    """

    def __init__(self, k: float = 32.0, initial: float = 1000.0) -> None:
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        self.k, self.initial = float(k), float(initial)
        self.ratings: dict[str, float] = {}
        self._pairs: dict[tuple[str, str], PairRecord] = {}  # keyed by the sorted names, counted from the first

    def rating(self, player: str) -> float:
        return self.ratings.get(player, self.initial)

    def add(self, player: str, rating: float | None = None) -> None:
        """Rate a new ``player`` at ``rating`` (default ``initial``): a snapshot starts at its learner's rating.
        A player already rated keeps its rating."""
        self.ratings.setdefault(player, self.initial if rating is None else float(rating))

    def expected(self, a: str, b: str) -> float:
        """``a``'s expected score against ``b``."""
        return expected_score(self.rating(a), self.rating(b))

    def record(self, a: str, b: str, score_of_a: float) -> None:
        """One game between ``a`` and ``b`` that ``a`` won (1), drew (0.5) or lost (0)."""
        self.record_match([a, b], [score_of_a, 1.0 - _checked(score_of_a)])

    def record_match(self, players: Sequence[str], scores: Sequence[float]) -> None:
        """A match of N players with a score each (e.g. their ``true_objective``), as N * (N - 1) / 2 games:
        in each pair the higher score wins, equal scores draw. Every game is rated from the ratings before the
        match, so the order of the players does not matter. A player does not play itself (self-play against the
        latest policy tells nothing about its strength)."""
        if len(players) != len(scores):
            raise ValueError(f"{len(players)} players but {len(scores)} scores")
        changes = dict.fromkeys(players, 0.0)
        for i, a in enumerate(players):
            for j in range(i + 1, len(players)):
                b = players[j]
                if a == b:
                    continue
                score_of_a = WIN if scores[i] > scores[j] else LOSS if scores[i] < scores[j] else DRAW
                change = self.k * (score_of_a - self.expected(a, b))
                changes[a] += change
                changes[b] -= change
                self._count(a, b, score_of_a)
        for player, change in changes.items():
            self.ratings[player] = self.rating(player) + change

    def record_of(self, a: str, b: str) -> PairRecord:
        """``a``'s wins, draws and losses against ``b``."""
        first, second = sorted((a, b))
        pair = self._pairs.get((first, second), PairRecord(first, second))
        return PairRecord(**asdict(pair)) if a == first else pair.flipped()

    def table(self) -> list[PairRecord]:
        """Every pair that has played, sorted by name, counted from the alphabetically first player's side."""
        return [self.record_of(*key) for key in sorted(self._pairs)]

    def _count(self, a: str, b: str, score_of_a: float) -> None:
        first, second = sorted((a, b))
        pair = self._pairs.setdefault((first, second), PairRecord(first, second))
        pair.count(score_of_a if a == first else 1.0 - score_of_a)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (checkpoints load with ``weights_only=True``: no pickled objects)."""
        return {
            "k": self.k,
            "initial": self.initial,
            "ratings": dict(self.ratings),
            "table": [asdict(pair) for pair in self.table()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Elo:
        elo = cls(data["k"], data["initial"])
        elo.ratings = {name: float(rating) for name, rating in data["ratings"].items()}
        for row in data["table"]:
            pair = PairRecord(**row)
            elo._pairs[(pair.a, pair.b)] = pair
        return elo


def _checked(score: float) -> float:
    if score not in (WIN, DRAW, LOSS):
        raise ValueError(f"a game's score is 1 (win), 0.5 (draw) or 0 (loss), got {score!r}")
    return score
