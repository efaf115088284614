"""A two-player PettingZoo game against a fixed bot, as a single-agent gymnasium env: the baseline self-play must
beat.

Self-play learns against a moving opponent (itself, its snapshots); a learner trained directly against a fixed
bot, in the same time and with the same model, tells whether the self-play plan or the learner limits what is
learned: if it climbs where self-play stays flat, the plan is the cause (whom it plays, which steps it learns
from, how it bootstraps across the opponent's moves).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
from pettingzoo import AECEnv

from vecfast.selfplay.bots import Bot


class AgainstBotEnv(gym.Env):
    """``make_game()``'s two-player AEC game with ``make_bot(seed)`` in the other seat.

    The learner takes the first seat in even episodes and the second in odd ones, so it learns both (a seeded
    reset counts episodes from the seed: ``reset(seed=g)`` seats it as :func:`~vecfast.selfplay.matches.play_games`
    seats it in game ``g``). An
    observation is the learner's PettingZoo observation (``action_mask`` included), an action its move, and a
    step's reward everything it earned from its move up to its next turn (the bot's reply included), so that a
    loss on the bot's move ends the episode with the learner's -1, as PettingZoo's ``env.last()`` would give it.
    """

    metadata = {"render_modes": []}

    def __init__(self, make_game: Callable[[], AECEnv], make_bot: Callable[[int | None], Bot]) -> None:
        self.game = make_game()
        self.game.reset()
        self.make_bot = make_bot
        self.bot: Bot = make_bot(None)
        agent = self.game.possible_agents[0]
        self.observation_space = self.game.observation_space(agent)
        self.action_space = self.game.action_space(agent)
        self.episodes = 0
        self.mine = agent

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:  # a seeded reset starts again: the bot from the seed, the seats from its parity
            self.bot = self.make_bot(seed)
            self.episodes = seed
        self.game.reset(seed=seed)
        self.mine = self.game.possible_agents[self.episodes % 2]
        self.episodes += 1
        self._bot_moves()
        return self.game.observe(self.mine), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.game.step(int(action))
        reward = float(self.game.rewards[self.mine]) + self._bot_moves()
        terminated, truncated = bool(self.game.terminations[self.mine]), bool(self.game.truncations[self.mine])
        return self.game.observe(self.mine), reward, terminated, truncated and not terminated, {}

    def _bot_moves(self) -> float:
        """The bot plays until it is the learner's turn or the game is over; the learner's rewards meanwhile."""
        reward = 0.0
        game = self.game
        while not (game.terminations[self.mine] or game.truncations[self.mine]) and game.agent_selection != self.mine:
            game.step(self.bot(game.observe(game.agent_selection)))
            reward += float(game.rewards[self.mine])
        return reward

    def close(self) -> None:
        self.game.close()
