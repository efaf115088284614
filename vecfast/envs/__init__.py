"""Environments: VizDoom scenarios, batched navigation, multiplayer Doom.

Importing it (``import vecfast`` does) registers vecfast's gymnasium ids and the removal
of the IPC that killed VizDoom games leave: a vector env's owner kills the games of a dead
worker, though only the worker made their envs (through vecfast's ids or VizDoom's own).
"""

from vecfast.envs.doom.ipc import unlink_ipc_of_killed
from vecfast.envs.registration import register_envs
from vecfast.vector.process_cleanup import register_leftover_cleaner

register_envs()
register_leftover_cleaner(unlink_ipc_of_killed)
