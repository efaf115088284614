"""Fixed opponents for measuring a self-play policy: callables ``bot(observation) -> action``.

A bot gets the PettingZoo observation of the agent it plays (``action_mask`` included) and returns a legal
action. A policy trained only against itself can look strong in Elo and still lose to simple play; these bots
give a fixed yardstick across runs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import Space

Bot = Callable[[Mapping[str, Any]], int]

_ROWS, _COLUMNS = 6, 7
_LINES = ((0, 1), (1, 0), (1, 1), (1, -1))  # horizontal, vertical and both diagonals, as (row, column) steps


def random_bot(seed: int | None = None, action_space: Space | None = None) -> Bot:
    """A uniformly random legal action (from ``observation["action_mask"]``): the weakest sensible yardstick. Where
    the observation has no mask (Doom duels), a sample of ``action_space``, seeded likewise."""
    rng = np.random.default_rng(seed)
    space = None
    if action_space is not None:
        space = copy.deepcopy(action_space)
        space.seed(int(rng.integers(2**31)))

    def bot(observation: Mapping[str, Any]) -> Any:
        if space is not None and not (isinstance(observation, Mapping) and "action_mask" in observation):
            return space.sample()
        return int(rng.choice(_legal(observation)))

    return bot


def one_ply_connect_four(seed: int | None = None) -> Bot:
    """Connect four (``pettingzoo.classic.connect_four_v3``) looking one move ahead: a winning move if there is
    one, else a block of the opponent's winning move, else a random legal move. It beats random play almost
    always, so a policy that cannot beat it has not learned tactics."""
    rng = np.random.default_rng(seed)

    def bot(observation: Mapping[str, Any]) -> int:
        wins, blocks = one_move_tactics(observation)
        if wins or blocks:
            return (wins or blocks)[0]
        return int(rng.choice(_legal(observation)))

    return bot


@dataclass
class TacticsCount:
    """How a connect four player met one-move tactics: of the positions where it could win at once, how often
    it did (``wins_taken`` of ``wins_available``); of those where it could not but the opponent threatened to,
    how often it blocked (``blocks_made`` of ``blocks_needed``)."""

    wins_available: int = 0
    wins_taken: int = 0
    blocks_needed: int = 0
    blocks_made: int = 0

    @property
    def win_taken_rate(self) -> float:
        return self.wins_taken / self.wins_available if self.wins_available else float("nan")

    @property
    def block_rate(self) -> float:
        return self.blocks_made / self.blocks_needed if self.blocks_needed else float("nan")


def count_connect_four_tactics(player: Bot, count: TacticsCount) -> Bot:
    """``player`` (connect four), each of its moves counted into ``count``: what tells a policy that has not
    learned tactics from one that plays them but loses on strategy."""

    def bot(observation: Mapping[str, Any]) -> int:
        action = int(player(observation))
        wins, blocks = one_move_tactics(observation)
        if wins:
            count.wins_available += 1
            count.wins_taken += action in wins
        elif blocks:
            count.blocks_needed += 1
            count.blocks_made += action in blocks
        return action

    return bot


def one_move_tactics(observation: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """Connect four, from the PettingZoo observation of the player to move: the legal columns that win at once for
    it, and those that would for its opponent (a move there blocks)."""
    board = np.asarray(observation["observation"]).astype(bool)  # (6, 7, 2): mine, the opponent's
    legal = _legal(observation)

    def winning(plane: int) -> list[int]:
        return [int(c) for c in legal if _connects_four(board[..., plane], _landing_row(board, c), c)]

    return winning(0), winning(1)


def _legal(observation: Mapping[str, Any]) -> np.ndarray:
    legal = np.flatnonzero(observation["action_mask"])
    if legal.size == 0:
        raise ValueError("the observation's action_mask allows no action: a bot only moves on its own turn")
    return legal


def _landing_row(board: np.ndarray, column: int) -> int:
    """The row a piece dropped in ``column`` lands on: row 0 is the top, pieces fall to the lowest empty row."""
    empty = np.flatnonzero(~board[:, column].any(axis=-1))
    return int(empty[-1])


def _connects_four(pieces: np.ndarray, row: int, column: int) -> bool:
    """Whether a piece at (``row``, ``column``) joins ``pieces`` (one player's, (6, 7) bool) into four in a line."""
    for dr, dc in _LINES:
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < _ROWS and 0 <= c < _COLUMNS and pieces[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


__all__ = [
    "Bot",
    "TacticsCount",
    "count_connect_four_tactics",
    "one_move_tactics",
    "one_ply_connect_four",
    "random_bot",
]
