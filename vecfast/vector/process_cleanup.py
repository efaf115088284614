"""Make every process vecfast starts die with its owner, leaving no shared memory.

Each worker leads its own process group, so the simulator processes its envs spawn (a
game per env, say) can be found and killed as a group even after the worker itself was
SIGKILLed and its children were re-parented. A killed simulator may leave named IPC (in
``/dev/shm``, say) that only it would have removed: the packages that know such
simulators register a cleaner for it (:func:`register_leftover_cleaner`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable

import psutil

OWNER_POLL_SECONDS = 0.2

# Gets the command lines of killed processes (read before the kill: a dead process's is
# unreadable) once they are gone, and removes what they left behind.
LeftoverCleaner = Callable[[list[list[str]]], None]
_LEFTOVER_CLEANERS: list[LeftoverCleaner] = []


def register_leftover_cleaner(cleaner: LeftoverCleaner) -> None:
    """Have ``cleaner`` remove what the processes killed here leave behind, in owners and workers.

    Register it when a module is imported that every process using this one imports too
    (``import vecfast`` imports ``vecfast.envs``, which registers its simulators' cleaners):
    an owner cleans up after the simulators of a dead worker, though only the worker made
    their envs.
    """
    if cleaner not in _LEFTOVER_CLEANERS:
        _LEFTOVER_CLEANERS.append(cleaner)


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of process group ``pgid``."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def kill_group(pgid: int, spare_pid: int | None = None, timeout: float = 3.0) -> None:
    """SIGKILL every process of group ``pgid`` (except ``spare_pid``) and clean up after them."""
    kill_processes([p for p in group_members(pgid) if p.pid != spare_pid], timeout)


def kill_processes(procs: list[psutil.Process], timeout: float = 3.0) -> None:
    """SIGKILL these processes (psutil refuses a reused pid), wait, then run the leftover cleaners."""
    cmdlines = [_cmdline(proc) for proc in procs]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _wait_gone(procs, timeout)
    for cleaner in _LEFTOVER_CLEANERS:
        cleaner(cmdlines)


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _wait_gone(procs: list[psutil.Process], timeout: float) -> None:
    """Wait until each process is gone or a zombie (a killed orphan waits for init to reap it)."""
    deadline = time.monotonic() + timeout
    while procs and time.monotonic() < deadline:
        procs = [p for p in procs if _running(p)]
        if procs:
            time.sleep(0.01)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_own_group_and_exit(code: int = 1) -> None:
    """Called in a worker whose owner is gone: take its simulators down, then itself."""
    try:
        kill_group(os.getpgid(0), spare_pid=os.getpid())
    finally:
        os._exit(code)  # even if a cleaner failed: a worker must not outlive its owner


def watch_owner(owner_pid: int, when_gone: Callable[[], None] = kill_own_group_and_exit) -> None:
    """Start a daemon thread that calls ``when_gone`` (by default: end this process group) once ``owner_pid``
    is gone.

    A thread (not the main loop) watches, so a worker stuck inside an env (or a rank inside a
    collective) still dies.
    """
    owner = psutil.Process(owner_pid)

    def watch() -> None:
        while _running(owner):
            time.sleep(OWNER_POLL_SECONDS)
        when_gone()

    threading.Thread(target=watch, name="vecfast-owner-watch", daemon=True).start()


def become_group_leader() -> None:
    """Give this worker its own process group and make SIGTERM take its simulators down."""
    os.setpgid(0, 0)
    # The owner decides about Ctrl-C; a worker never dies half-way through a step for it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: kill_own_group_and_exit(0))
