"""Learning curves as data: learning_seeds.py appends each seed's thinned curve to a CSV, and plot_csv.py draws
several such files, each file's seeds thin around their median."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest
from learning_curve import minute_rows
from learning_seeds import CURVE_KEYS, append_curve


def test_each_seeds_curve_is_appended_thinned_with_its_run(tmp_path: Path) -> None:
    out = tmp_path / "curves.csv"
    records = [{"env_steps": 100 * i, "env_frames": 400 * i, "time": 0.5 * i, "episodes": i,
                "mean_episode_return": float(i)} for i in range(1, 1001)]  # fmt: skip
    append_curve([{"env_steps": 0, "learning_rate": 1e-3}, *records], 0, out)  # a row without a return: left out
    append_curve(records[:5], 1, out)
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == ["run", *CURVE_KEYS]
    first = [r for r in rows if r["run"] == "seed0"]
    assert len(first) == 300 and first[0]["env_steps"] == "100" and first[-1]["env_steps"] == "100000"
    assert [r["env_steps"] for r in rows if r["run"] == "seed1"] == ["100", "200", "300", "400", "500"]


def test_plot_csv_draws_several_files_with_their_medians(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    files = []
    for name, slope in (("a", 1.0), ("b", 2.0)):
        path = tmp_path / f"{name}.csv"
        for seed in range(3):
            rows = [{"env_steps": 10 * i, "env_frames": 10 * i, "time": float(i), "episodes": i,
                     "mean_episode_return": slope * i + seed} for i in range(20)]  # fmt: skip
            append_curve(rows, seed, path)
        files.append(str(path))
    script = Path(__file__).parent / "plot_csv.py"
    out = tmp_path / "fig.png"
    done = subprocess.run([sys.executable, str(script), *files, "--x", "env_steps", "--y", "mean_episode_return",
                           "--median", "--out", str(out)], capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0 and "of 6 run(s)" in done.stdout


def test_a_curves_minute_after_a_resume_keeps_the_latest_mean_return() -> None:
    """A resumed sitting logs no mean return until its first episodes end: its first minute gave nan."""
    records = [{"minutes": 0.5, "env_steps": 10, "env_frames": 40, "mean_episode_return": -20.0},
               {"minutes": 1.0, "env_steps": 20, "env_frames": 80, "mean_episode_return": -19.0},
               {"minutes": 2.0, "env_steps": 30, "env_frames": 120, "mean_episode_return": None},
               {"minutes": 3.0, "env_steps": 40, "env_frames": 160, "mean_episode_return": -18.0}]  # fmt: skip
    rows = minute_rows("run", "ALE/Pong-v5", "appo", records, after=0.0)
    assert [row["mean_return"] for row in rows] == [-19.0, -19.0, -18.0]


def test_curve_marks_reads_returns_at_frame_and_minute_marks(tmp_path: Path) -> None:
    from curve_marks import at, runs_of

    path = tmp_path / "curves.csv"
    path.write_text("run,minutes,env_frames,mean_return\na,1,100,nan\na,2,200,-20\na,3,400,-10\nb,1,50,-21\n")
    runs = runs_of([path])
    assert at(runs["a"], "env_frames", 300) == -15.0 and at(runs["a"], "minutes", 2.0) == -20.0
    assert math.isnan(at(runs["a"], "env_frames", 150)) and math.isnan(at(runs["a"], "minutes", 4))
    assert math.isnan(at(runs["b"], "minutes", 1))  # one row: nothing to interpolate between
