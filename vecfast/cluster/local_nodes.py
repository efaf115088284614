"""A Ray cluster of several nodes on this machine, started as a user starts one (``ray start --head``, then
``ray start --address`` for each other node): for trying and testing the cluster path on one machine.

The nodes' processes are Ray's own daemons, not children of this process; :meth:`LocalNodes.stop` ends them
and their workers, and only them (``ray stop`` would end every Ray of this user on this machine, another
benchmark's or test's cluster with it): the daemons name the head's port on their command lines, and every worker
descends from one of them. A reaper process (this module run as a script) ends them too when the process that
started them dies without stopping them (SIGKILL, a crash): it waits for its stdin, a pipe from that process, to
close. A head started so requires Ray's auth token
(``RAY_AUTH_MODE=token``), which Ray reads when it is imported: a process joining it as a driver needs the variable
set before ``import ray``. Where this user has no token yet (a fresh machine), one is generated first, as
``ray.init`` does for a local cluster (``ray get-auth-token --generate``: ``~/.ray/auth_token``, kept if present).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from vecfast.cluster.connection import INLINE_REPLY_BYTES


class LocalNodes:
    """``num_nodes`` Ray nodes on this machine with ``num_cpus`` CPUs each; :attr:`address` is the head's.
    ``inline_bytes``: Ray's ``max_direct_call_object_size`` (:data:`vecfast.cluster.connection.INLINE_REPLY_BYTES`)."""

    def __init__(
        self, num_nodes: int = 2, num_cpus: float = 1, timeout: float = 120.0, inline_bytes: int = INLINE_REPLY_BYTES
    ) -> None:
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
        self.env["RAY_max_direct_call_object_size"] = str(inline_bytes)  # as a local Ray of vecfast's has it
        self.ray = str(Path(sys.executable).with_name("ray"))
        self.timeout = timeout
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = self._port = free.getsockname()[1]
        common = ["--num-cpus", f"{num_cpus:g}", "--disable-usage-stats"]
        self._run("get-auth-token", "--generate")
        # in a session of its own: a Ctrl-C to the terminal's process group does not end it before the cluster
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", __name__, str(port)], stdin=subprocess.PIPE, start_new_session=True
        )
        try:
            self._run("start", "--head", "--port", str(port), "--include-dashboard", "false", *common)
            from ray._private.services import get_node_ip_address

            self.address = f"{get_node_ip_address()}:{port}"
            for _ in range(num_nodes - 1):
                self._run("start", "--address", self.address, *common)
        except BaseException:
            self.stop()
            raise

    def _run(self, *args: str) -> None:
        done = subprocess.run([self.ray, *args], env=self.env, capture_output=True, text=True, timeout=self.timeout)
        if done.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")

    def stop(self) -> None:
        """End this cluster's processes, then its reaper."""
        end_cluster(self._port)
        if self._reaper.stdin is not None:
            self._reaper.stdin.close()
        self._reaper.wait()

    def __enter__(self) -> LocalNodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def end_cluster(port: int, grace: float = 3.0) -> None:
    """End the processes of the cluster whose head listens on ``port``, and return once they are gone: SIGTERM,
    then SIGKILL for what is left after ``grace`` seconds (Ray's GCS server outlives SIGTERM however long it is
    given: a longer grace only waits)."""
    named = re.compile(rf"[=:]{port}\b")
    daemons = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid != os.getpid() and named.search(" ".join(proc.info["cmdline"] or [])):
            daemons.append(proc)
    ours = {proc.pid: proc for proc in daemons}
    for proc in daemons:
        with contextlib.suppress(psutil.Error):
            ours.update({child.pid: child for child in proc.children(recursive=True)})
    for proc in ours.values():
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    left = psutil.wait_procs(list(ours.values()), timeout=grace)[1]
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=grace)


if __name__ == "__main__":  # the reaper: ends the cluster on argv[1]'s port once its owner's pipe closes
    sys.stdin.buffer.read()
    end_cluster(int(sys.argv[1]))
