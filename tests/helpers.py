"""Comparison and process helpers shared by the tests."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import psutil
from gymnasium.vector import AutoresetMode, VectorEnv

# ---------------------------------------------------------------------------- comparisons


def assert_tree_equal(actual: Any, expected: Any, path: str = "") -> None:
    """Assert two nested dict/tuple/list/array/scalar structures are bit-identical.

    Arrays must agree in type, dtype, shape and every element (object arrays are
    compared element by element); dict keys must match exactly; scalars must have the
    same type and value.
    """
    where = path or "<root>"
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected a dict, got {type(actual).__name__}"
        assert set(actual) == set(expected), f"{where}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_tree_equal(actual[key], expected[key], f"{path}[{key!r}]")
        return
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), f"{where}: type {type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_tree_equal(a, e, f"{path}[{i}]")
        return
    assert type(actual) is type(expected), f"{where}: type {type(actual)} != {type(expected)} ({actual!r})"
    if isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        if expected.dtype == object:
            for index in np.ndindex(expected.shape):
                assert_tree_equal(actual[index], expected[index], f"{path}{list(index)}")
        else:
            assert np.array_equal(actual, expected, equal_nan=expected.dtype.kind in "fc"), (
                f"{where}: values differ\n{actual!r}\n!=\n{expected!r}"
            )
        return
    if isinstance(expected, float) and np.isnan(expected):
        assert np.isnan(actual), f"{where}: {actual!r} != nan"
        return
    assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_step_equal(actual: tuple, expected: tuple, what: str) -> None:
    """Compare two ``(obs, reward, terminated, truncated, info)`` step results."""
    names = ("obs", "reward", "terminated", "truncated", "info")
    assert len(actual) == len(expected) == 5
    for name, a, e in zip(names, actual, expected, strict=True):
        assert_tree_equal(a, e, f"{what}.{name}")


def tree_leaves(tree: Any) -> list[np.ndarray]:
    if isinstance(tree, dict):
        return [leaf for key in tree for leaf in tree_leaves(tree[key])]
    if isinstance(tree, tuple):
        return [leaf for part in tree for leaf in tree_leaves(part)]
    return [tree]


def tree_row(tree: Any, row: int) -> Any:
    """Row ``row`` of every array of a batched (nested) observation."""
    if isinstance(tree, dict):
        return {key: tree_row(value, row) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_row(part, row) for part in tree)
    return tree[row]


def info_row(infos: dict[str, Any], row: int, skip: Iterable[str] = ("env_id",)) -> dict[str, Any]:
    """The single-env info of batch position ``row`` from gymnasium's vector infos.

    Keys whose ``_key`` mask is False at ``row`` are left out, so the result can be
    compared with the info of another vector env at another batch position.
    """
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key in skip or (key.startswith("_") and key[1:] in infos):
            continue
        mask = infos.get(f"_{key}")
        assert mask is not None, f"info key {key!r} has no mask '_{key}'"
        if not mask[row]:
            continue
        out[key] = info_row(value, row, ()) if isinstance(value, dict) else value[row]
    return out


# ---------------------------------------------------------------------------- lockstep runs

StepCheck = Callable[[tuple, tuple, str], None]


def run_lockstep(
    expected: VectorEnv,
    actual: VectorEnv,
    steps: int,
    seed: int,
    mode: AutoresetMode,
    check: StepCheck = assert_step_equal,
    check_reset: StepCheck = assert_tree_equal,
) -> Counter:
    """Step both with the same seeds and actions, checking steps with ``check``, resets with ``check_reset``.

    In DISABLED mode finished envs are reset with ``reset_mask``, seeded and unseeded
    by turns. Returns counts of episode ends, SAME_STEP final observations, partial
    resets and steps with infos, so callers can assert that the boundaries were exercised.
    """
    check_reset(actual.reset(seed=seed), expected.reset(seed=seed), "reset")
    expected.action_space.seed(seed)
    seen: Counter = Counter()
    for t in range(steps):
        actions = expected.action_space.sample()
        want = expected.step(copy.deepcopy(actions))
        got = actual.step(copy.deepcopy(actions))
        check(got, want, f"step {t}")
        done = want[2] | want[3]
        seen["terminated"] += int(want[2].sum())
        seen["truncated"] += int(want[3].sum())
        seen["final_obs"] += int(want[4].get("_final_obs", np.zeros(1, bool)).sum())
        seen["infos"] += bool(want[4])
        if mode == AutoresetMode.DISABLED and done.any():
            reset_seed = None if t % 2 else seed + 1000 + t
            want_reset = expected.reset(seed=reset_seed, options={"reset_mask": done.copy()})
            got_reset = actual.reset(seed=reset_seed, options={"reset_mask": done.copy()})
            check_reset(got_reset, want_reset, f"partial reset after step {t}")
            seen["partial_resets"] += 1
    return seen


def assert_boundaries_seen(seen: Counter, mode: AutoresetMode) -> None:
    """The run crossed episode ends (both kinds) and the mode's autoreset path."""
    assert seen["terminated"] > 0 and seen["truncated"] > 0, seen
    if mode == AutoresetMode.SAME_STEP:
        assert seen["final_obs"] > 0, seen
    if mode == AutoresetMode.DISABLED:
        assert seen["partial_resets"] > 0, seen


# ---------------------------------------------------------------------------- processes


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Live descendants of ``pid`` (default: this process); exited ones not yet reaped (zombies) are left out, and
    so is multiprocessing's resource tracker: Python's helper, one per interpreter (spawn and shared_memory start
    it), which lives as long as its owner and unlinks what the owner's processes left."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [child for child in children if not is_gone(child) and not _is_resource_tracker(child)]


def _is_resource_tracker(proc: psutil.Process) -> bool:
    try:
        return "multiprocessing.resource_tracker" in " ".join(proc.cmdline())
    except psutil.Error:
        return False


def is_gone(proc: psutil.Process) -> bool:
    """True once ``proc`` has exited (a zombie counts as exited)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process in ``procs`` has exited; return those still alive."""
    procs = list(procs)
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in procs if not is_gone(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def kill_all(procs: Iterable[psutil.Process]) -> None:
    """SIGKILL the given processes (psutil refuses if a pid was reused) and reap children."""
    procs = [p for p in procs if not is_gone(p)]  # zombies are dead already; waiting on them is slow
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    wait_gone(procs, timeout=3)


def describe(procs: Iterable[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            out.append(f"{proc.pid} <gone>")
    return out


# ---------------------------------------------------------------------------- /dev/shm

SHM_DIR = "/dev/shm"
SHM_PATTERN = re.compile(r"ViZDoom|vecfast|psm_|wnsm_")
VIZDOOM_SHM = re.compile(r"ViZDoom(?:SM|MQCtr|MQDoom)(.+)")  # group 1: the game's instance id


def shm_entries() -> set[str]:
    """Names in /dev/shm that vecfast, multiprocessing or VizDoom could leave behind."""
    try:
        return {name for name in os.listdir(SHM_DIR) if SHM_PATTERN.search(name)}
    except FileNotFoundError:
        return set()


def vizdoom_instance_id(proc: psutil.Process) -> str | None:
    """The ``+viz_instance_id`` of a VizDoom game process (it names its /dev/shm entries)."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return None
    if "+viz_instance_id" in cmd:
        i = cmd.index("+viz_instance_id")
        return cmd[i + 1] if i + 1 < len(cmd) else None
    return None


def shm_files_used_by(procs: Iterable[psutil.Process]) -> set[str]:
    """Matching /dev/shm names that ``procs`` map or hold open (or that VizDoom names after them)."""
    names: set[str] = set()
    for proc in procs:
        instance = vizdoom_instance_id(proc)
        if instance is not None:
            names.update(f"ViZDoom{kind}{instance}" for kind in ("SM", "MQCtr", "MQDoom"))
        try:
            paths = [m.path for m in proc.memory_maps(grouped=False)]
            paths += [f.path for f in proc.open_files()]
        except psutil.Error:
            continue
        for path in paths:
            path = path.removesuffix(" (deleted)")
            if path.startswith(SHM_DIR + "/"):
                name = path[len(SHM_DIR) + 1 :]
                if SHM_PATTERN.search(name):
                    names.add(name)
    return names


def vizdoom_shm_left(before: set[str], settle: float = 1.0) -> set[str]:
    """VizDoom's entries in /dev/shm made since ``before`` whose game no longer runs.

    Other work on this machine may run VizDoom meanwhile: entries of games that run are
    theirs. A game that has made its message queues but not yet started its process
    looks like a leak for a moment, so /dev/shm is read twice, ``settle`` seconds apart.
    """

    def left() -> set[str]:
        running = {vizdoom_instance_id(p) for p in psutil.process_iter() if _name(p) == "vizdoom"}
        new = {VIZDOOM_SHM.fullmatch(name) for name in shm_entries() - before}
        return {m.group(0) for m in new if m and m.group(1) not in running}

    first = left()
    if not first:
        return first
    time.sleep(settle)
    return first & left()


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return ""


def unlink_shm(names: Iterable[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            os.unlink(os.path.join(SHM_DIR, name))


# ---------------------------------------------------------------------------- videos


def decoded(path: str | os.PathLike) -> tuple[dict, list[np.ndarray]]:
    """A video's stream metadata (codec, pix_fmt, fps, size) and its frames, as ffmpeg decodes them."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    return meta, [np.frombuffer(f, np.uint8).reshape(height, width, 3) for f in reader]


# ---------------------------------------------------------------------------- W&B's offline runs


def wandb_records(run_file: str | os.PathLike) -> list[Any]:
    """The protobuf records of an offline W&B run (``run-<id>.wandb``): its file is LevelDB's log format (32 KiB
    blocks of records, each a 7-byte header of CRC, length and type: full, or first/middle/last of a split one)
    after W&B's 7-byte header."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data = open(run_file, "rb").read()  # noqa: SIM115 (read at once)
    assert data[:4] == b":W&B", f"{run_file} is not a W&B run file"
    records, pending, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


# ---------------------------------------------------------------------------- installs


def distributions_of(requirement: str, seen: set[str] | None = None) -> set[str]:
    """The installed distributions ``requirement`` (``"vecfast[all]"``) brings, its dependencies' included,
    normalised names; markers evaluated for this interpreter, each distribution's extras as it asks for them."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen = set() if seen is None else seen
    req = Requirement(requirement)
    name = canonicalize_name(req.name)
    for extra in [""] if not req.extras else sorted(req.extras):
        key = f"{name}[{extra}]"
        if key in seen:
            continue
        seen.add(key)
        for dependency in importlib.metadata.requires(req.name) or []:
            dep = Requirement(dependency)
            if dep.marker is None or dep.marker.evaluate({"extra": extra}):
                with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                    distributions_of(str(dep).split(";")[0], seen)
        if extra:  # the distribution itself, without extras, comes with any of its extras
            distributions_of(req.name, seen)
    return {key.partition("[")[0] for key in seen}


def without_modules_outside(requirement: str, where: str | os.PathLike) -> dict[str, str]:
    """Environment variables under which Python (and the processes it spawns) cannot import any module that
    ``requirement`` does not install: as in a venv with ``pip install requirement`` only (``vecfast[all]``
    without the dev and benchmark tools). Writes a ``sitecustomize.py`` into the folder ``where``."""
    import importlib.metadata

    from packaging.utils import canonicalize_name

    keep = distributions_of(requirement) | {"pip", "setuptools"}
    hidden = sorted(
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if not {canonicalize_name(d) for d in dists} & keep and module.isidentifier()
    )
    with open(os.path.join(where, "sitecustomize.py"), "w") as file:
        file.write(f"import sys\nfor name in {hidden!r}:\n    sys.modules[name] = None\n")
    path = os.pathsep.join([str(where), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path}
