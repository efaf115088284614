"""Rows of batched observations (arrays, or dicts and tuples of them) and of gymnasium vector infos (arrays with
their ``_key`` masks, nested dicts too): the one way vector envs that regroup envs take and place them."""

from __future__ import annotations

from typing import Any

import numpy as np


def take_rows(tree: Any, rows: Any) -> Any:
    """Rows ``rows`` of every array in ``tree``, as new arrays (also where ``rows`` is a slice)."""
    if isinstance(tree, dict):
        return {key: take_rows(value, rows) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(take_rows(value, rows) for value in tree)
    return np.array(np.asarray(tree)[rows])


def write_rows(buffer: Any, rows: np.ndarray | slice, values: Any) -> None:
    """Write ``values`` into rows ``rows`` of ``buffer`` (trees of arrays alike: a slot env's latest observations)."""
    if isinstance(buffer, dict):
        for key in buffer:
            write_rows(buffer[key], rows, values[key])
    elif isinstance(buffer, tuple):
        for part, value in zip(buffer, values, strict=True):
            write_rows(part, rows, value)
    else:
        buffer[rows] = values


def info_rows(infos: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """Rows ``rows`` of a vector info dict (its arrays and their ``_key`` masks, nested dicts too)."""
    return {key: info_rows(value, rows) if isinstance(value, dict) else value[rows] for key, value in infos.items()}


def scatter_info_rows(infos: dict[str, Any], rows: np.ndarray, num_rows: int) -> dict[str, Any]:
    """The inverse of :func:`info_rows`: infos of ``rows`` placed in a vector info of ``num_rows`` rows, the others
    empty as gymnasium's ``_add_info`` leaves them (0, False, or None for objects; masks False)."""
    full: dict[str, Any] = {}
    for key, value in infos.items():
        if isinstance(value, dict):
            full[key] = scatter_info_rows(value, rows, num_rows)
            continue
        value = np.asarray(value)
        spread = np.full((num_rows, *value.shape[1:]), None, object) if value.dtype == object else None
        if spread is None:
            spread = np.zeros((num_rows, *value.shape[1:]), value.dtype)
        spread[rows] = value
        full[key] = spread
    return full
