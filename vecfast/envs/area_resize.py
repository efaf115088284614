"""Image downscaling by area interpolation (OpenCV's ``INTER_AREA``), with or without OpenCV.

OpenCV when ``cv2`` is importable (from ``opencv-python`` or ``opencv-python-headless``: no extra forces either,
as both write ``cv2/`` and clash). Without it, the same area weights as two float32 matrix products, rounded as
OpenCV sums and rounds: the same pixels when downscaling (tests compare them), about 10x slower.
"""

from __future__ import annotations

import numpy as np

try:
    import cv2
except ImportError:
    cv2 = None


def area_weights(size_in: int, size_out: int) -> np.ndarray:
    """``(size_out, size_in)``: each output pixel's share of each input pixel it overlaps (rows sum to 1)."""
    scale = size_in / size_out
    weights = np.zeros((size_out, size_in), np.float64)
    for out in range(size_out):
        lo, hi = out * scale, (out + 1) * scale
        for pixel in range(int(np.floor(lo)), min(size_in, int(np.ceil(hi)))):
            weights[out, pixel] = (min(hi, pixel + 1) - max(lo, pixel)) / scale
    return weights.astype(np.float32)


class AreaResize:
    """uint8 ``(height, width)`` or ``(height, width, channels)`` frames of ``source`` size (width, height) to
    ``size`` (width, height: OpenCV's order), area-interpolated; the channels stay last."""

    def __init__(self, size: tuple[int, int], source: tuple[int, int]) -> None:
        self.size = size
        self.use_opencv = cv2 is not None
        if not self.use_opencv:
            (width_in, height_in), (width, height) = source, size
            self.rows = area_weights(height_in, height)
            self.columns_t = np.ascontiguousarray(area_weights(width_in, width).T)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        if self.use_opencv:
            return cv2.resize(frame, self.size, interpolation=cv2.INTER_AREA)
        # each row's columns first, then the rows, as OpenCV sums them (the other order rounds a few pixels apart)
        channels_last = np.moveaxis(frame.astype(np.float32), 1, -1)  # (height_in, *channels, width_in)
        columns = np.moveaxis(channels_last @ self.columns_t, -1, 0)  # (width, height_in, *channels)
        rows = np.tensordot(self.rows, columns, axes=([1], [1]))  # (height, width, *channels)
        return np.rint(rows).astype(np.uint8)
