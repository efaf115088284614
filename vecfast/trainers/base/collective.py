"""Sums and maxima across the ranks of a distributed run; the value itself in a single process.

The learning code calls these wherever every rank must see the same number (step counts,
advantage and normaliser statistics, episode statistics), so the same code runs under every
scheme: with no process group initialised they return their input and cost nothing. In a
distributed run every rank must make the same calls in the same order, as with any collective.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _reduce(values: torch.Tensor, op: dist.ReduceOp) -> torch.Tensor:
    if not is_distributed():
        return values
    # NCCL reduces CUDA tensors only; gloo takes CPU (and CUDA) tensors
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else values.device
    moved = values.to(device)
    dist.all_reduce(moved, op=op)
    return moved.to(values.device)


def all_sum(values: torch.Tensor) -> torch.Tensor:
    """The elementwise sum of ``values`` over all ranks (a new tensor where distributed, else ``values``)."""
    return _reduce(values, dist.ReduceOp.SUM)


def all_max(values: torch.Tensor) -> torch.Tensor:
    """The elementwise maximum of ``values`` over all ranks."""
    return _reduce(values, dist.ReduceOp.MAX)


def all_mean(values: dict[str, float]) -> dict[str, float]:
    """Each number's mean over all ranks (every rank passes the same names)."""
    if not is_distributed() or not values:
        return values
    names = sorted(values)
    sums = all_sum(torch.tensor([float(values[k]) for k in names], dtype=torch.float64))
    return {k: v / world_size() for k, v in zip(names, sums.tolist(), strict=True)}


def all_names(names: Iterable[str]) -> list[str]:
    """The sorted union of every rank's ``names`` (each rank's envs may have reported different ones so far)."""
    mine = sorted(names)
    if not is_distributed():
        return mine
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, mine)
    return sorted({name for rank_names in gathered for name in rank_names})


def all_gathered(items: list[T]) -> list[T]:
    """Every rank's ``items`` concatenated in rank order (``items`` itself in a single process): what every rank must
    record alike, such as match results that rate the job's policies."""
    if not is_distributed():
        return items
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, items)
    return [item for rank_items in gathered for item in rank_items]


def from_main(fn: Callable[[], T]) -> T:
    """``fn()`` run on rank 0 only, its result (or the error it raised) given to every rank.

    For what one process must decide or read (the run directory, a checkpoint) and all must
    agree on. The value travels pickled between the run's own ranks.
    """
    if not is_distributed():
        return fn()
    box: list[Any] = [None]
    if rank() == 0:
        try:
            box = [(True, fn())]
        except Exception as error:
            box = [(False, error)]
    dist.broadcast_object_list(box)
    ok, value = box[0]
    if not ok:
        raise value
    return value
