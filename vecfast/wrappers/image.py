"""Image preprocessing (resize, grayscale, channel order) in either placement.

Each transform comes twice: a vector wrapper that processes the whole batch in the
owner process (``ResizeObservation``, ...), and a single-env wrapper for the env
factory, so that each worker transforms its own envs' frames before they reach shared
memory (``SingleResizeObservation``, ...; e.g. ``make_vec(id, 8,
wrappers=[partial(SingleResizeObservation, shape=(84, 84), key="screen")])``). Both run
the same batched kernel, so they give bit-identical observations.

Resize and grayscale belong in the workers: there they run in parallel with other
envs' steps and shared memory carries small frames, while in the owner they run
serially as the workers wait. Env steps/s from ``python benchmarks/wrapper_placement.py
--repeats 5 --steps 1000`` (VizdoomBasic-v1, Dict observation with a 240x320x3 screen,
AsyncSharedMemVectorEnv with 8 envs on 2 workers, 2-core machine, median of 5 runs;
no preprocessing: 4144 steps/s; runs vary by about 10%)::

    preprocessing                in workers   in owner
    resize to 84x84                    2590       1357
    grayscale, resize to 84x84         3070       1829
    HWC -> CHW (no resize)             3739       3512

With ``--frame-skip 4`` (no preprocessing: 2894), resize to 84x84: 2166 vs 1167; with
``--shape 120 160`` (an exact 2x area downscale, 14x cheaper; no preprocessing: 3522):
3773 vs 2965, no slower than no preprocessing (the owner then copies smaller frames).
Channel order costs about the same in either place. Grayscale before resize pays off:
the resize then has one channel instead of three.

The kernels loop over the batch with OpenCV into one output array allocated per call
(returned observations are never overwritten later). Alternatives measured with
``--kernels`` on 8 frames of 240x320x3: one cv2 call on the batch stacked along the
channel axis is slower (1026 vs 158 us to 120x160) or refused (INTER_AREA to 84x84
takes at most 4 channels); numpy's transpose copy is 5-40x slower than cv2.split/merge;
gymnasium's grayscale takes 13.4 ms where cv2.cvtColor takes 0.17 ms.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import DependencyNotInstalled
from gymnasium.vector import VectorEnv

from vecfast.extras import OPENCV
from vecfast.wrappers.base import BatchObservationWrapper, SingleObservationWrapper

try:
    import cv2
except ImportError:  # the wrappers that need it say so when built, as gymnasium's own image wrappers do
    cv2 = None

__all__ = [
    "ChannelOrderObservation",
    "GrayscaleObservation",
    "ResizeObservation",
    "SingleChannelOrderObservation",
    "SingleGrayscaleObservation",
    "SingleResizeObservation",
]

Layout = Literal["HWC", "CHW"]

_CV2_MAX_CHANNELS = 512  # OpenCV's CV_CN_MAX
INTER_AREA = 3  # cv2.INTER_AREA, the default interpolation (a constant: OpenCV is imported only where present)
# dtypes that cv2.split/merge handle; others take numpy's (slower) transpose.
_CV2_DTYPES = frozenset(map(np.dtype, (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64)))
# gymnasium's GrayscaleObservation weights (BT.709 luma); a table per channel gives the
# same float64 products as its np.multiply, summed in the same order.
_BT709_TABLES = np.array([0.2125, 0.7154, 0.0721])[:, None] * np.arange(256.0)


def require_opencv(what: str) -> None:
    """Raise gymnasium's ``DependencyNotInstalled`` (as its image wrappers do) where ``cv2`` is missing."""
    if cv2 is None:
        raise DependencyNotInstalled(f"{what} needs OpenCV: {OPENCV}")


def image_layout(shape: tuple[int, ...], layout: Layout | None) -> str:
    """``"HW"``, ``"HWC"`` or ``"CHW"``; a 3-D shape without ``layout`` is judged by which end has 1, 3 or 4."""
    if len(shape) == 2:
        return "HW"
    if len(shape) != 3:
        raise ValueError(f"expected an image of shape (H, W), (H, W, C) or (C, H, W), got {shape}")
    if layout is None:
        last, first = shape[-1] in (1, 3, 4), shape[0] in (1, 3, 4)
        if last == first:
            raise ValueError(f"cannot tell whether shape {shape} is HWC or CHW: pass layout='HWC' or 'CHW'")
        return "HWC" if last else "CHW"
    if layout not in ("HWC", "CHW"):
        raise ValueError(f"layout must be 'HWC' or 'CHW', got {layout!r}")
    return layout


class _Resize:
    """Resize a batch of images with ``cv2.resize``."""

    def __init__(self, space: spaces.Box, shape: tuple[int, int], interpolation: int, layout: Layout | None) -> None:
        if len(shape) != 2 or not all(isinstance(s, (int, np.integer)) and s > 0 for s in shape):
            raise ValueError(f"shape must be (height, width) with positive integers, got {shape!r}")
        require_opencv("ResizeObservation")
        self.layout = image_layout(space.shape, layout)
        self.interpolation = interpolation
        height, width = int(shape[0]), int(shape[1])
        self.cv2_size = (width, height)
        self.plane_shape = (space.shape[-2], space.shape[-1]) if self.layout == "CHW" else space.shape[:2]
        out_shape = (space.shape[0], height, width) if self.layout == "CHW" else (height, width, *space.shape[2:])
        # Interpolated pixels stay within the input's overall range (uint8 saturates).
        self.space = spaces.Box(space.low.min(), space.high.max(), out_shape, space.dtype)
        # An interleaved HWC image goes to cv2 whole; anything else plane by plane, which
        # gives the same pixels as resizing the HWC transpose.
        self.per_plane = self.layout != "HWC" or space.shape[2] == 1
        try:  # fail now, not at the first step, on what cv2 refuses
            self(np.zeros((1, *space.shape), space.dtype))
        except cv2.error as exc:
            raise ValueError(
                f"OpenCV cannot resize {space.dtype} images of shape {space.shape} ({self.layout}) to {shape} "
                f"with interpolation {interpolation} (INTER_AREA takes at most 4 interleaved channels "
                f"unless the factor is an integer: make the image CHW first): {exc}"
            ) from None

    def __call__(self, images: np.ndarray) -> np.ndarray:
        images = np.ascontiguousarray(images)
        out = np.empty((len(images), *self.space.shape), images.dtype)
        src, dst = images, out
        if self.per_plane:
            src = images.reshape(-1, *self.plane_shape)
            dst = out.reshape(-1, self.cv2_size[1], self.cv2_size[0])
        for image, target in zip(src, dst, strict=True):
            cv2.resize(image, self.cv2_size, dst=target, interpolation=self.interpolation)
        return out


class _Grayscale:
    """RGB to gray for a batch of uint8 images."""

    def __init__(
        self, space: spaces.Box, keep_dim: bool, formula: Literal["opencv", "gymnasium"], layout: Layout | None
    ) -> None:
        self.layout = image_layout(space.shape, layout)
        channels = space.shape[2] if self.layout == "HWC" else space.shape[0]
        if self.layout == "HW" or channels != 3:
            raise ValueError(f"grayscale needs an RGB image with 3 channels, got shape {space.shape}")
        if space.dtype != np.uint8:
            raise ValueError(f"grayscale needs a uint8 image, got dtype {space.dtype}")
        if formula not in ("opencv", "gymnasium"):
            raise ValueError(f"formula must be 'opencv' or 'gymnasium', got {formula!r}")
        if formula == "opencv":
            require_opencv("GrayscaleObservation with formula='opencv' (formula='gymnasium' needs no OpenCV)")
        self.formula = formula
        self.plane_shape = space.shape[:2] if self.layout == "HWC" else space.shape[1:]
        shape = self.plane_shape
        if keep_dim:
            shape = (*shape, 1) if self.layout == "HWC" else (1, *shape)
        self.space = spaces.Box(0, 255, shape, np.uint8)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        images = np.ascontiguousarray(images)
        out = np.empty((len(images), *self.plane_shape), np.uint8)
        if self.formula == "gymnasium":
            planes = [images[..., c] if self.layout == "HWC" else images[:, c] for c in range(3)]
            total = _BT709_TABLES[0][planes[0]]
            total += _BT709_TABLES[1][planes[1]]
            total += _BT709_TABLES[2][planes[2]]
            np.copyto(out, total, casting="unsafe")  # truncates, as gymnasium's astype(np.uint8)
        elif self.layout == "HWC":
            for image, target in zip(images, out, strict=True):
                cv2.cvtColor(image, cv2.COLOR_RGB2GRAY, dst=target)
        else:
            for image, target in zip(images, out, strict=True):
                cv2.cvtColor(cv2.merge(list(image)), cv2.COLOR_RGB2GRAY, dst=target)
        return out.reshape(len(images), *self.space.shape)


class _ChannelOrder:
    """HWC to CHW or back for a batch of images, into a contiguous array."""

    def __init__(self, space: spaces.Box, order: Layout) -> None:
        if order not in ("HWC", "CHW"):
            raise ValueError(f"order must be 'HWC' or 'CHW', got {order!r}")
        if len(space.shape) != 3:
            raise ValueError(f"channel order needs a 3-D image, got shape {space.shape}")
        self.to_chw = order == "CHW"
        self.axes = (2, 0, 1) if self.to_chw else (1, 2, 0)
        self.space = spaces.Box(space.low.transpose(self.axes), space.high.transpose(self.axes), dtype=space.dtype)
        channels = space.shape[2] if self.to_chw else space.shape[0]
        # cv2.split/merge are 5-40x faster than numpy's strided copy for multi-channel images.
        self.use_cv2 = cv2 is not None and space.dtype in _CV2_DTYPES and 1 < channels <= _CV2_MAX_CHANNELS

    def __call__(self, images: np.ndarray) -> np.ndarray:
        images = np.ascontiguousarray(images)
        out = np.empty((len(images), *self.space.shape), images.dtype)
        if not self.use_cv2:
            np.copyto(out, images.transpose(0, *(a + 1 for a in self.axes)))
        elif self.to_chw:
            for image, target in zip(images, out, strict=True):
                cv2.split(image, list(target))
        else:
            for image, target in zip(images, out, strict=True):
                cv2.merge(list(image), target)
        return out


class _ImageOpMixin:
    """Builds the image op on the wrapped entry's space; the transform is that op."""

    entry_space: spaces.Box

    def _use_op(self, op_type: type, **op_args: Any) -> None:
        self.op = op_type(self.entry_space, **op_args)
        self.set_entry_space(self.op.space)  # type: ignore[attr-defined]

    def transform(self, batch: np.ndarray) -> np.ndarray:
        return self.op(batch)


class _BatchImageWrapper(_ImageOpMixin, BatchObservationWrapper):
    def __init__(self, env: VectorEnv, key: str | None, op_type: type, **op_args: Any) -> None:
        super().__init__(env, key)
        self._use_op(op_type, **op_args)


class _SingleImageWrapper(_ImageOpMixin, SingleObservationWrapper):
    def __init__(self, env: gym.Env, key: str | None, op_type: type, **op_args: Any) -> None:
        super().__init__(env, key)
        self._use_op(op_type, **op_args)


class ResizeObservation(_BatchImageWrapper):
    """Resize image observations (HW, HWC or CHW) of the whole batch with OpenCV.

    Unlike ``gymnasium.wrappers.vector.ResizeObservation`` it takes a Dict ``key``, CHW
    images, any interpolation and SAME_STEP autoreset, and it writes straight into the
    batch instead of resizing into per-env arrays that are then concatenated and
    deep-copied. With the default INTER_AREA, HWC frames come out bit-identical to
    gymnasium's. Resizing in the workers (:class:`SingleResizeObservation`) is faster:
    2590 vs 1357 env steps/s on VizDoom at 84x84 (``python
    benchmarks/wrapper_placement.py``; details in the module docstring).

    Args:
        env: the vector env.
        shape: ``(height, width)`` of the output.
        key: the Dict entry holding the image (``None``: the observation is the image).
        interpolation: an OpenCV ``INTER_*`` flag; INTER_AREA suits downscaling.
        layout: ``"HWC"`` or ``"CHW"``; inferred from the shape when ``None``.
    """

    def __init__(
        self,
        env: VectorEnv,
        shape: tuple[int, int],
        *,
        key: str | None = None,
        interpolation: int = INTER_AREA,
        layout: Layout | None = None,
    ) -> None:
        super().__init__(env, key, _Resize, shape=shape, interpolation=interpolation, layout=layout)


class SingleResizeObservation(_SingleImageWrapper):
    """Per-env :class:`ResizeObservation` (same arguments), to resize inside the workers.

    The faster placement: 2590 vs 1357 env steps/s resizing VizDoom's 240x320 screen to
    84x84 in the owner (``python benchmarks/wrapper_placement.py``, module docstring).
    """

    def __init__(
        self,
        env: gym.Env,
        shape: tuple[int, int],
        *,
        key: str | None = None,
        interpolation: int = INTER_AREA,
        layout: Layout | None = None,
    ) -> None:
        super().__init__(env, key, _Resize, shape=shape, interpolation=interpolation, layout=layout)


class GrayscaleObservation(_BatchImageWrapper):
    """Convert RGB uint8 image observations (HWC or CHW) of the whole batch to gray.

    ``formula="opencv"`` (default) is ``cv2.cvtColor(RGB2GRAY)`` (BT.601 weights,
    rounded), as SB3's WarpFrame and Sample Factory compute it: about 22 us per
    240x320 frame. ``formula="gymnasium"`` is bit-identical to gymnasium's
    GrayscaleObservation (BT.709 weights, truncated) and 2x faster than it, but still
    30x slower than OpenCV. Adds a Dict ``key``, CHW images and SAME_STEP support.
    Converting in the workers (:class:`SingleGrayscaleObservation`) is faster: gray
    then resize to 84x84 ran at 3070 vs 1829 env steps/s on VizDoom (``python
    benchmarks/wrapper_placement.py``; details in the module docstring).

    Args:
        env: the vector env.
        keep_dim: keep a channel axis of size 1 (``(H, W, 1)`` or ``(1, H, W)``), else ``(H, W)``.
        key: the Dict entry holding the image.
        formula: ``"opencv"`` or ``"gymnasium"`` (see above).
        layout: ``"HWC"`` or ``"CHW"``; inferred from the shape when ``None``.
    """

    def __init__(
        self,
        env: VectorEnv,
        keep_dim: bool = False,
        *,
        key: str | None = None,
        formula: Literal["opencv", "gymnasium"] = "opencv",
        layout: Layout | None = None,
    ) -> None:
        super().__init__(env, key, _Grayscale, keep_dim=keep_dim, formula=formula, layout=layout)


class SingleGrayscaleObservation(_SingleImageWrapper):
    """Per-env :class:`GrayscaleObservation` (same arguments), to convert inside the workers.

    The faster placement: with a resize to 84x84 after it, 3070 vs 1829 env steps/s in
    the owner on VizDoom (``python benchmarks/wrapper_placement.py``, module docstring).
    """

    def __init__(
        self,
        env: gym.Env,
        keep_dim: bool = False,
        *,
        key: str | None = None,
        formula: Literal["opencv", "gymnasium"] = "opencv",
        layout: Layout | None = None,
    ) -> None:
        super().__init__(env, key, _Grayscale, keep_dim=keep_dim, formula=formula, layout=layout)


class ChannelOrderObservation(_BatchImageWrapper):
    """Transpose image observations of the whole batch to ``order`` (from the other layout).

    PyTorch convolutions want CHW; simulators and OpenCV produce HWC. gymnasium has no
    such wrapper (ReshapeObservation cannot transpose). The output is contiguous, made
    with cv2.split/merge where the dtype allows (5-40x faster than numpy's transpose copy).
    Both placements cost about the same: 3512 env steps/s here vs 3739 with
    :class:`SingleChannelOrderObservation` on VizDoom's full 240x320 screen, within the
    runs' spread (``python benchmarks/wrapper_placement.py``, module docstring).

    Args:
        env: the vector env.
        order: ``"CHW"`` (input is HWC) or ``"HWC"`` (input is CHW).
        key: the Dict entry holding the image.
    """

    def __init__(self, env: VectorEnv, order: Layout = "CHW", *, key: str | None = None) -> None:
        super().__init__(env, key, _ChannelOrder, order=order)


class SingleChannelOrderObservation(_SingleImageWrapper):
    """Per-env :class:`ChannelOrderObservation` (same arguments), to transpose inside the workers.

    About as fast as the batched wrapper (3739 vs 3512 env steps/s on VizDoom, within
    the runs' spread; ``python benchmarks/wrapper_placement.py``); handy when the env
    factory builds the whole preprocessing chain.
    """

    def __init__(self, env: gym.Env, order: Layout = "CHW", *, key: str | None = None) -> None:
        super().__init__(env, key, _ChannelOrder, order=order)
