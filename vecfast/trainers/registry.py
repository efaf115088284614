"""Algorithms and schemes by name: add either without touching vecfast.

``vecfast.train(env, algo="ppo", scheme="async")`` runs PPO under the asynchronous scheme;
``"appo"`` and ``"ddppo"`` name the common pairs. vecfast's own entries are module paths,
imported when first asked for, so this module imports no implementation (and none imports it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from vecfast.trainers.protocols import AlgorithmFactory, SchemeFactory


@dataclass(frozen=True)
class AlgorithmSpec:
    """A registered algorithm; ``defaults``: config values it prefers (the caller's win)."""

    factory: AlgorithmFactory
    defaults: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SchemeSpec:
    """A registered scheme.

    ``double_buffered``: when vecfast builds the vector env it gives it ``batch_size = num_envs // 2``
    so the scheme can sample with ``send``/``recv``. ``distributed``: one process per rank runs it
    (``vecfast.train(num_processes=N)`` or a launcher such as ``torchrun`` starts them).
    ``defaults``: config values it prefers, below the env family's and the algorithm's.
    ``takes_plan``: its factory takes ``plan=`` (an :data:`~vecfast.trainers.sampling.acting_plan.PlanFactory`), so that
    self-play and populations run under it.
    """

    factory: SchemeFactory
    double_buffered: bool = False
    distributed: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)
    takes_plan: bool = False


@dataclass(frozen=True)
class Recipe:
    """What ``algo`` (and ``scheme``) resolved to."""

    algo: str
    scheme: str
    algorithm: AlgorithmSpec
    scheme_spec: SchemeSpec

    @property
    def label(self) -> str:
        """The name runs are known by: the pair's own name where it has one (``appo``), else ``algo+scheme``."""
        for name, pair in PAIRS.items():
            if pair == (self.algo, self.scheme):
                return name
        return self.algo if self.scheme == DEFAULT_SCHEME else f"{self.algo}+{self.scheme}"

    @property
    def defaults(self) -> dict[str, Any]:
        return {**self.scheme_spec.defaults, **self.algorithm.defaults}


DEFAULT_SCHEME = "sync"
PAIRS = {"appo": ("ppo", "async"), "ddppo": ("ppo", "distributed")}  # names for common (algorithm, scheme) pairs

# On-policy PPO as in CleanRL (its Atari settings: pixels). An env family's defaults sit above a scheme's
# (vecfast.trainers.run.defaults): vector-obs envs take the family's learning rate under this scheme too.
_SYNC_PPO = {"num_epochs": 4, "batch_size": 256, "learning_rate": 3e-4}
_BUILTIN_ALGORITHMS = {"ppo": ("vecfast.trainers.algorithm.ppo", "PPO", {})}
_BUILTIN_SCHEMES = {
    "sync": ("vecfast.trainers.schemes.synchronous", "SyncTrainer", {"defaults": _SYNC_PPO, "takes_plan": True}),
    "async": (
        "vecfast.trainers.schemes.asynchronous",
        "AsyncTrainer",
        {"double_buffered": True, "takes_plan": True},
    ),
    "distributed": (
        "vecfast.trainers.schemes.distributed",
        "DistributedTrainer",
        {"distributed": True, "defaults": _SYNC_PPO, "takes_plan": True},
    ),
}
_ALGORITHMS: dict[str, AlgorithmSpec] = {}
_SCHEMES: dict[str, SchemeSpec] = {}


def register_algorithm(name: str, factory: AlgorithmFactory, *, defaults: dict[str, Any] | None = None) -> None:
    """Make ``vecfast.train(env, algo=name, scheme=...)`` learn with ``factory(model, cfg)`` (an
    :class:`~vecfast.trainers.protocols.Algorithm`) under any scheme."""
    _check_new(name, factory, _ALGORITHMS, _BUILTIN_ALGORITHMS)
    _ALGORITHMS[name] = AlgorithmSpec(factory, dict(defaults or {}))


def register_scheme(
    name: str,
    factory: SchemeFactory,
    *,
    double_buffered: bool = False,
    distributed: bool = False,
    defaults: dict[str, Any] | None = None,
    takes_plan: bool = False,
) -> None:
    """Make ``scheme=name`` build its trainer with ``factory(env, algorithm_factory, cfg, total_env_steps)`` (and
    ``plan=``, the acting plan's factory, if ``takes_plan``)."""
    _check_new(name, factory, _SCHEMES, _BUILTIN_SCHEMES)
    _SCHEMES[name] = SchemeSpec(factory, double_buffered, distributed, dict(defaults or {}), takes_plan)


def _check_new(name: str, factory: Any, registered: dict[str, Any], builtins: dict[str, Any]) -> None:
    if name in PAIRS or name in builtins or (name in registered and registered[name].factory is not factory):
        raise ValueError(f"{name!r} is already registered")


def _lookup(name: str, kind: str, builtins: dict[str, Any], registered: dict[str, Any], cls: type) -> Any:
    if name in builtins:
        module, attr, options = builtins[name]
        return cls(getattr(importlib.import_module(module), attr), **options)
    try:
        return registered[name]
    except KeyError:
        known = registered_algos() if kind == "algorithm" else registered_schemes()
        raise KeyError(f"unknown {kind} {name!r}; registered: {', '.join(known)}") from None


def algorithm(name: str) -> AlgorithmSpec:
    return _lookup(name, "algorithm", _BUILTIN_ALGORITHMS, _ALGORITHMS, AlgorithmSpec)


def scheme(name: str) -> SchemeSpec:
    return _lookup(name, "scheme", _BUILTIN_SCHEMES, _SCHEMES, SchemeSpec)


def resolve(algo: str, scheme_name: str | None = None) -> Recipe:
    """``algo`` (an algorithm, or a pair's name such as ``"appo"``) and ``scheme_name`` (default: the
    pair's, else ``"sync"``) as the specs to build with; a pair with a different scheme raises."""
    if algo in PAIRS:
        algo_name, pair_scheme = PAIRS[algo]
        if scheme_name not in (None, pair_scheme):
            raise ValueError(f"algo={algo!r} is {algo_name} under the {pair_scheme} scheme, not {scheme_name}")
        scheme_name = pair_scheme
    else:
        algo_name, scheme_name = algo, scheme_name or DEFAULT_SCHEME
    return Recipe(algo_name, scheme_name, algorithm(algo_name), scheme(scheme_name))


def registered_algos() -> list[str]:
    """Every name ``algo=`` takes: algorithms and the pairs' names."""
    return sorted({*_BUILTIN_ALGORITHMS, *_ALGORITHMS, *PAIRS})


def registered_schemes() -> list[str]:
    return sorted({*_BUILTIN_SCHEMES, *_SCHEMES})
