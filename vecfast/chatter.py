"""Where the chatter of the programs vecfast starts goes: a run's log file, not the terminal.

VizDoom's games print their network handshake (about 30 lines per duel), SDL prints what it
cannot open, and torch.distributed's c10d warns that it cannot look up a hostname in the
private network of a local launch. None of it is the user's business unless something goes
wrong, so vecfast keeps it off the terminal:

- **In a training run** it goes to the run's log, ``RUN_DIR/env.log`` (:data:`ENV_LOG`): ``train()`` names it
  in the environment variable :data:`LOG_VAR` (``VECFAST_ENV_LOG``), which the env workers, the ranks and their
  games inherit. It is written only once the directory holds the run (its ``config.json``),
  so that the log never makes a new run directory look taken.
- **Outside a run** (a user's own ``gymnasium.make("vecfast/DoomDuelBots-v0")`` or
  ``doom_duel_v0.parallel_env()``) it is dropped, unless :data:`LOG_VAR` names a file to
  append it to.
- **Lines that are not known chatter** (a game's error message, say) still reach stderr,
  prefixed with their source: only the lines the patterns below match are kept off it.
- ``vecfast --verbose`` (or :data:`VERBOSE_VAR`, ``VECFAST_VERBOSE=1``) leaves all of it on
  the terminal, as the programs print it.

This module imports nothing but the standard library: VizDoom's reaper and the namespace
launcher use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "C10D_CHATTER",
    "ENV_LOG",
    "LOG_VAR",
    "VERBOSE_VAR",
    "VIZDOOM_CHATTER",
    "lines",
    "log_to",
    "logging_to",
    "report",
    "set_verbose",
    "tail",
    "verbose",
    "write_log",
]

VERBOSE_VAR = "VECFAST_VERBOSE"  # "1": the chatter stays on the terminal
LOG_VAR = "VECFAST_ENV_LOG"  # the file the chatter of this run goes to
ENV_LOG = "env.log"  # its name in a run directory
_RUN_MARK = "config.json"  # a directory holds a run once it has this

# VizDoom's network handshake and what its engine says about the machine (one pattern per message;
# progress indicators rewrite a line with "\r", which splits it here).
VIZDOOM_CHATTER = re.compile(
    r"^\s*(?:"
    r"Network game synchronization timeout: .*"
    r"|Waiting for (?:other )?players:.*"
    r"|Contacting host:.*"
    r"|Got connect from node \d+\..*"
    r"|Sending all here\..*"
    r"|Done waiting\..*"
    r"|Total players: \d+.*"
    r"|Console player number: \d+.*"
    r"|Received All Here, sending ACK\..*"
    r"|Received \"Go\.\".*"
    r"|Go"
    r"|Exchanging game information\..*"
    r"|Found \S+ \(node \d+, player \d+\).*"
    r"|\S+ (?:joined|left) the game.*"
    r"|The path /dev/dri/ cannot be opened or is not available.*"
    r"|error: XDG_RUNTIME_DIR (?:is invalid or )?not set in the environment\..*"
    r"|[-/|\\.\s]*"  # a spinner or progress dots alone
    r")\s*$"
)
# c10d's warning when a peer's address has no name (a private network has no DNS to ask).
C10D_CHATTER = re.compile(
    r"^\[W\d+ [\d:.]+ socket\.cpp:\d+\] \[c10d\] The hostname of the client socket cannot be retrieved\. err=-?\d+\s*$"
)


def verbose() -> bool:
    """Whether the chatter stays on the terminal (``vecfast --verbose``, ``VECFAST_VERBOSE=1``)."""
    return os.environ.get(VERBOSE_VAR, "").strip().lower() in ("1", "true", "yes", "on")


def set_verbose(on: bool = True) -> None:
    """Keep the chatter of the processes started from now on on the terminal (what ``--verbose`` does)."""
    if on:
        os.environ[VERBOSE_VAR] = "1"
    else:
        os.environ.pop(VERBOSE_VAR, None)


def log_to(run_dir: str | os.PathLike | None) -> Callable[[], None]:
    """Send the chatter of the processes started from now on to ``run_dir``'s log (``None``: drop it).

    Sets :data:`LOG_VAR` (``RUN_DIR/env.log``) in this process's environment, which every
    process it starts inherits. Returns a function that sets it back as it was (processes
    started meanwhile keep the log they were given).
    """
    previous = os.environ.get(LOG_VAR)
    if run_dir is None:
        os.environ.pop(LOG_VAR, None)
    else:
        os.environ[LOG_VAR] = str((Path(run_dir) / ENV_LOG).absolute())

    def restore() -> None:
        if previous is None:
            os.environ.pop(LOG_VAR, None)
        else:
            os.environ[LOG_VAR] = previous

    return restore


@contextlib.contextmanager
def logging_to(run_dir: str | os.PathLike | None) -> Iterator[None]:
    """:func:`log_to` for a ``with`` block."""
    restore = log_to(run_dir)
    try:
        yield
    finally:
        restore()


def write_log(text: str, source: str) -> bool:
    """Append ``text`` (``source``'s output) to the log :data:`LOG_VAR` names; whether it was written.

    Not written: no log is named, or it is in a directory that holds no run yet (its
    ``config.json``; a log there would make a new run's directory look taken).
    """
    path = os.environ.get(LOG_VAR)
    if not path or not text.strip():
        return False
    path = Path(path)
    if path.name == ENV_LOG and not (path.parent / _RUN_MARK).exists():
        return False
    text = text if text.endswith("\n") else text + "\n"
    try:  # one write of the whole block to a file opened for appending: blocks of processes do not mix
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"--- {source}\n{text}".encode(errors="replace"))
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def lines(text: str) -> list[str]:
    """``text``'s lines, a line rewritten with ``\\r`` (a progress indicator) as its parts."""
    return [part for line in text.splitlines() for part in line.split("\r")]


def report(text: str, source: str, chatter: re.Pattern[str]) -> list[str]:
    """Log ``text``, ``source``'s output, and write its lines that ``chatter`` does not match to stderr.

    Returns those lines (with ``--verbose`` nothing was captured, and nothing comes here).
    """
    write_log(text, source)
    rest = [line for line in lines(text) if not chatter.match(line)]
    if rest:
        try:
            sys.stderr.write("".join(f"{source}: {line}\n" for line in rest))
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed (interpreter exit): the log has them
            pass
    return rest


def tail(text: str, chatter: re.Pattern[str], count: int = 5) -> list[str]:
    """The last ``count`` lines of ``text`` that are not chatter."""
    return [line for line in lines(text) if not chatter.match(line)][-count:]
