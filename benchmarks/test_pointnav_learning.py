"""benchmarks/pointnav_learning.py's curve: one CSV row per evaluated point, appended at once, never twice."""

from __future__ import annotations

import csv
from pathlib import Path

import pointnav_learning  # this directory: pytest puts a test's own directory on the path
import pytest

from vecfast.envs.nav.scenes import make_scenes
from vecfast.trainers import train

TINY = {"encoder_mlp_layers": (16,), "rnn_size": 16, "nonlinearity": "tanh", "use_rnn": False}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_each_chunk_appends_the_rows_of_its_new_checkpoints_in_both_modes(tmp_path: Path) -> None:
    scenes = tmp_path / "scenes"
    make_scenes(1, seed=0, out_dir=scenes / "train")
    make_scenes(1, seed=1, out_dir=scenes / "val")
    nav = {"scenes": scenes, "width": 16, "height": 16, "max_episode_steps": 10}
    run_dir = tmp_path / "run"

    def chunk(total_env_steps: int) -> None:  # one checkpoint, at the end: none by time, none for a best return
        resume = run_dir.exists()
        train("vecfast/PointNav-v0", algo="ppo", total_env_steps=total_env_steps, run_dir=run_dir, resume=resume,
              env_kwargs=nav, num_envs=2, rollout=16, batch_size=32, save_every_sec=10**6, save_best_every_sec=None,
              **TINY)  # fmt: skip

    out = tmp_path / "curve.csv"
    chunk(64)
    first = pointnav_learning.curve(run_dir, episodes=2, num_envs=2, csv_path=out)
    assert [row["env_frames"] for row in first] == [0, 64]
    assert pointnav_learning.curve(run_dir, episodes=2, num_envs=2, csv_path=out) == []  # nothing new
    chunk(128)  # resumes from the checkpoint at 64
    second = pointnav_learning.curve(run_dir, episodes=2, num_envs=2, csv_path=out)
    assert [row["env_frames"] for row in second] == [128] and second[0]["minutes"] > first[1]["minutes"] > 0
    with open(out, newline="") as f:
        assert next(csv.reader(f)) == pointnav_learning.COLUMNS
    rows = _rows(out)
    assert [row["env_frames"] for row in rows] == ["0", "64", "128"] and {row["run"] for row in rows} == {"run"}
    for row in rows:
        for mode in ("sampled", "deterministic"):
            assert 0.0 <= float(row[f"success_{mode}"]) <= 1.0 and 0.0 <= float(row[f"spl_{mode}"]) <= 1.0
            assert 1.0 <= float(row[f"length_{mode}"]) <= 10.0  # the run's env arguments, on its val scenes
    other = tmp_path / "other.csv"
    other.write_text("minutes,success\n")
    with pytest.raises(ValueError, match="write to another --csv"):
        pointnav_learning.curve(run_dir, episodes=1, num_envs=1, csv_path=other)
