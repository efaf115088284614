"""Where the ranks of a distributed run come from, and how they find each other.

A rank learns its place from its environment, as torch.distributed's launchers set it:
``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) or SLURM's
``srun`` (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; the address and port default to
127.0.0.1:29500 on one node and must be given for several). :func:`launch_local` starts N ranks on
this machine through torch's own elastic launcher (what ``torchrun --standalone`` runs).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.spawn import get_preparation_data, prepare
from typing import IO, Any

import torch
import torch.distributed as dist

from vecfast import chatter
from vecfast.network_isolation import (
    ENV_VAR,
    NetworkIsolationError,
    NetworkIsolationWarning,
    PrivateNetwork,
    isolation_requested,
)

RANK_NOTES_VAR = "VECFAST_RANK_NOTES"  # where a local launch's ranks leave their process ids and the errors they raise
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORT = "29500"
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)  # a rank that waits longer on the others gives up


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a distributed run."""

    rank: int
    world_size: int
    local_rank: int  # among the ranks on this machine: picks its GPU
    restarts: int = 0  # how many times the launcher restarted the run (torchrun --max-restarts)

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the run directory."""
        return self.rank == 0


def rank_from_environment(environ: dict[str, str] | None = None) -> RankInfo | None:
    """This process's rank as torchrun or SLURM set it; None outside a launcher."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return RankInfo(
            int(env["RANK"]),
            int(env["WORLD_SIZE"]),
            int(env.get("LOCAL_RANK", 0)),
            int(env.get("TORCHELASTIC_RESTART_COUNT", 0)),
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        return RankInfo(int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", 0)))
    return None


def init_process_group(info: RankInfo, device: torch.device) -> None:
    """Join the run's process group: NCCL for CUDA, gloo on CPU, rendezvous at MASTER_ADDR:MASTER_PORT.

    On one machine (a loopback master address) gloo also connects its ranks over loopback only.
    """
    if "MASTER_ADDR" not in os.environ:
        if int(os.environ.get("SLURM_NNODES", 1)) > 1:
            raise RuntimeError("a SLURM run over several nodes needs MASTER_ADDR (and MASTER_PORT) of rank 0's node")
        os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", DEFAULT_PORT)
    if os.environ["MASTER_ADDR"] in LOOPBACK:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    # torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE) and keeps it across its restarts: a
    # prefix per attempt keeps restarted ranks from reading the addresses of the ranks they replace
    # (with env:// they wait on them for ever). Otherwise rank 0 hosts it, as env:// would.
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        info.world_size,
        is_master=info.is_main and not agent_store,
        timeout=COLLECTIVE_TIMEOUT,
    )
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend,
        store=dist.PrefixStore(f"vecfast/attempt_{info.restarts}/", store),
        rank=info.rank,
        world_size=info.world_size,
        timeout=COLLECTIVE_TIMEOUT,
    )


def leave_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def launch_local(
    num_processes: int,
    fn: Callable[..., Any],
    *args: Any,
    run_id: str | None = None,
    network_isolation: bool | None = None,
) -> Any:
    """Run ``fn(*args)`` in ``num_processes`` ranks on this machine through torch's elastic launcher;
    rank 0's return value.

    torch's rendezvous store listens on every address of the host (it has no option to bind one), so
    the launcher and its ranks run in a private network namespace whose only interface is loopback
    (:class:`~vecfast.network_isolation.PrivateNetwork`): nothing else can reach the run.
    Where no namespace can be made (or ``network_isolation=False``, or the environment variable
    ``VECFAST_NETWORK_ISOLATION=0``) they run in the host's network with a warning;
    ``network_isolation=True`` raises instead.

    ``run_id`` (``TORCHELASTIC_RUN_ID`` in the ranks) defaults to a new one. ``fn`` and ``args``
    are pickled to the ranks, which start with ``spawn``: module-level functions and classes, and
    the caller's main module is imported there as multiprocessing does (guard its entry point with
    ``if __name__ == "__main__"``). Ctrl-C reaches the ranks (they share the terminal's process
    group) and SIGTERM to this process is passed on to them: they stop as they would alone, so this returns rank
    0's result.

    Quiet, and nothing left in ``$TMPDIR``: in the private network, where no DNS answers, c10d
    warns on stderr that it cannot name each peer ("The hostname of the client socket cannot
    be retrieved"); those lines go to the run's log (:mod:`vecfast.chatter`; ``--verbose``
    keeps them on the terminal) and every other line of the ranks' stderr comes through.
    torch's elastic launcher writes no log directory (``torchelastic_*``), and the cache
    directory that importing ``torch._dynamo`` (DDP does) creates is vecfast's own in the
    user's cache directory, not ``$TMPDIR/torchinductor_<user>`` (:func:`private_inductor_cache`).
    """
    config = _local_config(num_processes, run_id or uuid.uuid4().hex)
    with private_inductor_cache(), _rank_notes():
        if isolation_requested(network_isolation):
            try:
                network = PrivateNetwork(sys.executable)
            except NetworkIsolationError as exc:
                if network_isolation:
                    raise
                warnings.warn(
                    f"the ranks run in the host's network, where torch's rendezvous store listens on every address "
                    f"({exc}); network_isolation=False or {ENV_VAR}=0 says you want that",
                    NetworkIsolationWarning,
                    stacklevel=2,
                )
            else:
                try:
                    return _launch_in(network, config, fn, args)
                finally:
                    network.close()
        with _stops_to_the_ranks():
            return _launch(config, fn, args)


@contextlib.contextmanager
def _rank_notes() -> Iterator[None]:
    """:data:`RANK_NOTES_VAR` for the launcher and the ranks: a temporary directory, removed afterwards."""
    errors = tempfile.mkdtemp(prefix="vecfast-rank-notes-")
    previous = os.environ.get(RANK_NOTES_VAR)
    os.environ[RANK_NOTES_VAR] = errors
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(RANK_NOTES_VAR, None)
        else:
            os.environ[RANK_NOTES_VAR] = previous
        shutil.rmtree(errors, ignore_errors=True)


@contextlib.contextmanager
def private_inductor_cache() -> Iterator[None]:
    """``TORCHINDUCTOR_CACHE_DIR`` for the ranks (and ONNX export): vecfast's own, in the user's cache directory,
    not ``$TMPDIR``.

    Importing ``torch._dynamo`` (``DistributedDataParallel`` and ``torch.export`` do) creates inductor's cache
    directory, by default ``$TMPDIR/torchinductor_<user>``, and nothing removes it. vecfast
    compiles nothing, so the ranks get ``$XDG_CACHE_HOME/vecfast/torchinductor`` (made once,
    and empty); where that cannot be made, a temporary directory removed after the ranks.
    A directory the user named stays.
    """
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        yield
        return
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cache, temporary = os.path.join(cache_home, "vecfast", "torchinductor"), False
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError:
        cache, temporary = tempfile.mkdtemp(prefix="vecfast-inductor-"), True
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # the launcher and the ranks inherit it
    try:
        yield
    finally:
        if os.environ.get("TORCHINDUCTOR_CACHE_DIR") == cache:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        if temporary:
            shutil.rmtree(cache, ignore_errors=True)


def _local_config(num_processes: int, run_id: str) -> Any:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        logs_specs=DefaultLogsSpecs(log_dir=os.devnull),  # the ranks' output goes to ours; no log dir left in $TMPDIR
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=num_processes,
        run_id=run_id,
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        local_addr="127.0.0.1",
        signals_to_handle="SIGTERM,SIGHUP,SIGQUIT",  # not SIGINT: Ctrl-C is the ranks' to handle
    )


def _launch(config: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Rank 0's result, or the error of the first rank that failed, raised as its own type (torch's launcher
    raises a ChildFailedError that holds only its text)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    # the ranks unpickle _run_rank by its module's name; the launcher process runs this module as __main__
    from vecfast.trainers.run.launch import _run_rank as run_rank

    try:
        return pickle.loads(elastic_launch(config, run_rank)(fn, *args)[0])
    except ChildFailedError as failed:
        raise _rank_error(failed, config.nproc_per_node) from None


def _run_rank(fn: Callable[..., Any], *args: Any) -> bytes:
    """``fn(*args)`` in a rank, which leaves its process id in :data:`RANK_NOTES_VAR`'s directory (the caller passes
    SIGTERM on to it), and an error it raises, pickled.

    The result comes back as plain pickled bytes: torch's queue would send a tensor's storage as a file
    descriptor through a Unix socket bound under TMPDIR, which a long TMPDIR makes too long to bind."""
    notes = os.environ.get(RANK_NOTES_VAR)
    if notes is not None and os.path.isdir(notes):
        with open(os.path.join(notes, f"rank{os.environ.get('RANK', '0')}.pid"), "w") as f:
            f.write(str(os.getpid()))
    try:
        return pickle.dumps(fn(*args))
    except BaseException as error:
        _leave_error(error)
        raise


def _leave_error(error: BaseException) -> None:
    errors = os.environ.get(RANK_NOTES_VAR)
    if errors is None or not os.path.isdir(errors):
        return
    try:
        data = pickle.dumps(error)
        pickle.loads(data)  # an exception whose class needs other arguments than its args does not come back
    except Exception:
        data = pickle.dumps(RuntimeError(f"{type(error).__qualname__}: {error}"))
    with open(os.path.join(errors, f"rank{os.environ.get('RANK', '0')}.pickle"), "wb") as f:
        f.write(data)


def _rank_error(failed: Any, world_size: int) -> BaseException:
    """The error of the first failed rank that left one (the others were stopped because of it), noted with its
    rank; else a RuntimeError with the launcher's report (a rank killed by a signal leaves none)."""
    errors = os.environ.get(RANK_NOTES_VAR)
    for rank in sorted(failed.failures, key=lambda r: failed.failures[r].timestamp):
        path = os.path.join(errors, f"rank{rank}.pickle") if errors else None
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                error = pickle.load(f)
            error.add_note(f"raised in rank {rank} of {world_size} (its traceback is above)")
            return error
    return RuntimeError(str(failed))


@contextlib.contextmanager
def _stops_to_the_ranks() -> Iterator[None]:
    """The caller leaves stopping to the ranks of its launch: it ignores Ctrl-C, which they get too (they share
    the terminal's process group), and passes SIGTERM on to them, so that either stops them after their iteration,
    saved, as it stops one process, and the launch returns rank 0's result."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def sigterm_to_the_ranks(signum: int, frame: Any) -> None:
        for pid in _rank_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, sigterm_to_the_ranks)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


def _rank_pids() -> list[int]:
    """The process ids the ranks of this process's launch left in :data:`RANK_NOTES_VAR`'s directory."""
    notes = os.environ.get(RANK_NOTES_VAR)
    if notes is None or not os.path.isdir(notes):
        return []
    pids = []
    for name in os.listdir(notes):
        if name.endswith(".pid"):
            with contextlib.suppress(OSError, ValueError), open(os.path.join(notes, name)) as f:
                pids.append(int(f.read()))
    return pids


def _launch_in(network: PrivateNetwork, config: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run the elastic launcher in a process inside ``network`` (this module as a script); its result comes
    back pickled through a pipe, from this process's own child."""
    read_end, write_end = os.pipe()
    command = [network.launcher, "-m", "vecfast.trainers.run.launch", str(write_end)]
    stderr = None if chatter.verbose() else subprocess.PIPE  # the ranks' stderr, through _StderrFilter
    with _stops_to_the_ranks():
        try:
            launcher = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=stderr, pass_fds=[write_end])
        finally:
            os.close(write_end)
        errors = _StderrFilter(launcher.stderr) if launcher.stderr is not None else None
        with os.fdopen(read_end, "rb") as results:
            assert launcher.stdin is not None
            # what multiprocessing's spawn sends: the caller's sys.path and main module, so fn unpickles there
            preparation = {k: v for k, v in get_preparation_data("vecfast-launch").items() if k != "authkey"}
            pickle.dump(preparation, launcher.stdin)  # read first: fn unpickles only after it is applied
            pickle.dump((config, fn, args), launcher.stdin)
            launcher.stdin.close()
            reply = results.read()
        code = launcher.wait()
        if errors is not None:
            errors.finish()
    if not reply:
        raise RuntimeError(f"the launcher of the ranks exited with {code} and no result")
    ok, value = pickle.loads(reply)
    if not ok:
        raise value
    return value


class _StderrFilter:
    """Passes the ranks' stderr on to ours, line by line, but for c10d's chatter, which goes to the run's log.

    The chatter is held back until the launch is over: a log written sooner would make a new
    run directory look taken (:func:`vecfast.chatter.write_log` also waits for the run's config).
    """

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self.chatter: list[str] = []
        self._thread = threading.Thread(target=self._forward, name="vecfast-rank-stderr", daemon=True)
        self._thread.start()

    def _forward(self) -> None:
        with self._pipe:
            for raw in iter(self._pipe.readline, b""):
                line = raw.decode(errors="replace")
                if chatter.C10D_CHATTER.match(line):
                    self.chatter.append(line)
                    continue
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(line)
                    sys.stderr.flush()

    def finish(self, timeout: float = 5.0) -> None:
        """After the launcher exited: the rest of the output (processes of the ranks may hold the pipe a moment)."""
        self._thread.join(timeout)
        chatter.write_log("".join(self.chatter), "torch.distributed (c10d)")


def _launcher_main(result_fd: int) -> None:
    """The launcher process: inside the private network, with the caller's main module loaded."""
    from vecfast.vector.process_cleanup import watch_owner

    watch_owner(os.getppid(), when_gone=lambda: os._exit(1))  # the ranks watch this process in turn
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    prepare(pickle.load(sys.stdin.buffer))
    config, fn, args = pickle.load(sys.stdin.buffer)
    try:
        reply = (True, _launch(config, fn, args))
    except Exception as error:  # raised again in the caller
        reply = (False, error)
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(reply, out)


if __name__ == "__main__":
    _launcher_main(int(sys.argv[1]))
