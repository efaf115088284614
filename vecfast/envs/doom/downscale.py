"""The Doom screen, downscaled with area interpolation (:mod:`vecfast.envs.area_resize`) and made channels-first."""

from __future__ import annotations

import warnings

import numpy as np

from vecfast.envs.area_resize import AreaResize
from vecfast.extras import OPENCV


class Downscale:
    """``(height, width, 3)`` uint8 frames to ``(3, *resolution[::-1])`` uint8, area-interpolated."""

    def __init__(self, resolution: tuple[int, int], source: tuple[int, int]) -> None:
        self.resize = AreaResize(resolution, source)
        if not self.resize.use_opencv:
            warnings.warn(f"Doom screens are downscaled without OpenCV, about 10x slower: {OPENCV}", stacklevel=3)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.resize(frame).transpose(2, 0, 1))
