"""How long an env may go without a step before training calls it stalled (``TrainConfig.step_timeout``).

A fixed limit either misses stalls of fast envs for minutes or kills slow envs that are
fine. ``"auto"`` sets it from the env cycle measured once training is past its first
resets (the time between two steps of one env: ``num_envs / env steps per second``): a
hundred cycles, never less than a floor that absorbs a busy machine's pauses.
"""

from __future__ import annotations

from gymnasium.vector import VectorEnv

from vecfast.trainers.config import AUTO
from vecfast.vector import AsyncSharedMemVectorEnv

CYCLES = 100
FLOOR_SECONDS = 30.0
UNMEASURED_SECONDS = 120.0  # until the first measurement: first resets can be slow
MEASURE_AFTER_SECONDS = 5.0  # of training


class RunStepTimeout:
    """Applies ``step_timeout`` to the vecfast vector env a run owns, unless whoever built it chose one."""

    def __init__(self, env: VectorEnv | None, setting: float | str | None) -> None:
        """``env``: the run's vector env if vecfast owns it, else None (a given env keeps its own settings)."""
        inner = None if env is None else env.unwrapped
        managed = isinstance(inner, AsyncSharedMemVectorEnv) and inner.step_timeout is None and setting is not None
        self.env = inner if managed else None
        self.auto = setting == AUTO
        self.chosen: float | None = None  # what "auto" measured
        if self.env is not None:
            self.env.step_timeout = UNMEASURED_SECONDS if self.auto else float(setting)

    def observe(self, training_seconds: float, env_steps_per_second: float) -> float | None:
        """With ``"auto"``, set the timeout once training has run long enough; returns it when it was just set."""
        if self.env is None or not self.auto or self.chosen is not None:
            return None
        if training_seconds < MEASURE_AFTER_SECONDS or env_steps_per_second <= 0:
            return None
        cycle = self.env.num_envs / env_steps_per_second
        self.chosen = max(FLOOR_SECONDS, CYCLES * cycle)
        self.env.step_timeout = self.chosen
        return self.chosen
