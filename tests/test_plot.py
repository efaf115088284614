"""``vecfast plot`` and :func:`vecfast.trainers.tools.plot.plot_runs`: curves of real short runs, drawn as logged."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vecfast.cli import main
from vecfast.trainers.tools.plot import RETURN, load_run, read_metrics, stitch_resumed, training_seconds

pytest.importorskip("matplotlib")
PIL = pytest.importorskip("PIL.Image")

STEPS = 3000  # CartPole, ppo defaults: 16 envs x rollout 32 = 512 env steps a record


def _train(run_dir: Path, **kwargs) -> None:
    from vecfast.trainers import train

    train("CartPole-v1", algo="ppo", run_dir=run_dir, **{"total_env_steps": STEPS, "seed": 0, **kwargs})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two seeds of one config in DIR/seed0, DIR/seed1; a run resumed from an earlier checkpoint than its last
    records (as after a kill between a checkpoint and the next); a compact copy of seed 0 (as
    benchmarks/learning_seeds.py --curves writes: a few keys, thinned)."""
    root = tmp_path_factory.mktemp("plot")
    for seed in (0, 1):
        _train(root / "seeds" / f"seed{seed}", seed=seed)
    resumed = root / "resumed"
    _train(resumed, save_every_sec=0.0, keep_checkpoints=100)  # a checkpoint after every iteration
    checkpoints = sorted((resumed / "checkpoints").glob("last_*.pt"))
    for path in checkpoints[-2:]:  # the sitting "was killed" before it could save these two
        path.unlink()
    resumed_from = int(checkpoints[-3].stem.removeprefix("last_"))
    _train(resumed, resume=True, total_env_steps=STEPS + 1024)
    compact = root / "compact" / "seed0"
    compact.mkdir(parents=True)
    (compact / "config.json").write_text((root / "seeds" / "seed0" / "config.json").read_text())
    keys = ("env_steps", "env_frames", "time", "episodes", RETURN)
    rows = [{k: r[k] for k in keys if k in r} for r in read_metrics(root / "seeds" / "seed0") if RETURN in r]
    (compact / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[::2]))
    seeds = root / "seeds"
    return {"root": root, "seed0": seeds / "seed0", "seed1": seeds / "seed1", "resumed": resumed, "from": resumed_from}


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_stitch_resumed_drops_records_after_the_checkpoint_and_adds_the_sittings_times() -> None:
    def rec(steps: int, t: float) -> dict:
        return {"env_steps": steps, "time": t}

    records = [
        *(rec(100, 1.0), rec(200, 2.0), rec(300, 3.0), rec(400, 4.0)),  # checkpoint at 200, killed at 400
        *(rec(300, 0.5), rec(400, 1.5)),  # resumed from 200: its clock starts at 0 again; ends with a checkpoint
        rec(500, 0.7),  # resumed from 400
    ]
    stitched = [(r["env_steps"], t) for r, t in stitch_resumed(records)]
    assert stitched == [(100, 1.0), (200, 2.0), (300, 2.5), (400, 3.5), (500, 4.2)]
    # a sitting too short for its clock to go back is still told apart by its env steps going back
    short = [rec(100, 0.1), rec(200, 0.2), rec(150, 0.3), rec(250, 0.6)]
    assert [(r["env_steps"], t) for r, t in stitch_resumed(short)] == [(100, 0.1), (150, 0.4), (250, 0.7)]
    assert stitch_resumed([]) == []


def test_resumed_run_curve_is_one_timeline(runs: dict[str, Any]) -> None:
    records = _records(runs["resumed"])
    second = next(i for i in range(1, len(records)) if records[i]["env_steps"] < records[i - 1]["env_steps"])
    first_sitting, second_sitting = records[:second], records[second:]
    resumed_from = runs["from"]
    assert second_sitting[0]["env_steps"] > resumed_from
    assert max(r["env_steps"] for r in first_sitting) > resumed_from  # records written after the checkpoint
    before = [r for r in first_sitting if r["env_steps"] <= resumed_from]
    offset = before[-1]["time"]
    expected = [(r["env_steps"], r["time"]) for r in before] + [
        (r["env_steps"], offset + r["time"]) for r in second_sitting
    ]
    run = load_run(runs["resumed"])
    assert run.env_steps.tolist() == [steps for steps, _ in expected]
    assert run.time.tolist() == pytest.approx([seconds for _, seconds in expected])
    assert np.all(np.diff(run.env_steps) > 0) and np.all(np.diff(run.time) > 0)
    assert training_seconds(runs["resumed"]) == dict(expected)


def test_plot_runs_draws_the_logged_values(runs: dict[str, Any], tmp_path: Path) -> None:
    from vecfast.trainers.tools.plot import plot_runs

    dirs = [runs["seed0"], runs["seed1"], runs["resumed"]]
    result = plot_runs(dirs, tmp_path / "curves.png")
    assert result.path.is_file() and Path(result) == tmp_path / "curves.png"
    assert result.groups == {"seeds": [runs["seed0"], runs["seed1"]], "resumed": [runs["resumed"]]}
    assert [(p.metric, p.x) for p in result.panels] == [(RETURN, "env_steps"), (RETURN, "time")]
    steps_panel, time_panel = result.panels
    for run_dir in dirs:
        run = load_run(run_dir)
        kept = [r for r, _ in stitch_resumed(_records(run_dir)) if RETURN in r]
        (line,) = [line for line in steps_panel.lines if line.run == run_dir]
        assert line.x.tolist() == [r["env_steps"] for r in kept]
        assert line.y.tolist() == [r[RETURN] for r in kept]
        (line,) = [line for line in time_panel.lines if line.run == run_dir]
        seconds = dict(zip(run.env_steps.tolist(), run.time.tolist(), strict=True))
        assert (line.x * time_panel.x_scale).tolist() == pytest.approx([seconds[r["env_steps"]] for r in kept])
    assert time_panel.x_unit == "seconds"
    # the seeds' median: bold, over the steps both runs cover, between the two curves
    (median,) = [line for line in steps_panel.lines if line.run is None]
    assert median.label == "seeds" and median.width > max(line.width for line in steps_panel.lines if line.run)
    seeds = [line for line in steps_panel.lines if line.label == "seeds" and line.run is not None]
    at = [np.interp(median.x, line.x, line.y) for line in seeds]
    assert median.y == pytest.approx(np.median(at, axis=0))


def test_plot_runs_metrics_labels_smoothing(runs: dict[str, Any], tmp_path: Path) -> None:
    from vecfast.trainers.tools.plot import plot_runs

    dirs = [runs["seed0"], runs["seed1"]]
    result = plot_runs(
        dirs, tmp_path / "c.png", metrics=["mean_episode_length", RETURN], x=["env_frames"], labels=["a", "b"]
    )
    assert [(p.metric, p.x) for p in result.panels] == [("mean_episode_length", "env_frames"), (RETURN, "env_frames")]
    assert result.groups == {"a": [runs["seed0"]], "b": [runs["seed1"]]}
    assert all(line.run is not None for p in result.panels for line in p.lines)  # one run a label: no median
    smoothed = plot_runs([runs["seed0"]], tmp_path / "s.png", x=["env_steps"], smooth_window=3)
    values = np.array([r[RETURN] for r in _records(runs["seed0"]) if RETURN in r])
    expected = [values[max(0, i - 2) : i + 1].mean() for i in range(len(values))]
    assert smoothed.panels[0].lines[0].y == pytest.approx(expected)
    with pytest.raises(ValueError, match="no run logged success; they logged: .*mean_episode_return"):
        plot_runs(dirs, tmp_path / "d.png", metrics=["success"])
    with pytest.raises(ValueError, match="2 labels for 1 runs"):
        plot_runs([runs["seed0"]], tmp_path / "d.png", labels=["a", "b"])


def test_env_metrics_are_drawn_by_default(runs: dict[str, Any], tmp_path: Path) -> None:
    """A run whose env reports success and SPL: both are drawn besides the return, the trainer's numbers not."""
    run_dir = tmp_path / "nav"
    run_dir.mkdir()
    records = [
        {**r, "success": i / 10, "spl": i / 20} for i, r in enumerate(r for r in _records(runs["seed0"]) if RETURN in r)
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    from vecfast.trainers.tools.plot import plot_runs

    result = plot_runs([run_dir], tmp_path / "nav.png", x=["env_steps"])
    assert [p.metric for p in result.panels] == [RETURN, "spl", "success"]
    assert result.panel("spl", "env_steps").lines[0].y.tolist() == [r["spl"] for r in records]


def test_cli_writes_png(runs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "figs" / "seeds.png"
    compact = sorted((runs["root"] / "compact").glob("seed*"))
    argv = ["plot", str(runs["seed0"]), str(runs["seed1"]), *map(str, compact), "--out", str(out), "--title", "T"]
    assert main(argv) == 0
    assert "wrote" in capsys.readouterr().out
    with PIL.open(out) as image:
        assert image.format == "PNG" and image.size == (1120, 390)  # 2 x axes x 5.6 in, 1 metric x 3.4 + 0.5 in
    assert main(["plot", str(runs["resumed"]), "--out", str(out), "--x", "time", "--metric", RETURN]) == 0
    with PIL.open(out) as image:
        assert image.size == (560, 390)


def test_cli_errors(runs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch) -> None:
    missing = tmp_path / "no_such_run"
    assert main(["plot", str(runs["seed0"]), str(missing), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vecfast plot: error: ") and str(missing) in err and "metrics.jsonl" in err
    assert "\n" not in err
    assert main(["plot", str(runs["root"] / "seeds"), "--out", str(tmp_path / "x.png")]) == 2
    assert "it holds runs: seed0, seed1" in capsys.readouterr().err
    assert main(["plot", str(runs["seed0"]), "--out", str(tmp_path / "x.png"), "--metric", "spl"]) == 2
    assert "no run logged spl" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert main(["plot", str(runs["seed0"]), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vecfast plot: error: plotting needs matplotlib") and err.count("\n") == 1
    assert err.endswith("pip install 'vecfast[plot]'\n")


def test_help_does_not_import_matplotlib() -> None:
    code = "import sys, vecfast.cli as c; c.build_parser(); print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_median_without_common_range() -> None:
    from vecfast.trainers.tools.plot import median_curve

    a = (np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    b = (np.array([2.0, 3.0]), np.array([1.0, 2.0]))
    assert median_curve([a, b]) is None
    c = (np.array([0.5, 3.0]), np.array([math.nan, 4.0]))  # NaNs are left out before the range is taken
    assert median_curve([a, c]) is None
