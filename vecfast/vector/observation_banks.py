"""Where each env's newest observation is, and handing out batches without copying them.

gymnasium's ``copy=True`` returns observation arrays that later steps never overwrite.
Copying a batch out of shared memory costs the owner ~23 us per 230 KB VizDoom frame,
after the last worker finished and before the next step can start: time every worker
waits. Instead the arena holds the observation batch ``num_banks`` times over. A read of
the whole batch hands out the bank the envs wrote, as new arrays over that memory (so the
bank counts as lent while any array derived from them is alive, torch tensors made with
``from_numpy`` included), and the workers write the next batch into a bank nobody holds.
When the caller holds every bank but one, reads copy, as before. Partial reads (``recv``)
and batches whose envs wrote different banks are gathered, which copies anyway.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from gymnasium import spaces

from vecfast.vector.shared_buffers import SharedArena, SpaceBuffer, is_array_tree, map_tree

LENDING_BANKS = 3  # what a loop holding `obs` and `next_obs` needs to never copy
# Lending a batch costs ~5 us (new arrays, weak references); below this size a copy is cheaper.
LENDING_MIN_BYTES = 64 * 1024


def worth_lending(space: spaces.Space, num_envs: int) -> bool:
    """Whether batches of ``space`` are arrays (which can be lent) large enough that lending beats copying."""
    return is_array_tree(space) and num_envs * _nbytes(space) >= LENDING_MIN_BYTES


def _nbytes(space: spaces.Space) -> int:
    if isinstance(space, spaces.Dict):
        return sum(_nbytes(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(_nbytes(s) for s in space.spaces)
    return int(np.prod(space.shape, dtype=np.int64)) * space.dtype.itemsize


class ObservationBanks:
    """The observation batch in ``len(buffers)`` banks; the workers write ``write_bank``.

    Args:
        buffers: one buffer per bank (a single :class:`~vecfast.vector.shared_buffers.PickledBuffer`
            for observations kept out of shared memory).
        arena, spec: the arena and the layout entry of the banks (an array tree with a
            leading bank axis), to make new arrays over a bank when lending it; None when
            there is only one bank.
    """

    def __init__(
        self, buffers: list[SpaceBuffer], num_envs: int, arena: SharedArena | None = None, spec: Any = None
    ) -> None:
        self.buffers = buffers
        self.write_bank = 0
        self.latest = np.zeros(num_envs, np.int8)  # the bank holding each env's newest observation
        self.previous = np.zeros(num_envs, np.int8)  # the bank each env wrote before (a lost job's env: its last)
        self._arena = arena
        self._spec = spec
        self._lent: list[list[weakref.ref]] = [[] for _ in buffers]
        self._bank_views = None if arena is None else arena.view_tree(spec)

    def writing(self, rows: np.ndarray | slice) -> int:
        """Envs ``rows`` are about to write their next observation: the bank they write."""
        if len(self.buffers) > 1:  # (one bank: every env's previous bank is the same one)
            self.previous[rows] = self.latest[rows]
        self.latest[rows] = self.write_bank
        return self.write_bank

    def read(self, rows: np.ndarray | None, copy: bool) -> Any:
        """The observations of envs ``rows`` (all when None), as gymnasium batches them."""
        if len(self.buffers) == 1:
            return self.buffers[0].read(rows, copy)
        if rows is None and (self.latest == self.write_bank).all():
            return self._read_bank(self.write_bank, copy)
        rows = np.arange(len(self.latest)) if rows is None else rows
        banks = self.latest[rows]
        if (banks == banks[0]).all():  # one bank: a gather from it is faster than one across banks
            return self.buffers[banks[0]].read(rows, copy)
        return map_tree(lambda a: a[banks, rows], self._bank_views)  # fancy indexing copies

    def last_written(self, ids: np.ndarray, lost: np.ndarray) -> Any:
        """Copies of envs ``ids``' newest complete observations, as a batch: for those whose job was ``lost`` (its
        worker died during it), the bank they wrote before. With one bank that is the row the lost job wrote
        into: the observation before that step, or the one the step produced if the worker got as far."""
        banks = np.where(lost, self.previous[ids], self.latest[ids])
        if len(self.buffers) == 1:
            return self.buffers[0].read(ids, True)
        return map_tree(lambda a: a[banks, ids], self._bank_views)

    def _read_bank(self, bank: int, copy: bool) -> Any:
        free = [s for s in range(len(self.buffers)) if s != bank and not self._in_use(s)]
        if not copy or not free:
            return self.buffers[bank].read(None, copy)
        fresh = self._arena.view_tree(self._spec)  # arrays nobody else holds: their lives are the loan's
        self._lent[bank] = [weakref.ref(a) for a in _leaves(fresh)]
        self.write_bank = free[0]
        return map_tree(lambda a: a[bank], fresh)

    def _in_use(self, bank: int) -> bool:
        return any(ref() is not None for ref in self._lent[bank])


def _leaves(tree: Any) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    map_tree(out.append, tree)
    return out
