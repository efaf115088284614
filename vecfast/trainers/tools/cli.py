"""``vecfast train``, ``tune``, ``evaluate``, ``enjoy`` and ``view``: the trainers on the command line.

Every :class:`TrainConfig` key is an option under its Sample Factory name
(``--num_workers 2``; ``--num-workers`` works too; ``--num_workers auto`` tunes first). Options are
never abbreviated: ``--num-envs`` is the envs in all, not a prefix of ``--num-envs-per-worker``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vecfast.command_line import CommandError, add_env_kwarg_option, check_env_id, env_kwarg
from vecfast.extras import TRAIN_MODULES
from vecfast.trainers import entry_defaults
from vecfast.trainers.config import AUTO, CONFIG_GROUPS, TUNED_KEYS, TrainConfig, field_docs

# Only the handlers import torch (through train, tune, enjoy, the registry): `--help` stays fast.
_NAMES = {int: "an int", float: "a number", bool: "true or false", str: "a string"}
_METAVARS = {int: "N", float: "X", bool: "true|false", str: "NAME"}


def _value_parser(kinds: list[type], words: dict[str, Any]) -> Callable[[str], Any]:
    """Parse a value of the first of ``kinds`` that takes it, or one of ``words`` ("none", "auto")."""

    def parse(value: str) -> Any:
        if value.lower() in words:
            return words[value.lower()]
        for kind in kinds:
            if kind is bool and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if kind is not bool:
                try:
                    return kind(value)
                except ValueError:
                    pass
        expected = [_NAMES.get(kind, kind.__name__) for kind in kinds] + [repr(word) for word in words]
        raise argparse.ArgumentTypeError(f"expected {' or '.join(expected)}, got {value!r}")

    parse.__name__ = " or ".join([kind.__name__ for kind in kinds] + list(words))
    return parse


class _BooleanFlag(argparse.Action):
    """``--key`` (true) or Sample Factory's ``--key true|false``; ``--no-key`` (false) is added beside it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", const=True, type=_value_parser([bool], {}), **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)


def _value_kwargs(name: str, hint: Any) -> dict[str, Any]:
    """How argparse reads a config key of type ``hint``; a ``str`` beside other types stands for "auto"."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kinds = [arg for arg in args if arg is not type(None)]
    if kinds == [bool] and len(args) == 1:
        return {"action": _BooleanFlag, "metavar": "true|false"}
    if typing.get_origin(kinds[0]) is tuple:
        item = typing.get_args(kinds[0])[0]
        return {"nargs": "*", "type": item, "metavar": "N" if item is int else "KEY"}
    if typing.get_origin(kinds[0]) is dict:  # KEY=VALUE pairs, read as --env-kwarg reads them
        return {"nargs": "*", "type": env_kwarg, "metavar": "KEY=VALUE"}
    words = {"none": None} if len(kinds) < len(args) else {}
    if name == "num_workers" or (str in kinds and len(kinds) > 1):  # num_workers="auto" is train()'s
        words[AUTO] = AUTO
        kinds = [kind for kind in kinds if kind is not str]
    metavar = "|".join([_METAVARS.get(kind, kind.__name__) for kind in kinds] + list(words))
    return {"type": _value_parser(kinds, words), "metavar": metavar}


def _shown(value: Any) -> str:
    """A default as it is written on the command line."""
    if isinstance(value, tuple):
        return " ".join(map(str, value)) or "(none)"
    return str(value).lower() if value is None or isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class HelpDefaults:
    """The config defaults that a run of one env takes, for ``vecfast train ENV --help``."""

    env: str
    algo: str
    values: dict[str, Any]


def help_defaults(argv: Sequence[str]) -> HelpDefaults | None:
    """For ``vecfast train ENV [--algo A] [--scheme S] [--env-kwarg K=V] --help``: the config a run of ENV starts
    from (the scheme's, env family's, algorithm's and env preset's defaults), which needs the env's observations;
    None for any other command line, or if the env cannot be made (the help then shows TrainConfig's own)."""
    argv = list(argv)
    if not argv or argv[0] != "train" or not {"-h", "--help"} & set(argv):
        return None
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("env_id", nargs="?")
    pre.add_argument("--algo", default=entry_defaults.ALGO)
    pre.add_argument("--scheme")
    add_env_kwarg_option(pre, "")
    known, _ = pre.parse_known_args(argv[1:])
    if known.env_id is None:
        return None
    try:
        import gymnasium

        from vecfast.trainers.registry import resolve
        from vecfast.trainers.run.defaults import ConfigLayers
        from vecfast.trainers.run.env_source import EnvSource

        recipe = resolve(known.algo, known.scheme)
        source = EnvSource.of(known.env_id, dict(known.env_kwarg))
        if source.id is not None:
            env = gymnasium.make(source.id, **source.kwargs)  # one env: its observations are the vector env's
            space = env.observation_space
        else:
            env = source.build(1)
            space = env.single_observation_space
        env.close()
        return HelpDefaults(known.env_id, recipe.label, ConfigLayers(recipe, source.given_name).merged(space))
    except Exception:  # help must not fail: it shows TrainConfig's own defaults then
        return None


def _add_config_options(
    parser: argparse.ArgumentParser, exclude: tuple[str, ...] = (), defaults: HelpDefaults | None = None
) -> None:
    hints = typing.get_type_hints(TrainConfig)
    docs = field_docs()
    shown = (
        f"shown with the defaults a run of {defaults.env} with {defaults.algo} starts from (the scheme's, the env "
        "family's, the algorithm's and the env's own preset over TrainConfig's)"
        if defaults is not None
        else "shown with TrainConfig's defaults: envs without image observations get a small MLP's "
        "(vecfast.trainers.run.defaults.VECTOR_FAMILY_DEFAULTS), and an algorithm may have its own (ppo's num_epochs, "
        "...); `vecfast train ENV --help` shows those of ENV"
    )
    parser.add_argument_group(
        "config",
        f"TrainConfig keys by concern, {shown}; a resumed run keeps its config. 'none' sets an optional key to None; "
        "a boolean is --key, --key true|false or --no-key.",
    )
    values = defaults.values if defaults is not None else {}
    fields = {field.name: field for field in dataclasses.fields(TrainConfig)}
    for concern, keys in CONFIG_GROUPS.items():
        group = parser.add_argument_group(f"config: {concern}")
        for field in (fields[key] for key in keys if key not in exclude):
            names = [f"--{field.name}"] + ([f"--{field.name.replace('_', '-')}"] if "_" in field.name else [])
            default = values.get(field.name, field.default)
            text = f"{docs.get(field.name, '')} (default: {_shown(default)})".replace("%", "%%")
            kwargs = _value_kwargs(field.name, hints[field.name])
            group.add_argument(*names, dest=field.name, default=argparse.SUPPRESS, help=text, **kwargs)
            if kwargs.get("action") is _BooleanFlag:
                negated = [f"--no-{name.removeprefix('--')}" for name in names]
                group.add_argument(*negated, dest=field.name, action="store_false", default=argparse.SUPPRESS,
                                   help=argparse.SUPPRESS)  # fmt: skip


def _config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    hints = typing.get_type_hints(TrainConfig)
    overrides = {k: v for k, v in vars(args).items() if k in hints}
    for key, value in overrides.items():  # KEY=VALUE pairs into the dict they stand for
        kinds = typing.get_args(hints[key]) or (hints[key],)
        if isinstance(value, list) and any(typing.get_origin(kind) is dict for kind in kinds):
            overrides[key] = dict(value)
    return overrides


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return number


def add_train_commands(subparsers: Any, defaults: HelpDefaults | None = None) -> None:
    """Add ``train``, ``tune``, ``evaluate``, ``enjoy``, ``export`` and ``view`` to the ``vecfast`` command's
    subparsers; ``defaults``: the config defaults ``train --help`` shows (:func:`help_defaults`)."""
    _add_train(subparsers, defaults)
    for add in (_add_tune, _add_evaluate, _add_enjoy, _add_export, _add_view):
        add(subparsers)


def _add_train(subparsers: Any, defaults: HelpDefaults | None) -> None:
    """``vecfast train``: every config key an option (:func:`_add_config_options`), with what train() takes besides."""
    train = subparsers.add_parser(
        "train",
        usage="%(prog)s [-h] [ENV_ID] [options]",
        help="train an agent (APPO by default) and keep a run directory",
        description="Train on a gymnasium env id; Ctrl-C stops, saving a final checkpoint. "
        "--resume RUN_DIR continues a run as it was (its env, algorithm, total and config): "
        "the options given change only themselves.",
    )
    train.add_argument(
        "env_id",
        nargs="?",
        metavar="ENV_ID",
        help="registered gymnasium id, e.g. vecfast/DoomBasic-v0, CartPole-v1 or ALE/Pong-v5, or a PettingZoo "
        "module, e.g. pettingzoo.classic.connect_four_v3 (self-play; with --resume: the run's)",
    )
    train.add_argument(
        "--algo",
        help=f"registered algorithm (ppo), or a pair's name: appo (ppo, async), ddppo (ppo, distributed) "
        f"(default {entry_defaults.ALGO}; --resume: the run's)",
    )
    train.add_argument(
        "--scheme",
        help="how the algorithm runs: sync (the default for an algorithm), async, distributed (one rank per "
        "process: under torchrun, or --num-processes N here; --resume: the run's)",
    )
    train.add_argument(
        "--num-processes",
        type=int,
        metavar="N",
        help="distributed schemes: start N ranks on this machine (default: one per core, one per GPU on CUDA; "
        "under torchrun: the ranks it starts)",
    )
    train.add_argument(
        "--total-env-steps",
        "--train_for_env_steps",
        type=int,
        dest="total",
        metavar="N",
        help=f"env steps to train for in all (default {entry_defaults.TOTAL_ENV_STEPS:,}; --resume: the run's)",
    )
    train.add_argument(
        "--num-envs",
        type=_positive_int,
        metavar="N",
        help="envs in all (per rank), split over --num_workers as vecfast bench does (instead of "
        "--num_envs_per_worker)",
    )
    add_env_kwarg_option(train, "kept in the run's config.json: --resume and evaluate make the same env")
    train.add_argument("--run-dir", type=Path, help="a new or empty directory (default runs/<env>_<algo>_<time>)")
    train.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint"
    )
    train.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="options from a YAML or JSON file under their command-line names (env, algo, total_env_steps, "
        "env_kwargs, any config key); a run's RUN_DIR/config.json replays that run; the command line's win",
    )
    train.add_argument(
        "--live",
        action=argparse.BooleanOptionalAction,
        help="the live dashboard instead of progress lines (default: when stdout is a terminal)",
    )
    _add_config_options(train, defaults=defaults)
    train.set_defaults(handler=_train, needs=TRAIN_MODULES)


def _add_tune(subparsers: Any) -> None:
    """``vecfast tune``: :func:`~vecfast.trainers.run.tune.tune` on the command line."""
    tuner = subparsers.add_parser(
        "tune",
        usage="%(prog)s [-h] ENV_ID [options]",
        help="measure env step and inference time here, choose num_workers and num_envs_per_worker",
        description="Time env steps (random actions) and the policy's inference, then choose the double-buffered "
        "sampling layout by Sample Factory's condition k/2 > ceil(t_inf / t_env); print the reasoning.",
    )
    tuner.add_argument("env_id", help="registered gymnasium id")
    tuner.add_argument(
        "--algo",
        default=entry_defaults.TUNE_ALGO,
        help=f"registered double-buffered algorithm (default {entry_defaults.TUNE_ALGO})",
    )
    tuner.add_argument(
        "--seconds",
        type=float,
        default=entry_defaults.TUNE_SECONDS,
        help=f"timing of env steps; inference gets half (default {entry_defaults.TUNE_SECONDS:g})",
    )
    add_env_kwarg_option(tuner, "as train takes them")
    _add_config_options(tuner, exclude=TUNED_KEYS)  # the model and device keys shape t_inf
    tuner.set_defaults(handler=_tune, needs=TRAIN_MODULES)


def _add_evaluate(subparsers: Any) -> None:
    """``vecfast evaluate``: :func:`~vecfast.trainers.run.evaluation.evaluate` on the command line."""
    evaluator = subparsers.add_parser(
        "evaluate",
        help="measure a trained policy: mean return and the env's metrics (success, SPL, ...) over N episodes",
        description="Run the policy of RUN_DIR for whole episodes on a fresh env (the run's, made with its env "
        "arguments as it trained, unless --env) and print the mean return and length and the means of the env's "
        "episode metrics; a PettingZoo game's run plays whole games against --opponent and prints its win, draw "
        "and loss rates. vecfast.evaluate in Python.",
    )
    evaluator.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    evaluator.add_argument("--env", metavar="ENV_ID", help="evaluate on this env id instead of the run's")
    evaluator.add_argument(
        "--episodes",
        type=_positive_int,
        help=f"whole episodes (default {entry_defaults.EVALUATION_EPISODES}; "
        f"{entry_defaults.EVALUATION_GAMES} games against an opponent)",
    )
    evaluator.add_argument(
        "--split", help="the env's split, e.g. val for PointNav's held-out scenes (the same as --env-kwarg split=...)"
    )
    evaluator.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the most likely")
    evaluator.add_argument("--json", action="store_true", help="print the result as one JSON object")
    evaluator.add_argument(
        "--checkpoint",
        choices=["last", "best"],
        default=entry_defaults.CHECKPOINT,
        help="the newest checkpoint (default) or the one with the best mean return",
    )
    evaluator.add_argument(
        "--opponent",
        metavar="OPPONENT",
        help="a PettingZoo game's opponent: random (the default), initial (the run's untrained model), a run "
        "directory or checkpoint, or module:function (a bot factory function(seed) -> bot, e.g. "
        "vecfast.selfplay.bots:one_ply_connect_four); episodes are whole games, seats alternating",
    )
    evaluator.add_argument("--num-envs", type=_positive_int, metavar="N", help="envs (default: min(episodes, 8))")
    evaluator.add_argument("--max-steps", type=_positive_int, metavar="N", help="cut an episode there (default: none)")
    evaluator.add_argument(
        "--seed",
        type=int,
        default=entry_defaults.EVALUATION_SEED,
        help=f"env i resets with seed + i (default {entry_defaults.EVALUATION_SEED})",
    )
    add_env_kwarg_option(evaluator, "over the run's own")
    evaluator.set_defaults(handler=_evaluate, needs=TRAIN_MODULES)


def _add_enjoy(subparsers: Any) -> None:
    """``vecfast enjoy``: :func:`~vecfast.trainers.tools.enjoy.enjoy` on the command line."""
    enjoy = subparsers.add_parser(
        "enjoy",
        help="run a trained policy, print episode returns, write a video",
        description="Run the policy of RUN_DIR for some episodes on a fresh env; write an mp4 or gif.",
    )
    enjoy.add_argument("run_dir", type=Path)
    enjoy.add_argument("--episodes", type=int, default=entry_defaults.ENJOY_EPISODES)
    enjoy.add_argument(
        "--checkpoint",
        choices=["last", "best"],
        default=entry_defaults.CHECKPOINT,
        help="the newest checkpoint (default) or the one with the best mean return",
    )
    enjoy.add_argument("--video", type=Path, help="output .mp4 or .gif (default RUN_DIR/enjoy.mp4)")
    enjoy.add_argument("--no-video", action="store_true", help="only print the returns")
    enjoy.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the most likely")
    enjoy.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help=f"per episode (default: {entry_defaults.ENJOY_MAX_STEPS}; games: whole)",
    )
    enjoy.add_argument("--seed", type=int, default=entry_defaults.ENJOY_SEED)
    add_env_kwarg_option(enjoy, "over the run's own")
    enjoy.set_defaults(handler=_enjoy, needs=TRAIN_MODULES)


def _add_export(subparsers: Any) -> None:
    """``vecfast export``: :func:`~vecfast.trainers.tools.export.export_run` on the command line."""
    exporter = subparsers.add_parser(
        "export",
        help="write a run's policy as ONNX or TorchScript",
        description="Write RUN_DIR's policy (its most likely actions) as an ONNX or TorchScript file that runs "
        "without vecfast: inputs named after the observation's entries (obs for a plain one) and state_in if "
        "recurrent (zeros start an episode); outputs action and, if recurrent, state_out.",
    )
    exporter.add_argument("run_dir", type=Path)
    exporter.add_argument("--format", choices=("onnx", "torchscript"), default=entry_defaults.EXPORT_FORMAT)
    exporter.add_argument("--out", type=Path, help="the file to write (default RUN_DIR/policy.onnx or policy.pt)")
    exporter.add_argument(
        "--checkpoint",
        choices=("last", "best"),
        default=entry_defaults.CHECKPOINT,
        help="the newest checkpoint (default) or the best",
    )
    exporter.add_argument("--policy", type=int, default=0, help="which of a population's policies (default 0)")
    exporter.add_argument(
        "--check",
        type=int,
        default=0,
        metavar="N",
        help="then step the run's env for N observations and report how often the file chose the policy's action",
    )
    exporter.set_defaults(handler=_export, needs=TRAIN_MODULES)


def _add_view(subparsers: Any) -> None:
    """``vecfast view``: the live dashboard of a run directory."""
    view = subparsers.add_parser(
        "view",
        help="live dashboard of a running or finished run",
        description="Follow RUN_DIR/metrics.jsonl in a terminal dashboard; q or Ctrl-C quits.",
    )
    view.add_argument("run_dir", type=Path)
    view.add_argument("--once", action="store_true", help="draw the current state and exit")
    view.set_defaults(handler=_view, needs=("rich",))


def _read_run(run_dir: Path, checkpoint: bool) -> dict[str, Any]:
    """RUN_DIR's config.json; a CommandError unless it is there (and, if ``checkpoint``, a checkpoint too)."""
    if not run_dir.is_dir():
        raise CommandError(f"no run directory {str(run_dir)!r}")
    try:
        run = json.loads((run_dir / "config.json").read_text())
    except FileNotFoundError:
        raise CommandError(f"{str(run_dir)!r} holds no run: it has no config.json") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{str(run_dir / 'config.json')!r} is not valid JSON: {exc}") from exc
    if checkpoint and not _checkpoint_steps(run_dir):
        raise CommandError(f"{str(run_dir)!r} has no checkpoint (checkpoints/last_*.pt) yet")
    return run


def _checkpoint_steps(run_dir: Path) -> list[int]:
    """The env steps of the run's numbered checkpoints, newest first."""
    from vecfast.trainers.run.run_dir import last_checkpoints

    return [int(path.stem.removeprefix("last_")) for path in last_checkpoints(run_dir)]


def _check_run_dir_free(run_dir: Path, resume: bool) -> None:
    """Fail before any env starts, as RunDir would after: a new run needs an empty directory, no live run."""
    from vecfast.trainers.run.run_dir import RunDirExistsError, RunDirInUseError, check_run_dir

    try:
        check_run_dir(run_dir, resume)
    except (RunDirExistsError, RunDirInUseError) as exc:
        raise CommandError(str(exc)) from None


def _recipe(algo: str, scheme: str | None = None) -> Any:
    """What ``algo`` and ``scheme`` name (:class:`vecfast.trainers.registry.Recipe`); a CommandError naming
    the registered ones if either is unknown."""
    from vecfast.trainers.registry import resolve

    try:
        return resolve(algo, scheme)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _check_config(
    algo: str, scheme: str | None, env_id: str, config: dict[str, Any], num_envs: int | None, saved: dict[str, Any]
) -> None:
    """Validate the config layers as train() will (the env family's defaults are valid with any), the split of
    ``num_envs`` and the device, before anything starts. ``saved``: a resumed run's config."""
    from vecfast.trainers.base.runtime import resolve_device
    from vecfast.trainers.run.defaults import ConfigLayers
    from vecfast.trainers.schemes.synchronous import check_rollout_splits

    recipe = _recipe(algo, scheme)
    try:
        layers = ConfigLayers(recipe, env_id, saved, config).with_num_envs(num_envs)
        tuned = layers.merged().get("num_workers") == AUTO
        if tuned:  # tuning chooses them
            layers = layers.without(TUNED_KEYS)
        cfg = layers.config()
        resolve_device(cfg)
        if recipe.scheme in ("sync", "distributed") and not tuned:  # the schemes that run SyncTrainer
            check_rollout_splits(cfg.num_envs, cfg)
    except (TypeError, ValueError) as exc:
        raise CommandError(f"invalid config: {exc}") from None


def _train(args: argparse.Namespace) -> int:
    overrides = _config_overrides(args)
    if args.config is not None:
        _take_config_file(args, overrides)
    if args.num_envs is not None and "num_envs_per_worker" in overrides:
        raise CommandError("give --num-envs (in all) or --num_envs_per_worker, not both")
    if args.resume is not None:
        env_id, algo, scheme, total, run_dir, saved = _resumed(args)
        _check_config(algo, scheme, env_id, overrides, args.num_envs, saved)
    else:
        if args.env_id is None:
            raise CommandError("the env id is missing (e.g. CartPole-v1); --resume RUN_DIR continues a run")
        env_id, algo, scheme, run_dir = args.env_id, args.algo or entry_defaults.ALGO, args.scheme, args.run_dir
        total = entry_defaults.TOTAL_ENV_STEPS if args.total is None else args.total
        _check_env(env_id)
        _check_config(algo, scheme, env_id, overrides, args.num_envs, {})

    from vecfast.trainers.run.launch import rank_from_environment

    rank = rank_from_environment()  # under torchrun or srun: every rank runs this command
    if run_dir is not None and rank is None:  # (in a launched run, rank 0 checks for all)
        _check_run_dir_free(run_dir, resume=args.resume is not None)

    from vecfast.trainers.run.training import train

    result = train(
        env_id,
        algo=algo,
        total_env_steps=total,
        run_dir=run_dir,
        live=sys.stdout.isatty() if args.live is None else args.live,
        resume=args.resume is not None,
        scheme=scheme,
        num_processes=args.num_processes,
        env_kwargs=dict(args.env_kwarg),  # a resumed run's own, with these over them
        num_envs=args.num_envs,
        **overrides,  # only the options given: a resumed run keeps the rest of its config
    )
    if rank is None or rank.is_main:
        _print_summary(json.dumps({"run_dir": str(result.run_dir), **result.stats}, indent=2, default=str))
    # Ctrl-C: the status a shell expects of a command it interrupted (128 + SIGINT); a scheduler's SIGTERM or
    # SIGUSR1 is a stop it asked for, with a final checkpoint: success
    return 128 + signal.SIGINT if result.stats.get("stopped_by") == "SIGINT" else 0


def _take_config_file(args: argparse.Namespace, overrides: dict[str, Any]) -> None:
    """``--config FILE``'s options where the command line gives none (:mod:`~vecfast.trainers.tools.config_file`),
    into ``args`` and ``overrides``."""
    from vecfast.trainers.tools.config_file import read_config_file

    if args.resume is not None:
        raise CommandError("--config starts a new run from a file's options; --resume continues a run with its own")
    try:
        file = read_config_file(args.config)
    except (ValueError, ImportError) as exc:
        raise CommandError(str(exc)) from exc
    if args.num_envs is not None:  # envs in all, given here: the file's split of them gives way
        file.config.pop("num_envs_per_worker", None)
    if "num_envs_per_worker" in overrides:
        file.num_envs = None
    for key, value in file.config.items():
        overrides.setdefault(key, value)
    args.env_id = args.env_id or file.env
    args.algo, args.scheme = args.algo or file.algo, args.scheme or file.scheme
    args.total = args.total if args.total is not None else file.total_env_steps
    args.num_envs = args.num_envs if args.num_envs is not None else file.num_envs
    args.num_processes = args.num_processes if args.num_processes is not None else file.num_processes
    args.run_dir = args.run_dir or file.run_dir
    args.env_kwarg = [*file.env_kwargs.items(), *args.env_kwarg]  # the command line's last: they win


def _print_summary(text: str) -> None:
    """Print to stdout; a reader gone away (the Ctrl-C that stopped training killed ``| tee``) costs the
    summary, not the exit status: the final checkpoint is saved, and stderr said so."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush must not fail


def _resumed(args: argparse.Namespace) -> tuple[str, str, str | None, int, Path, dict[str, Any]]:
    """The env id, algorithm, scheme, total env steps, directory and config of the run that --resume continues."""
    run_dir = args.resume
    if args.run_dir is not None and args.run_dir.resolve() != run_dir.resolve():
        raise CommandError(f"--run-dir {args.run_dir} is not --resume {run_dir}: a run continues in its directory")
    run = _read_run(run_dir, checkpoint=True)
    saved = _recipe(run["algo"], run.get("scheme"))  # runs saved before schemes were separate name a pair
    if args.env_id is not None and args.env_id != run["env"]:
        raise CommandError(
            f"{str(run_dir)!r} is a run of env {run['env']!r}, not {args.env_id!r}: leave the env id out to "
            "continue it, or start a new run"
        )
    if args.algo is not None or args.scheme is not None:
        given = _recipe(args.algo or saved.algo, args.scheme)
        if (given.algo, given.scheme) != (saved.algo, saved.scheme):
            raise CommandError(
                f"{str(run_dir)!r} is a run of algo {saved.label!r}, not {given.label!r}: leave --algo and "
                "--scheme out to continue it, or start a new run"
            )
    _check_env(run["env"])
    total = run["total_env_steps"] if args.total is None else args.total
    steps = _checkpoint_steps(run_dir)[0]
    if steps >= total:
        raise CommandError(
            f"{str(run_dir)!r} has trained its {total:,} env steps (its newest checkpoint is at {steps:,}): "
            "--total-env-steps N continues it to N"
        )
    return run["env"], saved.algo, saved.scheme, total, run_dir, run["config"]


def _check_env(env: str) -> None:
    """A CommandError unless ``env`` is an env id gymnasium knows or a PettingZoo module's dotted name."""
    from vecfast.trainers.run.env_source import is_env_id, pettingzoo_module

    if is_env_id(env) or pettingzoo_module(env) is None:
        check_env_id(env)


def _tune(args: argparse.Namespace) -> int:
    from vecfast.trainers.run.tune import tune

    check_env_id(args.env_id)
    _check_config(args.algo, None, args.env_id, _config_overrides(args), None, {})
    env_kwargs = dict(args.env_kwarg)
    tuning = tune(args.env_id, algo=args.algo, seconds=args.seconds, env_kwargs=env_kwargs, **_config_overrides(args))
    print("\n".join(tuning.lines()))
    choice = tuning.choice
    print(
        f"train with: vecfast train {args.env_id} --algo {args.algo} --num_workers {choice.num_workers}"
        f" --num_envs_per_worker {choice.num_envs_per_worker}"
        + "".join(f" --env-kwarg {shlex.quote(f'{key}={value!r}')}" for key, value in env_kwargs.items())
        + "  (or --num_workers auto)"
    )
    return 0


def _view(args: argparse.Namespace) -> int:
    _read_run(args.run_dir, checkpoint=False)
    from vecfast.trainers.run.viewer import view

    view(args.run_dir, follow=not args.once)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    run = _read_run(args.run_dir, checkpoint=True)
    env_id = args.env or _run_env_id(args.run_dir, run)
    _check_env(env_id)
    env_kwargs = dict(args.env_kwarg) | ({} if args.split is None else {"split": args.split})
    from vecfast.trainers.run.evaluation import evaluate

    deterministic = not args.stochastic
    result = evaluate(
        args.run_dir,
        env=args.env,  # None: the run's own, made as it trained (a PettingZoo game plays against the opponent)
        opponent=args.opponent,
        episodes=args.episodes,
        deterministic=deterministic,
        num_envs=args.num_envs,
        seed=args.seed,
        which=args.checkpoint,
        max_steps=args.max_steps,
        env_kwargs=env_kwargs,
    )
    if args.json:
        print(json.dumps({"run_dir": str(args.run_dir), "env": env_id, "checkpoint": args.checkpoint,
                          "deterministic": deterministic, **result.to_dict()}))  # fmt: skip
    else:
        policy = "most likely actions" if deterministic else "sampled actions"
        print(f"{env_id}, {args.checkpoint} checkpoint of {args.run_dir}, {policy}:")
        print("\n".join(result.summary()))
    return 0


def _run_env_id(run_dir: Path, run: dict[str, Any]) -> str:
    """The run's env: a registered id or a PettingZoo module (a run of an env object or factory needs --env)."""
    from vecfast.trainers.run.env_source import is_env_id, pettingzoo_module

    if not is_env_id(run["env"]) and pettingzoo_module(run["env"]) is None:
        raise CommandError(
            f"{str(run_dir)!r} was trained on {run['env']!r}, not a registered env id or a PettingZoo module: "
            "--env ENV_ID says which"
        )
    return run["env"]


def _export(args: argparse.Namespace) -> int:
    run = _read_run(args.run_dir, checkpoint=True)
    out = args.out or args.run_dir / ("policy.onnx" if args.format == "onnx" else "policy.pt")
    from vecfast.trainers.tools.export import agreement, export_run

    try:
        model = export_run(args.run_dir, out, args.format, args.checkpoint, args.policy)
    except ValueError as exc:  # a policy index the run does not have
        raise CommandError(str(exc)) from exc
    print(f"wrote {out} ({args.format}) from {args.run_dir}'s {args.checkpoint} checkpoint")
    if args.check:
        from vecfast.trainers.run.env_source import is_env_id
        from vecfast.trainers.run.evaluation import run_env

        if not is_env_id(_run_env_id(args.run_dir, run)):
            raise CommandError("--check steps a single-agent run's env; this run plays games")
        env = run_env(args.run_dir).build(min(8, args.check))
        try:
            result = agreement(model, out, env, args.check)
        finally:
            env.close()
        print(f"the file chose the policy's action for {result.equal} of {result.observations} observations")
    return 0


def _enjoy(args: argparse.Namespace) -> int:
    from vecfast.trainers.run.env_source import is_env_id

    run = _read_run(args.run_dir, checkpoint=True)
    env = _run_env_id(args.run_dir, run)
    _check_env(env)
    video = None if args.no_video else (args.video or args.run_dir / "enjoy.mp4")
    from vecfast.trainers.tools.enjoy import enjoy

    result = enjoy(
        args.run_dir,
        episodes=args.episodes,
        which=args.checkpoint,
        video=video,
        deterministic=not args.stochastic,
        max_steps=args.max_steps
        if args.max_steps is not None
        else entry_defaults.ENJOY_MAX_STEPS
        if is_env_id(env)
        else None,  # games: whole
        seed=args.seed,
        env_kwargs=dict(args.env_kwarg),
    )
    print("\n".join(result.lines()))
    if video is not None:
        print(f"video: {video}")
    return 0
