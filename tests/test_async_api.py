"""EnvPool-style asynchronous API: ``async_reset()``, ``recv()``, ``send(actions, env_ids)``.

With ``batch_size < num_envs`` each ``recv`` returns whichever envs finished first;
``info["env_id"]`` names them. Whatever the interleaving, each env's trajectory must
be exactly what a single env replaying the same seed and actions produces.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import numpy as np
import pytest
from envs_for_tests import counter_env_fns, env_fns
from gymnasium.error import AlreadyPendingCallError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array
from helpers import assert_tree_equal, info_row, tree_row

from vecfast.vector import InvalidActionError

SEED = 21


def _valid_box_actions(n):
    """Zero actions for ``n`` envs of the default ``box_f32`` kind (Box(-1, 1, (2,)))."""
    return np.zeros((n, 2), np.float32)


def batch_of(space, items):
    """Stack single-env values into one batch of ``space`` (nested spaces included)."""
    return concatenate(space, items, create_empty_array(space, len(items)))


def replay(make_sync, fn, seed, actions, mode):
    """What one env does under ``mode`` with ``seed`` and ``actions``: a list of per-step results."""
    sync = make_sync([fn], autoreset_mode=mode)
    obs, info = sync.reset(seed=seed)
    results = [(tree_row(obs, 0), 0.0, False, False, info_row(info, 0))]
    for action in actions:
        obs, reward, terminated, truncated, info = sync.step(batch_of(sync.single_action_space, [action]))
        results.append((tree_row(obs, 0), float(reward[0]), bool(terminated[0]), bool(truncated[0]), info_row(info, 0)))
    return results


def run_async_loop(vec, min_results, max_rounds=5000):
    """Drive ``vec`` through recv/send cycles with per-env action streams until every env
    returned ``min_results`` results (or ``max_rounds`` passed: a starved env fails the test).

    recv() returns whichever envs finish first, so how often each env comes back depends on
    the OS scheduler; only "eventually, every env" is a property of the vector env.
    Returns per-env lists of received results and of the actions sent.
    """
    single = vec.single_action_space
    action_spaces = []
    for i in range(vec.num_envs):
        space = copy.deepcopy(single)
        space.seed(1000 + i)
        action_spaces.append(space)
    received = defaultdict(list)
    sent = defaultdict(list)
    vec.async_reset(seed=SEED)
    for _ in range(max_rounds):
        if len(received) == vec.num_envs and min(len(r) for r in received.values()) >= min_results:
            break
        obs, rewards, terminations, truncations, infos = vec.recv()
        ids = infos["env_id"]
        assert isinstance(ids, np.ndarray) and ids.shape == (vec.batch_size,)
        assert len(set(ids.tolist())) == vec.batch_size, f"duplicate env ids in one batch: {ids}"
        assert rewards.shape == terminations.shape == truncations.shape == (vec.batch_size,)
        for row, env_id in enumerate(ids.tolist()):
            received[env_id].append(
                (
                    tree_row(obs, row),
                    float(rewards[row]),
                    bool(terminations[row]),
                    bool(truncations[row]),
                    info_row(infos, row),
                )
            )
        actions = [action_spaces[e].sample() for e in ids.tolist()]
        for env_id, action in zip(ids.tolist(), actions, strict=True):
            sent[env_id].append(action)
        vec.send(batch_of(single, actions), ids)
    return received, sent


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
@pytest.mark.parametrize(
    ("kind", "num_envs", "num_workers", "batch_size", "double_buffered"),
    [
        ("dict_nested", 6, 2, 3, True),  # Sample Factory's double buffering: half the envs per batch
        ("tuple_nested", 7, 3, 2, True),
        ("box_u8_image", 5, 2, 4, False),
        ("discrete", 7, 3, 3, False),
    ],
)
def test_trajectories_equal_single_env_replay(
    make_async, make_sync, kind, num_envs, num_workers, batch_size, double_buffered, mode
):
    fns = env_fns(num_envs, kind)
    vec = make_async(
        fns, num_workers=num_workers, batch_size=batch_size, double_buffered=double_buffered, autoreset_mode=mode
    )
    received, sent = run_async_loop(vec, min_results=12)

    counts = {env_id: len(received[env_id]) for env_id in range(num_envs)}
    assert min(counts.values()) >= 12, f"some env was starved by recv(): results per env {counts}"
    episode_ends = 0
    for env_id in range(num_envs):
        results = received[env_id]
        expected = replay(make_sync, fns[env_id], SEED + env_id, sent[env_id][: len(results) - 1], mode)
        assert len(expected) == len(results)
        for k, (actual, wanted) in enumerate(zip(results, expected, strict=True)):
            assert_tree_equal(actual, wanted, f"env {env_id} result {k}")
        episode_ends += sum(r[2] or r[3] for r in results)
    assert episode_ends > 0  # autoreset happened while envs were out of step with each other


@pytest.mark.timeout(60)
@pytest.mark.parametrize("double_buffered", [True, False], ids=["double", "single"])
def test_recv_rows_match_env_ids(make_async, double_buffered):
    """CounterEnv observations start with the env's index, so every row can be checked against env_id."""
    vec = make_async(counter_env_fns(7), num_workers=3, batch_size=3, double_buffered=double_buffered)
    vec.async_reset(seed=0)
    steps = np.zeros(7, int)
    for _ in range(40):
        obs, rewards, _, _, infos = vec.recv()
        ids = infos["env_id"]
        np.testing.assert_array_equal(obs[:, 0], ids)
        np.testing.assert_array_equal(obs[:, 1], steps[ids] + (steps[ids] > 0) * (ids % 2))
        np.testing.assert_array_equal(rewards, (steps[ids] > 0) * (ids % 2))
        vec.send(ids % 2, ids)  # action 1 for odd envs
        steps[ids] += 1
    assert (steps > 0).all()


def test_every_env_id_comes_back(make_async):
    """With batch_size == num_envs / 2 every env keeps coming back (none is starved)."""
    vec = make_async(env_fns(6), num_workers=2, batch_size=3)
    vec.async_reset(seed=0)
    counts = np.zeros(6, int)
    rounds = 0
    while counts.min() < 10 and rounds < 5000:
        _, _, _, _, infos = vec.recv()
        ids = infos["env_id"]
        assert len(set(ids.tolist())) == 3
        counts[ids] += 1
        vec.send(_valid_box_actions(3), ids)
        rounds += 1
    assert counts.min() >= 10, f"results per env after {rounds} rounds: {counts}"
    assert counts.sum() == 3 * rounds


def test_recv_with_too_few_envs_in_flight_raises(make_async):
    vec = make_async(env_fns(6), num_workers=2, batch_size=3)
    vec.async_reset(seed=0)
    first = vec.recv()[4]["env_id"]
    second = vec.recv()[4]["env_id"]
    assert sorted(first.tolist() + second.tolist()) == list(range(6))
    with pytest.raises(RuntimeError, match="batch_size"):
        vec.recv()  # nothing in flight
    vec.send(_valid_box_actions(2), first[:2])
    with pytest.raises(RuntimeError, match="batch_size"):
        vec.recv()  # only 2 of 3 in flight
    vec.send(_valid_box_actions(1), first[2:])
    assert sorted(vec.recv()[4]["env_id"].tolist()) == sorted(first.tolist())


def test_send_to_env_in_flight_raises_already_pending(make_async):
    vec = make_async(env_fns(6), num_workers=2, batch_size=3)
    vec.async_reset(seed=0)
    with pytest.raises(AlreadyPendingCallError):
        vec.send(_valid_box_actions(1), [0])  # still resetting
    ids = vec.recv()[4]["env_id"]
    vec.send(_valid_box_actions(3), ids)
    with pytest.raises(AlreadyPendingCallError):
        vec.send(_valid_box_actions(1), ids[:1])  # sent, not yet received
    # The refused sends changed nothing: two more batches come back, covering every env.
    later = vec.recv()[4]["env_id"].tolist() + vec.recv()[4]["env_id"].tolist()
    assert sorted(later) == list(range(6))


def test_step_while_async_batches_pending_raises(make_async):
    vec = make_async(env_fns(6), num_workers=2, batch_size=3)
    vec.async_reset(seed=0)
    with pytest.raises(AlreadyPendingCallError):
        vec.step(_valid_box_actions(6))
    vec.recv()
    with pytest.raises(AlreadyPendingCallError):
        vec.step(_valid_box_actions(6))  # the other half is still pending
    vec.recv()
    obs, rewards, *_ = vec.step(_valid_box_actions(6))  # all received: step works again
    assert obs.shape == (6, 3) and rewards.shape == (6,)


def test_send_rejects_bad_env_ids_and_actions(make_async):
    vec = make_async(env_fns(4, "discrete"), num_workers=2, batch_size=2, check_actions=True)
    vec.async_reset(seed=0)
    ids = vec.recv()[4]["env_id"]
    for bad in ([], [0, 0], [4], [-1], [[0, 1]], [0.5, 1.0]):
        with pytest.raises(ValueError, match="env_ids must be"):
            vec.send(np.ones(max(len(np.ravel(bad)), 1), np.int64), bad)
    with pytest.raises(InvalidActionError):
        vec.send(np.array([0, 1]), ids)  # Discrete(4, start=1): 0 is out of range
    with pytest.raises(InvalidActionError):
        vec.send(np.array([1, 2, 3]), ids)  # three actions for two envs
    vec.send(np.array([1, 4]), ids)  # still usable: the refused sends sent nothing
    both = vec.recv()[4]["env_id"].tolist() + vec.recv()[4]["env_id"].tolist()
    assert sorted(both) == list(range(4))


def test_step_api_still_works_after_async_use(make_async, make_sync):
    """reset() after an async session waits out pending envs and starts clean."""
    fns = env_fns(5, "multibinary")
    vec = make_async(fns, num_workers=2, batch_size=2)
    sync = make_sync(fns)
    sync.reset(seed=0)  # the envs' reset counters (in the infos) must agree
    vec.async_reset(seed=0)
    ids = vec.recv()[4]["env_id"]
    vec.send(np.zeros((2, 3), np.int8), ids)  # leave envs in flight
    assert_tree_equal(vec.reset(seed=3), sync.reset(seed=3), "reset after async use")
    sync.action_space.seed(0)
    for t in range(10):
        actions = sync.action_space.sample()
        assert_tree_equal(vec.step(actions), sync.step(actions), f"step {t}")
