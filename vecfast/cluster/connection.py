"""The Ray cluster a run samples on: joined (``"auto"``, a head node's address) or started on this machine
(``"local"``, in a temporary directory of its own that goes with it), and left as it was found.

A Ray that vecfast starts opens what Ray cannot do without (its GCS, the raylet, the object manager, one port per
worker process) and nothing more: no dashboard, no client server, no metrics export. Ray binds those to the node's
address, not to loopback (it resolves ``127.0.0.1`` to the node's address itself); Ray 2.60 and later require a
token on every connection by default (``RAY_AUTH_MODE``). A Ray cluster still belongs on a private network.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from types import ModuleType

from vecfast.extras import require

LOCAL = "local"
# A sampler's reply (half its envs' observations) travels inside the call's reply up to this size, rather than
# through Ray's object store (its default is 100 KiB): DoomBasic's 110-KiB replies sample 1.6-1.9x faster so on
# this project's 2-core host (benchmarks/ray_sampling.py). A cluster that vecfast joins keeps its own setting: start
# its nodes with RAY_max_direct_call_object_size=8388608 for the same.
INLINE_REPLY_BYTES = 8 * 1024 * 1024


class RayConnection:
    """``ray.init`` for ``address`` unless this process is connected already (then the caller's connection is
    used and left alone); :meth:`close` disconnects, and stops a Ray that this connection started."""

    def __init__(self, address: str) -> None:
        self.ray: ModuleType = require("ray", "sampling on a Ray cluster")
        self.owned = not self.ray.is_initialized()
        self.temp_dir: str | None = None  # of a Ray this connection started
        if not self.owned:
            return
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING, "configure_logging": True}
        if address == LOCAL:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage reports from a Ray vecfast starts
            self.temp_dir = tempfile.mkdtemp(prefix="vecfast-ray-", dir=_short_temp_base())
            config = {"max_direct_call_object_size": INLINE_REPLY_BYTES}
            self.ray.init(
                address=LOCAL, include_dashboard=False, _temp_dir=self.temp_dir, _system_config=config, **quiet
            )
        else:
            self.ray.init(address=address, **quiet)

    def close(self) -> None:
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
            self.owned = False
        if self.temp_dir is not None:  # its sessions' logs and sockets: nothing of a Ray vecfast started stays
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


def _short_temp_base() -> str:
    """The temporary directory, unless Ray's socket paths under it would pass the 107 bytes a Unix socket's path
    may have (a session's ``.../session_<time>_<pid>/sockets/plasma_store`` is ~85 of them): then ``/tmp``."""
    base = tempfile.gettempdir()
    return base if len(base) <= 20 else "/tmp"
