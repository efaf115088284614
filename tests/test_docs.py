"""Every snippet of the README and the documentation site (``docs/``) runs as pasted.

Each page's fenced code blocks are extracted and run in order, each in a fresh subprocess, all of a page's in
one working directory, as a user pastes them one after another into one terminal:

- ```` ```python ```` blocks run as a script with this interpreter.
- ```` ```bash ````/``sh``/``shell``/``console`` blocks: their ``vecfast ...`` and ``python ...``
  commands run in one ``bash -e``, with this interpreter's ``bin`` first on ``PATH``. Install
  steps (``python -m venv``, ``. .venv/bin/activate``, ``pip install``, ``apt-get``) are not
  run; any other command fails the test, so that nothing documented goes untested unnoticed.
- ```` ```text ```` blocks (diagrams, output) are not code. A block without a language fails
  the test: say what it is.

Each run must exit 0 within its timeout and leave behind nothing but what its block (or a block
before it) documents: no other file in the working directory (no ``_vizdoom/``), none in its own
``TMPDIR``, and no process that outlives it. So two blocks that train into the same run directory
fail, as they would for the user (the second finds a run there).

Markers, HTML comments on the lines right before a block's opening fence, visible in the
page's source and invisible when it is rendered:

- ``<!-- docs-test: skip (REASON) -->``: not run (a long benchmark, the test suite itself).
  Skips are reported with their reason and at most ``MAX_SKIPPED`` are allowed.
- ``<!-- docs-test: append-args ARGS (REASON) -->``: the block's commands run with ``ARGS``
  appended (e.g. a shorter benchmark).
- ``<!-- docs-test: creates PATH [PATH ...] -->``: the files or directories the block is
  documented to leave in the working directory (e.g. ``runs/``).

Blocks are self-contained: none relies on variables or files of another (``-k`` runs one alone).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow  # every documented block, as pasted

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

MAX_SKIPPED = 2
"""Blocks marked skip, on all pages. Raise it only for a block that cannot run in CI time, and say why in its
marker."""

TIMEOUT_S = 150
"""Per block."""

PYTHON_LANGS = {"python", "py"}
SHELL_LANGS = {"bash", "sh", "shell", "console"}
NOT_CODE_LANGS = {"text", "txt", "json", "toml", "yaml", "ini", "mermaid"}

# Shell steps that set up the environment the test already runs in: not run.
INSTALL_STEP = re.compile(
    r"^(?:sudo\s+)?(?:apt-get|apt)\s|^(?:python3?\s+-m\s+)?pip3?\s+install\s|^python3?\s+-m\s+venv\s"
    r"|^(?:\.|source)\s+\S*activate\s*$"
)
RUNNABLE_STEP = re.compile(r"^(?:vecfast|python3?)(?:\s|$)")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<body>.*?)\s*-->$")
DIRECTIVE = re.compile(r"^(?P<kind>skip|append-args|creates)\b\s*(?P<rest>.*)$")
REASON = re.compile(r"^(?P<head>.*?)\s*\((?P<reason>[^()]*(?:\([^()]*\)[^()]*)*)\)$")

# Files that third-party libraries keep in TMPDIR on purpose: torch.compile's cache, and the session file that
# onnxruntime's telemetry writes on `import onnxruntime` (1.31, Linux).
TMPDIR_CACHES = re.compile(r"^(torchinductor_|\.ses$)")


@dataclass
class Block:
    page: str
    """The page's path in the repository."""
    line: int
    """1-based line of the opening fence."""
    heading: str
    lang: str
    code: str
    skip: str | None = None
    append_args: list[str] = field(default_factory=list)
    creates: set[str] = field(default_factory=set)
    marker_errors: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-") or "top"
        return f"{self.page}:L{self.line}-{slug}"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.heading or 'top'}, ```{self.lang})"


def parse_page(text: str, page: str = "README.md") -> list[Block]:
    """The fenced code blocks of ``text``, with their section heading and markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    heading = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", line)
        if fence is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            i += 1
            continue
        close = fence.group(1)
        j = i + 1
        while j < len(lines) and not (lines[j].startswith(close) and not lines[j].strip(close[0]).strip()):
            j += 1
        block = Block(
            page=page, line=i + 1, heading=heading, lang=fence.group(2).lower(), code="\n".join(lines[i + 1 : j]) + "\n"
        )
        k = i - 1
        while k >= 0 and (marker := MARKER.match(lines[k].strip())):
            _apply_marker(block, marker.group("body"))
            k -= 1
        blocks.append(block)
        i = j + 1
    return blocks


def _apply_marker(block: Block, body: str) -> None:
    directive = DIRECTIVE.match(body)
    if directive is None:
        block.marker_errors.append(f"unknown docs-test marker {body!r}: use skip, append-args or creates")
        return
    kind, rest = directive.group("kind"), directive.group("rest")
    reason = REASON.match(rest)
    if kind == "creates":
        block.creates.update(path.strip("/") for path in rest.split())
    elif reason is None or not reason.group("reason").strip():
        block.marker_errors.append(f"docs-test marker {body!r} needs a reason in parentheses at its end")
    elif kind == "skip":
        block.skip = reason.group("reason").strip()
    else:
        block.append_args.extend(shlex.split(reason.group("head")))


BLOCKS = [block for path in PAGES for block in parse_page(path.read_text(), str(path.relative_to(ROOT)))]


def _first_of_each(blocks: list[Block]) -> list[Block]:
    """A snippet that two pages show alike (the README's two commands, Getting started's) runs once."""
    seen, out = set(), []
    for b in blocks:
        key = (b.lang, b.code, b.skip, tuple(b.append_args), frozenset(b.creates))
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


RUN_BLOCKS = _first_of_each([b for b in BLOCKS if b.lang in PYTHON_LANGS | SHELL_LANGS])


# --- the block's command ----------------------------------------------------------------


def shell_steps(block: Block) -> list[str]:
    """The commands of a shell block, one per step (``a && b`` is two), with continuations joined."""
    text = re.sub(r"\s*\\\n\s*", " ", block.code)
    lines = text.splitlines()
    if block.lang == "console":  # prompts are commands, the rest is output
        lines = [line.strip()[2:] for line in lines if line.strip().startswith("$ ")]
    steps = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        steps.extend(step.strip() for step in re.split(r"\s*(?:&&|;)\s*", line) if step.strip())
    return steps


def block_command(block: Block, script_dir: Path) -> list[str] | None:
    """What to run for ``block``; None where it holds install steps only."""
    if block.lang in PYTHON_LANGS:
        script = script_dir / f"block_L{block.line}.py"
        script.write_text(block.code)
        return [sys.executable, str(script)]
    runnable = []
    for step in shell_steps(block):
        if INSTALL_STEP.match(step):
            continue
        if not RUNNABLE_STEP.match(step):
            pytest.fail(
                f"{block.where}: the test cannot run `{step}`; it runs `vecfast ...` and `python ...` commands "
                "and skips installs. Run it that way, or mark the block `<!-- docs-test: skip (why) -->`."
            )
        runnable.append(" ".join([step, *map(shlex.quote, block.append_args)]))
    if not runnable:
        return None
    return ["bash", "-e", "-c", "\n".join(runnable)]


# --- what a run leaves behind ------------------------------------------------------------


def leftovers(directory: Path, allowed: set[str] | re.Pattern[str]) -> list[str]:
    def ok(name: str) -> bool:
        return bool(allowed.match(name)) if isinstance(allowed, re.Pattern) else name in allowed

    return sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir() if not ok(p.name))


def processes_tagged(tag: str) -> list[psutil.Process]:
    """Processes whose environment holds ``VECFAST_DOCS_TEST=tag``: the run and all it started."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("VECFAST_DOCS_TEST") == tag:
                found.append(proc)
    return found


def outliving_processes(tag: str, grace: float = 5.0) -> list[str]:
    """Processes of the run still alive ``grace`` s after it exited (watchdogs get that long); killed."""
    deadline = time.monotonic() + grace
    while (alive := processes_tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    described = []
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            described.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
            proc.kill()
    return described


def run_block(
    block: Block, tmp_path: Path, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str] | None, Path, Path, str]:
    """Run ``block`` in ``cwd`` (default: a new directory), with its own TMPDIR."""
    cwd, tmpdir, script_dir = cwd or tmp_path / "cwd", tmp_path / "tmp", tmp_path / "script"
    for d in (cwd, tmpdir, script_dir):
        d.mkdir(exist_ok=True)
    tag = uuid.uuid4().hex
    command = block_command(block, script_dir)
    if command is None:
        return None, cwd, tmpdir, tag
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "TMPDIR": str(tmpdir),
        "VECFAST_DOCS_TEST": tag,
    }
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        outliving_processes(tag, grace=0)
        pytest.fail(f"{block.where} ran over {TIMEOUT_S} s\n{_tail(stdout, stderr)}")
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr), cwd, tmpdir, tag


def _tail(stdout: str, stderr: str) -> str:
    return f"--- stdout (tail) ---\n{stdout[-3000:]}\n--- stderr (tail) ---\n{stderr[-5000:]}"


# --- the tests ---------------------------------------------------------------------------


@dataclass
class Workspace:
    """The one directory a page's blocks run in, and what its blocks run so far are documented to leave there."""

    cwd: Path
    created: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Workspace]:
    return {}


@pytest.fixture
def workspace(block: Block, workspaces: dict[str, Workspace], tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    if block.page not in workspaces:
        workspaces[block.page] = Workspace(tmp_path_factory.mktemp("docs-cwd"))
    return workspaces[block.page]


@pytest.mark.timeout(TIMEOUT_S + 30)
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.id for b in RUN_BLOCKS])
def test_documented_block_runs_as_pasted(block: Block, tmp_path: Path, workspace: Workspace) -> None:
    assert not block.marker_errors, f"{block.where}: " + "; ".join(block.marker_errors)
    if block.skip is not None:
        pytest.skip(f"{block.where} marked skip: {block.skip}")
    workspace.created |= block.creates
    done, cwd, tmpdir, tag = run_block(block, tmp_path, workspace.cwd)
    if done is None:
        pytest.skip(f"{block.where}: install commands only")
    outliving = outliving_processes(tag)
    assert done.returncode == 0, f"{block.where} exited with {done.returncode}\n{_tail(done.stdout, done.stderr)}"
    left = leftovers(cwd, workspace.created)
    assert not left, (
        f"{block.where} left {left} in its working directory; a vecfast env must not write there, and files "
        "a block documents writing are listed in `<!-- docs-test: creates PATH -->`"
    )
    missing = sorted(path for path in block.creates if not (cwd / path).exists())
    assert not missing, f"{block.where} is marked as creating {missing}, which it did not"
    left_in_tmp = leftovers(tmpdir, TMPDIR_CACHES)
    assert not left_in_tmp, f"{block.where} left {left_in_tmp} in its TMPDIR"
    assert not outliving, f"{block.where}: processes outlived the run by 5 s:\n" + "\n".join(outliving)


def test_every_documented_block_is_run_or_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    """Every block has a language; the skipped ones are few, give a reason, and are listed here."""
    unlabeled = [b.where for b in BLOCKS if not b.lang]
    assert not unlabeled, f"code blocks without a language (```python, ```bash, ```text, ...): {unlabeled}"
    unknown = [b.where for b in BLOCKS if b.lang not in PYTHON_LANGS | SHELL_LANGS | NOT_CODE_LANGS]
    assert not unknown, f"code blocks in a language this test neither runs nor knows as text: {unknown}"
    misplaced = [b.where for b in BLOCKS if b.lang in NOT_CODE_LANGS and (b.skip or b.append_args or b.creates)]
    assert not misplaced, f"docs-test markers on blocks that are not run: {misplaced}"
    skipped = [b for b in RUN_BLOCKS if b.skip is not None]
    with capsys.disabled():
        print(f"\nREADME and docs: {len(RUN_BLOCKS)} runnable blocks, {len(skipped)} marked skip:")
        for b in skipped:
            print(f"  {b.where}: {b.skip}")
    assert len(skipped) <= MAX_SKIPPED, f"{len(skipped)} documented blocks are marked skip (at most {MAX_SKIPPED})"
    assert len(RUN_BLOCKS) - len(skipped) >= 5, "the documented snippets went missing from this test"


def test_parser_reads_markers_and_fences() -> None:
    text = (
        "# A\n"
        "<!-- docs-test: skip (slow (~1 h)) -->\n"
        "```python\nprint(1)\n```\n"
        "## B\n"
        "<!-- docs-test: creates runs/ out.txt -->\n"
        "<!-- docs-test: append-args --seconds 0.5 (short) -->\n"
        "```bash\npython3 -m venv .venv && . .venv/bin/activate && pip install -e . && vecfast bench X \\\n"
        "  --num-envs 2\n```\n"
        "````text\n```\n````\n"
        "<!-- docs-test: sikp (typo) -->\n"
        "```sh\nls\n```\n"
    )
    a, b, c, d = parse_page(text, "x.md")
    assert (a.line, a.heading, a.lang, a.skip, a.code) == (3, "A", "python", "slow (~1 h)", "print(1)\n")
    assert (b.heading, b.creates, b.append_args, b.skip) == ("B", {"runs", "out.txt"}, ["--seconds", "0.5"], None)
    assert [s for s in shell_steps(b) if not INSTALL_STEP.match(s)] == ["vecfast bench X --num-envs 2"]
    assert (c.lang, c.code) == ("text", "```\n")
    assert d.marker_errors and b.id == "x.md:L9-b"
