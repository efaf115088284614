"""Start VizDoom games that neither race, litter the working directory, nor outlive their owner."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import weakref

import psutil
import vizdoom as vzd

from vecfast.envs.doom.reaper import GameReaper

# VizDoom's game writes ``./_vizdoom/`` and ``./_vizdoom.ini`` into its working directory;
# two games creating the directory at once kill one of them. Each game gets a private
# directory, and since a process has one working directory, games of one process start
# one at a time.
_START_LOCK = threading.Lock()


class GameProcess:
    """Owns one :class:`vizdoom.DoomGame`: its private directory and its watched process."""

    def __init__(self, game: vzd.DoomGame) -> None:
        self.game = game
        self.home = tempfile.mkdtemp(prefix="vecfast-doom-")
        self.pid: int | None = None
        # Runs at close() or, for an env nobody closed, at interpreter exit (Ctrl-C included):
        # the reaper covers only owners that die without running exit handlers.
        self._release = weakref.finalize(self, _release, game, self.home)

    def start(self) -> None:
        self.game.set_doom_config_path(os.path.join(self.home, "_vizdoom.ini"))
        me = psutil.Process()
        with _START_LOCK:
            before = {child.pid for child in me.children()}
            cwd = os.getcwd()
            os.chdir(self.home)
            try:
                self.game.init()
            finally:
                os.chdir(cwd)
            started = [child for child in me.children() if child.pid not in before]
        if started:
            self.pid = started[0].pid
            GameReaper.for_this_process().watch(self.pid, self.home)

    def close(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(OSError):
                GameReaper.for_this_process().forget(self.pid)
            self.pid = None
        self._release()


def _release(game: vzd.DoomGame, home: str) -> None:
    game.close()
    shutil.rmtree(home, ignore_errors=True)
