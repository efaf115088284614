"""Quiet by default, and nothing left in $TMPDIR: VizDoom's network chatter and c10d's hostname warnings
go to the run's log (``--verbose`` shows them), a game's error still reaches the terminal, and a local
launch of ranks leaves no directory behind. Real games, real ranks (gloo), each in a process of its own."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from vecfast.chatter import LOG_VAR, VERBOSE_VAR
from vecfast.network_isolation import NetworkIsolationError, PrivateNetwork
from vecfast.trainers.run.launch import init_process_group, launch_local, leave_process_group, rank_from_environment

pytestmark = pytest.mark.slow  # whole commands and a local launch

needs_vizdoom = pytest.mark.skipif(importlib.util.find_spec("vizdoom") is None, reason="needs vizdoom")
CHATTER = ("Waiting for players", "Contacting host", "Found player_", "Total players", "Received All Here")

DUEL = """
from vecfast.envs.doom import doom_duel_v0
env = doom_duel_v0.parallel_env(timelimit_minutes=0.05, network_isolation={isolation})
env.reset(seed=0)
for _ in range(3):
    env.step({{agent: env.action_space(agent).sample() for agent in env.agents}})
env.close()
print("done")
"""


def isolation_possible() -> bool:
    try:
        PrivateNetwork(sys.executable).close()
    except NetworkIsolationError:
        return False
    return True


def run_python(code: str, tmp_path: Path, drop: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in (LOG_VAR, VERBOSE_VAR, *drop)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def a_run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")  # the log is written to a directory that holds a run
    return run


@needs_vizdoom
@pytest.mark.timeout(150)
@pytest.mark.parametrize("isolation", [None, False])
def test_a_duel_prints_nothing_and_its_chatter_goes_to_the_log(tmp_path, isolation):
    """About 30 lines of network handshake per duel (in the private network and in the host's): none on the
    terminal, all in the run's env.log."""
    run = a_run_dir(tmp_path)
    done = run_python(DUEL.format(isolation=isolation), tmp_path, **{LOG_VAR: str(run / "env.log")})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    shown = [line for line in done.stderr.splitlines() if "NetworkIsolationWarning" not in line and line.strip()]
    shown = [line for line in shown if "self.match = DoomMatchesVectorEnv(" not in line]  # the warning's source line
    assert shown == []
    log = (run / "env.log").read_text()
    assert "Found player_0" in log and "Found player_1" in log
    assert log.count("--- VizDoom game ") == 2  # each player's game, under its name


@needs_vizdoom
@pytest.mark.timeout(150)
def test_verbose_leaves_the_chatter_on_the_terminal(tmp_path):
    done = run_python(DUEL.format(isolation=None), tmp_path, **{VERBOSE_VAR: "1"})
    assert done.returncode == 0, done.stderr
    assert "Found player_0" in done.stdout + done.stderr


@needs_vizdoom
@pytest.mark.timeout(120)
def test_a_game_error_reaches_the_terminal_without_the_chatter(tmp_path):
    """A player that joins a match nobody hosts gives up after its connect timeout: VizDoom's engine says so,
    and VizDoom then crashes the process that started it (SIGSEGV). The engine's message reaches stderr
    (through the reaper, which outlives its owner) and the run's log; its 'Contacting host' spinner does not."""
    run = a_run_dir(tmp_path)
    code = """
    from vecfast.envs.doom.multiplayer.player import DoomPlayerEnv, free_udp_port
    env = DoomPlayerEnv(1, 2, free_udp_port(), connect_timeout=1, wad="multi_duel.wad")
    env.reset(seed=0)
    """
    done = run_python(code, tmp_path, **{LOG_VAR: str(run / "env.log")})
    assert done.returncode != 0
    assert "Timeout, network game synchronization aborted." in done.stderr
    assert not any(chatter in done.stdout + done.stderr for chatter in CHATTER), done.stderr
    log = (run / "env.log").read_text()
    assert "Contacting host" in log and "Timeout, network game synchronization aborted." in log


@needs_vizdoom
@pytest.mark.skipif(bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")), reason="a window would open")
@pytest.mark.timeout(120)
def test_sdl_complaints_go_to_the_log_and_its_error_to_the_terminal(tmp_path):
    """A game that wants a window on a machine with none: SDL's lines about XDG_RUNTIME_DIR and /dev/dri are
    chatter, its 'No available video device' is the error (VizDoom then crashes its owner) and comes through."""
    run = a_run_dir(tmp_path)
    code = """
    import gymnasium, vecfast.envs
    env = gymnasium.make("vecfast/DoomBasic-v0")
    env.unwrapped.game.set_window_visible(True)
    env.reset(seed=0)
    """
    done = run_python(code, tmp_path, drop=("XDG_RUNTIME_DIR",), **{LOG_VAR: str(run / "env.log")})
    assert done.returncode != 0
    assert "No available video device" in done.stderr
    assert "XDG_RUNTIME_DIR" not in done.stderr and "/dev/dri" not in done.stderr
    assert "XDG_RUNTIME_DIR" in (run / "env.log").read_text()


def rendezvous_and_ddp() -> int:
    """A rank: join the group (c10d's rendezvous), wrap a model in DDP (which imports torch._dynamo), all-reduce."""
    rank = rank_from_environment()
    print(f"rank {rank.rank} says hello on stderr", file=sys.stderr, flush=True)
    init_process_group(rank, torch.device("cpu"))
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1))
        total = torch.ones(1)
        dist.all_reduce(total)
        return int(total.item()) + 0 * len(list(model.parameters()))
    finally:
        leave_process_group()


@pytest.mark.timeout(120)
def test_a_local_launch_keeps_c10d_chatter_in_the_log_and_leaves_nothing_in_tmpdir(tmp_path, monkeypatch, capfd):
    """In the private network no DNS answers, and c10d warns once per connection that it cannot name the
    peer: those lines go to the log; the ranks' own stderr comes through. Importing torch._dynamo makes
    $TMPDIR/torchinductor_<user> (vecfast's cache directory instead), and torch's launcher would make
    torchelastic_*: nothing is left there."""
    if not isolation_possible():
        pytest.skip("no private network here: c10d names its peers and says nothing")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    log = tmp_path / "c10d.log"
    monkeypatch.setenv("TMPDIR", str(tmpdir))  # the launcher's and the ranks'
    monkeypatch.setenv(LOG_VAR, str(log))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(VERBOSE_VAR, raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert launch_local(2, rendezvous_and_ddp) == 2
    err = capfd.readouterr().err
    assert "rank 0 says hello on stderr" in err and "rank 1 says hello on stderr" in err
    assert "c10d" not in err
    assert "[c10d] The hostname of the client socket cannot be retrieved" in log.read_text()
    assert sorted(p.name for p in tmpdir.iterdir()) == []
    assert (tmp_path / "cache" / "vecfast" / "torchinductor").is_dir()  # where inductor's cache went instead
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
