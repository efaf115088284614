"""Networked Doom matches as one flat vector env of agent slots: vecfast's one implementation of multiplayer Doom.

The PettingZoo envs (:class:`~vecfast.multiagent.doom_match.DoomMatch`, one match) and the
trainers (many matches) both play through :class:`DoomMatchesVectorEnv`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vecfast.envs.doom.full_game_env import checked_reward_shaping
from vecfast.multiagent.doom_player import DoomPlayerEnv, MatchNetwork, PortTakenError
from vecfast.multiagent.slots import SlotLayout
from vecfast.vector import AsyncSharedMemVectorEnv, EnvError, StepTimeoutError, WorkerDiedError
from vecfast.vector.action_check import check_action_batch
from vecfast.vector.shared_buffers import map_tree

__all__ = ["DoomMatchesVectorEnv", "outcomes"]

MATCH_FAILURES = (EnvError, StepTimeoutError, WorkerDiedError, PortTakenError)  # what tears the matches down


def outcomes(frags: np.ndarray) -> list[str]:
    """Each player's result by final frags: ``"win"`` (most, alone), ``"draw"`` (most, tied) or ``"loss"``."""
    top = frags == frags.max()
    return ["loss" if not best else "win" if top.sum() == 1 else "draw" for best in top]


class DoomMatchesVectorEnv(VectorEnv):
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

    Reliability: a failure anywhere (a player process that dies, a match that stops
    answering for ``timeout`` seconds, a host that cannot start) tears down every match of
    this env (its processes killed) and starts them again (in a fresh network, or on fresh
    ports): that step returns every slot ``truncated=True`` with ``info["match_restarted"]``
    (the reason) and the next step, or ``reset``, starts the new matches. A start that fails
    (a host whose port another process took meanwhile, games that do not connect) is tried
    again likewise, up to ``max_start_attempts`` times in all.

    The network (see :class:`~vecfast.multiagent.doom_player.MatchNetwork`): by default the
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
        self.num_workers = num_workers
        self.timeout = timeout
        self.max_start_attempts = max_start_attempts
        self.restarts = 0  # times every match was torn down and started again
        self._spin_us = spin_us
        self.num_bots = int(game_kwargs.get("num_bots", 0))
        self._game_kwargs = {"wad": wad, "connect_timeout": timeout, **game_kwargs}
        self.network = MatchNetwork(network_isolation)
        self.slots = SlotLayout(num_matches, [f"player_{p}" for p in range(num_agents)])
        self.num_matches = num_matches
        self.num_agents = num_agents
        self.num_envs = self.slots.num_slots
        self.possible_agents = self.slots.possible_agents
        self.agent_ids = self.slots.agent_ids
        self.match_ids = self.slots.match_ids
        # Player-major env order (env p * M + m is player p of match m) puts each player
        # position in its own workers, matches in the same order in all of them.
        self._env_of_slot = np.array([p * num_matches + m for m in range(num_matches) for p in range(num_agents)])
        self._slot_of_env = np.argsort(self._env_of_slot)
        self._match_of_env = np.arange(self.num_envs) % num_matches
        self._slot_ids = np.arange(self.num_envs)
        self.players = self._start_players()
        self.single_observation_space = self.players.single_observation_space
        self.single_action_space = self.players.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = dict(self.players.metadata)
        self.render_mode = self.players.render_mode
        self._ended = np.zeros(self.num_envs, np.bool_)  # last reported terminated | truncated
        self._restart_pending = False  # torn down: the next step starts the matches again
        self._last_obs: Any = None

    def _start_players(self) -> AsyncSharedMemVectorEnv:
        launcher, self.ports = self.network.open(self.num_matches)
        n, m, kwargs = self.num_agents, self.num_matches, {**self._game_kwargs, "launcher": launcher}
        fns = [functools.partial(DoomPlayerEnv, e // m, n, self.ports[e % m], **kwargs) for e in range(n * m)]
        try:
            return AsyncSharedMemVectorEnv(
                fns,
                copy=False,  # rows are gathered into slot order, which copies them anyway
                num_workers=self.num_workers,
                double_buffered=False,
                autoreset_mode=AutoresetMode.NEXT_STEP,
                step_timeout=self.timeout + 5.0,  # the games give up connecting after `timeout`
                spin_us=self._spin_us,
            )
        except BaseException:
            self.network.close()
            raise

    def _replace_players(self) -> None:
        self.players.close(terminate=True)
        self.restarts += 1
        self.players = self._start_players()

    # ----------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every match, or the whole matches ``options["reset_mask"]`` selects."""
        mask = options.pop("reset_mask", None) if options else None
        env_seeds = seed if seed is None or isinstance(seed, (int, np.integer)) else self._to_envs(list(seed))
        if mask is not None and not self._restart_pending:
            to_reset = self.slots.matches_to_reset(mask, self._ended)
            options = {**options, "reset_mask": to_reset[self._match_of_env]}
            self._ended[to_reset[self.slots.match_ids]] = False
        else:
            self._ended[:] = False
        return self._start_matches(env_seeds, options)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        check_action_batch(self.action_space, actions, self._slot_ids)
        if self._restart_pending:  # the reset step of matches started again
            obs, infos = self._start_matches(None, None)
            zeros = np.zeros(self.num_envs, np.bool_)
            infos["active"], infos["_active"] = zeros.copy(), self.slots.all_slots
            self._ended[:] = False
            return obs, np.zeros(self.num_envs), zeros, zeros.copy(), infos
        try:
            obs, rewards, terminated, truncated, infos = self.players.step(np.asarray(actions)[self._slot_of_env])
        except MATCH_FAILURES as exc:
            return self._tear_down(exc)
        active = ~self._ended
        terminated, truncated = terminated[self._env_of_slot], truncated[self._env_of_slot]
        self._ended = terminated | truncated
        infos = self.slots.add_ids(self._to_slots(infos))
        infos["active"], infos["_active"] = active, self.slots.all_slots
        if self._ended.any():
            self._add_outcomes(infos)
        self._last_obs = map_tree(lambda a: a[self._env_of_slot], obs)
        return self._last_obs, rewards[self._env_of_slot], terminated, truncated, infos

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
        """Reset the players (starting their games), starting everything again on failure."""
        for attempt in range(self.max_start_attempts):
            try:
                self.network.check_ports()
                # New players' games all need their first reset: a reset mask no longer applies.
                obs, infos = self.players.reset(seed=env_seeds, options=options if attempt == 0 else None)
                break
            except MATCH_FAILURES as exc:
                if attempt + 1 == self.max_start_attempts:
                    raise RuntimeError(f"no match started in {self.max_start_attempts} attempts: {exc}") from exc
                self._replace_players()
                self._ended[:] = False
        self._restart_pending = False
        self._last_obs = map_tree(lambda a: a[self._env_of_slot], obs)
        return self._last_obs, self.slots.add_ids(self._to_slots(infos))

    def _tear_down(self, exc: BaseException) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        self._replace_players()
        self._restart_pending = True
        self._ended[:] = True
        infos = self.slots.add_ids({"match_restarted": np.full(self.num_envs, reason, object)})
        infos["_match_restarted"] = self.slots.all_slots
        infos["active"], infos["_active"] = ~self._ended, self.slots.all_slots
        truncated = np.ones(self.num_envs, np.bool_)
        return self._last_obs, np.zeros(self.num_envs), np.zeros(self.num_envs, np.bool_), truncated, infos

    def _add_outcomes(self, infos: dict[str, Any]) -> None:
        frags = infos["frags"].reshape(self.num_matches, self.num_agents)
        over = self._ended.reshape(self.num_matches, self.num_agents).all(axis=1)
        result = np.full(self.num_envs, None, object)
        objective = np.zeros(self.num_envs)
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
