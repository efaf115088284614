"""Whole games between a policy and an opponent: win, draw and loss rates.

:func:`play_matches` plays them on a vector env of agent slots, the one the run trained on (turn-based games,
parallel matches, Doom duels), many matches at once, with a fixed-opponent acting plan (:class:`FixedOpponent`):
what ``vecfast evaluate``, evaluation while training and videos of games use. :func:`play_games` plays a
two-player AEC game through PettingZoo's own ``agent_iter`` loop, the reference semantics, one game at a time:
the yardstick the vector env's games are tested against. Seats alternate game by game (the first mover has an
edge in most games), and each policy keeps its own recurrent state per game.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import create_empty_array
from pettingzoo import AECEnv

from vecfast.multiagent.slots import SlotLayout, slot_layout_of
from vecfast.selfplay.bots import Bot, random_bot
from vecfast.trainers.algorithm.models import ACTION_MASK_KEY, ActorCritic, ActState, as_obs_dict, obs_to_tensors
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.policies import load_policy
from vecfast.trainers.run.run_dir import load_checkpoint
from vecfast.trainers.sampling.episodes import EpisodeBoundaries, EpisodeTracker
from vecfast.vector.batch_rows import take_rows, write_rows

Player = ActorCritic | Bot
OpponentArg = str | os.PathLike | ActorCritic | Bot  # "random", "initial", a run directory or checkpoint, a player
POLICY, OPPONENT = 0, 1  # the players of a game, as FixedOpponent maps slots to them


@dataclass(frozen=True)
class MatchResults:
    """Per game, in order: the policy's return (the sum of its rewards), its moves, whether it moved first (held
    the first seat), and its outcome, ``"win"``, ``"draw"`` or ``"loss"``: the env's where it reports one (Doom
    matches), else by the return's sign (the default)."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    policy_first: tuple[bool, ...]
    outcomes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.outcomes:
            signs = ("win" if r > 0 else "draw" if r == 0 else "loss" for r in self.returns)
            object.__setattr__(self, "outcomes", tuple(signs))

    @property
    def games(self) -> int:
        return len(self.returns)

    @property
    def win_rate(self) -> float:
        return float(np.mean(np.asarray(self.outcomes) == "win"))

    @property
    def draw_rate(self) -> float:
        return float(np.mean(np.asarray(self.outcomes) == "draw"))

    @property
    def loss_rate(self) -> float:
        return float(np.mean(np.asarray(self.outcomes) == "loss"))

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


class FixedOpponent:
    """The acting plan of match evaluation: in each match's game ``g`` the policy takes the seat
    ``(match + g) % num_agents`` and the opponent every other, so the policy's seat moves game by game (the first
    mover has an edge in most games) and, with one match, game ``g`` seats it as :func:`play_games` does."""

    def __init__(self, layout: SlotLayout) -> None:
        self.layout = layout

    def mapping(self, slot: int, episode: int) -> int:
        """:data:`POLICY` or :data:`OPPONENT`: who plays game ``episode`` of ``slot``."""
        match, agent = self.layout.seat(slot)
        return POLICY if agent == (match + episode) % self.layout.num_agents else OPPONENT


@torch.no_grad()
def play_matches(
    policy: Player,
    opponent: Player,
    env: VectorEnv,
    games: int,
    seed: int | None = 0,
    deterministic: bool = True,
    on_frame: Callable[[np.ndarray], None] | None = None,
) -> MatchResults:
    """Play ``games`` whole games on ``env``, a vector env of agent slots (turn-based games, parallel matches,
    Doom matches), ``policy`` against ``opponent`` by :class:`FixedOpponent`: the matches play at once through
    ``send``/``recv``, each policy acting for its slots in one call. Players as for :func:`play_games` (a bot
    gets each live observation of its slots in turn); the matches reset with ``seed`` (match ``m``: ``seed + m``)
    and start their next games unseeded. A game's result is the env's ``outcome`` where it reports one (Doom
    matches), else the sign of the policy's return. ``on_frame``: called with match 0's frame (``env.render()[0]``)
    after each of its steps. A move the ``action_mask`` forbids raises ValueError."""
    if games < 1:
        raise ValueError(f"games must be >= 1, got {games}")
    layout = slot_layout_of(env)
    if layout is None or layout.num_agents < 2:
        raise ValueError(f"games are played on a vector env of matches of at least 2 agents, got {env!r}")
    plan, n, space = FixedOpponent(layout), env.num_envs, env.single_action_space
    players = (policy, opponent)
    states = [p.initial_state(n) if isinstance(p, ActorCritic) else None for p in players]
    boundaries, tracker = EpisodeBoundaries(n), EpisodeTracker(n)
    episode = np.zeros(n, np.int64)  # each slot's game, from 0
    returned = np.zeros(n, np.bool_)  # slots recv has returned since the reset
    returns: list[float] = []
    lengths: list[int] = []
    first: list[bool] = []
    outcomes: list[str] = []
    env.async_reset(seed=seed)
    while len(returns) < games:
        obs, rewards, terminated, truncated, info = env.recv()
        ids = np.asarray(info["env_id"])
        done = np.asarray(terminated, np.bool_) | np.asarray(truncated, np.bool_)
        ids_t = torch.from_numpy(ids)
        valid = boundaries.valid[ids_t] & torch.from_numpy(returned[ids])  # a slot's first row is no step
        returned[ids] = True
        for ended in tracker.record(ids, np.asarray(rewards, np.float64), done, valid.numpy(), info):
            slot = ended.env
            if plan.mapping(slot, int(episode[slot])) == POLICY and not ended.restarted and len(returns) < games:
                row = int(np.flatnonzero(ids == slot)[0])
                returns.append(ended.episode_return)
                lengths.append(ended.length)
                first.append(layout.seat(slot)[1] == 0)
                outcomes.append(_outcome(info, row, ended.episode_return))
        episode[ids[done]] += 1
        boundaries.stepped(ids_t, valid, torch.from_numpy(done))
        if on_frame is not None and (layout.match_ids[ids] == 0).any():
            on_frame(np.asarray(env.render()[0]))
        first_obs = boundaries.first[ids_t]
        env.send(_moves(players, states, plan, episode, ids, obs, done, first_obs, deterministic, space), ids)
    return MatchResults(tuple(returns), tuple(lengths), tuple(first), tuple(outcomes))


def _moves(
    players: tuple[Player, Player],
    states: list[torch.Tensor | None],
    plan: FixedOpponent,
    episode: np.ndarray,
    ids: np.ndarray,
    obs: Any,
    done: np.ndarray,
    first: torch.Tensor,
    deterministic: bool,
    action_space: Any,
) -> Any:
    """Each returned slot's action, from the player of its game (ended slots' actions are their reset steps)."""
    who = np.array([plan.mapping(s, e) for s, e in zip(ids.tolist(), episode[ids].tolist(), strict=True)])
    actions = create_empty_array(action_space, len(ids), np.zeros)
    for p, player in enumerate(players):
        rows = np.flatnonzero(who == p)
        if not len(rows):
            continue
        mine = take_rows(obs, rows)
        chosen = None
        if isinstance(player, ActorCritic):
            state, slots = states[p], torch.from_numpy(ids[rows])
            dist, _, next_state = player.step(obs_to_tensors(as_obs_dict(mine), "cpu"), state[slots], first[rows])
            picked = dist.mode() if deterministic else dist.sample()
            state[slots] = player.with_action(next_state, picked)
            chosen = player.actor.to_env(picked)
            write_rows(actions, rows, chosen)
        for j, row in enumerate(rows.tolist()):
            if done[row]:
                continue
            observation = take_rows(mine, j)
            action = player(observation) if chosen is None else take_rows(chosen, j)
            _check_legal(observation, action, "the policy" if p == POLICY else "the opponent")
            if chosen is None:
                write_rows(actions, np.array([row]), take_rows(action, None))
    return actions


def _outcome(info: Mapping[str, Any], row: int, episode_return: float) -> str:
    """The env's ``outcome`` of the game that ended at ``row`` where it reports one, else by the return's sign."""
    if "outcome" in info and info["_outcome"][row]:
        return str(info["outcome"][row])
    return "win" if episode_return > 0 else "draw" if episode_return == 0 else "loss"


def opponent_from(
    opponent: OpponentArg, policy: ActorCritic, source: str | os.PathLike | None, seed: int | None
) -> Player:
    """The player an ``opponent`` argument names: ``"random"`` (:func:`random_bot`, seeded with ``seed``; a sample
    of ``policy``'s action space where the observation has no action mask),
    ``"initial"`` (an untrained model of ``policy``'s config, read from ``source``, the run directory or
    checkpoint it came from, and initialised from torch's RNG), a run directory or checkpoint path (its last
    policy), ``"module:function"`` (a bot factory ``function(seed) -> bot``, as
    ``"vecfast.selfplay.bots:one_ply_connect_four"``), or an :class:`ActorCritic` or bot as it is."""
    if callable(opponent):  # an ActorCritic (a module) or a bot
        return opponent
    if opponent == "random":
        return random_bot(seed, policy.action_space)
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


__all__ = ["FixedOpponent", "MatchResults", "OpponentArg", "Player", "opponent_from", "play_games", "play_matches"]
