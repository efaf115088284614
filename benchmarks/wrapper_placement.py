"""Where should image preprocessing run: in the workers (per env) or in the owner (batched)?

Steps VizdoomBasic-v1 (Dict observation, 240x320x3 RGB screen) in vecfast's
AsyncSharedMemVectorEnv with random actions and reports env steps per second for each
placement of the same preprocessing. Placements alternate within each repeat, so
drifts in machine load hit them alike; the median over repeats is reported.

    python benchmarks/wrapper_placement.py                    # placements, VizDoom
    python benchmarks/wrapper_placement.py --frame-skip 4
    python benchmarks/wrapper_placement.py --kernels          # batched kernels only, no VizDoom

Needs ``pip install vecfast[doom]`` for the placements.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

import cv2
import gymnasium as gym
import numpy as np

from vecfast import make_vec
from vecfast.bench import batch_stepper, run_for
from vecfast.wrappers import (
    ChannelOrderObservation,
    FrameStackObservation,
    GrayscaleObservation,
    ResizeObservation,
    SingleChannelOrderObservation,
    SingleGrayscaleObservation,
    SingleResizeObservation,
)
from vecfast.wrappers.image import _ChannelOrder, _Grayscale, _Resize

ENV_ID = "VizdoomBasic-v1"
KEY = "screen"


def _placements(shape: tuple[int, int]) -> dict[str, tuple[list[Callable], list[Callable]]]:
    """name -> (single-env wrappers for the workers, vector wrappers for the owner)."""
    resize_single = functools.partial(SingleResizeObservation, shape=shape, key=KEY)
    resize_batch = functools.partial(ResizeObservation, shape=shape, key=KEY)
    gray_single = functools.partial(SingleGrayscaleObservation, key=KEY)
    gray_batch = functools.partial(GrayscaleObservation, key=KEY)
    chw_single = functools.partial(SingleChannelOrderObservation, order="CHW", key=KEY)
    stack_single = functools.partial(gym.wrappers.FrameStackObservation, stack_size=4)  # stacks every entry
    stack_batch = functools.partial(FrameStackObservation, stack_size=4, key=KEY)
    chw_batch = functools.partial(ChannelOrderObservation, order="CHW", key=KEY)
    return {
        "raw (no preprocessing)": ([], []),
        "resize in workers": ([resize_single], []),
        "resize in owner": ([], [resize_batch]),
        "gray+resize in workers": ([gray_single, resize_single], []),
        "gray+resize in owner": ([], [gray_batch, resize_batch]),
        "HWC->CHW in workers": ([chw_single], []),
        "HWC->CHW in owner": ([], [chw_batch]),
        # Frames resized in the workers either way.
        "resize, stack 4 in workers": ([resize_single, stack_single], []),
        "resize, stack 4 in owner": ([resize_single], [stack_batch]),
    }


def _make(num_envs: int, num_workers: int, frame_skip: int, in_workers: list, in_owner: list) -> gym.vector.VectorEnv:
    env = make_vec(
        ENV_ID,
        num_envs,
        vector_kwargs={"num_workers": num_workers},
        wrappers=in_workers,
        frame_skip=frame_skip,
    )
    for wrapper in in_owner:
        env = wrapper(env)
    return env


def _steps_per_second(env: gym.vector.VectorEnv, steps: int, warmup: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, env.single_action_space.n, (warmup + steps, env.num_envs))
    env.reset(seed=seed)
    run_for(batch_stepper(env, actions[:warmup], env.num_envs), calls=warmup)
    env_steps, elapsed = run_for(batch_stepper(env, actions[warmup:], env.num_envs), calls=steps)
    return env_steps / elapsed


def run_placements(args: argparse.Namespace) -> None:
    import vizdoom.gymnasium_wrapper  # noqa: F401  (registers the Vizdoom* ids)

    shape = tuple(args.shape)
    placements = _placements(shape)
    results: dict[str, list[float]] = {name: [] for name in placements}
    screen_shape = None
    # VizDoom games started together in a fresh directory race to create _vizdoom/.
    with tempfile.TemporaryDirectory() as cwd:
        os.makedirs(os.path.join(cwd, "_vizdoom"))
        os.chdir(cwd)
        for repeat in range(args.repeats):
            for name, (in_workers, in_owner) in placements.items():
                env = _make(args.num_envs, args.num_workers, args.frame_skip, in_workers, in_owner)
                if not in_workers:
                    screen_shape = env.unwrapped.single_observation_space[KEY].shape
                try:
                    sps = _steps_per_second(env, args.steps, args.warmup, seed=repeat)
                finally:
                    env.close()
                results[name].append(sps)
                print(f"  repeat {repeat}: {name:28s} {sps:8.0f} steps/s", flush=True)
    print(
        f"\n{ENV_ID} frame_skip={args.frame_skip}, {args.num_envs} envs on {args.num_workers} workers, "
        f"{os.cpu_count()} CPUs; screen {screen_shape} -> {shape}; "
        f"median of {args.repeats} x {args.steps} steps"
    )
    raw = statistics.median(results["raw (no preprocessing)"])
    for name, values in results.items():
        median = statistics.median(values)
        spread = f"min {min(values):.0f}, max {max(values):.0f}"
        print(f"{name:28s} {median:8.0f} steps/s  ({median / raw:5.0%} of raw; {spread})")


def _time_us(fn: Callable[[], Any], repeats: int = 50) -> float:
    """Microseconds per call of ``fn``, after one untimed call."""

    def call() -> int:
        fn()
        return 1

    fn()
    calls, elapsed = run_for(call, calls=repeats)
    return elapsed / calls * 1e6


def run_kernels(args: argparse.Namespace) -> None:
    """Batched kernels vs the vectorised or per-env alternatives they were chosen over."""
    rng = np.random.default_rng(0)
    n = args.num_envs
    # Smooth frames (upscaled noise), closer to rendered images than raw noise.
    small = rng.integers(0, 256, (n, 30, 40, 3), np.uint8)
    hwc = np.stack([cv2.resize(f, (320, 240), interpolation=cv2.INTER_LINEAR) for f in small])
    chw = np.ascontiguousarray(hwc.transpose(0, 3, 1, 2))
    box = gym.spaces.Box(0, 255, hwc.shape[1:], np.uint8)
    box_chw = gym.spaces.Box(0, 255, chw.shape[1:], np.uint8)
    stacked = np.ascontiguousarray(hwc.transpose(1, 2, 0, 3).reshape(240, 320, n * 3))
    weights = np.array([0.2125, 0.7154, 0.0721])
    gym_gray = gym.wrappers.GrayscaleObservation(_FrameEnv(box))
    rows: list[tuple[str, Callable[[], Any]]] = []
    for h, w in [(84, 84), (120, 160)]:
        gym_resize = gym.wrappers.ResizeObservation(_FrameEnv(box), (h, w))
        rows += [
            (
                f"resize {h}x{w}: per-frame cv2 loop (vecfast)",
                functools.partial(_Resize(box, (h, w), cv2.INTER_AREA, None), hwc),
            ),
            (
                f"resize {h}x{w}: CHW per-plane cv2 loop (vecfast)",
                functools.partial(_Resize(box_chw, (h, w), cv2.INTER_AREA, None), chw),
            ),
            # One cv2 call on the batch stacked along channels: INTER_AREA refuses > 4 channels
            # for non-integer factors, and rounds differently otherwise.
            (
                f"resize {h}x{w}: one cv2 call, batch stacked on channels",
                functools.partial(cv2.resize, stacked, (w, h), interpolation=cv2.INTER_AREA),
            ),
            (
                f"resize {h}x{w}: gymnasium per-env + stack",
                lambda e=gym_resize: np.stack([e.observation(f) for f in hwc]),
            ),
        ]
    rows += [
        ("grayscale: cv2 loop (vecfast default)", functools.partial(_Grayscale(box, False, "opencv", None), hwc)),
        (
            "grayscale: CHW, cv2.merge + cv2 loop (vecfast default)",
            functools.partial(_Grayscale(box_chw, False, "opencv", None), chw),
        ),
        (
            "grayscale: gymnasium formula, tables (vecfast)",
            functools.partial(_Grayscale(box, False, "gymnasium", None), hwc),
        ),
        ("grayscale: gymnasium formula, numpy on the batch", lambda: np.sum(hwc * weights, axis=-1).astype(np.uint8)),
        ("grayscale: gymnasium per-env + stack", lambda: np.stack([gym_gray.observation(f) for f in hwc])),
        ("HWC->CHW: cv2.split loop (vecfast)", functools.partial(_ChannelOrder(box, "CHW"), hwc)),
        ("HWC->CHW: numpy transpose copy", lambda: np.ascontiguousarray(hwc.transpose(0, 3, 1, 2))),
        ("CHW->HWC: cv2.merge loop (vecfast)", functools.partial(_ChannelOrder(box_chw, "HWC"), chw)),
        ("CHW->HWC: numpy transpose copy", lambda: np.ascontiguousarray(chw.transpose(0, 2, 3, 1))),
    ]
    print(f"{n} frames of 240x320x3 uint8 ({os.cpu_count()} CPUs, cv2 threads {cv2.getNumThreads()})")
    for label, fn in rows:
        try:
            timing = f"{_time_us(fn):8.0f} us"
        except cv2.error:
            timing = " unsupported"
        print(f"  {label:58s} {timing}")


class _FrameEnv(gym.Env):
    """Just an observation space, to build gymnasium's single-env wrappers for timing."""

    def __init__(self, space: gym.spaces.Box) -> None:
        self.observation_space = space
        self.action_space = gym.spaces.Discrete(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", action="store_true", help="time the batched kernels only")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--frame-skip", type=int, default=1)
    parser.add_argument("--shape", type=int, nargs=2, default=(84, 84), metavar=("H", "W"))
    parser.add_argument("--steps", type=int, default=500, help="timed vector steps per run")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.kernels:
        run_kernels(args)
    else:
        run_placements(args)


if __name__ == "__main__":
    main()
