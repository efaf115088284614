"""Environments: VizDoom scenarios, batched navigation, multiplayer Doom (see the issues)."""
