"""Start VizDoom games that neither race, litter the working directory or the terminal, nor outlive their owner."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass, field

import psutil

from vecfast import chatter
from vecfast.envs.doom.ipc import unlink_ipc
from vecfast.envs.doom.reaper import GameReaper
from vecfast.extras import require

vzd = require("vizdoom", "vecfast's Doom envs")

# VizDoom's game writes ``./_vizdoom/`` and ``./_vizdoom.ini`` into its working directory;
# two games creating the directory at once kill one of them. Each game gets a private
# directory, and since a process has one working directory, games of one process start
# one at a time.
_START_LOCK = threading.Lock()
# The first thing init() does is map two message queues in /dev/shm named after the game's
# instance id; a mapped queue in this process's memory map reveals the id while init() runs.
_MAPPED_QUEUE = re.compile(r"/dev/shm/ViZDoomMQCtr(\w+)")
_SPOT_INTERVAL = 0.005  # seconds; a game takes over 0.1 s from its queues to its first failure
GAME_LOG = "game.log"  # in the game's private directory: what its engine printed


class GameProcess:
    """Owns one :class:`vizdoom.DoomGame`: its private directory, its watched process, its IPC.

    VizDoom names a game's shared memory and message queues in /dev/shm after the game's
    instance id, and removes them when the game is closed, not when it is killed. Worse,
    VizDoom 1.3.2 crashes (segfaults) the process that starts a game when the game exits
    while starting, as a host does whose port is taken, and ``get_instance_id()`` works
    only on a running game. So a thread spots the id while ``init()`` runs and hands it
    to the reaper at once; the reaper removes the IPC of the games of an owner that dies,
    crashed or killed, and a failed start or the release removes it otherwise.

    The engine's output (its network handshake, SDL's complaints) goes to ``game.log`` in
    the game's private directory, through a two-line shell script in memory that VizDoom
    starts as its engine (``set_vizdoom_path``) and that execs the real one (or the private
    network's launcher) with stdout and stderr on that file. When the game is released,
    or its owner dies (the reaper), the file goes to the run's log and the lines that are
    not known chatter to stderr (:mod:`vecfast.chatter`); a start that fails says what
    the engine printed last. ``vecfast --verbose`` (``VECFAST_VERBOSE=1``) leaves the
    output on the terminal.
    """

    def __init__(self, game: vzd.DoomGame) -> None:
        self.game = game
        self.pid: int | None = None
        self.instance_id: str | None = None  # VizDoom's id of the game last started
        self._files = _GameFiles()
        # Runs at close() or, for an env nobody closed, at interpreter exit (Ctrl-C included):
        # the reaper covers only owners that die without running exit handlers.
        self._release = weakref.finalize(self, _release, game, self._files)

    @property
    def home(self) -> str | None:
        """The game's private directory; None until the game first starts."""
        return self._files.home

    def start(self) -> None:
        me = psutil.Process()
        reaper = GameReaper.for_this_process()
        with _START_LOCK:
            if self._files.home is None:  # made here, not with the env, and the reaper learns of it at once
                self._files.home = tempfile.mkdtemp(prefix="vecfast-doom-")
            home = self._files.home
            # Until the spotter knows the game's id, the reaper knows its directory (and what its engine
            # printed there): VizDoom crashes this process when the engine exits while starting.
            starting = f"starting-{os.path.basename(home)}"
            reaper.watch(starting, home)
            self.game.set_doom_config_path(os.path.join(home, "_vizdoom.ini"))
            before = {child.pid for child in me.children()}
            spotter = _InstanceSpotter(reaper, home)
            cwd = os.getcwd()
            os.chdir(home)
            engine = self.game.get_vizdoom_path() or os.path.join(os.path.dirname(vzd.__file__), "vizdoom")
            wrapper = None if chatter.verbose() else _output_wrapper(engine, os.path.join(home, GAME_LOG))
            try:
                if wrapper is not None:
                    self.game.set_vizdoom_path(f"/proc/{os.getpid()}/fd/{wrapper}")
                self.game.init()
            except BaseException as exc:
                spotter.stop()
                reaper.forget(starting)
                unlink_ipc(spotter.found)  # the game has exited (init() waited for that)
                for instance_id in spotter.found:
                    reaper.forget(instance_id)
                # what the engine printed goes with the error (and to the log), not again at the release
                output = game_output(home)
                chatter.write_log(output, "VizDoom game that did not start")
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(home, GAME_LOG))
                last = chatter.tail(output, chatter.VIZDOOM_CHATTER)
                if last and isinstance(exc, Exception):
                    raise _with_output(exc, last) from exc
                raise
            finally:
                if wrapper is not None:
                    os.close(wrapper)  # the engine runs (or failed): the script is done
                    self.game.set_vizdoom_path(engine)
                os.chdir(cwd)
            spotter.stop()
            reaper.forget(starting)
            self.instance_id = self.game.get_instance_id()
            self._files.instance_ids.append(self.instance_id)
            started = [child for child in me.children() if child.pid not in before]
        if started:
            self.pid = started[0].pid
            reaper.watch(self.instance_id, home, self.pid)

    def close(self) -> None:
        if self.instance_id is not None:
            with contextlib.suppress(OSError):
                GameReaper.for_this_process().forget(self.instance_id)
            self.instance_id = self.pid = None
        self._release()


class _InstanceSpotter:
    """Watches this process's memory map for the message queues of a game that ``init()`` starts.

    ``init()`` releases the GIL while it waits for the game, so this thread runs meanwhile;
    games of this process start one at a time (``_START_LOCK``), so a new queue is theirs.
    """

    def __init__(self, reaper: GameReaper, home: str) -> None:
        self.found: list[str] = []
        self._reaper = reaper
        self._home = home
        self._before = _mapped_instance_ids()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._spot, name="vecfast-doom-spotter", daemon=True)
        self._thread.start()

    def _spot(self) -> None:
        while not self._done.wait(_SPOT_INTERVAL):
            new = _mapped_instance_ids() - self._before
            if new:
                self.found = sorted(new)
                for instance_id in self.found:
                    self._reaper.watch(instance_id, self._home)
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _mapped_instance_ids() -> set[str]:
    with open("/proc/self/maps") as maps:
        return {match.group(1) for line in maps if (match := _MAPPED_QUEUE.search(line))}


@dataclass
class _GameFiles:
    """What a game leaves until its release removes it. Its private directory is made when the game first starts,
    not with the env: an env whose owner is killed before then (no exit handlers, no reaper yet) leaves nothing."""

    home: str | None = None
    instance_ids: list[str] = field(default_factory=list)  # of every game started: they name its IPC


def _release(game: vzd.DoomGame, files: _GameFiles) -> None:
    game.close()
    unlink_ipc(files.instance_ids)  # gone already unless the game was killed
    if files.home is not None:
        report_game_output(files.home, files.instance_ids)
        shutil.rmtree(files.home, ignore_errors=True)


def _output_wrapper(engine: str, log: str) -> int | None:
    """A shell script in memory that runs ``engine`` with its output appended to ``log``; its fd.

    ``None`` where there is no ``memfd_create`` (not Linux): the engine then prints to ours.
    """
    if not hasattr(os, "memfd_create"):
        return None
    fd = os.memfd_create("vizdoom-engine")
    os.write(fd, f'#!/bin/sh\nexec >>{shlex.quote(log)} 2>&1\nexec {shlex.quote(engine)} "$@"\n'.encode())
    return fd


def game_output(home: str) -> str:
    """What the engine of the game in ``home`` printed (its ``game.log``); empty if nothing."""
    try:
        with open(os.path.join(home, GAME_LOG), errors="replace") as log:
            return log.read()
    except OSError:
        return ""


def report_game_output(home: str, instance_ids: list[str] | None = None) -> None:
    """The game's output to the run's log, and its lines that are not chatter to stderr (:mod:`vecfast.chatter`)."""
    text = game_output(home)
    if text:
        name = f"VizDoom game {instance_ids[-1]}" if instance_ids else "VizDoom game"
        chatter.report(text, name, chatter.VIZDOOM_CHATTER)


def _with_output(exc: Exception, last: list[str]) -> Exception:
    """``exc`` again, its message followed by the engine's last lines (VizDoom's own say only that it exited)."""
    message = f"{exc}; the game's last output: {' | '.join(line.strip() for line in last)}"
    try:
        return type(exc)(message)
    except Exception:  # a type that takes other arguments
        return RuntimeError(message)
