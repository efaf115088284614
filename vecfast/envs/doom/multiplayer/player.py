"""One player's game of a networked VizDoom match, and the network its match plays in.

Player 0 hosts the match on a UDP port and the others join it on 127.0.0.1. VizDoom's
engine binds its port on every address, with no option to change that, so the games of a
match run in a private network namespace of their own (only loopback; see
:mod:`vecfast.network_isolation`) where the platform allows it, and otherwise in the host's
network with a :class:`NetworkIsolationWarning`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import warnings
from typing import Any

from vecfast.envs.doom.full_game_env import DoomFullGameEnv
from vecfast.envs.doom.game_groups import end_games, group_arg, members
from vecfast.extras import require
from vecfast.network_isolation import (
    ENV_VAR,
    NetworkIsolationError,
    NetworkIsolationWarning,
    PrivateNetwork,
    isolation_requested,
)

vzd = require("vizdoom", "vecfast's Doom envs")

__all__ = [
    "DoomPlayerEnv",
    "MatchNetwork",
    "NetworkIsolationError",
    "NetworkIsolationWarning",
    "PortTakenError",
    "free_udp_port",
    "udp_port_free",
]


class PortTakenError(OSError):
    """The port chosen for a match's host was taken by another process before the games started."""


DOOM_PORT = 5029  # Doom's own; in a private network nothing else is there


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
                "(see vecfast's docs, 'Multiplayer Doom').",
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
    ``None``: the host's network. ``group``: the match's tag (:mod:`~vecfast.envs.doom.game_groups`):
    a step or a new episode that fails (this game died) ends the match's other games too, which would hang
    waiting for it: the games the match began with, never a partner's game rebuilt since.
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
        group: str | None = None,
        **kwargs,
    ) -> None:
        self.group = group
        self._match_games: list = []  # the group's games when this one joined its match: the ones to end with it
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
        args = f"{args} +name player_{self.player} +viz_connect_timeout {self.connect_timeout:g}"
        return args if self.group is None else f"{args} {group_arg(self.group)}"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        if self._process.pid is not None:  # a new episode of the running match
            with self._ending_the_match_on_failure():
                return super().reset(seed=seed, options=options)
        result = super().reset(seed=seed, options=options)  # the game joined: every game of the match runs
        if self.group is not None:
            self._match_games = members(self.group)
        return result

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        with self._ending_the_match_on_failure():
            return super().step(action)

    @contextlib.contextmanager
    def _ending_the_match_on_failure(self):
        try:
            yield
        except Exception:
            end_games(self._match_games)
            raise

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
