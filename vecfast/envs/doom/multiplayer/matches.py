"""Networked Doom matches as one flat vector env of agent slots: vecfast's one implementation of multiplayer Doom.

The PettingZoo envs (:class:`~vecfast.envs.doom.multiplayer.match.DoomMatch`, one match) and the
trainers (many matches) both play through :class:`DoomMatchesVectorEnv`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_empty_array

from vecfast.envs.doom.full_game_env import checked_reward_shaping
from vecfast.envs.doom.game_groups import end_group, new_group
from vecfast.envs.doom.multiplayer.player import DoomPlayerEnv, MatchNetwork, PortTakenError
from vecfast.multiagent.slot_vector_env import SlotVectorEnv
from vecfast.vector import AsyncSharedMemVectorEnv, EnvError, StepTimeoutError, WorkerDiedError
from vecfast.vector.action_check import check_action_batch
from vecfast.vector.batch_rows import info_rows, write_rows
from vecfast.vector.restarts import RESTARTED, Restart
from vecfast.vector.shared_buffers import map_tree

__all__ = ["DoomMatchesVectorEnv", "outcomes"]

MATCH_FAILURES = (EnvError, StepTimeoutError, WorkerDiedError, PortTakenError)  # what tears every match down
PLAYER_RESTARTS_PER_SLOT = 10  # players rebuilt per slot within RESTART_WINDOW before a failure tears all down
RESTART_WINDOW = 600.0


def outcomes(frags: np.ndarray) -> list[str]:
    """Each player's result by final frags: ``"win"`` (most, alone), ``"draw"`` (most, tied) or ``"loss"``."""
    top = frags == frags.max()
    return ["loss" if not best else "win" if top.sum() == 1 else "draw" for best in top]


class SlotPhase(enum.IntEnum):
    """Where an agent slot is in its send/recv cycle. The two ``OWES_*`` and ``*_READY`` pairs carry a restart:
    the slot reports its match's end (truncated), then its next action starts the new match."""

    IDLE = 0  # recv returned it: it owes an action
    SENT = 1  # stepping in its player's game
    OWES_REPORT = 2  # its match was torn down while it waited for an action: send returns the truncation
    REPORT_READY = 3  # recv returns its truncation (the last observation, ``match_restarted``)
    OWES_RESET = 4  # it has reported the truncation: send returns the new match's first observation
    RESET_READY = 5  # recv returns the new match's first observation (reward 0, ``active`` False)


HELD = (SlotPhase.REPORT_READY, SlotPhase.RESET_READY)  # what recv returns without the games


class DoomMatchesVectorEnv(SlotVectorEnv):
    """M networked Doom matches of ``num_agents`` players as one VectorEnv of M x num_agents agent slots.

    Slot ``m * num_agents + a`` is player ``a`` (``"player_a"``; player 0 hosts) of match
    ``m``. Every player's game is one env of a single
    :class:`~vecfast.vector.AsyncSharedMemVectorEnv` whose workers each hold one player
    position of a group of matches and step them in match order, so the players of a match
    are in different workers and always act at once (lockstep), and M matches cost
    ``num_workers`` processes besides their games.

    Each slot's observation and action space are those of the single-player full-game env
    (:class:`~vecfast.envs.doom.DoomFullGameEnv`), its reward that env's shaping
    (``reward_shaping``). Players respawn, so nobody terminates: all players of a match are
    truncated together at ``timelimit_minutes``. Infos per slot: ``agent_id``, ``match_id``,
    ``active`` (False on a reset step), the raw figures (frags, deaths, damage dealt and
    taken, hits) every step and, on the step a match ends, ``outcome`` among the learning
    players (``"win"``: most frags alone, ``"draw"``: most, tied, ``"loss"``) and
    ``true_objective`` (1.0 for an outright win, else 0.0; with built-in bots in the match,
    the player's frags). ``NEXT_STEP`` autoreset: an ended match's next step resets it.

    EnvPool's asynchronous API, whole matches at a time (their players play in lockstep): :meth:`async_reset`,
    :meth:`send` (actions for the slots of whole matches) and :meth:`recv` (the slots of the earliest send not yet
    returned, once all have stepped: ``info["env_id"]`` names them); ``step`` is ``send`` of every slot and ``recv``.
    ``double_buffered`` (when each worker holds an even number of matches, at least 2) splits every worker's matches
    into two halves that step while the caller acts on the other, as APPO samples: send the slots that recv returned.
    It pays where the cores outnumber the processes that step (one game per player, the workers, the learner), so
    that the caller's inference overlaps the games; where the games fill the cores, the halves' extra inference
    calls take CPU from them (a 2-policy population in 4 duels under APPO on 2 cores: 0.91x the env frames/s of
    stepping all at once). The default, ``None``, double-buffers where the cores allow it.

    Reliability: a game that dies (crashed or killed), or a match that stops answering for
    ``timeout`` seconds, ends its match, and only its match: the match's other games are
    killed (:mod:`~vecfast.envs.doom.game_groups`), its players rebuilt (the players' vector
    env restarts failed envs and workers), and each of its slots reports ``truncated=True``
    with ``info["match_restarted"]`` (the reason) and ``info["restarted"]``; its next step
    starts the new match, on the same port. The other matches play on. A dead worker ends
    the matches it held a player of. Each match restarted is one record in :attr:`restarts`.
    Where that cannot heal (a rebuilt player that fails again, more than
    ``10 x num_envs`` players rebuilt within 10 minutes, a host that cannot start), every
    match of this env is torn down (its processes killed) and started again (in a fresh
    network, or on fresh ports), each slot reporting the truncation once (the slots stepping
    at once, and each other slot when it is next sent). A start that fails (a host whose
    port another process took meanwhile, games that do not connect) is tried again likewise,
    up to ``max_start_attempts`` times in all.

    The network (see :class:`~vecfast.envs.doom.multiplayer.player.MatchNetwork`): by default the
    games play in a private network of their own where the platform allows it
    (``network.isolated``), since VizDoom's engine listens on every address of the host;
    otherwise in the host's network, with a ``NetworkIsolationWarning``;
    ``network_isolation=True`` refuses the host's network, ``False`` uses it.

    Args:
        wad: the multiplayer map (``"multi_duel.wad"``, ``"multi_deathmatch.wad"``).
        num_matches: matches played at once.
        num_agents: learning players per match.
        num_workers: a multiple of ``num_agents`` whose quotient divides ``num_matches``;
            default ``num_agents`` (one worker per player position).
        double_buffered: see above (default: where the cores allow it).
        timeout: seconds the games wait for each other (connecting, and per step).
        max_start_attempts, network_isolation: see above.
        spin_us: as for :class:`~vecfast.vector.AsyncSharedMemVectorEnv`.
        game_kwargs: ``num_bots`` (built-in bots per match), ``frame_skip``, ``timelimit_minutes``,
            ``resolution``, ``reward_shaping``, ``render_mode`` of every player's
            :class:`~vecfast.envs.doom.DoomFullGameEnv`.
    """

    def __init__(
        self,
        wad: str,
        num_matches: int,
        num_agents: int = 2,
        *,
        num_workers: int | None = None,
        double_buffered: bool | None = None,
        timeout: float = 20.0,
        max_start_attempts: int = 5,
        spin_us: float = 200.0,
        network_isolation: bool | None = None,
        **game_kwargs: Any,
    ) -> None:
        if num_matches < 1 or num_agents < 1:
            raise ValueError(f"num_matches and num_agents must be >= 1, got {num_matches} and {num_agents}")
        if game_kwargs.get("num_bots", 0) < 0:
            raise ValueError(f"num_bots must be >= 0, got {game_kwargs['num_bots']}")
        if max_start_attempts < 1:
            raise ValueError(f"max_start_attempts must be >= 1, got {max_start_attempts}")
        num_workers = num_agents if num_workers is None else num_workers
        groups, rest = divmod(num_workers, num_agents)
        if rest or groups < 1 or num_matches % groups:
            raise ValueError(
                f"num_workers must be a multiple of num_agents={num_agents} whose quotient divides "
                f"num_matches={num_matches} (each worker holds one player of a group of matches), got {num_workers}"
            )
        per_worker = num_matches // groups
        self.num_workers = num_workers
        if double_buffered is None:  # the games, the workers and a learner each need a core for the overlap to pay
            double_buffered = len(os.sched_getaffinity(0)) >= num_matches * num_agents + num_workers + 1
        self.double_buffered = double_buffered and per_worker >= 2 and per_worker % 2 == 0
        self.timeout = timeout
        self.max_start_attempts = max_start_attempts
        self.restarts: list[Restart] = []  # each match restarted (or all, torn down together), and why
        self._spin_us = spin_us
        self.num_bots = int(game_kwargs.get("num_bots", 0))
        self._game_kwargs = {"wad": wad, "connect_timeout": timeout, **game_kwargs}
        self.network = MatchNetwork(network_isolation)
        self.num_matches, self.num_agents, self.num_envs = num_matches, num_agents, num_matches * num_agents
        # Player-major env order (env p * M + m is player p of match m) puts each player
        # position in its own workers, matches in the same order in all of them.
        self._env_of_slot = np.array([p * num_matches + m for m in range(num_matches) for p in range(num_agents)])
        self._slot_of_env = np.argsort(self._env_of_slot)
        self._match_of_env = np.arange(self.num_envs) % num_matches
        self.players = self._start_players()
        players = self.players
        agents = [f"player_{p}" for p in range(num_agents)]
        self._lay_out(num_matches, agents, players.single_observation_space, players.single_action_space)
        self.metadata = dict(players.metadata)
        self.render_mode = players.render_mode
        # which of its worker's two halves of matches (double buffering) each slot's game is in
        in_worker = self.match_ids % per_worker
        self._half_of_slot = (in_worker >= per_worker // 2) if self.double_buffered else np.zeros(self.num_envs, bool)
        self._phase = np.full(self.num_envs, SlotPhase.IDLE, np.int8)
        self._sent: deque[np.ndarray] = deque()  # the slots of each send still in the games, oldest first
        self._last_obs = create_empty_array(self.single_observation_space, self.num_envs)  # each slot's latest
        self._reset_obs = create_empty_array(self.single_observation_space, self.num_envs)  # restarted matches'
        self._restart_reason = ""
        self._was_reset = False

    def _start_players(self) -> AsyncSharedMemVectorEnv:
        launcher, self.ports = self.network.open(self.num_matches)
        n, m, kwargs = self.num_agents, self.num_matches, {**self._game_kwargs, "launcher": launcher}
        groups = [new_group() for _ in range(m)]  # a match's games die together
        self._groups = groups
        fns = [
            functools.partial(DoomPlayerEnv, e // m, n, self.ports[e % m], group=groups[e % m], **kwargs)
            for e in range(n * m)
        ]
        try:
            players = AsyncSharedMemVectorEnv(
                fns,
                copy=False,  # rows are gathered into slot order, which copies them anyway
                num_workers=self.num_workers,
                double_buffered=self.double_buffered,
                autoreset_mode=AutoresetMode.NEXT_STEP,
                step_timeout=self.timeout + 5.0,  # the games give up connecting after `timeout`
                spin_us=self._spin_us,
                restart_failed_workers=True,  # rebuilds the players of a match that ended (see the docstring)
                max_restarts=PLAYER_RESTARTS_PER_SLOT * self.num_envs,
                restart_window=RESTART_WINDOW,
            )
            self._players_restarts_seen = 0
            return players
        except BaseException:
            self.network.close()
            raise

    def _replace_players(self, exc: BaseException) -> None:
        self.players.close(terminate=True)
        self.restarts.append(Restart.of_matches(tuple(range(self.num_envs)), exc))
        self.players = self._start_players()

    # ----------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every match, or the whole matches ``options["reset_mask"]`` selects."""
        self._check_open()
        mask = options.pop("reset_mask", None) if options else None
        env_seeds = seed if seed is None or isinstance(seed, (int, np.integer)) else self._to_envs(list(seed))
        settled = (self._phase == SlotPhase.IDLE).all()  # else a step or a restart is under way: reset every match
        if mask is not None and self._was_reset and settled:
            to_reset = self.slots.matches_to_reset(mask, self._ended)
            options = {**options, "reset_mask": to_reset[self._match_of_env]}
            self._ended[to_reset[self.slots.match_ids]] = False
        else:
            self._ended[:] = False
        obs, infos = self._start_matches(env_seeds, options)
        self._phase[:] = SlotPhase.IDLE
        self._sent.clear()
        return map_tree(np.copy, obs), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """``send`` every slot its row of ``actions``, then ``recv`` them all."""
        self._send(actions, self._slot_ids, by_halves=False)
        obs, rewards, terminated, truncated, infos = self.recv()
        del infos["env_id"]  # every slot, in order
        return obs, rewards, terminated, truncated, infos

    # ----------------------------------------------------------------- EnvPool-style API
    def async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset every match; recv returns every slot's first observation."""
        self.reset(seed=seed, options=options)
        self._reset_obs = map_tree(np.copy, self._last_obs)
        self._phase[:] = SlotPhase.RESET_READY

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Step slots ``env_ids`` (the slots of whole matches) with the rows of ``actions``."""
        self._send(actions, env_ids, by_halves=True)

    def _send(self, actions: Any, env_ids: Sequence[int] | np.ndarray, by_halves: bool) -> None:
        """``send``; ``by_halves``: recv returns each half of the workers' matches on its own (else all together)."""
        self._check_open()
        ids = self._checked_slots(env_ids)
        if not self._was_reset:
            raise NoAsyncCallError("send() before any reset: call async_reset() or reset() first", "send")
        self._check_whole_matches(ids, "send")
        busy = ids[(self._phase[ids] == SlotPhase.SENT) | np.isin(self._phase[ids], HELD)]
        if len(busy):
            raise AlreadyPendingCallError(f"slots {busy.tolist()} were sent and not yet returned by recv()", "send")
        check_action_batch(self._actions_space(len(ids)), actions, ids)
        phase = self._phase[ids]
        self._phase[ids[phase == SlotPhase.OWES_REPORT]] = SlotPhase.REPORT_READY
        self._phase[ids[phase == SlotPhase.OWES_RESET]] = SlotPhase.RESET_READY
        playing = phase == SlotPhase.IDLE
        if playing.any():
            slots = ids[playing]
            order = np.argsort(self._env_of_slot[slots])  # env order: the players' rows
            rows = map_tree(lambda a: np.asarray(a)[playing][order], actions)
            self.players.send(rows, self._env_of_slot[slots][order])
            self._phase[slots] = SlotPhase.SENT
            halves = (slots[~self._half_of_slot[slots]], slots[self._half_of_slot[slots]]) if by_halves else (slots,)
            self._sent.extend(part for part in halves if len(part))

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The slots of the earliest send not yet returned, in slot order, once their games have stepped;
        ``info["env_id"]`` names them. Slots whose match was restarted come first, without waiting for games."""
        self._check_open()
        held = np.flatnonzero(np.isin(self._phase, HELD))
        if len(held):
            return self._held_results(held)
        if not self._sent:
            raise NoAsyncCallError("recv() with no slot sent: send() actions first", "recv")
        try:
            obs, rewards, terminated, truncated, infos = self.players.recv(np.sort(self._env_of_slot[self._sent[0]]))
            envs = np.asarray(infos.pop("env_id"))
            order = np.argsort(self._slot_of_env[envs])
            slots = self._slot_of_env[envs][order]
            infos = info_rows(infos, order)
            restarted = self._restarted_matches(slots, infos)
        except MATCH_FAILURES as exc:
            self._tear_down(exc)
            return self._held_results(np.flatnonzero(np.isin(self._phase, HELD)))
        self._sent.popleft()
        active = ~self._ended[slots]
        terminated, truncated = terminated[order], truncated[order] | restarted
        self._ended[slots] = terminated | truncated
        self._phase[slots] = SlotPhase.IDLE
        infos = self._slot_infos(infos, slots, active)
        if (self._ended[slots] & ~restarted).any():
            self._add_outcomes(infos, slots, restarted)
        rows = map_tree(lambda a: a[order], obs)
        write_rows(self._last_obs, slots, rows)
        return rows, rewards[order], terminated, truncated, infos

    def render(self) -> tuple[Any, ...]:
        """Each match host's last full-resolution frame."""
        return self.players.render()[: self.num_matches]

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every player's env (a :class:`DoomPlayerEnv`), results in slot order."""
        return self._tuple_to_slots(self.players.call(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self._tuple_to_slots(self.players.get_attr(name))

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` on every player's env: one value for all, or one per slot."""
        if isinstance(values, (list, tuple)):
            if len(values) != self.num_envs:
                raise ValueError(f"set_attr needs one value per slot ({self.num_envs}), got {len(values)}")
            values = self._to_envs(list(values))
        self.players.set_attr(name, values)

    def set_reward_shaping(self, coefficients: dict[str, float], slots: Sequence[int] | None = None) -> None:
        """Change the reward shaping coefficients of the players in ``slots`` (default: all) from their next step:
        population-based training gives each policy's players its own (:mod:`vecfast.selfplay.population`)."""
        checked_reward_shaping(coefficients)
        shaping = list(self.get_attr("reward_shaping"))
        for slot in range(self.num_envs) if slots is None else slots:
            shaping[slot] = {**shaping[slot], **coefficients}
        self.set_attr("reward_shaping", shaping)

    def close_extras(self, **kwargs: Any) -> None:
        try:
            self.players.close(**kwargs)
        finally:
            self.network.close()

    # ----------------------------------------------------------------- internals
    def _start_matches(self, env_seeds: Any, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        """Reset the players (starting their games), starting everything again on failure; the observations in slot
        order (the env's own buffer, which the next call overwrites)."""
        for attempt in range(self.max_start_attempts):
            try:
                self.network.check_ports()
                # New players' games all need their first reset: a reset mask no longer applies.
                obs, infos = self.players.reset(seed=env_seeds, options=options if attempt == 0 else None)
                break
            except MATCH_FAILURES as exc:
                if attempt + 1 == self.max_start_attempts:
                    raise RuntimeError(f"no match started in {self.max_start_attempts} attempts: {exc}") from exc
                self._replace_players(exc)
                self._ended[:] = False
        self._was_reset = True
        write_rows(self._last_obs, self._slot_ids, map_tree(lambda a: a[self._env_of_slot], obs))
        return self._last_obs, self.slots.add_ids(self._to_slots(infos))

    def _restarted_matches(self, slots: np.ndarray, infos: dict[str, Any]) -> np.ndarray:
        """Which of ``slots`` (recv's whole matches, in slot order) are in a match that ended because a game of it
        died (their players rebuilt, to start the new match at their next step); their ``infos`` say so.

        A player whose game ran ahead of the one that died returned this step normally: its game is ended now and
        its player stepped once more, alone, so that it is rebuilt too and the match's players all start the new
        match at the same step."""
        rebuilt = infos.get(f"_{RESTARTED}", np.zeros(len(slots), np.bool_)) & infos.get(RESTARTED, False)
        if not rebuilt.any():
            return rebuilt
        matches = np.unique(self.match_ids[slots[rebuilt]])
        restarted = np.isin(self.match_ids[slots], matches)
        ran_ahead = self._env_of_slot[slots[restarted & ~rebuilt]]
        if len(ran_ahead):
            ran_ahead.sort()
            for m in np.unique(self._match_of_env[ran_ahead]).tolist():
                end_group(self._groups[m])
            idle = create_empty_array(self.players.single_action_space, len(ran_ahead), fn=np.zeros)
            self.players.send(idle, ran_ahead)
            self.players.recv(ran_ahead)  # each raises in its worker: its game is gone, and it is rebuilt
        # a worker that died or stalled is the cause of its matches' ends, before the games that died with it
        records = sorted(self.players.restarts[self._players_restarts_seen :], key=lambda r: r.cause == "raised")
        self._players_restarts_seen = len(self.players.restarts)
        first = records[0] if records else Restart.of_matches((), RuntimeError("a game of the match died"))
        n, reasons = self.num_agents, np.full(len(slots), None, object)
        for m in matches.tolist():
            cause = next((r for r in records if m in self._match_of_env[list(r.env_indices)]), first)
            self.restarts.append(dataclasses.replace(cause, env_indices=tuple(range(m * n, (m + 1) * n))))
            first_line = cause.message.splitlines()[0] if cause.message else ""
            reasons[self.match_ids[slots] == m] = f"{cause.exc_type}: {first_line}"
        infos["match_restarted"], infos["_match_restarted"] = reasons, restarted
        infos[RESTARTED], infos[f"_{RESTARTED}"] = restarted.copy(), restarted.copy()
        return restarted

    def _tear_down(self, exc: BaseException) -> None:
        """Start every match again after ``exc``: each slot reports the truncation once, then starts the new match."""
        self._restart_reason = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        self._replace_players(exc)
        reset_obs, _ = self._start_matches(None, None)
        self._reset_obs = map_tree(np.copy, reset_obs)
        phase = self._phase.copy()
        self._sent.clear()
        self._phase[phase == SlotPhase.SENT] = SlotPhase.REPORT_READY
        self._phase[phase == SlotPhase.IDLE] = SlotPhase.OWES_REPORT

    def _held_results(self, slots: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """What restarted matches' slots ``slots`` return without their games: the truncation they report, or the
        new match's first observation."""
        report = self._phase[slots] == SlotPhase.REPORT_READY
        obs = map_tree(lambda new: new[slots], self._reset_obs)
        write_rows(obs, np.flatnonzero(report), map_tree(lambda last: last[slots[report]], self._last_obs))
        self._ended[slots] = report
        self._phase[slots] = np.where(report, SlotPhase.OWES_RESET, SlotPhase.IDLE)
        write_rows(self._last_obs, slots, obs)
        infos: dict[str, Any] = {}
        if report.any():
            infos["match_restarted"] = np.where(report, self._restart_reason, None).astype(object)
            infos["_match_restarted"] = report
            infos[RESTARTED], infos[f"_{RESTARTED}"] = report.copy(), report.copy()  # as a healed vector env says it
        self._slot_infos(infos, slots, np.zeros(len(slots), np.bool_))
        zeros = np.zeros(len(slots), np.bool_)
        return obs, np.zeros(len(slots)), zeros, report.copy(), infos

    def _add_outcomes(self, infos: dict[str, Any], slots: np.ndarray, restarted: np.ndarray) -> None:
        """Results of the matches among ``slots`` (whole matches, in slot order) that ended at this step, but for
        those ``restarted`` (cut short: no result)."""
        frags = infos["frags"].reshape(-1, self.num_agents)
        over = (self._ended[slots] & ~restarted).reshape(-1, self.num_agents).all(axis=1)
        result = np.full(len(slots), None, object)
        objective = np.zeros(len(slots))
        for m in np.flatnonzero(over).tolist():
            match = slice(m * self.num_agents, (m + 1) * self.num_agents)
            result[match] = outcomes(frags[m])
            objective[match] = frags[m] if self.num_bots else result[match] == "win"
        ended = np.repeat(over, self.num_agents)
        infos["outcome"], infos["_outcome"] = result, ended
        infos["true_objective"], infos["_true_objective"] = objective, ended

    def _to_slots(self, infos: dict[str, Any]) -> dict[str, Any]:
        """Player-env-indexed info arrays (and masks) in slot order."""
        return {k: self._to_slots(v) if isinstance(v, dict) else v[self._env_of_slot] for k, v in infos.items()}

    def _tuple_to_slots(self, per_env: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(per_env[e] for e in self._env_of_slot)

    def _to_envs(self, per_slot: list[Any]) -> list[Any]:
        return [per_slot[s] for s in self._slot_of_env]
