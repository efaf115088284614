"""Videos while training (``video_every_env_steps``): one episode of the current policy, every so many env steps,
on an env of its own that the run's one env rule builds with ``render_mode="rgb_array"``, in rank 0 between two
iterations. A run of matches of agents (board games, Doom duels) records one game against the random opponent, its
first match's frames.

The episode goes to ``RUN_DIR/videos/<env steps>.mp4`` (H.264, streamed), and to the run's sinks: TensorBoard gets
it as an animated gif of at most :data:`GIF_FRAMES` frames (every other frame dropped as often as needed, so an
episode of any length costs bounded memory), W&B the mp4.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.env_source import EnvSource
from vecfast.trainers.run.evaluation import RunEnv, evaluate
from vecfast.trainers.run.periodic_evaluation import EnvStepSchedule
from vecfast.trainers.run.run_dir import RunDir
from vecfast.trainers.run.video import VideoWriter, gif_bytes

GIF_FRAMES = 200


class Thinned:
    """At most ``limit`` frames of a stream, evenly spaced: when full, every other one is dropped and the stride
    doubles."""

    def __init__(self, limit: int) -> None:
        self.limit, self.stride, self.seen = limit, 1, 0
        self.frames: list[np.ndarray] = []

    def add(self, frame: np.ndarray) -> None:
        if self.seen % self.stride == 0:
            self.frames.append(frame.copy())
            if len(self.frames) > self.limit:
                self.frames = self.frames[::2]
                self.stride *= 2
        self.seen += 1


class PeriodicVideo:
    """Records an episode of ``model`` (a copy of its weights, so the learner's model is untouched) every
    ``cfg.video_every_env_steps`` env steps into ``run_dir``."""

    def __init__(
        self, model: ActorCritic, source: EnvSource, vectorization: str, cfg: TrainConfig, steps: int, run_dir: RunDir
    ) -> None:
        assert cfg.video_every_env_steps is not None
        self.cfg, self.run_dir = cfg, run_dir
        self.schedule = EnvStepSchedule(cfg.video_every_env_steps, steps)
        self.model = copy.deepcopy(model).eval()
        self.run_env = RunEnv(source, vectorization)

    def due(self, env_steps: int) -> bool:
        return self.schedule.due(env_steps)

    def on_iteration(self, model: ActorCritic, metrics: dict[str, Any]) -> None:
        """The training loop's hook (bound to the learner's model): when due, adds the results to ``metrics``."""
        if self.due(metrics["env_steps"]):
            metrics.update(self.record(model, metrics["env_steps"]))

    def record(self, model: ActorCritic, env_steps: int) -> dict[str, Any]:
        """Record an episode of ``model``'s current weights now; the ``video/`` records."""
        self.schedule.done(env_steps)
        start = time.perf_counter()
        self.model.load_state_dict(model.state_dict())
        path = self.run_dir.path / "videos" / f"{env_steps:012d}.mp4"
        thinned = Thinned(GIF_FRAMES)
        env = self.run_env.build(1, render_mode="rgb_array", heal=self.cfg.restart_failed_workers)
        try:
            fps = env.metadata.get("render_fps") or 30
            with VideoWriter(path, fps) as writer:

                def on_frame(frame: np.ndarray) -> None:
                    writer.write(frame)
                    thinned.add(frame)

                result = evaluate(self.model, env, 1, self.cfg.eval_deterministic, on_frame=on_frame)
        finally:
            env.close()
        height, width = thinned.frames[0].shape[:2]
        self.run_dir.add_video(path, gif_bytes(thinned.frames, fps / thinned.stride), (width, height), env_steps)
        return {"video/return": result.mean_return, "video/seconds": time.perf_counter() - start}
