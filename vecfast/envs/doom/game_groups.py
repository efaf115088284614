"""Games that live and die together: the players' games of one networked match.

The games of a match wait for each other every tic, so when one dies the others hang (a
client whose host is gone) or run on alone for a few tics (a host whose client is gone),
and the match can only be started again as a whole. Each game of a group carries the
group's tag on its command line (an argument the engine ignores), and whoever notices a
member die ends the group: the env whose game crashed
(:class:`~vecfast.envs.doom.multiplayer.player.DoomPlayerEnv`), the reaper of a worker that
died (:mod:`~vecfast.envs.doom.reaper`), the matches' owner for a game that ran ahead
(:class:`~vecfast.envs.doom.multiplayer.matches.DoomMatchesVectorEnv`). Only the games that
exist when the group is ended die: the group's next games, started later under the same
tag, are spared. An env ends exactly the games its own match began with (:func:`members`
when its game joined, :func:`end_games`): a partner rebuilt already, in another worker, is
newer than that, whatever the clocks say.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable

import psutil

from vecfast.vector.process_cleanup import kill_processes

__all__ = ["end_games", "end_group", "end_groups_of", "group_arg", "members", "new_group"]

_PREFIX = "-vecfast-group-"


def new_group() -> str:
    """A tag no other group of any process has."""
    return uuid.uuid4().hex


def group_arg(group: str) -> str:
    """The engine argument that marks a game as a member of ``group``."""
    return f"{_PREFIX}{group}"


def members(group: str) -> list[psutil.Process]:
    """The games of ``group`` running now."""
    return _members({group}, time.time())


def end_games(games: Iterable[psutil.Process]) -> None:
    """Kill these games (those still running: psutil refuses a reused pid), and wait for them."""
    kill_processes(list(games))


def end_group(group: str) -> None:
    """Kill the games of ``group`` that exist now, and wait for them."""
    end_games(members(group))


def end_groups_of(games: Iterable[psutil.Process]) -> None:
    """End the groups that ``games`` (still running, or their command lines still readable) belong to."""
    before = time.time()
    tags: set[str] = set()
    for game in games:
        with contextlib.suppress(psutil.Error):
            tags.update(arg[len(_PREFIX) :] for arg in game.cmdline() if arg.startswith(_PREFIX))
    end_games(_members(tags, before))


def _members(tags: set[str], before: float) -> list[psutil.Process]:
    """The running games of the groups ``tags`` started no later than ``before``."""
    if not tags:
        return []
    marks = {group_arg(tag) for tag in tags}
    found = []
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline, started = proc.info["cmdline"], proc.info["create_time"]
        if cmdline and started is not None and started <= before and marks.intersection(cmdline):
            found.append(proc)
    return found
