"""``vecfast nav ...`` subcommands."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any


def add_nav_commands(subparsers: Any) -> None:
    """Register ``nav make-scenes`` on the ``vecfast`` command's subparsers."""
    nav = subparsers.add_parser("nav", help="PointGoal navigation scenes", description="PointGoal navigation scenes.")
    commands = nav.add_subparsers(dest="nav_command", required=True, metavar="NAV_COMMAND")
    make = commands.add_parser(
        "make-scenes",
        help="generate indoor scenes with their episodes, one .npz per scene",
        description="Generate scenes 0..NUM-1 of SEED into OUT (deterministic; existing files are kept). "
        "Without --out they go to the user cache ($XDG_CACHE_HOME/vecfast/nav), where envs find the default set.",
    )
    make.add_argument("--num", type=int, default=200, help="number of scenes (default 200)")
    make.add_argument(
        "--open",
        action="store_true",
        help="open rooms: outer walls only, no inner walls or furniture, so every shortest path is straight "
        "(scenes named open_SEED_INDEX)",
    )
    make.add_argument("--seed", type=int, help="seed of the scene set (default: the split's, train 0, val 1)")
    make.add_argument("--out", type=Path, help="output directory (default: the user cache)")
    make.add_argument(
        "--split",
        choices=["train", "val"],
        help="write OUT/SPLIT, which envs read with split=SPLIT (default: OUT itself, a training set)",
    )
    make.set_defaults(handler=_make_scenes)


def _make_scenes(args: argparse.Namespace) -> int:
    from vecfast.command_line import CommandError
    from vecfast.envs.nav.scenes import SPLIT_SEEDS, check_disjoint, default_scene_dir, make_scenes, scene_name

    if args.num <= 0:
        raise CommandError(f"--num must be > 0, got {args.num}")
    seed = args.seed if args.seed is not None else SPLIT_SEEDS[args.split or "train"]
    if args.out is not None:  # the user cache keeps each seed's set apart; a directory's splits must not meet
        names = [f"{scene_name(seed, i, args.open)}.npz" for i in range(args.num)]
        try:
            check_disjoint(args.out, (args.split or "train", names))
        except ValueError as e:
            raise CommandError(str(e)) from None
    start = time.perf_counter()
    out = args.out if args.out is not None else default_scene_dir(args.num, seed, args.open)
    if args.out is not None and args.split:
        out = args.out / args.split
    paths = make_scenes(args.num, seed, out, args.open)
    print(f"{len(paths)} scenes in {out} ({time.perf_counter() - start:.1f} s)")
    return 0
