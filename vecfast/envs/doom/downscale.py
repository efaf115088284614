"""The Doom screen, downscaled with area interpolation and made channels-first.

OpenCV's ``INTER_AREA`` when ``cv2`` is importable (from ``opencv-python`` or ``opencv-python-headless``:
the ``doom`` extra forces neither, as both write ``cv2/`` and clash). Without it, the same area weights as two
float32 matrix products, rounded as OpenCV rounds: the same pixels (tests compare them), about 10x slower.
"""

from __future__ import annotations

import warnings

import numpy as np

from vecfast.extras import OPENCV

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


class Downscale:
    """``(height, width, 3)`` uint8 frames to ``(3, *resolution[::-1])`` uint8, area-interpolated."""

    def __init__(self, resolution: tuple[int, int], source: tuple[int, int]) -> None:
        self.resolution = resolution  # (width, height), OpenCV's order
        self.use_opencv = cv2 is not None
        if not self.use_opencv:
            warnings.warn(f"Doom screens are downscaled without OpenCV, about 10x slower: {OPENCV}", stacklevel=3)
            (width_in, height_in), (width, height) = source, resolution
            self.rows = area_weights(height_in, height)
            self.columns_t = np.ascontiguousarray(area_weights(width_in, width).T)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        if self.use_opencv:
            small = cv2.resize(frame, self.resolution, interpolation=cv2.INTER_AREA)
            return np.ascontiguousarray(small.transpose(2, 0, 1))
        height_in, width_in, channels = frame.shape
        rows = (self.rows @ frame.reshape(height_in, -1).astype(np.float32)).reshape(-1, width_in, channels)
        return np.rint(rows.transpose(2, 0, 1) @ self.columns_t).astype(np.uint8)
