"""The ``vecfast`` command: fast help, one-line errors (exit status 2), ``--debug`` tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vecfast.cli import main
from vecfast.trainers.tools import cli as trainers_cli

HEAVY = ("torch", "vizdoom", "tensorboard")


def vecfast(tmp_path: Path, *args: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "vecfast", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_help_imports_neither_torch_nor_vizdoom(tmp_path: Path) -> None:
    for command in ([], ["train"], ["bench"]):
        done = vecfast(tmp_path, *command, "--help", importtime=True)
        assert done.returncode == 0, done.stderr
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
        assert not {name.split(".")[0] for name in imported} & set(HEAVY), command
        assert "usage: vecfast" in done.stdout
    # every subcommand's parser and help, and the config module, in a fresh interpreter
    code = (
        "import json, sys; from vecfast.cli import build_parser; import vecfast.trainers.config; "
        "subcommands = build_parser()._actions[-1].choices; [p.format_help() for p in subcommands.values()]; "
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["train", "CartPol-v1"], "unknown env id 'CartPol-v1'; registered ids like it: CartPole-v1, "),
        (["train", "cartpole-v1"], "registered ids like it: CartPole-v1"),
        (["train", "CartPole-v9"], "`CartPole` doesn't exist. It provides versioned environments: [ `v0`, `v1` ]"),
        (["train"], "the env id is missing (e.g. CartPole-v1); --resume RUN_DIR continues a run"),
        (["train", "--resume", "nowhere"], "no run directory 'nowhere'"),
        (["enjoy", "nowhere"], "no run directory 'nowhere'"),
        (["view", "."], "'.' holds no run: it has no config.json"),
        (["bench", "CartPol-v1"], "unknown env id 'CartPol-v1'; registered ids like it: CartPole-v1, "),
        (["nav", "make-scenes", "--num", "0"], "--num must be > 0, got 0"),
    ],
)
def test_user_errors_are_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    done = vecfast(tmp_path, *args)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and expected in done.stderr, done.stderr
    command = " ".join(a for a in args[:2] if a in ("nav", "make-scenes")) or args[0]
    assert done.stderr.startswith(f"vecfast {command}: error: ")
    assert done.stdout == ""


def test_debug_shows_the_traceback_before_or_after_the_subcommand(tmp_path: Path) -> None:
    for args in (["--debug", "train", "CartPol-v1"], ["train", "CartPol-v1", "--debug"]):
        done = vecfast(tmp_path, *args)
        assert done.returncode == 1
        assert done.stderr.startswith("Traceback (most recent call last):"), done.stderr
        assert "gymnasium.error.NameNotFound" in done.stderr
        assert "vecfast.command_line.CommandError: unknown env id 'CartPol-v1'" in done.stderr


def test_unexpected_errors_name_their_type_and_the_debug_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(args: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(trainers_cli, "_view", broken)
    assert main(["view", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == "vecfast view: error: ZeroDivisionError: division by zero (--debug shows the traceback)\n"
    with pytest.raises(ZeroDivisionError):
        main(["view", str(tmp_path), "--debug"])


def test_keyboard_interrupt_is_not_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(trainers_cli, "_view", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["view", str(tmp_path)])


def test_every_subpackage_is_an_attribute_of_the_package() -> None:
    """``import vecfast`` then ``vecfast.wrappers.pettingzoo_to_vector(...)``, as the README writes it."""
    code = (
        "import pkgutil, sys, vecfast; "
        "names = [m.name for m in pkgutil.iter_modules(vecfast.__path__) if m.ispkg]; "
        "assert 'torch' not in sys.modules; "  # the lazy package loads nothing it is not asked for
        "[getattr(vecfast, name) for name in names]; "
        "print(vecfast.wrappers.pettingzoo_to_vector.__name__, vecfast.trainers.train.__name__, *sorted(names))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "pettingzoo_to_vector",
        "train",
        "cluster",
        "envs",
        "multiagent",
        "selfplay",
        "trainers",
        "vector",
        "wrappers",
    ]


def _subparsers(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                yield sub
                yield from _subparsers(sub)


def test_every_option_takes_both_spellings_as_the_config_keys_do() -> None:
    """``--run_dir`` as ``--run-dir``, ``--num-workers`` as ``--num_workers``: one rule for every option of every
    command (a new user's ``--train_for_seconds 150 --run_dir DIR`` was half refused)."""
    from vecfast.cli import build_parser

    parser = build_parser(["train", "CartPole-v1"])
    args, unknown = parser.parse_known_args(["train", "CartPole-v1", "--run_dir", "d", "--num_processes", "2"])
    assert not unknown and str(args.run_dir) == "d" and args.num_processes == 2
    for sub in _subparsers(parser):
        options = set(sub._option_string_actions)
        for option in options:
            if option.startswith("--"):
                name = option[2:]
                for other in ("--" + name.replace("-", "_"), "--" + name.replace("_", "-")):
                    assert other in options, f"{sub.prog}: {option} but not {other}"
