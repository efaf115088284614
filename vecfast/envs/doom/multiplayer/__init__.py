"""Multiplayer Doom: networked VizDoom games, one per player, as matches of agent slots.

:class:`~vecfast.envs.doom.multiplayer.matches.DoomMatchesVectorEnv` plays M matches as one vector env of agent slots
(what the trainers and ``doom_duel_v0.vector_env`` use); :class:`~vecfast.envs.doom.multiplayer.match.DoomMatch` is one
match through PettingZoo's ParallelEnv API (``doom_duel_v0.parallel_env``), played through the same vector env;
:mod:`~vecfast.envs.doom.multiplayer.player` holds one player's game and the private network the games play in.
"""
