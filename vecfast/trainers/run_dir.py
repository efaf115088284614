"""A training run on disk: ``config.json``, metrics (JSONL and TensorBoard), checkpoints written atomically.

Layout::

    RUN_DIR/config.json                      algorithm, env, the full TrainConfig
    RUN_DIR/metrics.jsonl                    one JSON object per learner iteration
    RUN_DIR/events.out.tfevents.*            the same numbers for ``tensorboard --logdir RUN_DIR``
    RUN_DIR/checkpoints/last_<steps>.pt      the newest ``keep`` checkpoints
    RUN_DIR/checkpoints/best.pt              the one with the best mean episode return

A checkpoint is written to a temporary file, flushed to disk and renamed over its name,
so a run killed mid-write leaves the previous checkpoint intact; loading skips files
that are unreadable all the same.
"""

from __future__ import annotations

import json
import numbers
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter

_LAST = re.compile(r"^last_(\d+)\.pt$")


def default_run_dir(env_name: str, algo: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", env_name).strip("_")
    return Path("runs") / f"{safe}_{algo}_{time.strftime('%Y%m%d-%H%M%S')}"


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


class RunDir:
    """Writes one run's files; ``keep`` is how many of the latest checkpoints stay on disk.

    ``resumed_at``: the env steps of the checkpoint a resumed run starts from. TensorBoard
    then drops what the previous session logged after that checkpoint (purge_step), so
    the curves continue from it without a doubled stretch.
    """

    def __init__(self, path: str | os.PathLike, keep: int = 2, resumed_at: int | None = None) -> None:
        self.path = Path(path)
        self.checkpoints = self.path / "checkpoints"
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        self.keep = max(1, keep)
        self._metrics = open(self.path / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._resumed_at = resumed_at
        self._events: SummaryWriter | None = None  # opened by the first log(): reading a run writes no event file

    def write_config(self, config: dict[str, Any]) -> None:
        _atomic_write_text(self.path / "config.json", json.dumps(config, indent=2, default=_json_default))

    def log(self, metrics: dict[str, Any]) -> None:
        """Append ``metrics`` (which has ``env_steps``, the x axis of its numbers in TensorBoard); flush both."""
        self._metrics.write(json.dumps(metrics, default=_json_default) + "\n")
        self._metrics.flush()
        if self._events is None:
            purge_step = None if self._resumed_at is None else self._resumed_at + 1
            self._events = SummaryWriter(str(self.path), purge_step=purge_step)
        # one event for all the numbers: add_scalar per number costs ~100 us each, in the learner's thread
        values = [
            Summary.Value(tag=key, simple_value=float(value))
            for key, value in metrics.items()
            if key != "env_steps" and isinstance(value, numbers.Real)
        ]
        self._events.file_writer.add_summary(Summary(value=values), int(metrics["env_steps"]))
        self._events.flush()  # a live `tensorboard --logdir` sees every iteration

    def save(self, state: dict[str, Any], env_steps: int, best: bool = False) -> Path:
        """Write ``state`` as the newest checkpoint (and as ``best.pt`` if ``best``); drop old ones."""
        path = self.checkpoints / f"last_{env_steps:012d}.pt"
        _atomic_torch_save(state, path)
        if best:
            _atomic_torch_save(state, self.checkpoints / "best.pt")
        for old in self.last_checkpoints()[self.keep :]:
            old.unlink(missing_ok=True)
        return path

    def last_checkpoints(self) -> list[Path]:
        """Numbered checkpoints, newest first."""
        found = [p for p in self.checkpoints.iterdir() if _LAST.match(p.name)]
        return sorted(found, key=lambda p: int(_LAST.match(p.name).group(1)), reverse=True)

    def close(self) -> None:
        self._metrics.close()
        if self._events is not None:
            self._events.close()


def load_checkpoint(run_dir: str | os.PathLike, which: str = "last") -> dict[str, Any]:
    """The newest readable checkpoint of a run (``which="last"``) or its best one (``"best"``)."""
    checkpoints = Path(run_dir) / "checkpoints"
    if which == "best":
        candidates = [checkpoints / "best.pt"]
    elif which == "last":
        found = [p for p in checkpoints.glob("last_*.pt") if _LAST.match(p.name)]
        candidates = sorted(found, key=lambda p: int(_LAST.match(p.name).group(1)), reverse=True)
    else:
        raise ValueError(f"which must be 'last' or 'best', got {which!r}")
    errors = []
    for path in candidates:
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except Exception as e:  # a truncated file from a killed run: try the previous one
            errors.append(f"{path.name}: {e}")
    raise FileNotFoundError(f"no readable {which} checkpoint in {checkpoints}" + "".join(f"\n  {e}" for e in errors))


def _atomic_write(path: Path, write: Callable[[IO], None], mode: str) -> None:
    """``write`` into a temporary file next to ``path``, flush it to disk, rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _atomic_torch_save(state: dict[str, Any], path: Path) -> None:
    _atomic_write(path, lambda f: torch.save(state, f), "wb")


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write(path, lambda f: f.write(text), "w")
