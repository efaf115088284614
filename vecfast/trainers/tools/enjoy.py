"""Watch a trained policy: evaluate a run directory's policy on its env, and record a video of the episodes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import vecfast.envs  # noqa: F401  (registers vecfast's ids)
from vecfast.trainers import entry_defaults
from vecfast.trainers.run.evaluation import EvalResult, evaluate, run_env
from vecfast.trainers.run.video import VideoWriter


def enjoy(
    run_dir: str | os.PathLike,
    episodes: int = entry_defaults.ENJOY_EPISODES,
    which: str = entry_defaults.CHECKPOINT,
    video: str | os.PathLike | None = None,
    deterministic: bool = True,
    max_steps: int | None = entry_defaults.ENJOY_MAX_STEPS,
    seed: int = entry_defaults.ENJOY_SEED,
    num_envs: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> EvalResult:
    """:func:`~vecfast.trainers.run.evaluation.evaluate` the run's policy for ``episodes`` episodes; ``video``
    (an H.264 .mp4, streamed to disk, or a .gif: :class:`~vecfast.trainers.run.video.VideoWriter`) gets their
    frames, one episode after another.

    ``which``: the run's newest checkpoint (``"last"``) or its best (``"best"``), as :func:`load_policy`.
    ``max_steps``: episodes are cut (and counted) there. A video plays the episodes in one
    env; without one they run in ``num_envs`` envs (default: evaluate's). ``env_kwargs``: over the run's own.
    """
    run_dir = Path(run_dir)
    common = {"episodes": episodes, "which": which, "deterministic": deterministic, "max_steps": max_steps}
    if video is None:
        return evaluate(run_dir, num_envs=num_envs, seed=seed, env_kwargs=env_kwargs, **common)
    env = run_env(run_dir).with_kwargs(env_kwargs or {}).build(1, render_mode="rgb_array")
    try:
        with VideoWriter(video, fps=env.metadata.get("render_fps", 30)) as writer:
            return evaluate(run_dir, env, seed=seed, on_frame=writer.write, **common)
    finally:
        env.close()
