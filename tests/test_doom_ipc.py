"""VizDoom's IPC in /dev/shm goes with games that die without closing, whichever vecfast
process kills them: the VizDoom knowledge lives in ``vecfast.envs.doom.ipc``, which
``import vecfast`` registers with the generic process cleanup, importing no VizDoom."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import SHM_DIR, descendants, unlink_shm, wait_gone

from vecfast.vector.process_cleanup import kill_processes

pytestmark = pytest.mark.timeout(60)

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def ipc_names(instance_id: str) -> list[str]:
    return [f"ViZDoom{kind}{instance_id}" for kind in ("SM", "MQCtr", "MQDoom")]


def left_in_shm(names: list[str]) -> list[str]:
    return [name for name in names if os.path.exists(os.path.join(SHM_DIR, name))]


def test_killing_a_game_process_unlinks_the_ipc_its_command_line_names() -> None:
    instance_id = f"vecfasttest{os.getpid()}"
    names = ipc_names(instance_id)
    for name in names:
        Path(SHM_DIR, name).touch()
    # Stand-ins: a "game" (a process with VizDoom's instance id flag) and another process.
    game = subprocess.Popen([*SLEEP, "+viz_instance_id", instance_id])
    other = subprocess.Popen(SLEEP)
    try:
        kill_processes([psutil.Process(game.pid), psutil.Process(other.pid)])
        assert game.wait(timeout=5) == other.wait(timeout=5) == -signal.SIGKILL
        assert left_in_shm(names) == []
    finally:
        game.kill()
        other.kill()
        game.wait()
        other.wait()
        unlink_shm(names)


OWNER_SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    import psutil
    from vecfast import AsyncSharedMemVectorEnv

    def vizdoom_basic():  # runs in the workers only: this process imports no VizDoom
        import gymnasium as gym
        import vizdoom.gymnasium_wrapper  # noqa: F401  (registers the Vizdoom ids)
        return gym.make("VizdoomBasic-v1")

    env = AsyncSharedMemVectorEnv([vizdoom_basic] * 2, num_workers=2)
    env.reset(seed=0)
    victim = next(w for w in psutil.Process().children() if any(c.name() == "vizdoom" for c in w.children()))
    games = victim.children()
    print(json.dumps({"pids": [g.pid for g in games], "cmdlines": [g.cmdline() for g in games]}), flush=True)
    sys.stdin.readline()
    os.kill(victim.pid, signal.SIGKILL)
    env.close()  # kills what is left of the dead worker's process group: its game
    doom = [m for m in sys.modules if m.split(".")[0] == "vizdoom" or m.startswith("vecfast.envs.doom.")]
    print(json.dumps(sorted(doom)), flush=True)
    """
)


def test_an_owner_without_vizdoom_unlinks_the_ipc_of_a_dead_workers_game(tmp_path: Any, process_guard: Any) -> None:
    (tmp_path / "_vizdoom").mkdir()  # VizDoom's games race to create it in their working directory
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    names: list[str] = []
    try:
        assert owner.stdin is not None and owner.stdout is not None
        line = owner.stdout.readline()
        assert line, "the owner script failed"
        process_guard.watch(descendants(owner.pid))
        found = json.loads(line)
        games = [psutil.Process(pid) for pid in found["pids"]]
        instance_ids = [cmd[cmd.index("+viz_instance_id") + 1] for cmd in found["cmdlines"]]
        assert len(instance_ids) == 1
        names = ipc_names(instance_ids[0])
        assert left_in_shm(names) == names  # the game's, while it runs
        owner.stdin.write("kill the worker\n")
        owner.stdin.flush()
        loaded = json.loads(owner.stdout.readline())
        assert owner.wait(timeout=30) == 0
        assert wait_gone(games, timeout=5) == []
        assert left_in_shm(names) == []
        assert loaded == ["vecfast.envs.doom.ipc"]
    finally:
        owner.kill()
        owner.wait()
        unlink_shm(names)
