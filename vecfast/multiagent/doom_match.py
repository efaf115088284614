"""Networked VizDoom matches between learning agents, as a PettingZoo ParallelEnv.

Every agent plays in its own VizDoom game: player 0 hosts the match on a UDP port of
127.0.0.1 and the others join it, and the games advance in lockstep, so all players must
act at once. Each player's game therefore runs in its own worker process of an
:class:`~vecfast.vector.AsyncSharedMemVectorEnv` (one env per worker), which steps them
together with observations and actions in shared memory, reaps their game processes, and
reports a dead or stalled player instead of hanging. The per-player game is the
single-player full-game env (:class:`~vecfast.envs.doom.DoomFullGameEnv`: its spaces,
action heads, measurements and reward shaping), switched from "host a game alone" to
hosting or joining a networked one.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from pettingzoo import ParallelEnv

from vecfast.envs.doom.full_game_env import DoomFullGameEnv
from vecfast.vector import AsyncSharedMemVectorEnv, EnvError, StepTimeoutError, WorkerDiedError

__all__ = ["DoomMatch", "DoomPlayerEnv", "free_udp_port", "outcomes", "start_match"]

MATCH_FAILURES = (EnvError, StepTimeoutError, WorkerDiedError)  # what tears a match down
T = TypeVar("T")


def free_udp_port() -> int:
    """A UDP port that nothing is bound to now (the kernel's pick, so concurrent callers differ).

    Another process may still take it before the host binds it; the host then fails to
    start and :class:`DoomMatch` starts the match again on another port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("", 0))  # the host binds every address, as this does
        return probe.getsockname()[1]


class DoomPlayerEnv(DoomFullGameEnv):
    """One player's game of a networked match: player 0 hosts it on ``port``, the others join.

    Match settings (deathmatch rules, time limit) are the host's; a joiner takes them from
    the host. ``connect_timeout``: seconds the games wait for each other.
    """

    def __init__(
        self, player: int, num_players: int, port: int, *, num_bots: int = 0, connect_timeout: float = 20.0, **kwargs
    ) -> None:
        self.player = player
        self.num_players = num_players
        self.port = port
        self.connect_timeout = connect_timeout
        # The host adds the match's bots; they join every player's game through the network.
        super().__init__(num_bots=num_bots if player == 0 else 0, **kwargs)

    def game_args(self) -> str:
        if self.player == 0:
            # Peer-to-peer: in packet-server mode (the default) the games step ~10x slower.
            args = f"-host {self.num_players} -port {self.port} -netmode 0 {self.match_rules}"
        else:
            args = f"-join 127.0.0.1:{self.port}"
        return f"{args} +name player_{self.player} +viz_connect_timeout {self.connect_timeout:g}"

    def respawn_delay(self) -> int:
        """One second with bots: a network game with bots and no respawn delay crashes (VizDoom 1.3.2 segfaults)."""
        return 1 if self.num_bots else 0

    def respawn_if_dead(self) -> bool:
        """Never: the host's forced respawn (``+sv_forcerespawn``) brings dead players back.

        The games of a match advance in lockstep, so every player must advance exactly
        ``frame_skip`` tics per step, while ``respawn_player()`` advances one game alone
        until its player is back, and the match then waits forever for the others.
        """
        return False


def start_match(reset: Callable[[bool], T], restart: Callable[[], None], max_attempts: int, what: str = "match") -> T:
    """``reset(retry)`` of players whose games start now, with ``restart()`` between failed attempts.

    A start fails when a host cannot bind its port (another process took it after
    :func:`free_udp_port`) or the games do not connect; ``restart()`` replaces the players
    (on fresh ports) and ``reset`` runs again with ``retry=True``, up to ``max_attempts``
    times in all.
    """
    for attempt in range(max_attempts):
        try:
            return reset(attempt > 0)
        except MATCH_FAILURES as exc:
            if attempt + 1 == max_attempts:
                raise RuntimeError(f"no {what} started in {max_attempts} attempts: {exc}") from exc
            restart()
    raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")


class DoomMatch(ParallelEnv):
    """A deathmatch between ``num_agents`` learning agents (``player_0`` hosts).

    ``num_bots`` built-in bots join the match (the host adds them at the start of each
    match). Each agent's observation and action space are those of the single-player
    full-game env; rewards use its shaping (``reward_shaping``) per agent. Players respawn, so agents
    never terminate: all are truncated at ``timelimit_minutes``. ``infos[agent]`` carries the
    raw figures (frags, deaths, damage dealt and taken, hits) every step and, at the end of
    a match, ``"outcome"``: ``"win"`` (most frags alone), ``"draw"`` (most frags, tied) or
    ``"loss"``, among the learning agents.

    A player process that dies, or a match whose games stop answering for ``timeout``
    seconds, is torn down (its processes killed) and started again on a fresh port: that
    step returns every agent ``truncated=True`` with ``infos[agent]["match_restarted"]``
    (the reason) and the next ``reset`` plays the new match. A host that cannot start (its
    port was taken meanwhile) is retried likewise, up to ``max_start_attempts`` times.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 35, "is_parallelizable": True}

    def __init__(
        self,
        wad: str,
        name: str,
        num_agents: int = 2,
        num_bots: int = 0,
        frame_skip: int = 2,
        timelimit_minutes: float = 4.0,
        resolution: tuple[int, int] = (128, 72),
        reward_shaping: dict[str, float] | None = None,
        render_mode: str | None = None,
        timeout: float = 20.0,
        max_start_attempts: int = 5,
    ) -> None:
        if num_agents < 1:
            raise ValueError(f"num_agents must be >= 1, got {num_agents}")
        if num_bots < 0:
            raise ValueError(f"num_bots must be >= 0, got {num_bots}")
        self.possible_agents = [f"player_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.metadata = {**DoomMatch.metadata, "name": name}
        self.render_mode = render_mode
        self.timeout = timeout
        self.max_start_attempts = max_start_attempts
        self.restarts = 0  # matches torn down and started again
        self._game_kwargs = {
            "wad": wad,
            "num_bots": num_bots,
            "frame_skip": frame_skip,
            "timelimit_minutes": timelimit_minutes,
            "resolution": resolution,
            "reward_shaping": reward_shaping,
            "render_mode": render_mode,
            "connect_timeout": timeout,
        }
        self._players = self._start_players()
        self._observation_space = self._players.single_observation_space
        self._action_space = self._players.single_action_space
        self._last_obs: dict[str, Any] = {}

    def observation_space(self, agent: str) -> spaces.Space:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_space

    def _start_players(self) -> AsyncSharedMemVectorEnv:
        n = len(self.possible_agents)
        self.port = port = free_udp_port()
        fns = [functools.partial(DoomPlayerEnv, i, n, port, **self._game_kwargs) for i in range(n)]
        return AsyncSharedMemVectorEnv(
            fns,
            num_workers=n,  # lockstep: every player's game in its own process, all stepping at once
            double_buffered=False,
            autoreset_mode=AutoresetMode.DISABLED,
            step_timeout=self.timeout + 5.0,  # the games give up connecting after `timeout`
        )

    def _restart(self) -> None:
        self._players.close(terminate=True)
        self.restarts += 1
        self._players = self._start_players()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, infos = start_match(
            lambda _: self._players.reset(seed=seed, options=options), self._restart, self.max_start_attempts
        )
        self.agents = list(self.possible_agents)
        return self._per_agent_obs(obs), self._per_agent_infos(infos)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("the match is over: call reset()")
        batch = np.stack([np.asarray(actions[agent]) for agent in self.agents])
        try:
            obs, rewards, terminations, truncations, infos = self._players.step(batch)
        except MATCH_FAILURES as exc:
            self._restart()
            self.agents = []
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            return (
                self._last_obs,
                dict.fromkeys(self.possible_agents, 0.0),
                dict.fromkeys(self.possible_agents, False),
                dict.fromkeys(self.possible_agents, True),
                {agent: {"match_restarted": reason} for agent in self.possible_agents},
            )
        agent_obs = self._per_agent_obs(obs)
        agent_infos = self._per_agent_infos(infos)
        agents = self.agents
        over = bool(terminations.any() or truncations.any())  # a networked match ends for all at once
        if over:
            self._add_outcomes(agent_infos)
            self.agents = []
        return (
            agent_obs,
            {agent: float(rewards[i]) for i, agent in enumerate(agents)},
            dict.fromkeys(agents, False),
            dict.fromkeys(agents, over),
            agent_infos,
        )

    def render(self) -> np.ndarray | None:
        """The host's last full-resolution frame."""
        return self._players.render()[0]

    def close(self) -> None:
        self._players.close()

    def _per_agent_obs(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        self._last_obs = {agent: {key: value[i] for key, value in obs.items()} for i, agent in enumerate(self.agents)}
        return self._last_obs

    def _per_agent_infos(self, infos: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {agent: {} for agent in self.possible_agents}
        for key, value in infos.items():
            if key.startswith("_"):
                continue
            for i in np.flatnonzero(infos[f"_{key}"]).tolist():
                out[self.possible_agents[i]][key] = value[i].item() if value.ndim == 1 else value[i]
        return out

    def _add_outcomes(self, agent_infos: dict[str, dict[str, Any]]) -> None:
        frags = np.array([agent_infos[agent].get("frags", 0.0) for agent in self.possible_agents])
        for agent, outcome in zip(self.possible_agents, outcomes(frags), strict=True):
            agent_infos[agent]["outcome"] = outcome


def outcomes(frags: np.ndarray) -> list[str]:
    """Each player's result by final frags: ``"win"`` (most, alone), ``"draw"`` (most, tied) or ``"loss"``."""
    top = frags == frags.max()
    return ["loss" if not best else "win" if top.sum() == 1 else "draw" for best in top]
