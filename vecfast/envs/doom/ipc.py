"""The IPC a VizDoom game leaves in /dev/shm when it does not close, and its removal.

A game with instance id ``i`` (``+viz_instance_id i`` on its command line) keeps shared
memory ``ViZDoomSM<i>`` and message queues ``ViZDoomMQCtr<i>`` and ``ViZDoomMQDoom<i>``.
It removes them itself only when it is closed; one that was killed, or that exited on
its own while starting, leaves them. This module imports no VizDoom, so every vecfast
process can clean up after games (``vecfast.envs`` registers :func:`unlink_ipc_of_killed`
with :mod:`vecfast.vector.process_cleanup`), whether or not it made any.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence

SHM_DIR = "/dev/shm"
IPC_PREFIXES = ("ViZDoomSM", "ViZDoomMQCtr", "ViZDoomMQDoom")
_INSTANCE_ID_FLAG = "+viz_instance_id"


def game_instance_id(cmdline: Sequence[str]) -> str | None:
    """The instance id on a VizDoom game's command line; ``None`` for any other process."""
    if _INSTANCE_ID_FLAG not in cmdline:
        return None
    i = cmdline.index(_INSTANCE_ID_FLAG)
    return cmdline[i + 1] if i + 1 < len(cmdline) else None


def unlink_ipc(instance_ids: Iterable[str]) -> None:
    """Remove the shared memory and message queues of VizDoom games that are gone."""
    for instance_id in filter(None, instance_ids):  # an unstarted game's id is ""
        for prefix in IPC_PREFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(SHM_DIR, prefix + instance_id))


def unlink_ipc_of_killed(cmdlines: list[list[str]]) -> None:
    """Leftover cleaner for :mod:`vecfast.vector.process_cleanup`: the IPC of the games among killed processes."""
    unlink_ipc(filter(None, map(game_instance_id, cmdlines)))
