"""Image wrappers: the batched ones equal per-env wrappers (gymnasium's where they exist), in either placement."""

from __future__ import annotations

import functools

import cv2
import gymnasium as gym
import numpy as np
import pytest
from envs_for_tests import env_fns
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from helpers import assert_boundaries_seen, run_lockstep
from wrapper_lockstep import BACKENDS, MODES, NUM_ENVS, NUM_WORKERS, make_vector, wrapped_fns

from vecfast.wrappers import (
    ChannelOrderObservation,
    GrayscaleObservation,
    ResizeObservation,
    SingleChannelOrderObservation,
    SingleGrayscaleObservation,
    SingleResizeObservation,
)
from vecfast.wrappers.image import _ChannelOrder, _Grayscale, _Resize

STEPS = 60


@pytest.mark.parametrize("mode", MODES[:2], ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(12, 16), (7, 9)], ids=["2x", "non-integer"])
def test_resize_matches_gymnasium(make_sync, make_async, backend, mode, shape):
    fns = env_fns(NUM_ENVS, "image_hwc")
    expected = make_sync(
        wrapped_fns(fns, functools.partial(gym.wrappers.ResizeObservation, shape=shape)), autoreset_mode=mode
    )
    actual = ResizeObservation(make_vector(backend, fns, mode, make_sync, make_async), shape)

    assert actual.single_observation_space == expected.single_observation_space
    assert actual.observation_space == expected.observation_space
    seen = run_lockstep(expected, actual, STEPS, seed=5, mode=mode)
    assert_boundaries_seen(seen, mode)


@pytest.mark.parametrize("keep_dim", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_grayscale_gymnasium_formula_matches_gymnasium(make_sync, make_async, backend, keep_dim):
    fns = env_fns(NUM_ENVS, "image_hwc")
    gray = functools.partial(gym.wrappers.GrayscaleObservation, keep_dim=keep_dim)
    expected = make_sync(wrapped_fns(fns, gray))
    vec = make_vector(backend, fns, AutoresetMode.NEXT_STEP, make_sync, make_async)
    actual = GrayscaleObservation(vec, keep_dim, formula="gymnasium")

    assert actual.single_observation_space == expected.single_observation_space
    run_lockstep(expected, actual, STEPS, seed=2, mode=AutoresetMode.NEXT_STEP)


def _pipeline(resize, gray, order, layout: str) -> list:
    """Resize, gray (kept as a channel) and transpose the screen, with wrappers of one placement."""
    to = "HWC" if layout == "CHW" else "CHW"
    return [
        functools.partial(resize, shape=(10, 13), key="screen"),
        functools.partial(gray, keep_dim=True, key="screen"),
        functools.partial(order, order=to, key="screen"),
    ]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["dict_image_hwc", "dict_image_chw"])
def test_owner_placement_equals_worker_placement(make_sync, make_async, kind, backend, mode):
    """Batched wrappers on a Dict screen equal the single-env ones applied to each env, final observations included."""
    layout = "HWC" if kind == "dict_image_hwc" else "CHW"
    fns = env_fns(NUM_ENVS, kind)
    single = _pipeline(SingleResizeObservation, SingleGrayscaleObservation, SingleChannelOrderObservation, layout)
    expected = make_sync(wrapped_fns(fns, *single), autoreset_mode=mode)
    actual = make_vector(backend, fns, mode, make_sync, make_async)
    for wrapper in _pipeline(ResizeObservation, GrayscaleObservation, ChannelOrderObservation, layout):
        actual = wrapper(actual)

    screen = actual.single_observation_space["screen"]
    assert screen == spaces.Box(0, 255, (10, 13, 1) if layout == "CHW" else (1, 10, 13), np.uint8)
    assert actual.single_observation_space == expected.single_observation_space
    assert actual.observation_space == expected.observation_space
    assert actual.single_observation_space["measurements"] == actual.unwrapped.single_observation_space["measurements"]
    seen = run_lockstep(expected, actual, STEPS, seed=9, mode=mode)
    assert_boundaries_seen(seen, mode)


def test_worker_placement_on_vecfast(make_async, make_sync):
    """The single-env wrappers inside AsyncSharedMemVectorEnv's workers give the batched wrapper's observations."""
    fns = env_fns(NUM_ENVS, "dict_image_chw")
    in_worker = make_async(wrapped_fns(fns, functools.partial(SingleResizeObservation, shape=(6, 8), key="screen")))
    in_owner = ResizeObservation(make_sync(fns), (6, 8), key="screen")
    assert in_worker.single_observation_space == in_owner.single_observation_space
    run_lockstep(in_owner, in_worker, 30, seed=1, mode=AutoresetMode.NEXT_STEP)


# ---------------------------------------------------------------------------- kernels


def _images(shape: tuple[int, ...], n: int = 3, dtype=np.uint8) -> np.ndarray:
    rng = np.random.default_rng(0)
    if np.dtype(dtype).kind == "f":
        return rng.random((n, *shape)).astype(dtype)
    return rng.integers(0, 256, (n, *shape)).astype(dtype)


@pytest.mark.parametrize("interpolation", [cv2.INTER_AREA, cv2.INTER_LINEAR, cv2.INTER_NEAREST])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_layouts_agree_with_cv2(interpolation, dtype):
    hwc = _images((24, 32, 3), dtype=dtype)
    expected = np.stack([cv2.resize(img, (13, 10), interpolation=interpolation) for img in hwc])
    low, high = (0, 255) if dtype == np.uint8 else (0.0, 1.0)
    for layout, images, back in [("HWC", hwc, (0, 1, 2, 3)), ("CHW", hwc.transpose(0, 3, 1, 2), (0, 2, 3, 1))]:
        op = _Resize(spaces.Box(low, high, images.shape[1:], dtype), (10, 13), interpolation, None)
        out = op(images)
        assert op.layout == layout and out.dtype == dtype and out.flags.c_contiguous
        assert np.array_equal(out.transpose(back), expected), layout
        assert all(img in op.space for img in out)
    planes = np.ascontiguousarray(hwc[..., 0])
    expected = np.stack([cv2.resize(plane, (13, 10), interpolation=interpolation) for plane in planes])
    for shape, out_shape in [((24, 32), (10, 13)), ((24, 32, 1), (10, 13, 1)), ((1, 24, 32), (1, 10, 13))]:
        op = _Resize(spaces.Box(low, high, shape, dtype), (10, 13), interpolation, None)
        out = op(planes.reshape(-1, *shape))
        assert op.space.shape == out_shape and out.shape == (3, *out_shape)
        assert np.array_equal(out.reshape(3, 10, 13), expected), shape


def test_grayscale_kernels():
    hwc = _images((24, 32, 3))
    chw = np.ascontiguousarray(hwc.transpose(0, 3, 1, 2))
    opencv = np.stack([cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) for img in hwc])
    gymnasium = np.sum(np.multiply(hwc, np.array([0.2125, 0.7154, 0.0721])), axis=-1).astype(np.uint8)
    for formula, expected in [("opencv", opencv), ("gymnasium", gymnasium)]:
        for images, keep_dim, shape in [
            (hwc, False, (24, 32)),
            (hwc, True, (24, 32, 1)),
            (chw, False, (24, 32)),
            (chw, True, (1, 24, 32)),
        ]:
            op = _Grayscale(spaces.Box(0, 255, images.shape[1:], np.uint8), keep_dim, formula, None)
            out = op(images)
            assert op.space.shape == shape and out.shape == (3, *shape)
            assert np.array_equal(out.reshape(3, 24, 32), expected), (formula, images.shape, keep_dim)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.int64])  # int64: numpy's path, not cv2's
@pytest.mark.parametrize("channels", [1, 3, 5])
def test_channel_order_round_trip(dtype, channels):
    hwc = _images((6, 7, channels), dtype=dtype)
    high = np.arange(6 * 7 * channels).reshape(6, 7, channels) % 200 + 55  # per-pixel bounds must be transposed too
    space = spaces.Box(np.zeros((6, 7, channels), dtype), high.astype(dtype), dtype=dtype)
    to_chw = _ChannelOrder(space, "CHW")
    chw = to_chw(hwc)
    assert chw.flags.c_contiguous and chw.dtype == dtype
    assert np.array_equal(chw, hwc.transpose(0, 3, 1, 2))
    assert np.array_equal(to_chw.space.high, space.high.transpose(2, 0, 1))
    back = _ChannelOrder(to_chw.space, "HWC")
    assert np.array_equal(back(chw), hwc)
    assert back.space == space


def test_spaces_and_argument_errors(make_sync):
    vec = make_sync(env_fns(2, "dict_image_chw"))
    with pytest.raises(TypeError, match="key="):
        ResizeObservation(vec, (4, 4))
    with pytest.raises(KeyError, match="nope"):
        ResizeObservation(vec, (4, 4), key="nope")
    with pytest.raises(TypeError, match="Box"):
        ResizeObservation(make_sync(env_fns(2, "discrete")), (4, 4))
    with pytest.raises(ValueError, match="shape"):
        ResizeObservation(vec, (4, 0), key="screen")
    with pytest.raises(ValueError, match="image of shape"):
        GrayscaleObservation(vec, key="measurements")
    with pytest.raises(ValueError, match="3 channels"):
        _Grayscale(spaces.Box(0, 255, (1, 5, 6), np.uint8), False, "opencv", None)
    with pytest.raises(ValueError, match="uint8"):
        _Grayscale(spaces.Box(0, 1, (5, 6, 3), np.float32), False, "opencv", None)
    with pytest.raises(ValueError, match="formula"):
        GrayscaleObservation(vec, key="screen", formula="bt601")
    with pytest.raises(ValueError, match="HWC or CHW"):
        _Resize(spaces.Box(0, 255, (3, 5, 3), np.uint8), (2, 2), cv2.INTER_AREA, None)
    assert _Resize(spaces.Box(0, 255, (3, 5, 3), np.uint8), (2, 2), cv2.INTER_AREA, "CHW").space.shape == (3, 2, 2)
    with pytest.raises(ValueError, match="make the image CHW"):
        _Resize(spaces.Box(0, 255, (24, 32, 6), np.uint8), (10, 13), cv2.INTER_AREA, "HWC")
    assert _Resize(spaces.Box(0, 255, (6, 24, 32), np.uint8), (10, 13), cv2.INTER_AREA, "CHW").per_plane
    bounded = _Resize(spaces.Box(-1.0, np.linspace(1, 2, 12, dtype=np.float32).reshape(3, 4)), (2, 2), 0, None)
    assert bounded.space == spaces.Box(-1.0, 2.0, (2, 2), np.float32)


def test_returned_observations_are_never_overwritten(make_async):
    vec = ResizeObservation(make_async(env_fns(4, "dict_image_hwc"), num_workers=NUM_WORKERS), (5, 6), key="screen")
    first, _ = vec.reset(seed=0)
    kept = first["screen"].copy()
    for _ in range(3):
        vec.step(vec.action_space.sample())
    assert np.array_equal(first["screen"], kept)
