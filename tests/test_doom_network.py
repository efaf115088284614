"""Multiplayer Doom and the host's network: nothing vecfast binds, and no game, is reachable from outside.

VizDoom's engine binds its UDP port on every address, so a match's games run in a private
network namespace (loopback only) where the platform allows it; otherwise, or when the user
opts out, they run in the host's network with a NetworkIsolationWarning. The sockets vecfast
opens itself bind 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psutil
import pytest
from helpers import descendants, wait_gone

from vecfast.envs.doom import doom_duel_v0
from vecfast.envs.doom.multiplayer import player as doom_player
from vecfast.network_isolation import (
    ENV_VAR,
    NetworkIsolationError,
    NetworkIsolationWarning,
    PrivateNetwork,
)

pytestmark = pytest.mark.timeout(120)

SHORT = 0.05  # minutes: 105 tics, 52 steps at frame skip 2
NOOP = np.array([0, 0, 0, 0, 0, 0, 10])


def network_namespaces_allowed() -> bool:
    """Whether this process may make a network namespace (with a user namespace, or alone as root), as
    a forked child finds out without vecfast's help."""
    pid = os.fork()
    if pid == 0:
        unshare = ctypes.CDLL(None, use_errno=True).unshare
        os._exit(0 if unshare(0x10000000 | 0x40000000) == 0 or unshare(0x40000000) == 0 else 1)
    return os.waitpid(pid, 0)[1] == 0


isolating = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not network_namespaces_allowed(),
    reason="this platform gives this user no network namespace: matches fall back to the host's network",
)


@pytest.fixture(autouse=True)
def fresh_cwd(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """``closing(env)`` is ``env``, closed when the test ends, however it ends."""
    envs: list[Any] = []
    yield lambda env: envs.append(env) or env
    for env in envs:
        with contextlib.suppress(Exception):
            env.close()


def games() -> list[psutil.Process]:
    return [p for p in descendants() if p.name() == "vizdoom"]


def net_namespace(pid: int | str = "self") -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` holds."""
    links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    return {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}


def udp_table(pid: int | str = "self") -> dict[str, int]:
    """Inode -> local port of the UDP sockets of ``pid``'s network namespace."""
    table = {}
    for name in ("udp", "udp6"):
        with open(f"/proc/{pid}/net/{name}") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                table[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return table


def host_visible_ports(game: psutil.Process) -> set[int]:
    """The UDP ports of ``game``'s sockets as this process's (the host's) network sees them."""
    host = udp_table()
    return {host[inode] for inode in socket_inodes(game.pid) if inode in host}


def test_free_udp_port_binds_loopback_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    bound: list[tuple[str, int]] = []

    class Recording(socket.socket):
        def bind(self, address: Any) -> None:
            bound.append(address)
            super().bind(address)

    monkeypatch.setattr(doom_player.socket, "socket", Recording)
    port = doom_player.free_udp_port()
    assert bound == [("127.0.0.1", 0)] and 0 < port < 65536
    assert doom_player.udp_port_free(port)
    assert bound[-1] == ("127.0.0.1", port)
    doom_player.free_udp_port("0.0.0.0")  # another address only when asked
    assert bound[-1] == ("0.0.0.0", 0)
    monkeypatch.undo()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("0.0.0.0", 0))  # as a VizDoom host binds its port
        assert not doom_player.udp_port_free(taken.getsockname()[1])


@isolating
def test_a_match_plays_in_a_private_network(closing: Callable[[Any], Any], process_guard: Any) -> None:
    env = closing(doom_duel_v0.parallel_env(timelimit_minutes=SHORT))
    process_guard.watch(descendants())
    env.reset(seed=0)
    assert env.network.isolated
    holder = psutil.Process(env.network.private.holder_pid)
    players = games()
    assert len(players) == 2
    namespaces = {net_namespace(game.pid) for game in players}
    assert len(namespaces) == 1 and namespaces != {net_namespace()}  # one network, not the host's
    ports = set()
    for game in players:
        # The games listen (the host on the match's port) where the host's network cannot see them.
        own = udp_table(game.pid)
        ports |= {own[inode] for inode in socket_inodes(game.pid) & own.keys()}
        assert host_visible_ports(game) == set()
    assert env.port in ports
    steps = 0
    while env.agents:  # a whole match, as in the host's network
        env.step({agent: NOOP for agent in env.agents})
        steps += 1
    assert steps in (52, 53) and env.restarts == 0
    env.close()
    assert wait_gone([holder], timeout=5) == [] and games() == []


@isolating
def test_the_matches_of_a_vector_env_share_one_private_network(
    closing: Callable[[Any], Any], process_guard: Any
) -> None:
    env = closing(doom_duel_v0.vector_env(2, timelimit_minutes=SHORT))
    process_guard.watch(descendants())
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.tile(NOOP, (4, 1)))
    players = games()
    assert len(players) == 4 and len(set(env.ports)) == 2
    namespaces = {net_namespace(game.pid) for game in players}
    assert len(namespaces) == 1 and namespaces != {net_namespace()}
    assert all(host_visible_ports(game) == set() for game in players)
    env.close()
    assert games() == []


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_opting_out_warns_and_plays_in_the_hosts_network(
    how: str, monkeypatch: pytest.MonkeyPatch, closing: Callable[[Any], Any], process_guard: Any
) -> None:
    kwargs: dict[str, Any] = {"network_isolation": False} if how == "argument" else {}
    if how == "environment":
        monkeypatch.setenv(ENV_VAR, "0")
    with pytest.warns(NetworkIsolationWarning, match=r"UDP port \d+ .* on EVERY address") as caught:
        env = closing(doom_duel_v0.parallel_env(timelimit_minutes=SHORT, **kwargs))
    process_guard.watch(descendants())
    assert len(caught) == 1 and str(env.port) in str(caught[0].message)
    assert ("network_isolation=False" if how == "argument" else f"{ENV_VAR}=0") in str(caught[0].message)
    assert not env.network.isolated
    env.reset(seed=0)
    env.step({agent: NOOP for agent in env.agents})
    players = games()
    assert {net_namespace(game.pid) for game in players} == {net_namespace()}
    assert env.port in set().union(*map(host_visible_ports, players))  # what isolation prevents


def test_without_a_private_network_a_match_warns_and_plays(
    monkeypatch: pytest.MonkeyPatch, closing: Callable[[Any], Any], process_guard: Any
) -> None:
    def unavailable(engine: str) -> PrivateNetwork:
        raise NetworkIsolationError("cannot create a user namespace (No space left on device)")

    monkeypatch.setattr(doom_player, "PrivateNetwork", unavailable)
    with pytest.raises(NetworkIsolationError, match="user namespace"):
        closing(doom_duel_v0.parallel_env(timelimit_minutes=SHORT, network_isolation=True))  # required: no fallback
    with pytest.warns(NetworkIsolationWarning, match="no private network can be made here: cannot create a user"):
        env = closing(doom_duel_v0.parallel_env(timelimit_minutes=SHORT))
    process_guard.watch(descendants())
    env.reset(seed=0)
    env.step({agent: NOOP for agent in env.agents})
    assert not env.network.isolated and len(games()) == 2


@isolating
def test_a_launcher_runs_its_program_in_the_private_network_or_not_at_all() -> None:
    network = PrivateNetwork("/bin/cat")  # the launcher runs `cat` instead of VizDoom's engine
    try:
        assert net_namespace(network.holder_pid) != net_namespace()
        inside = subprocess.run([network.launcher, "/proc/self/net/dev"], capture_output=True, text=True, check=True)
        assert [line.split(":")[0].strip() for line in inside.stdout.splitlines()[2:]] == ["lo"]  # loopback only
    finally:
        network.close()
    assert not network.alive()
    # The holder is gone: a launcher started now fails instead of running in the host's network.
    try:
        gone = subprocess.run([network.launcher, "/proc/self/net/dev"], capture_output=True, text=True)
    except OSError:
        return  # the launcher went with its holder
    assert gone.returncode != 0 and "eth" not in gone.stdout


@isolating
def test_the_namespace_holder_dies_with_its_owner(tmp_path: Any, process_guard: Any) -> None:
    script = textwrap.dedent(
        """
        import time
        from vecfast.network_isolation import PrivateNetwork
        network = PrivateNetwork("/bin/true")
        print(network.holder_pid, flush=True)
        time.sleep(60)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert owner.stdout is not None
        holder = psutil.Process(int(owner.stdout.readline()))
        process_guard.watch([holder])
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(5)
        assert wait_gone([holder], timeout=5) == []
    finally:
        if owner.poll() is None:
            owner.kill()
