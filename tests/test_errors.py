"""Errors: exceptions inside envs, env creation failures, invalid actions, use after close,
bad constructor arguments. Each must be precise, leave the vector env usable where that
makes sense, and leave no processes behind."""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.util
import re
import time

import numpy as np
import psutil
import pytest
from envs_for_tests import env_fns, faulty_env_fns, make_env
from gymnasium.error import ClosedEnvironmentError
from helpers import assert_tree_equal, describe, wait_gone

from vecfast import AsyncSharedMemVectorEnv
from vecfast.vector import EnvError, InvalidActionError

# 5 envs over 2 workers: worker 0 has envs 0-2, worker 1 has envs 3-4.
NUM_ENVS = 5
NUM_WORKERS = 2


def worker_processes(vec):
    return [psutil.Process(pid) for pid in vec.worker_pids]


@pytest.mark.timeout(30)
def test_exception_in_step_names_env_worker_and_traceback(make_async):
    fns = faulty_env_fns(NUM_ENVS, 3, "raise", fault_at=4, terminate_prob=0.0, time_limit=False)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    actions = np.zeros((NUM_ENVS, 2), np.float32)
    for _ in range(3):
        vec.step(actions)

    with pytest.raises(EnvError) as caught:
        vec.step(actions)

    err = caught.value
    assert err.env_index == 3
    assert err.worker_index == 1
    assert err.exc_type == "ValueError"
    assert "explode_on_purpose" in err.worker_traceback  # the function that raised, in the worker
    text = str(err)
    assert "env 3" in text and "worker 1" in text
    assert "boom at step 4" in text and "explode_on_purpose" in text


@pytest.mark.timeout(30)
def test_env_is_usable_after_an_env_error_and_reset(make_async):
    # No episode ends, so every step() calls every env's step() (no autoreset steps).
    fns = faulty_env_fns(NUM_ENVS, 1, "raise", fault_at=2, kind="discrete", terminate_prob=0.0, time_limit=False)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    actions = np.full(NUM_ENVS, 1, np.int64)
    vec.step(actions)
    with pytest.raises(EnvError):
        vec.step(actions)
    with pytest.raises(RuntimeError, match="reset"):
        vec.step(actions)  # results are incomplete until reset

    obs, _ = vec.reset(seed=7)
    assert obs.shape == (NUM_ENVS,)
    counts_before = vec.get_attr("step_count")
    for _ in range(5):
        obs, rewards, terminations, truncations, _ = vec.step(actions)
    assert rewards.shape == (NUM_ENVS,)
    assert np.array_equal(np.subtract(vec.get_attr("step_count"), counts_before), np.full(NUM_ENVS, 5))

    procs = worker_processes(vec)
    vec.close()
    assert wait_gone(procs, timeout=5) == []
    assert [p.exitcode for p in vec.processes] == [0, 0]  # closed, not killed


@pytest.mark.timeout(30)
def test_exception_in_reset_raises_env_error(make_async):
    vec = make_async(env_fns(NUM_ENVS), num_workers=NUM_WORKERS)
    with pytest.raises(EnvError) as caught:
        vec.reset(seed=0, options={"explode_envs": [4]})
    assert caught.value.env_index == 4 and caught.value.worker_index == 1
    assert "explode_in_reset" in str(caught.value)
    obs, _ = vec.reset(seed=0)  # and the vector env recovers
    assert obs.shape == (NUM_ENVS, 3)


@pytest.mark.timeout(30)
def test_exception_in_call_raises_env_error(make_async):
    vec = make_async(env_fns(NUM_ENVS), num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    with pytest.raises(EnvError) as caught:
        vec.call("explode_method")
    assert caught.value.env_index == 0
    assert "explode_method" in str(caught.value)
    with pytest.raises(EnvError, match="AttributeError"):
        vec.get_attr("no_such_attribute")
    assert vec.get_attr("index") == tuple(range(NUM_ENVS))  # still answers


@pytest.mark.timeout(30)
@pytest.mark.parametrize("failing_index", [0, 4])
def test_env_creation_failure_raises_env_error_and_leaves_no_processes(process_guard, failing_index):
    fns = env_fns(NUM_ENVS, child_process=True)  # the envs that do start own a child process
    fns[failing_index] = functools.partial(make_env, "box_f32", failing_index, fail_init=True)

    with pytest.raises(EnvError) as caught:
        AsyncSharedMemVectorEnv(fns, num_workers=NUM_WORKERS)

    assert caught.value.env_index == failing_index
    assert "refuse_to_start" in str(caught.value)
    assert f"env {failing_index} cannot be created" in str(caught.value)
    left = wait_gone(process_guard.new_descendants(), timeout=5)
    assert left == [], f"processes left behind: {describe(left)}"


class _AfterForkHook:
    """Owner of a multiprocessing after-fork callback; the callback lives as long as it does."""


def _delay_worker_1(_hook):
    # Runs in every forked child before its target: keeps worker 1 from starting for a while.
    if multiprocessing.current_process().name == "vecfast-worker-1":
        time.sleep(2.0)


@pytest.mark.timeout(30)
def test_env_creation_failure_while_another_worker_is_still_starting(process_guard):
    """Worker 0 fails at once while worker 1 has not even started its code yet (a loaded
    machine): worker 1 and the processes its envs start must not outlive the error."""
    fns = env_fns(4, child_process=True)
    fns[0] = functools.partial(make_env, "box_f32", 0, fail_init=True)
    hook = _AfterForkHook()
    multiprocessing.util.register_after_fork(hook, _delay_worker_1)
    try:
        with pytest.raises(EnvError) as caught:
            AsyncSharedMemVectorEnv(fns, num_workers=2)
    finally:
        del hook  # unregisters the callback
    assert caught.value.env_index == 0
    time.sleep(3.0)  # worker 1 has started by now, whatever it does next
    left = wait_gone(process_guard.new_descendants(), timeout=5)
    assert left == [], f"processes left behind: {describe(left)}"


# ---------------------------------------------------------------------------- invalid actions


def _bad_actions(kind):
    """(description, batch) pairs of invalid action batches for NUM_ENVS envs of ``kind``."""
    if kind == "discrete":  # Discrete(4, start=1): valid actions are 1..4
        return [
            ("too few rows", np.ones(NUM_ENVS - 1, np.int64)),
            ("too many rows", np.ones(NUM_ENVS + 1, np.int64)),
            ("2-D batch", np.ones((NUM_ENVS, 1), np.int64)),
            ("floats", np.ones(NUM_ENVS, np.float32)),
            ("below start", np.array([1, 1, 0, 1, 1])),
            ("above start + n", np.array([1, 1, 1, 1, 5])),
            ("strings", np.array(["a"] * NUM_ENVS)),
        ]
    if kind == "box_f32":  # Box(-1, 1, (2,), float32)
        return [
            ("wrong row shape", np.zeros((NUM_ENVS, 3), np.float32)),
            ("missing batch axis", np.zeros(2, np.float32)),
            ("above high", np.array([[0, 0]] * 4 + [[0, 1.5]], np.float32)),
            ("below low", np.array([[-2, 0]] + [[0, 0]] * 4, np.float32)),
            ("nan", np.array([[np.nan, 0]] + [[0, 0]] * 4, np.float32)),
        ]
    if kind == "box_int":  # Box(-3, 3, (2,), int32)
        return [
            ("floats for an int Box", np.zeros((NUM_ENVS, 2), np.float64)),
            ("out of bounds", np.array([[0, 0]] * 4 + [[4, 0]], np.int32)),
        ]
    if kind == "multidiscrete":  # MultiDiscrete([2, 3], start=[1, -1])
        return [
            ("below start", np.array([[0, 0]] + [[1, 0]] * 4)),
            ("above start + nvec", np.array([[1, 0]] * 4 + [[1, 2]])),
            ("floats", np.ones((NUM_ENVS, 2), np.float64)),
        ]
    if kind == "multibinary":  # MultiBinary(3)
        return [
            ("a 2", np.array([[0, 0, 2]] + [[0, 0, 0]] * 4, np.int8)),
            ("wrong width", np.zeros((NUM_ENVS, 4), np.int8)),
        ]
    if kind == "dict_nested":  # Dict(aim=Box(-1, 1, (2,)), move=Discrete(3))
        good_aim = np.zeros((NUM_ENVS, 2), np.float32)
        good_move = np.zeros(NUM_ENVS, np.int64)
        return [
            ("missing key", {"move": good_move}),
            ("extra key", {"move": good_move, "aim": good_aim, "fire": good_move}),
            ("wrong key", {"move": good_move, "aim_": good_aim}),
            ("not a dict", (good_move, good_aim)),
            ("bad nested value", {"move": np.array([0, 0, 3, 0, 0]), "aim": good_aim}),
        ]
    if kind == "tuple_nested":  # Tuple(Discrete(2), MultiBinary(2))
        return [
            ("too short", (np.zeros(NUM_ENVS, np.int64),)),
            ("bad element", (np.zeros(NUM_ENVS, np.int64), np.full((NUM_ENVS, 2), 3, np.int8))),
        ]
    raise ValueError(kind)


BAD_ACTION_CASES = [
    (kind, description)
    for kind in ("discrete", "box_f32", "box_int", "multidiscrete", "multibinary", "dict_nested", "tuple_nested")
    for description, _ in _bad_actions(kind)
]


@pytest.fixture(scope="module")
def vec_by_kind():
    """One vector env per action space kind, shared by the invalid-action cases.

    Built eagerly: module-scoped fixtures are set up before each test's process guard
    takes its snapshot, so the guard leaves these workers alone.
    """
    kinds = sorted({kind for kind, _ in BAD_ACTION_CASES})
    envs = {
        # No episode ends: every step() calls every env's step() and bumps its step_count.
        kind: AsyncSharedMemVectorEnv(
            env_fns(NUM_ENVS, kind, terminate_prob=0.0, time_limit=False), num_workers=NUM_WORKERS, check_actions=True
        )
        for kind in kinds
    }
    for env in envs.values():
        env.reset(seed=0)
    yield envs
    for env in envs.values():
        env.close(timeout=2.0)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("kind", "description"), BAD_ACTION_CASES)
def test_invalid_actions_raise_before_any_env_steps(vec_by_kind, kind, description):
    vec = vec_by_kind[kind]
    bad = dict(_bad_actions(kind))[description]
    counts = vec.get_attr("step_count")

    with pytest.raises(InvalidActionError):
        vec.step(bad)

    assert vec.get_attr("step_count") == counts, "an env stepped although the batch was invalid"
    vec.action_space.seed(0)
    vec.step(vec.action_space.sample())  # a valid batch still works
    assert vec.get_attr("step_count") == tuple(c + 1 for c in counts)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("kind", "description"), BAD_ACTION_CASES)
def test_by_default_bad_actions_behave_as_in_gymnasium(make_async, make_sync, kind, description):
    """Without check_actions the envs get what the caller passed: the same outcome as SyncVectorEnv."""
    bad = dict(_bad_actions(kind))[description]
    fns = env_fns(NUM_ENVS, kind, terminate_prob=0.0, time_limit=False)
    outcomes = []
    for vec in (make_sync(fns), make_async(fns, num_workers=NUM_WORKERS)):
        vec.reset(seed=0)
        try:
            outcomes.append(vec.step(bad))
        except Exception as exc:
            outcomes.append(exc)
    reference, ours = outcomes
    if isinstance(reference, Exception):
        assert isinstance(ours, type(reference)), f"gymnasium raised {reference!r}, vecfast {ours!r}"
    else:
        assert not isinstance(ours, Exception), f"gymnasium stepped, vecfast raised {ours!r}"
        assert_tree_equal(ours, reference, description)


def test_invalid_action_error_names_the_env(make_async):
    vec = make_async(env_fns(NUM_ENVS, "discrete"), num_workers=NUM_WORKERS, check_actions=True)
    vec.reset(seed=0)
    with pytest.raises(InvalidActionError, match=r"env\(s\) \[2\]"):
        vec.step(np.array([1, 1, 9, 1, 1]))
    assert issubclass(InvalidActionError, ValueError)


def test_disabled_autoreset_steps_finished_envs_as_gymnasium_does(make_async):
    """Under DISABLED gymnasium's AsyncVectorEnv steps an env whose episode ended (the env decides what that
    means); vecfast is no stricter, and reset_mask still resets the ones asked for."""
    fns = env_fns(3, "discrete", terminate_prob=0.0)  # env 0: TimeLimit of 4 steps
    vec = make_async(fns, num_workers=2, autoreset_mode="Disabled")
    vec.reset(seed=0)
    actions = np.ones(3, np.int64)
    for _ in range(4):
        _, _, _, truncations, _ = vec.step(actions)
    assert truncations[0]
    counts = vec.get_attr("step_count")
    vec.step(actions)
    assert vec.get_attr("step_count") == tuple(c + 1 for c in counts)
    vec.reset(options={"reset_mask": np.array([True, False, False])})
    vec.step(actions)
    assert vec.get_attr("step_count") == tuple(c + 2 for c in counts)  # (lifetime steps)


# ---------------------------------------------------------------------------- closed / bad arguments


CALLS_AFTER_CLOSE = {
    "step": lambda v: v.step(np.zeros((2, 2), np.float32)),
    "reset": lambda v: v.reset(seed=0),
    "async_reset": lambda v: v.async_reset(seed=0),
    "send": lambda v: v.send(np.zeros((1, 2), np.float32), [0]),
    "recv": lambda v: v.recv(),
    "call": lambda v: v.call("scaled_state", 1),
    "get_attr": lambda v: v.get_attr("index"),
    "set_attr": lambda v: v.set_attr("reward_scale", 2.0),
    "render": lambda v: v.render(),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(CALLS_AFTER_CLOSE))
def test_any_call_after_close_raises_closed_environment_error(make_async, name):
    vec = make_async(env_fns(2), num_workers=2, batch_size=1)
    vec.reset(seed=0)
    procs = worker_processes(vec)
    vec.close()
    assert vec.closed
    assert wait_gone(procs, timeout=5) == []
    with pytest.raises(ClosedEnvironmentError):
        CALLS_AFTER_CLOSE[name](vec)
    vec.close()  # closing twice is harmless


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_workers": 0},
        {"num_workers": -1},
        {"num_workers": 4},  # more workers than envs
        {"batch_size": 0},
        {"batch_size": 4},  # more than num_envs
        {"step_timeout": 0},
        {"step_timeout": -1.0},
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_bad_constructor_arguments_raise_value_error(process_guard, kwargs):
    ((name, value),) = kwargs.items()
    with pytest.raises(ValueError, match=rf"^{name} must be .*, got {re.escape(str(value))}$"):
        AsyncSharedMemVectorEnv(env_fns(3), **kwargs)
    assert process_guard.new_descendants() == []  # rejected before any worker started


def test_no_env_fns_raises_value_error(process_guard):
    with pytest.raises(ValueError, match="env_fns is empty"):
        AsyncSharedMemVectorEnv([])
    assert process_guard.new_descendants() == []
