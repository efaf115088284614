"""`vecfast bench`: every requested backend is measured and reported, n/a ones say why."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vecfast.bench import run_for

pytestmark = pytest.mark.slow  # every benchmark backend, measured


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vecfast", "bench", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bench_measures_each_backend_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    only = "single,sync,vecfast,vecfast-async,batched"
    args = ["CartPole-v1", "--num-envs", "4", "--seconds", "0.3", "--warmup", "0.1", "--rounds", "3", "--only", only]
    result = _bench(tmp_path, *args, "--json", str(out))
    assert result.returncode == 0, result.stderr
    rows = {row["backend"]: row for row in json.loads(out.read_text())["results"]}
    # CartPole-v1 has gymnasium's numpy CartPoleVectorEnv as its vector_entry_point
    assert set(rows) == {"single", "physical", "sync", "vecfast", "vecfast-async", "batched"}
    for name, row in rows.items():
        assert row["error"] is None, (name, row["error"])
        assert row["steps_per_sec"] > 0, name
        if name != "physical":  # derived from single's median
            assert len(row["rounds"]) == 3, name
            assert row["steps_per_sec"] == sorted(row["rounds"])[1], name
    assert rows["physical"]["steps_per_sec"] == pytest.approx(2 * rows["single"]["steps_per_sec"])
    assert "batched (vector_entry_point)" in result.stdout
    assert "median of 3 interleaved rounds" in result.stdout


def test_batched_backend_is_na_without_vector_entry_point(tmp_path: Path) -> None:
    """VizDoom's ids are looked up as ``vizdoom.gymnasium_wrapper:Id``, whose module nothing has imported yet."""
    out = tmp_path / "bench.json"
    args = ["VizdoomBasic-v1", "--num-envs", "2", "--seconds", "0.2", "--warmup", "0", "--only", "batched"]
    result = _bench(tmp_path, *args, "--json", str(out))
    assert result.returncode == 0, result.stderr
    rows = {row["backend"]: row for row in json.loads(out.read_text())["results"]}
    assert rows["batched"]["steps_per_sec"] is None
    assert rows["batched"]["error"] is None
    assert "vector_entry_point" in rows["batched"]["unavailable"]


HAS_PUFFERLIB = importlib.util.find_spec("pufferlib") is not None


def test_pufferlib_backends_run_or_say_why_not(tmp_path: Path) -> None:
    """Both of PufferLib's modes run where pufferlib-core is installed and are n/a, saying so, where it is not."""
    out = tmp_path / "bench.json"
    args = ["CartPole-v1", "--num-envs", "4", "--num-workers", "2", "--seconds", "0.3", "--warmup", "0.1"]
    result = _bench(tmp_path, *args, "--only", "puffer,puffer-async", "--json", str(out))
    assert result.returncode == 0, result.stderr
    rows = {row["backend"]: row for row in json.loads(out.read_text())["results"]}
    assert set(rows) == {"puffer", "puffer-async"}
    for name, row in rows.items():
        assert row["error"] is None, (name, row["error"])
        if HAS_PUFFERLIB:
            assert row["steps_per_sec"] > 0, name
        else:
            assert row["unavailable"] == "pufferlib-core not installed", name


@pytest.mark.skipif(not HAS_PUFFERLIB, reason="pufferlib-core not installed")
def test_pufferlib_is_na_where_it_cannot_split_the_envs(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["CartPole-v1", "--num-envs", "3", "--num-workers", "2", "--only", "puffer,puffer-async"]
    result = _bench(tmp_path, *args, "--json", str(out))
    assert result.returncode == 0, result.stderr
    for row in json.loads(out.read_text())["results"]:
        assert row["steps_per_sec"] is None
        assert "cannot split 3 envs into 2 workers" in row["unavailable"]


@pytest.mark.skipif(not HAS_PUFFERLIB, reason="pufferlib-core not installed")
def test_pufferlib_closes_the_envs_in_its_workers(tmp_path: Path) -> None:
    """PufferLib's own close kills its workers and orphans their VizDoom games, which would keep the
    bench's stdout open: ``_bench`` would then time out waiting for it."""
    args = ["VizdoomBasic-v1", "--num-envs", "2", "--seconds", "0.2", "--warmup", "0", "--only", "puffer"]
    result = _bench(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert "PufferLib step()" in result.stdout


def test_unknown_backend_is_refused_before_anything_runs(tmp_path: Path) -> None:
    result = _bench(tmp_path, "CartPole-v1", "--only", "single,warp-drive")
    assert result.returncode == 2
    assert result.stderr.startswith("vecfast bench: error: unknown backend(s) warp-drive; choose from single,")
    assert len(result.stderr.splitlines()) == 1


def test_run_for_counts_env_steps_and_honours_a_call_limit() -> None:
    steps, elapsed = run_for(lambda: 3, seconds=10.0, calls=5)
    assert steps == 15
    assert elapsed < 10.0
