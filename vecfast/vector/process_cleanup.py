"""Make every process vecfast starts die with its owner, leaving no shared memory.

Each worker leads its own process group, so the simulator processes its envs spawn
(VizDoom starts one game per env) can be found and killed as a group even after the
worker itself was SIGKILLed and its children were re-parented. Simulators that keep
named IPC in ``/dev/shm`` get it unlinked after their processes are killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterable

import psutil

OWNER_POLL_SECONDS = 0.2
# A VizDoom game with instance id ``i`` keeps shared memory ``ViZDoomSM<i>`` and message
# queues ``ViZDoomMQCtr<i>`` and ``ViZDoomMQDoom<i>`` in /dev/shm.
VIZDOOM_IPC_PREFIXES = ("ViZDoomSM", "ViZDoomMQCtr", "ViZDoomMQDoom")


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


def _vizdoom_instance_ids(procs: list[psutil.Process]) -> set[str]:
    ids = set()
    for proc in procs:
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        if "+viz_instance_id" in cmd:
            i = cmd.index("+viz_instance_id")
            if i + 1 < len(cmd):
                ids.add(cmd[i + 1])
    return ids


def unlink_vizdoom_ipc(instance_ids: Iterable[str]) -> None:
    """Remove the shared memory and message queues of VizDoom games that are gone.

    A game removes them itself only when it is closed; one that was killed, or that
    exited on its own while starting, leaves them.
    """
    for instance_id in filter(None, instance_ids):  # an unstarted game's id is ""
        for prefix in VIZDOOM_IPC_PREFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join("/dev/shm", prefix + instance_id))


def kill_group(pgid: int, spare_pid: int | None = None, timeout: float = 3.0) -> None:
    """SIGKILL every process of group ``pgid`` (except ``spare_pid``) and clean their IPC."""
    kill_processes([p for p in group_members(pgid) if p.pid != spare_pid], timeout)


def kill_processes(procs: list[psutil.Process], timeout: float = 3.0) -> None:
    """SIGKILL these processes (psutil refuses a reused pid), wait, then unlink their IPC."""
    instance_ids = _vizdoom_instance_ids(procs)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _wait_gone(procs, timeout)
    unlink_vizdoom_ipc(instance_ids)


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
    me = os.getpid()
    kill_group(os.getpgid(0), spare_pid=me)
    os._exit(code)


def watch_owner(owner_pid: int) -> None:
    """Start a daemon thread that ends this process group once ``owner_pid`` is gone.

    A thread (not the main loop) watches, so a worker stuck inside an env still dies.
    """
    owner = psutil.Process(owner_pid)

    def watch() -> None:
        while _running(owner):
            time.sleep(OWNER_POLL_SECONDS)
        kill_own_group_and_exit()

    threading.Thread(target=watch, name="vecfast-owner-watch", daemon=True).start()


def become_group_leader() -> None:
    """Give this worker its own process group and make SIGTERM take its simulators down."""
    os.setpgid(0, 0)
    # The owner decides about Ctrl-C; a worker never dies half-way through a step for it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: kill_own_group_and_exit(0))
