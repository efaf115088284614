"""Shared fixtures: whatever a test starts (vector envs, worker processes, simulators,
their children) is closed or killed when the test ends, whether it passed or not."""

from __future__ import annotations

import contextlib
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psutil
import pytest
from gymnasium.vector import SyncVectorEnv
from helpers import descendants, kill_all

from vecfast import AsyncSharedMemVectorEnv


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as in a terminal, however the suite was started: a shell's background job (``nohup ... &``) and
    some CI runners start it with SIGINT ignored, which its children inherit, so the tests that send SIGINT
    (to this process or to the processes they start) would see nothing happen. Python's own handler here also
    gives every process started with exec SIGINT's default action back."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class ProcessGuard:
    """Remembers the processes a test starts and kills those still alive at the end.

    Descendants of this process are found automatically; processes that may be
    re-parented (children of a killed worker, workers of a killed owner) must be
    registered with :meth:`watch` while they are still descendants.
    """

    def __init__(self) -> None:
        self.before = {p.pid for p in descendants()}
        self.watched: list[psutil.Process] = []

    def watch(self, procs: Sequence[psutil.Process]) -> None:
        self.watched.extend(procs)

    def new_descendants(self) -> list[psutil.Process]:
        return [p for p in descendants() if p.pid not in self.before]

    def cleanup(self) -> None:
        kill_all(self.new_descendants() + self.watched)


@pytest.fixture(autouse=True)
def process_guard() -> Iterator[ProcessGuard]:
    guard = ProcessGuard()
    yield guard
    guard.cleanup()


@pytest.fixture
def make_async(process_guard: ProcessGuard) -> Iterator[Callable[..., AsyncSharedMemVectorEnv]]:
    """Build an :class:`AsyncSharedMemVectorEnv` that is closed after the test."""
    created: list[AsyncSharedMemVectorEnv] = []

    def make(fns: Sequence[Callable[[], Any]], **kwargs: Any) -> AsyncSharedMemVectorEnv:
        env = AsyncSharedMemVectorEnv(fns, **kwargs)
        created.append(env)
        process_guard.watch(descendants())  # workers and the processes their envs started
        return env

    yield make
    for env in created:
        # If closing fails the test has already failed; the process guard kills what is left.
        with contextlib.suppress(Exception):
            env.close(timeout=2.0)


@pytest.fixture
def make_sync() -> Iterator[Callable[..., SyncVectorEnv]]:
    """Build a :class:`gymnasium.vector.SyncVectorEnv` reference that is closed after the test."""
    created: list[SyncVectorEnv] = []

    def make(fns: Sequence[Callable[[], Any]], **kwargs: Any) -> SyncVectorEnv:
        env = SyncVectorEnv(fns, **kwargs)
        created.append(env)
        return env

    yield make
    for env in created:
        env.close()


@pytest.fixture
def scratch_in_tmp_path(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Libraries the test drives keep their scratch files in its tmp_path, not the system's temp dir: SB3's
    ``learn()`` makes ``SB3-<time>`` there (its logger's folder) on every call, and never removes it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
