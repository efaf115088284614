"""What a run's env is made from, and the one rule that makes it: ``train``, ``evaluate``, ``enjoy`` and ``tune``
build the same env from the same source.

A source is a gymnasium id (``"CartPole-v1"``, ``"module:Id"``, or a namespace whose package registers it on
import, such as ale-py's ``"ALE/Pong-v5"``) with its keyword arguments (plain data, kept in the run), a PettingZoo
env (a module such as ``pettingzoo.classic.connect_four_v3``, given as the module or its dotted name, an env, or
a function making one), a function returning a VectorEnv, or a VectorEnv.

An id is vectorised one of two ways, and a run records which (``config.json``'s ``vectorization``), so that
what evaluates or exports it sees the observations it trained on:

- ``"vector_entry_point"``: the id's own batched simulator (PointNav's renderer, ale-py's preprocessed
  ``AtariVectorEnv``), where it has one and the scheme steps every env at once, or where it double-buffers
  by itself (ale-py's: :mod:`~vecfast.vector.batched_send_recv`) for a scheme that double-buffers;
- ``"shared_memory"``: an :class:`~vecfast.vector.AsyncSharedMemVectorEnv` of single envs, which a
  double-buffered scheme needs for ``send``/``recv`` and which every env renders through.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium
from gymnasium.envs.registration import _find_spec, load_env_creator  # make_vec's own id lookup
from gymnasium.vector import VectorEnv

from vecfast.vector.batched_send_recv import BatchedSendRecv, has_own_send_recv
from vecfast.vector.make import SHARED_MEMORY_MODE, env_namespace, import_env_provider, make_vec

if TYPE_CHECKING:
    from vecfast.trainers.config import TrainConfig

VECTOR_ENTRY_POINT = "vector_entry_point"
VECTORIZATIONS = (VECTOR_ENTRY_POINT, SHARED_MEMORY_MODE)
PETTINGZOO_FACTORIES = ("vector_env", "parallel_env", "env")  # what makes a module a PettingZoo env's


def is_env_id(name: str) -> bool:
    """Whether gymnasium knows ``name`` as an env id (importing ``module:`` or a namespace's provider first)."""
    try:
        import_env_provider(name)
        _find_spec(name)
    except (gymnasium.error.Error, ImportError):
        return False
    return True


def pettingzoo_module(name: str) -> types.ModuleType | None:
    """The module ``name`` (dotted) if it imports and makes PettingZoo envs, else None."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if any(callable(getattr(module, f, None)) for f in PETTINGZOO_FACTORIES) else None


@dataclass(frozen=True)
class EnvSource:
    """A run's env as given (``env``) and, for an id, its keyword arguments (plain data)."""

    env: Any
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, env: Any, kwargs: Mapping[str, Any] | None = None) -> EnvSource:
        """``env`` as a source; a string that is no env id but a PettingZoo module's dotted name is that module."""
        if isinstance(env, str) and not is_env_id(env):
            module = pettingzoo_module(env)
            if module is not None:
                env = module
        if kwargs and not isinstance(env, (str, types.ModuleType)):
            raise TypeError(
                "env_kwargs are for an env id or a PettingZoo module, which vecfast makes; a given env is made already"
            )
        return cls(env, dict(kwargs or {}))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled to a launcher's ranks: a module by its name, as pickle sends functions."""
        if self.is_game:
            return (EnvSource.of, (self.env.__name__, dict(self.kwargs)))
        return (EnvSource, (self.env, dict(self.kwargs)))

    @property
    def id(self) -> str | None:
        """The gymnasium id, if the source is one."""
        return self.env if isinstance(self.env, str) else None

    @property
    def given_name(self) -> str | None:
        """The id, or a game module's dotted name (what names the env in its preset); None for an env or factory."""
        return self.env.__name__ if self.is_game else self.id

    @property
    def is_vector_env(self) -> bool:
        return isinstance(self.env, VectorEnv)

    @property
    def is_game(self) -> bool:
        """A PettingZoo game's module: its matches seat the learner against opponents."""
        return isinstance(self.env, types.ModuleType)

    def sampler_inference(self, cfg: TrainConfig) -> str:
        """Who acts for the Ray samplers' envs: ``cfg.sampler_inference``, or where None, "local" for one policy
        acting alone and "central" for a game's matches or a population (only the learner holds every seat's
        policy)."""
        if cfg.sampler_inference is not None:
            return cfg.sampler_inference
        return "central" if self.is_game or cfg.num_policies > 1 else "local"

    def vectorization(self, double_buffered: bool) -> str | None:
        """How an id is vectorised for a scheme (see the module docstring); None for other sources."""
        if self.id is None:
            return None
        entry_point = _find_spec(self.id).vector_entry_point
        if entry_point is not None and (not double_buffered or has_own_send_recv(load_env_creator(entry_point))):
            return VECTOR_ENTRY_POINT  # a batched simulator beats any process pool (ALE's double-buffers itself)
        return SHARED_MEMORY_MODE

    def build(
        self,
        num_envs: int,
        vectorization: str | None = None,
        *,
        num_workers: int | None = None,
        batch_size: int | None = None,
        start_timeout: float | None = None,
        restart_failed_workers: bool = False,
        render_mode: str | None = None,
        extra_kwargs: Mapping[str, Any] | None = None,
        random_opening_moves: int = 0,
    ) -> VectorEnv:
        """The vector env of ``num_envs`` envs (a given VectorEnv as it is).

        For an id: ``vectorization`` (default: the id's batched simulator where it has one) and, for
        ``"shared_memory"``, ``num_workers``, ``batch_size`` (double buffering), ``start_timeout`` and
        ``restart_failed_workers``;
        ``render_mode`` renders single envs (shared memory), as batched simulators may not render;
        ``extra_kwargs`` go to the env besides the source's own (a rank's share of PointNav's scenes).
        A PettingZoo source makes ``num_envs`` matches (a module's with the source's keyword arguments, and any
        ``render_mode``), turn-based ones from ``random_opening_moves`` (training's: self-play's openings).
        """
        if isinstance(self.env, VectorEnv):
            return _without_openings(self.env, random_opening_moves)
        if self.id is None:
            made = self.env() if callable(self.env) and not self.is_game else None
            if isinstance(made, VectorEnv):
                return _without_openings(made, random_opening_moves)
            from vecfast.multiagent.from_pettingzoo import vector_env_from  # the pettingzoo extra

            kwargs = {**self.kwargs, **(extra_kwargs or {})} | ({"render_mode": render_mode} if render_mode else {})
            return vector_env_from(self.env, num_envs, num_workers, made, kwargs, random_opening_moves)
        _without_openings(self.id, random_opening_moves)
        kwargs = {**self.kwargs, **(extra_kwargs or {})}
        vectorization = vectorization or self.vectorization(double_buffered=False)
        if vectorization not in VECTORIZATIONS:
            raise ValueError(f"vectorization must be one of {VECTORIZATIONS}, got {vectorization!r}")
        if vectorization == VECTOR_ENTRY_POINT and render_mode is None:
            if batch_size is not None:  # double buffering through the simulator's own send/recv
                kwargs["batch_size"] = batch_size
            env = make_vec(self.id, num_envs=num_envs, vectorization_mode=VECTOR_ENTRY_POINT, **kwargs)
            return env if batch_size is None else BatchedSendRecv(env)
        wrappers = []
        if vectorization == VECTOR_ENTRY_POINT and env_namespace(self.id) == "ALE":
            from vecfast.envs.atari import as_the_vector_env_sees_it, single_env_kwargs

            kwargs, wrappers = single_env_kwargs(kwargs), [as_the_vector_env_sees_it]  # to render what it trained on
        vector_kwargs: dict[str, Any] = {"start_timeout": start_timeout}
        if restart_failed_workers:
            vector_kwargs["restart_failed_workers"] = True
        if num_workers is not None:
            vector_kwargs["num_workers"] = num_workers
        if batch_size is not None:
            vector_kwargs["batch_size"] = batch_size
        if render_mode is not None:
            kwargs["render_mode"] = render_mode
        return make_vec(
            self.id, num_envs=num_envs, vectorization_mode=SHARED_MEMORY_MODE, vector_kwargs=vector_kwargs,
            wrappers=wrappers, **kwargs,
        )  # fmt: skip

    def on_ray(self, cfg: TrainConfig) -> VectorEnv:
        """The run's envs on the Ray cluster at ``cfg.ray_address``: ``cfg.num_samplers`` samplers, each stepping
        ``cfg.num_envs`` envs in an AsyncSharedMemVectorEnv of its node (:mod:`vecfast.cluster`), acting as
        :meth:`sampler_inference` says."""
        from vecfast.cluster.policy_samplers import PolicySamplers
        from vecfast.cluster.remote_vector_env import RemoteVectorEnv

        local = self.sampler_inference(cfg) == "local"
        make = functools.partial(
            self.build,
            cfg.num_envs,
            SHARED_MEMORY_MODE,
            num_workers=cfg.num_workers,
            # a sampler that acts itself double-buffers as this machine's APPO does; central inference's halves are
            # the remote vector env's
            batch_size=cfg.num_envs // 2 if local and cfg.num_envs >= 2 else None,
            start_timeout=cfg.env_start_timeout,
            restart_failed_workers=cfg.restart_failed_workers,
            random_opening_moves=cfg.random_opening_moves,
        )
        samplers = PolicySamplers if local else RemoteVectorEnv
        return samplers(
            [make] * cfg.num_samplers,
            cfg.ray_address,
            num_cpus=cfg.sampler_num_cpus,
            max_restarts=cfg.sampler_max_restarts,
            start_timeout=cfg.env_start_timeout,
        )

    def name(self, built: VectorEnv) -> str:
        """What the run calls its env: the id, a PettingZoo module's dotted name, else the built env's spec or class."""
        if self.given_name is not None:
            return self.given_name
        spec = getattr(built.unwrapped, "spec", None) or getattr(built, "spec", None)
        return getattr(spec, "id", None) or type(built.unwrapped).__name__  # (EnvPool's spec has no id)


def source_of_run(env: str, kwargs: Mapping[str, Any]) -> EnvSource:
    """The source a run directory's ``config.json`` names (its ``env`` and ``env_kwargs``); a ValueError for a run of
    an env object or factory, which names no source that can be made again."""
    source = EnvSource.of(env, kwargs)
    if source.id is None and not isinstance(source.env, types.ModuleType):
        raise ValueError(
            f"the run was trained on {env!r}, which is neither a registered gymnasium id nor a PettingZoo module "
            "(the run got an env object or factory): pass env= the env it was trained on"
        )
    return source


def _without_openings(env: Any, random_opening_moves: int) -> Any:
    """``env`` (a VectorEnv or an id), which has no turns to play random openings in, if none are asked for."""
    if random_opening_moves:
        raise ValueError(
            f"random_opening_moves={random_opening_moves} is for self-play on turn-based PettingZoo games "
            f"(a module such as pettingzoo.classic.connect_four_v3), not {env!r}"
        )
    return env
