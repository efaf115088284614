"""A watchdog process that takes VizDoom games down when the process that owns them dies.

VizDoom starts each game as a child process that outlives its controller: a SIGKILLed
script leaves its games running and their IPC files in ``/dev/shm``. The first game a
process starts also starts this reaper, which reads the games' VizDoom instance ids
(which name their IPC files), private directories and, once known, pids from a pipe;
the pipe's write end belongs to the owner, so the owner's death, however it happens,
reaches the reaper as end-of-file, and the reaper kills the games still registered and
removes their IPC files (a game's that exited on its own too) and directories, after
reporting what the games printed (the run's log; stderr for what is not chatter). The
other games of their groups (the players of their matches, :mod:`~vecfast.envs.doom.game_groups`),
which would hang without them, die too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading

import psutil

from vecfast.envs.doom.game_groups import end_groups_of
from vecfast.envs.doom.ipc import unlink_ipc
from vecfast.vector.process_cleanup import kill_processes


class GameReaper:
    """Client side: one reaper per owner process, started on first use (and again after fork).

    It remembers the games it announced, so that a reaper that died (someone killed it)
    is replaced by one that knows them all.
    """

    _lock = threading.Lock()
    _instance: GameReaper | None = None

    def __init__(self) -> None:
        self.owner_pid = os.getpid()
        self._games: dict[str, str] = {}  # instance id -> the line that announced it
        self._pipe_lock = threading.Lock()  # games are announced while others start or close
        self.process = self._start()

    @classmethod
    def for_this_process(cls) -> GameReaper:
        with cls._lock:
            if cls._instance is None or cls._instance.owner_pid != os.getpid():
                cls._instance = cls()
            return cls._instance

    def watch(self, instance_id: str, home: str, pid: int | None = None) -> None:
        """Take game ``instance_id`` down with the owner (again with its ``pid`` once known)."""
        line = f"+{instance_id} {pid or 0} {home}"
        with self._pipe_lock:
            self._games[instance_id] = line
            self._tell(line)

    def forget(self, instance_id: str) -> None:
        with self._pipe_lock:
            self._games.pop(instance_id, None)
            self._tell(f"-{instance_id}")

    @staticmethod
    def _start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", "from vecfast.envs.doom.reaper import serve; serve()"],
            stdin=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a Ctrl-C in the terminal must not kill it before the games
        )

    def _tell(self, line: str) -> None:
        """Send ``line``, or start a new reaper and tell it every game if this one is gone."""
        with contextlib.suppress(BrokenPipeError):
            if self.process.poll() is None:
                self._send([line])
                return
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        self.process = self._start()
        self._send(list(self._games.values()))

    def _send(self, lines: list[str]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("".join(f"{line}\n" for line in lines))
        self.process.stdin.flush()


def serve() -> None:
    """Reaper side: track the games announced on stdin; at end-of-file take down those still listed."""
    games: dict[str, tuple[psutil.Process | None, str]] = {}  # instance id -> (process, home)
    for line in sys.stdin:
        if line[0] == "+":
            instance_id, pid, home = line[1:].rstrip("\n").split(" ", 2)
            proc = None
            with contextlib.suppress(psutil.Error):  # Process() remembers its start time: a reused pid is spared
                proc = psutil.Process(int(pid)) if int(pid) else None
            games[instance_id] = (proc, home)
        else:
            games.pop(line[1:].rstrip("\n"), None)
    running = [proc for proc, _ in games.values() if proc is not None]
    end_groups_of(running)
    kill_processes(running)
    unlink_ipc(games)
    for instance_id, (_, home) in games.items():
        _report_output(home, instance_id)
        shutil.rmtree(home, ignore_errors=True)


def _report_output(home: str, instance_id: str) -> None:
    """What the game printed (its ``game.log``: :mod:`vecfast.envs.doom.game_process`), as its release reports it."""
    from vecfast import chatter

    try:
        with open(os.path.join(home, "game.log"), errors="replace") as log:
            text = log.read()
    except OSError:
        return
    name = "VizDoom game" if instance_id.startswith("starting-") else f"VizDoom game {instance_id}"  # no id yet
    chatter.report(text, name, chatter.VIZDOOM_CHATTER)
