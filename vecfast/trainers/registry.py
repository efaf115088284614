"""The trainer protocol and the algorithm registry: add an algorithm without touching vecfast."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from gymnasium.vector import VectorEnv

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.models import ActorCritic


class Trainer(Protocol):
    """What :func:`vecfast.train` drives: components (model, storage, learner, sampler) assembled.

    ``iterations()`` trains for ever, yielding a flat dict of metrics after each learner
    iteration; it must contain ``env_steps`` (transitions sampled so far). The caller
    stops when it has enough, then calls ``close()`` (which must not close the env).
    """

    model: ActorCritic

    def iterations(self) -> Iterator[dict[str, float]]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


# (env, config, total_env_steps) -> Trainer
TrainerFactory = Callable[[VectorEnv, TrainConfig, int], Trainer]


@dataclass(frozen=True)
class AlgoSpec:
    """A registered algorithm.

    ``double_buffered``: when vecfast builds the vector env it gives it
    ``batch_size = num_envs // 2`` so the trainer can sample with ``send``/``recv``.
    ``defaults``: config overrides this algorithm prefers (the user's win).
    """

    factory: TrainerFactory
    double_buffered: bool = False
    defaults: dict[str, Any] | None = None


_ALGOS: dict[str, AlgoSpec] = {}


def register_algo(
    name: str, factory: TrainerFactory, *, double_buffered: bool = False, defaults: dict[str, Any] | None = None
) -> None:
    """Make ``vecfast.train(env, algo=name)`` build its trainer with ``factory(env, cfg, total_env_steps)``."""
    if name in _ALGOS and _ALGOS[name].factory is not factory:
        raise ValueError(f"algorithm {name!r} is already registered")
    _ALGOS[name] = AlgoSpec(factory, double_buffered, dict(defaults or {}))


def _register_builtins() -> None:
    import vecfast.trainers.appo  # noqa: F401
    import vecfast.trainers.ppo  # noqa: F401


def get_algo(name: str) -> AlgoSpec:
    _register_builtins()
    try:
        return _ALGOS[name]
    except KeyError:
        raise KeyError(f"no algorithm {name!r}; registered: {sorted(_ALGOS)}") from None


def registered_algos() -> list[str]:
    _register_builtins()
    return sorted(_ALGOS)
