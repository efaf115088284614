"""How far a run is through its bounds: the progress the learning rate's and the entropy bonus's schedules follow.

A run bounded by ``total_env_steps`` is that far along by its env steps. A run bounded by ``train_for_seconds`` (as
Atari runs of an hour are, with ``total_env_steps`` left at its huge default) would never reach the end of a
schedule by steps, so there its training time counts too, whichever bound is nearer. A resumed run continues from
the progress its checkpoint reached: this sitting's time bound takes it from there to the end, without a jump.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from vecfast.trainers.base import collective


class RunProgress:
    """The run's progress in [0, 1] (see the module docstring); :meth:`start` starts its clock with training."""

    def __init__(
        self,
        total_env_steps: int,
        train_for_seconds: float | None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.total_env_steps, self.train_for_seconds, self.clock = total_env_steps, train_for_seconds, clock
        self.resumed_at = 0.0  # the checkpoint's progress
        self.reached = 0.0  # the latest fraction
        self.started: float | None = None

    def start(self) -> None:
        self.started = self.clock()

    def fraction(self, env_steps: int) -> float:
        """The progress at ``env_steps``, now. In a distributed run, a collective (the ranks' furthest clock), so
        that every rank's schedule, and so its model, agrees."""
        progress = env_steps / self.total_env_steps
        if self.train_for_seconds is not None:
            elapsed = 0.0 if self.started is None else self.clock() - self.started
            by_time = self.resumed_at + (1.0 - self.resumed_at) * elapsed / self.train_for_seconds
            if collective.is_distributed():
                by_time = float(collective.all_max(torch.tensor([by_time], dtype=torch.float64)).item())
            progress = max(progress, by_time)
        self.reached = min(progress, 1.0)
        return self.reached

    def state_dict(self) -> dict[str, float]:
        return {"progress": self.reached}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Continue from a checkpoint's progress (0 for checkpoints from before progress was kept)."""
        self.reached = self.resumed_at = float(state.get("progress", 0.0))
