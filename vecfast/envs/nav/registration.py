"""gymnasium registration of ``vecfast/PointNav-v0``: entry points are strings, nothing is imported here."""

from __future__ import annotations

import gymnasium

POINTNAV_ID = "vecfast/PointNav-v0"


def register_nav_envs() -> None:
    """``gymnasium.make`` gives :class:`PointNavEnv`; ``make_vec`` (``vector_entry_point``) the batched env."""
    if POINTNAV_ID not in gymnasium.registry:
        gymnasium.register(
            POINTNAV_ID,
            entry_point="vecfast.envs.nav.env:PointNavEnv",
            vector_entry_point="vecfast.envs.nav.vector_env:BatchedPointNavEnv",
            max_episode_steps=None,
        )
