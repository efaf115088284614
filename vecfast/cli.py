"""The ``vecfast`` command line.

Each subcommand is registered by an ``_add_<name>`` function that builds its
parser and sets ``handler``; add new ones to ``_SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


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
    from vecfast.bench import BACKENDS

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
    parser.add_argument("--only", type=_csv, metavar="A,B", help=f"backends to run, from: {','.join(BACKENDS)}")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results to this JSON file")
    parser.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from vecfast.bench import BACKENDS, BenchConfig, EnvSetupError, default_num_workers, render_table, run_benchmark

    backends = args.only or list(BACKENDS)
    unknown = [name for name in backends if name not in BACKENDS]
    if unknown:
        raise SystemExit(f"vecfast bench: unknown backend(s) {', '.join(unknown)}; choose from {', '.join(BACKENDS)}")
    if args.num_workers is not None and args.num_workers > args.num_envs:
        raise SystemExit(f"vecfast bench: --num-workers {args.num_workers} exceeds --num-envs {args.num_envs}")
    json_path = args.json.resolve() if args.json else None  # before the benchmark changes cwd
    cfg = BenchConfig(
        env_id=args.env_id,
        num_envs=args.num_envs,
        num_workers=args.num_workers or default_num_workers(args.num_envs),
        seconds=args.seconds,
        warmup=args.warmup,
        seed=args.seed,
        env_kwargs=args.env_kwargs,
        rounds=args.rounds,
    )
    # Every backend runs OpenCV and torch on one thread per process, as vecfast's workers do,
    # so the physical limit and the peers are measured under the same setting; the variables
    # reach the workers that peers spawn, too.
    os.environ.update(OPENCV_FOR_THREADS_NUM="1", OMP_NUM_THREADS="1")
    try:
        report = run_benchmark(cfg, backends, console=Console(stderr=True))
    except EnvSetupError as exc:
        raise SystemExit(f"vecfast bench: {exc}") from exc
    Console().print(render_table(report))
    for name, error in report.errors.items():
        Console(stderr=True).print(f"[red]{name} failed:[/red] {escape(error)}", highlight=False)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return 1 if report.errors else 0


def _add_nav_commands(subparsers: Any) -> None:
    from vecfast.envs.nav.cli import add_nav_commands

    add_nav_commands(subparsers)


def _add_train_commands(subparsers: Any) -> None:
    from vecfast.trainers.cli import add_train_commands

    add_train_commands(subparsers)


_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_bench, _add_nav_commands, _add_train_commands]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vecfast", description="Fast vectorized environments.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vecfast`` console script and of ``python -m vecfast``."""
    args = build_parser().parse_args(argv)
    return args.handler(args)
