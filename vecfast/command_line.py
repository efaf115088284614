"""What every part of the ``vecfast`` command line shares (the dispatcher in :mod:`vecfast.cli` and the
subcommands that packages add: ``vecfast nav``, ``vecfast train`` and its kin): the error a command reports as
the user's, and the env options. A module of its own, so that the sub-CLIs import it and not their dispatcher."""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
from typing import Any


class CommandError(Exception):
    """What the user asked for cannot be done: ``vecfast <command>: error: <message>``, exit status 2.

    The message says what was wrong and, where that is cheap, what is valid.
    """


def check_env_id(env_id: str) -> None:
    """Raise :class:`CommandError`, naming the registered ids close to ``env_id``, unless gymnasium knows it.

    ``module:EnvId`` imports ``module`` first, as ``gymnasium.make`` does.
    """
    import gymnasium

    from vecfast.vector.make import import_env_provider

    module, _, name = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        import_env_provider(name)
        gymnasium.spec(name)
    except ImportError as exc:
        raise CommandError(str(exc) if not module else f"env id {env_id!r}: cannot import {module!r}: {exc}") from exc
    except gymnasium.error.Error as exc:
        ids = {key.lower(): key for key in gymnasium.registry}
        close = [ids[key] for key in difflib.get_close_matches(name.lower(), ids, n=5)]
        named = "" if isinstance(exc, gymnasium.error.NameNotFound) else f" ({exc})"
        valid = (
            f"registered ids like it: {', '.join(close)}"
            if close
            else "python -c 'import vecfast, gymnasium; gymnasium.pprint_registry()' lists the registered ids"
        )
        raise CommandError(f"unknown env id {env_id!r}{named}; {valid}") from exc


def env_kwarg(text: str) -> tuple[str, Any]:
    """``--env-kwarg KEY=VALUE``: VALUE as a Python literal (``4``, ``0.5``, ``True``, ``None``, ``(64, 64)``,
    ``'val'``), else as the string it is (``scenes=/data/scenes``, ``split=val``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a Python name, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return key, value


def add_env_kwarg_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--env-kwarg KEY=VALUE``, repeatable: the keyword arguments of the env an id makes (``args.env_kwarg``)."""
    parser.add_argument(
        "--env-kwarg",
        type=env_kwarg,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a keyword argument of the env ({what}), repeatable; VALUE is read as a Python literal "
        "(4, 0.5, True, (64, 64)), else taken as a string (a path)",
    )
