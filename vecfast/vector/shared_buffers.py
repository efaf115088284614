"""Batched arrays for any gymnasium space, laid out in one shared-memory arena.

The owner and every worker map the same anonymous memory file (``memfd``), so
observations, actions, rewards and flags are written in place and never pickled.
A memfd has no name in ``/dev/shm``: it disappears with the last process that maps
it, however that process dies, so a killed run cannot leak shared memory.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

_ALIGN = 64  # cache-line alignment keeps workers from sharing lines of different arrays

_LEAF_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def check_supported_space(space: spaces.Space, what: str) -> None:
    """Raise a clear error for spaces that cannot live in fixed-size shared memory."""
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            check_supported_space(sub, f"{what}[{key!r}]")
    elif isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            check_supported_space(sub, f"{what}[{i}]")
    elif not isinstance(space, _LEAF_SPACES):
        raise TypeError(
            f"{what} is {space}: shared memory needs fixed-size spaces "
            "(Box, Discrete, MultiDiscrete, MultiBinary, nested in Dict/Tuple)."
        )


@dataclass(frozen=True)
class ArraySpec:
    """Where one array lives in the arena."""

    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass
class ArenaLayout:
    """Offsets of every named array; picklable so workers rebuild identical views."""

    specs: dict[str, Any] = field(default_factory=dict)  # name -> ArraySpec tree
    size: int = 0

    def add_array(self, shape: tuple[int, ...], dtype: Any) -> ArraySpec:
        dtype = np.dtype(dtype)
        spec = ArraySpec(self.size, tuple(int(s) for s in shape), dtype)
        nbytes = int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
        self.size += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
        return spec

    def add(self, name: str, shape: tuple[int, ...], dtype: Any) -> None:
        self.specs[name] = self.add_array(shape, dtype)

    def add_space(self, name: str, single_space: spaces.Space, n: int) -> None:
        """Reserve the batched arrays of ``n`` copies of ``single_space``."""
        self.specs[name] = self._space_tree(batch_space(single_space, n))

    def _space_tree(self, space: spaces.Space) -> Any:
        if isinstance(space, spaces.Dict):
            return {k: self._space_tree(s) for k, s in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            return tuple(self._space_tree(s) for s in space.spaces)
        return self.add_array(space.shape, space.dtype)


class SharedArena:
    """An anonymous shared mapping; pass ``fd`` to map one created elsewhere."""

    def __init__(self, layout: ArenaLayout, fd: int | None = None) -> None:
        self.layout = layout
        if fd is None:
            fd = os.memfd_create("vecfast", os.MFD_CLOEXEC)
            os.ftruncate(fd, max(layout.size, 1))
        self.fd = fd
        self._mmap = mmap.mmap(fd, max(layout.size, 1))

    def views(self) -> dict[str, Any]:
        """numpy views of every named array (nested dict/tuple for spaces)."""
        return {name: self._view_tree(spec) for name, spec in self.layout.specs.items()}

    def _view_tree(self, spec: Any) -> Any:
        if isinstance(spec, dict):
            return {k: self._view_tree(s) for k, s in spec.items()}
        if isinstance(spec, tuple):
            return tuple(self._view_tree(s) for s in spec)
        return np.ndarray(spec.shape, spec.dtype, buffer=self._mmap, offset=spec.offset)

    def close_fd(self) -> None:
        """Drop the file descriptor; the mapping (and views) stay valid."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def make_row_writer(tree: Any) -> Callable[[int, Any], None]:
    """``write(i, value)`` stores one env's value into row ``i`` of the batched arrays."""
    if isinstance(tree, dict):
        items = [(k, make_row_writer(t)) for k, t in tree.items()]

        def write_dict(i: int, value: Any) -> None:
            for key, write in items:
                write(i, value[key])

        return write_dict
    if isinstance(tree, tuple):
        writers = [make_row_writer(t) for t in tree]

        def write_tuple(i: int, value: Any) -> None:
            for write, part in zip(writers, value, strict=True):
                write(i, part)

        return write_tuple

    def write_leaf(i: int, value: Any) -> None:
        tree[i] = value

    return write_leaf


def make_row_reader(tree: Any) -> Callable[[int], Any]:
    """``read(i)`` returns row ``i`` as one env's value (arrays copied out of shared memory)."""
    if isinstance(tree, dict):
        items = [(k, make_row_reader(t)) for k, t in tree.items()]
        return lambda i: {key: read(i) for key, read in items}
    if isinstance(tree, tuple):
        readers = [make_row_reader(t) for t in tree]
        return lambda i: tuple(read(i) for read in readers)
    if tree.ndim == 1:
        return tree.__getitem__  # a numpy scalar is already a copy
    return lambda i: tree[i].copy()


def map_tree(fn: Callable[[np.ndarray], Any], tree: Any) -> Any:
    """Apply ``fn`` to every array of a nested dict/tuple tree."""
    if isinstance(tree, dict):
        return {k: map_tree(fn, t) for k, t in tree.items()}
    if isinstance(tree, tuple):
        return tuple(map_tree(fn, t) for t in tree)
    return fn(tree)


def assign_tree(dst: Any, src: Any, rows: Any = slice(None)) -> None:
    """``dst[rows] = src`` for every array of two matching trees."""
    if isinstance(dst, dict):
        for key, sub in dst.items():
            assign_tree(sub, src[key], rows)
    elif isinstance(dst, tuple):
        for sub, part in zip(dst, src, strict=True):
            assign_tree(sub, part, rows)
    else:
        dst[rows] = src
