"""Run gymnasium's own ``tests/vector`` suite against vecfast, and against gymnasium as a baseline.

    python benchmarks/gymnasium_suite.py PATH [-k EXPR] [--only vecfast|gymnasium]

PATH is a gymnasium source checkout (the directory holding ``tests/``: ``tests/vector``,
``tests/testing_env.py`` and ``tests/spaces/utils.py``), ideally at the tag of the installed
gymnasium. Nothing is fetched and nothing is written into PATH (no cache, no conftest).

Each run is a separate pytest process in which ``gymnasium.vector.AsyncVectorEnv`` is
either vecfast's ``AsyncSharedMemVectorEnv`` (patched in before the tests are imported,
so ``gym.make_vec(..., vectorization_mode="async")`` gets it too) or gymnasium's own. The
report lists the tests that fail with vecfast only (the drop-in's differences) apart from
those that also fail with gymnasium (the suite and the installed gymnasium disagree).
``-k`` defaults to the tests that build an ``AsyncVectorEnv``, by their names.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_K = "Async or async"


class _Outcomes:
    """A pytest plugin that records each test's outcome (a failed setup or teardown counts as failed)."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        not_failed_yet = self.outcomes.get(report.nodeid) != "failed"
        if (report.when == "call" or report.outcome != "passed") and not_failed_yet:
            self.outcomes[report.nodeid] = report.outcome


def _child(path: Path, implementation: str, k: str, out: Path) -> int:
    import gymnasium.vector
    import pytest

    if implementation == "vecfast":
        import vecfast

        gymnasium.vector.AsyncVectorEnv = vecfast.AsyncSharedMemVectorEnv
    os.chdir(path)
    sys.path.insert(0, str(path))
    plugin = _Outcomes()
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-k", k, "tests/vector"], plugins=[plugin])
    out.write_text(json.dumps(plugin.outcomes))
    return int(code)


def _run(path: Path, implementation: str, k: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "outcomes.json"
        cmd = [sys.executable, __file__, str(path), "-k", k, "--child", implementation, "--out", str(out)]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if not out.exists():
            raise SystemExit(f"the {implementation} run produced no results (is {path} a gymnasium checkout?)")
        # Ids made from the class name (test_observation_mode.py) name gymnasium's, for comparison.
        return {
            t.replace("AsyncSharedMemVectorEnv", "AsyncVectorEnv"): o for t, o in json.loads(out.read_text()).items()
        }


def _counts(outcomes: dict[str, str]) -> str:
    kinds = ("passed", "failed", "skipped")
    return ", ".join(f"{sum(o == kind for o in outcomes.values())} {kind}" for kind in kinds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("path", type=Path, help="a gymnasium source checkout (holding tests/vector)")
    parser.add_argument("-k", default=DEFAULT_K, help=f"pytest -k expression (default: {DEFAULT_K!r})")
    parser.add_argument("--only", choices=["vecfast", "gymnasium"], help="run one implementation only")
    parser.add_argument("--child", choices=["vecfast", "gymnasium"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = args.path.resolve()
    if args.child:
        raise SystemExit(_child(path, args.child, args.k, args.out))
    if not (path / "tests" / "vector").is_dir():
        raise SystemExit(f"{path} has no tests/vector: pass the root of a gymnasium checkout")

    import gymnasium

    runs = {name: _run(path, name, args.k) for name in ("gymnasium", "vecfast") if args.only in (None, name)}
    print(f"gymnasium {gymnasium.__version__} installed; suite from {path}; -k {args.k!r}")
    for name, outcomes in runs.items():
        print(f"  {name:9s}: {len(outcomes)} tests: {_counts(outcomes)}")
    vecfast_failed = sorted(t for t, o in runs.get("vecfast", {}).items() if o == "failed")
    gymnasium_failed = {t for t, o in runs.get("gymnasium", {}).items() if o == "failed"}
    if "gymnasium" in runs and "vecfast" in runs:
        only = [t for t in vecfast_failed if t not in gymnasium_failed]
        print(f"failing with vecfast only ({len(only)}):")
        print("".join(f"  {t}\n" for t in only), end="")
        both = sorted(gymnasium_failed)
        print(f"failing with gymnasium's own AsyncVectorEnv too ({len(both)}; the suite does not match it):")
        print("".join(f"  {t}\n" for t in both), end="")
    else:
        for name, outcomes in runs.items():
            failed = sorted(t for t, o in outcomes.items() if o == "failed")
            print(f"failing with {name} ({len(failed)}):")
            print("".join(f"  {t}\n" for t in failed), end="")


if __name__ == "__main__":
    main()
