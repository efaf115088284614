"""Watch a trained policy: run episodes of a run directory's env, record their returns and a video."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np

import vecfast.envs  # noqa: F401  (registers vecfast's ids)
from vecfast.trainers.train import load_policy


def enjoy(
    run_dir: str | os.PathLike,
    episodes: int = 3,
    which: str = "last",
    video: str | os.PathLike | None = None,
    deterministic: bool = True,
    max_steps: int = 10_000,
    seed: int = 0,
) -> list[float]:
    """Returns of ``episodes`` episodes of the run's policy; ``video`` (.mp4 or .gif) gets their frames.

    ``which``: the run's newest checkpoint (``"last"``) or its best (``"best"``), as :func:`load_policy`.
    """
    run_dir = Path(run_dir)
    env_id = json.loads((run_dir / "config.json").read_text())["env"]
    policy = load_policy(run_dir, which)
    render = video is not None
    env = gym.make(env_id, render_mode="rgb_array") if render else gym.make(env_id)
    frames: list[np.ndarray] = []
    returns = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            start, total = True, 0.0
            for _ in range(max_steps):
                batched = {k: v[None] for k, v in obs.items()} if isinstance(obs, dict) else obs[None]
                action = policy.act(batched, deterministic=deterministic, episode_start=np.array([start]))[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                start = False
                if render:
                    frames.append(env.render())
                if terminated or truncated:
                    break
            returns.append(total)
    finally:
        env.close()
    if render:
        write_video(frames, Path(video), fps=env.metadata.get("render_fps", 30))
    return returns


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
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    finally:
        writer.release()
