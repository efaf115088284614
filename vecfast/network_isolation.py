"""Private networks for processes that would listen on every address of the host, so that no other host can
reach them (Linux): VizDoom's games of a match, torch.distributed's launcher and ranks of a local run.

VizDoom's engine (ZDoom's networking) binds its UDP port on every address of the host, and
torch's TCPStore (the rendezvous of an elastic launch) its TCP port, with no option to change
that: any host that can reach the port can join or disrupt the match or the run. A
:class:`PrivateNetwork` is a network namespace of its own whose only interface is loopback,
shared by the processes started through its launcher: they reach each other on 127.0.0.1 and
nothing else reaches them. It needs no root
where the kernel lets users create user namespaces (most Linux distributions do); a
process with ``CAP_SYS_ADMIN`` (root) gets the network namespace alone otherwise.

How: a *holder* process (this file run as a script; it imports nothing but the standard
library) unshares a user and a network namespace, maps the user's own uid and gid into it,
brings loopback up and keeps both namespaces alive until its owner closes it or dies (end
of file on its stdin). It also holds a *launcher*, a two-line shell script in memory
(``/proc/<holder>/fd/<n>``) that a :class:`vizdoom.DoomGame` is given as its engine
(``set_vizdoom_path``): the launcher runs this file again to join the holder's namespaces
(``setns``) and then execs VizDoom's real engine. ``DoomGame.init()`` starts the engine as a
child of the process that calls it, so only the engines run in the private network; their
controllers (vecfast's workers) stay in the host's and talk to them through shared memory
in ``/dev/shm`` (the mount namespace is shared), which is no network. A launcher that
cannot join the namespace fails: a game never falls back to the host's network silently.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shlex
import socket
import struct
import subprocess
import sys
import weakref

__all__ = ["ENV_VAR", "NetworkIsolationError", "NetworkIsolationWarning", "PrivateNetwork", "isolation_requested"]

ENV_VAR = "VECFAST_NETWORK_ISOLATION"  # "0" (or "false", "off", "no") turns isolation off

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFREQ = "16sh22x"  # struct ifreq: the interface name, then its flags (a short) in a 24-byte union
CHECK = "--vecfast-check"  # the launcher's argument that joins the namespace and reports instead of starting a game


class NetworkIsolationError(OSError):
    """No private network can be made here (or its launcher cannot join it); the message says why."""


class NetworkIsolationWarning(UserWarning):
    """The games of a match run in the host's network: other hosts can reach their UDP ports."""


def isolation_requested(network_isolation: bool | None) -> bool:
    """Whether to isolate: ``network_isolation`` if given, else yes unless :data:`ENV_VAR` says no."""
    if network_isolation is not None:
        return network_isolation
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "off", "no")


class PrivateNetwork:
    """A network namespace with only loopback, kept by a holder process; games join it through :attr:`launcher`.

    Args:
        engine: the executable the launcher starts (VizDoom's engine, ``vizdoom``).

    Raises:
        NetworkIsolationError: the platform allows no private network (not Linux, no user
            namespaces for this user, a seccomp filter that forbids ``unshare``/``setns``...).
    """

    def __init__(self, engine: str) -> None:
        if not sys.platform.startswith("linux"):
            raise NetworkIsolationError(f"network namespaces are Linux's; this is {sys.platform}")
        self.engine = engine
        self._owner_pid = os.getpid()
        # Its stdin's write end is ours: the holder ends when we close it or die, however.
        try:
            self._holder = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), "hold", engine],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        except OSError as exc:
            raise NetworkIsolationError(f"cannot start the namespace holder: {exc}") from exc
        self._finalizer = weakref.finalize(self, _stop, self._holder, self._owner_pid)
        assert self._holder.stdout is not None
        status = self._holder.stdout.readline().split(maxsplit=1)
        self._holder.stdout.close()
        if status[:1] != ["ok"]:
            self._holder.wait(timeout=30)  # it has failed: it exits
            stderr = self._holder.stderr.read() if self._holder.stderr else ""
            self.close()
            why = status[1].strip() if len(status) > 1 else f"the namespace holder died: {stderr.strip()}"
            raise NetworkIsolationError(why)
        self.launcher = f"/proc/{self._holder.pid}/fd/{int(status[1])}"
        try:
            check = subprocess.run([self.launcher, CHECK], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            self.close()
            raise NetworkIsolationError(f"the launcher does not run: {exc}") from exc
        if check.returncode != 0 or check.stdout.strip() != "joined":
            self.close()
            raise NetworkIsolationError(f"the launcher cannot join the namespace: {check.stderr.strip()}")

    @property
    def holder_pid(self) -> int:
        return self._holder.pid

    def alive(self) -> bool:
        return self._holder.poll() is None

    def close(self) -> None:
        """End the holder; games still in the namespace keep it until they exit."""
        self._finalizer()


def _stop(holder: subprocess.Popen, owner_pid: int) -> None:
    if os.getpid() != owner_pid:  # a forked copy: the holder is its parent's
        return
    with contextlib.suppress(OSError):
        holder.kill()
    holder.wait()
    for pipe in (holder.stdin, holder.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


# ----------------------------------------------------------------- the holder and the launcher (stdlib only)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _unshare() -> None:
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        _write("/proc/self/setgroups", "deny")  # an unprivileged user may map its gid only so
        _write("/proc/self/uid_map", f"{uid} {uid} 1")  # the same ids inside: files keep their owners
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        return
    errno = ctypes.get_errno()
    if libc.unshare(CLONE_NEWNET) == 0:  # CAP_SYS_ADMIN without user namespaces (a root container)
        return
    raise OSError(
        errno,
        f"cannot create a user namespace ({os.strerror(errno)}): unprivileged user namespaces are "
        "off here (sysctls user.max_user_namespaces, kernel.unprivileged_userns_clone, "
        "kernel.apparmor_restrict_unprivileged_userns) or a seccomp filter forbids unshare()",
    )


def _bring_up_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # never bound: ioctls only
        request = struct.pack(IFREQ, b"lo", 0)
        flags = struct.unpack(IFREQ, fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def _hold(engine: str) -> None:
    """Make the namespaces and the launcher, report ``ok <fd>`` (or ``error <why>``), then wait for EOF."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the owner's to handle
    try:
        _unshare()
        _bring_up_loopback()
        launcher = os.memfd_create("vizdoom-launcher", 0)
        script = shlex.join([sys.executable, "-I", "-S", os.path.abspath(__file__), "join", str(os.getpid()), engine])
        os.write(launcher, f'#!/bin/sh\nexec {script} "$@"\n'.encode())
    except Exception as exc:  # reported to the owner, who falls back to the host's network
        print("error", exc, flush=True)
        return
    print("ok", launcher, flush=True)
    sys.stdout.close()
    while sys.stdin.buffer.read(4096):
        pass


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _join(holder_pid: int, engine: str, args: list[str]) -> None:
    """Join the holder's namespaces, then become the engine (or, with :data:`CHECK`, report)."""
    libc = _libc()
    namespaces = f"/proc/{holder_pid}/ns/"
    host_net = os.stat("/proc/self/ns/net")
    try:
        user = os.open(namespaces + "user", os.O_RDONLY)
        net = os.open(namespaces + "net", os.O_RDONLY)
        # Its own user namespace, unless the holder needed none (root): join that first.
        joins = [(net, CLONE_NEWNET)]
        if not _same(os.fstat(user), os.stat("/proc/self/ns/user")):
            joins.insert(0, (user, CLONE_NEWUSER))
        for fd, kind in joins:
            if libc.setns(fd, kind) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns({'user' if kind == CLONE_NEWUSER else 'net'}): {os.strerror(err)}")
        os.close(user)
        os.close(net)
    except OSError as exc:
        sys.exit(f"vecfast: cannot join the private network of namespace holder {holder_pid}: {exc}")
    if _same(os.stat("/proc/self/ns/net"), host_net):
        sys.exit(f"vecfast: process {holder_pid} holds no private network")
    if args == [CHECK]:
        print("joined")
        return
    os.execv(engine, [engine, *args])


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        _hold(sys.argv[2])
    elif sys.argv[1] == "join":
        _join(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
