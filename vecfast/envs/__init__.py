"""Environments: VizDoom scenarios, batched navigation, multiplayer Doom."""

from vecfast.envs.registration import register_envs

register_envs()
