"""The ``vecfast`` command line.

Each subcommand is registered by an ``_add_<name>`` function that builds its
parser and sets ``handler``; add new ones to ``_SUBCOMMANDS``. Building the parser
imports neither torch nor VizDoom (``vecfast --help`` is fast): handlers import them.

Errors: a :class:`CommandError` (what the user asked for cannot be done: an unknown env id
or algorithm, a missing run directory, an invalid config value), a file that is missing or
in the way, or gymnasium's unknown env id or missing dependency prints one line
``vecfast <command>: error: <what, and what is valid>`` to stderr and exits with 2, as
argparse does for a bad command line. Any other exception is a failure of vecfast, not of
the command line: one line with its type and message, and exit status 1. ``--debug``
(before or after the subcommand) raises instead, with the traceback. KeyboardInterrupt
is never caught here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vecfast.command_line import CommandError, add_env_kwarg_option, check_env_id

EXIT_ERROR = 2  # a CommandError (and argparse's bad command lines)
EXIT_FAILURE = 1  # an unexpected exception; a bench backend that failed

# path errors are the user's: a missing run directory, a run directory that holds a run already
_PATH_ERRORS = (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError)


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _json_object(value: str) -> dict[str, Any]:
    try:
        obj = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"frame_skip\": 4}'")
    return obj


def _positive(kind: Callable[[str], Any], zero_ok: bool = False) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        number = kind(value)
        if number < 0 or (number == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(f"must be {'>=' if zero_ok else '>'} 0, got {value}")
        return number

    return parse


def _add_bench(subparsers: Any) -> None:
    from vecfast.bench import BACKEND_GROUPS, BACKENDS

    parser = subparsers.add_parser(
        "bench",
        help="measure env steps/s of vecfast against other vector-env backends",
        description="Measure env steps/s with random actions for each backend, one after another.",
    )
    parser.add_argument("env_id", help="gymnasium env id (also 'module:EnvId'; Vizdoom* ids work as is)")
    parser.add_argument("--num-envs", "-n", type=_positive(int), default=8, help="envs per vector env (default 8)")
    parser.add_argument(
        "--num-workers",
        type=_positive(int),
        help="worker processes of vecfast and PufferLib (default: min(cpu count, num envs))",
    )
    parser.add_argument("--seconds", type=_positive(float), default=10.0, help="timed seconds per backend (default 10)")
    parser.add_argument(
        "--warmup",
        type=_positive(float, zero_ok=True),
        default=1.0,
        help="untimed seconds per backend first (default 1)",
    )
    parser.add_argument(
        "--rounds",
        type=_positive(int),
        default=1,
        help="passes over all backends, interleaved; each reports its median (default 1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the envs and of the random actions (default 0)")
    parser.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object passed to gymnasium.make")
    add_env_kwarg_option(parser, "over --env-kwargs")
    choices = ",".join([*BACKENDS, *BACKEND_GROUPS])
    parser.add_argument("--only", type=_csv, metavar="A,B", help=f"backends to run, from: {choices} (sync,async)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results to this JSON file")
    parser.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    from vecfast.bench import (
        BACKEND_GROUPS,
        BACKENDS,
        BenchConfig,
        EnvSetupError,
        default_num_workers,
        print_table,
        run_benchmark,
    )

    backends = [b for name in args.only or BACKENDS for b in BACKEND_GROUPS.get(name, [name])]
    unknown = [name for name in backends if name not in BACKENDS]
    if unknown:
        choices = ", ".join([*BACKENDS, *BACKEND_GROUPS])
        raise CommandError(f"unknown backend(s) {', '.join(unknown)}; choose from {choices}")
    if args.num_workers is not None and args.num_workers > args.num_envs:
        raise CommandError(f"--num-workers {args.num_workers} exceeds --num-envs {args.num_envs}")
    json_path = args.json.resolve() if args.json else None  # before the benchmark changes cwd
    cfg = BenchConfig(
        env_id=args.env_id,
        num_envs=args.num_envs,
        num_workers=args.num_workers or default_num_workers(args.num_envs),
        seconds=args.seconds,
        warmup=args.warmup,
        seed=args.seed,
        env_kwargs={**args.env_kwargs, **dict(args.env_kwarg)},
        rounds=args.rounds,
    )
    # Every backend runs OpenCV and torch on one thread per process, as vecfast's workers do,
    # so the physical limit and the peers are measured under the same setting; the variables
    # reach the workers that peers spawn, too.
    os.environ.update(OPENCV_FOR_THREADS_NUM="1", OMP_NUM_THREADS="1")
    check_env_id(cfg.make_id)
    try:
        report = run_benchmark(cfg, backends)
    except EnvSetupError as exc:
        raise CommandError(str(exc)) from exc
    print_table(report)
    for name, error in report.errors.items():
        print(f"{name} failed: {error}", file=sys.stderr)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return 1 if report.errors else 0


def _add_nav_commands(subparsers: Any) -> None:
    from vecfast.envs.nav.cli import add_nav_commands

    add_nav_commands(subparsers)


def _add_train_commands(subparsers: Any, argv: Sequence[str] | None = None) -> None:
    from vecfast.trainers.tools.cli import add_train_commands, help_defaults

    add_train_commands(subparsers, help_defaults(sys.argv[1:] if argv is None else argv))


_PLOT_INSTALL = "pip install 'vecfast[plot]'"
_PLOT_X = {"steps": ["env_steps"], "frames": ["env_frames"], "time": ["time"], "both": ["env_steps", "time"]}


def _add_plot(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="draw learning curves of run directories into a PNG",
        description="Draw the mean episode return and the env's metrics (success, SPL, ...) of run directories "
        "against env steps and training time into a PNG. Runs of one config but for the seed are drawn thin, "
        f"with their median bold. Needs matplotlib: {_PLOT_INSTALL}.",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="directories with metrics.jsonl")
    parser.add_argument("--out", "-o", type=Path, required=True, metavar="FILE.png", help="the PNG to write")
    parser.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="a metrics.jsonl key to draw, repeatable (default: mean_episode_return and every env metric logged)",
    )
    parser.add_argument(
        "--x",
        choices=list(_PLOT_X),
        default="both",
        help="x axis: env steps, env frames, training time, or steps and time (default both)",
    )
    parser.add_argument(
        "--label",
        action="append",
        metavar="TEXT",
        help="one per run, in order; runs with one label are one group (default: by config, named after the directory)",
    )
    parser.add_argument("--title", help="the figure's title (default: the env ids)")
    parser.add_argument(
        "--smooth",
        type=_positive(int),
        default=1,
        metavar="N",
        help="trailing mean over N records first (default 1: none)",
    )
    parser.set_defaults(handler=_plot)


def _plot(args: argparse.Namespace) -> int:
    from vecfast.trainers.tools.plot import plot_runs

    try:
        result = plot_runs(args.run_dirs, args.out, args.metric, _PLOT_X[args.x], args.label, args.title, args.smooth)
    except (FileNotFoundError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    groups = ", ".join(
        f"{label} ({len(runs)} runs)" if len(runs) > 1 else label for label, runs in result.groups.items()
    )
    metrics = list(dict.fromkeys(panel.metric for panel in result.panels))
    print(f"wrote {result.path}: {', '.join(metrics)} of {groups}")
    return 0


_SUBCOMMANDS: list[Callable[..., None]] = [_add_bench, _add_nav_commands, _add_train_commands, _add_plot]


_DEBUG_HELP = "on an error, raise it with its traceback instead of printing one line"
_VERBOSE_HELP = "show what VizDoom, SDL and torch.distributed print (by default a run's env.log gets it)"


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vecfast", description="Fast vectorized environments.", allow_abbrev=False)
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    parser.add_argument("--verbose", action="store_true", help=_VERBOSE_HELP)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        if add is _add_train_commands:
            add(subparsers, argv)  # `train ENV --help` shows the defaults of ENV's runs
        else:
            add(subparsers)
    _add_to_subcommands(parser)
    return parser


def _add_to_subcommands(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after a subcommand too, the subcommand's name (``prog``) for its error lines, every option in
    both spellings, and no abbreviations: ``--num-envs`` must never be taken for ``--num-envs-per-worker``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():  # an alias shares its parser
                sub.allow_abbrev = False
                sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
                sub.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP)
                sub.set_defaults(command_prog=sub.prog, command_parser=sub)
                _both_spellings(sub)
                _add_to_subcommands(sub)


def _both_spellings(parser: argparse.ArgumentParser) -> None:
    """Every ``--a-b`` option also as ``--a_b`` and the other way round, as the config's keys are: one rule for how
    options are spelt."""
    for action in parser._actions:
        for option in list(action.option_strings):
            if not option.startswith("--"):
                continue
            name = option[2:]
            for other in ("--" + name.replace("-", "_"), "--" + name.replace("_", "-")):
                if other not in parser._option_string_actions:
                    action.option_strings.append(other)
                    parser._option_string_actions[other] = action


def _unrecognized(parser: argparse.ArgumentParser, unknown: list[str]) -> None:
    """argparse's error for ``unknown`` arguments, naming the options closest to each unknown one (``--lr``:
    ``--learning_rate``); exits 2."""
    from vecfast.trainers.config import closest

    spelled: dict[str, str] = {}  # an option's name (underscores) -> its first spelling on this command line
    for option in parser._option_string_actions:
        if option.startswith("--"):
            spelled.setdefault(option[2:].replace("-", "_"), option)
    hints = []
    for arg in unknown:
        if arg.startswith("--"):
            close = closest(arg.partition("=")[0][2:], list(spelled))
            if close:
                hints.append(f"{arg.partition('=')[0]}: did you mean {' or '.join(spelled[c] for c in close)}?")
    parser.error(f"unrecognized arguments: {' '.join(unknown)}" + "".join(f"; {hint}" for hint in hints))


def _is_user_error(exc: Exception) -> bool:
    """Whether ``exc`` is a mistake in the command (one line, exit 2) rather than a failure of vecfast."""
    from gymnasium import error

    from vecfast.extras import MissingExtraError

    gym_errors = (error.UnregisteredEnv, error.DeprecatedEnv, error.DependencyNotInstalled)  # an env id, a missing dep
    return isinstance(exc, (CommandError, MissingExtraError, *_PATH_ERRORS, *gym_errors))


def _command_env(args: argparse.Namespace) -> str | None:
    """The env the command runs: the one it names, else that of the run it reads (None if neither)."""
    env = getattr(args, "env_id", None) or getattr(args, "env", None)
    run_dir = getattr(args, "resume", None) or getattr(args, "run_dir", None)
    if env is None and run_dir is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            env = json.loads((Path(run_dir) / "config.json").read_text()).get("env")
    return env if isinstance(env, str) else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vecfast`` console script and of ``python -m vecfast``."""
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unrecognized(getattr(args, "command_parser", parser), unknown)
    if args.verbose:
        from vecfast.chatter import set_verbose

        set_verbose()  # the processes the command starts inherit it
    from vecfast.extras import env_modules, explained_imports, require_all

    env = _command_env(args)
    try:  # a missing extra's module: the error names the extra (every one the command and its env need, at once)
        with explained_imports(args.command_prog):
            needs = [*getattr(args, "needs", ()), *(env_modules(env) if env else ())]
            needs += ["ray"] if getattr(args, "ray_address", None) is not None else []  # samplers on a Ray cluster
            require_all(needs, args.command_prog)
            return args.handler(args)
    except Exception as exc:  # not KeyboardInterrupt: `train` saves a final checkpoint on Ctrl-C itself
        if args.debug:
            raise
        if _is_user_error(exc):  # one line: an env's error without its worker's traceback
            print(f"{args.command_prog}: error: {getattr(exc, 'headline', exc)}", file=sys.stderr)
            return EXIT_ERROR
        print(f"{args.command_prog}: error: {type(exc).__name__}: {exc} (--debug shows the traceback)", file=sys.stderr)
        return EXIT_FAILURE
