"""The portable path (where there is no memfd, forced on Linux by ``VECFAST_SHARED_MEMORY=portable``): arenas are
``multiprocessing.shared_memory`` blocks attached by name, workers start with spawn, and nothing is left in
``/dev/shm`` however the owner ends. CI runs the vector-env tests once more in this mode (``.ci/run``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from helpers import shm_entries, shm_files_used_by

from vecfast.vector import AsyncSharedMemVectorEnv
from vecfast.vector.shared_buffers import SHARED_MEMORY_VAR, portable_shared_memory

NUM_ENVS = 4


@pytest.fixture
def portable(monkeypatch):
    monkeypatch.setenv(SHARED_MEMORY_VAR, "portable")
    assert portable_shared_memory()


def cartpoles() -> list:
    return [lambda: gym.make("CartPole-v1")] * NUM_ENVS


@pytest.mark.parametrize("restarts", [False, True])
def test_spawned_workers_share_a_named_block_and_step_as_gymnasiums_envs(portable, restarts):
    # only this process's blocks count: tests running beside it (pytest-xdist) make blocks of their own
    vec = AsyncSharedMemVectorEnv(cartpoles(), num_workers=2, restart_failed_workers=restarts)
    ref = gym.vector.SyncVectorEnv(cartpoles())
    mine = shm_files_used_by([psutil.Process()])
    try:
        assert {type(p).__name__ for p in vec.processes} == {"SpawnProcess"}
        assert len(mine) == 1
        # the block's name lives while a replacement worker may need to attach to it, no longer
        assert len(mine & shm_entries()) == (1 if restarts else 0)
        obs, _ = vec.reset(seed=7)
        np.testing.assert_array_equal(obs, ref.reset(seed=7)[0])
        actions = np.array([0, 1, 1, 0])
        for _ in range(60):  # across episode ends
            out, expected = vec.step(actions), ref.step(actions)
            for got, want in zip(out[:4], expected[:4], strict=True):
                np.testing.assert_array_equal(got, want)
    finally:
        vec.close()
        ref.close()
    assert mine & shm_entries() == set()


def test_a_killed_owner_leaves_no_block_behind(portable, tmp_path):
    """The block a run with restarts keeps named: multiprocessing's resource tracker unlinks it when the owner
    is SIGKILLed."""
    script = textwrap.dedent(
        """
        import gymnasium as gym, time
        from vecfast.vector import AsyncSharedMemVectorEnv
        if __name__ == "__main__":
            vec = AsyncSharedMemVectorEnv([lambda: gym.make("CartPole-v1")] * 2, num_workers=2,
                                          restart_failed_workers=True)
            vec.reset(seed=0)
            print("ready", flush=True)
            time.sleep(600)
        """
    )
    path = tmp_path / "owner.py"
    path.write_text(script)
    owner = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        owners = shm_files_used_by([psutil.Process(owner.pid)]) & shm_entries()
        assert len(owners) == 1
        owner.kill()
        owner.wait(timeout=30)
        deadline = time.monotonic() + 30
        while owners & shm_entries() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert owners & shm_entries() == set()
    finally:
        owner.kill()
        owner.stdout.close()
