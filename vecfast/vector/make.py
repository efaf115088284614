"""``vecfast.make_vec``: :func:`gymnasium.make_vec` whose default is AsyncSharedMemVectorEnv."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
from gymnasium import Env, Wrapper
from gymnasium.envs.registration import EnvSpec, VectorizeMode, _find_spec  # make_vec's own id lookup
from gymnasium.vector import VectorEnv

from vecfast.vector.async_shared_mem import AsyncSharedMemVectorEnv

SHARED_MEMORY_MODE = "shared_memory"
# Namespaces whose ids a package registers when it is imported (gymnasium 1.x loads no plugins): the package, and
# what installs it.
ENV_PROVIDERS = {"ALE": ("ale_py", "ale-py")}


def env_namespace(id: str) -> str | None:
    """The namespace of an env id (``"ALE"`` of ``"ALE/Pong-v5"`` and ``"ale_py:ALE/Pong-v5"``), None without one."""
    name = id.rpartition(":")[2]
    return name.partition("/")[0] if "/" in name else None


def import_env_provider(id: str) -> None:
    """Import the package that registers ``id``'s namespace, if it is one of :data:`ENV_PROVIDERS` and not
    registered yet, so that ``"ALE/Pong-v5"`` works as ``"ale_py:ALE/Pong-v5"`` does; an ImportError says what
    to install. (``"module:Id"`` imports its module in gymnasium's own lookup.)"""
    namespace = env_namespace(id)
    if namespace not in ENV_PROVIDERS or any(spec.namespace == namespace for spec in gymnasium.registry.values()):
        return
    module, package = ENV_PROVIDERS[namespace]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"env id {id!r}: the {namespace} namespace comes with {package}: pip install {package}"
        ) from exc


def make_vec(
    id: str | EnvSpec,
    num_envs: int = 1,
    vectorization_mode: VectorizeMode | str | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    wrappers: Sequence[Callable[[Env], Wrapper]] | None = None,
    **kwargs: Any,
) -> VectorEnv:
    """Create a vector env like :func:`gymnasium.make_vec`, with the same signature.

    Modes: ``None`` uses the env's ``vector_entry_point`` if it has one (a batched
    simulator beats any process pool), else :class:`AsyncSharedMemVectorEnv`, which is
    also what ``"shared_memory"`` asks for; ``"sync"``, ``"async"`` and
    ``"vector_entry_point"`` are gymnasium's own. ``vector_kwargs`` go to the vector
    env's constructor (``num_workers``, ``batch_size``, ...).
    """
    if isinstance(id, EnvSpec):
        env_spec = id
    elif isinstance(id, str):
        import_env_provider(id)
        env_spec = _find_spec(id)  # as gymnasium.make_vec: "module:EnvId" imports the module first
    else:
        raise gymnasium.error.Error(f"Invalid id type: {type(id)}. Expected `str` or `EnvSpec`")
    # A spec taken from an earlier vector env carries its vectorisation choices, as in gymnasium.
    env_kwargs = dict(env_spec.kwargs)
    num_envs = env_kwargs.pop("num_envs", num_envs)
    vectorization_mode = env_kwargs.pop("vectorization_mode", vectorization_mode)
    vector_kwargs = env_kwargs.pop("vector_kwargs", vector_kwargs)
    wrappers = env_kwargs.pop("wrappers", wrappers)
    env_kwargs.update(kwargs)
    if vectorization_mode is None and env_spec.vector_entry_point is None:
        vectorization_mode = SHARED_MEMORY_MODE
    if vectorization_mode != SHARED_MEMORY_MODE:
        return gymnasium.make_vec(id, num_envs, vectorization_mode, vector_kwargs, wrappers, **kwargs)
    if env_spec.entry_point is None:
        raise gymnasium.error.Error(f"{env_spec.id} has no entry point: it cannot be vectorised by processes")
    single_spec = copy.deepcopy(env_spec)
    single_spec.kwargs = {}
    env_fn = _SingleEnvFactory(single_spec, env_kwargs, list(wrappers or []))
    env = AsyncSharedMemVectorEnv([env_fn] * num_envs, **(vector_kwargs or {}))
    vector_spec = copy.deepcopy(env_spec)
    vector_spec.kwargs = {**env_kwargs, "num_envs": num_envs, "vectorization_mode": SHARED_MEMORY_MODE}
    if vector_kwargs:
        vector_spec.kwargs["vector_kwargs"] = vector_kwargs
    if wrappers:
        vector_spec.kwargs["wrappers"] = wrappers
    env.unwrapped.spec = vector_spec
    return env


class _SingleEnvFactory:
    """Picklable ``gymnasium.make(spec, **kwargs)`` plus wrappers, for the worker processes."""

    def __init__(self, spec: EnvSpec, kwargs: dict[str, Any], wrappers: list[Callable[[Env], Wrapper]]) -> None:
        self.spec = spec
        self.kwargs = kwargs
        self.wrappers = wrappers

    def __call__(self) -> Env:
        env = gymnasium.make(self.spec, **self.kwargs)
        for wrapper in self.wrappers:
            env = wrapper(env)
        return env
