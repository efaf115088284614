"""RandomOpenings: a turn-based PettingZoo game whose every game starts after a few random legal moves.

A policy that learns by playing itself sees the positions its own play leads to and little else; a stranger's
moves (a scripted bot's, a person's) lead elsewhere, where it may miss a win in one or a block. Starting training
games from random openings (as engines are trained and tested from opening books, and AlphaZero adds noise to its
self-play moves) spreads the positions it learns from over the game. Evaluation plays the game as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pettingzoo import AECEnv
from pettingzoo.utils import BaseWrapper

__all__ = ["RandomOpenings"]


class RandomOpenings(BaseWrapper):
    """``env`` (an AEC game with an action mask, in the observation dict or the info) whose every reset plays a
    number of uniformly random legal moves, drawn from 0 to ``max_moves``, before the first agent gets its turn.

    The moves are drawn from a generator seeded by ``reset(seed=...)`` (an unseeded reset goes on with it), so
    seeded games repeat. An opening that ends the game is played again from a fresh reset, so an agent's first
    turn is always a live one. No agent is rewarded for the opening's moves.
    """

    def __init__(self, env: AECEnv, max_moves: int) -> None:
        if max_moves < 0:
            raise ValueError(f"max_moves must be >= 0, got {max_moves}")
        super().__init__(env)
        self.max_moves = max_moves
        self._rng = np.random.default_rng()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        while True:
            self.env.reset(seed=seed, options=options)
            if self._play_opening(int(self._rng.integers(0, self.max_moves + 1))):
                return
            seed = None  # the game's own randomness goes on from its seeded start

    def _play_opening(self, moves: int) -> bool:
        """Play ``moves`` random legal moves; False if one of them ended the game."""
        for _ in range(moves):
            agent = self.env.agent_selection
            self.env.step(int(self._rng.choice(np.flatnonzero(self._action_mask(agent)))))
            if any(self.env.terminations.values()) or any(self.env.truncations.values()):
                return False
        game = self.env.unwrapped
        for agent in game.agents:  # the opening's rewards are nobody's
            game._cumulative_rewards[agent] = 0
            game.rewards[agent] = 0
        return True

    def _action_mask(self, agent: Any) -> np.ndarray:
        obs = self.env.observe(agent)
        if isinstance(obs, Mapping) and "action_mask" in obs:
            return np.asarray(obs["action_mask"])
        info = self.env.infos.get(agent, {})
        if "action_mask" in info:
            return np.asarray(info["action_mask"])
        raise ValueError(
            f"RandomOpenings plays random legal moves: {type(self.env.unwrapped).__name__} gives agent {agent!r} no "
            "action_mask (in its observation dict or its info)"
        )
