"""Stable-Baselines3 adapter: any gymnasium ``VectorEnv`` (vecfast's above all) as an SB3 ``VecEnv``.

SB3's ``VecEnv`` contract differs from gymnasium's vector API in ways this module bridges:

* an episode ends and the next one starts within the same ``step``; the last observation
  travels in ``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``
  says whether a time limit (not the task) ended it;
* infos are a list of per-env dicts, not one dict of batched arrays with ``_key`` masks;
* seeds and options are stored (``seed``, ``set_options``) and applied at the next
  ``reset()``, which returns observations only;
* ``env_method``/``get_attr``/``set_attr``/``env_is_wrapped`` take env indices (negative
  ones count from the end, as in a list);
* Dict and Tuple actions come one per env (``actions[i]`` is env ``i``'s), not batched;
* actions go to the envs as they are (the env decides what it accepts), and ``reset``
  passes ``options`` only when some were set, so envs whose ``reset`` takes none work.

Requires ``stable-baselines3`` (``pip install vecfast[sb3]``).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from vecfast.extras import explained_imports
from vecfast.vector import AsyncSharedMemVectorEnv, EnvError

with explained_imports("vecfast.wrappers.sb3"):
    from stable_baselines3.common.env_util import is_wrapped
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

__all__ = ["SB3Bridge", "SB3VecEnv", "make_vec_env"]

# gymnasium batches Python bools, ints and floats of infos into arrays of these dtypes
# (numpy scalars of other dtypes keep theirs, np.bool_ goes into an object array).
_PYTHON_SCALAR_DTYPES = frozenset({np.dtype(np.bool_), np.dtype(np.int64), np.dtype(np.float64)})


class SB3Bridge(gym.Wrapper):
    """Outermost wrapper of each env that lets :class:`SB3VecEnv` act on chosen envs only
    and reset envs as SB3 does.

    gymnasium's ``VectorEnv.call``/``set_attr`` reach every env, while SB3's
    ``env_method``/``get_attr``/``set_attr``/``env_is_wrapped`` take indices, set attributes
    on the env's outermost layer and inspect its wrapper chain, which only code next to
    the env can do. :class:`SB3VecEnv` numbers the bridges once (``sb3_index``); then one
    ``call("sb3_call", ...)`` reaches every env and each bridge acts only if its number
    is among the indices. It also passes ``options`` on only when there are some.
    :func:`make_vec_env` adds it; add it yourself (as the last wrapper) to vector envs you
    build, for those methods to behave exactly as in SB3.
    """

    sb3_index: int | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env, passing ``options`` only if there are some, as SB3's VecEnvs do.

        gymnasium's vector envs always pass ``options`` (``None``, or what is left once
        ``reset_mask`` is popped); envs written before gymnasium had it take none.
        """
        if not kwargs.get("options"):
            kwargs.pop("options", None)
        return self.env.reset(**kwargs)

    def sb3_call(self, indices: list[int], request: str, name: Any, args: tuple, kwargs: dict) -> list[Any]:
        """Run ``request`` on the wrapped env once per occurrence of ``sb3_index`` in ``indices``."""

        def run() -> Any:
            if request == "env_method":
                return self.env.get_wrapper_attr(name)(*args, **kwargs)
            if request == "get_attr":
                return self.env.get_wrapper_attr(name)
            if request == "set_attr":
                return setattr(self.env, name, args[0])
            if request == "env_is_wrapped":
                return is_wrapped(self.env, name)
            raise ValueError(f"unknown request {request!r}")

        return [run() for _ in range(indices.count(self.sb3_index))]


class SB3VecEnv(VecEnv):
    """A gymnasium :class:`~gymnasium.vector.VectorEnv` seen as an SB3 ``VecEnv``.

    Step outputs, infos and resets are those of SB3's ``DummyVecEnv`` over the same envs
    (rewards are float32 as there). A vector env in ``AutoresetMode.SAME_STEP`` (what
    :func:`make_vec_env` builds) already resets finished envs inside ``step`` and returns
    their last observation and info in ``info["final_obs"]``/``info["final_info"]``;
    in ``NEXT_STEP`` or ``DISABLED`` mode the adapter resets finished envs itself with
    ``reset(options={"reset_mask": dones})``, which costs one more round trip to the
    workers on every step where an episode ends.

    ``env_method`` and ``set_attr`` on chosen envs need every env wrapped in
    :class:`SB3Bridge`, as does a ``reset`` without ``options`` for envs whose ``reset``
    takes none; without it ``env_method``/``set_attr`` work on all envs at once (through
    the vector env's ``call``/``set_attr``, which set an attribute where a wrapper
    defines it rather than on the outermost layer); ``env_is_wrapped`` runs SB3's
    ``is_wrapped`` next to each env (see :meth:`env_is_wrapped`).

    Args:
        vector_env: the vector env; the adapter owns it from now on (``close`` closes it).
    """

    def __init__(self, vector_env: VectorEnv) -> None:
        self.vector_env = vector_env
        mode = vector_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode)
        # SB3 keeps the observations it is given across steps: views of a buffer that
        # the next step overwrites would corrupt its rollouts.
        self._copy_obs = getattr(vector_env.unwrapped, "copy", True) is False
        self._bridged = self._number_bridges()
        self._actions: Any = None
        super().__init__(vector_env.num_envs, vector_env.single_observation_space, vector_env.single_action_space)
        self.metadata = vector_env.metadata  # the envs' metadata, as DummyVecEnv reports it

    def _number_bridges(self) -> bool:
        try:
            found = self.vector_env.call("has_wrapper_attr", "sb3_index")
        except (AttributeError, NotImplementedError):
            return False
        if not any(found):
            return False
        if not all(found):
            raise ValueError("only some envs are wrapped in SB3Bridge: wrap all of them or none")
        self.vector_env.set_attr("sb3_index", list(range(self.vector_env.num_envs)))
        return True

    # ----------------------------------------------------------------- stepping
    def reset(self) -> VecEnvObs:
        """Reset every env with the seeds and options stored for it (then forget them).

        gymnasium's vector ``reset`` takes one options dict for all envs; envs that were
        given different options are reset in groups with ``options["reset_mask"]``.
        """
        groups: dict[int, list[int]] = {}
        for i, options in enumerate(self._options):
            groups.setdefault(id(options) if options else 0, []).append(i)
        for ids in groups.values():
            options = self._options[ids[0]]
            if len(groups) > 1:
                mask = np.zeros(self.num_envs, np.bool_)
                mask[ids] = True
                options = {**options, "reset_mask": mask}
            obs, infos = self.vector_env.reset(seed=list(self._seeds), options=options or None)
            env_infos = _unbatch_infos(infos, self.num_envs)
            for i in ids:
                self.reset_infos[i] = env_infos[i]
        self._reset_seeds()
        self._reset_options()
        return _copy_tree(obs) if self._copy_obs else obs

    def step_async(self, actions: np.ndarray) -> None:
        if isinstance(self.action_space, (spaces.Dict, spaces.Tuple)):
            actions = _batch_actions(self.action_space, list(actions))
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminated, truncated, infos = self.vector_env.step(self._actions)
        dones = terminated | truncated
        finished = np.flatnonzero(dones).tolist()
        if self._copy_obs:
            obs = _copy_tree(obs)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            # A finished env's top-level info is its reset info; its step info is in final_info.
            final_obs = infos.pop("final_obs", None)
            final_infos = _unbatch_infos(infos.pop("final_info", {}), self.num_envs)
            infos.pop("_final_obs", None)
            infos.pop("_final_info", None)
            top_infos = _unbatch_infos(infos, self.num_envs)
            step_infos = [final_infos[i] if dones[i] else info for i, info in enumerate(top_infos)]
            last_obs = {i: final_obs[i] for i in finished}
            reset_infos = top_infos
        else:
            step_infos = _unbatch_infos(infos, self.num_envs)
            last_obs = {i: _copy_tree(_tree_row(obs, i)) for i in finished}
            if finished:
                obs, batched_reset_infos = self.vector_env.reset(options={"reset_mask": dones.copy()})
                if self._copy_obs:
                    obs = _copy_tree(obs)
                reset_infos = _unbatch_infos(batched_reset_infos, self.num_envs)
        for i in finished:
            step_infos[i]["terminal_observation"] = last_obs[i]
            self.reset_infos[i] = reset_infos[i]
        for i, info in enumerate(step_infos):
            info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, rewards.astype(np.float32), dones, step_infos

    def close(self) -> None:
        self.vector_env.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images.",
                stacklevel=2,
            )
            return [None] * self.num_envs
        return list(self.vector_env.render())

    # ----------------------------------------------------------------- per-env access
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if self._bridged:
            return self._bridge_call("get_attr", attr_name, indices)
        with _as_attribute_error():
            values = self.vector_env.get_attr(attr_name)
        return [values[i] for i in self._env_ids(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if self._bridged:
            self._bridge_call("set_attr", attr_name, indices, value)
        else:
            self._require_all(indices, "set_attr")
            self.vector_env.set_attr(attr_name, [value] * self.num_envs)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        if self._bridged:
            return self._bridge_call("env_method", method_name, indices, *method_args, **method_kwargs)
        ids = self._require_all(indices, "env_method")
        with _as_attribute_error():
            results = self.vector_env.call(method_name, *method_args, **method_kwargs)
        return [results[i] for i in ids]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each env has a wrapper that is a ``wrapper_class`` (SB3's ``is_wrapped``), asked in place.

        Without :class:`SB3Bridge` it runs SB3's ``is_wrapped`` next to each env: in the
        workers of an :class:`~vecfast.AsyncSharedMemVectorEnv` (whose ``call`` takes a
        function), on the envs of a vector env that holds them (``envs``, as
        SyncVectorEnv). Any other vector env cannot tell and raises ``AttributeError``, as
        SB3 expects (``VecMonitor`` then assumes no ``Monitor``).
        """
        if self._bridged:
            return self._bridge_call("env_is_wrapped", wrapper_class, indices)
        base = self.vector_env.unwrapped
        if isinstance(base, AsyncSharedMemVectorEnv):
            flags = base.call(is_wrapped, wrapper_class)
        elif isinstance(getattr(base, "envs", None), (list, tuple)):
            flags = [is_wrapped(env, wrapper_class) for env in base.envs]
        else:
            raise AttributeError(f"{type(base).__name__} cannot run code next to its envs to inspect their wrappers")
        return [flags[i] for i in self._env_ids(indices)]

    def has_attr(self, attr_name: str) -> bool:
        """Whether every env has ``attr_name`` (asked in place: the value need not pickle)."""
        return all(self.vector_env.call("has_wrapper_attr", attr_name))

    def _env_ids(self, indices: VecEnvIndices) -> list[int]:
        """``indices`` as env numbers, read as list indices are (``-1`` is the last env)."""
        envs = range(self.num_envs)
        return [envs[i] for i in self._get_indices(indices)]

    def _bridge_call(self, request: str, name: Any, indices: VecEnvIndices, *args: Any, **kwargs: Any) -> list[Any]:
        ids = self._env_ids(indices)
        with _as_attribute_error():
            replies = self.vector_env.call("sb3_call", ids, request, name, args, kwargs)
        answers = [iter(reply) for reply in replies]
        return [next(answers[i]) for i in ids]

    def _require_all(self, indices: VecEnvIndices, method: str) -> list[int]:
        ids = self._env_ids(indices)
        if sorted(ids) != list(range(self.num_envs)):
            raise NotImplementedError(
                f"{method} on some envs only (indices={ids}) needs each env wrapped in "
                "vecfast.wrappers.sb3.SB3Bridge; gymnasium's vector API reaches all envs at once"
            )
        return ids


@contextlib.contextmanager
def _as_attribute_error() -> Iterator[None]:
    """Re-raise a worker's AttributeError as one, so that ``has_attr``-style checks work.

    (Vector envs whose ``EnvError`` is already an instance of the env's exception type
    need no conversion.)
    """
    try:
        yield
    except EnvError as exc:
        if exc.exc_type == "AttributeError" and not isinstance(exc, AttributeError):
            raise AttributeError(str(exc)) from exc
        raise


def _batch_actions(space: spaces.Space, rows: list[Any]) -> Any:
    """One action per env (SB3's layout) as gymnasium's batch: dicts and tuples of arrays.

    Values are stacked as they are; the vector env casts them to the space's dtypes.
    """
    if isinstance(space, spaces.Dict):
        return {key: _batch_actions(sub, [row[key] for row in rows]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_batch_actions(sub, [row[i] for row in rows]) for i, sub in enumerate(space.spaces))
    return np.stack(rows)


def _unbatch_infos(infos: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """gymnasium's batched info dict (arrays plus ``_key`` masks) as one dict per env.

    Python scalars come back as Python scalars, as the env returned them, so that infos
    equal DummyVecEnv's; other values come back as gymnasium batched them.
    """
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue  # a mask
        mask = infos.get(f"_{key}")
        rows = range(num_envs) if mask is None else np.flatnonzero(mask)
        if isinstance(value, dict):
            per_env = _unbatch_infos(value, num_envs)
            for i in rows:
                out[i][key] = per_env[i]
        elif value.dtype in _PYTHON_SCALAR_DTYPES and value.ndim == 1:
            for i in rows:
                out[i][key] = value[i].item()
        else:
            for i in rows:
                out[i][key] = value[i]
    return out


def _tree_row(tree: Any, row: int) -> Any:
    if isinstance(tree, dict):
        return {key: _tree_row(value, row) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_tree_row(value, row) for value in tree)
    return tree[row]


def _copy_tree(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {key: _copy_tree(value) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_copy_tree(value) for value in tree)
    return np.array(tree)


class _Bridged:
    """Picklable env factory: ``env_fn()`` wrapped in :class:`SB3Bridge`."""

    def __init__(self, env_fn: Callable[[], gym.Env]) -> None:
        self.env_fn = env_fn

    def __call__(self) -> gym.Env:
        return SB3Bridge(self.env_fn())


def make_vec_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_class: Callable[[gym.Env], gym.Env] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type[VectorEnv] | type[VecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """SB3's :func:`~stable_baselines3.common.env_util.make_vec_env`, on vecfast's vector env.

    The envs are built exactly as SB3 builds them (same ``Monitor``, ``wrapper_class``,
    default ``render_mode="rgb_array"``, action-space seeds, seeds for the first reset):
    this calls SB3's function and only swaps the vector env. ``vec_env_cls`` is a
    gymnasium :class:`~gymnasium.vector.VectorEnv` class (default
    :class:`~vecfast.AsyncSharedMemVectorEnv`) that ``vec_env_kwargs`` go to, in
    ``AutoresetMode.SAME_STEP`` unless they say otherwise; an SB3 ``VecEnv`` class
    (``DummyVecEnv``, ``SubprocVecEnv``) gives exactly what SB3 would, for comparisons.
    """
    if isinstance(vec_env_cls, type) and issubclass(vec_env_cls, VecEnv):
        build: Callable[..., VecEnv] = vec_env_cls
    else:
        vector_cls = vec_env_cls or AsyncSharedMemVectorEnv

        def build(env_fns: list[Callable[[], gym.Env]], **kwargs: Any) -> VecEnv:
            kwargs.setdefault("autoreset_mode", AutoresetMode.SAME_STEP)
            return SB3VecEnv(vector_cls([_Bridged(fn) for fn in env_fns], **kwargs))

    return sb3_make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        start_index=start_index,
        monitor_dir=monitor_dir,
        wrapper_class=wrapper_class,
        env_kwargs=env_kwargs,
        vec_env_cls=build,  # type: ignore[arg-type]  (SB3 only calls it with the env fns and kwargs)
        vec_env_kwargs=vec_env_kwargs,
        monitor_kwargs=monitor_kwargs,
        wrapper_kwargs=wrapper_kwargs,
    )
