"""Networked VizDoom matches between learning agents, as a PettingZoo ParallelEnv.

Every agent plays in its own VizDoom game: player 0 hosts the match on a UDP port and the
others join it on 127.0.0.1, and the games advance in lockstep, so all players must
act at once. Each player's game therefore runs in its own worker process of an
:class:`~vecfast.vector.AsyncSharedMemVectorEnv` (one env per worker), which steps them
together with observations and actions in shared memory, reaps their game processes, and
reports a dead or stalled player instead of hanging. The per-player game is the
single-player full-game env (:class:`~vecfast.envs.doom.DoomFullGameEnv`: its spaces,
action heads, measurements and reward shaping), switched from "host a game alone" to
hosting or joining a networked one.

The network: VizDoom's engine binds its port on every address, with no option to change
that, so the games of a match run in a private network namespace of their own (only
loopback; see :mod:`vecfast.network_isolation`) where the platform allows it,
and otherwise in the host's network with a :class:`NetworkIsolationWarning`.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import vizdoom as vzd
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from pettingzoo import ParallelEnv

from vecfast.envs.doom.full_game_env import DoomFullGameEnv
from vecfast.network_isolation import (
    ENV_VAR,
    NetworkIsolationError,
    NetworkIsolationWarning,
    PrivateNetwork,
    isolation_requested,
)
from vecfast.vector import AsyncSharedMemVectorEnv, EnvError, StepTimeoutError, WorkerDiedError

__all__ = [
    "DoomMatch",
    "DoomPlayerEnv",
    "MatchNetwork",
    "NetworkIsolationError",
    "NetworkIsolationWarning",
    "PortTakenError",
    "free_udp_port",
    "outcomes",
    "start_match",
    "udp_port_free",
]


class PortTakenError(OSError):
    """The port chosen for a match's host was taken by another process before the games started."""


MATCH_FAILURES = (EnvError, StepTimeoutError, WorkerDiedError, PortTakenError)  # what tears a match down
DOOM_PORT = 5029  # Doom's own; in a private network nothing else is there
T = TypeVar("T")


def free_udp_port(address: str = "127.0.0.1") -> int:
    """A UDP port that nothing is bound to now on ``address`` (the kernel's pick, so concurrent callers differ).

    The probe binds loopback unless told otherwise, and a port in use on every address
    (as a VizDoom host binds it) is in use on loopback too. Another process may still take
    it before the host binds it: :meth:`MatchNetwork.check_ports` looks again just before
    the games start, and a match whose port is taken starts again on another port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def udp_port_free(port: int, address: str = "127.0.0.1") -> bool:
    """Whether UDP ``port`` of ``address`` can be bound now (by a moment's bind on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
        return True


def vizdoom_engine() -> str:
    """The VizDoom engine a :class:`vizdoom.DoomGame` starts (the ``vizdoom`` executable of the package)."""
    return os.path.join(os.path.dirname(vzd.__file__), "vizdoom")


class MatchNetwork:
    """Where the games of a player set talk: a private network (a :class:`PrivateNetwork`) or the host's.

    ``network_isolation``: ``None`` (the default) isolates where the platform allows it and
    otherwise warns (:class:`NetworkIsolationWarning`) and uses the host's network, unless
    the environment variable ``VECFAST_NETWORK_ISOLATION`` is ``0``; ``True`` raises
    :class:`NetworkIsolationError` instead of using the host's network; ``False`` uses the
    host's network (and warns).
    """

    def __init__(self, network_isolation: bool | None = None) -> None:
        self.required = network_isolation is True
        self.why_exposed: str | None = None  # why the games use the host's network
        if not isolation_requested(network_isolation):
            self.why_exposed = (
                "network_isolation=False" if network_isolation is False else f"{ENV_VAR}={os.environ.get(ENV_VAR)}"
            )
        self.private: PrivateNetwork | None = None  # that of the players now running
        self.ports: list[int] = []
        self._ports_checked = False
        self._warned = False

    @property
    def isolated(self) -> bool:
        """Whether the games now running are in a private network."""
        return self.private is not None

    def open(self, num_matches: int) -> tuple[str | None, list[int]]:
        """The engine launcher (``None``: VizDoom's own engine) and a port for each of ``num_matches`` new matches.

        Ends the private network of the players before (whose games must be gone).
        """
        self.close()
        self._ports_checked = False
        if self.why_exposed is None:
            try:
                self.private = PrivateNetwork(vizdoom_engine())
                self.ports = [DOOM_PORT + m for m in range(num_matches)]
                return self.private.launcher, self.ports
            except NetworkIsolationError as exc:
                if self.required:
                    raise
                self.why_exposed = f"no private network can be made here: {exc}"
        self.ports = ports = [free_udp_port() for _ in range(num_matches)]
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"the VizDoom games of these matches listen on UDP port{'s' if len(ports) > 1 else ''} "
                f"{', '.join(map(str, ports))} (another port when a match restarts) on EVERY address of this "
                f"host, not only 127.0.0.1 ({self.why_exposed}): any host that can reach this one can join or "
                "disrupt a match. Play only on a trusted network or have a firewall drop incoming UDP; "
                "isolating the games needs Linux with user namespaces open to this user "
                "(see vecfast's README, 'Multiplayer Doom and the network').",
                NetworkIsolationWarning,
                stacklevel=4,
            )
        return None, ports

    def check_ports(self) -> None:
        """Before the first reset of new players: raise :class:`PortTakenError` if another process took a port.

        Only in the host's network (nothing else is in a private one), and only once per
        :meth:`open`: the games bind their ports themselves. A host whose port is taken
        exits while starting, which VizDoom 1.3.2 answers by segfaulting the process that
        started it; this check leaves that to a port taken in the moment between it and the
        host's start.
        """
        if self.private is None and not self._ports_checked:
            taken = [port for port in self.ports if not udp_port_free(port)]
            if taken:
                raise PortTakenError(errno.EADDRINUSE, f"UDP port {taken[0]} was taken before the match started")
            self._ports_checked = True

    def close(self) -> None:
        if self.private is not None:
            self.private.close()
            self.private = None


class DoomPlayerEnv(DoomFullGameEnv):
    """One player's game of a networked match: player 0 hosts it on ``port``, the others join.

    Match settings (deathmatch rules, time limit) are the host's; a joiner takes them from
    the host. ``connect_timeout``: seconds the games wait for each other. ``launcher``:
    the executable that starts the game's engine in the match's private network
    (:attr:`PrivateNetwork.launcher <vecfast.network_isolation.PrivateNetwork>`);
    ``None``: the host's network.
    """

    def __init__(
        self,
        player: int,
        num_players: int,
        port: int,
        *,
        num_bots: int = 0,
        connect_timeout: float = 20.0,
        launcher: str | None = None,
        **kwargs,
    ) -> None:
        self.player = player
        self.num_players = num_players
        self.port = port
        self.connect_timeout = connect_timeout
        self.launcher = launcher
        # The host adds the match's bots; they join every player's game through the network.
        super().__init__(num_bots=num_bots if player == 0 else 0, **kwargs)
        if launcher is not None:
            self.game.set_vizdoom_path(launcher)

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
    (in a fresh private network, or on fresh ports) and ``reset`` runs again with
    ``retry=True``, up to ``max_attempts`` times in all.
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
    seconds, is torn down (its processes killed) and started again (in a fresh network, or
    on a fresh port): that step returns every agent ``truncated=True`` with
    ``infos[agent]["match_restarted"]`` (the reason) and the next ``reset`` plays the new
    match. A host that cannot start (its
    port was taken meanwhile) is retried likewise, up to ``max_start_attempts`` times.

    ``network_isolation`` (see :class:`MatchNetwork`): by default the games play in a
    private network of their own where the platform allows it (``network.isolated``),
    since VizDoom's engine listens on every address of the host; otherwise they use the
    host's network, with a :class:`NetworkIsolationWarning`.
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
        network_isolation: bool | None = None,
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
        self.network = MatchNetwork(network_isolation)
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
        launcher, (self.port,) = self.network.open(1)
        fns = [
            functools.partial(DoomPlayerEnv, i, n, self.port, launcher=launcher, **self._game_kwargs) for i in range(n)
        ]
        try:
            return AsyncSharedMemVectorEnv(
                fns,
                num_workers=n,  # lockstep: every player's game in its own process, all stepping at once
                double_buffered=False,
                autoreset_mode=AutoresetMode.DISABLED,
                step_timeout=self.timeout + 5.0,  # the games give up connecting after `timeout`
            )
        except BaseException:
            self.network.close()
            raise

    def _restart(self) -> None:
        self._players.close(terminate=True)
        self.restarts += 1
        self._players = self._start_players()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        def start(_: bool) -> tuple[dict[str, Any], dict[str, Any]]:
            self.network.check_ports()
            return self._players.reset(seed=seed, options=options)

        obs, infos = start_match(start, self._restart, self.max_start_attempts)
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
        try:
            self._players.close()
        finally:
            self.network.close()

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
