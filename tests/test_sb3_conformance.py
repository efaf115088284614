"""SB3VecEnv is a drop-in for Stable-Baselines3's own VecEnvs: same inputs, same outputs, same errors.

Each test runs one scenario through vecfast's adapter (envs in worker processes) and through
SB3's ``SubprocVecEnv`` or ``DummyVecEnv``, and compares what the caller sees. SB3's two
VecEnvs differ in places, which decides the reference:

* step outputs are compared bit for bit with ``DummyVecEnv`` (``SubprocVecEnv`` returns
  rewards in the env's dtype and infos as a tuple; :func:`assert_same_as_subproc` allows
  for exactly that);
* exceptions too: ``SubprocVecEnv``'s worker dies when its env raises, so its caller gets
  ``EOFError``, not the env's exception;
* what crosses process boundaries (per-env access, resets, spaces) is compared with both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from envs_for_tests import env_fns, faulty_env_fns, make_env
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from helpers import assert_tree_equal
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecFrameStack, VecMonitor, VecNormalize
from test_sb3_adapter import NUM_ENVS, assert_vec_step_equal, run_lockstep
from test_sb3_adapter import closing as closing  # fixtures, re-exported for pytest
from test_sb3_adapter import make_adapter as make_adapter

from vecfast.wrappers.sb3 import make_vec_env

pytestmark = pytest.mark.timeout(60)

# SB3's default start method, forkserver, starts a server that imports torch again: slow for tests.
SUBPROC_KWARGS = {"start_method": "fork"}
OURS_KWARGS = {"num_workers": 2}

ACTION_SPACES = {
    "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
    "discrete": spaces.Discrete(4, start=1),
    "multidiscrete": spaces.MultiDiscrete([2, 3], start=[1, -1]),
    "dict": spaces.Dict({"move": spaces.Discrete(3), "aim": spaces.Box(-1.0, 1.0, (2,), np.float32)}),
    "tuple": spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(2))),
}


# ---------------------------------------------------------------------------- envs


def make_action_env(action: str, index: int) -> gym.Env:
    """A test env (rich infos, terminations, truncations) with one of :data:`ACTION_SPACES`.

    Its observations stay flat (SB3 has no nested ones); it folds any action into its state.
    """
    env = make_env("box_f32", index)
    env.unwrapped.action_space = ACTION_SPACES[action]
    return env


class EchoEnv(gym.Env):
    """Observes the action it is given: SB3's VecEnvs hand actions to the env unchecked."""

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def __init__(self, action_space: spaces.Box) -> None:
        self.action_space = action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any):
        return np.asarray(action, np.float32), 0.0, False, False, {}


class NoOptionsEnv(gym.Env):
    """An env written before gymnasium's ``reset`` took ``options``; episodes end both ways."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 100.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)  # its own: make_vec_env seeds each env's

    def reset(self, seed: int | None = None):
        super().reset(seed=seed)
        self._position = int(self.np_random.integers(4))
        self._t = 0
        return self._obs(), {"start": self._position}

    def step(self, action: Any):
        self._position += 1 + int(action)
        self._t += 1
        return self._obs(), float(action), self._position >= 9, self._t >= 5, {}

    def _obs(self) -> np.ndarray:
        return np.array([self._position, self._t], np.float32)


# ---------------------------------------------------------------------------- helpers


def reference_vec_env(reference: str, fns: list[Callable[[], gym.Env]]) -> VecEnv:
    return SubprocVecEnv(fns, **SUBPROC_KWARGS) if reference == "subproc" else DummyVecEnv(fns)


def assert_same_as_subproc(actual: tuple, expected: tuple, what: str) -> None:
    """Compare a step with SubprocVecEnv's, whose rewards keep the env's dtype and whose infos are a tuple."""
    obs, rewards, dones, infos = expected
    assert_vec_step_equal(actual, (obs, rewards.astype(np.float32), dones, list(infos)), what)


def raised(action: Callable[[VecEnv], Any], venv: VecEnv) -> BaseException:
    with pytest.raises(Exception) as caught:
        action(venv)
    return caught.value


# ---------------------------------------------------------------------------- stepping and seeding


@pytest.mark.parametrize("action", ACTION_SPACES)
def test_steps_and_seeds_match_dummy_vec_env(make_adapter, action):
    """Observations, rewards, dones, infos (terminal_observation, TimeLimit.truncated) and
    reset_infos, for every kind of action space, with Dict/Tuple actions one per env as SB3
    passes them; reseeding mid-run restarts both alike."""
    fns = [functools.partial(make_action_env, action, i) for i in range(NUM_ENVS)]
    ours, reference = make_adapter(fns), DummyVecEnv(fns)
    for seed in (3, 4):
        seen = run_lockstep(ours, reference, 60, seed)
        assert seen["terminated"] > 3 and seen["truncated"] > 3, seen


@pytest.mark.parametrize(
    "space, actions",
    [
        (spaces.Box(0, 255, (2,), np.uint8), [[3.0, 250.0], [0.0, 17.0], [255.0, 1.0]]),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), [[-3.5, 2.0], [1.5, -1.25], [0.0, 9.0]]),
    ],
    ids=["floats_for_uint8", "out_of_bounds"],
)
def test_actions_reach_the_env_as_in_dummy_vec_env(make_adapter, space, actions):
    """The env decides which actions it takes: the adapter adds no checks of its own."""
    fns = [functools.partial(EchoEnv, space)] * 3
    ours, reference = make_adapter(fns), DummyVecEnv(fns)
    assert_tree_equal(ours.reset(), reference.reset())
    actions = np.array(actions)  # float64, as a continuous policy's output may be
    assert_vec_step_equal(ours.step(actions.copy()), reference.step(actions.copy()), "step")


def test_make_vec_env_matches_sb3_with_an_env_whose_reset_takes_no_options(closing):
    """Built by each library's make_vec_env (Monitor, seeds, seeded action spaces): same
    samples, first reset and steps, as ``reset`` passes ``options`` only when some were set."""
    kwargs = {"n_envs": 3, "seed": 4}
    ours = closing(make_vec_env(NoOptionsEnv, vec_env_kwargs=OURS_KWARGS, **kwargs))
    reference = closing(
        sb3_make_vec_env(NoOptionsEnv, vec_env_cls=SubprocVecEnv, vec_env_kwargs=SUBPROC_KWARGS, **kwargs)
    )
    assert [ours.action_space.sample() for _ in range(8)] == [reference.action_space.sample() for _ in range(8)]
    assert_tree_equal(ours.reset(), reference.reset(), "first reset")
    assert ours.reset_infos == list(reference.reset_infos)
    ends = {"terminated": 0, "truncated": 0}
    for t in range(24):
        actions = np.array([t % 2, 1, 0])
        expected = reference.step(actions)
        assert_same_as_subproc(ours.step(actions), expected, f"step {t}")
        for info in expected[3]:
            if "terminal_observation" in info:
                ends["truncated" if info["TimeLimit.truncated"] else "terminated"] += 1
    assert ends["terminated"] > 2 and ends["truncated"] > 2, ends


# ---------------------------------------------------------------------------- per-env access and resets

INDICES = [None, 3, -1, [4, 0], [0, -1], [-2, 1, -2], range(2), np.array([2, -3])]


@pytest.mark.parametrize("reference", ["subproc", "dummy"])
def test_per_env_access_matches(make_adapter, closing, reference):
    """get_attr/set_attr/env_method/env_is_wrapped/has_attr with every kind of indices."""
    fns = env_fns(NUM_ENVS, "box_f32")  # env 2 has no TimeLimit
    ours, theirs = make_adapter(fns), closing(reference_vec_env(reference, fns))
    both = (ours, theirs)

    def same(method: str, *args: Any, **kwargs: Any) -> None:
        results = [list(getattr(venv, method)(*args, **kwargs)) for venv in both]
        assert results[0] == results[1], f"{method}{args}{kwargs}"

    for venv in both:
        venv.seed(1)
        venv.reset()
    for k, indices in enumerate(INDICES):
        same("get_attr", "index", indices)
        same("env_method", "scaled_state", 3, indices=indices, offset=1)
        same("env_is_wrapped", TimeLimit, indices)
        for venv in both:
            venv.set_attr("reward_scale", float(k), indices)
        same("get_attr", "reward_scale")  # which envs (layers) got the value
    assert ours.has_attr("scaled_state") and theirs.has_attr("scaled_state")
    assert not ours.has_attr("no_such_thing") and not theirs.has_attr("no_such_thing")
    for venv in both:
        with pytest.raises(IndexError):
            venv.get_attr("index", [NUM_ENVS])


@pytest.mark.parametrize("reference", ["subproc", "dummy"])
def test_resets_with_and_without_options_match(make_adapter, closing, reference):
    """Seeds and options apply at the next reset only; envs without options get none."""
    fns = env_fns(NUM_ENVS, "box_f32")
    ours, theirs = make_adapter(fns), closing(reference_vec_env(reference, fns))
    for options in ({"tag": "all"}, [{"tag": i} if i % 2 else {} for i in range(NUM_ENVS)], None):
        for venv in (ours, theirs):
            venv.seed(8)
            venv.set_options(options)
        assert_tree_equal(ours.reset(), theirs.reset(), f"reset with options {options}")
        assert ours.reset_infos == list(theirs.reset_infos), options
        assert_tree_equal(ours.reset(), theirs.reset(), f"reset after options {options}")
        assert ours.reset_infos == list(theirs.reset_infos) and not any("tag" in i for i in ours.reset_infos)


# ---------------------------------------------------------------------------- errors


def step_three_times(venv: VecEnv) -> None:
    venv.reset()
    for _ in range(3):
        venv.step(np.zeros((NUM_ENVS, 2), np.float32))


def reset_with_options(options: dict[str, Any]) -> Callable[[VecEnv], Any]:
    def run(venv: VecEnv) -> Any:
        venv.set_options(options)
        return venv.reset()

    return run


ERROR_CASES: dict[str, tuple[Callable[[], list], Callable[[VecEnv], Any]]] = {
    "step": (lambda: faulty_env_fns(NUM_ENVS, 2, "raise", fault_at=3), step_three_times),  # ValueError
    "reset": (lambda: env_fns(NUM_ENVS), reset_with_options({"explode_envs": [1]})),  # KeyError
    "reset_options_not_taken": (lambda: [NoOptionsEnv] * 2, reset_with_options({"level": 1})),  # TypeError
    "env_method_arguments": (lambda: env_fns(NUM_ENVS), lambda venv: venv.env_method("scaled_state")),  # TypeError
    "env_method_missing": (lambda: env_fns(NUM_ENVS), lambda venv: venv.env_method("no_such_method", indices=-1)),
    "get_attr_missing": (lambda: env_fns(NUM_ENVS), lambda venv: venv.get_attr("no_such_thing", [0, -1])),
}


@pytest.mark.parametrize("case", ERROR_CASES)
def test_env_exceptions_reach_the_caller_as_in_dummy_vec_env(make_adapter, case):
    """An env's exception arrives as an instance of its own type (``except ValueError`` works)."""
    make_fns, action = ERROR_CASES[case]
    fns = make_fns()
    expected = raised(action, DummyVecEnv(fns))
    actual = raised(action, make_adapter(fns))
    assert isinstance(actual, type(expected)), f"{type(actual).__mro__} is not a {type(expected)}: {actual}"


# ---------------------------------------------------------------------------- SB3's VecEnv wrappers


def test_vec_wrappers_compose_as_over_sb3s_make_vec_env(closing):
    """VecMonitor (warning about the inner Monitor), VecNormalize and VecFrameStack over each
    library's make_vec_env: same observations, normalised rewards, episode infos, statistics."""
    kwargs = {"n_envs": 4, "seed": 5, "wrapper_class": TimeLimit, "wrapper_kwargs": {"max_episode_steps": 20}}
    venvs = [
        closing(make_vec_env("CartPole-v1", vec_env_kwargs=OURS_KWARGS, **kwargs)),
        closing(sb3_make_vec_env("CartPole-v1", vec_env_cls=DummyVecEnv, **kwargs)),
    ]
    stacks = []
    for venv in venvs:
        with pytest.warns(UserWarning, match="already wrapped with a `Monitor`"):
            monitored = VecMonitor(venv)
        stacks.append(VecFrameStack(VecNormalize(monitored, gamma=0.9), n_stack=3))
    ours, reference = stacks
    seen = run_lockstep(ours, reference, 150, seed=12)
    assert seen["terminated"] > 5 and seen["truncated"] > 5, seen
    assert ours.venv.venv.episode_count == reference.venv.venv.episode_count > 10
    for stat in ("mean", "var"):
        assert_tree_equal(getattr(ours.venv.obs_rms, stat), getattr(reference.venv.obs_rms, stat), stat)
        assert_tree_equal(getattr(ours.venv.ret_rms, stat), getattr(reference.venv.ret_rms, stat), stat)
