"""Watch a trained policy: evaluate a run directory's policy on its env, and record a video of the episodes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np

import vecfast.envs  # noqa: F401  (registers vecfast's ids)
from vecfast.trainers.tools.evaluation import EvalResult, evaluate, run_env


def enjoy(
    run_dir: str | os.PathLike,
    episodes: int = 3,
    which: str = "last",
    video: str | os.PathLike | None = None,
    deterministic: bool = True,
    max_steps: int | None = 10_000,
    seed: int = 0,
    num_envs: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> EvalResult:
    """:func:`~vecfast.trainers.tools.evaluation.evaluate` the run's policy for ``episodes`` episodes; ``video``
    (.mp4 or .gif) gets their frames, one episode after another.

    ``which``: the run's newest checkpoint (``"last"``) or its best (``"best"``), as :func:`load_policy`.
    ``max_steps``: episodes are cut (and counted) there. A video plays the episodes in one
    env; without one they run in ``num_envs`` envs (default: evaluate's). ``env_kwargs``: over the run's own.
    """
    run_dir = Path(run_dir)
    common = {"episodes": episodes, "which": which, "deterministic": deterministic, "max_steps": max_steps}
    if video is None:
        return evaluate(run_dir, num_envs=num_envs, seed=seed, env_kwargs=env_kwargs, **common)
    frames: list[np.ndarray] = []
    env = run_env(run_dir).with_kwargs(env_kwargs or {}).build(1, render_mode="rgb_array")
    try:
        result = evaluate(run_dir, env, seed=seed, on_frame=frames.append, **common)
        fps = env.metadata.get("render_fps", 30)
    finally:
        env.close()
    write_video(frames, Path(video), fps=fps)
    return result


def write_video(frames: list[np.ndarray], path: Path, fps: float) -> None:
    """RGB frames to an mp4 (OpenCV) or a gif (Pillow)."""
    if not frames:
        raise ValueError("no frames to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        return
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write {path}")
    try:
        for frame in frames:
            # RGB -> BGR by numpy: cv2.cvtColor would start OpenCV's thread pool in this process, and
            # vector env workers forked after that hang in cv2.setNumThreads (vecfast/vector/worker.py)
            writer.write(np.ascontiguousarray(frame[..., ::-1]))
    finally:
        writer.release()
