"""The documentation site builds with every link and anchor resolved (MkDocs' strict mode), and its generated
reference pages cover what they are generated from."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for name in ("vector.async_shared_mem.AsyncSharedMemVectorEnv.send", "vector.make.make_vec",
                 "trainers.run.training.train", "trainers.run.evaluation.evaluate", "wrappers.sb3",
                 "cluster.remote_vector_env.RemoteVectorEnv"):  # fmt: skip
        assert f'id="vecfast.{name}"' in api, name
    assert (tmp_path / "site" / "benchmarks" / "figures" / "cartpole_seeds.png").exists()


def test_the_config_reference_has_every_key_with_its_default_and_help() -> None:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    from vecfast.trainers.config import CONCERNS, TrainConfig, field_docs

    page = hooks.config_reference()
    assert [line[3:] for line in page.splitlines() if line.startswith("## ")] == [c.GROUP for c in CONCERNS]
    for f in dataclasses.fields(TrainConfig):
        row = next(line for line in page.splitlines() if line.startswith(f"| `{f.name}` |"))
        assert field_docs()[f.name][:40].replace("|", "\\|") in row
