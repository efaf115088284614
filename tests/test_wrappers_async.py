"""vecfast's wrappers over EnvPool's asynchronous API (``async_reset``/``send``/``recv``), and APPO's use of it.

``recv`` returns whichever envs finish first; a wrapper must transform that partial
batch as ``step`` would, with per-env state indexed by ``info["env_id"]``. Each env's
results over recv/send (double buffered, ``batch_size < num_envs``) must equal its
results under the same wrapper over ``step``.
"""

from __future__ import annotations

import queue
import warnings
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
from envs_for_tests import env_fns
from gymnasium.error import AlreadyPendingCallError
from gymnasium.vector import AutoresetMode, VectorEnv
from helpers import assert_tree_equal
from wrapper_lockstep import NUM_ENVS, NUM_WORKERS, EnvResult, run_recv_send, run_step

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.sampler import StepAsRecv, async_api
from vecfast.trainers.schemes.policy_worker import PolicyWorker
from vecfast.wrappers import (
    ChannelOrderObservation,
    ClipReward,
    FrameStackObservation,
    GrayscaleObservation,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    ResizeObservation,
    ScaleReward,
)

SEED = 5
MIN_RESULTS = 25  # per env: several episodes (limits of 4 to 12 steps, or random termination)
BATCH_SIZE = 2
BOUNDS = np.linspace(0.2, 1.0, NUM_ENVS)  # per-env clip bounds: rows must pick their env's


def _frozen(wrapper: NormalizeObservation | NormalizeReward) -> VectorEnv:
    """Statistics shared by all envs depend on how they were batched: frozen, outputs compare env by env."""
    wrapper.update_running_mean = False
    return wrapper


# name: (wrap the vector env, per-env state of the wrapper to compare after the run or None)
CASES: dict[str, tuple[Callable[[VectorEnv], VectorEnv], Callable[[VectorEnv], tuple] | None]] = {
    "resize": (lambda env: ResizeObservation(env, (12, 16), key="screen"), None),
    "grayscale": (lambda env: GrayscaleObservation(env, keep_dim=True, key="screen"), None),
    "channel_order": (lambda env: ChannelOrderObservation(env, key="screen"), None),
    "frame_stack": (lambda env: FrameStackObservation(env, 3, key="screen"), None),
    "frame_stack_zero": (lambda env: FrameStackObservation(env, 4, key="measurements", padding_type="zero"), None),
    "normalize_obs": (lambda env: _frozen(NormalizeObservation(env, key="measurements")), None),
    "episode_stats": (RecordEpisodeStatistics, lambda w: (w.episode_returns, w.episode_lengths)),
    "scale_clip": (lambda env: ClipReward(ScaleReward(env, 0.5), -BOUNDS, BOUNDS), None),
    "normalize_reward": (lambda env: _frozen(NormalizeReward(env, gamma=0.9)), lambda w: (w.accumulated_reward,)),
    "doom_like_stack": (
        lambda env: FrameStackObservation(
            ResizeObservation(
                GrayscaleObservation(RecordEpisodeStatistics(ScaleReward(env, 0.01)), keep_dim=True, key="screen"),
                (12, 16),
                key="screen",
            ),
            4,
            key="screen",
        ),
        None,
    ),
}


def _assert_per_env_equal(received: list[list[EnvResult]], expected: list[list[EnvResult]]) -> None:
    for env, results in enumerate(received):
        for k, result in enumerate(results):
            assert_tree_equal(result, expected[env][k], f"env {env} result {k}")


def _assert_boundaries_crossed(received: list[list[EnvResult]], mode: AutoresetMode) -> None:
    results = [r for env_results in received for r in env_results]
    assert any(r[2] for r in results) and any(r[3] for r in results), "no termination and truncation"
    if mode == AutoresetMode.SAME_STEP:
        assert any("final_obs" in r[4] for r in results)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
@pytest.mark.parametrize("case", list(CASES))
def test_recv_send_equals_step_per_env(make_async, make_sync, case, mode):
    wrap, state = CASES[case]
    fns = env_fns(NUM_ENVS, "dict_image_hwc")
    actual = wrap(
        make_async(fns, num_workers=NUM_WORKERS, batch_size=BATCH_SIZE, double_buffered=True, autoreset_mode=mode)
    )
    assert actual.batch_size == BATCH_SIZE
    received = run_recv_send(actual, SEED, MIN_RESULTS)
    expected_env = wrap(make_sync(fns, autoreset_mode=mode))
    record = (lambda: tuple(map(np.copy, state(expected_env)))) if state else lambda: None
    expected, records = run_step(expected_env, SEED, max(map(len, received)) - 1, record)

    _assert_per_env_equal(received, expected)
    _assert_boundaries_crossed(received, mode)
    if state is not None:  # each env's state is where its last result left it
        for env, results in enumerate(received):
            want = records[len(results) - 1]
            assert_tree_equal(tuple(a[env] for a in state(actual)), tuple(a[env] for a in want), f"env {env} state")


@pytest.mark.timeout(60)
def test_normalizers_update_statistics_with_recv_batches(make_async, make_sync):
    """Running statistics are those of every observation and active return that recv delivered."""
    mode = AutoresetMode.NEXT_STEP
    fns = env_fns(NUM_ENVS, "dict_image_hwc")
    base = make_async(fns, num_workers=NUM_WORKERS, batch_size=BATCH_SIZE, autoreset_mode=mode)
    actual = NormalizeReward(NormalizeObservation(base, key="measurements"), gamma=0.9)
    received = run_recv_send(actual, SEED, MIN_RESULTS)
    reference = NormalizeReward(make_sync(fns, autoreset_mode=mode), gamma=0.9)
    raw, returns = run_step(reference, SEED, max(map(len, received)) - 1, lambda: reference.accumulated_reward.copy())

    observations, active_returns = [], []
    for env, results in enumerate(received):
        observations += [r[0]["measurements"] for r in raw[env][: len(results)]]
        # NEXT_STEP: the reset result and the autoreset step after each episode end leave the return alone
        active_returns += [returns[k][env] for k in range(1, len(results)) if not any(raw[env][k - 1][2:4])]
    obs_rms, return_rms = actual.env.obs_rms, actual.return_rms
    everything = np.array(observations, np.float64)
    assert obs_rms.count == pytest.approx(len(everything) + 1e-4)
    np.testing.assert_allclose(obs_rms.mean, everything.mean(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(obs_rms.var, everything.var(axis=0), rtol=1e-5, atol=1e-6)
    active_returns = np.array(active_returns, np.float64)
    assert return_rms.count == pytest.approx(len(active_returns) + 1e-4)
    np.testing.assert_allclose(return_rms.mean, active_returns.mean(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(return_rms.var, active_returns.var(), rtol=1e-5, atol=1e-6)


def test_wrapper_has_async_api_only_over_an_env_with_it(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "dict_image_hwc")
    over_sync = ScaleReward(ResizeObservation(make_sync(fns), (12, 16), key="screen"), 0.5)
    over_async = ScaleReward(ResizeObservation(make_async(fns, num_workers=NUM_WORKERS), (12, 16), key="screen"), 0.5)
    for name in ("async_reset", "send", "recv", "batch_size"):
        assert not hasattr(over_sync, name), name
        assert hasattr(over_async, name), name
    assert over_async.batch_size == NUM_ENVS


@pytest.mark.timeout(60)
def test_appo_samples_with_send_recv_through_vecfast_wrappers(make_async):
    base = make_async(env_fns(4), num_workers=2, batch_size=2)
    env = FrameStackObservation(NormalizeObservation(RecordEpisodeStatistics(ScaleReward(base, 0.1))), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        assert async_api(env) is env
    cfg = TrainConfig.from_overrides(use_rnn=False, encoder_mlp_layers=(16,), rollout=4, batch_size=8)
    model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    worker = PolicyWorker(env, model, cfg.rollout, num_rows=4 + 8, seed=0, stats_avg=10)
    worker.start()
    full = 0
    try:
        while full < 8 and worker.error is None:
            try:
                worker.sampler.full.get(timeout=5.0)
                full += 1
            except queue.Empty:
                continue
    finally:
        worker.stop_event.set()
        worker.join()
    assert worker.error is None, worker.error
    assert worker.sampler.env is env and worker.sampler.env_steps > 0
    # Envs that the worker sent are still stepping: it sampled with send(), not step().
    with pytest.raises(AlreadyPendingCallError):
        base.step(base.action_space.sample())


@pytest.mark.parametrize("over", ["gymnasium_wrapper", "sync_env"])
def test_appo_warns_once_when_sampling_falls_back_to_step(make_async, make_sync, over):
    fns = env_fns(4)
    if over == "gymnasium_wrapper":
        inner = gym.wrappers.vector.RecordEpisodeStatistics(make_async(fns, num_workers=2, batch_size=2))
        culprit = "gymnasium.wrappers.vector.common.RecordEpisodeStatistics"
    else:
        inner, culprit = make_sync(fns), "SyncVectorEnv"
    env = FrameStackObservation(ScaleReward(inner, 0.1), 2)
    assert not hasattr(env, "recv")
    cfg = TrainConfig.from_overrides(use_rnn=False, encoder_mlp_layers=(16,), rollout=4, batch_size=8)
    model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker = PolicyWorker(env, model, cfg.rollout, num_rows=4 + 8, seed=0, stats_avg=10)
        worker.start()
        try:
            for _ in range(4):
                worker.sampler.full.get(timeout=10.0)
        finally:
            worker.stop_event.set()
            worker.join()
    assert worker.error is None, worker.error
    assert isinstance(worker.sampler.env, StepAsRecv)
    messages = [str(w.message) for w in caught if "synchronous" in str(w.message)]
    assert len(messages) == 1, messages
    assert culprit in messages[0] and "send/recv" in messages[0], messages[0]
