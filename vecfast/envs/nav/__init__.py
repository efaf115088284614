"""Batched PointGoal navigation in procedurally generated indoor scenes (the Large Batch Simulation design).

``BatchedPointNavEnv`` steps and renders a whole batch of envs in one call, with scenes
shared between envs and rotated through a dataset; ``PointNavEnv`` is one env with the
same dynamics. Scenes are made by :func:`make_scenes` (``vecfast nav make-scenes``).

Attributes are imported on first use, so that registering the gymnasium id on
``import vecfast`` loads none of the simulator.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BatchedPointNavEnv": "vecfast.envs.nav.vector_env",
    "PointNavEnv": "vecfast.envs.nav.env",
    "default_scene_dir": "vecfast.envs.nav.scenes",
    "make_scenes": "vecfast.envs.nav.scenes",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
