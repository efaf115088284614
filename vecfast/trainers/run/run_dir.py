"""A training run on disk: ``config.json``, metrics (JSONL and TensorBoard), checkpoints written atomically.

Layout::

    RUN_DIR/.lock                            held (flock) by the run writing the directory
    RUN_DIR/config.json                      algorithm, env, the full TrainConfig
    RUN_DIR/metrics.jsonl                    one JSON object per learner iteration
    RUN_DIR/events.out.tfevents.*            the same numbers for ``tensorboard --logdir RUN_DIR``
    RUN_DIR/videos/<steps>.mp4               episodes recorded while training (``video_every_env_steps``)
    RUN_DIR/wandb/, RUN_DIR/wandb_run_id     the W&B run's files and id (``with_wandb``)
    RUN_DIR/checkpoints/last_<steps>.pt      the newest ``keep`` checkpoints (<steps>: their ``env_steps``)
    RUN_DIR/checkpoints/best.pt              the one with the best mean episode return
    RUN_DIR/checkpoints/*.corrupt            unreadable checkpoints, moved aside by a load
    RUN_DIR/env.log                          what the programs the run started printed and the terminal
                                             was spared (VizDoom's network handshake, SDL, c10d's
                                             warnings; ``vecfast --verbose`` shows them instead;
                                             :mod:`vecfast.chatter`), a ``--- <source>`` line before
                                             each program's block

A checkpoint is written to a temporary file, flushed to disk and renamed over its name,
so a run killed mid-write leaves the previous checkpoint intact; loading moves aside
files that are unreadable all the same and takes the previous one.

Checkpoints hold tensors and plain data only (gymnasium spaces as :func:`space_to_data`
dicts) and are loaded with ``torch.load(weights_only=True)``: a crafted checkpoint cannot
run code. Checkpoints of vecfast before this format pickled gymnasium spaces; loading one
raises :class:`UnsafeCheckpointError`, and :func:`convert_legacy_checkpoint` rewrites one
(loading only gymnasium spaces and numpy data besides, still with ``weights_only=True``).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import secrets
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from filelock import FileLock, Timeout
from gymnasium import spaces

from vecfast.chatter import ENV_LOG
from vecfast.trainers.run.metric_sinks import MetricSink, TensorBoardEvents

_LAST = re.compile(r"^last_(\d+)\.pt$")
LOCK_FILE = ".lock"


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds objects beyond tensors and plain data: an old-format checkpoint, or a crafted file."""


class RunDirExistsError(FileExistsError):
    """A new run was pointed at a directory that holds a run already."""


class RunDirInUseError(RuntimeError):
    """A live run holds the directory's lock."""


def check_run_dir(path: str | os.PathLike, resume: bool = False) -> None:
    """Raise what :class:`RunDir` would, before anything starts: a new run needs a new or empty
    directory (:class:`RunDirExistsError`), and no live run may hold it (:class:`RunDirInUseError`)."""
    path = Path(path)
    if not path.is_dir():
        return
    if (path / LOCK_FILE).exists():
        _lock(path).release()
    if not resume:
        _check_empty(path)


def _check_empty(path: Path) -> None:
    if _holds_a_run(path):
        raise RunDirExistsError(
            f"{path} holds a run already: continue it (vecfast train --resume {path}, or train(..., resume=True)), "
            "or choose a new run directory"
        )


# What a run that failed before its first iteration leaves (a device it lacked, an env that did not start): with
# no checkpoint and no metrics, nothing in it can be resumed or lost, so a new run may take the directory.
_UNTRAINED_RUN_FILES = {LOCK_FILE, "config.json", "metrics.jsonl", "checkpoints", ENV_LOG}


def _holds_a_run(path: Path) -> bool:
    """Whether ``path`` holds anything but an untrained run's files: metrics, a checkpoint, or files of others."""
    if any(p.name not in _UNTRAINED_RUN_FILES for p in path.iterdir()):
        return True
    metrics = path / "metrics.jsonl"
    if metrics.exists() and metrics.stat().st_size > 0:
        return True
    checkpoints = path / "checkpoints"
    return checkpoints.is_dir() and any(not p.name.endswith(".tmp") for p in checkpoints.iterdir())


def default_run_dir(env_name: str, algo: str, suffix: str | None = None) -> Path:
    """``runs/<env>_<algo>_<suffix>``, by default ``<time>_<random>``: the random part keeps runs started in
    the same second apart (a distributed launch passes its run id, the same in every rank)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{env_name}_{algo}").strip("_")
    suffix = suffix or f"{time.strftime('%Y%m%d-%H%M%S')}_{secrets.token_hex(3)}"
    return Path("runs") / f"{safe}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', suffix)}"


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


class RunDir:
    """Writes one run's files; ``keep`` is how many of the latest checkpoints stay on disk.

    The directory is locked until :meth:`close`, so a second run on it fails at once instead
    of interleaving its metrics and checkpoints. A directory that holds a run already (metrics, a
    checkpoint, or files that are not a run's) is an error unless ``resume``: a new run would append
    to the old metrics and overwrite its config. One that failed before its first iteration holds none.

    Each record and video also goes to :attr:`sinks` (TensorBoard's events, and W&B where the run asks:
    :mod:`~vecfast.trainers.run.metric_sinks`). ``resumed_at``: the env steps of the checkpoint a resumed run
    starts from (TensorBoard drops what the previous session logged after it).
    """

    def __init__(
        self, path: str | os.PathLike, keep: int = 2, resumed_at: int | None = None, resume: bool = False
    ) -> None:
        self.path = Path(path)
        self.checkpoints = self.path / "checkpoints"
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = _lock(self.path)
        try:
            if not resume:
                _check_empty(self.path)
            self.checkpoints.mkdir(exist_ok=True)
            for tmp in [*self.path.glob(".*.tmp"), *self.checkpoints.glob(".*.tmp")]:
                tmp.unlink()  # left by a write that was killed: no run writes here but this one
            self._metrics = open(self.path / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        except BaseException:
            self._lock.release()
            raise
        self.keep = max(1, keep)
        self.resumed_at = resumed_at
        self.sinks: list[MetricSink] = [TensorBoardEvents(self.path, resumed_at)]

    def checkpoint_path(self, env_steps: int) -> Path:
        """The numbered checkpoint of ``env_steps``."""
        return self.checkpoints / f"last_{env_steps:012d}.pt"

    def write_config(self, config: dict[str, Any]) -> None:
        _atomic_write_text(self.path / "config.json", json.dumps(config, indent=2, default=_json_default))

    def log(self, metrics: dict[str, Any]) -> None:
        """Append ``metrics`` (which has ``env_steps``, the x axis of its numbers) and hand it to the sinks."""
        self._metrics.write(json.dumps(metrics, default=_json_default) + "\n")
        self._metrics.flush()
        for sink in self.sinks:
            sink.log(metrics)

    def add_video(self, path: Path, gif: bytes, size: tuple[int, int], env_steps: int) -> None:
        """An episode recorded at ``env_steps`` (``path``: its mp4 under ``videos/``), for the sinks."""
        for sink in self.sinks:
            sink.video(path, gif, size, env_steps)

    def save(self, state: dict[str, Any], numbered: bool = True, best: bool = False) -> Path:
        """Write ``state`` as the numbered checkpoint of its ``env_steps`` (unless not ``numbered``) and as
        ``best.pt`` if ``best``; drop old numbered ones. Returns the numbered path, else ``best.pt``'s.

        Only checkpoints older than this one are dropped: one written later by another
        timeline never costs the run the checkpoint it has just written.
        """
        env_steps = int(state["env_steps"])
        path = self.checkpoint_path(env_steps)
        if best:
            _atomic_torch_save(state, self.checkpoints / "best.pt")
        if not numbered:
            return self.checkpoints / "best.pt"
        _atomic_torch_save(state, path)
        older = [p for p in last_checkpoints(self.path) if _steps(p) < env_steps]
        for old in older[self.keep - 1 :]:
            old.unlink(missing_ok=True)
        return path

    def last_checkpoints(self) -> list[Path]:
        """Numbered checkpoints, newest first."""
        return last_checkpoints(self.path)

    def close(self) -> None:
        self._metrics.close()
        try:
            for sink in self.sinks:
                sink.close()
        finally:
            self._lock.release()


def _lock(path: Path) -> FileLock:
    """The run directory's lock, held; raises at once if another live run holds it. filelock's: an flock on
    Linux and macOS, a Windows lock there; the kernel drops it with a process however that process dies."""
    lock = FileLock(path / LOCK_FILE, preserve_lock_file=True)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunDirInUseError(
            f"{path} is in use by a live run; wait for it to end, or choose a new run directory"
        ) from None
    return lock


def _steps(path: Path) -> int:
    return int(_LAST.match(path.name).group(1))


def last_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """A run's numbered checkpoints, newest first."""
    checkpoints = Path(run_dir) / "checkpoints"
    found = [p for p in checkpoints.glob("last_*.pt") if _LAST.match(p.name)]
    return sorted(found, key=_steps, reverse=True)


def load_checkpoint(run_dir: str | os.PathLike, which: str = "last") -> dict[str, Any]:
    """The newest readable checkpoint of a run (``which="last"``) or its best one (``"best"``); given a
    checkpoint file instead of a run directory, that one.

    An unreadable checkpoint (a truncated file, a bad disk) is renamed ``*.corrupt``, with a
    warning, and the previous one is tried. One that holds more than tensors and plain data
    raises :class:`UnsafeCheckpointError` without running anything in it.
    """
    if Path(run_dir).is_file():
        return _load(Path(run_dir))
    checkpoints = Path(run_dir) / "checkpoints"
    if which == "best":
        candidates = [checkpoints / "best.pt"]
    elif which == "last":
        candidates = last_checkpoints(run_dir)
    else:
        raise ValueError(f"which must be 'last' or 'best', got {which!r}")
    errors = []
    for path in candidates:
        try:
            return _load(path)
        except UnsafeCheckpointError:
            raise
        except FileNotFoundError as e:  # dropped by a live run's rotation since the listing
            errors.append(f"{path.name}: {e}")
        except Exception as e:
            corrupt = path.with_name(path.name + ".corrupt")
            os.replace(path, corrupt)
            warnings.warn(f"unreadable checkpoint {path} ({e}) moved to {corrupt.name}", RuntimeWarning, stacklevel=2)
            errors.append(f"{path.name}: {e}")
    raise FileNotFoundError(f"no readable {which} checkpoint in {checkpoints}" + "".join(f"\n  {e}" for e in errors))


def _load(path: Path, allowed: list[Any] | None = None) -> dict[str, Any]:
    """``torch.load(weights_only=True)``, which also rebuilds the ``allowed`` classes and functions only."""
    try:
        with torch.serialization.safe_globals(allowed or []):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if not (str(e).startswith("Weights only load failed") and zipfile.is_zipfile(path)):
            raise  # not a torch.save archive at all: as corrupt as a truncated one
        raise UnsafeCheckpointError(
            f"{path} holds objects beyond tensors and plain data, so it was not loaded: a crafted file, or a "
            "checkpoint of an older vecfast (which pickled gymnasium spaces). Convert the latter once (it loads "
            'gymnasium spaces and numpy data, nothing else): python -c "from '
            f"vecfast.trainers.run.run_dir import convert_legacy_checkpoint; convert_legacy_checkpoint('{path}')\""
        ) from None


def _legacy_globals() -> list[Any]:
    """What an old checkpoint's pickled spaces need: gymnasium's space classes and numpy's arrays,
    dtypes, scalars and random generators (spaces pickle their ``np_random``); all of them only
    rebuild data."""
    import numpy.random._pickle as random_pickle
    from numpy.random import bit_generator

    multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # numpy 2 / 1
    dtypes = [getattr(np.dtypes, name) for name in dir(np.dtypes) if name.endswith("DType")]
    return [
        *(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict, spaces.Tuple),
        *(np.ndarray, np.dtype, *dtypes, multiarray._reconstruct, multiarray.scalar),
        *(random_pickle.__generator_ctor, random_pickle.__bit_generator_ctor, np.random.PCG64),
        *(bit_generator.SeedSequence, bit_generator.__pyx_unpickle_SeedSequence),
    ]


def convert_legacy_checkpoint(path: str | os.PathLike) -> None:
    """Rewrite an old-format checkpoint (pickled gymnasium spaces) as one that plain ``weights_only`` loads.

    Still loaded with ``weights_only=True``, allowing gymnasium's spaces and numpy's data types
    besides: a crafted file raises :class:`UnsafeCheckpointError` here too, without running code.
    """
    path = Path(path)
    state = _load(path, _legacy_globals())
    state.update({key: space_to_data(value) for key, value in state.items() if isinstance(value, spaces.Space)})
    state.update(metrics=plain_data(state.get("metrics", {})), best_return=float(state.get("best_return", -np.inf)))
    _atomic_torch_save(state, path)


def plain_data(value: Any) -> Any:
    """``value`` as JSON types (numpy scalars become numbers), which ``weights_only`` loading accepts."""
    return json.loads(json.dumps(value, default=_json_default))


def env_kwargs_data(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` as the plain data a run stores to rebuild its env (paths as strings, tuples as lists);
    a TypeError names a value that has none (an object or a function: give the env's id and plain values)."""
    if not isinstance(env_kwargs, dict) or not all(isinstance(key, str) for key in env_kwargs):
        raise TypeError(f"env_kwargs must be a dict with str keys, got {env_kwargs!r}")

    def plain(value: Any, where: str) -> Any:
        if value is None or isinstance(value, (bool, str, int, float)):
            return value
        if isinstance(value, np.generic) and np.ndim(value) == 0:
            return value.item()
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        if isinstance(value, (list, tuple)):
            return [plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            return {key: plain(item, f"{where}[{key!r}]") for key, item in value.items()}
        raise TypeError(
            f"env_kwargs {where}={value!r} is a {type(value).__name__}: a run stores its env arguments to rebuild "
            "the env (resume, evaluate), so they must be numbers, strings, paths, lists or dicts of them"
        )

    return {key: plain(value, key) for key, value in env_kwargs.items()}


def space_to_data(space: spaces.Space) -> dict[str, Any]:
    """A gymnasium space the trainers use as plain data; :func:`space_from_data` inverts it."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": _bound(space.low),
            "high": _bound(space.high),
            "shape": list(space.shape),
            "dtype": space.dtype.str,
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start), "dtype": space.dtype.str}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
            "dtype": space.dtype.str,
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {key: space_to_data(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_data(sub) for sub in space.spaces]}
    raise TypeError(f"cannot store a {type(space).__name__} space in a checkpoint")


def space_from_data(data: dict[str, Any]) -> spaces.Space:
    """The space that :func:`space_to_data` wrote."""
    kind = data["type"]
    if kind == "Box":
        low, high = (np.full(data["shape"], data[key], dtype=data["dtype"]) for key in ("low", "high"))
        return spaces.Box(low, high, dtype=data["dtype"])
    if kind == "Discrete":
        return spaces.Discrete(data["n"], start=data["start"], dtype=data["dtype"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(data["nvec"], start=data["start"], dtype=data["dtype"])
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return spaces.Dict({key: space_from_data(sub) for key, sub in data["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_data(sub) for sub in data["spaces"]])
    raise ValueError(f"unknown space type {kind!r} in a checkpoint")


def _bound(values: np.ndarray) -> Any:
    """A Box bound as one number when all its entries are equal (images: 0 and 255), else as nested lists."""
    flat = values.ravel()
    return flat[0].item() if flat.size and (flat == flat[0]).all() else values.tolist()


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
