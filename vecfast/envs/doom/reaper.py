"""A watchdog process that takes VizDoom games down when the process that owns them dies.

VizDoom starts each game as a child process that outlives its controller: a SIGKILLed
script leaves its games running and their IPC files in ``/dev/shm``. The first game a
process starts also starts this reaper, which reads game pids (and the games' private directories)
from a pipe; the pipe's write end belongs to the owner, so the owner's death, however it
happens, reaches the reaper as end-of-file, and the reaper kills the games still
registered and removes their directories.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading

import psutil

from vecfast.vector.process_cleanup import kill_processes


class GameReaper:
    """Client side: one reaper per owner process, started on first use (and again after fork)."""

    _lock = threading.Lock()
    _instance: GameReaper | None = None

    def __init__(self) -> None:
        self.owner_pid = os.getpid()
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from vecfast.envs.doom.reaper import serve; serve()"],
            stdin=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a Ctrl-C in the terminal must not kill it before the games
        )

    @classmethod
    def for_this_process(cls) -> GameReaper:
        with cls._lock:
            reaper = cls._instance
            if reaper is None or reaper.owner_pid != os.getpid() or reaper.process.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def watch(self, pid: int, home: str) -> None:
        self._tell(f"+{pid} {home}")

    def forget(self, pid: int) -> None:
        self._tell(f"-{pid}")

    def _tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()


def serve() -> None:
    """Reaper side: track the pids announced on stdin; at end-of-file kill those still listed."""
    games: dict[int, tuple[psutil.Process, str]] = {}
    for line in sys.stdin:
        pid, _, home = line[1:].rstrip("\n").partition(" ")
        if line[0] == "+":
            with contextlib.suppress(psutil.Error):  # Process() remembers its start time: a reused pid is spared
                games[int(pid)] = (psutil.Process(int(pid)), home)
        else:
            games.pop(int(pid), None)
    kill_processes([proc for proc, _ in games.values()])
    for _, home in games.values():
        shutil.rmtree(home, ignore_errors=True)
