"""``vecfast train``, ``vecfast tune``, ``vecfast enjoy`` and ``vecfast view``: the trainers on the command line.

Every :class:`TrainConfig` key is an option under its Sample Factory name
(``--num_workers 2``; ``--num-workers`` works too; ``--num_workers auto`` tunes first).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.tune import AUTO, TUNED_KEYS, tune


def _none_or(kind: type) -> Any:
    def parse(value: str) -> Any:
        return None if value.lower() == "none" else kind(value)

    parse.__name__ = kind.__name__
    return parse


def _or_auto(kind: type) -> Callable[[str], Any]:
    """Parse ``auto`` or a value of ``kind`` (an int, or a bool written true/false)."""
    words = {"true": True, "false": False}

    def parse(value: str) -> Any:
        if value == AUTO:
            return AUTO
        try:
            return words[value.lower()] if kind is bool else kind(value)
        except (KeyError, ValueError):
            shown = "true, false" if kind is bool else f"an {kind.__name__}"
            raise argparse.ArgumentTypeError(f"expected {shown} or {AUTO!r}, got {value!r}") from None

    parse.__name__ = f"{kind.__name__} or {AUTO}"
    return parse


def _add_config_options(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    hints = typing.get_type_hints(TrainConfig)
    group = parser.add_argument_group("config", "TrainConfig keys (default: the env family's and the algorithm's)")
    for field in dataclasses.fields(TrainConfig):
        if field.name in exclude:
            continue
        kind = hints[field.name]
        names = [f"--{field.name}"] + ([f"--{field.name.replace('_', '-')}"] if "_" in field.name else [])
        kwargs: dict[str, Any] = {"dest": field.name, "default": argparse.SUPPRESS}
        optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
        if optional:
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        if kind == bool | str:  # True, False or "auto"
            kwargs["type"] = _or_auto(bool)
        elif kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kind) is tuple:
            kwargs.update(nargs="*", type=int, metavar="N")
        elif field.name == "num_workers":
            kwargs["type"] = _or_auto(int)
        else:
            kwargs["type"] = _none_or(kind) if optional else kind
        group.add_argument(*names, help=f"(default {field.default!r})", **kwargs)


def _config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    return {k: v for k, v in vars(args).items() if k in names}


def add_train_commands(subparsers: Any) -> None:
    """Add ``train``, ``tune``, ``enjoy`` and ``view`` to the ``vecfast`` command's subparsers."""
    train = subparsers.add_parser(
        "train",
        help="train an agent (APPO by default) and keep a run directory",
        description="Train on a gymnasium env id; Ctrl-C stops, saving a final checkpoint.",
    )
    train.add_argument("env_id", help="registered gymnasium id, e.g. vecfast/DoomBasic-v0 or CartPole-v1")
    train.add_argument("--algo", default="appo", help="registered algorithm (default appo)")
    train.add_argument("--total-env-steps", "--train_for_env_steps", type=int, default=1_000_000, dest="total")
    train.add_argument("--run-dir", type=Path, help="default runs/<env>_<algo>_<time>")
    train.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue this run")
    train.add_argument("--live", action=argparse.BooleanOptionalAction, default=True, help="live dashboard")
    _add_config_options(train)
    train.set_defaults(handler=_train)

    tuner = subparsers.add_parser(
        "tune",
        help="measure env step and inference time here, choose num_workers and num_envs_per_worker",
        description="Time env steps (random actions) and the policy's inference, then choose the double-buffered "
        "sampling layout by Sample Factory's condition k/2 > ceil(t_inf / t_env); print the reasoning.",
    )
    tuner.add_argument("env_id", help="registered gymnasium id")
    tuner.add_argument("--algo", default="appo", help="registered double-buffered algorithm (default appo)")
    tuner.add_argument(
        "--seconds", type=float, default=1.0, help="timing of env steps; inference gets half (default 1)"
    )
    _add_config_options(tuner, exclude=TUNED_KEYS)  # the model and device keys shape t_inf
    tuner.set_defaults(handler=_tune)

    enjoy = subparsers.add_parser(
        "enjoy",
        help="run a trained policy, print episode returns, write a video",
        description="Run the policy of RUN_DIR for some episodes on a fresh env; write an mp4 or gif.",
    )
    enjoy.add_argument("run_dir", type=Path)
    enjoy.add_argument("--episodes", type=int, default=3)
    enjoy.add_argument(
        "--checkpoint",
        choices=["last", "best"],
        default="last",
        help="the newest checkpoint (default) or the one with the best mean return",
    )
    enjoy.add_argument("--video", type=Path, help="output .mp4 or .gif (default RUN_DIR/enjoy.mp4)")
    enjoy.add_argument("--no-video", action="store_true", help="only print the returns")
    enjoy.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the most likely")
    enjoy.add_argument("--max-steps", type=int, default=10_000, help="per episode")
    enjoy.add_argument("--seed", type=int, default=0)
    enjoy.set_defaults(handler=_enjoy)

    view = subparsers.add_parser(
        "view",
        help="live dashboard of a running or finished run",
        description="Follow RUN_DIR/metrics.jsonl in a terminal dashboard; q or Ctrl-C quits.",
    )
    view.add_argument("run_dir", type=Path)
    view.add_argument("--once", action="store_true", help="draw the current state and exit")
    view.set_defaults(handler=_view)


def _train(args: argparse.Namespace) -> int:
    from vecfast.trainers.train import train

    run_dir = args.resume if args.resume is not None else args.run_dir
    result = train(
        args.env_id,
        algo=args.algo,
        total_env_steps=args.total,
        run_dir=run_dir,
        live=args.live,
        resume=args.resume is not None,
        **_config_overrides(args),
    )
    print(json.dumps({"run_dir": str(result.run_dir), **result.stats}, indent=2, default=str))
    return 0


def _tune(args: argparse.Namespace) -> int:
    tuning = tune(args.env_id, algo=args.algo, seconds=args.seconds, **_config_overrides(args))
    print("\n".join(tuning.lines()))
    choice = tuning.choice
    print(
        f"train with: vecfast train {args.env_id} --algo {args.algo} --num_workers {choice.num_workers}"
        f" --num_envs_per_worker {choice.num_envs_per_worker}  (or --num_workers auto)"
    )
    return 0


def _view(args: argparse.Namespace) -> int:
    from vecfast.trainers.viewer import view

    view(args.run_dir, follow=not args.once)
    return 0


def _enjoy(args: argparse.Namespace) -> int:
    from vecfast.trainers.enjoy import enjoy

    video = None if args.no_video else (args.video or args.run_dir / "enjoy.mp4")
    returns = enjoy(
        args.run_dir,
        episodes=args.episodes,
        which=args.checkpoint,
        video=video,
        deterministic=not args.stochastic,
        max_steps=args.max_steps,
        seed=args.seed,
    )
    for i, ret in enumerate(returns):
        print(f"episode {i}: return {ret:.2f}")
    if video is not None:
        print(f"video: {video}")
    return 0
