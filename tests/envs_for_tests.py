"""Small, real gymnasium envs for the test-suite.

Everything here is defined at module level so that worker processes can unpickle the
env factories by reference. The dynamics are deterministic given the seed (they draw
from ``self.np_random``) and the actions, episodes have per-env lengths (some envs
terminate at random, others are truncated by ``TimeLimit``), and infos are sometimes
empty and sometimes hold numbers, arrays, strings and nested dicts.

``SpaceEnv`` can also be told to misbehave on a given step (raise, hang, segfault,
``os._exit``); ``ChildProcessEnv`` starts a ``sleep`` child process so tests can check
that whole process trees are cleaned up.
"""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import os
import signal
import subprocess
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit


def _space_pair(kind: str) -> tuple[spaces.Space, spaces.Space]:
    """(observation space, action space) for each kind of env the tests use."""
    if kind == "box_f32":
        return spaces.Box(-2.0, 2.0, (3,), np.float32), spaces.Box(-1.0, 1.0, (2,), np.float32)
    if kind == "box_u8_image":
        return spaces.Box(0, 255, (6, 5, 3), np.uint8), spaces.Discrete(3)
    if kind == "box_int":
        return spaces.Box(-10, 10, (2, 2), np.int64), spaces.Box(-3, 3, (2,), np.int32)
    if kind == "discrete":
        return spaces.Discrete(5, start=-2), spaces.Discrete(4, start=1)
    if kind == "multidiscrete":
        return spaces.MultiDiscrete([3, 4, 5]), spaces.MultiDiscrete([2, 3], start=[1, -1])
    if kind == "multibinary":
        return spaces.MultiBinary(6), spaces.MultiBinary(3)
    if kind == "dict_nested":
        obs = spaces.Dict(
            {
                "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "inner": spaces.Tuple((spaces.Discrete(3, start=-1), spaces.MultiBinary(4))),
                "img": spaces.Box(0, 255, (4, 4, 1), np.uint8),
            }
        )
        act = spaces.Dict({"move": spaces.Discrete(3), "aim": spaces.Box(-1.0, 1.0, (2,), np.float32)})
        return obs, act
    if kind == "image_hwc":  # large enough to resize by integer and non-integer factors
        return spaces.Box(0, 255, (24, 32, 3), np.uint8), spaces.Discrete(3)
    if kind in ("dict_image_hwc", "dict_image_chw"):  # a VizDoom-like {"screen", "measurements"} observation
        screen_shape = (24, 32, 3) if kind == "dict_image_hwc" else (3, 24, 32)
        obs = spaces.Dict(
            {
                "screen": spaces.Box(0, 255, screen_shape, np.uint8),
                "measurements": spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        )
        return obs, spaces.Discrete(3)
    if kind == "tuple_nested":
        obs = spaces.Tuple(
            (
                spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Box(-5, 5, (2,), np.int32)}),
                spaces.MultiDiscrete([2, 3]),
            )
        )
        act = spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(2)))
        return obs, act
    raise ValueError(f"unknown env kind {kind!r}")


# Image kinds for the wrapper tests; not in SPACE_KINDS, which the vector-env tests sweep.
IMAGE_KINDS = ("image_hwc", "dict_image_hwc", "dict_image_chw")

SPACE_KINDS = (
    "box_f32",
    "box_u8_image",
    "box_int",
    "discrete",
    "multidiscrete",
    "multibinary",
    "dict_nested",
    "tuple_nested",
)


def sample_value(space: spaces.Space, rng: np.random.Generator) -> Any:
    """A deterministic element of ``space`` drawn from ``rng``."""
    if isinstance(space, spaces.Dict):
        return {key: sample_value(sub, rng) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(sample_value(sub, rng) for sub in space.spaces)
    if isinstance(space, spaces.Discrete):
        return np.int64(int(space.start) + int(rng.integers(int(space.n))))
    if isinstance(space, spaces.MultiDiscrete):
        return (space.start + rng.integers(space.nvec)).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, size=space.shape).astype(space.dtype)
    if isinstance(space, spaces.Box):
        if space.dtype.kind == "f":
            return rng.uniform(space.low, space.high).astype(space.dtype)
        low = space.low.astype(np.int64)
        high = space.high.astype(np.int64)
        return rng.integers(low, high + 1).astype(space.dtype)
    raise TypeError(f"unsupported space {space}")


def digest(value: Any) -> float:
    """A number that depends on every entry of a (nested) action."""
    if isinstance(value, dict):
        return sum((i + 1) * digest(value[key]) for i, key in enumerate(sorted(value)))
    if isinstance(value, tuple):
        return sum((i + 1) * digest(part) for i, part in enumerate(value))
    flat = np.asarray(value, dtype=np.float64).ravel()
    return float(np.dot(flat, np.arange(1, flat.size + 1)))


def explode_on_purpose(step: int) -> None:
    """Raise from a function whose name the tests look for in the worker traceback."""
    raise ValueError(f"boom at step {step}")


def explode_in_reset(index: int) -> None:
    raise KeyError(f"env {index} refuses to reset")


def refuse_to_start(index: int) -> None:
    raise RuntimeError(f"env {index} cannot be created")


class SpaceEnv(gym.Env):
    """A deterministic env for one of :data:`SPACE_KINDS`.

    Args:
        kind: which observation/action spaces to use.
        index: the env's index in its vector env (varies episode lengths and infos).
        terminate_prob: chance per step that the episode terminates.
        render_mode: ``None`` or ``"rgb_array"``.
        fault: ``None``, ``"raise"``, ``"hang"``, ``"segfault"`` or ``"exit"``: what to do
            on the step whose lifetime step count equals ``fault_at``.
        fault_at: lifetime step count (over all episodes) at which ``fault`` happens.
        step_seconds: how long every step sleeps (a slow simulator).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(
        self,
        kind: str = "box_f32",
        index: int = 0,
        terminate_prob: float = 0.1,
        render_mode: str | None = None,
        fault: str | None = None,
        fault_at: int = 1,
        step_seconds: float = 0.0,
    ) -> None:
        self.kind = kind
        self.step_seconds = step_seconds
        self.index = index
        self.observation_space, self.action_space = _space_pair(kind)
        self.terminate_prob = terminate_prob
        self.render_mode = render_mode
        self.fault = fault
        self.fault_at = fault_at
        self.reward_scale = 1.0
        self.step_count = 0  # lifetime steps, never reset: tests read it via get_attr
        self.reset_count = 0
        self._t = 0
        self._state = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if options and self.index in options.get("explode_envs", ()):
            explode_in_reset(self.index)
        self.reset_count += 1
        self._t = 0
        self._state = int(self.np_random.integers(2**31))
        obs = sample_value(self.observation_space, self._rng())
        info: dict[str, Any] = {}
        if self.index % 2 == 0:
            info = {"reset_count": self.reset_count, "seeded": seed is not None}
        if options and "tag" in options:
            info["tag"] = options["tag"]
        return obs, info

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self._state, int(self.np_random.integers(2**31))])

    def step(self, action: Any):
        if not self.action_space.contains(action):
            raise ValueError(f"env {self.index} got an action outside its space: {action!r}")
        self.step_count += 1
        self._t += 1
        if self.step_seconds:
            time.sleep(self.step_seconds)
        if self.fault is not None and self.step_count == self.fault_at:
            self._misbehave()
        d = digest(action)
        self._state = (self._state * 1_000_003 + int(round(d * 1000)) + self._t) % (2**61 - 1)
        rng = self._rng()
        obs = sample_value(self.observation_space, rng)
        reward = d * self.reward_scale + float(rng.standard_normal())
        terminated = bool(rng.random() < self.terminate_prob)
        info: dict[str, Any] = {}
        phase = (self._t + self.index) % 5
        if phase == 1:
            info = {"t": self._t}
        elif phase == 2:
            info = {"value": float(rng.random()), "arr": rng.random(2).astype(np.float32)}
        elif phase == 3:
            info = {"t": self._t, "nested": {"x": np.float32(rng.random()), "flag": bool(self._t % 2)}}
        if terminated:
            info["outcome"] = "goal"
        return obs, reward, terminated, False, info

    def _misbehave(self) -> None:
        if self.fault == "raise":
            explode_on_purpose(self.step_count)
        elif self.fault == "hang":
            time.sleep(10_000)
        elif self.fault == "segfault":
            faulthandler.disable()  # a deliberate crash: no "Fatal Python error" dump in the test output
            ctypes.string_at(0)
        elif self.fault == "exit":
            os._exit(3)
        else:
            raise ValueError(f"unknown fault {self.fault!r}")

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return np.full((4, 6, 3), (self._state + self.index) % 256, np.uint8)

    def scaled_state(self, factor: int, offset: int = 0) -> int:
        """A method for ``call`` tests: depends on the env's state and on the arguments."""
        return (self._state % 1000) * factor + offset + self.index

    def explode_method(self) -> None:
        raise RuntimeError(f"explode_method called on env {self.index}")


class ChildProcessEnv(SpaceEnv):
    """A ``SpaceEnv`` that owns a child process, as simulators such as VizDoom do."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.child = subprocess.Popen(["sleep", "1000"])
        self.child_pid = self.child.pid

    def close(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        super().close()


def episode_limit(index: int) -> int | None:
    """Per-env TimeLimit: every third env has none and relies on termination."""
    return None if index % 3 == 2 else 4 + (3 * index) % 9


def make_env(
    kind: str = "box_f32",
    index: int = 0,
    fail_init: bool = False,
    child_process: bool = False,
    time_limit: bool = True,
    **kwargs: Any,
) -> gym.Env:
    """Build env ``index`` of a test vector env (TimeLimit-wrapped when it has a limit)."""
    if fail_init:
        refuse_to_start(index)
    cls = ChildProcessEnv if child_process else SpaceEnv
    kwargs.setdefault("terminate_prob", 0.05 + 0.03 * (index % 4))
    env: gym.Env = cls(kind=kind, index=index, **kwargs)
    limit = episode_limit(index)
    if time_limit and limit is not None:
        env = TimeLimit(env, max_episode_steps=limit)
    return env


def env_fns(num_envs: int, kind: str = "box_f32", **kwargs: Any) -> list[functools.partial]:
    """Picklable factories for envs ``0..num_envs-1``."""
    return [functools.partial(make_env, kind, i, **kwargs) for i in range(num_envs)]


def faulty_env_fns(num_envs: int, faulty_index: int, fault: str, fault_at: int, **kwargs: Any) -> list:
    """Factories where only env ``faulty_index`` misbehaves (on its step ``fault_at``)."""
    fns = env_fns(num_envs, **kwargs)
    fns[faulty_index] = functools.partial(
        make_env,
        kwargs.get("kind", "box_f32"),
        faulty_index,
        fault=fault,
        fault_at=fault_at,
        **{k: v for k, v in kwargs.items() if k != "kind"},
    )
    return fns


class CounterEnv(gym.Env):
    """A nearly free env (so workers publish results at a high rate) with infos on every other step."""

    observation_space = spaces.Box(0, np.inf, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([self.index, 0], np.float32), {}

    def step(self, action: Any):
        self._t += 1
        info = {"t": self._t} if (self._t + self.index) % 2 else {}
        obs = np.array([self.index, self._t + int(action)], np.float32)
        return obs, float(action), False, False, info


def counter_env_fns(num_envs: int) -> list[functools.partial]:
    return [functools.partial(CounterEnv, i) for i in range(num_envs)]


class StopsWhenPickled:
    """An info value whose pickling stops the process doing it (SIGSTOP): in a worker, that is after it has
    published a step's statuses and before the message with the step's infos has gone out."""

    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGSTOP)
        return StopsWhenPickled, ()


class StopsBeforeSendingEnv(CounterEnv):
    """A :class:`CounterEnv` whose step ``stop_at`` returns a :class:`StopsWhenPickled` info."""

    def __init__(self, index: int = 0, stop_at: int | None = None) -> None:
        super().__init__(index)
        self.stop_at = stop_at

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._t == self.stop_at:
            info = {"stops": StopsWhenPickled()}
        return obs, reward, terminated, truncated, info


def _restore_slowly(seconds: float) -> SlowToUnpickle:
    time.sleep(seconds)
    return SlowToUnpickle(seconds)


class SlowToUnpickle:
    """Takes ``seconds`` to unpickle: passed to an env factory, it delays a spawned
    worker's start-up (its arguments are unpickled before the worker code runs)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self):
        return _restore_slowly, (self.seconds,)


def make_env_ignoring(_ignored: Any, *args: Any, **kwargs: Any) -> gym.Env:
    """``make_env`` with an extra first argument (e.g. a :class:`SlowToUnpickle`)."""
    return make_env(*args, **kwargs)


def vizdoom_basic() -> gym.Env:
    """VizDoom's own VizdoomBasic-v1, registering VizDoom's ids first: a worker started with spawn (the portable
    shared-memory path) has not imported them."""
    import vizdoom.gymnasium_wrapper  # noqa: F401

    return gym.make("VizdoomBasic-v1")
