"""Networked Doom matches as one flat vector env of agent slots: vecfast's one implementation of multiplayer Doom.

The PettingZoo envs (:class:`~vecfast.envs.doom.multiplayer.match.DoomMatch`, one match) and the
trainers (many matches) both play through :class:`DoomMatchesVectorEnv`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_empty_array

from vecfast.envs.doom.full_game_env import checked_reward_shaping
from vecfast.envs.doom.game_groups import end_group, new_group
from vecfast.envs.doom.multiplayer.player import DoomPlayerEnv, MatchNetwork, PortTakenError
from vecfast.multiagent.slot_vector_env import SlotResults, SlotState, SlotVectorEnv
from vecfast.vector import AsyncSharedMemVectorEnv, EnvError, StepTimeoutError, WorkerDiedError
from vecfast.vector.batch_rows import info_rows, scatter_info_rows, write_rows
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


class Held(enum.IntEnum):
    """What a slot of a restarted (or just started) match is owed without its game: as a READY slot, what recv returns
    next; as a slot owing an action, what its next send is answered with."""

    NONE = 0  # nothing: it plays
    REPORT = 1  # its match's end, truncated (the last observation, ``match_restarted``)
    RESET = 2  # the new match's first observation (reward 0, ``active`` False)


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
        self._lay_out(
            num_matches,
            agents,
            players.single_observation_space,
            players.single_action_space,
            reward_shaping=True,
            unit_of_slot=self._env_of_slot,
        )
        self.metadata = dict(players.metadata)
        self.render_mode = players.render_mode
        # which of its worker's two halves of matches (double buffering) each slot's game is in
        in_worker = self.match_ids % per_worker
        self._half_of_slot = (in_worker >= per_worker // 2) if self.double_buffered else np.zeros(self.num_envs, bool)
        self._held = np.full(self.num_envs, Held.NONE, np.int8)
        self._reset_obs = create_empty_array(self.single_observation_space, self.num_envs)  # started matches'
        self._start_infos: dict[str, Any] = {}  # the players' infos of the last start, by slot
        self._restart_reason = ""

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

    # ----------------------------------------------------------------- how these matches start, step and report
    def _start(self, matches: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None) -> None:
        """Start ``matches`` (their players' games), every match again on failure; each starting slot holds its first
        observation. Player ``p`` of match ``m`` takes the match's seed + ``p * num_matches`` (its env's index)."""
        env_seeds: list[int | None] = [None] * self.num_envs
        for m, seed in zip(matches.tolist(), seeds, strict=True):
            for p in range(self.num_agents):
                env_seeds[p * self.num_matches + m] = None if seed is None else seed + p * self.num_matches
        if len(matches) < self.num_matches:
            options = {**(options or {}), "reset_mask": np.isin(self._match_of_env, matches)}
        starting = self._start_matches(env_seeds, options)
        self._ended[starting] = False
        self._state[starting] = SlotState.READY

    def _send_slots(self, actions: Any, slots: np.ndarray, whole: bool) -> list[np.ndarray]:
        """Step the players of ``slots`` in their games; slots of a restarted match get what they are owed instead.
        Unless ``whole``, each half of the workers' matches is a part of its own (double buffering)."""
        held = self._held[slots] != Held.NONE
        self._state[slots[held]] = SlotState.READY
        if held.all():
            return []
        playing = slots[~held]
        order = np.argsort(self._env_of_slot[playing])  # env order: the players' rows
        rows = map_tree(lambda a: np.asarray(a)[~held][order], actions)
        self.players.send(rows, self._env_of_slot[playing][order])
        if whole:
            return [playing]
        return [playing[~self._half_of_slot[playing]], playing[self._half_of_slot[playing]]]

    def _receive(self, slots: np.ndarray) -> SlotResults:
        """``slots`` once their games have stepped; if the matches cannot go on, every match starts again and the
        slots that were in flight report the truncation first."""
        try:
            obs, rewards, terminated, truncated, infos = self.players.recv(np.sort(self._env_of_slot[slots]))
            envs = np.asarray(infos.pop("env_id"))
            order = np.argsort(self._slot_of_env[envs])
            slots = self._slot_of_env[envs][order]
            infos = info_rows(infos, order)
            restarted = self._restarted_matches(slots, infos)
        except MATCH_FAILURES as exc:
            self._tear_down(exc)
            return self._take_ready(np.flatnonzero(self._state == SlotState.READY))
        terminated, truncated = terminated[order], truncated[order] | restarted
        ended = terminated | truncated
        if (ended & ~restarted).any():
            self._add_outcomes(infos, slots, ended, restarted)
        active = ~self._ended[slots]
        return SlotResults(
            slots, map_tree(lambda a: a[order], obs), rewards[order], terminated, truncated, active, infos
        )

    def _take_ready(self, slots: np.ndarray) -> SlotResults:
        """What restarted (or just started) matches' slots ``slots`` return without their games: the truncation they
        report, or the new match's first observation."""
        report = self._held[slots] == Held.REPORT
        obs = map_tree(lambda new: new[slots], self._reset_obs)
        write_rows(obs, np.flatnonzero(report), map_tree(lambda last: last[slots[report]], self._last_obs))
        self._held[slots] = np.where(report, Held.RESET, Held.NONE)
        starting = np.flatnonzero(~report)
        infos = scatter_info_rows(info_rows(self._start_infos, slots[starting]), starting, len(slots))
        if report.any():
            infos["match_restarted"] = np.where(report, self._restart_reason, None).astype(object)
            infos["_match_restarted"] = report
            infos[RESTARTED], infos[f"_{RESTARTED}"] = report.copy(), report.copy()  # as a healed vector env says it
        zeros = np.zeros(len(slots), np.bool_)
        return SlotResults(slots, obs, np.zeros(len(slots)), zeros, report.copy(), zeros.copy(), infos)

    def _call_units(self, name: str, *args: Any, **kwargs: Any) -> Sequence[Any]:
        return self.players.call(name, *args, **kwargs)

    def _get_units(self, name: str) -> Sequence[Any]:
        return self.players.get_attr(name)

    def _set_units(self, name: str, values: list[Any] | Any) -> None:
        self.players.set_attr(name, values)

    def render(self) -> tuple[Any, ...]:
        """Each match host's last full-resolution frame."""
        return self.players.render()[: self.num_matches]

    def set_reward_shaping(self, coefficients: dict[str, float], slots: Sequence[int] | None = None) -> None:
        """Change the reward shaping coefficients of the players in ``slots`` (default: all) from their next step
        (checked, and merged into each player's own)."""
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
    def _start_matches(self, env_seeds: list[int | None] | None, options: dict[str, Any] | None) -> np.ndarray:
        """Reset the players (starting their games), every match again on failure; hold the started slots' first
        observations and infos for them, and return those slots (a mask)."""
        every = not options or "reset_mask" not in options
        for attempt in range(self.max_start_attempts):
            try:
                self.network.check_ports()
                starting = np.ones(self.num_envs, np.bool_) if every else options["reset_mask"][self._env_of_slot]
                obs, infos = self.players.reset(seed=env_seeds, options=options)
                break
            except MATCH_FAILURES as exc:
                if attempt + 1 == self.max_start_attempts:
                    raise RuntimeError(f"no match started in {self.max_start_attempts} attempts: {exc}") from exc
                self._replace_players(exc)
                # new players' games all need their first reset: a reset mask no longer applies
                every, options = True, None
        # a game that died as its match began a new episode: the match's players were rebuilt, and start it
        rebuilt = infos.pop(f"_{RESTARTED}", np.zeros(self.num_envs, np.bool_)) & infos.pop(RESTARTED, False)
        if rebuilt.any():
            self._record_restarts(np.unique(self._match_of_env[rebuilt.astype(bool)]))
        write_rows(self._reset_obs, starting, map_tree(lambda a: a[self._env_of_slot[starting]], obs))
        self._start_infos = self._to_slots(infos)
        self._held[starting] = Held.RESET
        return starting

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
        reasons = np.full(len(slots), None, object)
        for m, cause in self._record_restarts(matches).items():
            first_line = cause.message.splitlines()[0] if cause.message else ""
            reasons[self.match_ids[slots] == m] = f"{cause.exc_type}: {first_line}"
        infos["match_restarted"], infos["_match_restarted"] = reasons, restarted
        infos[RESTARTED], infos[f"_{RESTARTED}"] = restarted.copy(), restarted.copy()
        return restarted

    def _record_restarts(self, matches: np.ndarray) -> dict[int, Restart]:
        """Record each of ``matches`` (their players just rebuilt) as restarted; each one's cause, by match."""
        # a worker that died or stalled is the cause of its matches' ends, before the games that died with it
        records = sorted(self.players.restarts[self._players_restarts_seen :], key=lambda r: r.cause == "raised")
        self._players_restarts_seen = len(self.players.restarts)
        first = records[0] if records else Restart.of_matches((), RuntimeError("a game of the match died"))
        n, causes = self.num_agents, {}
        for m in matches.tolist():
            cause = next((r for r in records if m in self._match_of_env[list(r.env_indices)]), first)
            causes[m] = cause
            self.restarts.append(dataclasses.replace(cause, env_indices=tuple(range(m * n, (m + 1) * n))))
        return causes

    def _tear_down(self, exc: BaseException) -> None:
        """Start every match again after ``exc``: each slot reports the truncation once (the slots in flight at once,
        the others when next sent), then starts the new match."""
        self._restart_reason = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        self._replace_players(exc)
        in_flight = self._state == SlotState.SENT
        playing = (self._state == SlotState.ACTING) & (self._held == Held.NONE)
        self._sent.clear()
        self._start_matches(None, None)
        self._held[in_flight | playing] = Held.REPORT
        self._state[in_flight] = SlotState.READY

    def _add_outcomes(self, infos: dict[str, Any], slots: np.ndarray, ended: np.ndarray, restarted: np.ndarray) -> None:
        """Results of the matches among ``slots`` (whole matches, in slot order) that ended at this step, but for
        those ``restarted`` (cut short: no result)."""
        frags = infos["frags"].reshape(-1, self.num_agents)
        over = (ended & ~restarted).reshape(-1, self.num_agents).all(axis=1)
        result = np.full(len(slots), None, object)
        objective = np.zeros(len(slots))
        for m in np.flatnonzero(over).tolist():
            match = slice(m * self.num_agents, (m + 1) * self.num_agents)
            result[match] = outcomes(frags[m])
            objective[match] = frags[m] if self.num_bots else result[match] == "win"
        over_slots = np.repeat(over, self.num_agents)
        infos["outcome"], infos["_outcome"] = result, over_slots
        infos["true_objective"], infos["_true_objective"] = objective, over_slots

    def _to_slots(self, infos: dict[str, Any]) -> dict[str, Any]:
        """Player-env-indexed info arrays (and masks) in slot order."""
        return {k: self._to_slots(v) if isinstance(v, dict) else v[self._env_of_slot] for k, v in infos.items()}
