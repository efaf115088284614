"""A run resolved once: ``vecfast.train``'s arguments as a :class:`RunSpec` that one process, or every rank of a
distributed run, runs (:func:`vecfast.trainers.run.runner.run`).

Resolving is where every choice about a run is made, the same way for a new run and a resumed one: the env's
source (:mod:`~vecfast.trainers.run.env_source`), the algorithm and scheme, the config's layers
(:class:`~vecfast.trainers.run.defaults.ConfigLayers`: defaults, env recipe, a resumed run's config, the caller's
keys; the env family's once its env is built), the run directory, and ``num_workers="auto"``'s measurement.
A bad key or value fails here, before any env or rank starts.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vecfast.extras import require
from vecfast.trainers.base import collective
from vecfast.trainers.base.runtime import resolve_device
from vecfast.trainers.config import AUTO, TrainConfig, check_keys
from vecfast.trainers.registry import Recipe, resolve
from vecfast.trainers.run.defaults import ConfigLayers
from vecfast.trainers.run.env_source import EnvSource
from vecfast.trainers.run.launch import RankInfo
from vecfast.trainers.run.run_dir import check_run_dir, default_run_dir, env_kwargs_data, load_checkpoint
from vecfast.trainers.run.tune import Tuning


@dataclass(frozen=True)
class RunSpec:
    """Everything a run needs, resolved; picklable (a launcher sends it to its ranks) where its env and
    ``policy_mapping`` are.

    ``resume``: the run continues ``run_dir`` (the caller's ``resume=True``, or a launcher's restart), so the
    directory may hold it already; ``resume_required``: its checkpoint must be there (a restart before the first
    checkpoint starts afresh).
    """

    source: EnvSource
    recipe: Recipe
    layers: ConfigLayers
    total_env_steps: int
    run_dir: Path | None
    live: bool = False
    resume: bool = False
    resume_required: bool = False
    policy_mapping: Callable[[Any, Any], int] | None = None
    tuning: Tuning | None = None
    state: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The checkpoint resolving read (the run continues from it), kept for :meth:`newest_state` in this process;
    not pickled: a launcher's ranks read it again (rank 0 for all)."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "state": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    def sampling_config(self) -> TrainConfig:
        """The config before the env's family is known: what builds the env and places the run."""
        return self.layers.config()

    def newest_state(self) -> dict[str, Any] | None:
        """The checkpoint the run continues from (rank 0 reads it), or None for a new run."""
        if not self.resume or self.run_dir is None:
            return None
        if self.state is not None:
            return self.state
        return collective.from_main(lambda: _newest_state(self.run_dir, self.resume_required))


def resolve_run(
    env: Any,
    algo: str,
    total_env_steps: int,
    run_dir: str | os.PathLike | None,
    live: bool,
    resume: bool,
    *,
    scheme: str | None,
    num_processes: int | None,
    env_kwargs: Mapping[str, Any] | None,
    num_envs: int | None,
    policy_mapping: Callable[[Any, Any], int] | None,
    overrides: Mapping[str, Any],
    rank: RankInfo | None,
    valid_arguments: Iterable[str] = (),
) -> RunSpec:
    """``vecfast.train``'s arguments as a :class:`RunSpec` (see the module docstring).

    ``rank``: this process's place in a launched run (None outside one, or in the process that launches the
    ranks); a rank the launcher restarted continues the run. ``valid_arguments``: the caller's own argument
    names, which a misspelt key is matched against besides the config's.
    """
    check_keys(overrides, valid_arguments)
    recipe = resolve(algo, scheme)
    if num_envs is not None and "num_envs_per_worker" in overrides:
        raise ValueError("give num_envs (in all) or num_envs_per_worker, not both")
    if not recipe.scheme_spec.distributed and num_processes not in (None, 1):
        raise ValueError(f"num_processes is for distributed schemes (algo='ddppo'); {recipe.label} runs in one")
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    source = EnvSource.of(env, env_kwargs_data(dict(env_kwargs or {})))
    if num_envs is not None and source.id is None and not source.is_game:
        raise TypeError("num_envs is for an env id or a PettingZoo module, which vecfast makes; a given env is made")
    if recipe.scheme_spec.distributed and rank is None and source.is_vector_env:
        raise TypeError("a distributed run builds one vector env per rank: pass an env id or a function")
    restarted = rank is not None and rank.restarts > 0  # by the launcher: continue where the run was
    continues = resume or restarted
    if run_dir is None and rank is not None:
        run_dir = _launched_run_dir(source, recipe)
    if run_dir is not None:
        run_dir = Path(run_dir)
        collective.from_main(lambda: check_run_dir(run_dir, continues))  # before the envs start
    elif resume:
        raise ValueError("resume=True needs the run_dir to resume")
    saved: dict[str, Any] = {}
    state = None
    if continues and run_dir is not None:
        state = collective.from_main(lambda: _newest_state(run_dir, required=resume))
        if state is not None:
            _check_same_recipe(state, recipe, run_dir)
            saved = dict(state["config"])
            source = EnvSource.of(source.env, {**state.get("env_kwargs", {}), **source.kwargs})
    layers = ConfigLayers(recipe, source.given_name, saved, dict(overrides)).with_num_envs(num_envs)
    tuning = None
    if layers.merged().get("num_workers") == AUTO:
        tuning = _auto_tune(source, recipe, layers)
        choice = tuning.choice
        layers = layers.with_user(num_workers=choice.num_workers, num_envs_per_worker=choice.num_envs_per_worker)
    cfg = layers.config()
    resolve_device(cfg)  # bad keys or values, or a device this machine lacks, fail before the envs
    _check_acting_plan(recipe, cfg, policy_mapping)
    _check_ray(recipe, cfg, source)
    if run_dir is None and rank is None and source.id is not None:
        run_dir = default_run_dir(source.id, recipe.label)  # named before the envs start: their chatter goes there
    return RunSpec(
        source,
        recipe,
        layers,
        total_env_steps,
        run_dir,
        live=live,
        resume=continues,
        resume_required=resume,
        policy_mapping=policy_mapping,
        tuning=tuning,
        state=state,
    )


def _check_acting_plan(recipe: Recipe, cfg: TrainConfig, policy_mapping: Any) -> None:
    """Populations and their ``policy_mapping`` where the scheme runs them (before the envs start)."""
    if policy_mapping is not None and cfg.num_policies == 1:
        raise ValueError("policy_mapping is for populations (num_policies > 1); this run trains one policy")
    if cfg.num_policies > 1 and (recipe.scheme_spec.distributed or not recipe.scheme_spec.takes_plan):
        raise ValueError(
            f"num_policies={cfg.num_policies}: populations train under the sync and async schemes (algo='ppo' or "
            f"'appo'), not {recipe.label}"
        )


def _check_ray(recipe: Recipe, cfg: TrainConfig, source: EnvSource) -> None:
    """Sampling on a Ray cluster where it is built: APPO, on envs that vecfast makes (before Ray starts)."""
    if cfg.ray_address is None:
        return
    require("ray", "ray_address")
    if recipe.scheme != "async":
        raise ValueError(
            f"ray_address: samplers on a Ray cluster feed the asynchronous scheme (algo='appo'), not {recipe.label}"
        )
    if source.is_vector_env or (source.id is None and not source.is_game):
        raise ValueError(
            "ray_address: each sampler makes its envs on its node from an env id or a PettingZoo game's module (a "
            "given env or factory samples on this machine)"
        )
    if cfg.sampler_inference == "local" and source.is_game:
        raise ValueError(
            "sampler_inference='local': a sampler acts with one policy, and a game's matches seat the learner against "
            "its opponents: sampler_inference='central' acts for every seat on the learner"
        )
    if cfg.sampler_inference == "local" and cfg.num_policies > 1:
        raise ValueError(
            f"sampler_inference='local': a sampler acts with one copy of one policy, not a population of "
            f"num_policies={cfg.num_policies} (sampler_inference='central' acts for them all on the learner)"
        )


def train_arguments(function: Callable[..., Any]) -> list[str]:
    """The named arguments of ``function`` (``train``'s own, which are no config keys)."""
    return [
        name
        for name, p in inspect.signature(function).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


def _auto_tune(source: EnvSource, recipe: Recipe, layers: ConfigLayers) -> Tuning:
    """``num_workers="auto"``: measure and choose before anything else starts; print why."""
    import sys

    from vecfast.trainers.run.tune import tune

    if source.id is None:
        raise ValueError(
            "num_workers='auto' needs an env id: vecfast tunes the vector env it builds "
            "(a given env or factory has its workers already)"
        )
    tuning = tune(source.id, recipe.label, env_kwargs=dict(source.kwargs), layers=layers)
    print("\n".join(tuning.lines()), file=sys.stderr)
    return tuning


def _launched_run_dir(source: EnvSource, recipe: Recipe) -> Path | None:
    """The default run directory of a run whose ranks a launcher started (torchrun, SLURM), the same in every rank
    and after the launcher's restarts: named by the launcher's run id (torchrun's ``--rdzv-id``; ``--standalone``
    draws one)."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID")
    if run_id is None or source.id is None:
        return None  # rank 0 chooses one (a restart then starts a new run: pass run_dir to resume)
    return default_run_dir(source.id, recipe.label, suffix=run_id)


def _newest_state(run_dir: str | os.PathLike, required: bool) -> dict[str, Any] | None:
    try:
        return load_checkpoint(run_dir, "last")
    except FileNotFoundError:
        if required:
            raise
        return None  # restarted before the first checkpoint: start again


def _check_same_recipe(state: dict[str, Any], recipe: Recipe, run_dir: str | os.PathLike) -> None:
    saved = resolve(state["algo"], state.get("scheme"))  # runs saved before schemes were separate: "appo", "ppo"
    if (saved.algo, saved.scheme) != (recipe.algo, recipe.scheme):
        raise ValueError(f"{run_dir} was trained with algo={saved.label!r}, not {recipe.label!r}")
