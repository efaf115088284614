"""A vector env of agent slots from whatever a PettingZoo user has: a module, an env, or a function making one.

``vecfast.train`` (and your own loop) take any of:

* a module with ``vector_env(num_matches)`` (vecfast's Doom matches, whose players share worker processes),
  else ``parallel_env()`` (simultaneous moves: :class:`MultiAgentVectorEnv`), else ``env()`` (turn-based AEC
  games such as ``pettingzoo.classic.connect_four_v3``: :class:`TurnBasedVectorEnv`);
* a function that returns a PettingZoo ``AECEnv`` or ``ParallelEnv`` (called once per match);
* an ``AECEnv`` or ``ParallelEnv`` itself, which is one match.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from typing import Any

from gymnasium.vector import VectorEnv
from pettingzoo import AECEnv, ParallelEnv

from vecfast.multiagent.random_openings import RandomOpenings
from vecfast.multiagent.turn_based import TurnBasedVectorEnv
from vecfast.multiagent.vector_env import MultiAgentVectorEnv


def vector_env_from(
    source: Any,
    num_matches: int,
    num_workers: int | None = None,
    made: Any = None,
    env_kwargs: Mapping[str, Any] | None = None,
    random_opening_moves: int = 0,
) -> VectorEnv:
    """``num_matches`` matches of ``source`` (a module, an env or a function, see the module docstring) as one
    vector env of agent slots; an env instance is one match. ``made``: an env the function has made already.
    ``num_workers``: processes for simultaneous-move matches. ``env_kwargs``: keyword arguments of the module's or
    function's env (``render_mode="rgb_array"`` for videos). ``random_opening_moves``: turn-based games start after
    up to that many random legal moves (:class:`~vecfast.multiagent.RandomOpenings`; 0: as the game starts)."""
    kwargs = dict(env_kwargs or {})
    openings = random_opening_moves
    if isinstance(source, (AECEnv, ParallelEnv)):
        if kwargs:
            raise TypeError(f"env_kwargs {sorted(kwargs)} are for a module or function that makes the env, not an env")
        return _matches(lambda: source, isinstance(source, AECEnv), 1, num_workers, openings=openings)
    if isinstance(source, types.ModuleType):
        if callable(getattr(source, "vector_env", None)):
            _no_openings(openings, f"{source.__name__}'s vector_env()")
            return source.vector_env(num_matches, **kwargs)
        if callable(getattr(source, "parallel_env", None)):
            maker = functools.partial(source.parallel_env, **kwargs)
            return _matches(maker, False, num_matches, num_workers, openings=openings)
        if callable(getattr(source, "env", None)):
            return _matches(functools.partial(source.env, **kwargs), True, num_matches, num_workers, openings=openings)
        raise TypeError(
            f"module {source.__name__} has no vector_env(), parallel_env() or env() to make a PettingZoo env"
        )
    if kwargs:  # the env is made again with them
        if made is not None:
            made.close()
        source, made = functools.partial(source, **kwargs), None
    made = source() if made is None else made
    if isinstance(made, AECEnv):
        return _matches(source, True, num_matches, num_workers, made, openings)
    if isinstance(made, ParallelEnv):
        made.close()  # simultaneous-move matches are made in their worker processes
        return _matches(source, False, num_matches, num_workers, openings=openings)
    raise TypeError(
        f"the env factory returned {type(made).__name__}: expected a gymnasium VectorEnv or a PettingZoo "
        "AECEnv or ParallelEnv"
    )


def _matches(
    factory: Callable[[], Any],
    turn_based: bool,
    num_matches: int,
    num_workers: int | None,
    first: Any = None,
    openings: int = 0,
) -> VectorEnv:
    """Turn-based matches run in this process (``first``, one made already, plays match 0), from random openings of
    up to ``openings`` moves; simultaneous-move ones in worker processes."""
    if turn_based:
        if openings:
            factory = functools.partial(_with_openings, factory, openings)
            first = None if first is None else RandomOpenings(first, openings)
        made = [lambda: first] if first is not None else []
        return TurnBasedVectorEnv(made + [factory] * (num_matches - len(made)))
    _no_openings(openings, "simultaneous-move matches")
    workers = {} if num_workers is None else {"num_workers": min(num_workers, num_matches)}
    return MultiAgentVectorEnv([factory] * num_matches, **workers)


def _with_openings(factory: Callable[[], AECEnv], max_moves: int) -> AECEnv:
    return RandomOpenings(factory(), max_moves)


def _no_openings(openings: int, what: str) -> None:
    if openings:
        raise ValueError(
            f"random_opening_moves={openings} plays random moves in turn-based games (a PettingZoo AEC env); "
            f"{what} have no turns to play them in"
        )
