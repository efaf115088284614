"""Videos of episodes that play anywhere: H.264 mp4s streamed to disk, and gifs.

An ``.mp4`` is H.264 in yuv420p (what browsers, GitHub and W&B play), encoded by the ffmpeg that
``imageio-ffmpeg`` bundles, frame by frame as they come: an episode of any length costs one frame of memory. A
``.gif`` goes through Pillow, which holds the frames until it writes them (it compares each with the one before).
Both come with the ``video`` extra.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from vecfast.extras import require

FORMATS = (".mp4", ".gif")


class VideoWriter:
    """Writes RGB frames (``(height, width, 3)`` uint8) to ``path`` at ``fps``; a context manager.

    Odd frame sizes are padded to even ones (H.264's yuv420p needs them).
    """

    def __init__(self, path: str | os.PathLike, fps: float) -> None:
        self.path = Path(path)
        if self.path.suffix.lower() not in FORMATS:
            raise ValueError(f"a video is .mp4 or .gif, got {self.path.name!r}")
        self.fps = float(fps)
        self.frames_written = 0
        self._gif_frames: list[np.ndarray] = []
        self._encoder: Any = None  # imageio-ffmpeg's generator, started by the first frame (it needs the size)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, frame: np.ndarray) -> None:
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if self.path.suffix.lower() == ".gif":
            self._gif_frames.append(frame)
        else:
            if self._encoder is None:
                self._encoder = self._start(frame.shape[1], frame.shape[0])
            self._encoder.send(_even(frame))
        self.frames_written += 1

    def close(self) -> None:
        if self.path.suffix.lower() == ".gif":
            if self._gif_frames:
                self.path.write_bytes(gif_bytes(self._gif_frames, self.fps))
            self._gif_frames = []
        elif self._encoder is not None:
            self._encoder.close()  # ffmpeg finishes the file
            self._encoder = None
        if self.frames_written == 0:
            raise ValueError(f"no frames to write to {self.path}")

    def _start(self, width: int, height: int) -> Any:
        imageio_ffmpeg = require("imageio_ffmpeg", "an .mp4 video")
        encoder = imageio_ffmpeg.write_frames(
            str(self.path),
            (width + width % 2, height + height % 2),
            fps=self.fps,
            codec="libx264",
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            quality=None,
            output_params=["-crf", "23", "-movflags", "+faststart"],
            macro_block_size=1,
            ffmpeg_log_level="error",
        )
        encoder.send(None)  # starts ffmpeg
        return encoder

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        elif self._encoder is not None:  # an error mid-episode: stop ffmpeg, keep the error
            self._encoder.close()


def _even(frame: np.ndarray) -> np.ndarray:
    height, width = frame.shape[:2]
    if height % 2 == 0 and width % 2 == 0:
        return frame
    return np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")


def gif_bytes(frames: list[np.ndarray], fps: float) -> bytes:
    """An animated gif of ``frames`` (looping), as TensorBoard's video summaries and ``.gif`` files hold."""
    image = require("PIL.Image", "a .gif video")
    images = [image.fromarray(frame) for frame in frames]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return buffer.getvalue()
