"""Whole two-player games of a PettingZoo AEC env between a policy and an opponent: win, draw and loss rates.

The games run through PettingZoo's own ``agent_iter`` loop, the reference semantics, rather than through
vecfast's vector envs, so what is measured is the game as its authors wrote it. Seats alternate game by game
(the first mover has an edge in most games), and each policy keeps its own recurrent state per game.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pettingzoo import AECEnv

from vecfast.selfplay.bots import Bot, random_bot
from vecfast.trainers.algorithm.models import ACTION_MASK_KEY, ActorCritic, ActState
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.policies import load_policy
from vecfast.trainers.run.run_dir import load_checkpoint

Player = ActorCritic | Bot
OpponentArg = str | os.PathLike | ActorCritic | Bot  # "random", "initial", a run directory or checkpoint, a player


@dataclass(frozen=True)
class MatchResults:
    """Per game, in order: the policy's return (the sum of its rewards), its moves, and whether it moved first.

    A game is a win for the policy if its return is positive, a draw if zero, a loss if negative.
    """

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    policy_first: tuple[bool, ...]

    @property
    def games(self) -> int:
        return len(self.returns)

    @property
    def win_rate(self) -> float:
        return float(np.mean(np.asarray(self.returns) > 0))

    @property
    def draw_rate(self) -> float:
        return float(np.mean(np.asarray(self.returns) == 0))

    @property
    def loss_rate(self) -> float:
        return float(np.mean(np.asarray(self.returns) < 0))

    def win_rate_interval(self, z: float = 1.96) -> tuple[float, float]:
        """Wilson's score interval of the win rate (95% by default): where the policy's true rate lies, given
        these games (a draw counts as not a win)."""
        n, rate = self.games, self.win_rate
        centre, spread = rate + z * z / (2 * n), z * np.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
        scale = 1 + z * z / n
        return float(max(0.0, (centre - spread) / scale)), float(min(1.0, (centre + spread) / scale))


def play_games(
    policy: Player,
    opponent: Player,
    env_fn: Callable[[], AECEnv],
    games: int,
    seed: int | None = 0,
    deterministic: bool = True,
) -> MatchResults:
    """Play ``games`` whole games of the two-player AEC env ``env_fn()`` makes, ``policy`` against ``opponent``.

    ``policy`` plays ``env.possible_agents[g % 2]`` in game ``g``, so it moves first in half the games (in
    turn order games such as connect four). Each is an :class:`ActorCritic` (acting on its own
    :class:`ActState`, fresh each game; ``deterministic``: its most likely action, else sampled with torch's
    RNG) or a bot (``bot(observation) -> action``, e.g. :func:`random_bot`). Game ``g`` resets with
    ``seed + g`` (``None``: unseeded). A move the observation's ``action_mask`` forbids raises ValueError
    rather than ending the game as the env would, since it means a broken player, not a lost game.
    """
    if games < 1:
        raise ValueError(f"games must be >= 1, got {games}")
    env = env_fn()
    try:
        if not isinstance(env, AECEnv):
            raise ValueError(
                f"games are played on a PettingZoo AEC (turn-based) env; the env function made {type(env).__name__}"
            )
        if len(env.possible_agents) != 2:
            raise ValueError(f"games need two agents, the env has {list(env.possible_agents)}")
        outcomes = [_play(env, policy, opponent, g, seed, deterministic) for g in range(games)]
    finally:
        env.close()
    returns, lengths, first = zip(*outcomes, strict=True)
    return MatchResults(returns=returns, lengths=lengths, policy_first=first)


def opponent_from(
    opponent: OpponentArg, policy: ActorCritic, source: str | os.PathLike | None, seed: int | None
) -> Player:
    """The player an ``opponent`` argument names: ``"random"`` (:func:`random_bot`, seeded with ``seed``),
    ``"initial"`` (an untrained model of ``policy``'s config, read from ``source``, the run directory or
    checkpoint it came from, and initialised from torch's RNG), a run directory or checkpoint path (its last
    policy), ``"module:function"`` (a bot factory ``function(seed) -> bot``, as
    ``"vecfast.selfplay.bots:one_ply_connect_four"``), or an :class:`ActorCritic` or bot as it is."""
    if callable(opponent):  # an ActorCritic (a module) or a bot
        return opponent
    if opponent == "random":
        return random_bot(seed)
    if opponent == "initial":
        if source is None:
            raise ValueError(
                "opponent='initial' needs the policy's config: evaluate a run directory, a checkpoint or a "
                "TrainResult, or pass an untrained ActorCritic as the opponent"
            )
        cfg = TrainConfig.from_overrides(**load_checkpoint(source, "last")["config"])
        return ActorCritic(policy.observation_space, policy.action_space, cfg).eval()
    if isinstance(opponent, (str, os.PathLike)) and Path(opponent).exists():
        return load_policy(opponent)
    if isinstance(opponent, str) and ":" in opponent:
        module, _, name = opponent.partition(":")
        factory = getattr(importlib.import_module(module), name, None)
        if not callable(factory):
            raise ValueError(f"opponent {opponent!r}: {module} has no function {name!r}")
        return factory(seed)
    raise ValueError(
        f"opponent must be 'random', 'initial', a run directory or checkpoint, 'module:function' (a bot factory), "
        f"an ActorCritic or a bot, got {opponent!r}"
    )


def _play(
    env: AECEnv, policy: Player, opponent: Player, game: int, seed: int | None, deterministic: bool
) -> tuple[float, int, bool]:
    """One game: the policy's return, its moves, and whether it moved first."""
    env.reset(seed=None if seed is None else seed + game)
    mine = env.possible_agents[game % 2]
    other = env.possible_agents[1 - game % 2]
    movers = {mine: _mover(policy, deterministic), other: _mover(opponent, deterministic)}
    total, moves, first = 0.0, 0, None
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, _ = env.last()
        if agent == mine:
            total += float(reward)
        action = None
        if not (terminated or truncated):
            first = agent if first is None else first
            action = movers[agent](observation)
            _check_legal(observation, action, "the policy" if agent == mine else "the opponent")
            moves += agent == mine
        env.step(action)
    return total, moves, first == mine


def _mover(player: Player, deterministic: bool) -> Callable[[Any], Any]:
    """``player`` as a function of one observation, for one game (a policy's recurrent state starts afresh)."""
    if not isinstance(player, ActorCritic):
        return player
    state = ActState()
    return lambda observation: player.act(observation, deterministic=deterministic, state=state)


def _check_legal(observation: Any, action: Any, who: str) -> None:
    mask = observation.get(ACTION_MASK_KEY) if isinstance(observation, Mapping) else None
    if mask is not None and np.ndim(action) == 0 and not mask[int(action)]:
        raise ValueError(f"{who} chose action {action}, which the action mask {np.asarray(mask)} forbids")


__all__ = ["MatchResults", "OpponentArg", "Player", "opponent_from", "play_games"]
