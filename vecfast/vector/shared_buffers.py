"""Batched values of gymnasium spaces, in one shared-memory arena or pickled through pipes.

The owner and every worker map the same anonymous memory file (``memfd``), so
observations, actions, rewards and flags of fixed-size spaces are written in place and
never pickled. A memfd has no name in ``/dev/shm``: it disappears with the last process
that maps it, however that process dies, so a killed run cannot leak shared memory.

Where there is no memfd (not Linux), or with ``VECFAST_SHARED_MEMORY=portable``, the arena is a
``multiprocessing.shared_memory`` block instead, attached by name, and workers start with spawn
(:func:`portable_shared_memory`). Its name is unlinked once no worker needs to attach any more (at once
without restarts), and multiprocessing's resource tracker unlinks it if the owner is killed before.

A :class:`SpaceBuffer` reads and writes one space's batch: :class:`ArrayBuffer` for
Box/Discrete/MultiDiscrete/MultiBinary, :class:`TextBuffer` (character indices, as
gymnasium stores Text), :class:`OneOfBuffer` (the chosen subspace's index beside every
subspace's rows), :class:`DictBuffer`/:class:`TupleBuffer` nesting them. Spaces without
a fixed size (Graph, Sequence, custom spaces), or any space when the user turns shared
memory off, use :class:`PickledBuffer`: each env's value crosses the worker's pipe
pickled and is batched in the owner as gymnasium's own ``concatenate`` does.
"""

from __future__ import annotations

import copy as copy_module
import mmap
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

_ALIGN = 64  # cache-line alignment keeps workers from sharing lines of different arrays

_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def is_array_tree(space: spaces.Space) -> bool:
    """Whether a batch of ``space`` is numpy arrays only (nested in dicts and tuples)."""
    if isinstance(space, spaces.Dict):
        return all(is_array_tree(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return all(is_array_tree(s) for s in space.spaces)
    return type(space) in _ARRAY_SPACES


def fits_shared_memory(space: spaces.Space) -> bool:
    """Whether every value of ``space`` has one fixed-size array layout."""
    if isinstance(space, spaces.Dict):
        return all(fits_shared_memory(s) for s in space.spaces.values())
    if isinstance(space, (spaces.Tuple, spaces.OneOf)):
        return all(fits_shared_memory(s) for s in space.spaces)
    return type(space) in (*_ARRAY_SPACES, spaces.Text)


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

    def add_space(self, name: str, single_space: spaces.Space, n: int, banks: int | None = None) -> None:
        """Reserve the arrays of ``n`` values of ``single_space`` (which must fit shared memory),
        ``banks`` times over when given (a leading axis of that length)."""
        lead = () if banks is None else (banks,)
        self.specs[name] = self._space_tree(single_space, (*lead, n))

    def _space_tree(self, space: spaces.Space, lead: tuple[int, ...]) -> Any:
        if isinstance(space, spaces.Dict):
            return {k: self._space_tree(s, lead) for k, s in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            return tuple(self._space_tree(s, lead) for s in space.spaces)
        if isinstance(space, spaces.OneOf):
            return (self.add_array(lead, np.int64), *(self._space_tree(s, lead) for s in space.spaces))
        if isinstance(space, spaces.Text):
            return self.add_array((*lead, space.max_length), np.int32)
        return self.add_array((*lead, *space.shape), space.dtype)


SHARED_MEMORY_VAR = "VECFAST_SHARED_MEMORY"


def _take_mapping(block: shared_memory.SharedMemory) -> mmap.mmap:
    """The block's mapping, owned by the arena's numpy views from now on, as a memfd's is: a ``SharedMemory``
    unmaps its memory when it is closed or collected, under views that still point into it (CPython keeps the
    mapping in ``_mmap`` and a memoryview of it in ``_buf``, 3.8 to 3.13)."""
    mapping = block._mmap
    block._buf.release()
    block._buf, block._mmap = None, None
    return mapping


def portable_shared_memory() -> bool:
    """Whether arenas are ``multiprocessing.shared_memory`` blocks and workers start with spawn: where
    ``os.memfd_create`` is missing, or where ``VECFAST_SHARED_MEMORY=portable`` asks for it (to test that path)."""
    return os.environ.get(SHARED_MEMORY_VAR) == "portable" or not hasattr(os, "memfd_create")


class SharedArena:
    """A shared mapping of ``layout``: created here, or attached to the owner's (``fd`` passed over a pipe for a
    memfd, ``name`` for a portable block)."""

    def __init__(self, layout: ArenaLayout, fd: int | None = None, name: str | None = None) -> None:
        self.layout = layout
        size = max(layout.size, 1)
        self.fd, self.name = -1, name
        self._created = fd is None and name is None  # the creator (the owner) unlinks a block's name
        self._block: shared_memory.SharedMemory | None = None
        if name is not None or (fd is None and portable_shared_memory()):
            self._block = shared_memory.SharedMemory(name=name, create=name is None, size=size)
            self.name = self._block.name
            self._buffer: Any = _take_mapping(self._block)
            return
        if fd is None:
            fd = os.memfd_create("vecfast", os.MFD_CLOEXEC)
            os.ftruncate(fd, size)
        self.fd = fd
        self._buffer = mmap.mmap(fd, size)

    def views(self) -> dict[str, Any]:
        """numpy views of every named array (nested dict/tuple for spaces)."""
        return {name: self.view_tree(spec) for name, spec in self.layout.specs.items()}

    def view_tree(self, spec: Any) -> Any:
        """New numpy arrays over the arrays of ``spec``; views taken of them have them as base."""
        if isinstance(spec, dict):
            return {k: self.view_tree(s) for k, s in spec.items()}
        if isinstance(spec, tuple):
            return tuple(self.view_tree(s) for s in spec)
        return np.ndarray(spec.shape, spec.dtype, buffer=self._buffer, offset=spec.offset)

    def seal(self) -> None:
        """No process attaches any more: drop the memfd's descriptor, or (its creator) unlink the block's name.
        The mapping, and views of it, stay valid."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self._block is not None and self._created and self.name is not None:
            self._block.unlink()
            self.name = None


class SpaceBuffer(ABC):
    """The batch of one space: rows written per env, read as gymnasium batches them."""

    @abstractmethod
    def write(self, i: int, value: Any) -> None:
        """Store one env's value in row ``i``."""

    @abstractmethod
    def read_row(self, i: int) -> Any:
        """Row ``i`` as one env's value, independent of the buffer."""

    @abstractmethod
    def read(self, rows: np.ndarray | None, copy: bool) -> Any:
        """The batch of ``rows`` (all rows when None); ``copy=False`` may return views of the buffer."""

    def assign(self, rows: Any, batch: Any) -> bool:
        """Store a batch of actions (gymnasium's batched layout) in ``rows``, or return False.

        True only where each env then reads back from the buffer what gymnasium's
        ``iterate(action_space, batch)`` would have handed it, down to its type; anything
        else travels pickled, element by element, as gymnasium sends it.
        """
        return False


class ArrayBuffer(SpaceBuffer):
    """Box, Discrete, MultiDiscrete, MultiBinary: one array with a row per env."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def write(self, i: int, value: Any) -> None:
        self.array[i] = value

    def read_row(self, i: int) -> Any:
        row = self.array[i]
        return row.copy() if self.array.ndim > 1 else row  # a row of a 1-D array is a numpy scalar, a copy

    def read(self, rows: np.ndarray | None, copy: bool) -> np.ndarray:
        if rows is not None:
            return self.array[rows]  # fancy indexing copies
        return self.array.copy() if copy else self.array

    def assign(self, rows: Any, batch: Any) -> bool:
        """A numpy array of the buffer's dtype and shape, the common case: its rows are what
        ``iterate`` gives (numpy scalars or arrays of that dtype). Any other batch (another
        dtype, a list of Python numbers, an array subclass) travels pickled: a float64 batch
        for a float32 Box reaches the env as float64, as in gymnasium.
        """
        dst = self.array
        if type(batch) is not np.ndarray or batch.dtype != dst.dtype:
            return False
        if batch.shape != (len(dst) if isinstance(rows, slice) else len(rows), *dst.shape[1:]):
            return False
        dst[rows] = batch
        return True


class TextBuffer(SpaceBuffer):
    """Text: each string as character indices padded with ``len(charset)``, as gymnasium stores it."""

    def __init__(self, space: spaces.Text, array: np.ndarray) -> None:
        self.space = space
        self.array = array
        self.index = {c: i for i, c in enumerate(space.character_list)}
        self.padding = len(space.character_set)

    def write(self, i: int, value: str) -> None:
        codes = [self.index[c] for c in value]
        row = self.array[i]
        row[: len(codes)] = codes
        row[len(codes) :] = self.padding

    def read_row(self, i: int) -> str:
        chars = self.space.character_list
        return "".join(chars[c] for c in self.array[i].tolist() if c < self.padding)

    def read(self, rows: np.ndarray | None, copy: bool) -> tuple[str, ...]:
        return tuple(self.read_row(i) for i in (range(len(self.array)) if rows is None else rows.tolist()))

    def assign(self, rows: Any, batch: Any) -> bool:
        return _assign_rows(self, len(self.array), rows, batch, lambda s: type(s) is str and self.space.contains(s))


class OneOfBuffer(SpaceBuffer):
    """OneOf: the index of each env's subspace, beside a buffer per subspace."""

    def __init__(self, space: spaces.OneOf, index: np.ndarray, subs: list[SpaceBuffer]) -> None:
        self.space = space
        self.index = index
        self.subs = subs

    def write(self, i: int, value: tuple[int, Any]) -> None:
        k, sub_value = value
        self.index[i] = k
        self.subs[int(k)].write(i, sub_value)

    def read_row(self, i: int) -> tuple[np.int64, Any]:
        k = self.index[i]  # a numpy integer, as gymnasium's OneOf samples and shared memory give it
        return k, self.subs[int(k)].read_row(i)

    def read(self, rows: np.ndarray | None, copy: bool) -> tuple[tuple[np.int64, Any], ...]:
        return tuple(self.read_row(i) for i in (range(len(self.index)) if rows is None else rows.tolist()))

    # No assign: OneOf actions travel pickled, since the buffer would turn a Python int
    # index (or a subspace value of another type) into a numpy one.


class DictBuffer(SpaceBuffer):
    def __init__(self, subs: dict[str, SpaceBuffer]) -> None:
        self.subs = subs

    def write(self, i: int, value: Any) -> None:
        for key, sub in self.subs.items():
            sub.write(i, value[key])

    def read_row(self, i: int) -> dict[str, Any]:
        return {key: sub.read_row(i) for key, sub in self.subs.items()}

    def read(self, rows: np.ndarray | None, copy: bool) -> dict[str, Any]:
        return {key: sub.read(rows, copy) for key, sub in self.subs.items()}

    def assign(self, rows: Any, batch: Any) -> bool:
        try:
            parts = [batch[key] for key in self.subs]
        except (KeyError, TypeError, IndexError):
            return False
        return all(sub.assign(rows, part) for sub, part in zip(self.subs.values(), parts, strict=True))


class TupleBuffer(SpaceBuffer):
    def __init__(self, subs: list[SpaceBuffer]) -> None:
        self.subs = subs

    def write(self, i: int, value: Any) -> None:
        for sub, part in zip(self.subs, value, strict=True):
            sub.write(i, part)

    def read_row(self, i: int) -> tuple[Any, ...]:
        return tuple(sub.read_row(i) for sub in self.subs)

    def read(self, rows: np.ndarray | None, copy: bool) -> tuple[Any, ...]:
        return tuple(sub.read(rows, copy) for sub in self.subs)

    def assign(self, rows: Any, batch: Any) -> bool:
        if not isinstance(batch, (tuple, list)) or len(batch) != len(self.subs):
            return False
        return all(sub.assign(rows, part) for sub, part in zip(self.subs, batch, strict=True))


class PickledBuffer(SpaceBuffer):
    """Values that are not kept in shared memory: the latest value of each env, batched on read."""

    def __init__(self, space: spaces.Space, num_envs: int) -> None:
        self.space = space
        self.values: list[Any] = [None] * num_envs
        self.batch = create_empty_array(space, num_envs)  # what copy=False returns, overwritten by each read

    def write(self, i: int, value: Any) -> None:
        self.values[i] = value

    def read_row(self, i: int) -> Any:
        return self.values[i]

    def read(self, rows: np.ndarray | None, copy: bool) -> Any:
        if rows is not None:
            values = [self.values[i] for i in rows.tolist()]
            return copy_module.deepcopy(concatenate(self.space, values, create_empty_array(self.space, len(values))))
        self.batch = concatenate(self.space, self.values, self.batch)
        return copy_module.deepcopy(self.batch) if copy else self.batch


def space_buffer(space: spaces.Space, views: Any) -> SpaceBuffer:
    """The buffer of ``space`` over the arena views that :meth:`ArenaLayout.add_space` reserved."""
    if isinstance(space, spaces.Dict):
        return DictBuffer({k: space_buffer(s, views[k]) for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return TupleBuffer([space_buffer(s, v) for s, v in zip(space.spaces, views, strict=True)])
    if isinstance(space, spaces.OneOf):
        subs = [space_buffer(s, v) for s, v in zip(space.spaces, views[1:], strict=True)]
        return OneOfBuffer(space, views[0], subs)
    if isinstance(space, spaces.Text):
        return TextBuffer(space, views)
    return ArrayBuffer(views)


def bank_buffers(space: spaces.Space, views: Any, banks: int) -> list[SpaceBuffer]:
    """A buffer per bank over arena views reserved with ``add_space(..., banks=banks)``."""
    return [space_buffer(space, map_tree(lambda a, s=s: a[s], views)) for s in range(banks)]


def _assign_rows(buffer: SpaceBuffer, num_rows: int, rows: Any, batch: Any, valid: Any) -> bool:
    """Write a tuple batch (gymnasium batches Text and OneOf as tuples) row by row, if every value is valid."""
    ids = range(num_rows)[rows] if isinstance(rows, slice) else rows
    if not isinstance(batch, (tuple, list)) or len(batch) != len(ids) or not all(valid(v) for v in batch):
        return False
    for i, value in zip(ids, batch, strict=True):
        buffer.write(int(i), value)
    return True


def map_tree(fn: Any, tree: Any) -> Any:
    """Apply ``fn`` to every array of a nested dict/tuple tree."""
    if isinstance(tree, dict):
        return {k: map_tree(fn, t) for k, t in tree.items()}
    if isinstance(tree, tuple):
        return tuple(map_tree(fn, t) for t in tree)
    return fn(tree)
