"""What ``pip install vecfast`` puts in an empty venv, and how long ``import vecfast`` takes there (issue 37).

Each variant is a fresh venv (``python -m venv``) and the README's install commands, from this checkout or from
``--baseline`` (a commit before the lean core): the venv's MB and its site-packages' MB, the distributions
installed, and ``import vecfast``'s wall time in a fresh interpreter (median and worst of ``--repeats``, a bare
``python -c pass`` subtracted). One row per variant goes to ``--csv`` at once.

    python benchmarks/install_footprint.py --baseline a1b81bf
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import REPO, append_row, host, worktree  # noqa: E402

CSV = Path(__file__).parent / "results" / "install_footprint.csv"
COLUMNS = [
    "variant", "revision", "command", "venv_mb", "site_packages_mb", "distributions", "import_s_median",
    "import_s_worst", "host",
]  # fmt: skip
TORCH_FIRST = ["torch==2.13.0"]  # the README's first command: the CPU wheel


def megabytes(path: Path) -> float:
    du = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(du.stdout.split()[0]) / 1024


def seconds_to_run(python: Path, code: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def measure(name: str, source: Path, revision: str, extras: str, torch_first: bool, repeats: int, csv: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="vecfast-footprint-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        pip = [str(python), "-m", "pip", "install"]
        commands = [[*pip, *TORCH_FIRST]] if torch_first else []
        commands.append([*pip, f"{source}{extras}"])
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
        site_packages = next(venv.glob("lib/python*/site-packages"))
        bare = [seconds_to_run(python, "pass") for _ in range(repeats)]
        imports = [seconds_to_run(python, "import vecfast") - statistics.median(bare) for _ in range(repeats)]
        row = {
            "variant": name,
            "revision": revision,
            "command": " && ".join("pip " + " ".join(c[3:]) for c in commands).replace(str(source), "."),
            "venv_mb": megabytes(venv),
            "site_packages_mb": megabytes(site_packages),
            "distributions": len(listed.stdout.splitlines()),
            "import_s_median": statistics.median(imports),
            "import_s_worst": max(imports),
            "host": host(),
        }
        append_row(csv, COLUMNS, row)
        print(row, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=None, help="a commit before the lean core, installed the same way")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    revision = head.stdout.strip()
    measure("core", REPO, revision, "", False, args.repeats, args.csv)
    measure("train", REPO, revision, "[train]", True, args.repeats, args.csv)
    measure("all", REPO, revision, "[all]", True, args.repeats, args.csv)
    with worktree(args.baseline) if args.baseline else contextlib.nullcontext() as before:
        if before is not None:
            measure("core before the lean core", before, args.baseline, "", True, args.repeats, args.csv)


if __name__ == "__main__":
    main()
