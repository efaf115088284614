"""Videos that play anywhere: H.264 (yuv420p) mp4s streamed to disk, gifs through Pillow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import decoded
from PIL import Image

from vecfast.trainers.run.video import VideoWriter


def frames_of(count: int, height: int, width: int) -> list[np.ndarray]:
    """Frames a decoder can tell apart: a bright square moving over a gradient."""
    base = np.broadcast_to(np.linspace(0, 200, width, dtype=np.uint8)[None, :, None], (height, width, 3)).copy()
    frames = []
    for i in range(count):
        frame = base.copy()
        frame[(2 * i) % (height - 8) :][:8, :8] = 255
        frames.append(frame)
    return frames


def test_an_mp4_is_h264_in_yuv420p_with_every_frame_at_its_fps(tmp_path: Path) -> None:
    frames = frames_of(50, 48, 64)
    with VideoWriter(tmp_path / "v.mp4", fps=8.75) as writer:
        for frame in frames:
            writer.write(frame)
    meta, back = decoded(tmp_path / "v.mp4")
    assert meta["codec"].startswith("h264") and meta["pix_fmt"].startswith("yuv420p")
    assert meta["fps"] == pytest.approx(8.75) and meta["size"] == (64, 48) and len(back) == 50
    errors = [np.abs(a.astype(int) - b).mean() for a, b in zip(back, frames, strict=True)]
    assert max(errors) < 4  # lossy, but each decoded frame is the frame written there


def test_odd_frame_sizes_are_padded_to_even_ones(tmp_path: Path) -> None:
    with VideoWriter(tmp_path / "odd.mp4", fps=30) as writer:
        for frame in frames_of(5, 33, 47):
            writer.write(frame)
    meta, back = decoded(tmp_path / "odd.mp4")
    assert meta["size"] == (48, 34) and len(back) == 5


def test_a_gif_holds_every_frame_at_its_duration(tmp_path: Path) -> None:
    with VideoWriter(tmp_path / "v.gif", fps=20) as writer:
        for frame in frames_of(12, 30, 40):
            writer.write(frame)
    with Image.open(tmp_path / "v.gif") as gif:
        assert gif.n_frames == 12 and gif.info["duration"] == 50 and gif.size == (40, 30)


def test_other_formats_and_empty_videos_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"a video is \.mp4 or \.gif, got 'v\.avi'"):
        VideoWriter(tmp_path / "v.avi", fps=30)
    with pytest.raises(ValueError, match="no frames to write"), VideoWriter(tmp_path / "empty.mp4", fps=30):
        pass
